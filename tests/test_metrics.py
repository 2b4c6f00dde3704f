"Campaign validation, the estimators, the cost index, comparisons, tables, and the method's published table."

import csv, io, itertools, json, math, random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from thinkingbox_training.metrics import (
    Campaign,
    CampaignIncomplete,
    bootstrap_mean,
    campaign_problems,
    compare,
    cost_index,
    headline,
    k_ladder,
    load_prices,
    metrics_table,
    pass_at_k,
    pass_hat_k,
    plot_domains,
    plot_pass_curves,
    plot_transitions,
    pretty,
    read_attempts,
    summarize,
    synthetic_records,
    to_csv,
    to_latex,
    to_markdown,
    usage_totals,
    wilson,
    write_tables,
)


def camp(successes, k, **kw):
    recs = synthetic_records(successes, k, **kw)
    return Campaign.from_records(recs, list(dict.fromkeys(r['task_uid'] for r in recs)), k)


# ---------------------------------------------------------------- validation


@pytest.fixture
def recs():
    return synthetic_records([1, 2, 0, 3], 3)


def uids_of(recs):
    return list(dict.fromkeys(r['task_uid'] for r in recs))


def problems(recs, uids, k=3):
    with pytest.raises(CampaignIncomplete) as e:
        Campaign.from_records(recs, uids, k)
    return e.value


def test_complete_campaign_in_any_order(recs):
    a = Campaign.from_records(recs, uids_of(recs), 3)
    shuffled = recs[:]
    random.Random(0).shuffle(shuffled)
    b = Campaign.from_records(shuffled, uids_of(recs), 3)
    assert (a.rewards == b.rewards).all() and a.successes.tolist() == [1, 2, 0, 3]


def test_each_problem_reported_alone(recs):
    u = uids_of(recs)
    assert set(problems(recs[1:], u).problems) == {'missing'}
    assert set(problems(recs + [recs[0]], u).problems) == {'duplicated'}
    assert set(problems(recs + [dict(recs[0], repetition=3)], u).problems) == {'unexpected'}
    assert set(problems(recs + [dict(recs[0], task_uid='nobody/x/1')], u).problems) == {'unexpected'}
    err = [dict(r, status='system_error', reward=None) if i == 2 else r for i, r in enumerate(recs)]
    assert set(problems(err, u).problems) == {'system errors'}
    assert set(problems([dict(recs[0], status='done')] + recs[1:], u).problems) == {'invalid status or reward'}
    assert set(problems([dict(recs[0], reward=None)] + recs[1:], u).problems) == {'invalid status or reward'}


def test_missing_task_entirely_and_message_truncates(recs):
    u = uids_of(recs) + ['retail/f9/0099']
    e = problems(recs, u)
    assert e.problems['missing'] == [('retail/f9/0099', 0), ('retail/f9/0099', 1), ('retail/f9/0099', 2)]
    many = problems(recs[7:], uids_of(recs))
    msg = str(many)
    assert '7 missing' in msg and msg.count('#') == 5 and ', ...' in msg and '15 attempts expected' in str(e)
    assert '%' not in msg and 'pass' not in msg


def test_bad_expectations_are_errors(recs):
    with pytest.raises(ValueError, match='duplicates'):
        campaign_problems(recs, uids_of(recs) * 2, 3)
    with pytest.raises(ValueError, match='k >= 1'):
        campaign_problems(recs, uids_of(recs), 0)


def test_truncated_is_clean(recs):
    t = [dict(r, status='truncated') if r['repetition'] == 0 else r for r in recs]
    assert Campaign.from_records(t, uids_of(recs), 3).successes.tolist() == [1, 2, 0, 3]


def test_read_attempts_roundtrip(tmp_path, recs):
    p = tmp_path / 'a.jsonl'
    p.write_text(''.join(json.dumps(r) + '\n' for r in recs))
    assert read_attempts(p) == recs


# ---------------------------------------------------------------- estimators


def brute(n, c, k):
    "pass@k and pass^k by enumerating every k-subset of n attempts (c successes first)."
    outcomes = [1] * c + [0] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    return (Fraction(sum(any(s) for s in subsets), len(subsets)), Fraction(sum(all(s) for s in subsets), len(subsets)))


