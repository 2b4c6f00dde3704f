"""The pre-registered study (`tbt_lab.study`): its plan and resume logic and its analysis, on small real campaigns of
the scripted expert (generated tasks, run with `run_campaign` into tmp dirs)."""

import copy, json, sqlite3
import numpy as np
import pytest
from scipy import stats
from thinkingbox_training.cli import project_dir
from thinkingbox_training.policies import ScriptedPolicy
from thinkingbox_training.tasks import generate_tasks, write_tasks
from tbt_lab import study as S

ROOT = project_dir()
DESIGN = json.loads((ROOT / S.STUDY / 'design.json').read_text())


def small_design(pool_uids):
    "The committed design, shrunk: 14 retail bench tasks (4 held-out) and 4 pool tasks; base in part 1, two seeds."
    d = copy.deepcopy(DESIGN)
    d['seeds'] = [0, 1]
    d['design'].update(k_final=4, k_pool=2, held_out_tasks=4, in_family_tasks=10, pool_tasks=4)
    d['task_sets'] = {'bench_committed': {'files': ['tasks/bench.jsonl']}, 'bench_held_out_added': {'files': []}}
    d['pool'] = {'path': 'study/pool.txt', 'tasks': len(pool_uids)}
    ev = lambda name: {'kind': 'eval', 'name': name, 'held_out': 4, 'in_family': 10, 'k': 4, 'pool': 4, 'k_pool': 2}
    d['parts'] = [
        {'name': 'part 1', 'items': [ev('base k=4')]},
        {'name': 'part 2', 'items': [ev('seed 0 k=4'), ev('seed 1 k=4')]},
    ]
    return d


def scripted(st):
    "The base flaws half its attempts; each seed fewer, with its own attempt draws (seed 0 shares the base's)."
    if st.policy == 'base':
        return ScriptedPolicy(flaw=0.5, seed=0, name='base')
    s = int(st.out.split('/')[0].removeprefix('seed'))
    return ScriptedPolicy(flaw=0.3, seed=s, name=st.policy_name)


def tiny_study(root, edit=None):
    "A small study under `root` (its task files and pool written there); `edit(design)` changes its design first."
    write_tasks(generate_tasks('retail', 'bench', seed=1, n=1), root / 'tasks' / 'bench.jsonl')
    train = generate_tasks('retail', 'train', seed=0, n=1)
    write_tasks(train, root / 'tasks' / 'train.jsonl')
    (root / 'study').mkdir()
    pool = [t.uid for t in train[:4]]
    (root / 'study' / 'pool.txt').write_text(''.join(u + '\n' for u in pool))
    d = small_design(pool)
    if edit:
        edit(d)
    return S.Study(
        root=root,
        dir='study',
        recipe=str(ROOT / S.RECIPE),
        design=d,
        pool_files=('tasks/train.jsonl',),
        policy=scripted,
        runner_kw={'tool_transport': 'inprocess'},
        concurrency=8,
    )


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    return tiny_study(tmp_path_factory.mktemp('study'))


def test_the_committed_design_becomes_stages_whose_estimates_are_the_parts():
    stages = S.study_stages(DESIGN)
    for i, p in enumerate(DESIGN['parts'], 1):
        assert abs(sum(s.estimated_min for s in stages if s.part == i) - p['estimated_min']) < 0.5
    outs = [s.out for s in stages]
    assert len(outs) == len(set(outs))
    # the learning curve evaluates seed 0's checkpoints, which seed 0's run saves every 6 steps
    lc = [s for s in stages if '-step' in s.out]
    assert {s.policy for s in lc} == {f'seed0/model/checkpoint-{n}' for n in (6, 12, 18)}
    assert all(s.part > 1 or s.after == 'seed0/model' for s in lc)
    assert {s.out: s.save_steps for s in stages if s.kind == 'train'} == {
        'seed0/model': 6,
        'seed1/model': 0,
        'seed2/model': 0,
        'reprobed/model': 0,
    }
    assert next(s for s in stages if s.out == 'reprobed/model').reprobe_steps == (9, 17)
    bad = copy.deepcopy(DESIGN)
    bad['parts'][0]['items'][0]['name'] = 'base policy, all tasks'
    with pytest.raises(ValueError, match='base policy, all tasks'):
        S.study_stages(bad)


