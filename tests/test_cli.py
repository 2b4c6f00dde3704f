"The `tbt` console script as a user runs it (a real subprocess), and what its parsers and checks are made of."

import ast, subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    code = 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
    return subprocess.run([sys.executable, '-c', code, *args], cwd=ROOT, capture_output=True, text=True)


def test_help_lists_commands():
    r = run('--help')
    assert r.returncode == 0 and 'readme' in r.stdout


def test_unknown_command_is_an_error_with_a_suggestion():
    r = run('readm')
    assert r.returncode == 2 and "unknown command 'readm'" in r.stderr and "did you mean 'readme'" in r.stderr


def test_readme_is_current():
    r = run('readme', '--check')
    assert r.returncode == 0, r.stderr


def test_the_cli_runs_no_source_text():
    "The parsers and checks come from the imported functions: `cli.py` calls no exec, eval or compile, keeps no table."
    text = (ROOT / 'thinkingbox_training' / 'cli.py').read_text()
    calls = {n.func.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not calls & {'exec', 'eval', 'compile'} and 'literal_eval' in text  # the index reads literals only
    assert 'OPTION_RULES' not in text and 'COMMAND_RULES' not in text


def test_every_option_of_every_command_has_a_check_or_a_plain_type():
    "A number always has its range beside it; text and flags may be plain (`cli.unchecked`)."
    from typing import Annotated
    from thinkingbox_training.cli import at_least, command_function, command_index, unchecked

    def f(k: int = 1, n: Annotated[int, at_least(1)] = 1, name: str = '', x: float = 0.5, quiet: bool = False):
        "a command with two numbers left unchecked"

    assert unchecked(f) == ['k', 'x']  # the rule can fail
    index = command_index()
    assert {n: unchecked(command_function(e)) for n, e in index.items()} == {n: [] for n in index}
