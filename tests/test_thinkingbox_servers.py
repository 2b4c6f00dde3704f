"""ThinkingBox's development servers (`thinkingbox_tools`) through our harness, and what a refused call reads like.

The email, MS Store and airline servers are built on mcp 1.x's FastMCP (`mcp.server.fastmcp`), online banking on
`fastmcp`; both run in process here, one fresh module instance per episode, with our mcp 2.x.
"""

import json, logging, os, re
import pytest
from thinkingbox_training.episode import EpisodeRunner, run_blocking
from thinkingbox_training.policies import ScriptedPolicy
from thinkingbox_training.tasks import EvaluationOnly, TaskFileError, exclude, get_domain

from thinkingbox_training.thinkingbox import DATA_UNSET as NEED  # the one spelling of where the data goes


@pytest.fixture(scope='module')
def data():
    if not os.environ.get('THINKINGBOX_DATA'):
        pytest.skip(NEED)
    from thinkingbox_training.thinkingbox import data_dir

    return data_dir()  # set but wrong: every test here fails with the error naming the variable


def load(name):
    from thinkingbox_training.thinkingbox import load_thinkingbox

    return load_thinkingbox(name)


@pytest.fixture(scope='module')
def email(data):
    return {t.uid.split(':')[1]: t for t in load('email_system_org.py')}


class Plays(ScriptedPolicy):
    "Repetition r plays paths[r]."

    def __init__(self, *paths):
        super().__init__()
        self.paths = paths

    def plan(self, task, repetition):
        return self.paths[repetition]


def send(to, body='Are you free for a meeting regarding Project A on Thursday?'):
    return {'name': 'send_email', 'arguments': {'to': to, 'cc': '', 'subject': 'Project A', 'body': body}}


LOOKUP = [
    {'name': 'get_user_profile', 'arguments': {}},
    {'name': 'get_contact', 'arguments': {'contact_id': 'contact-001'}},
]


async def calls_through(session_cls, dom, task, calls):
    "The texts (and error flags) of `calls` on a fresh backend of `task`, through one of our tool sessions."
    with dom.provision(task) as db:
        async with session_cls(db) as s:
            return [await s.call(n, a) for n, a in calls]


def test_mcp1_fastmcp_servers_load_with_their_schemas_and_leave_the_name_alone(data, email):
    from mcp.server.mcpserver.tools.base import Tool as MCPTool
    from thinkingbox_training.tools import ToolSession
    from thinkingbox_training.thinkingbox import ModuleBackend

    task = email['test_email_manager_of_manager']
    assert (task.split, task.held_out_family, task.family) == ('train', False, 'email_system_org')
    dom = get_domain(task.domain)

    async def specs():
        with dom.provision(task) as db:
            async with ToolSession(db) as ts:
                return await ts.tool_specs()

    listed = {s['function']['name']: s['function'] for s in run_blocking(specs())}
    assert list(listed) == dom.visible and 'send_email' in listed
    fn = ModuleBackend('thinkingbox_tools.mcp_email_system').tools['send_email'][0]  # their function
    theirs = MCPTool.from_function(fn, name='send_email').parameters['properties']
    assert listed['send_email']['parameters']['properties'] == {
        k: {f: x for f, x in v.items() if f != 'title'} for k, v in theirs.items()
    }
    assert listed['send_email']['description'] == 'Send an email to a recipient.'
    with pytest.raises(ModuleNotFoundError, match='mcp 2.x'):
        import mcp.server.fastmcp  # noqa: F401


class Agrees:
    "A judge for tests of the state check: says yes to every rubric item (the rule judge reads none of theirs)."

    name = 'agrees'

    async def ask(self, item, final_message, transcript=None):
        from thinkingbox_training.grader import JudgeAnswer

        return JudgeAnswer(yes=True, explanation='test stub')


def judged():
    from thinkingbox_training.grader import Grader

    return Grader(judge=Agrees())


def test_a_development_task_on_the_email_server_passes_its_path_and_fails_a_flawed_one(email):
    "Their test function decides, on the episode's effects: the manager's manager (Carol) gets the email."
    task = email['test_email_manager_of_manager']
    eps = EpisodeRunner(
        Plays(LOOKUP + [send('carol@company.com')], LOOKUP + [send('bob@company.com')], []), grader=judged()
    ).run_sync([(task, r) for r in range(3)])
    assert [e.reward for e in eps] == [1, 0, 0]
    assert [c.name for c in eps[0].verdict.checks] == ['state', 'rubric[0]']  # the judge's question: a rubric item
    wrong = '\n'.join(eps[1].verdict.reasons)
    assert 'email_system_org.py:22' in wrong and '["carol@company.com"]' in wrong  # their failed assert, by line
    assert 'email_system_org.py:19' in '\n'.join(eps[2].verdict.reasons)  # nothing sent


