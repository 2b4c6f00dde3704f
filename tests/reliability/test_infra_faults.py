"""Infrastructure faults: a simulated user, a judge or a tool that is down, slow or answers garbage, over real HTTP
servers (users.StandInServer) and real MCP sessions. Each is a system error (retried, never scored) or, where the
fault is within what the harness absorbs, a normal graded episode; never a failure charged to the policy."""

import asyncio, json, threading, time
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec, UserSpec, Limits, RubricItem
from thinkingbox_training.backend import Domain
from thinkingbox_training.domains.demo import DemoBase, demo
from thinkingbox_training.episode import EpisodeRunner, AttemptRecord
from thinkingbox_training.grader import Grader, OpenAIJudge
from thinkingbox_training.policies import Generation, PolicyBase
from thinkingbox_training.users import StandInServer

infra = Domain('infra-faults', DemoBase, seed=demo.seed, policy='Test domain whose backend misbehaves on purpose.')
infra.tools.update(demo.tools)
infra._arg_models.update(demo._arg_models)
HANG = threading.Event()  # set at the end of the module: hung tool threads then finish


@infra.tool
def slow_lookup(ctx, account_id: str) -> dict:
    "A lookup that takes 3 s."
    time.sleep(3.0)
    return {'id': account_id}


@infra.tool
def hung_lookup(ctx, account_id: str) -> dict:
    "A lookup whose backend hangs."
    HANG.wait(60)
    return {}


@infra.tool
def broken_lookup(ctx, account_id: str) -> dict:
    "A lookup whose backend crashes."
    raise ConnectionError('database connection lost')


@infra.tool
def odd_lookup(ctx, account_id: str) -> dict:
    "A lookup returning a value JSON cannot hold as is."
    return {'id': account_id, 'at': object.__new__(type('Opaque', (), {'__repr__': lambda s: 'opaque'}))}


REPLAYS = []


@infra.tool
def mark(ctx, account_id: str) -> dict:
    "A golden-only call that records whether it runs on the thread of the event loop."
    REPLAYS.append(threading.current_thread() is threading.main_thread())
    return {}


@pytest.fixture(scope='module', autouse=True)
def release_hung_threads():
    yield
    HANG.set()


def call(name, **args):
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'


PAY = call('pay', account_id='AC-1', amount_cents=3000)