def test_a_part_runs_its_stages_once_and_resumes_a_campaign_from_its_store(tiny):
    rows = S.plan_rows(tiny, [1])
    assert [(r['stage'], r['state']) for r in rows] == [('base/bench-k4', 'todo'), ('base/pool-k2', 'todo')]
    c = tiny.design['costs']
    assert rows[0]['left (min)'] == round(
        (4 * 4 * c['s_per_episode_held_out'] + 10 * 4 * c['s_per_episode_in_family']) / 60, 1
    )
    S.reproduce(tiny, [1])
    assert {s.out: S.stage_status(tiny, s).state for s in tiny.part(1)} == {
        'base/bench-k4': 'done',
        'base/pool-k2': 'done',
    }
    # a crash midway: 5 attempts never stored; the status says so and the next run stores just those
    db = tiny.path / 'base/bench-k4/attempts.sqlite'
    con = sqlite3.connect(db)
    gone = con.execute('SELECT task_uid, repetition FROM attempts ORDER BY task_uid, repetition LIMIT 5').fetchall()
    con.executemany('DELETE FROM attempts WHERE task_uid=? AND repetition=?', gone)
    con.commit()
    con.close()
    st = tiny.stage('base/bench-k4')
    s = S.stage_status(tiny, st)
    assert (s.state, s.left, s.episodes) == ('partial', 5, 56)
    S.reproduce(tiny, [1])
    log = S.read_parts(tiny)['parts']['1']
    first, second = log['invocations']
    assert set(first['stages']) == {'base/bench-k4', 'base/pool-k2'} and 'finished' in first
    assert second['stages']['base/bench-k4']['executed'] == 5 and set(second['stages']) == {'base/bench-k4'}
    assert second['stages']['base/bench-k4']['state_before'] == 'partial'
    assert log['wall_s'] == pytest.approx(first['wall_s'] + second['wall_s'], abs=0.2)
    # done: a third run runs nothing
    S.reproduce(tiny, [1])
    assert S.read_parts(tiny)['parts']['1']['invocations'][-1]['stages'] == {}
    assert S.campaign_keys(tiny.path / 'base/bench-k4') == {(t.uid, j) for t in tiny.tasks('bench') for j in range(4)}


def test_a_stage_stopped_before_its_end_is_recorded_as_started_and_its_store_says_what_it_stored(tmp_path, monkeypatch):
    """A session that ends mid-stage kills `tbt reproduce` (no `finally` runs): parts.json on disk already shows the
    stage started, without a wall time, and the campaign's store lists the stopped invocation as unfinished."""
    tiny, real, on_disk = tiny_study(tmp_path), S.run_stage, []

    def killed(study, st):  # what a kill during the stage leaves: parts.json as written, the store as it stood
        on_disk.append(S.read_parts(study)['parts']['1']['invocations'][-1]['stages'].get(st.out))
        real(study, st)
        con = sqlite3.connect(study.path / st.out / 'attempts.sqlite')
        con.execute('UPDATE invocations SET finished = NULL')
        con.commit()
        con.close()
        raise KeyboardInterrupt

    monkeypatch.setattr(S, 'run_stage', killed)
    with pytest.raises(KeyboardInterrupt):
        S.reproduce(tiny, [1])
    (rec,) = on_disk
    assert rec['state_before'] == 'todo' and 'started' in rec and 'wall_s' not in rec
    (inv,) = S.store_invocations(tiny.path / 'base/bench-k4')
    assert inv['finished'] is None and inv['executed'] == 14 * 4 and inv['started'] > 0
    assert S.store_invocations(tiny.path / 'nowhere') is None


