"Fault injection and concurrency of the rollout engine: system errors are infrastructure failures and nothing else."

import asyncio, time
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec, Limits
from thinkingbox_training.backend import Domain
from thinkingbox_training.domains.demo import DemoBase, demo
from thinkingbox_training.episode import EpisodeRunner, AttemptRecord
from thinkingbox_training.policies import Generation, PolicyBase, ScriptedPolicy
from thinkingbox_training.users import StandInServer

faulty = Domain('faulty', DemoBase, seed=demo.seed, policy='Test domain with a broken backend.')
faulty.tools.update(demo.tools)
faulty._arg_models.update(demo._arg_models)


@faulty.tool
def slow_lookup(ctx, account_id: str) -> dict:
    "A lookup whose backend hangs."
    time.sleep(1.0)
    return {}


@faulty.tool
def broken_lookup(ctx, account_id: str) -> dict:
    "A lookup whose backend crashes."
    raise ConnectionError('database connection lost')


def task(uid='faulty/t/0', golden=(('pay', {'account_id': 'AC-1', 'amount_cents': 3000}),), **kw):
    return Task(
        uid=uid,
        domain='faulty',
        family='t',
        split='train',
        query='Please pay 30.00 from AC-1.',
        golden=[ToolCallSpec(name=n, arguments=a) for n, a in golden],
        reply='Paid.',
        **kw,
    )


class Says(PolicyBase):
    "A policy that says fixed texts, turn by turn (the last one repeats)."

    fmt = None

    def __init__(self, *texts):
        self.texts, self.policy_id = texts, 'says'

    async def generate(self, reqs):
        return [Generation(text=self.texts[min(r.turn, len(self.texts) - 1)] + '<|im_end|>') for r in reqs]


def call(name, **args):
    import json

    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


def run(policy, jobs, **kw):
    return asyncio.run(EpisodeRunner(policy, **kw).run(jobs))


def test_tool_timeout_is_a_system_error_not_a_failure():
    [e] = run(Says(call('slow_lookup', account_id='AC-1')), [(task(), 0)], tool_timeout_s=0.05)
    assert e.trajectory.status == 'system_error' and e.verdict.reward is None
    assert e.trajectory.system_error == 'tool slow_lookup timed out after 0.05s'
    assert AttemptRecord.from_episode(e).reward is None


def test_backend_crash_is_a_system_error():
    [e] = run(Says(call('broken_lookup', account_id='AC-1')), [(task(), 0)])
    assert e.trajectory.status == 'system_error'
    assert 'ConnectionError: database connection lost' in e.trajectory.system_error


def test_user_endpoint_down_is_a_system_error():
    with StandInServer(fail_first=10**6) as srv:
        [e] = run(
            Says('Which account?'),
            [(task(), 0)],
            user='openai:stand-in',
            user_kw={'base_url': srv.base_url, 'retries': 1, 'backoff_s': 0.01},
        )
    assert e.trajectory.status == 'system_error' and 'failed after 2 attempts' in e.trajectory.system_error


def test_policy_crash_is_a_system_error():
    class Broken(PolicyBase):
        fmt, policy_id = None, 'broken'

        async def generate(self, reqs):
            raise RuntimeError('CUDA out of memory')

    [e] = run(Broken(), [(task(), 0)])
    assert e.trajectory.status == 'system_error' and 'CUDA out of memory' in e.trajectory.system_error


@pytest.mark.parametrize(
    'texts, status, termination',
    [
        ((call('pay', account_id='AC-1', amount_cents=3000), 'Paid.'), 'ok', 'agent_done'),  # right
        # bad JSON
        (('<tool_call>\n{"name": "pay", "arguments": {"account_id": }\n</tool_call>', 'Paid.'), 'ok', 'agent_done'),
        ((call('teleport', to='moon'), 'Done.'), 'ok', 'agent_done'),  # unknown tool
        # refused by the domain
        ((call('pay', account_id='AC-2', amount_cents=90000), 'Done.'), 'ok', 'agent_done'),
        ((call('pay', account_id='AC-1', amount_cents='lots'), 'Done.'), 'ok', 'agent_done'),  # untypable argument
        ((call('get_account', account_id='AC-1'),), 'truncated', 'turn_limit'),  # never finishes
        (('Shall I pay?',), 'truncated', 'turn_limit'),  # keeps asking
    ],
)
def test_agent_mistakes_and_budgets_are_never_system_errors(texts, status, termination):
    [e] = run(Says(*texts), [(task(limits=Limits(max_turns=4)), 0)])
    assert (e.trajectory.status, e.trajectory.termination) == (status, termination)
    assert e.verdict.system_error is None
    assert e.verdict.reward == (1 if texts[0] == call('pay', account_id='AC-1', amount_cents=3000) else 0)


def test_malformed_calls_are_shown_to_the_agent_and_counted():
    [e] = run(Says(call('teleport', to='moon'), 'Done.'), [(task(), 0)])
    assert e.trajectory.malformed_calls == 1
    tool_msgs = [m for m in e.trajectory.messages if m['role'] == 'tool']
    assert tool_msgs and 'teleport' in tool_msgs[0]['content']


def test_many_concurrent_episodes_with_mixed_outcomes_are_each_graded_on_their_own_state():
    pol = ScriptedPolicy(flaw=0.4, seed=3)
    t = task(uid='faulty/t/1')
    jobs = [(t, r) for r in range(96)]
    eps = run(pol, jobs, concurrency=64)
    assert [e.repetition for e in eps] == list(range(96))
    assert [e.reward for e in eps] == [0 if pol.flawed(t, r) else 1 for r in range(96)]
    assert 0 < sum(e.reward for e in eps) < 96
    assert all(e.trajectory.status == 'ok' for e in eps)


def test_an_object_without_the_policy_interface_is_refused_by_the_engine():
    "The engine calls the typed `Policy` interface and probes for nothing: a policy that lacks part of it is refused."
    from thinkingbox_training.policies import Policy

    class Partial:  # generate and an id, but no fmt, sampling, decoder, release or reset_cache
        policy_id = 'partial'

        async def generate(self, reqs):
            return [Generation(text='Done.<|im_end|>') for _ in reqs]

    assert not isinstance(Partial(), Policy) and isinstance(Says('x'), Policy)
    with pytest.raises(TypeError, match='Partial is not a Policy'):
        EpisodeRunner(Partial())
