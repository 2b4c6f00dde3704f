"""Bad options of `tbt`, as a user types them: each refused before the command runs, in one line naming the option,
with a non-zero exit and nothing written; whatever escapes a command is one line too (`TBT_DEBUG=1`: the traceback).

Each option's check is in its command's signature, and `tbt` reads it from the command's source: a refused option
imports no command's module (no torch). The refused cases run `tbt`'s `main` in this process; the console script's
own process is run where the process is the point (exit status, traceback, what it imports)."""

import os, subprocess, sys
from pathlib import Path
import pytest
from thinkingbox_training.cli import main

ROOT = Path(__file__).resolve().parents[2]
CLI = 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
TASKS = str(ROOT / 'data' / 'tasks' / 'retail_bench.jsonl')


def tbt(*args, env=None, cwd=ROOT):
    return subprocess.run(
        [sys.executable, '-c', CLI, *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
    )


@pytest.fixture(scope='module')
def where(tmp_path_factory):
    d = tmp_path_factory.mktemp('cli')
    (d / 'a_file').write_text('not a directory')
    (d / 'broken.jsonl').write_text('{"uid": "x"\n')
    (d / 'empty_dir').mkdir()
    return d


# (id, arguments, what the one line must say); {d} is a scratch directory, {tasks} a real task file
CASES = [
    (
        'evaluate-error-retries-negative',
        'evaluate --tasks {tasks} --error-retries -1',
        '--error-retries -1: must be at least 0',
    ),
    ('evaluate-k-negative', 'evaluate --tasks {tasks} --k -3', '--k -3: must be at least 1'),
    ('probe-k-zero', 'probe --tasks {tasks} --k 0', '--k 0: must be at least 1'),
    (
        'evaluate-temperature-negative',
        'evaluate --tasks {tasks} --temperature -1',
        '--temperature -1.0: must be in [0, inf)',
    ),
    ('evaluate-top-p-2', 'evaluate --tasks {tasks} --top-p 2', '--top-p 2.0: must be in (0, 1]'),
    ('evaluate-top-k-negative', 'evaluate --tasks {tasks} --top-k -1', '--top-k -1: must be at least 0'),
    (
        'generate-tasks-train-n-negative',
        'generate-tasks --train-n -1 --out {d}/gen',
        '--train-n -1: must be at least 0',
    ),
    ('evaluate-user-bogus', 'evaluate --tasks {tasks} --user bogus', '--user bogus: must be scripted or openai:MODEL'),
    (
        'evaluate-judge-bogus',
        'evaluate --tasks {tasks} --judge bogus',
        '--judge bogus: must be rule or none or openai:MODEL',
    ),
    (
        'evaluate-concurrency-negative',
        'evaluate --tasks {tasks} --concurrency -5',
        '--concurrency -5: must be at least 0',
    ),
    (
        'evaluate-policy-missing',
        'evaluate --tasks {tasks} --policy /no/such/model',
        '--policy /no/such/model: no such model directory',
    ),
    (
        'mcp-serve-domain-unknown',
        'mcp-serve --domain nope',
        '--domain nope: unknown domain nope; known: demo, retail, travel',
    ),
    (
        'generate-tasks-domains-unknown',
        'generate-tasks --domains nope --out {d}/gen',
        '--domains nope: unknown domain nope; known: demo, retail, travel',
    ),
    ('evaluate-tasks-missing', 'evaluate --tasks {d}/no_such.jsonl', 'no_such.jsonl does not exist'),
    ('evaluate-tasks-a-directory', 'evaluate --tasks {d}', 'is not a file'),
    ('evaluate-tasks-not-given', 'evaluate', '--tasks is required'),
    ('evaluate-shards-zero', 'evaluate --tasks {tasks} --shards 0', '--shards 0: must be at least 1'),
    ('evaluate-out-a-file', 'evaluate --tasks {tasks} --out {d}/a_file', 'a_file is a file, not a directory'),
    (
        'evaluate-tool-transport-unknown',
        'evaluate --tasks {tasks} --tool-transport http',
        '--tool-transport http: must be one of mcp, inprocess',
    ),
    ('evaluate-split-unknown', 'evaluate --tasks {tasks} --split dev', "--split dev: must be one of '', train, bench"),
    ('evaluate-recipe-missing', 'evaluate --tasks {tasks} --recipe {d}/no.yaml', '--recipe {d}/no.yaml: no such file'),
    ('aggregate-by-bogus', 'aggregate {d}/empty_dir --by bogus', '--by bogus: must be one of domain, family, held_out'),
    ('aggregate-out-missing', 'aggregate {d}/no_campaign', 'out {d}/no_campaign: no such directory'),
    ('compare-base-missing', 'compare {d}/nope {d}/empty_dir', 'base {d}/nope: no such directory'),
    ('select-attempts-missing', 'select {d}/no.jsonl --out {d}/pool', 'attempts {d}/no.jsonl: no such file'),
    (
        'select-dev-fraction-one',
        'select {d}/a_file --out {d}/pool --dev-fraction 1',
        '--dev-fraction 1.0: must be in [0, 1)',
    ),
    (
        'select-band-rule-bogus',
        'select {d}/a_file --out {d}/pool --band-rule median',
        '--band-rule median: must be one of mass, mean',
    ),
    ('mcp-serve-port-99999', 'mcp-serve --domain demo --port 99999', '--port 99999: must be in [1, 65535]'),
    (
        'mcp-serve-transport-unknown',
        'mcp-serve --domain demo --transport sse',
        '--transport sse: must be one of stdio, http',
    ),
    ('thinkingbox-bench-k-zero', 'thinkingbox-bench --k 0 --out {d}/tb', '--k 0: must be at least 1'),
    (
        'thinkingbox-bench-user-bogus',
        'thinkingbox-bench --user scripted --out {d}/tb',
        '--user scripted: must be stand-in or openai:MODEL',
    ),
    ('reproduce-part-5', 'reproduce --part 5 --dry-run', '--part 5: must be one of 1, 2, 3, 4, all'),
    ('main-concurrency-zero', 'main --concurrency 0', '--concurrency 0: must be at least 1'),
    ('main-base-model-missing', 'main --base-model {d}/no_model', '--base-model {d}/no_model: no such model directory'),
    ('policy-report-out-a-directory', 'policy-report --out {d}/empty_dir', 'empty_dir is a directory, not a file'),
    (
        'build-base-policy-threads-zero',
        'build-base-policy --threads 0 --out {d}/model',
        '--threads 0: must be at least 1',
    ),
    # numbers that had no check before their checks moved into the signatures
    (
        'evaluate-judge-max-tokens-negative',
        'evaluate --tasks {tasks} --judge-max-tokens -1',
        '--judge-max-tokens -1: must be at least 0',
    ),
    (
        'openenv-serve-max-sessions-zero',
        'openenv-serve {tasks} --max-sessions 0',
        '--max-sessions 0: must be at least 1',
    ),
    (
        'openenv-serve-idle-timeout-zero',
        'openenv-serve {tasks} --idle-timeout 0',
        '--idle-timeout 0.0: must be in (0, inf)',
    ),
]


@pytest.mark.parametrize('args,says', [pytest.param(a, s, id=i) for i, a, s in CASES])
def test_a_bad_option_is_one_line_naming_it_and_nothing_runs(where, args, says, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)  # the defaults name files of the checkout (`main --recipe`, `--base-model`)
    cmd = args.split()[0]
    before = sorted(p.name for p in where.iterdir())
    rc = main(args.format(d=where, tasks=TASKS).split())
    out, err = capsys.readouterr()
    assert rc == 2, (rc, out[-500:], err[-2000:])
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f'tbt {cmd}: '), err[-2000:]
    assert says.format(d=where) in lines[0], lines[0]
    assert out == '' and sorted(p.name for p in where.iterdir()) == before  # nothing ran, nothing written


