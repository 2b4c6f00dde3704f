"""The outputs committed in the notebooks that teach: written, linted and checked for staleness.

A code cell keeps its outputs in git only when its source has the line `#| keep_output`; every other cell is committed
without outputs, and no cell keeps its stderr (warnings, log lines with timestamps, progress bars). Tag cells whose
stdout, results and figures are small and the same on every run (a rendered template, a parsed call, a table); leave
timings, memory and temporary paths untagged.

    python scripts/nb_outputs.py write nbs/00_interpret.ipynb   # execute, keep the tagged cells' outputs, nbdev-clean
    python scripts/nb_outputs.py lint                           # no execution: untagged cells carry no outputs
    python scripts/nb_outputs.py check                          # re-execute (in memory) and diff the kept outputs
    python scripts/nb_outputs.py skip-re                        # for `nbdev-test --skip-file-re`: check runs those

Notebooks run the way `nbdev-test` runs them (in-process shell, the notebook's folder as working directory, cells with
`#| eval: false` or a test flag such as `slow` skipped). `check` exits 1 naming the notebook, the cell and a short diff,
or with the traceback when a cell raises, so `make test` runs the tagged notebooks once, here, instead of in nbdev-test.
"""

from __future__ import annotations
import argparse, difflib, json, os, re, subprocess, sys, time, traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

KEEP = '#| keep_output'
ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT / 'nbs'


def _src(cell) -> str:
    s = cell.get('source', '')
    return s if isinstance(s, str) else ''.join(s)


def kept(cell) -> bool:
    "Does this cell keep its outputs in git?"
    return cell.get('cell_type') == 'code' and any(l.strip() == KEEP for l in _src(cell).splitlines())


def notebooks(root: Path = NBS) -> list[Path]:
    "The notebooks under `root`, leaving out hidden folders (`.ipynb_checkpoints`)."
    return sorted(p for p in root.rglob('*.ipynb') if not any(s.startswith('.') for s in p.relative_to(root).parts))


def tagged_notebooks(root: Path = NBS) -> list[Path]:
    "The notebooks with at least one `#| keep_output` cell."
    return [p for p in notebooks(root) if any(kept(c) for c in json.loads(p.read_text())['cells'])]


def _rel(path: Path, root: Path = ROOT) -> Path:
    path = Path(path).resolve()
    return path.relative_to(root.resolve()) if path.is_relative_to(root.resolve()) else path


def execute(path: Path) -> list[list]:
    "Execute `path` as nbdev-test does; the outputs of each of its cells, in order ([] for cells not run)."
    from execnb.shell import CaptureShell
    from fastcore.xtras import working_directory
    from nbdev.process import NBProcessor
    from nbdev.test import _skip_cell

    path = Path(path).resolve()
    os.environ['IN_TEST'] = '1'
    nb = NBProcessor(path, rm_directives=False, process=True).nb
    shell = CaptureShell(path)
    with working_directory(path.parent):
        try:
            shell.run_all(nb, exc_stop=True, preproc=_skip_cell(nb, ['slow', 'cuda']), cell_timeout=600)
        except BaseException as e:
            raise RuntimeError(shell.prettytb(fname=path) or traceback.format_exc()) from e
    return [[_plain(o) for o in c.get('outputs', []) if not _stderr(o)] for c in nb.cells]


def _stderr(o) -> bool:
    return o.get('output_type') == 'stream' and o.get('name') == 'stderr'


def _plain(o) -> dict:
    "An output as plain JSON (execnb gives AttrDicts), without its execution count or library log records."
    o = json.loads(json.dumps(o))
    o.pop('execution_count', None)
    if o.get('output_type') == 'stream':
        o['text'] = _without_logs(o['text'] if isinstance(o['text'], str) else ''.join(o['text']))
    return o


def write(path: Path) -> None:
    "Execute `path`, keep the outputs of its tagged cells, drop all others, then nbdev-clean it."
    path = Path(path)
    outs = execute(path)
    nb = json.loads(path.read_text())
    assert len(nb['cells']) == len(outs), f'{path}: {len(nb["cells"])} cells in the file, {len(outs)} executed'
    for cell, out in zip(nb['cells'], outs):
        if cell['cell_type'] != 'code':
            continue
        cell['outputs'] = (
            [dict(o, execution_count=None) if o.get('output_type') == 'execute_result' else o for o in out]
            if kept(cell)
            else []
        )
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')
    subprocess.run([str(Path(sys.executable).parent / 'nbdev-clean'), '--fname', str(path)], check=True, cwd=ROOT)
    print(f'{_rel(path)}: {sum(kept(c) for c in nb["cells"])} kept cells, {path.stat().st_size:,} bytes')


_ADDR = re.compile(r'0x[0-9a-f]{6,}')
# A library's timestamped log record (DeepSpeed announces its accelerator this way when the `gpu` extra is installed)
# depends on the machine and the clock, so it is neither kept nor compared.
_LOG = re.compile(r'^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}\] \[(DEBUG|INFO|WARNING)\] ')