def test_a_trained_policys_campaign_waits_for_its_model_and_training_resumes_from_its_last_checkpoint(tiny, tmp_path):
    real = S.Study(root=tiny.root, dir='study', recipe=tiny.recipe, design=tiny.design, pool_files=tiny.pool_files)
    st = real.stage('seed0/bench-k4')
    assert S.stage_status(real, st).state == 'waiting'
    with pytest.raises(SystemExit, match='not trained yet'):
        S.run_stage(real, st)
    # training stages (the committed design's seed 0, on a scratch study directory)
    design = copy.deepcopy(DESIGN)
    design['pool']['path'] = str(ROOT / design['pool']['path'])
    ts = design['task_sets']
    full = S.Study(
        root=tmp_path,
        dir='s',
        recipe=str(ROOT / S.RECIPE),
        design=design,
        bench_files=[str(ROOT / f) for f in (*ts['bench_committed']['files'], *ts['bench_held_out_added']['files'])],
    )
    seed0 = full.stage('seed0/model')
    assert (S.stage_status(full, seed0).state, S.stage_status(full, seed0).left_min) == ('todo', 8.8)
    assert '--resume_from_checkpoint' not in S.train_argv(full, seed0)
    for n in (6, 12):
        (full.path / 'seed0/model' / f'checkpoint-{n}').mkdir(parents=True)
    s = S.stage_status(full, seed0)
    assert (s.state, s.steps_done) == ('partial', 12) and s.left_min == pytest.approx(8.8 / 2)
    argv = S.train_argv(full, seed0)
    assert argv[argv.index('--resume_from_checkpoint') + 1].endswith('seed0/model/checkpoint-12')
    assert argv[argv.index('--seed') + 1] == '0' and argv[argv.index('--save_steps') + 1] == '6'
    # the step-6 campaign is ready once its checkpoint holds a model; the final model's once the run is saved
    assert S.stage_status(full, full.stage('seed0-step6/bench-k4')).state == 'waiting'
    (full.path / 'seed0/model/checkpoint-6/config.json').write_text('{}')
    assert S.stage_status(full, full.stage('seed0-step6/bench-k4')).state == 'todo'
    for f in ('config.json', 'training_log.json'):
        (full.path / 'seed0/model' / f).write_text('{}')
    assert S.stage_status(full, seed0).state == 'done' and '--resume_from_checkpoint' not in S.train_argv(full, seed0)
    assert S.stage_status(full, full.stage('seed0/bench-k20')).state == 'todo'


def test_common_attempt_seeds_make_the_first_k_attempts_a_k_attempt_campaign(tiny, tmp_path):
    from thinkingbox_training.campaigns import run_campaign, load_campaign

    S.reproduce(tiny, [1])
    tasks = tiny.tasks('bench')
    run_campaign(
        tmp_path / 'k2',
        tasks,
        scripted(tiny.stage('base/bench-k4')),
        2,
        progress=False,
        runner_kw={'tool_transport': 'inprocess'},
        spec=tiny.settings(),
    )
    four, two = load_campaign(tiny.path / 'base/bench-k4'), load_campaign(tmp_path / 'k2')
    assert np.array_equal(four.first_k(2).rewards, two.rewards[[two.uids.index(u) for u in four.uids]])
    with pytest.raises(ValueError):
        two.first_k(4)


def test_the_report_and_its_primary_statistic_computed_by_hand(tiny):
    S.reproduce(tiny, [1, 2])
    s = S.study_report(tiny)
    assert s['seeds'] == [0, 1] and s['seeds_evaluated'] == [0, 1]
    assert json.loads((tiny.path / 'summary.json').read_text())['seeds'] == [0, 1]

    # by hand, from the exported attempt records: per held-out task, the seeds' mean pass@1 minus the base's
    def rates(d):
        recs = [json.loads(x) for x in (tiny.path / d / 'attempts.jsonl').read_text().splitlines()]
        out = {}
        for r in recs:
            out.setdefault(r['task_uid'], []).append(r['reward'])
        return {u: np.mean(v) for u, v in out.items()}, {r['task_uid'] for r in recs if r['held_out_family']}

    (b, held), (s0, _), (s1, _) = rates('base/bench-k4'), rates('seed0/bench-k4'), rates('seed1/bench-k4')
    d = np.array([(s0[u] + s1[u]) / 2 - b[u] for u in sorted(held)])
    p = s['primary']
    assert p['tasks'] == len(held) == 4 and p['seeds'] == 2 and p['complete']
    assert p['diff'] == pytest.approx(d.mean())
    t = d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))
    assert p['t'] == pytest.approx(t) and p['p'] == pytest.approx(2 * stats.t.sf(abs(t), len(d) - 1))
    assert p['diff_lo'] <= p['diff'] <= p['diff_hi']
    sd = d.std(ddof=1)
    assert p['detectable_change'] == pytest.approx((stats.t.ppf(0.975, 3) + stats.t.ppf(0.8, 3)) * sd / 2)
    seed_means = [np.mean([s0[u] - b[u] for u in held]), np.mean([s1[u] - b[u] for u in held])]
    assert p['per_seed_diff'] == pytest.approx(seed_means) and p['seed_sd'] == pytest.approx(np.std(seed_means, ddof=1))
    # the pooled rows are the same statistic per task group; the pool has its own
    assert s['pooled']['held_out_family']['diff'] == pytest.approx(p['diff']) and s['pooled']['pool']['tasks'] == 4
    # per seed: seed 0 shares the base's attempt draws at a lower flaw rate, so it never loses a task at k/k
    c0 = next(c for c in s['comparisons'] if c['policy'] == 'seed 0' and c['group'] == 'all bench')
    assert c0['all_k_lost'] == 0 and c0['pass@1_diff'] > 0 and c0['tasks'] == 14
    groups = {c['group'] for c in s['comparisons']}
    assert {'all bench', 'held_out_family', 'in_family', 'retail', 'pool'} <= groups
    assert {'policies.png', 'sharpening.png'} <= {f.split('/')[-1] for f in s['figures']}
    assert all((tiny.path / f).exists() for f in s['figures'])
    assert (tiny.path / 'tables' / 'comparisons.md').exists()
    # the base each seed is paired with, named: it plus the change is the trained figure
    assert p['base_paired'] + p['diff'] == pytest.approx(p['trained'])
    assert p['base_paired'] == pytest.approx(np.mean([b[u] for u in held]))
    # the family as the unit: the mean of the family means of the same per-task changes, a t over families
    fams = {}
    for x in (tiny.path / 'base/bench-k4' / 'attempts.jsonl').read_text().splitlines():
        r = json.loads(x)
        fams[r['task_uid']] = r['family']
    by = {}
    for u, x in zip(sorted(held), d):
        by.setdefault(fams[u], []).append(x)
    fm = np.array([np.mean(by[f]) for f in sorted(by)])
    f = s['family_level']['held_out_family']['family']
    assert f['families'] == len(fm) and f['df'] == len(fm) - 1 and f['diff'] == pytest.approx(fm.mean())
    assert f['p'] == pytest.approx(stats.ttest_1samp(fm, 0).pvalue, nan_ok=True)
    assert {'families.png'} <= {x.split('/')[-1] for x in s['figures']}
    assert (tiny.path / 'tables' / 'families.md').exists()


