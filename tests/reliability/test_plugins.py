"""Plugins (entry points offering domains and task formats) that clash, raise or exit: named in one line, never
replacing a bundled or another package's name, never opening the evaluation-only guard.

Each package is real as far as `importlib.metadata` can tell: a `.dist-info` (METADATA, entry_points.txt) and its
modules in a temporary folder put on `sys.path`; nothing is installed and the loader is not patched."""

import os, subprocess, sys, textwrap
from pathlib import Path
import pytest
import yaml
from conftest import skip_unless_ci
from thinkingbox_training import tasks
from thinkingbox_training.tasks import DOMAINS, TASK_FORMATS, EvaluationOnly, get_domain, refuse_evaluation_only

ROOT = Path(__file__).parents[2]

FORMAT = """
from thinkingbox_training.tasks import TaskFormat

FORMAT = TaskFormat({name!r}, {suffixes!r}, lambda path: [], {rule})
"""


def dist(root: Path, name: str, entry_points: str, files: dict):
    "A package as installed: its modules and a `.dist-info` with METADATA and entry_points.txt."
    info = root / f'{name}-0.1.dist-info'
    info.mkdir(parents=True)
    (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n')
    (info / 'entry_points.txt').write_text(textwrap.dedent(entry_points))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))


@pytest.fixture
def site(tmp_path):
    "A folder on sys.path for this test's packages; the registries and the modules as they were, after it."
    domains, formats, unavailable = dict(DOMAINS), dict(TASK_FORMATS), dict(tasks.UNAVAILABLE)
    sys.path.insert(0, str(tmp_path))
    tasks._LOADED_GROUPS.clear()
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for m in [m for m in sys.modules if m.startswith('tbt_plug')]:
        del sys.modules[m]
    ours = [vars(m) for n, m in list(sys.modules.items()) if n.startswith('thinkingbox_training') and m]
    for reg, was in ((DOMAINS, domains), (TASK_FORMATS, formats)):  # what the package registered meanwhile stays
        for n in [n for n in reg if n not in was and not any(reg[n] is v for ns in ours for v in ns.values())]:
            del reg[n]
        reg.update(was)
    tasks.UNAVAILABLE.clear()
    tasks.UNAVAILABLE.update(unavailable)
    tasks._LOADED_GROUPS.clear()


def test_a_format_plugin_that_raises_or_exits_is_named_and_the_others_load(site, capfd):
    dist(
        site,
        'tbt_plug_raises',
        '[thinkingbox_training.task_formats]\nboom = tbt_plug_boom:FORMAT\nbye = tbt_plug_bye:FORMAT\n',
        {'tbt_plug_boom.py': 'raise RuntimeError("boom at import")\n', 'tbt_plug_bye.py': 'import sys\nsys.exit(4)\n'},
    )
    dist(
        site,
        'tbt_plug_good',
        '[thinkingbox_training.task_formats]\ngood = tbt_plug_good:FORMAT\n',
        {'tbt_plug_good.py': FORMAT.format(name='good', suffixes=('.good',), rule=None)},
    )
    got = tasks.task_formats()
    assert 'good' in got and 'boom' not in got and 'bye' not in got  # the others still load
    err = capfd.readouterr().err.splitlines()
    boom = [line for line in err if "'boom'" in line]
    bye = [line for line in err if "'bye'" in line]
    assert len(boom) == 1 and 'tbt_plug_raises' in boom[0] and 'RuntimeError: boom at import' in boom[0], err
    assert len(bye) == 1 and 'tbt_plug_raises' in bye[0] and 'SystemExit: 4' in bye[0], err
    with pytest.raises(tasks.TaskFileError, match=r'x\.boomy: no task format here reads .*RuntimeError: boom'):
        tasks.format_of(site / 'x.boomy')


def test_a_domain_plugin_that_exits_is_one_line_of_mcp_serve_not_a_silent_exit(site, capsys):
    from thinkingbox_training.cli import main

    dist(
        site,
        'tbt_plug_exits',
        '[thinkingbox_training.domains]\nbye = tbt_plug_exit:dom\n',
        {'tbt_plug_exit.py': 'import sys\nsys.exit(4)\n'},
    )
    assert main(['mcp-serve', '--domain', 'bye']) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("tbt mcp-serve: domain 'bye': its entry point 'tbt_plug_exit:dom' fails to load: ")
    assert 'SystemExit: 4' in err[0] and 'tbt_plug_exits' in err[0]


