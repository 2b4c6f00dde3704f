"""The coverage comparison's registered design (data/runs/coverage) and the lab's power tools (tbt_lab.coverage)."""

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from tbt_lab.coverage import effect_profile, lost_gained, pass_at, seed_permutation, simulate_power
from tbt_lab.study import Study, train_argv

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / 'data' / 'runs' / 'coverage'


def test_pass_at_is_the_share_of_m_subsets_holding_a_success():
    "The estimator equals brute force: of all C(n, m) subsets of the attempts, the share with a success."
    n = 6
    for c in range(n + 1):
        att = [1] * c + [0] * (n - c)
        for m in range(1, n + 1):
            subsets = list(itertools.combinations(att, m))
            assert pass_at(np.array([c]), n, m)[0] == pytest.approx(np.mean([any(s) for s in subsets]))
    with pytest.raises(ValueError, match='pass@7 from 6 attempts'):
        pass_at(np.array([1]), 6, 7)


def test_lost_gained_counts_against_the_base():
    assert lost_gained([2, 2, 0, 0], [0, 1, 3, 0]) == {'base_solved': 2, 'lost': 1, 'base_unsolved': 2, 'gained': 1}


def test_seed_permutation_is_exact_and_has_its_floor():
    "Five seeds a side: 252 splits, floor 2/252; a split with no separation is not significant."
    r = seed_permutation([0.1, 0.2, 0.3, 0.4, 0.5], [0.6, 0.7, 0.8, 0.9, 1.0])
    assert r['splits'] == 252 and r['p'] == pytest.approx(2 / 252) == pytest.approx(r['floor'])
    assert seed_permutation([0.1, 0.6, 0.3, 0.8, 0.5], [0.2, 0.7, 0.4, 0.9, 0.5])['p'] > 0.5


def test_simulated_power_rises_with_the_effect_and_seeds_random_holds_its_level():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.05, 0.6, 120)
    R = np.stack([rng.random((120, 8)) < np.clip(p + o, 0, 1)[:, None] for o in rng.normal(0, 0.05, 6)]).astype(int)
    fams = np.repeat(np.arange(8), 15)
    null = simulate_power(R, fams, 3, 8, 4, reps=200)
    alt = simulate_power(R, fams, 3, 8, 4, effect=np.full(120, 0.3), reps=200)
    assert null['seeds_random'] <= 0.1 < null['tasks']  # seed shifts fool the test over tasks, not seeds random
    assert alt['seeds_random'] > 0.8 and alt['effect'] == pytest.approx(0.3)


def test_effect_profile_scales_the_observed_shape_to_the_target():
    e = effect_profile([[0, 2, 10], [0, 4, 10]], [[1, 2, 10], [0, 6, 10]], [0.1, 0.4, 1.0], n=10, m=10, target=0.05)
    assert e.mean() == pytest.approx(0.05) and e[2] == 0


def test_the_design_runs_with_the_study_runner():
    "design.json's parts read as the runner's stages, their estimates add up, the tasks and recipes are as registered."
    design = json.loads((HERE / 'design.json').read_text())
    runner = Study(dir='data/runs/coverage')
    sums = [round(sum(s.estimated_min for s in runner.part(p)), 1) for p in (1, 2, 3, 4)]
    assert sums == [p['minutes'] for p in design['parts']] and sum(sums) <= design['compute']['cap_min']
    assert len(runner.tasks('bench')) == design['tasks']['varied'] == 305
    assert sum(t.held_out_family for t in runner.tasks('bench')) == design['tasks']['held_out_family']
    for f, h in design['tasks']['files_sha256'].items():
        assert hashlib.sha256((ROOT / f).read_bytes()).hexdigest() == h, f
    trains = {s.out: s for s in runner.stages if s.kind == 'train'}
    assert sorted(trains) == sorted(
        ['plain-seed0/model'] + [f'{a}-seed{s}/model' for a in ('passk', 'matched') for s in range(5)]
    )
    for arm in ('plain', 'passk', 'matched'):
        a = design['arms'][arm]
        assert hashlib.sha256((ROOT / a['recipe']).read_bytes()).hexdigest() == a['recipe_sha256']
        cfg = runner.config(a['recipe'])
        assert (cfg.max_steps, cfg.scale_rewards) == (a['steps'], a['scale_rewards'])
    argv = train_argv(runner, trains['passk-seed3/model'])
    assert argv[argv.index('--config') + 1].endswith('data/runs/coverage/recipes/passk_pkpo.yaml')
    assert argv[argv.index('--seed') + 1] == '3' and argv[argv.index('--save_steps') + 1] == '6'
