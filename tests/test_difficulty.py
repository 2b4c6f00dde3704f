"Offline difficulty selection: posteriors, bands, ties, gates, benchmark exclusion, split, atomic outputs, CLI, speed."

import json, os

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad

from thinkingbox_training import difficulty as D
from thinkingbox_training.cli import main
from thinkingbox_training.difficulty import (
    BANDS,
    BenchmarkOverlap,
    SelectionConfig,
    assert_disjoint,
    assign_bands,
    atomic_write,
    band_masses,
    credible_interval,
    expected_useful_group_prob,
    read_uids,
    select_pool,
    stratified_split,
    synthetic_probe,
    tally,
    useful_group_prob,
    write_selection,
)


def probe(uid, k, n=8, errors=0, split='train', truncated=0, start=0):
    "Records of one task: n clean runs with k successes (the first `truncated` of them truncated), then system errors."
    out = [
        dict(
            task_uid=uid,
            domain='retail',
            family='f',
            split=split,
            repetition=start + j,
            status='truncated' if j < truncated else 'ok',
            reward=int(j < k),
        )
        for j in range(n)
    ]
    return out + [
        dict(
            task_uid=uid,
            domain='retail',
            family='f',
            split=split,
            repetition=start + n + j,
            status='system_error',
            reward=None,
        )
        for j in range(errors)
    ]


def row(sel, uid):
    return next(r for r in sel.rows if r['task_uid'] == uid)


# ---------------------------------------------------------------- posterior and bands


def test_masses_sum_to_one_and_match_integration():
    n = np.array([4, 8, 8, 20, 50])
    k = np.array([0, 3, 8, 11, 49])
    a, b = k + 0.5, n - k + 0.5
    m = band_masses(a, b)
    assert m.shape == (5, 5) and np.allclose(m.sum(1), 1, atol=1e-12) and (m >= 0).all()
    edges = SelectionConfig.edges
    for i in range(5):
        for j in range(5):
            mass = quad(stats.beta(a[i], b[i]).pdf, edges[j], edges[j + 1], limit=200)[0]
            assert m[i, j] == pytest.approx(mass, abs=1e-7)


@pytest.mark.parametrize(
    'k,n,band',
    [
        (0, 8, 'too_hard'),
        (1, 8, 'hard'),
        (3, 8, 'hard'),
        (4, 8, 'medium'),
        (5, 8, 'easy'),
        (8, 8, 'too_easy'),
        (0, 4, 'too_hard'),
        (50, 100, 'medium'),
        (10, 100, 'hard'),
        (95, 100, 'too_easy'),
    ],
)
def test_bands_of_typical_probes(k, n, band):
    assert BANDS[assign_bands(band_masses(k + 0.5, n - k + 0.5))[0]] == band


def test_ties_go_to_the_harder_band():
    assert assign_bands([[0.3, 0.3, 0.2, 0.1, 0.1]]).tolist() == [0]
    assert assign_bands([[0, 0.25, 0.25, 0.25, 0.25]]).tolist() == [1]
    assert assign_bands([[0, 0.4 - 1e-15, 0.2, 0.4, 0]]).tolist() == [1]  # equal up to rounding
    assert assign_bands([[0, 0.39, 0.2, 0.41, 0]]).tolist() == [3]  # a real difference is not a tie
    sym = SelectionConfig(edges=(0, 0.05, 0.45, 0.55, 0.95, 1))
    for n in (2, 4, 6, 10):
        m = band_masses(n / 2 + 0.5, n / 2 + 0.5, sym.edges)
        assert m[0, 1] == pytest.approx(m[0, 3], abs=1e-12)
        if m[0, 1] > m[0, 2]:
            assert assign_bands(m).tolist() == [1]


def test_credible_interval_covers_the_mean_and_narrows():
    ci = credible_interval(np.array([4.5, 40.5]), np.array([4.5, 40.5]))
    assert (ci[:, 0] < 0.5).all() and (ci[:, 1] > 0.5).all() and ci[1, 1] - ci[1, 0] < ci[0, 1] - ci[0, 0]
    assert stats.beta.cdf(ci[0, 1], 4.5, 4.5) - stats.beta.cdf(ci[0, 0], 4.5, 4.5) == pytest.approx(0.9)


def test_config_validation():
    for bad in (
        dict(edges=(0, 0.5, 1)),
        dict(keep=('nope',)),
        dict(min_clean=0),
        dict(dev_fraction=1.0),
        dict(prior=(0, 1)),
    ):
        with pytest.raises(ValueError):
            SelectionConfig(**bad)
    assert SelectionConfig(keep=['hard']).keep == ('hard',)  # lists become tuples (hashable, frozen)


