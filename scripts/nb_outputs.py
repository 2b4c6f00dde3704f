"""The outputs committed in the notebooks that teach: written, linted and checked for staleness.

A code cell keeps its outputs in git only when its source has the line `#| keep_output`; every other cell is committed
without outputs. Keep small, deterministic outputs (a rendered template, a parsed call, a table); leave timings, memory,
paths and progress bars untagged.

    python scripts/nb_outputs.py write nbs/00_interpret.ipynb   # execute, keep the tagged cells' outputs, nbdev-clean
    python scripts/nb_outputs.py lint                           # no execution: untagged cells carry no outputs
    python scripts/nb_outputs.py check                          # re-execute (temp copies) and diff the kept outputs

Notebooks run the way `nbdev-test` runs them (in-process shell, the notebook's folder as working directory, cells with
`#| eval: false` or a test flag such as `slow` skipped). `check` exits 1 naming the notebook, the cell and a short diff.
"""
from __future__ import annotations
import argparse, difflib, json, os, re, subprocess, sys, tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

KEEP = '#| keep_output'
ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'


def _src(cell) -> str:
    s = cell.get('source', '')
    return s if isinstance(s, str) else ''.join(s)

def kept(cell) -> bool:
    "Does this cell keep its outputs in git?"
    return cell.get('cell_type') == 'code' and any(l.strip() == KEEP for l in _src(cell).splitlines())

def tagged_notebooks(root:Path=NBS) -> list[Path]:
    "The notebooks with at least one `#| keep_output` cell."
    nbs = sorted(p for p in root.rglob('*.ipynb') if '.ipynb_checkpoints' not in p.parts)
    return [p for p in nbs if any(kept(c) for c in json.loads(p.read_text())['cells'])]

def execute(path:Path) -> list[list]:
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
        shell.run_all(nb, exc_stop=True, preproc=_skip_cell(nb, ['slow', 'cuda']), cell_timeout=600)
    return [[_plain(o) for o in c.get('outputs', [])] for c in nb.cells]

def _plain(o) -> dict:
    "An output as plain JSON (execnb gives AttrDicts), without its execution count."
    o = json.loads(json.dumps(o))
    o.pop('execution_count', None)
    return o

def write(path:Path) -> None:
    "Execute `path`, keep the outputs of its tagged cells, drop all others, then nbdev-clean it."
    path = Path(path)
    outs = execute(path)
    nb = json.loads(path.read_text())
    assert len(nb['cells']) == len(outs), f'{path}: {len(nb["cells"])} cells in the file, {len(outs)} executed'
    for cell, out in zip(nb['cells'], outs):
        if cell['cell_type'] != 'code': continue
        cell['outputs'] = [dict(o, execution_count=None) if o.get('output_type') == 'execute_result' else o
                           for o in out] if kept(cell) else []
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')
    subprocess.run([str(Path(sys.executable).parent/'nbdev-clean'), '--fname', str(path)], check=True, cwd=ROOT)
    print(f'{path.relative_to(ROOT)}: {sum(kept(c) for c in nb["cells"])} kept cells, {path.stat().st_size:,} bytes')

_ADDR = re.compile(r'0x[0-9a-f]{6,}')

def comparable(outputs:list) -> list[str]:
    "Outputs as lines to diff: text as is (trailing spaces and memory addresses dropped), images by kind only."
    lines = []
    for o in outputs:
        kind = o.get('output_type')
        if kind == 'stream': texts = [(o.get('name', 'stdout'), o.get('text', ''))]
        elif kind == 'error': texts = [('error', f"{o.get('ename')}: {o.get('evalue')}")]
        else:
            data = o.get('data', {})
            texts = [(m, data[m]) for m in ('text/markdown', 'text/html', 'text/latex') if m in data]
            texts += [(m, '') for m in sorted(data) if m.startswith('image/')]  # a figure's pixels vary by library
            if not texts and 'text/plain' in data: texts = [('text/plain', data['text/plain'])]
        for name, t in texts:
            t = t if isinstance(t, str) else ''.join(t)
            lines += [f'[{name}]'] + [_ADDR.sub('0x…', l.rstrip()) for l in t.splitlines()]
    return lines

def lint(paths:list[Path]) -> list[str]:
    "Problems found without executing: outputs on untagged cells, tagged cells with no committed output."
    probs = []
    for p in paths:
        for i, c in enumerate(json.loads(Path(p).read_text())['cells']):
            if c['cell_type'] != 'code': continue
            name = f'{Path(p).relative_to(ROOT)} cell {i} ({c.get("id", "?")})'
            if c.get('outputs') and not kept(c): probs.append(f'{name}: outputs on a cell without `{KEEP}`')
            if kept(c) and not c.get('outputs'): probs.append(f'{name}: `{KEEP}` but no output committed')
    return probs

def stale(path:Path, fresh:list[list] | None = None, max_lines:int=20) -> list[str]:
    "The kept cells of `path` whose committed outputs differ from a fresh run (a temp copy is executed)."
    path = Path(path)
    nb = json.loads(path.read_text())
    if fresh is None:
        with tempfile.TemporaryDirectory(dir=path.parent, prefix='.outputs-') as d:
            tmp = Path(d)/path.name
            tmp.write_text(path.read_text())
            fresh = execute(tmp)
    probs = []
    for i, (cell, out) in enumerate(zip(nb['cells'], fresh)):
        if not kept(cell): continue
        old, new = comparable(cell.get('outputs', [])), comparable(out)
        if old == new: continue
        diff = list(difflib.unified_diff(old, new, 'committed', 'fresh', lineterm='', n=1))
        more = f'\n    ... {len(diff) - max_lines} more diff lines' if len(diff) > max_lines else ''
        rel = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        probs.append(f'{rel} cell {i} ({cell.get("id", "?")}): committed output is stale\n    '
                     + '\n    '.join(diff[:max_lines]) + more)
    return probs

def _stale_or_error(path:Path) -> list[str]:
    try: return stale(path)
    except BaseException as e: return [f'{Path(path).relative_to(ROOT)}: did not run: {type(e).__name__}: {e}']

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('action', choices=['write', 'lint', 'check'])
    ap.add_argument('paths', nargs='*', type=Path, help='notebooks (default: every notebook with a kept cell)')
    ap.add_argument('--n-workers', type=int, default=2)
    a = ap.parse_args(argv)
    paths = [p.resolve() for p in a.paths] or tagged_notebooks()
    if a.action == 'write':
        for p in paths: write(p)
        return 0
    probs = lint(paths if a.paths else sorted(NBS.rglob('*.ipynb')))
    if a.action == 'check' and not probs:
        with ProcessPoolExecutor(a.n_workers) as ex: probs = [q for qs in ex.map(_stale_or_error, paths) for q in qs]
    for q in probs: print(f'FAIL: {q}')
    if probs: print(f'Refresh with: .venv/bin/python scripts/nb_outputs.py write <notebook>')
    else: print(f'notebook outputs: {len(paths)} notebooks ok ({a.action})')
    return 1 if probs else 0

if __name__ == '__main__': sys.exit(main())
