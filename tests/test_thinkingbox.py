"ThinkingBox-format tasks through our harness: loading, the release guard, MCP tools, grading by their hash."

import json, os, random
from pathlib import Path
import pytest
from thinkingbox_training.tasks import EvaluationOnly, exclude, assert_disjoint, TaskFileError, ToolCallSpec
from thinkingbox_training.episode import EpisodeRunner
from thinkingbox_training.grader import Grader, JudgeAnswer, DefectiveTask, expected_state
from thinkingbox_training.policies import ScriptedPolicy

from thinkingbox_training.thinkingbox import DATA_UNSET as NEED  # the one spelling of where the data goes


@pytest.fixture(scope='module')
def data():
    if not os.environ.get('THINKINGBOX_DATA'):
        pytest.skip(NEED)
    from thinkingbox_training.thinkingbox import data_dir

    return data_dir()  # set but wrong: every test here fails with the error naming the variable


@pytest.fixture(scope='module')
def retail(data):
    from thinkingbox_training.thinkingbox import load_thinkingbox

    return load_thinkingbox('sandbox_external_retail_group1.py')


@pytest.fixture(scope='module')
def neobank_rubric(data):
    from thinkingbox_training.thinkingbox import load_thinkingbox

    return load_thinkingbox('sandbox_neobank_support_v1_group1_rubrics_yesno.py')


def calls_of(task):
    return [{'name': c.name, 'arguments': c.arguments} for c in task.golden]


class Agrees:
    "A judge for tests of the state check: says yes to every rubric item (the rule judge reads none of theirs)."

    name = 'agrees'

    async def ask(self, item, final_message, transcript=None):
        return JudgeAnswer(yes=True, explanation='test stub')


class NoOp(ScriptedPolicy):
    "Says it is done without calling a tool."

    def plan(self, task, repetition):
        return []


def test_data_set_but_wrong_is_an_error_naming_the_variable(tmp_path):
    from thinkingbox_training.thinkingbox import data_dir, ThinkingBoxDataError

    with pytest.raises(ThinkingBoxDataError, match=f'THINKINGBOX_DATA={tmp_path} is not a thinkingbox-data checkout'):
        data_dir(tmp_path)


def test_a_release_module_loads_as_held_out_bench_tasks(retail):
    assert len(retail) == 98
    t = retail[0]
    assert t.uid == 'sandbox_external_retail_group1.py:test_case_ST002_001'
    assert (t.domain, t.family) == ('sandbox_external_retail', 'sandbox_external_retail_group1')
    assert (t.split, t.held_out_family) == ('bench', True)
    assert 'evaluation-only:thinkingbox_bench_v1' in t.tags and t.user.context and t.golden and t.init
    assert max(len(t.golden) for t in retail) <= t.limits.max_turns


def test_loader_errors_name_file_function_and_field(data, tmp_path):
    from thinkingbox_training.thinkingbox import load_thinkingbox

    p = tmp_path / 'mine.py'
    p.write_text('''
"""!
scenario: sandbox_external_retail
"""
def test_no_query(x, judge):
    """!
    user_context: hi
    """
def test_bad_tool(x, judge):
    """!
    query: hello
    init:
      sandbox_external_retail:
        golden_test_case:
          tool_interactions:
          - tool: launch_rocket
            parameters: {}
          - tool: get_order
            parameters: {order_id: 7}
"""
def test_bad_scenario(x, judge):
    """!
    scenario: no_such_scenario
    query: hello
    """
''')
    with pytest.raises(TaskFileError) as e:
        load_thinkingbox(p)
    msg = str(e.value)
    assert f"{p}:5 [mine.py:test_no_query] query: missing or empty 'query'" in msg
    assert "[mine.py:test_bad_tool] golden[0].name: unknown tool 'launch_rocket' in scenario sandbox_external_" in msg
    assert '[mine.py:test_bad_tool] golden[1].arguments.order_id: get_order: Input should be a valid string' in msg
    assert '[mine.py:test_bad_scenario] scenario: no scenario file' in msg