@pytest.mark.parametrize('n', [1, 2, 5, 8])
def test_estimators_match_enumeration(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            at, hat = brute(n, c, k)
            assert pass_at_k(n, c, k) == pytest.approx(float(at), abs=1e-12)
            assert pass_hat_k(n, c, k) == pytest.approx(float(hat), abs=1e-12)


def test_estimators_match_exact_rationals_at_scale():
    rng = random.Random(1)
    for _ in range(200):
        n = rng.randint(1, 3000)
        c = rng.randint(0, n)
        k = rng.randint(1, n)
        exact_hat = Fraction(math.comb(c, k), math.comb(n, k))
        exact_at = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
        hat, at = float(pass_hat_k(n, c, k)), float(pass_at_k(n, c, k))
        assert math.isfinite(hat) and math.isfinite(at)
        assert at == pytest.approx(float(exact_at), rel=1e-9, abs=1e-15)
        assert hat == pytest.approx(float(exact_hat), rel=1e-9, abs=1e-300)


def test_estimators_are_vectorised_and_monotone():
    c = np.arange(21)
    for k in k_ladder(20):
        assert np.all(np.diff(pass_at_k(20, c, k)) >= 0) and np.all(np.diff(pass_hat_k(20, c, k)) >= 0)
    ks = k_ladder(20)
    at = [float(pass_at_k(20, 7, k)) for k in ks]
    hat = [float(pass_hat_k(20, 7, k)) for k in ks]
    assert at == sorted(at) and hat == sorted(hat, reverse=True)


def test_estimator_errors():
    with pytest.raises(ValueError):
        pass_at_k(5, 2, 0)
    with pytest.raises(ValueError):
        pass_hat_k(5, 6, 2)


def test_k_ladder():
    assert k_ladder(20) == [1, 2, 4, 8, 16, 20] and k_ladder(8) == [1, 2, 4, 8] and k_ladder(3) == [1, 2, 3]


# ---------------------------------------------------------------- intervals and summaries


def test_wilson_properties():
    for s, n in [(0, 1), (1, 1), (3, 10), (10, 10), (5242, 10140)]:
        lo, hi = wilson(s, n)
        assert 0 <= lo <= s / n <= hi <= 1
    assert all(math.isnan(x) for x in wilson(0, 0))


def test_bootstrap_mean_seeded_and_paired():
    v = np.random.default_rng(0).random((50, 2))
    assert np.array_equal(bootstrap_mean(v, 1000, seed=3)[0], bootstrap_mean(v, 1000, seed=3)[0])
    lo, hi = bootstrap_mean(v, 1000, seed=3)
    assert lo.shape == (2,) and np.all(lo < v.mean(0)) and np.all(v.mean(0) < hi)


def test_summarize_k_over_k_and_once():
    s = summarize(np.array([[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1]]))
    assert (s['solved_all'], s['solved_once'], s['successes'], s['attempts']) == (1, 3, 8, 16)
    assert s['pass^4'] == s['solved_all_rate'] and s['pass@4'] == s['solved_once_rate']
    assert s['pass@1'] == s['pass^1'] == 0.5
    b = summarize(np.array([[1, 1, 1, 1], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 1]]), interval='bootstrap')
    assert b['pass@1_lo'] < 0.5 < b['pass@1_hi']
    with pytest.raises(ValueError, match='interval'):
        summarize(np.ones((2, 2)), interval='normal')


def test_tables_by_family_and_held_out():
    c = camp(
        [4, 0, 2, 4, 1, 3],
        4,
        families=['a', 'a', 'b', 'b', 'c', 'c'],
        held_out=[0, 0, 0, 0, 1, 1],
        domains=['retail'] * 3 + ['travel'] * 3,
    )
    fam = {r['family']: r for r in metrics_table(c, 'family')}
    assert fam['a']['pass@1'] == 0.5 and fam['b']['solved_all'] == 1 and fam['c']['solved_all'] == 0
    held = {r['held_out']: r for r in metrics_table(c, 'held_out')}
    assert held['held-out family']['tasks'] == 2 and held['in-family']['pass@1'] == 10 / 16
    assert held['micro (all)']['pass@1'] == 14 / 24
    dom = {r['domain']: r for r in metrics_table(c)}
    assert dom['macro (mean of groups)']['pass@1'] == pytest.approx((6 / 12 + 8 / 12) / 2)
    with pytest.raises(ValueError, match='by must be'):
        metrics_table(c, 'policy')