def test_two_packages_offering_one_name_are_refused_naming_both(site, capfd):
    for pkg in ('tbt_plug_one', 'tbt_plug_two'):
        dist(
            site,
            pkg,
            f'[thinkingbox_training.domains]\nshared = {pkg}:dom\n'
            f'[thinkingbox_training.task_formats]\nshared = {pkg}:FORMAT\n',
            {f'{pkg}.py': FORMAT.format(name='shared', suffixes=('.shared',), rule=None) + 'dom = None\n'},
        )
    with pytest.raises(KeyError, match="domain 'shared' is offered by .* and by .*: one name, two domains") as e:
        get_domain('shared')
    assert 'package tbt_plug_one' in e.value.args[0] and 'package tbt_plug_two' in e.value.args[0]
    assert 'shared' not in tasks.task_formats()  # neither wins
    line = [x for x in capfd.readouterr().err.splitlines() if "'shared'" in x]
    assert len(line) == 1 and 'tbt_plug_one' in line[0] and 'tbt_plug_two' in line[0], line
    assert not [m for m in sys.modules if m.startswith('tbt_plug')]  # refused before importing either


def test_a_plugin_cannot_take_a_name_another_package_offers_as_a_side_effect(site):
    "Importing one package's domain registers a name another package offers: refused, naming that package."
    dist(
        site,
        'tbt_plug_first',
        '[thinkingbox_training.domains]\nalpha = tbt_plug_first:alpha\n',
        {
            'tbt_plug_first.py': 'from thinkingbox_training.tasks import register_domain\n'
            'class D:\n    def __init__(self, n): self.name = n\n    def provision(self): pass\n'
            "alpha = register_domain(D('alpha'))\nregister_domain(D('beta'))\n"
        },
    )
    dist(
        site,
        'tbt_plug_second',
        '[thinkingbox_training.domains]\nbeta = tbt_plug_second:beta\n',
        {'tbt_plug_second.py': "class D:\n    name = 'beta'\n    def provision(self): pass\nbeta = D()\n"},
    )
    with pytest.raises(KeyError, match=r"'beta' \(offered by the entry point beta = tbt_plug_second:beta of package "):
        get_domain('alpha')
    assert 'alpha' not in DOMAINS and get_domain('beta').__module__ == 'tbt_plug_second'


def test_a_format_plugin_cannot_take_a_bundled_name_or_suffix(site, capfd):
    "Offered as `jsonl`, reading `.yaml` (the ThinkingBox format's), or registering `thinkingbox` as it is imported."
    jsonl, thinkingbox = TASK_FORMATS['jsonl'], tasks._bundled_rule('thinkingbox')
    dist(
        site,
        'tbt_plug_greedy',
        """
        [thinkingbox_training.task_formats]
        jsonl = tbt_plug_jsonl:FORMAT
        yamlish = tbt_plug_yaml:FORMAT
        sneaky = tbt_plug_sneaky:FORMAT
        """,
        {
            'tbt_plug_jsonl.py': FORMAT.format(name='jsonl', suffixes=('.jsonl',), rule=None),
            'tbt_plug_yaml.py': FORMAT.format(name='yamlish', suffixes=('.yaml',), rule=None),
            'tbt_plug_sneaky.py': FORMAT.format(name='sneaky', suffixes=('.sneaky',), rule=None)
            + 'from thinkingbox_training.tasks import register_format\n'
            + "register_format(TaskFormat('thinkingbox', ('.py',), lambda path: [], None))\n",
        },
    )
    got = tasks.task_formats()
    assert got['jsonl'] is jsonl and got['thinkingbox'].evaluation_only is thinkingbox
    assert not {'yamlish', 'sneaky'} & set(got)
    assert tasks.format_of('t.yaml').name == 'thinkingbox'
    err = capfd.readouterr().err
    for name, says in (('jsonl', 'thinkingbox_training'), ('yamlish', ".yaml (read by 'thinkingbox')"),
                       ('sneaky', "'thinkingbox' (bundled with thinkingbox_training)")):  # fmt: skip
        line = [x for x in err.splitlines() if f"task format '{name}'" in x]
        assert len(line) == 1 and 'tbt_plug_greedy' in line[0] and says in line[0], (name, err)


