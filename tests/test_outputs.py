"The check of committed notebook outputs (scripts/nb_outputs.py) fails on a stale output and passes on a fresh one."

import importlib.util, json
from pathlib import Path

_spec = importlib.util.spec_from_file_location('nb_outputs', Path(__file__).parent.parent / 'scripts' / 'nb_outputs.py')
nb_outputs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(nb_outputs)


def _nb(path: Path, cells: list) -> Path:
    "A notebook at `path` of code cells given as (source, committed stdout or None)."

    def cell(i, src, out):
        outs = [] if out is None else [{'name': 'stdout', 'output_type': 'stream', 'text': [out]}]
        return {
            'cell_type': 'code',
            'execution_count': None,
            'id': f'c{i}',
            'metadata': {},
            'outputs': outs,
            'source': src,
        }

    nb = {
        'cells': [cell(i, s, o) for i, (s, o) in enumerate(cells)],
        'metadata': {},
        'nbformat': 4,
        'nbformat_minor': 5,
    }
    path.write_text(json.dumps(nb, indent=1))
    return path


def test_stale_output_fails_with_cell_and_diff(tmp_path):
    p = _nb(
        tmp_path / 'demo.ipynb',
        [('x = 2', None), ('#| keep_output\nprint(x + 1)', '3\n'), ('#| keep_output\nprint(x * 10)', '10\n')],
    )  # stale: x is 2 now
    probs = nb_outputs.stale(p)
    assert len(probs) == 1, probs
    assert 'demo.ipynb cell 2 (c2): committed output is stale' in probs[0]
    assert '-10' in probs[0] and '+20' in probs[0]


def test_fresh_outputs_pass_and_images_compare_by_kind():
    committed = [
        {'output_type': 'display_data', 'data': {'image/png': 'AAAA', 'text/plain': ['<Image>']}, 'metadata': {}}
    ]
    fresh = [{'output_type': 'display_data', 'data': {'image/png': 'BBBB', 'text/plain': ['<Image>']}, 'metadata': {}}]
    assert nb_outputs.comparable(committed) == nb_outputs.comparable(fresh) == ['[image/png]']


def test_library_log_records_are_neither_kept_nor_compared(tmp_path):
    "A timestamped log record (DeepSpeed's accelerator line, gpu extra installed) does not make an output stale."
    log = '[2026-12-02 06:26:30,865] [WARNING] [real_accelerator.py:213:get_accelerator] Setting accelerator to CPU.\n'
    p = _nb(tmp_path / 'demo.ipynb', [('#| keep_output\nprint(' + repr(log.strip()) + '); print(3)', '3\n')])
    assert nb_outputs.stale(p) == []
    fresh = [{'output_type': 'stream', 'name': 'stdout', 'text': log + '3\n'}]
    assert nb_outputs.comparable(fresh) == ['[stdout]', '3'] and nb_outputs._plain(fresh[0])['text'] == '3\n'
    p = _nb(tmp_path / 'other.ipynb', [('#| keep_output\nprint(4)', '3\n')])
    assert len(nb_outputs.stale(p)) == 1  # a real difference still fails


def test_lint_flags_untagged_outputs_and_empty_tagged_cells(tmp_path):
    p = _nb(
        tmp_path / 'lint.ipynb', [('print(1)', '1\n'), ('#| keep_output\nprint(2)', None), ('#| keep_output\n1', '1')]
    )
    probs = nb_outputs.lint([p], root=tmp_path)
    assert probs == [
        f'lint.ipynb cell 0 (c0): outputs on a cell without `{nb_outputs.KEEP}`',
        f'lint.ipynb cell 1 (c1): `{nb_outputs.KEEP}` but no output committed',
    ], probs


def test_committed_notebooks_are_lint_clean():
    "Every notebook in nbs/: outputs only on `#| keep_output` cells, and each such cell has one (no execution)."
    assert nb_outputs.lint(nb_outputs.notebooks()) == []


def test_a_raising_cell_fails_the_check(tmp_path):
    "The check replaces nbdev-test for the notebooks it runs, so an error in any cell (kept or not) fails it."
    p = _nb(
        tmp_path / 'boom.ipynb', [('#| keep_output\nprint(1)', '1\n'), ("raise ValueError('boom in cell 1')", None)]
    )
    probs = nb_outputs._stale_or_error(p)
    assert len(probs) == 1 and 'a cell failed' in probs[0] and 'boom in cell 1' in probs[0], probs


def test_readme_shows_what_kept_cells_print(tmp_path):
    from thinkingbox_training.cli import render_readme

    p = _nb(
        tmp_path / 'index.ipynb',
        [
            ('#| keep_output\nprint("pass@1 78.1%")', 'pass@1 78.1%\n'),
            ('print("a temp path")', 'a temp path\n'),
            ('#| hide\n#| keep_output\nprint("hidden")', 'hidden\n'),
        ],
    )
    text = render_readme(p)
    assert '```python\nprint("pass@1 78.1%")\n```\n\n```\npass@1 78.1%\n```' in text, text
    assert 'a temp path\n```' not in text and 'hidden' not in text and '#|' not in text