def test_the_release_guard_refuses_release_tasks_for_probing_pools_and_training(retail, tmp_path):
    from thinkingbox_training.difficulty import select_pool
    from thinkingbox_training.campaigns import _tasks_from
    from thinkingbox_training.grpo import TBTConfig, load_pool

    uid = retail[0].uid
    (tmp_path / 'one.yaml').write_text(f'- {uid}\n')
    clause = 'thinkingbox_bench_v1: its README restricts its tasks to evaluation'
    for attempt in (
        lambda: exclude(retail),
        lambda: assert_disjoint([uid], []),
        lambda: select_pool(
            [dict(task_uid=uid, domain='d', family='f', split='bench', held_out_family=True, status='ok', reward=1)]
        ),
        lambda: _tasks_from(str(tmp_path / 'one.yaml'), 'train'),
        lambda: load_pool(
            TBTConfig(output_dir=str(tmp_path), use_cpu=True, report_to='none', task_files=[str(tmp_path / 'one.yaml')])
        ),
    ):
        with pytest.raises(EvaluationOnly, match=f'task {uid} may not be used for .*{clause}'):
            attempt()


def test_tools_are_listed_through_mcp_with_their_schemas(retail):
    from thinkingbox_training.tools import ToolSession
    from thinkingbox_training.episode import run_blocking
    from thinkingbox_training.tasks import get_domain

    task = retail[0]
    dom = get_domain(task.domain)

    async def go():
        with dom.provision(task) as db:
            async with ToolSession(db) as ts:
                specs = await ts.tool_specs()
                r = await ts.call('search_policy', {'query': 'refund for a delayed order'})
                bad = await ts.call('get_order', {'order_id': 'ORD-NOPE'})
        return specs, r, bad

    specs, r, bad = run_blocking(go())
    assert [s['function']['name'] for s in specs] == dom.visible
    get_order = next(s for s in specs if s['function']['name'] == 'get_order')['function']
    props = dom.specs['get_order']['input_schema']['properties']
    theirs = {k: {f: x for f, x in v.items() if f != 'title'} for k, v in props.items()}
    assert get_order['parameters']['properties'] == theirs  # as listed by their system (our MCP listing drops titles)
    assert not r.is_error and json.loads(r.text)['snippets'][0]['source'].endswith('.md')
    # their server's answer to a refused call (tests/test_thinkingbox_servers.py compares it with theirs)
    assert json.loads(bad.text) == {'error': 'Tool execution failed: Order not found: ORD-NOPE', 'tool': 'get_order'}
    assert not bad.is_error and bad.system_error is None


def test_golden_and_flawed_paths_on_a_sample_agree_with_their_hash(retail):
    from thinkingbox_training.thinkingbox import GoldenWithFlaws, FLAWS, their_verdict

    sample = random.Random(0).sample(retail, 8)
    pol = GoldenWithFlaws(FLAWS)
    eps = EpisodeRunner(pol, concurrency=8).run_sync([(t, r) for t in sample for r in range(len(FLAWS))])
    assert [e.reward for e in eps if e.repetition == 0] == [1] * len(sample)
    for e in eps:
        theirs = their_verdict(e.task, pol.plan(e.task, e.repetition))
        assert (e.reward == 1) == theirs, (e.task.uid, FLAWS[e.repetition])
    failed = next(e for e in eps if e.reward == 0)
    reasons = failed.verdict.reasons
    assert any('(state sha256)' in r for r in reasons) and len(reasons) >= 2  # the hash, and a readable row


def test_a_golden_call_that_errors_makes_the_task_defective(retail):
    t = retail[0]
    nope = ToolCallSpec(name='get_order', arguments={'order_id': 'ORD-NOPE'})
    bad = t.model_copy(update={'uid': t.uid + '-broken', 'golden': t.golden + [nope]})
    with pytest.raises(DefectiveTask, match=r'golden\[\d+\] get_order'):
        expected_state(bad)