def test_a_package_cannot_take_a_bundled_domain():
    """A fresh process: a package offering `retail`, and one registering `travel` when imported (a side effect of
    offering `ledger`); the bundled domains are the ones used, and each plugin is named in one line."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        dist(
            Path(d),
            'tbt_plug_taker',
            """
            [thinkingbox_training.domains]
            retail = tbt_plug_taker:retail
            ledger = tbt_plug_side:ledger
            """,
            {
                'tbt_plug_taker.py': "class D:\n    name = 'retail'\n    def provision(self): pass\nretail = D()\n",
                'tbt_plug_side.py': 'from thinkingbox_training.tasks import register_domain\n'
                'class D:\n    def __init__(self, n): self.name = n\n    def provision(self): pass\n'
                "register_domain(D('travel'))\nledger = register_domain(D('ledger'))\n",
            },
        )
        code = textwrap.dedent("""
            from thinkingbox_training.tasks import get_domain
            print(type(get_domain('retail')).__module__)
            try:
                get_domain('ledger')
            except KeyError as e:
                print(e.args[0])
            print(type(get_domain('travel')).__module__)
            """)
        env = {**os.environ, 'PYTHONPATH': os.pathsep.join([d, str(ROOT)])}
        run = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    out = run.stdout.splitlines()
    assert out[0] == out[2] == 'thinkingbox_training.backend', out  # the bundled retail, and travel
    assert out[1].startswith("domain 'ledger': the entry point ledger = tbt_plug_side:ledger of package ")
    assert "registers 'travel' (bundled with thinkingbox_training)" in out[1], out
    said = [x for x in run.stderr.splitlines() if "domain 'retail'" in x]
    assert len(said) == 1 and 'tbt_plug_taker' in said[0] and 'refused' in said[0], run.stderr


def release_uid() -> str:
    d = os.environ.get('THINKINGBOX_DATA')
    if not d:
        skip_unless_ci('THINKINGBOX_DATA is not set (the thinkingbox-data checkout)')
    return yaml.safe_load(open(f'{d}/releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml'))[0]


def test_the_evaluation_only_guard_holds_after_a_format_plugin_failed(site):
    "The guard's answer does not depend on what plugins did: a failed one, then again, then every call after it."
    uid = release_uid()
    dist(
        site,
        'tbt_plug_fails',
        '[thinkingbox_training.task_formats]\nfails = tbt_plug_fails:FORMAT\n',
        {'tbt_plug_fails.py': 'raise ValueError("no")\n'},
    )
    for _ in range(3):
        with pytest.raises(EvaluationOnly, match=f'task {uid} may not be used for probing: thinkingbox_bench_v1'):
            refuse_evaluation_only([uid], 'probing')


def test_the_evaluation_only_guard_fails_closed(site, monkeypatch):
    "A bundled rule that cannot be asked here, or a plugin's rule that raises: the task is refused, saying why."
    monkeypatch.setitem(sys.modules, 'thinkingbox_training.thinkingbox', None)  # its module does not import here
    with pytest.raises(EvaluationOnly, match=r'task m\.py:test_a may not be used for a training pool: the thinkingbox'):
        refuse_evaluation_only(['m.py:test_a'], 'a training pool')
    monkeypatch.undo()
    dist(
        site,
        'tbt_plug_rule',
        '[thinkingbox_training.task_formats]\nruled = tbt_plug_rule:FORMAT\n',
        {'tbt_plug_rule.py': FORMAT.format(name='ruled', suffixes=('.ruled',), rule='lambda uid: 1 / 0')},
    )
    with pytest.raises(EvaluationOnly, match=r'task a/b/0 may not .* the ruled format .*ZeroDivisionError'):
        refuse_evaluation_only(['a/b/0'], 'a training pool')


def test_probe_goes_on_past_a_format_plugin_that_fails_naming_it(site, tmp_path, capsys):
    "`tbt probe` of JSON Lines tasks with a broken format plugin installed: one line naming it, and the probe runs."
    from thinkingbox_training.cli import main
    from thinkingbox_training.tasks import Task, ToolCallSpec, write_tasks

    dist(
        site,
        'tbt_plug_broken',
        '[thinkingbox_training.task_formats]\nbroken = tbt_plug_broken:FORMAT\n',
        {'tbt_plug_broken.py': 'raise KeyError("half-installed")\n'},
    )
    f = tmp_path / 'tasks.jsonl'
    golden = [ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': 1})]
    write_tasks(
        [Task(uid='demo/pay/0', domain='demo', family='pay', split='train', query='Pay 1 cent.', golden=golden)], f
    )
    assert main(['probe', '--tasks', str(f), '--k', '1', '--out', str(tmp_path / 'p'), '--quiet']) == 0
    err = [x for x in capsys.readouterr().err.splitlines() if 'broken' in x]
    assert len(err) == 1 and 'tbt_plug_broken' in err[0] and 'KeyError: half-installed' in err[0], err
