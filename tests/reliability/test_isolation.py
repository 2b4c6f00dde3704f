"""Isolation and leakage: concurrent episodes end each in exactly its own state; a task is provisioned and graded
from its own data (not another task's with the same uid); verdict reasons come out in one order in every process;
nothing the grader keeps (reply, rubric, tags, the user's private context) reaches what the policy sees."""

import asyncio, json, os, random, subprocess, sys
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec, RubricItem, generate_tasks, get_domain
from thinkingbox_training.backend import canonical_state
from thinkingbox_training.grader import Grader, RuleJudge, expected_state
from thinkingbox_training.tools import ToolSession

TASKS = generate_tasks('travel', 'bench', seed=1, n=6) + generate_tasks('retail', 'bench', seed=1, n=5)  # 72 + 70
GRADER = Grader(judge=RuleJudge())


async def _expert_episode(task, rng):
    "The golden calls through MCP, interleaved with the other episodes' at random points; the final canonical state."
    dom = get_domain(task.domain)
    with dom.provision(task) as db:
        async with ToolSession(db) as ts:
            for c in task.golden:
                await asyncio.sleep(rng.random() / 500)
                r = await ts.call(c.name, c.arguments)
                assert not r.is_error, (task.uid, r.text)
        v = await GRADER.grade(task, db, final_message=task.reply)
        return v, canonical_state(dom, db.snapshot(), dom.template(task).initial)


@pytest.mark.parametrize('wave', [0, 1])
def test_64_concurrent_expert_episodes_each_end_in_exactly_their_own_state(wave):
    "Two waves of 64 (128 episodes of 128 distinct tasks of both domains)."
    tasks = TASKS[wave * 64 : (wave + 1) * 64]
    assert len(tasks) == 64 and len({t.domain for t in tasks}) >= 1

    async def main():
        return await asyncio.gather(*[_expert_episode(t, random.Random(i)) for i, t in enumerate(tasks)])

    for t, (v, state) in zip(tasks, asyncio.run(main())):
        assert v.reward == 1, (t.uid, v.explain())
        assert state == expected_state(t), t.uid


def test_two_waves_cover_both_domains():
    assert {t.domain for t in TASKS[:128]} == {'travel', 'retail'}


def test_same_uid_other_init_is_provisioned_and_graded_from_its_own_data():
    "The template cache was keyed by uid: the second task got the first one's database."
    demo = get_domain('demo')
    a = Task(
        uid='demo/same/0',
        domain='demo',
        family='same',
        split='train',
        query='q',
        init={'account': [{'id': 'AC-1', 'balance_cents': 111}]},
        golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': 11})],
    )
    b = a.model_copy(update={'init': {'account': [{'id': 'AC-1', 'balance_cents': 999}]}})
    with demo.provision(a):
        pass
    with demo.provision(b) as db_:
        assert {r['id']: r['balance_cents'] for r in db_.snapshot()['account']}['AC-1'] == 999
    assert expected_state(a)['account']['AC-1']['balance_cents'] == 100
    assert expected_state(b)['account']['AC-1']['balance_cents'] == 988

    async def graded(task, amount):
        with demo.provision(task) as db:
            db.run_tool('pay', {'account_id': 'AC-1', 'amount_cents': amount})
            return await GRADER.grade(task, db)

    assert asyncio.run(graded(b, 11)).reward == 1 and asyncio.run(graded(a, 11)).reward == 1


def test_same_uid_other_golden_has_its_own_expected_state():
    get_domain('demo')
    a = Task(
        uid='demo/same/1',
        domain='demo',
        family='same',
        split='train',
        query='q',
        golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': 5})],
    )
    b = a.model_copy(update={'golden': [ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': 7})]})
    assert expected_state(a)['account']['AC-1']['balance_cents'] == 9995
    assert expected_state(b)['account']['AC-1']['balance_cents'] == 9993


REASONS = """
import asyncio, json
from thinkingbox_training.tasks import generate_tasks, get_domain
from thinkingbox_training.grader import Grader, RuleJudge
t = next(t for t in generate_tasks('travel', 'bench', seed=1, n=1) if t.family == 'group_rebooking')
async def main():
    dom = get_domain('travel')
    with dom.provision(t) as db:  # a wrong path that touches many tables: every change, no approval
        for c in t.golden:
            if c.name != 'request_approval': db.run_tool(c.name, c.arguments)
        db.run_tool('open_ticket', {'booking_id': t.golden[0].arguments['booking_id'], 'category': 'other',
                                    'summary': 'a ticket nobody asked for'})
        return (await Grader(judge=RuleJudge()).grade(t, db)).reasons
print(json.dumps(asyncio.run(main())))
"""


def test_stored_reasons_come_out_in_one_order_in_every_process():
    "Reasons were ordered by iterating a set of table names: hash seeds 1 and 2 gave the two tables in opposite orders."
    outs = []
    for seed in ('1', '2'):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, '-c', REASONS], env=env, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert len({t.split(':')[0].split('[')[0] for t in outs[0]}) >= 2, outs[0]  # reasons in two tables or more
    assert outs[0] == outs[1]


CANARY = 'CANARY-7f3a9'


def _with_canaries(task) -> Task:
    return task.model_copy(
        update={
            'reply': task.reply + f' {CANARY}-reply',
            'tags': task.tags + [f'{CANARY}-tag'],
            'rubric': [
                RubricItem(
                    question=f'Does the agent say {CANARY}-question?',
                    require=[f'{CANARY}-require'],
                    forbid=[f'{CANARY}-forbid'],
                )
            ],
            'user': task.user.model_copy(update={'context': task.user.context + f' {CANARY}-context'}),
        }
    )


@pytest.mark.parametrize(
    'family', ['cancel_within_window', 'duplicate_charge', 'return_in_window', 'order_status_question']
)
def test_canaries_in_reply_rubric_tags_and_context_never_reach_the_policy(family):
    "All the policy is given (messages, tool specs, tool results, user turns) is free of the task's private fields."
    from thinkingbox_training.episode import EpisodeRunner
    from thinkingbox_training.policies import ScriptedPolicy

    domain = 'travel' if family in get_domain('travel').families else 'retail'
    task = _with_canaries(next(t for t in generate_tasks(domain, 'bench', seed=1, n=1) if t.family == family))
    seen = []

    class Recording(ScriptedPolicy):
        async def generate(self, requests):
            seen.extend(
                json.dumps({'messages': r.messages, 'tools': r.tools, 'prompt_ids': r.prompt_ids}) for r in requests
            )
            return await super().generate(requests)

    eps = asyncio.run(EpisodeRunner(Recording()).run([(task, 0)]))
    assert seen and eps[0].trajectory.status == 'ok'
    assert not [s for s in seen if CANARY in s]
    # the transcript up to the agent's final message (which is the reference reply, canary included) is clean too
    before_final = json.dumps(eps[0].trajectory.messages[:-1])
    assert CANARY not in before_final