def test_the_same_name_is_checked_as_its_command_means_it(capsys, monkeypatch):
    "`--concurrency 0` is the default for `evaluate` and refused by `main`; `--out` is a directory or a file to write."
    monkeypatch.chdir(ROOT)
    assert main(['main', '--concurrency', '0']) == 2
    assert main(['evaluate', '--tasks', TASKS, '--concurrency', '0', '--split', 'nope']) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        'tbt main: --concurrency 0: must be at least 1',
        "tbt evaluate: --split nope: must be one of '', train, bench",
    ]


def test_an_option_argparse_cannot_read_is_its_usage_line_not_a_traceback(capsys):
    with pytest.raises(SystemExit) as e:
        main(['evaluate', '--k', 'many'])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --k: invalid int value: 'many'" in err and 'Traceback' not in err


def test_an_exception_escaping_a_command_is_one_line_and_exit_1(where):
    "A broken task file: the loader's own message (file, line, what), under `tbt evaluate:`, no traceback."
    r = tbt('evaluate', '--tasks', where / 'broken.jsonl', '--out', where / 'run-broken', '--quiet')
    assert r.returncode == 1 and 'Traceback' not in r.stderr, r.stderr[-2000:]
    assert r.stderr.startswith('tbt evaluate: 1 problem(s) in task file(s)'), r.stderr
    assert f'{where / "broken.jsonl"}:1: invalid JSON' in r.stderr