# ---------------------------------------------------------------- tally and selection rules


def test_system_errors_are_not_runs_and_truncated_are():
    t = tally(probe('a', 2, n=5, errors=3, truncated=2))
    assert (t['a']['n'], t['a']['k'], t['a']['system_errors']) == (5, 2, 3)


def test_min_clean_boundary():
    sel = select_pool(probe('three', 1, n=3, errors=5) + probe('four', 1, n=4, errors=4))
    assert row(sel, 'three')['reasons'] == ['too_few_clean_runs'] and row(sel, 'three')['band'] is None
    assert row(sel, 'four')['band'] == 'hard' and row(sel, 'four')['kept']
    assert select_pool(probe('three', 1, n=3), SelectionConfig(min_clean=3)).pool == ['three']


def test_bad_records_are_errors():
    with pytest.raises(ValueError, match='status'):
        tally([dict(task_uid='a', repetition=0, status='weird', reward=1)])
    with pytest.raises(ValueError, match='reward'):
        tally([dict(task_uid='a', repetition=0, status='ok', reward=None)])
    with pytest.raises(ValueError, match='recorded twice'):
        tally(probe('a', 1, n=2) + probe('a', 1, n=1))
    # a system error and the retry under the same key are not a duplicate
    assert tally(probe('a', 0, n=0, errors=1) + probe('a', 1, n=1))['a']['n'] == 1


def test_keep_is_configurable():
    recs = probe('h', 0) + probe('m', 4) + probe('e', 8)
    assert select_pool(recs).pool == ['m']
    assert select_pool(recs, SelectionConfig(keep=('too_hard', 'too_easy'))).pool == ['e', 'h']
    assert row(select_pool(recs), 'h')['reasons'] == ['band:too_hard']


def test_solvability_gate():
    recs = probe('a', 4) + probe('b', 4) + probe('c', 4) + probe('d', 4)
    ref = probe('a', 3, n=4) + probe('b', 0, n=4) + probe('c', 1, n=1, errors=3)
    sel = select_pool(recs, reference=ref)
    assert [row(sel, u)['reasons'] for u in 'abcd'] == [
        [],
        ['reference_unsolved'],
        [],
        ['reference_too_few_clean_runs'],
    ]
    strict = select_pool(recs, SelectionConfig(ref_min_clean=2), reference=ref)
    assert row(strict, 'c')['reasons'] == ['reference_too_few_clean_runs']
    th = select_pool(recs, SelectionConfig(ref_threshold=0.5, ref_prob=0.9), reference=ref)
    assert row(th, 'a')['ref_p_above'] == pytest.approx(stats.beta.sf(0.5, 3.5, 1.5))
    assert row(th, 'a')['reasons'] == (['reference_below_threshold'] if stats.beta.sf(0.5, 3.5, 1.5) < 0.9 else [])
    assert select_pool(recs, SelectionConfig(ref_min_successes=0, ref_min_clean=0), reference=ref).pool == list('abcd')


def test_all_reasons_are_listed():
    sel = select_pool(probe('x', 8, split='bench'), reference=[], bench_uids=['x'])
    assert row(sel, 'x')['reasons'] == ['band:too_easy', 'reference_too_few_clean_runs', 'benchmark_uid']


# ---------------------------------------------------------------- benchmark exclusion


def test_bench_uids_and_bench_split_are_dropped():
    recs = probe('t/1', 4) + probe('t/2', 4) + probe('b/1', 4, split='bench')
    sel = select_pool(recs, bench_uids={'t/2', 'never/probed'})
    assert sel.pool == ['t/1']
    assert row(sel, 'b/1')['reasons'] == row(sel, 't/2')['reasons'] == ['benchmark_uid']
    assert sel.inputs['bench_uids']['items'] == 3


def test_assert_disjoint_is_a_real_check(monkeypatch):
    with pytest.raises(
        BenchmarkOverlap, match='7 benchmark task uids in the training pool: b/0, b/1, b/2, b/3, b/4, ...'
    ):
        assert_disjoint([f'b/{i}' for i in range(7)] + ['t/0'], [f'b/{i}' for i in range(10)])
    assert issubclass(BenchmarkOverlap, ValueError)
    # the check inside select_pool runs on what selection produced: break the exclusion and it fires
    real = D.assert_disjoint
    calls = []

    def recorded(pool, bench):
        calls.append((list(pool), set(bench)))
        return real(pool, bench)

    monkeypatch.setattr(D, 'assert_disjoint', recorded)
    select_pool(probe('t/1', 4) + probe('b/1', 4), bench_uids=['b/1'])
    assert calls == [(['t/1'], {'b/1'})]


