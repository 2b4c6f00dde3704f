"""The project stands alone: a user who clones it gets every file it cites. No notebook, test, script, benchmark,
recipe or setting names a guide kept outside the repository, a folder beside the clone or a tracker's issue number;
the designs under data/runs/*/DESIGN.md are the project's own. `.ci/run` alone may look beside the clone for
ThinkingBox's public data checkout: that is CI's setup, not a citation."""

import re
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
PLACES = ['nbs', 'tests', 'scripts', 'benchmarks', 'thinkingbox_training', 'environments', 'experiments/nbs',
          'experiments/tbt_lab', 'experiments/README.md', 'experiments/pyproject.toml', 'README.md', 'pyproject.toml',
          'Makefile', 'mkdocs.yml', '.ci/run']  # fmt: skip
SUFFIXES = {'.ipynb', '.py', '.md', '.toml', '.yaml', '.yml', '.sh', '.cfg', '.txt', '.jinja', ''}
OUTSIDE = re.compile(r'\b(?:STACK|STYLE|METHOD|EXTERNAL)\.md\b|\.\./shared/|/work/shared\b|\bissue #?\d+', re.I)
CI_DATA = '../shared/thinkingbox-data'  # where .ci/run looks for the data checkout beside the clone


def cited_outside(root: Path = ROOT) -> list:
    "Every 'file:line: text' of the project's sources that cites something outside the repository."
    files = []
    for place in PLACES:
        p = root / place
        if p.is_file():
            files.append(p)
        elif p.is_dir():  # hidden folders (.ipynb_checkpoints, nbs/.outputs-*), nbdev's _proc and caches left out
            for f in sorted(p.rglob('*')):
                hidden = any(s.startswith(('.', '_proc', '__pycache__')) for s in f.relative_to(p).parts)
                if f.is_file() and f.suffix in SUFFIXES and not hidden:
                    files.append(f)
    found = []
    for f in files:
        rel = str(f.relative_to(root))
        if f == Path(__file__):
            continue
        for i, line in enumerate(f.read_text(errors='replace').splitlines(), 1):
            if OUTSIDE.search(line.replace(CI_DATA, '') if rel == '.ci/run' else line):
                found.append(f'{rel}:{i}: {line.strip()[:120]}')
    return found


def test_the_check_finds_a_citation(tmp_path):
    (tmp_path / 'nbs').mkdir()
    (tmp_path / 'nbs' / 'a.ipynb').write_text('"see STACK.md"\n"fixed in issue 12"\n"our own nbs/19_stack.ipynb"\n')
    (tmp_path / 'README.md').write_text('data/runs/study/DESIGN.md is ours\n')
    (tmp_path / '.ci').mkdir()
    (tmp_path / '.ci' / 'run').write_text('# the data beside the clone: $d/../shared/thinkingbox-data\n# (issue 28)\n')
    assert cited_outside(tmp_path) == [
        'nbs/a.ipynb:1: "see STACK.md"',
        'nbs/a.ipynb:2: "fixed in issue 12"',
        '.ci/run:2: # (issue 28)',
    ]


def test_nothing_in_the_project_cites_a_file_outside_it():
    assert cited_outside() == []