def _without_logs(text: str) -> str:
    return ''.join(l for l in text.splitlines(keepends=True) if not _LOG.match(l))


def comparable(outputs: list) -> list[str]:
    "Outputs as lines to diff: text as is (trailing spaces and memory addresses dropped), images by kind only."
    lines = []
    for o in outputs:
        if _stderr(o):
            continue
        kind = o.get('output_type')
        if kind == 'stream':
            texts = [(o.get('name', 'stdout'), o.get('text', ''))]
        elif kind == 'error':
            texts = [('error', f'{o.get("ename")}: {o.get("evalue")}')]
        else:
            data = o.get('data', {})
            texts = [(m, data[m]) for m in ('text/markdown', 'text/html', 'text/latex') if m in data]
            texts += [(m, '') for m in sorted(data) if m.startswith('image/')]  # a figure's pixels vary by library
            if not texts and 'text/plain' in data:
                texts = [('text/plain', data['text/plain'])]
        for name, t in texts:
            t = _without_logs(t if isinstance(t, str) else ''.join(t))
            lines += [f'[{name}]'] + [_ADDR.sub('0x…', l.rstrip()) for l in t.splitlines()]
    return lines


def lint(paths: list[Path], root: Path = ROOT) -> list[str]:
    "Problems found without executing: outputs on untagged cells, tagged cells with no committed output."
    probs = []
    for p in paths:
        for i, c in enumerate(json.loads(Path(p).read_text())['cells']):
            if c['cell_type'] != 'code':
                continue
            name = f'{_rel(p, root)} cell {i} ({c.get("id", "?")})'
            if c.get('outputs') and not kept(c):
                probs.append(f'{name}: outputs on a cell without `{KEEP}`')
            if kept(c) and not c.get('outputs'):
                probs.append(f'{name}: `{KEEP}` but no output committed')
    return probs


def stale(path: Path, fresh: list[list] | None = None, max_lines: int = 20) -> list[str]:
    "The kept cells of `path` whose committed outputs differ from a fresh run (in memory: the file is not written)."
    path = Path(path)
    nb = json.loads(path.read_text())
    if fresh is None:
        fresh = execute(path)
    probs = []
    for i, (cell, out) in enumerate(zip(nb['cells'], fresh)):
        if not kept(cell):
            continue
        old, new = comparable(cell.get('outputs', [])), comparable(out)
        if old == new:
            continue
        diff = list(difflib.unified_diff(old, new, 'committed', 'fresh', lineterm='', n=1))
        more = f'\n    ... {len(diff) - max_lines} more diff lines' if len(diff) > max_lines else ''
        probs.append(
            f'{_rel(path)} cell {i} ({cell.get("id", "?")}): committed output is stale\n    '
            + '\n    '.join(diff[:max_lines])
            + more
        )
    return probs


def _stale_or_error(path: Path) -> list[str]:
    try:
        return stale(path)
    except BaseException as e:
        return [f'{_rel(path)}: a cell failed:\n{e}']


def _timed(path: Path) -> tuple[list[str], float]:
    t = time.time()
    return _stale_or_error(path), time.time() - t


def skip_re(paths: list[Path]) -> str:
    "A `--skip-file-re` for nbdev-test: its default (`^[_.]`) plus the file names of `paths` (which must be unique)."
    names, tagged = [p.name for p in notebooks()], {p.name for p in paths}
    clash = sorted(n for n in tagged if names.count(n) > 1)
    if clash:
        raise SystemExit(f'nb_outputs: notebook names used twice, nbdev-test cannot skip one only: {clash}')
    return '^([_.]|' + '|'.join(re.escape(n) + '$' for n in sorted(tagged)) + ')'


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('action', choices=['write', 'lint', 'check', 'skip-re'])
    ap.add_argument('paths', nargs='*', type=Path, help='notebooks (default: every notebook with a kept cell)')
    ap.add_argument('--n-workers', type=int, default=2)
    a = ap.parse_args(argv)
    paths = [p.resolve() for p in a.paths] or tagged_notebooks()
    if a.action == 'write':
        for p in paths:
            write(p)
        return 0
    if a.action == 'skip-re':
        print(skip_re(paths))
        return 0
    probs = lint(paths if a.paths else notebooks())
    if a.action == 'check' and not probs:
        # by module name, not `__main__`: an executed notebook replaces `__main__` in the worker that ran it
        sys.path.insert(0, str(Path(__file__).parent))
        import nb_outputs

        with ProcessPoolExecutor(a.n_workers) as ex:
            done = list(ex.map(nb_outputs._timed, paths))
        for p, (_, secs) in zip(paths, done):
            print(f'{_rel(p)}: {secs:.1f}s')  # printed here: a run captures stdout
        probs = [q for qs, _ in done for q in qs]
    for q in probs:
        print(f'FAIL: {q}')
    if probs:
        print('Refresh with: make outputs NB=<notebook> (scripts/nb_outputs.py write), then commit')
    else:
        print(f'notebook outputs: {len(paths)} notebooks ok ({a.action})')
    return 1 if probs else 0


if __name__ == '__main__':
    sys.exit(main())
