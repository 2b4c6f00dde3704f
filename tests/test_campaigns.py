"Campaigns survive being killed: a real `tbt evaluate` process is SIGKILLed mid-way and the same command resumes it."

import json, signal, sqlite3, subprocess, sys, time
from pathlib import Path
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec, write_tasks
from thinkingbox_training.campaigns import AttemptStore, CampaignError, load_campaign, run_campaign
from thinkingbox_training.episode import AttemptRecord
from thinkingbox_training.metrics import CampaignIncomplete

ROOT = Path(__file__).resolve().parents[1]


def demo_tasks(n=30):
    return [
        Task(
            uid=f'demo/pay/{i:03d}',
            domain='demo',
            family='pay',
            split='bench',
            query=f'Pay {i + 1} cents from AC-1.',
            reply='Paid.',
            golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': i + 1})],
        )
        for i in range(n)
    ]


def tbt(*args, **kw):
    code = 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
    return subprocess.Popen(
        [sys.executable, '-c', code, *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw
    )


def count(db):
    try:
        with sqlite3.connect(db) as c:
            return c.execute('SELECT count(*) FROM attempts').fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def test_killed_campaign_resumes_to_the_same_result(tmp_path):
    tasks = tmp_path / 'tasks.jsonl'
    write_tasks(demo_tasks(20), tasks)
    args = [
        'evaluate',
        '--tasks',
        str(tasks),
        '--policy',
        'scripted:flaw=0.3',
        '--k',
        '6',
        '--concurrency',
        '4',
        '--quiet',
    ]
    # uninterrupted reference
    ref = tbt(*args, '--out', str(tmp_path / 'ref'))
    ref.communicate(timeout=300)
    assert ref.returncode == 0
    # killed mid-way, then resumed by the same command
    out = tmp_path / 'killed'
    p = tbt(*args, '--out', str(out))
    t0 = time.time()
    while count(out / 'attempts.sqlite') < 30 and time.time() - t0 < 120 and p.poll() is None:
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    n_before = count(out / 'attempts.sqlite')
    assert 0 < n_before < 120, n_before
    r = tbt(*args, '--out', str(out))
    o, e = r.communicate(timeout=300)
    assert r.returncode == 0, e
    s = AttemptStore(out / 'attempts.sqlite')
    inv = s.invocations('killed')
    recs = s.records('killed')
    # none lost, none duplicated
    assert len(recs) == 120 and len({(x['task_uid'], x['repetition']) for x in recs}) == 120
    assert sum(i['executed'] for i in inv) == 120  # none re-run
    assert inv[0]['executed'] == n_before and not inv[0]['finished'] and inv[-1]['finished']
    a, b = load_campaign(tmp_path / 'ref'), load_campaign(out)
    assert a.rewards.tolist() == b.rewards.tolist() and 0 < a.rewards.mean() < 1
    cli = 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
    agg = subprocess.run(
        [sys.executable, '-c', cli, 'aggregate', str(out), '--json'], cwd=ROOT, capture_output=True, text=True
    )
    assert agg.returncode == 0, agg.stderr
    assert abs(json.loads(agg.stdout)['summary']['pass@1'] - a.rewards.mean()) < 1e-12


def test_a_clean_attempt_is_never_overwritten_and_another_campaign_is_refused(tmp_path):
    ts = demo_tasks(3)
    run_campaign(tmp_path / 'c', ts, 'scripted', k=2, progress=False)
    s = AttemptStore(tmp_path / 'c' / 'attempts.sqlite')
    rec = AttemptRecord(**s.records('c')[0])
    with pytest.raises(ValueError, match='already stored'):
        s.put(rec, s.begin('c'))
    with pytest.raises(CampaignError, match=r'holds another campaign \(k: stored 2, now 3\)'):
        run_campaign(tmp_path / 'c', ts, 'scripted', k=3, progress=False)


def test_system_errors_are_retried_then_left_visible_and_block_the_numbers(tmp_path):
    from thinkingbox_training.policies import ScriptedPolicy

    class Flaky(ScriptedPolicy):
        "Fails every generation of repetition 1 (an endpoint that is down for those requests)."

        async def generate(self, reqs):
            if any(r.repetition == 1 for r in reqs):
                raise ConnectionError('endpoint down')
            return await super().generate(reqs)

    ts = demo_tasks(2)
    r = run_campaign(tmp_path / 'e', ts, Flaky(), k=2, error_retries=1, concurrency=1, progress=False)
    assert r['system_errors_left'] == 2 and r['executed'] == 2 + 2 * 2  # 2 clean + 2 errors x (first try + 1 retry)
    with pytest.raises(CampaignIncomplete, match='2 system errors'):
        load_campaign(tmp_path / 'e')
    r = run_campaign(tmp_path / 'e', ts, ScriptedPolicy(), k=2, progress=False)  # the repair run
    assert (r['executed'], r['system_errors_left']) == (2, 0)
    assert load_campaign(tmp_path / 'e').rewards.tolist() == [[1, 1], [1, 1]]


def test_exceptions_of_domain_code_on_the_agents_input_are_counted_per_tool_in_the_report(tmp_path, capsys):
    """Such a call is the agent's failed call (scored as usual), and `tbt aggregate` counts them per tool: they may be
    our bugs."""
    from thinkingbox_training.backend import Domain
    from thinkingbox_training.domains.demo import DemoBase, demo
    from thinkingbox_training.policies import Generation, PolicyBase
    from thinkingbox_training.campaigns import aggregate

    buggy = Domain('buggy-campaign', DemoBase, seed=demo.seed, policy='A domain with a bug.')
    buggy.tools.update(demo.tools)
    buggy._arg_models.update(demo._arg_models)

    @buggy.tool
    def lookup(ctx, account_id: str) -> dict:
        "Look an account up (by a table that misses most accounts: a KeyError on them)."
        return {'AC-1': {'balance_cents': 10_000}}[account_id]

    class Says(PolicyBase):
        fmt, policy_id = None, 'says'

        async def generate(self, reqs):
            pay = '<tool_call>\n{"name": "pay", "arguments": {"account_id": "AC-1", "amount_cents": 1}}\n</tool_call>'
            texts = ['<tool_call>\n{"name": "lookup", "arguments": {"account_id": "AC-9"}}\n</tool_call>', pay, 'Paid.']
            return [Generation(text=texts[min(r.turn, 2)] + '<|im_end|>') for r in reqs]

    ts = [
        t.model_copy(update={'domain': 'buggy-campaign', 'uid': f'buggy-campaign/pay/{i}'})
        for i, t in enumerate(demo_tasks(2))
    ]
    r = run_campaign(tmp_path / 'b', ts[:1], Says(), k=3, progress=False)
    assert (r['executed'], r['system_errors_left']) == (3, 0)
    recs = AttemptStore(tmp_path / 'b' / 'attempts.sqlite').records('b')
    assert [(x['reward'], x['agent_exceptions']) for x in recs] == [(1, {'lookup': 1})] * 3
    assert aggregate(str(tmp_path / 'b'), json=True) == 0
    assert json.loads(capsys.readouterr().out)['agent_exceptions'] == {'lookup': 3}
    assert aggregate(str(tmp_path / 'b')) == 0
    assert "domain code on the agent's input" in capsys.readouterr().out


def test_a_probe_under_a_recipe_runs_the_recipes_run_spec(tmp_path, capsys):
    "`tbt probe --recipe`: the recipe's sampling and budgets (read as training reads them), the seed and judge given."
    from thinkingbox_training.campaigns import RunSpec, read_meta
    from thinkingbox_training.cli import main

    tasks = tmp_path / 'tasks.jsonl'
    write_tasks([t.model_copy(update={'split': 'train'}) for t in demo_tasks(3)], tasks)
    recipe = ROOT / 'scripts' / 'recipes' / 'tiny_cpu.yaml'
    argv = ['probe', '--tasks', str(tasks), '--k', '1', '--recipe', str(recipe), '--seed', '5', '--quiet']
    assert main([*argv, '--out', str(tmp_path / 'p')]) == 0
    meta, spec = read_meta(tmp_path / 'p'), RunSpec.from_recipe(recipe)
    assert meta['budgets'] == {'source': 'run', **spec.budgets} and meta['judge'] == 'rule'
    assert meta['sampling'] == {**vars(spec.sampling), 'seed': 5} and meta['sampling']['max_tokens'] == 96
    assert main([*argv, '--out', str(tmp_path / 'q'), '--judge', 'none']) == 0  # no judge: these tasks have no rubric
    assert read_meta(tmp_path / 'q')['judge'] is None