def test_a_task_on_two_module_servers(data):
    "banking_email.py: a transfer on the banking server (fastmcp) and an email on the email server (mcp 1.x)."
    [task] = load('banking_email.py')
    transfer = {
        'name': 'transfer',
        'arguments': {'from_account': '599521725', 'to_account': '843847393', 'amount': 100.0},
    }
    eps = EpisodeRunner(
        Plays([transfer, send('john@example.com', 'The transfer is done.')], [transfer]), grader=judged()
    ).run_sync([(task, 0), (task, 1)])
    assert [e.reward for e in eps] == [1, 0]


def test_development_tasks_of_mcp1_servers_are_probed_and_may_enter_a_pool(data, tmp_path, monkeypatch):
    from thinkingbox_training.campaigns import probe
    from thinkingbox_training.difficulty import select_pool
    from thinkingbox_training.grpo import TBTConfig, load_pool
    from thinkingbox_training.users import StandInServer

    path = str(data / 'dataset/test_case/email_system_org.py')
    with StandInServer() as srv, StandInServer(chat=lambda messages: 'yes') as judge:
        monkeypatch.setenv('TBT_USER_BASE_URL', srv.base_url)
        monkeypatch.setenv('TBT_JUDGE_BASE_URL', judge.base_url)  # their judge questions need an LLM judge
        assert (
            probe(
                path, 'scripted', k=2, out=str(tmp_path / 'probe'), user='openai:stand-in', judge='openai:j', quiet=True
            )
            == 0
        )
    recs = [json.loads(line) for line in (tmp_path / 'probe' / 'attempts.jsonl').read_text().splitlines()]
    assert len(recs) == 6 and all(r['status'] == 'ok' for r in recs)
    by = {r['task_uid']: r['reward'] for r in recs}
    assert by['email_system_org.py:test_email_manager_of_manager'] == 0  # the scripted policy sends nothing
    select_pool(recs)  # no refusal: these tasks may be selected
    pool = load_pool(TBTConfig(output_dir=str(tmp_path / 'o'), use_cpu=True, report_to='none', task_files=[path]))
    assert sorted(t.uid for t in pool) == sorted(by) and len(by) == 3


def test_airline_tasks_run_on_their_data_and_stay_evaluation_only(data):
    "airline_tau_bench.py (mcp 1.x server, data files under $THINKINGBOX_DATA/support): a release, so bench only."
    tasks = load('airline_tau_bench.py')
    assert len(tasks) == 21 and {(t.split, t.held_out_family) for t in tasks} == {('bench', True)}
    with pytest.raises(EvaluationOnly, match='dataset_2604_airline_tau_bench: its README restricts'):
        exclude(tasks)
    task = tasks[0]
    [e] = EpisodeRunner(Plays([{'name': 'get_user_details', 'arguments': {'user_id': 'mia_li_3668'}}])).run_sync(
        [(task, 0)]
    )
    assert e.reward == 0 and any('airline_tau_bench.py:' in r for r in e.verdict.reasons)  # no booking was made
    answer = next(m['content'] for m in e.trajectory.messages if m['role'] == 'tool')
    assert '"first_name": "Mia"' in answer  # their users.json, read at run time


def test_tasks_whose_tools_answer_the_user_directly_are_refused_but_their_server_runs(data):
    from thinkingbox_training.thinkingbox import scenario_domain

    with pytest.raises(
        TaskFileError,
        match=r"mcs_defaults.py:test_mcs_defaults_easy\] scenario: .*'ms_store_hours'"
        r'.*direct_response',
    ):
        load('mcs_defaults.py')
    dom = scenario_domain('mcs_defaults')
    with dom.provision() as db:
        text = db.run_tool('ms_store_hours', {})
    assert json.loads(text)['status'] == 'ok' and 'Sunday' in json.loads(text)['response']


# What their servers answer, measured by running them as their harness does (one stdio process per server,
# fastmcp 3.4.11 on mcp 1.30.0, pydantic 2.14.4) and calling them with mcp's client there:
# `python benchmarks/thinkingbox_env.py --their-texts PYTHON` prints them, PYTHON from such an environment.
MEASURED = {
    ('retail_banking', 'get_balance', '{"account_number": "nope"}'): 'Error!\nAccount not found: nope',
    (
        'retail_banking',
        'get_balance',
        '{}',
    ): '1 validation error for call[get_balance]\naccount_number\n  Missing required argument '
    '[type=missing_argument, input_value={}, input_type=dict]\n'
    '    For further information visit https://errors.pydantic.dev/2.14/v/missing_argument',
    (
        'retail_banking',
        'transfer',
        '{"from_account": "1", "to_account": "2", "amount": "lots"}',
    ): '1 validation error for call[transfer]\namount\n  Input should be a valid number, unable to parse string as '
    "a number [type=float_parsing, input_value='lots', input_type=str]\n"
    '    For further information visit https://errors.pydantic.dev/2.14/v/float_parsing',
    ('email_system_org', 'get_contact', '{"contact_id": "nope"}'): 'Error!\nContact with id nope not found',
    (
        'email_system_org',
        'list_emails',
        '{"folder": 7}',
    ): 'Error executing tool list_emails: 1 validation error for list_messagesArguments\nfolder\n  Input should be '
    'a valid string [type=string_type, input_value=7, input_type=int]\n'
    '    For further information visit https://errors.pydantic.dev/2.14/v/string_type',
}