# ---------------------------------------------------------------- cost index

PRICES = {
    'hosted': {'input': 1.0, 'cached_input': 0.1, 'output': 4.0},
    'local': {'input': 0.0, 'cached_input': 0.0, 'output': 0.0},
    'judge-m': {'input': 2.0, 'cached_input': 2.0, 'output': 2.0},
}


def usage(i, j):
    return {
        'agent': {'model': 'hosted', 'input': 1_000_000, 'cached_input': 500_000, 'output': 100_000},
        'user': {'model': 'local', 'input': 10, 'cached_input': 0, 'output': 5},
        'judge': {'model': 'judge-m', 'input': 1_000, 'cached_input': 0, 'output': 0},
    }


def test_cost_index_parts_and_cached_tokens():
    c = camp([2, 1], 2, usage=usage)
    ci = cost_index(c, PRICES)
    one = 0.5 + 0.05 + 0.4
    assert ci['cost'] == pytest.approx(4 * one) and ci['agent_cost'] == ci['cost']
    assert ci['cost_per_success'] == pytest.approx(4 * one / 3) and ci['cost_per_dependable'] == pytest.approx(4 * one)
    assert ci['judge_cost'] == pytest.approx(4 * 0.002) and ci['user_cost'] == 0
    tokens = (ci['agent_input'], ci['agent_cached_input'], ci['agent_output'], ci['user_output'])
    assert tokens == (4_000_000, 2_000_000, 400_000, 20)
    assert cost_index(c, PRICES, parts=('agent', 'judge'))['cost'] == pytest.approx(4 * one + 4 * 0.002)


def test_cost_index_no_successes_and_missing_usage():
    c = camp([0, 0], 2)
    ci = cost_index(c, PRICES)
    assert ci['cost'] == 0 and ci['cost_per_success'] is None and ci['cost_per_dependable'] is None


def test_unknown_model_anywhere_is_an_error():
    def u(i, j):
        return {**usage(i, j), 'judge': {'model': 'gpt-unknown', 'input': 1, 'cached_input': 0, 'output': 1}}

    with pytest.raises(ValueError, match="no price for model 'gpt-unknown' \\(judge usage\\)"):
        cost_index(camp([1], 2, usage=u), PRICES)


def test_usage_errors():
    with pytest.raises(ValueError, match='without a model'):
        usage_totals([{'usage': {'agent': {'input': 5}}}])
    with pytest.raises(ValueError, match='>= 0'):
        usage_totals([{'usage': {'agent': {'model': 'm', 'input': -1}}}])
    assert usage_totals([{'usage': {'agent': {'model': None, 'input': 0}}}, {'usage': None}, {}]) == {}


def test_shipped_price_table():
    p = load_prices()
    assert p['tiny-qwen3'] == {'input': 0, 'cached_input': 0, 'output': 0} and len(p) >= 4
    assert all(v['cached_input'] <= v['input'] for v in p.values())


# ---------------------------------------------------------------- comparison


def test_compare_transitions_and_mcnemar():
    base = camp([4, 4, 0, 2, 4, 3, 0], 4)
    trained = camp([4, 3, 1, 4, 4, 4, 0], 4)
    r = compare(base, trained, n_boot=1000, seed=5)
    assert (r['all_k_gained'], r['all_k_lost'], r['once_gained'], r['once_lost']) == (2, 1, 1, 0)
    assert r['mcnemar_p'] == pytest.approx(stats.binomtest(2, 3, 0.5).pvalue) == pytest.approx(1.0)
    assert [t['all_k'] for t in r['per_task']] == ['kept', 'lost', 'never', 'gained', 'kept', 'gained', 'never']
    assert r == compare(base, trained, n_boot=1000, seed=5)  # seeded
    assert r['all_k_diff_rate'] == pytest.approx(1 / 7)


