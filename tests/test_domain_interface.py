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
        'kind',
    }


def test_our_sqlite_domains_implement_the_interface():
    for name in ('demo', 'travel', 'retail'):
        dom = get_domain(name)
        assert isinstance(dom, DomainInterface), name
        assert dom.argument_validation == 'strict' and dom.kind == 'sqlite'
        assert list(dom.mcp_tools()) == list(dom.tools)  # the tools, in the order the agent sees them
        assert dom.expected_state(None) is None  # the grader replays the golden calls


def test_a_scenario_domain_implements_the_interface_as_a_class():
    "Every method of the interface is the class's own (no data needed); its plain attributes are set per scenario."
    from thinkingbox_training.thinkingbox import ScenarioDomain

    for cls in (Domain, ScenarioDomain):
        missing = [m for m in METHODS if not inspect.isfunction(getattr(cls, m, None))]
        assert not missing, (cls.__name__, missing)
    assert ScenarioDomain.argument_validation == 'server' and Domain.argument_validation == 'strict'


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


# ---------------------------------------------------------------- argument validation belongs to the task format

ORDER = {  # a valid order of their hardware procurement server (neobank scenario)
    'device_type': 'laptop_standard',
    'device_model': 'X1',
    'quantity': 1,
    'expected_delivery_date': '2026-12-01',
    'ship_to_location': 'HQ',
    'requester_email': 'a@b.c',
}


def _scenario_calls(calls):
    "The agent's calls as an episode makes them: parsed against what the session says, then called through it."
    from thinkingbox_training.interpret import parse_assistant
    from thinkingbox_training.thinkingbox import scenario_domain, ThinkingBoxDataError
    from thinkingbox_training.tools import tool_session

    try:
        dom = scenario_domain('sandbox_neobank_support_v1')
    except ThinkingBoxDataError as e:
        skip_unless_ci(str(e))

    async def go():
        with dom.provision(None) as db:
            async with tool_session(db) as ts:
                schemas, out = ts.parse_schemas(await ts.tool_specs()), []
                for name, args in calls:
                    text = f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>'
                    turn = parse_assistant(text, schemas)
                    assert not turn.errors, turn.errors  # nothing of ours refuses it: it reaches their server
                    out.append((await ts.call(turn.tool_calls[0].name, turn.tool_calls[0].arguments)).text)
                return schemas, out

    import asyncio

    return asyncio.run(go())


def test_thinkingbox_calls_are_checked_by_their_servers_in_pydantic_lax_mode():
    "`true` for an integer is taken; a number for a string, an extra or a missing argument is refused, in their words."
    create = 'hardware_procurement_api_create_order'
    schemas, texts = _scenario_calls(
        [
            (create, {**ORDER, 'quantity': True}),
            (create, {**ORDER, 'device_model': 5}),
            (create, {**ORDER, 'extra': 1}),
            (create, {k: v for k, v in ORDER.items() if k != 'quantity'}),
        ]
    )
    assert schemas is None  # our parser checks nothing of these calls
    took, *refused = [json.loads(t) for t in texts]
    assert 'Input validation failed' not in took.get('error', ''), took  # past validation (to their business rules)
    for answer, field in zip(refused, ('device_model', 'extra', 'quantity')):
        assert set(answer) == {'error', 'tool'} and answer['tool'] == create  # their servers' shape
        assert 'Input validation failed' in answer['error'] and f'{field}:' in answer['error'], answer
        assert answer['error'].count(':') == 3, answer  # that field alone: `Tool ... failed: ... failed: field: why`


def test_a_call_of_no_tool_is_answered_as_their_harness_answers_it(tmp_path):
    from thinkingbox_training.thinkingbox import HARNESS_SESSION, ThinkingBoxDataError, harness_dir, unknown_tool_format

    _, [text] = _scenario_calls([('no_such_tool', {})])
    fmt = unknown_tool_format(harness_dir())
    assert text == fmt.format(name='no_such_tool') and 'no_such_tool' in text
    source = (harness_dir() / HARNESS_SESSION).read_text()
    assert all(part in source for part in fmt.split('{name}'))  # their text, read from their agent session
    with pytest.raises(ThinkingBoxDataError, match='set THINKINGBOX_HARNESS'):
        unknown_tool_format(tmp_path)