def test_the_family_clustered_interval_resamples_whole_families():
    v = np.array([0.0, 0.0, 1.0, 1.0])
    # two families, each constant: every resample's mean is 0, 0.5 or 1, and a task bootstrap would give others
    lo, hi = S.cluster_bootstrap(v, ['a', 'a', 'b', 'b'], n_boot=2000)
    assert (lo, hi) == (0.0, 1.0)
    lo, hi = S.cluster_bootstrap(v, ['a', 'b', 'c', 'd'], n_boot=2000)
    assert 0.0 <= lo < 0.5 < hi <= 1.0


def test_family_level_inference_takes_the_family_as_its_unit():
    "t over family means with F-1 df, the wild cluster bootstrap by brute force, the ICC of constant families."
    import itertools

    rng = np.random.default_rng(0)
    fam = np.repeat(list('abcde'), [3, 4, 5, 3, 4])
    v = rng.normal(0.02, 0.05, len(fam)) + np.repeat(rng.normal(0, 0.05, 5), [3, 4, 5, 3, 4])
    f = S.family_test(v, fam)
    fm = np.array([v[fam == x].mean() for x in 'abcde'])
    t = stats.ttest_1samp(fm, 0)
    assert (f['families'], f['tasks'], f['df'], f['wild_patterns']) == (5, 19, 4, 32) and f['wild_exact']
    assert f['diff'] == pytest.approx(fm.mean()) and f['t'] == pytest.approx(t.statistic)
    assert f['p'] == pytest.approx(t.pvalue)
    lo, hi = t.confidence_interval()
    assert (f['diff_lo'], f['diff_hi']) == (pytest.approx(lo), pytest.approx(hi))
    brute = [abs(stats.ttest_1samp(np.array(s) * fm, 0).statistic) for s in itertools.product([1, -1], repeat=5)]
    assert f['wild_p'] == pytest.approx(np.mean(np.array(brute) >= abs(t.statistic) - 1e-12))
    assert [round(f['per_family'][x]['diff'], 12) for x in 'abcde'] == [round(x, 12) for x in fm]
    # constant within families: all variation between them; one task a family: nothing to say within
    assert S.intraclass([1, 1, 2, 2, 5, 5], list('aabbcc'))[0] == pytest.approx(1.0)
    assert all(np.isnan(S.intraclass([1, 2, 3], list('abc'))))
    # more families than enumerable: random sign patterns, still a p-value
    g = S.family_test(rng.normal(0, 1, 40), np.repeat(np.arange(20), 2), max_exact=12)
    assert not g['wild_exact'] and g['wild_patterns'] == 20000 and 0 <= g['wild_p'] <= 1
    with pytest.raises(ValueError, match='at least 2 families'):
        S.family_test([1.0, 2.0], ['a', 'a'])