class SaysNo:
    name = 'says-no'

    def __init__(self):
        self.asked = []

    async def ask(self, item, final_message, transcript=None):
        self.asked.append(item.question)
        return JudgeAnswer(yes=False, explanation='offline: no')


def test_rubric_items_go_to_the_judge_and_the_llm_user_plays_through_the_stand_in(neobank_rubric):
    from thinkingbox_training.users import StandInServer

    task = next(t for t in neobank_rubric if t.rubric)
    judge = SaysNo()
    with StandInServer() as srv:
        [e] = EpisodeRunner(
            ScriptedPolicy(), grader=Grader(judge=judge), user='openai:stand-in', user_kw={'base_url': srv.base_url}
        ).run_sync([(task, 0)])
    assert e.reward == 0 and judge.asked == [r.question for r in task.rubric]
    assert [c.name for c in e.verdict.checks][0] == 'state' and e.verdict.checks[0].passed
    # their protocol: the user cannot end the episode, and this agent never writes `<DONE>`, so their limit of ten
    # simulated-user turns ends it
    assert e.trajectory.usage['user'].calls == 10 and e.trajectory.termination == 'max_user_turns'


@pytest.fixture(scope='module')
def release(data):
    "The 507 tasks of ThinkingBox-Bench v1.0; TBT_TB_SAMPLE=N takes a seeded sample of N (a stated subset)."
    from thinkingbox_training.thinkingbox import load_thinkingbox

    tasks = load_thinkingbox('thinkingbox_bench_v1')
    assert len(tasks) == 507
    n = int(os.environ.get('TBT_TB_SAMPLE') or 0)
    return random.Random(0).sample(tasks, n) if n else tasks


@pytest.mark.slow
def test_every_release_task_golden_passes_and_every_flawed_path_gets_their_verdict(release):
    "507 x 4 episodes through our engine and MCP sessions (about 25 min of one loaded core)."
    from thinkingbox_training.thinkingbox import GoldenWithFlaws, FLAWS, their_verdict

    pol = GoldenWithFlaws(FLAWS)
    eps = EpisodeRunner(pol, grader=Grader(judge=Agrees()), concurrency=16).run_sync(  # the state is under test
        [(t, r) for t in release for r in range(len(FLAWS))]
    )
    assert not [e.task.uid for e in eps if e.trajectory.status != 'ok']
    assert sum(e.reward == 1 for e in eps if e.repetition == 0) == len(release)
    wrong = [
        (e.task.uid, FLAWS[e.repetition])
        for e in eps
        if (e.reward == 1) != their_verdict(e.task, pol.plan(e.task, e.repetition))
    ]
    assert wrong == []
    passed = {f: sum(e.reward for e in eps if e.repetition == i) for i, f in enumerate(FLAWS)}
    print(f'{len(release)} tasks, passed per path: {passed}')


@pytest.mark.slow
def test_doing_nothing_passes_where_their_hash_says_so(release):
    "One release task passes with no call (its golden path leaves the stable state as it was); their hash agrees."
    from thinkingbox_training.thinkingbox import their_verdict

    noop = EpisodeRunner(NoOp(), grader=Grader(judge=Agrees()), concurrency=16).run_sync([(t, 0) for t in release])
    ours = sorted(e.task.uid for e in noop if e.reward == 1)
    assert ours == sorted(t.uid for t in release if their_verdict(t, []))
    if len(release) == 507:
        assert ours == ['sandbox_neobank_support_v1_group1.py:test_he_017']