def test_compare_exact_test_detects_lopsided_gains():
    base, trained = camp([2] * 30, 4), camp([4] * 30, 4)
    r = compare(base, trained, n_boot=500)
    assert r['mcnemar_p'] == pytest.approx(2 * 0.5**30) and r['all_k_diff_lo'] == r['all_k_diff_hi'] == 1.0


def test_compare_refuses_different_campaigns():
    with pytest.raises(ValueError, match='k 4 vs 3'):
        compare(camp([1, 2], 4), camp([1, 2], 3))
    with pytest.raises(ValueError, match='1 tasks not in both'):
        compare(camp([1, 2], 4), camp([1, 2, 3], 4))


# ---------------------------------------------------------------- tables and figures


def test_renderers():
    rows = [{'a': 'x|y', 'b': 1.23456789, 'c': None}, {'a': 'z_1', 'b': 2, 'c': 'q'}]
    assert to_markdown(rows).splitlines()[2] == r'| x\|y | 1.2346 | n/a |'
    assert list(csv.DictReader(io.StringIO(to_csv(rows))))[0] == {'a': 'x|y', 'b': '1.23456789', 'c': ''}
    tex = to_latex(rows, ['a', 'b'])
    assert tex.startswith(r'\begin{tabular}{lr}') and r'z\_1 & 2 \\' in tex and r'\bottomrule' in tex


def test_write_tables_and_figures(tmp_path):
    base, trained = camp([4, 0, 2, 3, 1], 4, usage=usage), camp([4, 1, 4, 3, 0], 4, usage=usage)
    paths = write_tables(pretty(metrics_table(base, prices=PRICES)), tmp_path / 't' / 'domains')
    assert [p.suffix for p in paths] == ['.md', '.csv', '.tex'] and all(p.stat().st_size for p in paths)
    figs = [
        plot_domains({'b': base, 't': trained}, tmp_path / 'd.png'),
        plot_pass_curves({'b': base}, tmp_path / 'p.png'),
        plot_transitions(compare(base, trained, n_boot=200), tmp_path / 'x.png'),
    ]
    assert all(p.read_bytes()[:4] == b'\x89PNG' for p in figs)


def test_headline_without_dependable_tasks():
    rows = headline(camp([0, 1], 2, usage=usage), camp([1, 2], 2, usage=usage), PRICES)
    d = {r['metric']: r for r in rows}
    assert d['cost per dependable task']['base'] == 'n/a' and d['cost per dependable task']['change'] == 'n/a'
    assert d['observed 2/2']['change'] == '+1'


# ------------------------------------------------ the published table (ThinkingBox-Training's reference run)

PUBLISHED = """\
| metric | base | RL | change |
|---|---|---|---|
| observed 20/20 | 38 (7.50%) | 107 (21.10%) | +69 |
| pass@1 | 51.70% | 60.78% | +9.08 pts |
| pass@20 | 453 (89.35%) | 446 (87.97%) | -7 |
| campaign cost | $925.80 | $855.58 | -7.6% |
| cost per successful attempt | $0.177 | $0.139 | -21.4% |
| cost per dependable task | $24.36 | $8.00 | -67.2% |
"""


def published_counts(T, k, zeros, alls, total):
    "Per-task success counts: `zeros` at 0, `alls` at k, the rest spread over 1..k-1 deterministically; sum `total`."
    mid, rest = T - zeros - alls, total - alls * k
    q, r = divmod(rest, mid)
    return [0] * zeros + [q + (i < r) for i in range(mid)] + [k] * alls


def agent_usage(T, k, usd, in_price=0.25):
    "Agent usage whose input tokens over T x k attempts cost exactly `usd` at `in_price` per million (no output price)."
    tokens = round(usd * 1e6 / in_price)
    q, r = divmod(tokens, T * k)
    return lambda i, j: {
        'agent': {'model': 'm', 'input': q + (i * k + j < r), 'cached_input': 0, 'output': 1000},
        'judge': {'model': 'j', 'input': 5000, 'cached_input': 0, 'output': 10},
    }


def test_rl_success_count_is_the_only_one_that_rounds_to_60_78():
    assert [c for c in range(10_141) if f'{c / 10_140:.2%}' == '60.78%'] == [6163]