def test_readme_is_short_and_opens_with_a_first_minute_that_prints():
    readme = (Path(__file__).parent.parent / 'README.md').read_text()
    heads = [l for l in readme.splitlines() if l.startswith('## ')]
    assert len(readme.splitlines()) <= 150 and heads[:2] == ['## The two commands', '## A first minute'], heads
    assert 'make train' in readme and 'make test' in readme and '[tool.nbdev]' in readme
    first = readme.split('## A first minute')[1].split('\n## ')[0]
    assert first.count('```python') == 3 and first.count('\n```\n') >= 6 and 'rewards [' in first and 'pass@1 ' in first
    import re

    assert not re.search(r'issue \d|METHOD\.md|(?<!study/)DESIGN\.md', readme)


def test_episode_notebook_keeps_an_episode():
    nb = json.loads((Path(__file__).parent.parent / 'nbs' / '07_episode.ipynb').read_text())
    shown = ''.join(''.join(o.get('text', '')) for c in nb['cells'] if nb_outputs.kept(c) for o in c['outputs'])
    assert "call:  pay(account_id='AC-1', amount_cents=3000)" in shown and 'reward 1: state ok' in shown, shown
    assert 'reward 0: state FAILED' in shown and 'account[AC-1].balance_cents: expected 7000, got 10000' in shown


def test_readme_main_result_rows_are_the_results_notebooks():
    "README's main-result table repeats rows the results notebook prints from the run's artifacts (checked above)."
    root = Path(__file__).parent.parent
    readme = (root / 'README.md').read_text()
    section = readme.split('## The main result', 1)[1].split('\n## ', 1)[0]
    rows = [l for l in section.splitlines() if l.startswith('| ') and not l.startswith('| tasks')]
    nb = json.loads((root / 'nbs' / 'results' / '00_tiny_cpu.ipynb').read_text())
    printed = '\n'.join(
        ''.join(t if isinstance(t, str) else ''.join(t))
        for c in nb['cells']
        for o in c.get('outputs', [])
        for t in [o.get('text', ''), o.get('data', {}).get('text/markdown', '')]
    )
    assert len(rows) == 3, rows
    for row in rows:
        assert row in printed, f'README row not printed by nbs/results/00_tiny_cpu.ipynb: {row}'


def test_readme_passk_sentence_is_the_comparisons_registered_test():
    """README's pass@k sentence repeats the primary test (H1), each seed pair's change, the seed-level floor and the
    optimizer steps as the comparison's summary.json records them."""
    root = Path(__file__).parent.parent
    readme = ' '.join((root / 'README.md').read_text().split())
    S = json.loads((root / 'data/runs/passk/summary.json').read_text())
    h1, P, U = S['arms']['all']['pass@k'], S['seeds']['pairs'], S['update_size']
    pts = lambda x: f'{100 * x:+.1f}'
    said = f'pass@20 {pts(h1["diff"])} points [{pts(h1["diff_lo"])}, {pts(h1["diff_hi"])}] over tasks (p {h1["p"]:.1g})'
    assert said in readme, said
    assert h1['complete'] and h1['seeds'] == [3, 3] and f'{h1["tasks"]} tasks x {h1["k"]}' in readme
    d = {s: f'{100 * r["diff"]:+.2f}' for s, r in P.items()}
    pairs = f'seed 0 {d["0"]} points, seeds 1 and 2 {d["1"]} and {d["2"]}'
    assert f'one seed pair carries it (per pair, over the {h1["tasks"]} tasks: {pairs})' in readme, pairs
    assert f'cannot go below p {S["seeds"]["seed_permutation"]["floor"]:.2f}' in readme
    steps = sorted({u['optimizer_steps'] for lab, u in U.items() if lab.startswith('passk')})
    plain = {u['optimizer_steps'] for lab, u in U.items() if lab.startswith('plain')}
    assert f'({" or ".join(map(str, steps))} optimizer steps against {plain.pop()})' in readme and not plain


def test_readme_coverage_sentence_is_the_coverage_notebooks_answer():
    """README's coverage sentence repeats H1 (the registered answer) as the coverage results notebook prints it from the
    committed campaigns: its reading, change, interval and p, its seeds and tasks."""
    import re

    root = Path(__file__).parent.parent
    readme = ' '.join((root / 'README.md').read_text().split())
    nb = json.loads((root / 'nbs' / 'results' / '07_coverage.ipynb').read_text())
    printed = ' '.join(''.join(o.get('text', '')) for c in nb['cells'] for o in c.get('outputs', []))
    m = re.search(
        r'H1, seeds random \(the registered answer; unit: the training seed and the task, (\d+) pass@k and (\d+) '
        r'matched seeds, (\d+) tasks\): ([a-z ]+), ([+-][\d.]+) points of pass@20 \[([^\]]+)\], p ([\d.e-]+),',
        printed,
    )
    assert m, 'nbs/results/07_coverage.ipynb prints no H1 answer: the design is not complete'
    said = f'{m[4]}: {m[5]} points of pass@20 [{m[6]}], p {m[7]}'
    assert said in readme, said
    assert f'{m[1]} seeds a side' in readme and m[1] == m[2] and f'{m[3]} tasks x 20' in readme