def test_our_domains_keep_our_parser_and_the_transports_text():
    from thinkingbox_training.tools import tool_session

    dom = get_domain('demo')

    async def go():
        with dom.provision() as db:
            async with tool_session(db) as ts:
                specs = await ts.tool_specs()
                return ts.parse_schemas(specs) == specs, (await ts.call('nope', {})).text

    import asyncio

    checked, text = asyncio.run(go())
    assert checked and dom.unknown_tool('nope') is None and text == 'Unknown tool: nope'


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
    from thinkingbox_training.cli import known_domains

    assert 'ledger' not in DOMAINS and 'ledger' in available_domains()  # listed before anything is imported
    assert 'ledger' in known_domains()  # what `tbt` accepts as a domain option
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


def test_the_thinkingbox_format_loads_through_the_entry_point_this_package_declares(tmp_path):
    """A fresh process that never imports the thinkingbox module: with the entry points pyproject.toml declares (as an
    install writes them), a task module loads and a release uid is refused for training by its uid alone."""
    import tomllib

    if not os.environ.get('THINKINGBOX_DATA'):
        skip_unless_ci('THINKINGBOX_DATA is not set (the thinkingbox-data checkout)')
    declared = tomllib.loads((ROOT / 'pyproject.toml').read_text())['project']['entry-points']
    group = 'thinkingbox_training.task_formats'
    eps = ''.join(f'{k} = {v}\n' for k, v in declared[group].items())
    _dist(tmp_path, 'tbt_declared', f'[{group}]\n{eps}', {})
    code = textwrap.dedent(
        """
        import os, sys, yaml
        from thinkingbox_training.tasks import EvaluationOnly, load_tasks, refuse_evaluation_only
        d = os.environ['THINKINGBOX_DATA']
        tasks = load_tasks(d + '/dataset/test_case/banking.py')
        uid = yaml.safe_load(open(d + '/releases/thinkingbox_bench_v1/testlist_thinkingbox_bench_v1.yaml'))[0]
        try:
            refuse_evaluation_only([uid], 'a training pool')
        except EvaluationOnly as e:
            print(len(tasks), str(e).split(': ', 1)[1][:40])
        """
    )
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(tmp_path), str(ROOT)])}
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith('12 thinkingbox_bench_v1: its README restric'), out.stdout


def test_a_format_whose_dependencies_are_missing_leaves_json_lines_and_names_itself(tmp_path):
    "An environment without a format's dependencies (OpenEnv's has no torch) still reads JSON Lines; its files say why."
    _dist(
        tmp_path,
        'tbt_heavy_format',
        """
        [thinkingbox_training.task_formats]
        heavy = tbt_heavy_format:FORMAT
        """,
        {'tbt_heavy_format/__init__.py': 'import tbt_no_such_dependency\n'},
    )
    tasks._LOADED_GROUPS.clear()
    sys.path.insert(0, str(tmp_path))
    try:
        assert tasks.format_of(ROOT / 'data/tasks/retail_train.jsonl').name == 'jsonl'
        assert evaluation_only('retail/cancel_before_shipping/train-0-0000') is None  # the other rules still asked
        assert 'heavy' in tasks.UNAVAILABLE and 'tbt_no_such_dependency' in tasks.UNAVAILABLE['heavy']
        with pytest.raises(
            TaskFileError, match=r'x\.heavy: no task format here reads \.heavy \(tbt_heavy_format:FORMAT'
        ):
            tasks.format_of(tmp_path / 'x.heavy')
    finally:
        sys.path.remove(str(tmp_path))
        tasks.UNAVAILABLE.pop('heavy', None)
        tasks._LOADED_GROUPS.clear()