def test_published_table_regenerated_from_counts():
    T, k = 507, 20
    prices = {
        'm': {'input': 0.25, 'cached_input': 0.25, 'output': 0.0},
        'j': {'input': 3.0, 'cached_input': 3.0, 'output': 3.0},
    }
    cb = published_counts(T, k, T - 453, 38, 5242)
    ct = published_counts(T, k, T - 446, 107, 6163)
    assert (sum(cb), sum(ct), len(cb) * k) == (5242, 6163, 10_140)
    uids = None
    camps = []
    for counts, usd, pid in ((cb, 925.80, 'base'), (ct, 855.58, 'rl')):
        recs = synthetic_records(counts, k, policy_id=pid, usage=agent_usage(T, k, usd))
        uids = uids or [r['task_uid'] for r in recs[::k]]
        camps.append(Campaign.from_records(recs, uids, k))
    base, rl = camps
    assert to_markdown(headline(base, rl, prices)) == PUBLISHED
    cib, cit = cost_index(base, prices), cost_index(rl, prices)
    assert round(cib['cost'], 2) == 925.80 and round(cit['cost'], 2) == 855.58
    assert cib['judge_cost'] > 0  # the judge is reported, not in the campaign cost
    assert f'{cib["cost_per_dependable"]:.2f}' == '24.36' and f'{cit["cost_per_dependable"]:.2f}' == '8.00'
    assert f'{cib["cost_per_success"]:.3f}' == '0.177'
    s = summarize(base.rewards)
    assert (s['attempts'], s['successes'], s['solved_all'], s['solved_once']) == (10_140, 5242, 38, 453)
    assert s['pass@20'] == pytest.approx(453 / 507) and s['pass^20'] == pytest.approx(38 / 507)


# ---------------------------------------------------------------- intervals, costs, budgets


def test_pass1_interval_resamples_tasks_when_attempts_are_pooled():
    "Two tasks x 20 attempts, one always solved and one never: two pieces of evidence, not 40 independent ones."
    s = summarize(np.array([[1] * 20, [0] * 20]))
    assert s['pass@1_interval'] == '95% bootstrap over tasks' and (s['pass@1_lo'], s['pass@1_hi']) == (0.0, 1.0)
    one = summarize(np.array([[1], [0], [1]]))  # one attempt per task: independent, binomial
    assert one['pass@1_interval'] == '95% Wilson over attempts' and (one['pass@1_lo'], one['pass@1_hi']) == wilson(2, 3)


def test_wilson_is_scipys():
    for s, n in [(0, 10), (3, 7), (10, 10), (5242, 10140)]:
        ci = stats.binomtest(s, n).proportion_ci(0.95, method='wilson')
        assert wilson(s, n) == (pytest.approx(ci.low, abs=1e-15), pytest.approx(ci.high, abs=1e-15))


def test_every_table_names_its_interval():
    rows = metrics_table(camp([4, 0, 2, 4, 1, 3], 4))
    assert all(r['pass@1_interval'] == '95% bootstrap over tasks' for r in rows[:-1])
    assert rows[-1]['pass@1_interval'] is None
    assert 'pass@1_interval' in to_markdown(pretty(rows)).splitlines()[0]


def test_cost_per_dependable_task_has_an_interval_over_tasks():
    from thinkingbox_training.metrics import task_costs

    c = camp([2, 1, 2, 0, 2], 2, usage=usage)
    ci = cost_index(c, PRICES)
    assert ci['cost_interval'] == '95% bootstrap over tasks'
    assert ci['cost_per_dependable_lo'] < ci['cost_per_dependable'] < ci['cost_per_dependable_hi']
    assert task_costs(c, PRICES).sum() == pytest.approx(ci['cost'])
    assert cost_index(camp([0, 1], 2, usage=usage), PRICES)['cost_per_dependable_lo'] is None