def test_tbt_debug_shows_the_traceback(where):
    r = tbt(
        'evaluate', '--tasks', where / 'broken.jsonl', '--out', where / 'run-broken', '--quiet', env={'TBT_DEBUG': '1'}
    )
    assert r.returncode == 1 and 'Traceback (most recent call last)' in r.stderr, r.stderr[-2000:]


def test_good_options_pass_the_checks(capsys):
    "A command's help is its parser's (real runs with good options: tests/test_campaigns.py runs `tbt evaluate`)."
    for cmd, opt in (('evaluate', '--error-retries'), ('generate-tasks', '--train-n')):
        with pytest.raises(SystemExit) as e:
            main([cmd, '--help'])
        assert e.value.code == 0 and opt in capsys.readouterr().out


def test_the_list_a_help_and_a_refused_option_import_no_command_module():
    """`tbt --help`, `tbt evaluate --help` and a refused `tbt evaluate --k -3` are read from the source: none of torch,
    transformers, mcp or the commands' own modules loads (`campaigns` imports all three)."""
    code = (
        'import sys; from thinkingbox_training.cli import main, command_modules\n'
        'watch = ["torch", "transformers", "mcp", *[m for m in command_modules() if not m.endswith(".cli")]]\n'
        'for argv in (["--help"], ["evaluate", "--help"], ["evaluate", "--tasks", sys.argv[1], "--k", "-3"],\n'
        '             ["openenv-serve", "--help"], ["reproduce", "--part", "5"]):\n'
        '    try: print("RC", argv[0], main(argv))\n'
        '    except SystemExit as e: print("RC", argv[0], e.code)\n'
        '    print("IMPORTED", argv[0], [m for m in watch if m in sys.modules])'
    )
    r = subprocess.run([sys.executable, '-c', code, TASKS], cwd=ROOT, capture_output=True, text=True, timeout=120)
    got = [l for l in r.stdout.splitlines() if l.startswith(('RC', 'IMPORTED'))]
    assert got == [
        'RC --help 0',
        'IMPORTED --help []',
        'RC evaluate 0',
        'IMPORTED evaluate []',
        'RC evaluate 2',
        'IMPORTED evaluate []',
        'RC openenv-serve 0',
        'IMPORTED openenv-serve []',
        'RC reproduce 2',
        'IMPORTED reproduce []',
    ], (r.stdout[-500:], r.stderr[-2000:])
    assert 'tbt evaluate: --k -3: must be at least 1' in r.stderr, r.stderr[-2000:]
