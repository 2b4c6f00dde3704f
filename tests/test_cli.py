"The `tbt` console script as a user runs it: a real subprocess."

import subprocess, sys
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