def test_a_development_task_is_probed_and_may_enter_a_pool(data, tmp_path, monkeypatch):
    "banking.py (a development module, in no release list): split=train, graded by its own asserts, probed, pooled."
    from thinkingbox_training.campaigns import probe
    from thinkingbox_training.difficulty import select_pool
    from thinkingbox_training.grpo import TBTConfig, load_pool
    from thinkingbox_training.users import StandInServer
    from thinkingbox_training.thinkingbox import load_thinkingbox

    path = str(data / 'dataset/test_case/banking.py')
    tasks = load_thinkingbox(path)
    assert len(tasks) == 12 and {t.split for t in tasks} == {'train'} and not any(t.held_out_family for t in tasks)
    # the rule judge reads none of their judge questions: refused, naming --judge, before anything runs
    assert probe(path, 'scripted', k=2, out=str(tmp_path / 'refused'), quiet=True) == 2
    assert not (tmp_path / 'refused' / 'campaign.json').exists()
    with StandInServer() as srv, StandInServer(chat=lambda messages: 'yes') as judge:
        monkeypatch.setenv('TBT_USER_BASE_URL', srv.base_url)
        monkeypatch.setenv('TBT_JUDGE_BASE_URL', judge.base_url)
        assert (
            probe(
                path, 'scripted', k=2, out=str(tmp_path / 'probe'), user='openai:stand-in', judge='openai:j', quiet=True
            )
            == 0
        )
    recs = [json.loads(l) for l in (tmp_path / 'probe' / 'attempts.jsonl').read_text().splitlines()]
    assert len(recs) == 24 and all(r['status'] == 'ok' for r in recs)
    by = {r['task_uid']: r for r in recs}
    assert by['banking.py:test_get_balance_savings']['reward'] == 1  # only a judged reply: nothing to do
    assert by['banking.py:test_transfer_and_balance']['reward'] == 0  # the scripted policy makes no transfer
    assert any('failed assert' in x for x in by['banking.py:test_transfer_and_balance']['verdict']['reasons'])
    select_pool(recs)  # no refusal: these tasks may be selected
    assert [
        t.uid
        for t in load_pool(TBTConfig(output_dir=str(tmp_path / 'o'), use_cpu=True, report_to='none', task_files=[path]))
    ] == [t.uid for t in tasks]


def test_a_development_task_passes_when_its_asserts_hold(data):
    from thinkingbox_training.thinkingbox import load_thinkingbox

    task = next(t for t in load_thinkingbox('banking.py') if t.uid == 'banking.py:test_transfer_and_balance')

    class Transfers(ScriptedPolicy):
        def plan(self, task, repetition):
            args = {'from_account': '599521725', 'to_account': '843847393', 'amount': 100.0}
            return [{'name': 'transfer', 'arguments': args}][:repetition]

    eps = EpisodeRunner(Transfers(), grader=Grader(judge=Agrees())).run_sync([(task, 0), (task, 1)])
    assert [e.reward for e in eps] == [0, 1]
    assert [c.name for c in eps[1].verdict.checks] == ['state', 'rubric[0]']  # the judge's question: a rubric item


@pytest.mark.slow
def test_a_development_task_is_trained_on(data, tmp_path):
    "One GRPO step of the tiny test model on a banking.py task: its group's attempts differ, so it is not skipped."
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from transformers import PrinterCallback
    from grpo_fixtures import cpu_config, tokenizer
    from thinkingbox_training.grpo import TBTTrainer
    from thinkingbox_training.policies import tiny_qwen3
    from thinkingbox_training.thinkingbox import load_thinkingbox

    tok = tokenizer()
    task = next(t for t in load_thinkingbox('banking.py') if t.uid == 'banking.py:test_transfer_and_balance')

    class Transfers(ScriptedPolicy):
        def plan(self, task, repetition):
            args = {'from_account': '599521725', 'to_account': '843847393', 'amount': 100.0}
            return [{'name': 'transfer', 'arguments': args}][: repetition % 2]

    cfg = cpu_config(tmp_path / 'out', groups_per_step=1, max_refill_rounds=0, max_episode_tokens=16384)
    pol = Transfers(tokenizer=tok)
    t = TBTTrainer(tiny_qwen3(tok), cfg, [task], processing_class=tok, policy=pol, grader=Grader(judge=Agrees()))
    t.remove_callback(PrinterCallback)
    t.train()
    assert [r['skipped'] for r in t.step_log] == [False]
