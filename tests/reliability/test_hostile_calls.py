"""The shared hostile calls (`hostile_calls.py`) through our tool sessions (in process and over MCP), the episode
engine and a campaign on both transports: each is the agent's failed call, nothing is committed, a good call still
succeeds, and an episode that meets one is scored (never a system error) and stored."""

import asyncio, json
import pytest
from hostile_calls import CASES, GOOD, HOSTILE, RESERVED, RESERVED_PREFIX, TASK, WIRE, call_text, check_failed, notes
from thinkingbox_training.campaigns import campaign_records, run_campaign
from thinkingbox_training.episode import AttemptRecord, EpisodeRunner
from thinkingbox_training.policies import Generation, PolicyBase
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
    assert not [n for n in listed if n.startswith(RESERVED_PREFIX)] and 'add_note' in listed


class Writes(PolicyBase):
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


# ---------------------------------------------------------------- TRL's environment_factory


def trl_env():
    from thinkingbox_training.ecosystem import environment_class

    return environment_class('hostile', [TASK])()


def test_trl_environment_exposes_tools_named_like_its_attributes_and_no_reserved_one():
    import inspect

    e = trl_env()
    # what TRL 1.16 takes as the environment's tools: the class's public functions but reset and get_reward
    tools = {n for n, _ in inspect.getmembers(type(e), inspect.isfunction) if not n.startswith('_')} - {'reset'}
    assert tools == set(get_domain('hostile').tools) | {'ask_customer'}
    e.reset(task_uid=TASK.uid)
    assert [asyncio.run(getattr(e, n)()) for n in ('user', 'tasks', 'task', 'domain')] == [
        'the user tool',
        'the tasks tool',
        'the task tool',
        'the domain tool',
    ]
    assert e._system_error is None and e._task is TASK


def test_trl_environment_before_reset_answers_and_never_raises():
    from thinkingbox_training.ecosystem import verdict_reward

    e = trl_env()
    said = [asyncio.run(e.add_note(text='hello')), asyncio.run(e.ask_customer(message='Hi?'))]
    assert all(s.startswith('Error: no episode is running') for s in said), said
    assert asyncio.run(verdict_reward([[{'role': 'assistant', 'content': 'Noted.'}]], environments=[e])) == [None]


@pytest.mark.parametrize('case', [c.id for c in HOSTILE if isinstance(c.arguments, dict)])
def test_trl_environment_a_hostile_call_is_the_models_failed_call(case):
    "As TRL calls a tool (`method(**arguments)`): a text the model reads, no exception, nothing committed."
    c, e = CASES[case], trl_env()
    e.reset(task_uid=TASK.uid)
    method = getattr(e, c.tool, None) if not c.tool.startswith('_') else None
    if method is None:  # TRL finds no such tool: it answers 'Tool ... not found' itself
        assert c.tool not in dir(type(e)) or c.tool.startswith('__'), c.tool
        return
    text = asyncio.run(method(**c.arguments))
    check_failed(c, text, e._ts.calls[-1].is_error, e._system_error)
    assert notes(e._db) == []
    assert asyncio.run(e.add_note(text='hello')) == '{"ok": true}' and notes(e._db) == ['hello']


def test_trl_environment_a_failed_reset_leaves_the_episode_as_it_was():
    e = trl_env()
    e.reset(task_uid=TASK.uid)
    asyncio.run(e.add_note(text='hello'))
    for bad in ('hostile/nope', '', None):
        with pytest.raises(KeyError, match='is not one of the 1 tasks'):
            e.reset(task_uid=bad)
    assert e._task is TASK and notes(e._db) == ['hello'] and asyncio.run(e.task()) == 'the task tool'
