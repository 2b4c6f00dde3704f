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
    "The parsers and checks are read from the commands' source: cli.py calls no exec, eval or compile, keeps no table."
    text = (ROOT / 'thinkingbox_training' / 'cli.py').read_text()
    calls = {n.func.id for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert not calls & {'exec', 'eval', 'compile'} and 'literal_eval' in text  # the index reads literals only
    assert 'OPTION_RULES' not in text and 'COMMAND_RULES' not in text


def _from_function(f):
    "(name, default, base type, checks) of each parameter, as the imported function gives them."
    import inspect, typing
    from fastcore.docments import ann_parts

    hints, out = typing.get_type_hints(f, include_extras=True), []
    for k, p in inspect.signature(f).parameters.items():
        base, meta = ann_parts(hints[k]) if k in hints else (None if p.default is p.empty else type(p.default), ())
        out.append((k, p.default, base, tuple((c.__name__, c.required, c.unless) for c in meta)))
    return out


def test_every_option_of_every_command_has_a_check_or_a_plain_type(monkeypatch):
    """A number always has its range beside it; text and flags may be plain (`cli.unchecked`). And the options `tbt`
    reads from each command's source (no import) are what its imported function says: names, defaults, base types,
    checks by name (with their arguments), and the help that `anno_parser` builds from the function, byte for byte."""
    from typing import Annotated
    from fastcore.script import anno_parser
    from thinkingbox_training.cli import at_least, command_doc, command_function, command_index, command_options
    from thinkingbox_training.cli import options_parser, unchecked

    def f(k: int = 1, n: Annotated[int, at_least(1)] = 1, name: str = '', x: float = 0.5, quiet: bool = False):
        "a command with two numbers left unchecked"

    assert unchecked(f) == ['k', 'x']  # the rule can fail
    monkeypatch.setenv('COLUMNS', '120')
    index = command_index()
    funcs = {n: command_function(e) for n, e in index.items()}
    assert {n: unchecked(f) for n, f in funcs.items()} == {n: [] for n in index}
    for n, e in index.items():
        read = [
            (o.name, o.default, o.type, tuple((c.__name__, c.required, c.unless) for c in o.checks))
            for o in command_options(e)
        ]
        assert read == _from_function(funcs[n]), n
        ours = options_parser(
            n, command_options(e), e.pos, command_doc(e), e.module.split('.')[0]
        )  # as `main` builds it
        assert ours.format_help() == anno_parser(funcs[n], prog=f'tbt {n}', pos=e.pos).format_help(), n


def test_an_annotation_tbt_cannot_read_is_one_line_naming_file_and_parameter(tmp_path, monkeypatch, capsys):
    "A check that is not one of cli's (here a lambda) is refused when the options are read, before anything runs."
    from thinkingbox_training import cli

    src = tmp_path / 'scratch_cmd.py'
    src.write_text(
        'from typing import Annotated\nfrom thinkingbox_training.cli import command, at_least\n\n\n@command()\n'
        'def scratch(\n    n: Annotated[int, at_least(1)] = 1,\n    k: Annotated[int, lambda v: v > 0] = 4,\n):\n'
        '    "never imported"\n    raise SystemExit("ran")\n'
    )
    sources = cli.command_sources()
    monkeypatch.setattr(cli, 'command_sources', lambda: {**sources, 'scratch_cmd': src})
    assert cli.main(['scratch', '--help']) == 1 and cli.main(['scratch', '--n', '2']) == 1
    err = capsys.readouterr().err.splitlines()
    says = f'tbt scratch: {src}:8: parameter k of scratch: `lambda v: v > 0` is not a literal'
    assert len(err) == 2 and all(l.startswith(says) for l in err), err
    assert 'scratch_cmd' not in sys.modules
