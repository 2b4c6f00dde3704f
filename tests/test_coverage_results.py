"""The coverage comparison's results notebook (nbs/results/07_coverage.ipynb), run end to end on a small synthetic
checkout with the comparison's layout: its stopping rule, and every analysis cell once the design may be read."""

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / 'data' / 'runs' / 'coverage'
NB = ROOT / 'nbs' / 'results' / '07_coverage.ipynb'
K = 20


def _tasks() -> dict:
    "file name -> the first task of each of two families in that varied task file (raw lines)."
    out = {}
    for f in sorted((HERE / 'tasks').glob('*.jsonl')):
        lines, fams = [], set()
        for line in f.read_text().splitlines():
            fam = json.loads(line)['family']
            if fam not in fams and len(fams) < 2:
                fams.add(fam)
                lines.append(line)
        out[f.name] = lines
    return out


def _log(path: Path, steps: int, seed: int, passk: bool):
    "A training log of `steps` steps, four useful groups of 8 each; the same seed gives the same steps."
    rng = np.random.default_rng(seed)
    st = []
    for i in range(24):
        groups = [[[f'train-{i}-{g}', j, int(r)] for j, r in enumerate(rng.random(8) < 0.4)] for g in range(5)]
        kinds = ['useful'] * 4 + ['zero_variance']
        st.append({'step': i, 'groups': groups, 'kinds': kinds, 'selected': [0, 1, 2, 3], 'passk_k': None})
    for i in range(steps):
        st[i]['passk_k'] = max(1, 4 - 3 * i // (steps - 1)) if passk else None
    hist = [{'step': i + 1, 'loss': round(0.01 * i, 4)} for i in range(steps)]
    path.mkdir(parents=True, exist_ok=True)
    (path / 'training_log.json').write_text(json.dumps({'steps': st[:steps], 'log_history': hist}))


def _campaign(path: Path, tasks: list, p: np.ndarray, rng, policy: str):
    path.mkdir(parents=True, exist_ok=True)
    recs = [
        {
            'campaign': 'bench-k20',
            'task_uid': t['uid'],
            'repetition': j,
            'reward': int(rng.random() < pi),
            'status': 'ok',
            'domain': t['domain'],
            'family': t['family'],
            'held_out_family': t['held_out_family'],
            'policy_id': policy,
        }
        for t, pi in zip(tasks, p)
        for j in range(K)
    ]
    (path / 'attempts.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in recs))
    meta = {'campaign': 'bench-k20', 'tasks': [t['uid'] for t in tasks], 'k': K, 'policy': policy}
    (path / 'campaign.json').write_text(json.dumps(meta))


def checkout(tmp: Path, missing=(), parts: dict = None, shift: float = 0.3) -> Path:
    "A synthetic checkout: the registered design on a few tasks, every policy's campaign but `missing`, trained."
    design = json.loads((HERE / 'design.json').read_text())
    here = tmp / 'data' / 'runs' / 'coverage'
    (here / 'tasks').mkdir(parents=True)
    tasks = []
    for name, lines in _tasks().items():
        (here / 'tasks' / name).write_text(''.join(x + '\n' for x in lines))
        tasks += [json.loads(x) for x in lines]
    held = sum(t['held_out_family'] for t in tasks)
    design['tasks'].update(varied=len(tasks), held_out_family=held, in_family=len(tasks) - held)
    (here / 'design.json').write_text(json.dumps(design))
    extra = [dict(tasks[0], uid=f'retail/extra/bench-9-000{i}') for i in range(2)]  # reused campaigns cover more
    rng = np.random.default_rng(0)
    p = rng.uniform(0.0, 0.04, len(tasks) + 2)  # pass@20 spread between 0 and 1
    reused = design['evaluation']['reused']
    _campaign(tmp / reused['base'], tasks + extra, p, rng, 'base')
    for d in ('study/seed0', 'passk/passk-seed0', 'passk/passk-seed1', 'passk/passk-seed2'):  # the design's power
        q = np.clip(p + (0.1 if 'passk-' in d else 0), 0, 1)
        _campaign(tmp / 'data/runs' / d / 'bench-k20', tasks + extra, q, rng, d)
    _log(tmp / 'data/runs/study/seed0/model', 24, 0, False)
    for arm in ('plain', 'passk', 'matched'):
        for s in design['arms'][arm]['seeds']:
            lab = f'{arm} seed {s}'
            camp = tmp / reused[lab] if lab in reused else here / f'{arm}-seed{s}/bench-k20'
            _log(camp.parent / 'model', design['arms'][arm]['steps'], s, arm == 'passk')
            if lab not in missing:
                q = np.clip(p + rng.normal(0, 0.005) + (shift if arm == 'passk' else 0), 0, 1)
                _campaign(camp, tasks + extra if lab in reused else tasks, q, rng, lab)
    if parts:
        log = {str(n): {'invocations': [{'stages': {}, 'wall_s': 60 * m}], 'wall_s': 60 * m} for n, m in parts.items()}
        (here / 'parts.json').write_text(json.dumps({'parts': log}))
    return tmp


def run_notebook(root: Path, monkeypatch) -> list:
    "Every code cell of the results notebook on checkout `root`: the text each printed."
    monkeypatch.setenv('TBT_COVERAGE_ROOT', str(root))
    monkeypatch.chdir(NB.parent)
    ns, out = {}, []
    for c in json.loads(NB.read_text())['cells']:
        if c['cell_type'] == 'code':
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                exec(''.join(c['source']), ns)
            out.append(buf.getvalue())
    return out


def test_an_incomplete_design_shows_which_policies_are_evaluated_and_no_arm_difference(tmp_path, monkeypatch):
    out = run_notebook(checkout(tmp_path, missing=('passk seed 4',)), monkeypatch)
    text = '\n'.join(out)
    assert '| passk seed 4 | yes (17 steps) | not yet |' in text and 'evaluated: 13 of 14 policies' in text
    assert 'the design is incomplete' in text and 'not evaluated yet: passk seed 4' in text
    assert 'seeds random' not in text and 'H1' not in text and 'lost' not in text  # no test, no difference
    assert sum('design incomplete: no arm difference is computed (1 evaluations missing)' in o for o in out) == 4
    assert out[-1].startswith('The design is incomplete: 13 of 14 policies are evaluated')


def test_a_complete_design_runs_every_registered_analysis_each_naming_its_unit(tmp_path, monkeypatch):
    out = run_notebook(checkout(tmp_path), monkeypatch)
    text = '\n'.join(out)
    assert 'the design is complete' in text and 'evaluated: 14 of 14 policies' in text
    for unit in ('the training seed (random) and the task', 'the seed: exact permutation', 'the family (seeds fixed)'):
        assert unit in text
    assert 'seeds (matched, pass@k): [5, 5]' in text
    # no task solved 20/20 by any policy: a change of 0 with no spread reads p 1 at every unit, not p 0
    assert '| passk - matched | all (8) | 20/20 | +0.00 [+0.00, +0.00] p 1 | 1 | +0.00 [+0.00, +0.00] p 1 |' in text
    for contrast in ('passk - matched', 'passk - plain', 'matched - plain'):
        assert f'{contrast}, seeds random (unit: the training seed and the task)' in text  # its pass@m curve
        assert f'{contrast}, lost:' in text and f'{contrast}, gained:' in text
    said = 'the same groups and rewards at all 17 steps, equal losses'
    assert f'matched seed 0 against data/runs/coverage/plain-seed0/model: {said}' in text
    assert 'k by step' in text and 'episodes in all: plain' in text
    answer = out[-1].splitlines()
    assert answer[0].startswith('H1, seeds random (the registered answer; unit: the training seed and the task')
    assert 'higher' in answer[0] and len(answer) == 8  # the planted +0.3 on the pass@k arm's success chance


def test_the_cap_stops_the_design_with_three_seeds_a_side_and_h1_is_read_on_them(tmp_path, monkeypatch):
    late = [f'{a} seed {s}' for s in (3, 4) for a in ('passk', 'matched')]
    out = run_notebook(checkout(tmp_path, missing=late, parts={1: 100, 2: 90, 3: 80, 4: 90}), monkeypatch)
    text = '\n'.join(out)
    assert 'spent so far: 360.0 min of the cap of 360 min' in text
    assert (
        'the design is stopped by the cap' in text
        and 'H1 on the seeds evaluated in both primary arms: [0, 1, 2]' in text
    )
    assert 'seeds (matched, pass@k): [3, 3]' in text and 'power of H1 (seeds random) at 3 seeds a side' in text
    assert (
        'The cap stopped the design: H1 is tested on seeds [0, 1, 2] of both primary arms, where its power' in out[-1]
    )


@pytest.mark.parametrize('parts', [{1: 60, 2: 60, 3: 60, 4: 100}, {1: 100, 2: 90, 3: 80, 4: 60}])
def test_short_of_the_cap_or_within_its_plan_the_same_evaluations_leave_it_incomplete(tmp_path, monkeypatch, parts):
    late = [f'{a} seed {s}' for s in (3, 4) for a in ('passk', 'matched')]
    out = run_notebook(checkout(tmp_path, missing=late, parts=parts), monkeypatch)
    assert 'the design is incomplete' in '\n'.join(out) and 'H1' not in '\n'.join(out)