def test_the_seed_and_task_interval_adds_the_seeds_variance_to_the_tasks():
    D = np.array([[0.1, 0.3, 0.2, 0.0, 0.1], [0.2, 0.2, 0.3, 0.1, 0.3], [0.0, 0.1, 0.1, 0.0, 0.0]])
    r = S.seed_task_interval(D)
    a2, b2 = D.mean(0).var(ddof=1) / 5, D.mean(1).var(ddof=1) / 3
    assert r['se'] == pytest.approx(np.sqrt(a2 + b2)) and r['diff'] == pytest.approx(D.mean())
    assert r['df'] == pytest.approx((a2 + b2) ** 2 / (a2**2 / 4 + b2**2 / 2))
    q = stats.t.ppf(0.975, r['df'])
    assert r['diff_lo'] == pytest.approx(D.mean() - q * r['se'])
    assert r['diff_hi'] == pytest.approx(D.mean() + q * r['se'])
    # wider than the task-level interval alone when the seeds differ
    assert r['se'] > np.sqrt(a2)


def test_the_committed_study_at_the_family_level_recomputed_from_its_attempt_records():
    "The held-out change over the 7 family means, and the base each seed is paired with, from attempts.jsonl."
    from thinkingbox_training.campaigns import load_campaign

    st = S.Study()
    runs = {'base': 'base/bench-k20', 0: 'seed0/bench-k20', 1: 'seed1/bench-k8', 2: 'seed2/bench-k8'}
    rec = {}
    for who, d in runs.items():
        for x in (st.path / d / 'attempts.jsonl').read_text().splitlines():
            r = json.loads(x)
            if r['held_out_family']:
                rec.setdefault(who, {}).setdefault(r['task_uid'], {})[r['repetition']] = r
    uids = sorted(rec['base'])
    rate = lambda who, u, k: np.mean([rec[who][u][j]['reward'] for j in range(k)])
    D = np.array([[rate(s, u, k) - rate('base', u, k) for u in uids] for s, k in ((0, 20), (1, 8), (2, 8))])
    fam = np.array([rec['base'][u][0]['family'] for u in uids])
    fm = np.array([D.mean(0)[fam == f].mean() for f in sorted(set(fam))])
    base = load_campaign(st.path / runs['base'])
    trained = [load_campaign(st.path / runs[s]) for s in (0, 1, 2)]
    fl = S.family_level(base, trained, base.held_out)
    assert len(uids) == 280 and len(fm) == 7 and fl['family']['diff'] == pytest.approx(fm.mean())
    assert fl['family']['p'] == pytest.approx(stats.ttest_1samp(fm, 0).pvalue)
    assert fl['family']['wild_patterns'] == 128
    p = S.primary_test(base, trained, base.held_out)
    assert p['base_per_seed'] == pytest.approx([np.mean([rate('base', u, k) for u in uids]) for k in (20, 8, 8)])


def test_training_rows_read_zero_variance_groups_and_the_logprob_gap(tmp_path):
    g = lambda *rs: [['t', i, r] for i, r in enumerate(rs)]
    steps = [
        {
            'step': 0,
            'groups': [g(1, 0), g(1, 1), g(0, 1)],
            'kinds': ['useful', 'zero_variance', 'useful'],
            'rounds': [0, 1, 1],
            'selected': [0, 2],
            'fillers': [],
            'skipped': False,
            'logprob_gap': {'mean': 1e-6},
        },
        {
            'step': 1,
            'groups': [g(0, 0), g(1, 0)],
            'kinds': ['zero_variance', 'useful'],
            'rounds': [0, 0],
            'selected': [1],
            'fillers': [0],
            'skipped': False,
        },
    ]
    (tmp_path / 'training_log.json').write_text(
        json.dumps(
            {
                'steps': steps,
                'log_history': [],
                'pools': [{'step': 1, 'pool': [], 'probe_episodes': 8}],
                'reprobes': [{'step': 2, 'episodes': 4, 'used': False}],
            }
        )
    )
    a, b = S.training_rows(tmp_path)
    assert (a['zero_variance_share'], a['episodes'], a['logprob_gap']) == (1 / 3, 6, 1e-6)
    assert (b['zero_variance_share'], b['logprob_gap']) == (0.5, None)
    z = S.zero_variance(tmp_path)
    assert (z['groups'], z['zero_variance_groups'], z['rollouts'], z['rollouts_in_zero_variance']) == (5, 2, 10, 4)
    assert z['share_lo'] < 0.4 < z['share_hi'] and z['reprobe_episodes'] == 8 + 4  # kept pools' and the unused one
    assert z['episodes_spent'] == 10 + 8 + 4
    assert S.zero_variance(tmp_path / 'none') is None


