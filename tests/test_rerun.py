"""`make train` then `make test`: a rerun of the main job rewrites what it measures anew (the stages' times in
summary.json, each attempt's duration_s), and neither the pool's manifest nor a kept output of the results notebook
may change with them, or the committed outputs would read as stale to someone who edited nothing."""

import importlib.util, json, shutil
from pathlib import Path

ROOT = Path(__file__).parent.parent
RUN = ROOT / 'data' / 'runs' / 'tiny-cpu'
RESULTS = ROOT / 'nbs' / 'results' / '00_tiny_cpu.ipynb'

_spec = importlib.util.spec_from_file_location('nb_outputs', ROOT / 'scripts' / 'nb_outputs.py')
nb_outputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nb_outputs)


def _rerun_of_committed_run(dst: Path) -> Path:
    "The committed run copied to `dst`, with every field a rerun measures anew set to other values."
    shutil.copytree(RUN, dst)
    s = json.loads((dst / 'summary.json').read_text())
    assert set(s['times']) == {'probe_s', 'select_s', 'train_s', 'evaluate_s', 'wall_s'}, s['times']
    s['times'] = {k: round(v * 1.37 + 11, 3) for k, v in s['times'].items()}
    if 'resources' in s:  # what the job used (CPU, cores busy, peak memory): measured anew as well
        s['resources'] = {k: round(v * 1.37 + 11, 3) if isinstance(v, float) else v for k, v in s['resources'].items()}
    (dst / 'summary.json').write_text(json.dumps(s, indent=1, sort_keys=True) + '\n')
    exports = sorted(dst.glob('*/attempts.jsonl'))
    assert [p.parent.name for p in exports] == ['eval-base', 'eval-trained', 'probe'], exports
    for p in exports:
        recs = [json.loads(line) for line in p.read_text().splitlines()]
        p.write_text(''.join(json.dumps(dict(r, duration_s=r['duration_s'] * 0.5 + 3)) + '\n' for r in recs))
    return dst


def _pointed_at(nb_path: Path, run: Path, out: Path) -> Path:
    "A copy of the results notebook at `out` that reads `run` instead of the committed run."
    nb = json.loads(nb_path.read_text())
    line = "run = project_dir() / 'data' / 'runs' / 'tiny-cpu'"
    cell = next(c for c in nb['cells'] if line in ''.join(c['source']))
    cell['source'] = ''.join(cell['source']).replace(line, f'from pathlib import Path\nrun = Path({str(run)!r})')
    out.write_text(json.dumps(nb))
    return out


def test_a_rerun_changes_no_kept_output_of_the_results_notebook(tmp_path):
    run = _rerun_of_committed_run(tmp_path / 'tiny-cpu')
    fresh = nb_outputs.execute(_pointed_at(RESULTS, run, tmp_path / RESULTS.name))
    cells = json.loads(RESULTS.read_text())['cells']
    kept = [i for i, c in enumerate(cells) if nb_outputs.kept(c)]
    assert len(kept) >= 3 and len(fresh) == len(cells)
    for i in kept:
        assert nb_outputs.comparable(fresh[i]) == nb_outputs.comparable(cells[i]['outputs']), f'cell {i}'
    # the rerun's times did reach the notebook: printed by an untagged cell, so never committed
    wall = json.loads((run / 'summary.json').read_text())['times']['wall_s']
    printed = [i for i, out in enumerate(fresh) if f'wall_s {wall:.0f} s' in '\n'.join(nb_outputs.comparable(out))]
    assert printed and not any(nb_outputs.kept(cells[i]) for i in printed), printed
    # and the tables the notebook regenerates from the rerun are the committed ones
    for p in sorted((RUN / 'tables').iterdir()):
        assert (run / 'tables' / p.name).read_text() == p.read_text(), p.name


def test_a_rerun_writes_the_same_pool_manifest(tmp_path):
    "The manifest names the probes by what selection reads, so durations and record order leave it as committed."
    from thinkingbox_training.metrics import read_attempts
    from thinkingbox_training.pipeline import write_pool

    bench = json.loads((RUN / 'eval-base' / 'campaign.json').read_text())['tasks']
    first = read_attempts(RUN / 'probe' / 'attempts.jsonl')
    rerun = [dict(r, duration_s=r['duration_s'] * 0.5 + 3) for r in reversed(first)]
    written = []
    for name, recs in (('first', first), ('rerun', rerun)):
        d = tmp_path / name
        (d / 'probe').mkdir(parents=True)
        shutil.copy(RUN / 'probe' / 'campaign.json', d / 'probe')
        write_pool(d, recs, bench, figures=False)
        written.append((d / 'pool' / 'manifest.json').read_text())
    assert written[0] == written[1]
    committed = json.loads((RUN / 'pool' / 'manifest.json').read_text())
    committed['outputs'] = {k: v for k, v in committed['outputs'].items() if not k.endswith('.png')}  # figures=False
    assert json.loads(written[1]) == committed