def test_cost_lines_keep_the_index_to_the_agent_and_list_the_rest_apart():
    from thinkingbox_training.metrics import campaign_spend, cost_lines

    base, trained = camp([2, 1], 2, usage=usage), camp([2, 2], 2, usage=usage, policy_id='t')
    spent = {
        'probing': campaign_spend(synthetic_records([1, 1], 4, usage=usage), PRICES),
        'training': {'episodes': 64, 'tokens': 12_345, 'usd': None},
    }
    rows = {r['line']: r for r in cost_lines(base, trained, PRICES, ('base', 'trained'), spent)}
    want = f'${cost_index(base, PRICES)["cost"]:,.2f}'
    assert rows['campaign cost (the index: inference of the evaluated policy)']['base'] == want
    assert rows['judge (not in the index)']['base'] == '4,000 tokens, $0.01'
    assert rows['simulated user (not in the index)']['trained'] == '60 tokens, $0.00'
    # 8 x (agent 0.95 + judge 0.002)
    assert rows['probing spent to make trained (not in the index)']['trained'] == '8 episodes, 8,808,120 tokens, $7.62'
    assert (
        rows['training spent to make trained (not in the index)']['trained'] == '64 episodes, 12,345 tokens, no price'
    )
    assert '95% bootstrap over tasks' in ' '.join(rows)


def test_compare_warns_when_budgets_differ():
    from thinkingbox_training.budgets import BudgetsDiffer

    a, b = camp([2, 1], 2), camp([2, 2], 2, policy_id='t')
    a.budgets = {
        'source': 'tasks',
        'max_turns': [7, 16],
        'max_tokens_per_turn': 256,
        'max_episode_tokens': [7168, 15360],
    }
    b.budgets = {'source': 'run', 'max_turns': 10, 'max_tokens_per_turn': 96, 'max_episode_tokens': 8192}
    with pytest.warns(BudgetsDiffer, match=r'base: 7-16 turns, 256 tokens a turn.*trained: 10 turns, 96 tokens a turn'):
        compare(a, b, n_boot=100)
    b.budgets = dict(a.budgets)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter('error')
        compare(a, b, n_boot=100)


def test_a_part_of_a_campaign_keeps_its_budgets_so_comparing_parts_still_warns():
    from thinkingbox_training.budgets import BudgetsDiffer

    a, b = camp([2, 1, 0], 2), camp([2, 2, 1], 2, policy_id='t')
    a.budgets = {'source': 'run', 'max_turns': 7, 'max_tokens_per_turn': 96, 'max_episode_tokens': 8192}
    b.budgets = {'source': 'run', 'max_turns': 10, 'max_tokens_per_turn': 96, 'max_episode_tokens': 8192}
    mask = np.array([True, False, True])
    pa, pb = a.subset(mask), b.subset(mask)
    assert pa.uids == [a.uids[0], a.uids[2]] and pa.rewards.tolist() == [[1, 1], [0, 0]] and len(pa.records) == 4
    assert (pa.budgets, pb.budgets) == (a.budgets, b.budgets)
    with pytest.warns(BudgetsDiffer, match='7 turns'):
        compare(pa, pb, n_boot=100)
    assert a.first_k(1).budgets == a.budgets and a.first_k(1).rewards.tolist() == [[1], [1], [0]]
    with pytest.raises(ValueError, match='fewer than 3'):
        a.first_k(3)


def test_one_brief_of_a_campaign_serves_every_report():
    from thinkingbox_training.metrics import BRIEF

    c = camp([4, 0, 2, 4], 4)
    s = summarize(c.rewards)
    full = c.brief(n_boot=200)
    assert list(full) == list(BRIEF)
    assert (full['pass@k'], full['observed_kk'], full['observed_kk_rate']) == (0.75, 2, 0.5)
    assert {k: full[k] for k in ('tasks', 'k', 'pass@1', 'pass@1_lo', 'pass@1_hi', 'attempts')} == {
        k: s[k] for k in ('tasks', 'k', 'pass@1', 'pass@1_lo', 'pass@1_hi', 'attempts')
    }
    assert full['observed_kk_lo'] <= 0.5 <= full['observed_kk_hi']
    assert list(c.brief(('observed_kk', 'tasks'))) == ['observed_kk', 'tasks']  # the caller's order
    with pytest.raises(ValueError, match='unknown figure.*pass@4'):
        c.brief(('pass@4',))
