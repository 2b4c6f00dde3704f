"""The shared hostile calls (`hostile_calls.py`) through our tool sessions (in process and over MCP), the episode
engine and a campaign on both transports: each is the agent's failed call, nothing is committed, a good call still
succeeds, and an episode that meets one is scored (never a system error) and stored."""

import asyncio, json
import pytest
from hostile_calls import CASES, GOOD, HOSTILE, RESERVED, TASK, WIRE, call_text, check_failed, notes
from thinkingbox_training.campaigns import campaign_records, run_campaign
from thinkingbox_training.episode import AttemptRecord, EpisodeRunner
from thinkingbox_training.policies import Generation
from thinkingbox_training.tasks import get_domain
from thinkingbox_training.tools import tool_session

TRANSPORTS = ('inprocess', 'mcp')


async def session_calls(transport: str) -> dict:
    "Every hostile call on one session: {case: (text, is_error, system_error, notes after)}, then the listing."
    out = {}
    with get_domain('hostile').provision(TASK) as db:
        async with tool_session(db, transport=transport) as ts:
            listed = [s['function']['name'] for s in await ts.tool_specs()]
            for c in HOSTILE:
                r = await ts.call(c.tool, c.arguments)
                out[c.id] = (r.text, r.is_error, r.system_error, notes(db))
            good = await ts.call(*GOOD)
            out['(good)'] = (good.text, good.is_error, good.system_error, notes(db))
            out['(session)'] = ts.system_error
    return out, listed


_SESSIONS = {}


def sessions(transport):
    if transport not in _SESSIONS:
        _SESSIONS[transport] = asyncio.run(session_calls(transport))
    return _SESSIONS[transport]


@pytest.mark.parametrize('transport', TRANSPORTS)
@pytest.mark.parametrize('case', list(CASES))
def test_a_hostile_call_is_the_agents_failed_call_and_commits_nothing(case, transport):
    out, _ = sessions(transport)
    text, is_error, system_error, after = out[case]
    check_failed(CASES[case], text, is_error, system_error)
    assert after == [], (case, after)  # a tool that wrote, then raised or exited: rolled back


@pytest.mark.parametrize('transport', TRANSPORTS)
def test_after_every_hostile_call_the_session_still_serves_and_lists_no_reserved_tool(transport):
    out, listed = sessions(transport)
    assert out['(good)'][1:] == (False, None, ['hello']) and out['(session)'] is None
    assert not [n for n in listed if n.startswith('__reserved__')] and 'add_note' in listed


class Writes:
    "A policy that writes, per task, its hostile call, then a final answer."

    fmt, policy_id = None, 'writes'

    def __init__(self, texts: dict):
        self.texts = texts

    async def generate(self, reqs):
        return [Generation(text=(self.texts[r.task.uid] if r.turn == 0 else 'Noted.') + '<|im_end|>') for r in reqs]


def case_task(case):
    return TASK.model_copy(update={'uid': f'hostile/{case}'})


_EPISODES = {}


def episodes(transport):
    "One run of every case the parser can read (all that JSON carries), each its own task, on `transport`."
    if transport not in _EPISODES:
        policy = Writes({f'hostile/{c}': call_text(CASES[c]) for c in WIRE})
        eps = EpisodeRunner(policy, tool_transport=transport).run_sync([(case_task(c), 0) for c in WIRE])
        _EPISODES[transport] = {e.task.uid.split('/', 1)[1]: e for e in eps}
    return _EPISODES[transport]


@pytest.mark.parametrize('transport', TRANSPORTS)
@pytest.mark.parametrize('case', WIRE)
def test_an_episode_meeting_a_hostile_call_is_scored_and_stored(case, transport):
    e = episodes(transport)[case]
    tr = e.trajectory
    assert (tr.status, tr.termination, tr.system_error, e.reward) == ('ok', 'agent_done', None, 0), tr.system_error
    tool = tr.messages[3]
    assert tool['role'] == 'tool' and tool['content'], tr.messages[2:4]
    assert json.loads(AttemptRecord.from_episode(e).model_dump_json())['reward'] == 0  # its record can be stored


def test_a_tool_that_exits_does_not_end_a_campaign(tmp_path):
    "Two tasks, one whose call exits the process: the campaign stores both attempts, neither a system error."
    tasks = [case_task('tool_exits'), case_task('extra_argument')]
    policy = Writes({t.uid: call_text(CASES[t.uid.split('/', 1)[1]]) for t in tasks})
    left = run_campaign(tmp_path / 'c', tasks, policy, k=1, progress=False)
    recs = campaign_records(tmp_path / 'c')
    assert sorted((r['task_uid'], r['status'], r['reward']) for r in recs) == [
        ('hostile/extra_argument', 'ok', 0),
        ('hostile/tool_exits', 'ok', 0),
    ], left
    assert [r['agent_exceptions'] for r in recs if r['task_uid'] == 'hostile/tool_exits'] == [{'exits': 1}]


def test_reserved_names_cover_thinkingbox_reserved_tools():
    assert {'__reserved__init', '__reserved__geteffects'} <= set(RESERVED)