def _versionless(text):
    return re.sub(r'errors\.pydantic\.dev/[0-9.]+/', 'errors.pydantic.dev/V/', text)


def test_a_refused_call_on_a_module_server_reads_as_their_server_answers_it(data):
    from thinkingbox_training.thinkingbox import scenario_domain
    from thinkingbox_training.tools import ToolSession, InProcessToolSession

    for cls in (ToolSession, InProcessToolSession):
        for (scen, name, args), theirs in MEASURED.items():
            dom = scenario_domain(scen)
            [r] = run_blocking(calls_through(cls, dom, None, [(name, json.loads(args))]))
            assert _versionless(r.text) == _versionless(theirs), (cls.__name__, scen, name, args)
    banking = scenario_domain('retail_banking')
    with banking.provision() as db:
        ok = db.run_tool('get_accounts', {})
    assert ok.startswith('{"status":"ok","accounts":[')  # fastmcp's compact JSON of their response model


BAD = [
    ('get_order', {'order_id': 'ORD-NOPE'}),
    ('get_order', {'order_id': 7}),
    ('get_order', {}),
    ('get_order', {'order_id': 'ORD-NOPE', 'note': 'café'}),
    ('zendesk_get_item', {'table': 'tickets', 'id': 'é9'}),
    ('zendesk_get_item', {'table': 'nope', 'id': '1'}),
]


def test_a_refused_call_on_a_sandbox_server_reads_as_their_server_answers_it(data):
    """Their sandbox servers answer every call through one wrapper in their server module: computed here with
    their module's own tool function (recorded by our FastMCP stand-in) on the same backend, and compared."""
    from thinkingbox_training.thinkingbox import _recorder, _run, _server_module
    from thinkingbox_training.tools import ToolSession, InProcessToolSession

    task = load('sandbox_external_retail_group1.py')[0]
    dom = get_domain(task.domain)
    [(server, spec)] = dom.servers.items()
    module = _server_module(spec.module)
    logging.getLogger(module.__name__).setLevel(logging.CRITICAL)  # their wrapper logs each failure with a traceback
    tools = _recorder(module).tools
    calls = BAD + [(c.name, c.arguments) for c in task.golden[:2]]
    theirs = []
    with dom.provision(task) as db:
        module.sandbox_system = db.systems[server]  # the system their wrapper calls
        theirs = [_run(tools[n][0](**a)) for n, a in calls]
    assert all('"error": "Tool execution failed: ' in t for t in theirs[: len(BAD)])
    assert not any('"error"' in t for t in theirs[len(BAD) :])  # the golden calls succeed
    for cls in (ToolSession, InProcessToolSession):
        ours = run_blocking(calls_through(cls, dom, task, calls))
        assert [r.text for r in ours] == theirs, cls.__name__
        assert not any(r.is_error for r in ours)  # as there: a refusal is the tool's answer, not an MCP error


@pytest.mark.slow
def test_a_development_task_of_an_mcp1_server_is_trained_on(email, tmp_path):
    "One GRPO step of the tiny test model on the email task: its group's attempts differ, so it is not skipped."
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from transformers import PrinterCallback
    from grpo_fixtures import cpu_config, tokenizer
    from thinkingbox_training.grpo import TBTTrainer
    from thinkingbox_training.policies import tiny_qwen3

    tok = tokenizer()
    task = email['test_email_manager_of_manager']
    cfg = cpu_config(tmp_path / 'out', groups_per_step=1, max_refill_rounds=0, max_episode_tokens=16384)

    class SendsEveryOther(ScriptedPolicy):
        def plan(self, task, repetition):
            return [send('carol@company.com')][: repetition % 2]

    t = TBTTrainer(
        tiny_qwen3(tok), cfg, [task], processing_class=tok, policy=SendsEveryOther(tokenizer=tok), grader=judged()
    )
    t.remove_callback(PrinterCallback)
    t.train()
    assert [r['skipped'] for r in t.step_log] == [False]