def task(uid='infra-faults/t/0', **kw):
    kw.setdefault('golden', [ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': 3000})])
    return Task(
        uid=uid,
        domain='infra-faults',
        family='t',
        split='train',
        query='Please pay 30.00 from AC-1.',
        reply='Paid.',
        user=UserSpec(facts={'account id': 'AC-1'}),
        **kw,
    )


class Says(PolicyBase):
    "A policy that says fixed texts turn by turn (the last one repeats); per task uid when given a dict."

    fmt, policy_id = None, 'says'

    def __init__(self, *texts, by_uid=None):
        self.texts, self.by_uid = texts, by_uid or {}

    async def generate(self, reqs):
        out = []
        for r in reqs:
            texts = self.by_uid.get(r.task.uid, self.texts)
            out.append(Generation(text=texts[min(r.turn, len(texts) - 1)] + '<|im_end|>'))
        return out


def run(policy, jobs, **kw):
    return asyncio.run(EpisodeRunner(policy, **kw).run(jobs))


def system_error(e, *words):
    tr = e.trajectory
    assert tr.status == 'system_error' and e.verdict.reward is None and AttemptRecord.from_episode(e).reward is None, tr
    for w in words:
        assert w in tr.system_error, tr.system_error
    return tr.system_error


# ---------- the simulated user ----------
def user_kw(srv_url, **kw):
    return {'base_url': srv_url, 'retries': 1, 'backoff_s': 0.01, **kw}


USER_FAULTS = {  # name: (StandInServer arguments, LLMUser arguments, words of the system error)
    'down': (None, {}, ['failed after 2 attempts', 'Connection']),
    'http_503': ({'fail_first': 10**6}, {}, ['failed after 2 attempts']),
    'content_null': ({'chat': lambda m: None}, {}, ['no message content']),
    'empty_choices': (
        {'chat': lambda m: {'id': 'c', 'object': 'chat.completion', 'created': 0, 'model': 'x', 'choices': []}},
        {},
        ['no message content'],
    ),
    'garbage_body': ({'chat': lambda m: b'\x00\xffnot json at all'}, {}, ['failed after 2 attempts']),
    'too_slow': ({'delay_s': 1.0}, {'timeout_s': 0.2}, ['failed after 2 attempts', 'Timeout']),
}


@pytest.mark.parametrize('fault', list(USER_FAULTS))
def test_user_endpoint_fault_is_a_system_error(fault):
    srv_kw, kw, words = USER_FAULTS[fault]
    if srv_kw is None:
        [e] = run(
            Says('Which account id should I use?'),
            [(task(), 0)],
            user='openai:m',
            user_kw=user_kw('http://127.0.0.1:9/v1', **kw),
        )
    else:
        with StandInServer(**srv_kw) as srv:
            [e] = run(
                Says('Which account id should I use?'),
                [(task(), 0)],
                user='openai:m',
                user_kw=user_kw(srv.base_url, **kw),
            )
    system_error(e, *words)
    assert e.trajectory.termination == 'system_error'


def test_user_that_fails_once_is_retried_through():
    with StandInServer(fail_first=1) as srv:
        [e] = run(
            Says('Which account id should I use?', PAY, 'Paid.'),
            [(task(), 0)],
            user='openai:m',
            user_kw=user_kw(srv.base_url),
        )
    assert (e.trajectory.status, e.reward, e.trajectory.messages[3]['content']) == ('ok', 1, 'My account id is AC-1.')


def test_slow_user_charges_no_other_episode_and_its_own_overrun_is_a_system_error():
    # 1.2 s per user reply against a 3 s wall clock. A and B alternate: while one waits for its user, the other calls a
    # tool and then waits for the step. A's own time is two replies (2.4 s): graded, it paid. B asks three times before
    # its last turn (3.6 s of its own): the guard stops it as a system error, never as a failure of the policy.
    ask, look = 'Which account id should I use?', call('get_account', account_id='AC-1')
    pol = Says(
        by_uid={
            'infra-faults/t/a': [look, ask, PAY, 'Paid.'],
            'infra-faults/t/b': [ask, look, ask, look, ask, PAY, 'Paid.'],
        }
    )
    lim = Limits(max_turns=10, wall_clock_s=3.0)
    with StandInServer(delay_s=1.2) as srv:
        a, b = run(
            pol,
            [(task('infra-faults/t/a', limits=lim), 0), (task('infra-faults/t/b', limits=lim), 0)],
            user='openai:m',
            user_kw=user_kw(srv.base_url),
        )
    assert (a.trajectory.status, a.trajectory.termination, a.reward) == ('ok', 'user_stop', 1), (
        a.trajectory.system_error
    )
    assert a.trajectory.wall_s > 3.0 > a.trajectory.own_s  # its clock left out the time it waited for B's user
    assert (b.trajectory.status, b.trajectory.termination) == ('system_error', 'wall_clock') and b.reward is None
    assert 'over its 3s guard' in b.trajectory.system_error


# ---------- the judge ----------
RUBRIC = [RubricItem(question='Does the agent confirm the payment?')]


def judge_task():
    return task('infra-faults/t/judged', rubric=RUBRIC)


def judge_answer(text):
    return lambda messages: text


# name: (StandInServer arguments or None for a closed port, judge arguments, words of the system error)
JUDGE_FAULTS = {
    'down': (None, {}, ['grading failed', 'APIConnectionError']),
    'http_500': ({'fail_first': 10**6}, {}, ['grading failed']),
    'garbage_answer': ({'chat': judge_answer('maybe, it depends')}, {}, ['grading failed', 'not yes/no']),
    'empty_answer': ({'chat': judge_answer('')}, {}, ['grading failed', 'not yes/no']),
    'content_null': ({'chat': judge_answer(None)}, {}, ['grading failed', 'no message content']),
    'empty_choices': (
        {'chat': lambda m: {'id': 'c', 'object': 'chat.completion', 'created': 0, 'model': 'x', 'choices': []}},
        {},
        ['grading failed'],
    ),
    'garbage_body': ({'chat': lambda m: b'<html>502 Bad Gateway</html>'}, {}, ['grading failed']),
    'timeout': ({'delay_s': 1.0}, {'timeout_s': 0.2}, ['grading failed', 'Timeout']),
}


@pytest.mark.parametrize('fault', list(JUDGE_FAULTS))
def test_judge_fault_after_the_episode_is_a_system_error(fault):
    srv_kw, kw, words = JUDGE_FAULTS[fault]

    def go(url):
        judge = OpenAIJudge(model='m', base_url=url, max_retries=0, **kw)
        return run(Says(PAY, 'Paid.'), [(judge_task(), 0)], grader=Grader(judge=judge))

    if srv_kw is None:
        [e] = go('http://127.0.0.1:9/v1')
    else:
        with StandInServer(**srv_kw) as srv:
            [e] = go(srv.base_url)
    system_error(e, *words)
    assert e.trajectory.termination == 'agent_done'  # the episode itself ended cleanly; its grading failed


@pytest.mark.parametrize('answer, reward', [('Yes.', 1), ('no', 0)])
def test_a_working_judge_grades(answer, reward):
    with StandInServer(chat=judge_answer(answer)) as srv:
        [e] = run(
            Says(PAY, 'Paid.'), [(judge_task(), 0)], grader=Grader(judge=OpenAIJudge(model='m', base_url=srv.base_url))
        )
    assert (e.trajectory.status, e.reward, e.trajectory.usage['judge'].calls) == ('ok', reward, 1)


def test_a_rubric_without_a_judge_is_a_configuration_error_before_any_episode():
    with pytest.raises(ValueError, match='has a rubric but no judge is configured'):
        run(Says(PAY, 'Paid.'), [(judge_task(), 0)], grader=Grader(judge=None))


def test_a_golden_call_that_fails_on_replay_is_a_system_error_naming_it():
    bad = task(
        'infra-faults/t/defective',
        golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-404', 'amount_cents': 1})],
    )
    [e] = run(Says(PAY, 'Paid.'), [(bad, 0)])
    system_error(e, 'grading failed', 'DefectiveTask', 'golden[0]', 'AC-404')


def test_grading_replays_the_golden_calls_off_the_event_loop():
    # the expected state replays the golden calls once per task: on a worker thread, not blocking other episodes
    t = task('infra-faults/t/replay', golden=[ToolCallSpec(name='mark', arguments={'account_id': 'AC-1'})])
    [e] = run(Says('Done.'), [(t, 0)])
    assert REPLAYS == [False] and (e.trajectory.status, e.reward) == ('ok', 1)


# ---------- tools ----------
@pytest.mark.parametrize(
    'tool, words', [('hung_lookup', ['timed out after 0.3s']), ('broken_lookup', ['ConnectionError'])]
)
def test_tool_hang_or_crash_is_a_system_error(tool, words):
    [e] = run(Says(call(tool, account_id='AC-1'), 'Done.'), [(task(), 0)], tool_timeout_s=0.3)
    system_error(e, *words)


def test_a_tool_result_json_cannot_hold_is_shown_as_text():
    [e] = run(Says(call('odd_lookup', account_id='AC-1'), PAY, 'Paid.'), [(task(), 0)])
    assert (e.trajectory.status, e.reward) == ('ok', 1) and 'opaque' in e.trajectory.messages[3]['content']


def test_slow_tool_past_the_wall_clock_is_a_system_error_not_a_failure():
    # a 3 s tool against a 2 s wall clock (the tool's own limit, 10 s, is not hit): infrastructure, never scored
    [e] = run(Says(call('slow_lookup', account_id='AC-1'), PAY, 'Paid.'), [(task(limits=Limits(wall_clock_s=2.0)), 0)])
    system_error(e, 'wall clock', 'over its 2s guard')
    assert e.trajectory.termination == 'wall_clock'


def test_hung_tools_do_not_starve_later_calls():
    # 66 episodes whose first call hangs (more than the 64 tool threads): every call's limit holds, and an episode
    # after them still runs its tools. Before: the 65th and 66th waited for a free thread with no limit at all.
    hung = [(task(f'infra-faults/hung/{i}'), 0) for i in range(66)]
    pol = Says(
        by_uid={
            **{t.uid: [call('hung_lookup', account_id='AC-1')] for t, _ in hung},
            'infra-faults/t/0': [PAY, 'Paid.'],
        }
    )

    async def go():
        r = EpisodeRunner(pol, tool_timeout_s=0.5, concurrency=80)
        eps = await asyncio.wait_for(r.run(hung), 30)
        return eps, await asyncio.wait_for(r.run([(task(), 0)]), 10)

    t0 = time.perf_counter()
    eps, [after] = asyncio.run(go())
    assert all('timed out after 0.5s' in (e.trajectory.system_error or '') for e in eps)
    assert max(e.trajectory.wall_s for e in eps) < 5 and time.perf_counter() - t0 < 15
    assert (after.trajectory.status, after.reward) == ('ok', 1)


def test_a_policy_that_fails_is_a_system_error():
    class Broken(PolicyBase):
        fmt, policy_id = None, 'broken'

        async def generate(self, reqs):
            raise RuntimeError('CUDA error: device-side assert')

    [e] = run(Broken(), [(task(), 0)])
    system_error(e, 'policy failed', 'device-side assert')
