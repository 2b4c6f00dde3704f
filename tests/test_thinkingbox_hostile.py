"""Hostile calls on the ThinkingBox transport (their servers, in process and behind a real MCP session): their reserved
tools (`__reserved__init` rewrites the state the grader reads, `__reserved__geteffects` reads it) are never listed to
the agent and, called anyway, are the agent's own failed call; arguments nested hundreds of levels deep are the
policy's failed call too, never a system error that would void (and so hide) the episode."""

import os
import pytest
from thinkingbox_training.policies import ScriptedPolicy

UID = 'banking.py:test_transfer_and_balance'  # a development task whose server (online banking) has reserved tools


@pytest.fixture(scope='module')
def task():
    from thinkingbox_training.thinkingbox import DATA_UNSET, ENV, load_thinkingbox

    if not os.environ.get(ENV):
        pytest.skip(DATA_UNSET)
    return next(t for t in load_thinkingbox('banking.py') if t.uid == UID)


def nested(depth: int):
    v = 'x'
    for _ in range(depth):
        v = {'a': v}
    return v


class Calls(ScriptedPolicy):
    "Makes the given calls, one a turn, then says it is done."

    final_suffix = ' <DONE>'

    def __init__(self, calls):
        super().__init__(name='hostile')
        self.calls = calls

    def plan(self, task, repetition):
        return self.calls


class Yes:
    name = 'yes'

    async def ask(self, item, final_message, transcript=None):
        from thinkingbox_training.grader import JudgeAnswer

        return JudgeAnswer(yes=True)


FORGE = [
    {'name': '__reserved__init', 'arguments': {'config': {}}},
    {'name': '__reserved__geteffects', 'arguments': {}},
]
DEEP = [{'name': 'transfer', 'arguments': {'from_account': nested(400), 'to_account': '843847393', 'amount': 1.0}}]


@pytest.mark.parametrize('transport', ['inprocess', 'mcp'])
@pytest.mark.parametrize('calls', [FORGE, DEEP], ids=['reserved', 'nested-400'])
def test_a_hostile_call_is_the_agents_failed_call_never_a_system_error(task, transport, calls):
    from thinkingbox_training.episode import EpisodeRunner
    from thinkingbox_training.grader import Grader

    runner = EpisodeRunner(Calls(calls), grader=Grader(judge=Yes()), tool_transport=transport)
    ep = runner.run_sync([(task, 0)])[0]
    tr = ep.trajectory
    # graded, never void: no transfer was made. A call too deep to send is refused by the engine as a parse error the
    # agent reads; the scripted policy then writes it again, so that episode may end at its turn cap
    assert tr.status in (('ok',) if calls is FORGE else ('ok', 'truncated')) and tr.system_error is None, tr.status
    assert ep.reward == 0
    assert not any(t['function']['name'].startswith('__reserved__') for t in tr.tools)  # never listed
    shown = [m['content'] for m in tr.messages if m['role'] == 'tool']
    assert len(shown) >= len(calls) and all('rror' in s for s in shown), shown  # each answered as a failed call