def _arm(tiny, tmp_path, budget, probe_tasks):
    "A tiny GRPO run (random tiny Qwen3, the scripted expert as its sampler) with the second arm's callback."
    import os, warnings

    os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
    warnings.filterwarnings('ignore', message='.*use_cache=True.*')
    from transformers import PrinterCallback
    from grpo_fixtures import cpu_config, flaw_by_family, pay_task, tokenizer
    from thinkingbox_training.grpo import TBTTrainer
    from thinkingbox_training.policies import tiny_qwen3

    tok = tokenizer()
    write_tasks(probe_tasks, tmp_path / 'probe.jsonl')
    args = cpu_config(tmp_path / 'model', max_steps=10, max_refill_rounds=0)
    cb = S.Reprobe(tiny, tmp_path, (3,), budget, 8, probe=([str(tmp_path / 'probe.jsonl')], probe_tasks, []))
    t = TBTTrainer(
        tiny_qwen3(tok),
        args,
        [pay_task(i) for i in range(4)],
        processing_class=tok,
        policy=ScriptedPolicy(flaw=flaw_by_family, tokenizer=tok),
        callbacks=[cb],
    )
    t.remove_callback(PrinterCallback)
    cb.trainer = t
    t.train()
    return t, cb


def test_the_second_arm_reprobes_before_its_step_trains_on_the_new_pool_until_its_budget_is_spent(tiny, tmp_path):
    from grpo_fixtures import pay_task
    from thinkingbox_training.campaigns import campaign_records
    from thinkingbox_training.difficulty import SelectionConfig, select_pool

    probe = [pay_task(i) for i in range(10, 16)]  # flawed half the time: mixed, most kept
    # 2 steps x 8 episodes, a re-probe of 6 x 4 = 24 before step 3, then 2 more steps: 56 episodes, and no more
    t, cb = _arm(tiny, tmp_path / 'a', 56, probe)
    recs = campaign_records(tmp_path / 'a' / 'reprobe-step3')
    assert len(recs) == 24 and {r['task_uid'] for r in recs} == {x.uid for x in probe}
    want = select_pool(recs, SelectionConfig()).train
    assert len(want) >= 2 and (tmp_path / 'a' / 'pool-step3' / 'pool.txt').read_text().split() == want
    assert t.pool_log == [{'step': 2, 'pool': want, 'probe_episodes': 24}]
    assert {g[0][0] for rec in t.step_log[2:] for g in rec['groups']} <= set(want)  # steps 3 and 4: the new pool
    assert {g[0][0] for rec in t.step_log[:2] for g in rec['groups']} <= {f'demo/pay/{i:04d}' for i in range(4)}
    assert t.state.global_step == 4 and t.episodes_used == cb.spent() == 56
    # a budget that leaves no room for the re-probe and a step after it skips the re-probe and trains on the old
    # pool until the next step no longer fits: 16 + 3 x 8 = 40 of 47 episodes, steps 3-5 on the first pool
    t, cb = _arm(tiny, tmp_path / 'b', 16 + 24 + 7, probe)
    assert t.pool_log == [] and not (tmp_path / 'b' / 'reprobe-step3').exists()
    assert cb.log == [{'step': 3, 'episodes': 0, 'pool': None, 'used': False, 'skipped': True}]
    assert t.state.global_step == 5 and t.episodes_used == cb.spent() == 40
    assert {g[0][0] for rec in t.step_log for g in rec['groups']} <= {f'demo/pay/{i:04d}' for i in range(4)}


class _Trainer:
    "What `Reprobe` reads of a trainer: the episodes it has spent and the pools it was given."

    def __init__(self):
        self.episodes_used, self.pool_log = 0, []


