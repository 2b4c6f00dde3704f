"""One domain interface, a registry of task formats, and domains and formats offered by other packages' entry points.

Both kinds of domain (our SQLite `Domain`, ThinkingBox's `ScenarioDomain`) implement `backend.DomainInterface`, and
the harness reaches a domain only through it. A user's package offers a domain or a task format through an entry
point: the tests write a real `.dist-info` (METADATA and entry_points.txt) into a temporary folder on `sys.path`,
which is where `importlib.metadata` finds installed packages; nothing is installed and nothing is patched."""

import inspect, json, os, subprocess, sys, textwrap
from pathlib import Path
import pytest
from conftest import skip_unless_ci
from thinkingbox_training import tasks
from thinkingbox_training.backend import Domain, DomainInterface
from thinkingbox_training.tasks import (
    DOMAINS,
    TASK_FORMATS,
    TaskFileError,
    available_domains,
    evaluation_only,
    get_domain,
    load_tasks,
    refuse_evaluation_only,
    EvaluationOnly,
)

ROOT = Path(__file__).parent.parent
METHODS = [n for n, v in vars(DomainInterface).items() if inspect.isfunction(v) and not n.startswith('_')]
MEMBERS = sorted(set(DomainInterface.__annotations__) | set(METHODS))


def test_the_interface_names_what_a_domain_provides():
    assert set(MEMBERS) >= {
        'provision',
        'mcp_tools',
        'argument_validation',
        'check_call',
        'canonical',
        'final_state',
        'expected_state',
        'template',
    }


def test_our_sqlite_domains_implement_the_interface():
    for name in ('demo', 'travel', 'retail'):
        dom = get_domain(name)
        assert isinstance(dom, DomainInterface), name
        assert dom.argument_validation == 'strict'
        assert list(dom.mcp_tools()) == list(dom.tools)  # the tools, in the order the agent sees them
        assert dom.expected_state(None) is None  # the grader replays the golden calls


def test_a_scenario_domain_implements_the_interface_as_a_class():
    "Every method of the interface is the class's own (no data needed); its plain attributes are set per scenario."
    from thinkingbox_training.thinkingbox import ScenarioDomain

    for cls in (Domain, ScenarioDomain):
        missing = [m for m in METHODS if not inspect.isfunction(getattr(cls, m, None))]
        assert not missing, (cls.__name__, missing)
    assert ScenarioDomain.argument_validation == 'lax'


def test_a_scenario_domain_implements_the_interface():
    from thinkingbox_training.thinkingbox import scenario_domain, ThinkingBoxDataError

    try:
        dom = scenario_domain('sandbox_neobank_support_v1')
    except ThinkingBoxDataError as e:
        skip_unless_ci(str(e))
    assert isinstance(dom, DomainInterface)
    assert list(dom.mcp_tools()) == dom.visible
    with dom.provision(None) as db:
        state = dom.final_state(db, None)
    assert '(state sha256)' in state


def test_no_caller_asks_which_kind_a_domain_is():
    "The probes the interface replaced stay gone: no `hasattr(dom, ...)` on a domain in the package."
    probes = []
    for p in sorted((ROOT / 'thinkingbox_training').rglob('*.py')):
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if any(f'{f}(dom, ' in line or f"{f}(self, 'canonical'" in line for f in ('hasattr', 'getattr')):
                probes.append(f'{p.name}:{n}: {line.strip()}')
    assert not probes, probes


# ---------------------------------------------------------------- entry points