def test_read_uids(tmp_path):
    (tmp_path / 'a.txt').write_text('x/1\n\n  x/2 \n')
    (tmp_path / 'b.jsonl').write_text('{"uid": "y/1", "domain": "d"}\n{"task_uid": "y/2"}\n')
    assert read_uids(tmp_path / 'a.txt') == ['x/1', 'x/2'] and read_uids(tmp_path / 'b.jsonl') == ['y/1', 'y/2']
    (tmp_path / 'c.jsonl').write_text('{"name": "z"}\n')
    with pytest.raises(ValueError, match='without uid'):
        read_uids(tmp_path / 'c.jsonl')


# ---------------------------------------------------------------- split


def test_split_is_stratified_deterministic_and_order_free():
    recs, _ = synthetic_probe(600, seed=4)
    split = SelectionConfig(dev_fraction=0.1)
    a = select_pool(recs, split)
    b = select_pool(recs[::-1], split)
    assert a.train == b.train and a.dev == b.dev and a.rows == b.rows
    for band in ('hard', 'medium', 'easy'):
        kept = [r for r in a.rows if r['kept'] and r['band'] == band]
        assert sum(r['pool_split'] == 'dev' for r in kept) == int(0.1 * len(kept) + 0.5)
    c = select_pool(recs, SelectionConfig(seed=1, dev_fraction=0.1))
    assert c.pool == a.pool and c.dev != a.dev
    assert select_pool(recs, SelectionConfig(dev_fraction=0)).dev == []
    assert set(a.train) | set(a.dev) == set(a.pool) and not set(a.train) & set(a.dev)


def test_split_of_a_new_task_moves_at_most_one_in_its_band():
    uids = [f'u/{i}' for i in range(100)]
    s1 = stratified_split(uids, ['x'] * 100, 0.2)
    s2 = stratified_split(uids + ['u/new'], ['x'] * 101, 0.2)
    assert sum(s1[u] != s2[u] for u in uids) <= 1


# ---------------------------------------------------------------- outputs