def _drive(cb, episodes):
    "Run `cb` as a trainer would, step by step, each step spending `episodes[i]`; the steps run and the log."
    from transformers import TrainerControl, TrainerState

    cb.trainer, state, control = _Trainer(), TrainerState(), TrainerControl()

    def reprobe(step):  # what the real re-probe leaves: a new pool before `step`, its episodes counted
        cb.trainer.pool_log.append({'step': step - 1})
        cb.trainer.episodes_used += cb.reprobe_episodes
        cb.log.append({'step': step, 'episodes': cb.reprobe_episodes, 'used': True})

    cb.reprobe = reprobe
    for n, ep in enumerate(episodes):
        state.global_step = n
        cb.on_step_begin(None, state, control)
        cb.trainer.episodes_used += ep
        state.global_step = n + 1
        cb.on_step_end(None, state, control)
        if control.should_training_stop:
            break
    return state.global_step


def test_a_reprobe_that_no_longer_fits_is_skipped_and_the_arm_trains_until_its_budget_is_spent():
    "The study's second arm: 1,120 episodes, 32 a step, re-probes of 76 x 4 = 304 episodes before steps 9 and 17."
    cb = S.Reprobe(None, '.', (9, 17), 1120, 32, probe=([], [None] * 76, []))
    # 8 steps of 40 (refills), the re-probe (304), 8 of 44: 976 spent before step 17, where the committed arm stopped
    steps = _drive(cb, [40] * 8 + [44] * 8 + [32] * 40)
    assert [(r['step'], r['used'], r.get('skipped', False)) for r in cb.log] == [(9, True, False), (17, False, True)]
    assert steps == 20 and cb.spent() == 976 + 4 * 32 and cb.spent() + 32 > 1120
    # a re-probe that fits is run, and a budget never passed at a step's fewest episodes
    cb = S.Reprobe(None, '.', (9, 17), 2000, 32, probe=([], [None] * 76, []))
    steps = _drive(cb, [32] * 100)
    assert [r['step'] for r in cb.log if r['used']] == [9, 17] and cb.spent() <= 2000 < cb.spent() + 32
    assert steps == (2000 - 2 * 304) // 32


def test_a_seed_evaluated_at_fewer_attempts_is_paired_with_the_bases_first_k(tmp_path):
    "Revision 1's design: seed 1 at k=2 against a base at k=4; it is compared with the base's first 2 attempts."
    root = tmp_path
    st = tiny_study(root, lambda d: d['parts'][1]['items'][1].update(name='seed 1 k=2', k=2))
    assert (st.final_k(0), st.final_k(1)) == (4, 2) and 'seed1/bench-k2' in {s.out for s in st.stages}
    S.reproduce(st, [1, 2])
    s = S.study_report(st)
    assert s['seeds_evaluated'] == [0, 1]

    def rates(camp, k):
        recs = [json.loads(x) for x in (root / 'study' / camp / 'attempts.jsonl').read_text().splitlines()]
        out = {}
        for r in recs:
            if r['repetition'] < k:
                out.setdefault(r['task_uid'], []).append(r['reward'])
        return {u: np.mean(v) for u, v in out.items()}, {r['task_uid'] for r in recs if r['held_out_family']}

    (b4, held), (b2, _) = rates('base/bench-k4', 4), rates('base/bench-k4', 2)
    (s0, _), (s1, _) = rates('seed0/bench-k4', 4), rates('seed1/bench-k2', 2)
    d = np.array([((s0[u] - b4[u]) + (s1[u] - b2[u])) / 2 for u in sorted(held)])
    p = s['primary']
    assert p['k_per_seed'] == [4, 2] and p['diff'] == pytest.approx(d.mean())
    assert p['per_seed_diff'] == pytest.approx(
        [np.mean([s0[u] - b4[u] for u in held]), np.mean([s1[u] - b2[u] for u in held])]
    )
    c1 = next(c for c in s['comparisons'] if c['policy'] == 'seed 1' and c['group'] == 'all bench')
    assert c1['k'] == 2 and c1['pass@1_diff'] == pytest.approx(np.mean([s1[u] - b2[u] for u in s1]))
    assert {r['k'] for r in s['policies'] if r['policy'] == 'seed 1' and r['group'] != 'pool'} == {2}
    # the stores are not committed: without one, the summary keeps the wall time it recorded
    w = s['campaign_wall_s']['base/bench-k4']
    (root / 'study' / 'base/bench-k4/attempts.sqlite').unlink()
    assert w > 0 and S.study_summary(st)['campaign_wall_s']['base/bench-k4'] == w
    with pytest.raises(ValueError, match='more attempts than the base'):
        S.primary_test(S.load_campaigns(st)['base/bench-k4'].first_k(2), [S.load_campaigns(st)['seed0/bench-k4']])