def _dist(root: Path, name: str, entry_points: str, files: dict):
    "A package as installed: its modules and a `.dist-info` with METADATA and entry_points.txt."
    info = root / f'{name}-0.1.dist-info'
    info.mkdir(parents=True)
    (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n')
    (info / 'entry_points.txt').write_text(textwrap.dedent(entry_points))
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(textwrap.dedent(text))


LEDGER = """
    from sqlalchemy.orm import registry
    from sqlmodel import Field, SQLModel
    from thinkingbox_training.backend import Domain


    class LedgerBase(SQLModel, registry=registry()):
        pass


    class Entry(LedgerBase, table=True):
        id: str = Field(primary_key=True)
        cents: int


    ledger = Domain('ledger', LedgerBase, seed=lambda: {'entry': [{'id': 'E-1', 'cents': 5}]}, policy='Add only.',
                    register=False)


    @ledger.tool
    def get_entry(ctx, entry_id: str) -> dict:
        "An entry."
        e = ctx.get(Entry, entry_id, 'entry')
        return {'id': e.id, 'cents': e.cents}
"""


@pytest.fixture
def user_package(tmp_path):
    "A user's package offering a domain and a task format, on sys.path for one test."
    _dist(
        tmp_path,
        'tbt_user_plugins',
        """
        [thinkingbox_training.domains]
        ledger = tbt_user_plugins.ledger:ledger

        [thinkingbox_training.task_formats]
        lines = tbt_user_plugins.lines:FORMAT
        """,
        {
            'tbt_user_plugins/__init__.py': '',
            'tbt_user_plugins/ledger.py': LEDGER,
            'tbt_user_plugins/lines.py': """
            from thinkingbox_training.tasks import Task, TaskFormat

            def load(path):
                "One task per line: its query (a format as small as a format gets)."
                return [Task(uid=f'ledger/line/{i}', domain='ledger', family='line', split='train', query=q)
                        for i, q in enumerate(path.read_text().splitlines())]

            def only_for_evaluation(uid):
                return 'the held-out line is for evaluation only' if uid == 'ledger/line/1' else None

            FORMAT = TaskFormat('lines', ('.lines',), load, only_for_evaluation)
            """,
        },
    )
    sys.path.insert(0, str(tmp_path))
    tasks._LOADED_GROUPS.clear()  # formats' entry points are read once a process: read them again with this package
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for m in [m for m in sys.modules if m.startswith('tbt_user_plugins')]:
        del sys.modules[m]
    DOMAINS.pop('ledger', None)
    TASK_FORMATS.pop('lines', None)
    tasks._LOADED_GROUPS.clear()


def test_a_users_package_offers_a_domain_through_an_entry_point(user_package):
    assert 'ledger' not in DOMAINS and 'ledger' in available_domains()  # listed before anything is imported
    dom = get_domain('ledger')
    assert isinstance(dom, DomainInterface) and dom is DOMAINS['ledger']
    with dom.provision() as db:
        assert db.run_tool('get_entry', {'entry_id': 'E-1'}) == {'id': 'E-1', 'cents': 5}
    with pytest.raises(KeyError, match="unknown domain 'nope'") as e:
        get_domain('nope')
    assert {'demo', 'ledger', 'retail', 'travel'} <= set(e.value.args[0].split('(known: ')[1].rstrip(')').split(', '))


def test_a_users_package_offers_a_task_format_through_an_entry_point(user_package, tmp_path):
    f = tmp_path / 'two.lines'
    f.write_text('What is on E-1?\nAdd 3 cents to E-1.\n')
    tasks = load_tasks(f)
    assert [t.uid for t in tasks] == ['ledger/line/0', 'ledger/line/1'] and 'lines' in TASK_FORMATS
    assert evaluation_only('ledger/line/0') is None
    with pytest.raises(EvaluationOnly, match='task ledger/line/1 may not be used for a training pool: the held-out'):
        refuse_evaluation_only(tasks, 'a training pool')


def test_a_domain_entry_point_that_fails_is_named():
    "A broken entry point is one error naming the domain and the entry point, not a traceback from inside it."
    import importlib.metadata as md

    from thinkingbox_training.tasks import _from_entry_point

    ep = md.EntryPoint(name='broken', value='tbt_no_such_module:dom', group='thinkingbox_training.domains')
    with pytest.raises(KeyError, match="domain 'broken': its entry point 'tbt_no_such_module:dom' fails to load"):
        _from_entry_point('broken', ep)


def test_get_domain_before_any_domain_was_imported_lists_what_can_load():
    "A fresh process: the error lists the bundled domains (it said 'known: none' before any domain was imported)."
    code = (
        'from thinkingbox_training.tasks import get_domain\n'
        'try:\n    get_domain("nope")\nexcept KeyError as e:\n    print(e.args[0])'
    )
    env = {**os.environ, 'PYTHONPATH': str(ROOT)}
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.startswith("unknown domain 'nope' (known: demo, retail, travel"), out


def test_a_file_no_format_reads_is_read_as_json_lines(tmp_path):
    p = tmp_path / 'tasks.txt'
    p.write_text(json.dumps({'uid': 'u', 'domain': 'demo', 'family': 'f', 'split': 'train', 'query': 'q'}) + '\n')
    assert [t.uid for t in load_tasks(p)] == ['u']
    p.write_text('{not json\n')
    with pytest.raises(TaskFileError, match='tasks.txt:1: invalid JSON'):
        load_tasks(p)