def test_outputs_and_manifest(tmp_path):
    recs, _ = synthetic_probe(120, seed=2)
    ref, _ = synthetic_probe(120, seed=3, n_probes=4)
    (tmp_path / 'probe.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    sel = select_pool(recs, reference=ref, bench_uids=['retail/f0/0000'])
    man = write_selection(sel, tmp_path / 'out', sources={'probes': tmp_path / 'probe.jsonl', 'reference': None})
    out = tmp_path / 'out'
    assert (out / 'pool.txt').read_text().split() == sel.pool
    assert json.loads((out / 'split.json').read_text()) == {'train': sel.train, 'dev': sel.dev}
    rows = [json.loads(l) for l in (out / 'tasks.jsonl').read_text().splitlines()]
    assert len(rows) == 120
    assert rows[0].keys() >= {
        'task_uid',
        'clean_runs',
        'successes',
        'alpha',
        'beta',
        'ci_lo',
        'ci_hi',
        'mass_too_hard',
        'mass_too_easy',
        'band',
        'kept',
        'reasons',
        'pool_split',
    }
    assert (out / 'tasks.csv').read_text().count('\n') == 121
    for name, sha in man['outputs'].items():
        assert D._sha_file(out / name) == sha
    assert man['inputs']['probes']['file_sha256'] == D._sha_file(tmp_path / 'probe.jsonl')
    assert man['inputs']['reference']['items'] == len(ref)
    banded = sum(v['tasks'] for v in man['counts']['bands'].values())
    assert banded + man['counts']['reasons'].get('too_few_clean_runs', 0) == 120
    assert man['config']['keep'] == ['hard', 'medium', 'easy']
    assert not [p for p in out.iterdir() if p.name.startswith('.')]  # no temporary files left


def test_atomic_write_keeps_the_old_file_on_failure(tmp_path, monkeypatch):
    p = atomic_write(tmp_path / 'f.txt', 'old\n')

    def boom(*a):
        raise OSError('disk full')

    monkeypatch.setattr(os, 'replace', boom)
    with pytest.raises(OSError, match='disk full'):
        atomic_write(p, 'new\n')
    assert p.read_text() == 'old\n' and sorted(x.name for x in tmp_path.iterdir()) == ['f.txt']


def test_outputs_are_byte_identical_on_rerun(tmp_path):
    recs, _ = synthetic_probe(80, seed=5)
    write_selection(select_pool(recs), tmp_path / 'a', figures=True)
    write_selection(select_pool(recs[::-1]), tmp_path / 'b', figures=True)
    for name in ('pool.txt', 'split.json', 'tasks.jsonl', 'tasks.csv', 'manifest.json'):
        assert (tmp_path / 'a' / name).read_bytes() == (tmp_path / 'b' / name).read_bytes(), name
    assert (tmp_path / 'a' / 'useful_groups.png').read_bytes()[:4] == b'\x89PNG'


# ---------------------------------------------------------------- useful groups


def test_useful_group_probabilities():
    assert useful_group_prob(0.5, 2) == pytest.approx(0.5) and useful_group_prob(1.0) == 0
    rng = np.random.default_rng(1)
    for a, b in [(0.5, 8.5), (4.5, 4.5), (7.5, 1.5)]:
        p = rng.beta(a, b, 400_000)
        assert expected_useful_group_prob(a, b) == pytest.approx(useful_group_prob(p).mean(), abs=3e-3)
    assert expected_useful_group_prob(np.array([1.0, 2.0]), np.array([1.0, 2.0])).shape == (2,)


# ---------------------------------------------------------------- command line and speed


def test_tbt_select(tmp_path, capsys):
    recs = probe('t/1', 4) + probe('t/2', 1) + probe('b/1', 4)
    (tmp_path / 'p.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    ref = probe('t/1', 2, n=4) + probe('t/2', 0, n=4)
    (tmp_path / 'ref.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in ref))
    (tmp_path / 'bench.jsonl').write_text('{"uid": "b/1"}\n')
    assert (
        main(
            [
                'select',
                str(tmp_path / 'p.jsonl'),
                '--out',
                str(tmp_path / 'o'),
                '--reference',
                str(tmp_path / 'ref.jsonl'),
                '--bench',
                str(tmp_path / 'bench.jsonl'),
                '--keep',
                'hard,medium',
                '--plots',
            ]
        )
        == 0
    )
    assert (tmp_path / 'o' / 'pool.txt').read_text() == 't/1\n'
    assert 'pool 1' in capsys.readouterr().out
    man = json.loads((tmp_path / 'o' / 'manifest.json').read_text())
    assert man['config']['keep'] == ['hard', 'medium'] and 'bands.png' in man['outputs']
    assert man['counts']['reasons'] == {'benchmark_uid': 1, 'reference_too_few_clean_runs': 1, 'reference_unsolved': 1}


def test_selection_of_10000_tasks():
    recs, _ = synthetic_probe(10_000, seed=7)
    sel = select_pool(recs)
    assert len(sel.rows) == 10_000 and any(r['kept'] for r in sel.rows)


# ---------------------------------------------------------------- band rule, dev split, probe budgets


def test_mass_and_mean_disagree_at_zero_of_four_and_the_rule_is_an_option():
    a, b = np.array([0.5]), np.array([4.5])  # 0 successes in 4 probes: mean 0.1
    assert BANDS[assign_bands(band_masses(a, b))[0]] == 'too_hard' and BANDS[D.mean_bands(a, b)[0]] == 'hard'
    recs = probe('t/0', 0, n=4)
    # the method's rule
    assert select_pool(recs).pool == [] and row(select_pool(recs), 't/0')['other_rule_band'] == 'hard'
    by_mean = select_pool(recs, SelectionConfig(band_rule='mean'))
    assert by_mean.pool == ['t/0']
    assert row(by_mean, 't/0')['band'] == 'hard' and row(by_mean, 't/0')['other_rule_band'] == 'too_hard'
    n = 8
    assert all(
        assign_bands(band_masses(k + 0.5, n - k + 0.5))[0] == D.mean_bands(k + 0.5, n - k + 0.5)[0]
        for k in range(n + 1)
    )
    with pytest.raises(ValueError, match='band_rule'):
        SelectionConfig(band_rule='mode')


def test_pool_txt_holds_only_what_training_may_use(tmp_path):
    recs, _ = synthetic_probe(200, seed=4)
    assert SelectionConfig().dev_fraction == 0 and not select_pool(recs).dev  # no dev split by default
    sel = select_pool(recs, SelectionConfig(dev_fraction=0.2))
    write_selection(sel, tmp_path)
    pool = (tmp_path / 'pool.txt').read_text().split()
    assert sel.dev and pool == sel.train and not set(pool) & set(sel.dev)


def test_tbt_select_records_the_probe_budgets(tmp_path):
    budgets = {'source': 'run', 'max_turns': 10, 'max_tokens_per_turn': 96, 'max_episode_tokens': 8192}
    (tmp_path / 'attempts.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in probe('t/1', 4) + probe('t/2', 1)))
    (tmp_path / 'campaign.json').write_text(json.dumps({'campaign': 'probe', 'budgets': budgets}))
    assert main(['select', str(tmp_path / 'attempts.jsonl'), '--out', str(tmp_path / 'o')]) == 0
    assert json.loads((tmp_path / 'o' / 'manifest.json').read_text())['probe_budgets'] == budgets