@pytest.mark.slow
def test_a_parts_training_runs_run_side_by_side_and_are_recorded_as_each_ends(tmp_path):
    "Two 1-step runs of the real recipe (the shipped tiny policy, one group of 2), each in its own process."
    import yaml

    recipe = yaml.safe_load((ROOT / S.RECIPE).read_text())
    recipe.update(max_steps=1, groups_per_step=1, group_size=2, max_refill_rounds=0)
    (tmp_path / 'recipe.yaml').write_text(yaml.safe_dump(recipe))
    d = copy.deepcopy(DESIGN)
    d['parts'] = [
        {'name': 'part 1', 'items': [{'kind': 'train', 'name': f'train seed {s}', 'minutes': 1.0} for s in (1, 2)]}
    ]
    st = S.Study(root=ROOT, dir=str(tmp_path / 's'), recipe=str(tmp_path / 'recipe.yaml'), design=d, train_procs=2)
    S.reproduce(st, [1])
    inv = S.read_parts(st)['parts']['1']['invocations'][-1]
    assert inv['side_by_side'] == ['seed1/model', 'seed2/model'] and 'finished' in inv
    for o in ('seed1/model', 'seed2/model'):
        r = inv['stages'][o]
        assert (r['state_before'], r['state_after'], r['exit']) == ('todo', 'done', 0) and r['wall_s'] > 0
        log = json.loads((st.path / o / 'training_log.json').read_text())
        assert len(log['steps']) == 1 and (st.path / o / 'train.log').stat().st_size > 0
    assert max(inv['stages'][o]['wall_s'] for o in inv['side_by_side']) <= inv['wall_s']
    # done: nothing runs again
    S.reproduce(st, [1])
    assert S.read_parts(st)['parts']['1']['invocations'][-1]['stages'] == {}


def test_a_campaigns_wall_time_counts_a_stopped_invocation_until_the_next_one_started(tmp_path):
    con = sqlite3.connect(tmp_path / 'attempts.sqlite')
    con.execute(
        'CREATE TABLE invocations (id INTEGER PRIMARY KEY, campaign TEXT, started REAL, argv TEXT, '
        'executed INTEGER, finished REAL)'
    )
    # stopped at an unknown time (the next starts at 400), then one that ran 100 s to its end
    con.executemany('INSERT INTO invocations (started, finished) VALUES (?, ?)', [(100.0, None), (400.0, 500.0)])
    con.commit()
    con.close()
    assert S.store_wall_s(tmp_path) == 300.0 + 100.0
    assert S.store_wall_s(tmp_path / 'none') is None


def test_the_passk_comparison_runs_on_the_study_runner_with_each_arms_recipe_and_budget():
    """data/runs/passk/design.json becomes stages of the study's runner: an arm's seed trains under {arm}-seed{n}/ with
    the recipe and arguments its item names (pass@k: its episode budget), and is evaluated at k=20; the study's own
    stages are unchanged."""
    passk = S.Study(root=ROOT, dir='data/runs/passk')
    budgets = passk.design['arms']['passk']['episode_budget_by_seed']
    for s in (0, 1, 2):
        argv = S.train_argv(passk, passk.stage(f'passk-seed{s}/model'))
        assert argv[argv.index('--config') + 1] == 'scripts/recipes/tiny_cpu_passk.yaml'
        assert argv[argv.index('--episode_budget') + 1] == str(budgets[str(s)])
        assert argv[argv.index('--seed') + 1] == str(s)
        assert passk.stage(f'passk-seed{s}/bench-k20').policy == f'passk-seed{s}/model'
    argv = S.train_argv(passk, passk.stage('plain-seed1/model'))
    assert argv[argv.index('--config') + 1] == 'scripts/recipes/tiny_cpu.yaml' and '--episode_budget' not in argv
    assert [round(sum(x.estimated_min for x in passk.part(p)), 1) for p in (1, 2, 3, 4)] == [
        p['minutes'] for p in passk.design['parts']
    ]
    assert {x.out for x in S.study_stages(DESIGN) if x.kind == 'train'} == {
        'seed0/model',
        'seed1/model',
        'seed2/model',
        'reprobed/model',
    }
