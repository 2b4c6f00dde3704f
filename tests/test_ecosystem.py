"""Our environments in TRL's plain GRPOTrainer (environment_factory): tools, reward, void episodes, parsers, a step."""

import asyncio, inspect, os, warnings
from pathlib import Path
import pytest

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore', message='.*use_cache=True.*')
from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
from transformers.utils import get_json_schema
from trl import GRPOConfig, GRPOTrainer
from thinkingbox_training.ecosystem import (
    compare_parsers,
    domain_tool_specs,
    environment_class,
    trl_environment,
    trl_tool_method,
    verdict_reward,
    trl_tokenizer,
)
from thinkingbox_training.grader import Grader, JudgeAnswer, OpenAIJudge
from thinkingbox_training.tasks import EvaluationOnly, load_tasks
from thinkingbox_training.users import StandInServer
from grpo_fixtures import crash_task

ROOT = Path(__file__).parent.parent
MODEL = ROOT / 'data/models/tiny-qwen3'
RETAIL = load_tasks(ROOT / 'data/tasks/retail_train.jsonl')
QUESTION = next(t for t in RETAIL if t.rubric)  # graded by state and by a judge reading the final message
CANCEL = next(t for t in RETAIL if t.family == 'cancel_before_shipping')  # graded by state alone


def run(coro):
    return asyncio.run(coro)


def test_tools_render_for_trl_from_the_mcp_listing():
    "Every tool of both domains renders through transformers' get_json_schema with the MCP listing's names and types."
    for d in ('retail', 'travel'):
        for spec in domain_tool_specs(d):
            f = spec['function']
            got = get_json_schema(trl_tool_method(spec))['function']
            assert got['name'] == f['name']
            assert sorted(got['parameters'].get('required', [])) == sorted(f['parameters'].get('required', []))
            assert set(got['parameters']['properties']) == set(f['parameters']['properties'])
            for p, s in f['parameters']['properties'].items():
                if s.get('type') in ('string', 'integer', 'number', 'boolean'):
                    assert got['parameters']['properties'][p]['type'] == s['type'], (f['name'], p)
                if 'enum' in s:
                    assert got['parameters']['properties'][p]['enum'] == s['enum'], (f['name'], p)


def test_a_crashing_backend_voids_the_episode_and_gets_no_reward():
    "A backend failure under a tool is a system error: later calls say the episode is void, the reward is None, not 0."
    task = crash_task()
    e = environment_class('broken', [task])()
    e.reset(task_uid=task.uid)
    assert run(e.crashing_lookup(account_id='AC-1')).endswith('internal error in crashing_lookup')
    assert 'ConnectionError' in e.system_error
    assert run(e.get_account(account_id='AC-1')).startswith('the episode is void')
    assert run(verdict_reward([[{'role': 'assistant', 'content': 'Done.'}]], environments=[e])) == [None]


def test_reset_gives_a_fresh_database_each_time():
    "A write in one rollout is gone after the next reset of the same (reused) environment object."
    Env = environment_class('retail', [CANCEL])
    e = Env()

    def golden_reward():
        e.reset(task_uid=CANCEL.uid, prompt=None)

        async def go():
            for c in CANCEL.golden:
                await getattr(e, c.name)(**c.arguments)
            return await verdict_reward([[{'role': 'assistant', 'content': CANCEL.reply}]], environments=[e])

        return run(go())

    assert golden_reward() == [1.0]
    assert golden_reward() == [1.0]  # the second cancel would be refused on the first rollout's database
    e.reset(task_uid=CANCEL.uid)
    assert run(verdict_reward([[{'role': 'assistant', 'content': CANCEL.reply}]], environments=[e])) == [0.0]


def test_evaluation_only_and_unknown_tasks_are_refused():
    bench = CANCEL.model_copy(update={'uid': 'x/bench', 'tags': ['evaluation-only:ThinkingBox-Bench v1.0']})
    with pytest.raises(EvaluationOnly, match='x/bench'):
        trl_environment([bench])
    with pytest.raises(ValueError, match='not of domain travel'):
        environment_class('travel', [CANCEL])
    with pytest.raises(KeyError, match='retail/nope'):
        environment_class('retail', [CANCEL])().reset(task_uid='retail/nope')


def test_several_domains_route_by_environment_column():
    travel = load_tasks(ROOT / 'data/tasks/travel_train.jsonl')[:1]
    env = trl_environment([CANCEL] + travel)
    assert set(env.environment_factory) == {'retail', 'travel'}
    assert env.train_dataset['environment'] == ['retail', 'travel']


# ---------------------------------------------------------------- the two parsers

CALL = '<tool_call>\n{{"name": "{}", "arguments": {}}}\n</tool_call>'
CASES = {  # completion -> (ours agree with TRL's?, what ours makes, what TRL's makes)
    'canonical': CALL.format('pay', '{"account_id": "AC-1", "amount_cents": 250}') + '<|im_end|>',
    'reasoning then call': '<think>\nPay it.\n</think>\n\n'
    + CALL.format('pay', '{"account_id": "AC-1", "amount_cents": 250}')
    + '<|im_end|>',
    'two calls': CALL.format('get_account', '{"account_id": "AC-1"}')
    + '\n'
    + CALL.format('pay', '{"account_id": "AC-1", "amount_cents": 250}')
    + '<|im_end|>',
    'string digits for an integer': CALL.format('pay', '{"account_id": "AC-1", "amount_cents": "250"}') + '<|im_end|>',
    'plain answer': 'Paid 250 cents.<|im_end|>',
    'malformed json': CALL.format('pay', '{"account_id": "AC-1",}') + '<|im_end|>',
    'one good, one malformed': CALL.format('get_account', '{"account_id": "AC-1"}')
    + '\n'
    + CALL.format('pay', '{"account_id": }')
    + '<|im_end|>',
    'unknown tool': CALL.format('refund', '{"account_id": "AC-1"}') + '<|im_end|>',
    'xml form': '<tool_call>\n<function=get_account>\n<parameter=account_id>\nAC-1\n</parameter>\n</function>\n'
    '</tool_call><|im_end|>',
    'unterminated call': '<tool_call>\n{"name": "get_account", "arguments": {"account_id": "AC-1"}}<|im_end|>',
    'word for an integer': CALL.format('pay', '{"account_id": "AC-1", "amount_cents": "lots"}') + '<|im_end|>',
}


def test_our_parser_and_trls_on_the_same_completions():
    "Where TRL's parser (a TRL rollout's calls) and ours (every other path) agree on tool calls, and where not."
    tok = trl_tokenizer(AutoTokenizer.from_pretrained(MODEL))
    rows = dict(zip(CASES, compare_parsers(tok, list(CASES.values()), domain_tool_specs('demo'))))
    pay = ('pay', {'account_id': 'AC-1', 'amount_cents': 250})
    look = ('get_account', {'account_id': 'AC-1'})
    for k in ('canonical', 'reasoning then call', 'string digits for an integer'):
        assert rows[k]['agree'] and rows[k]['trl'] == [pay], (k, rows[k])
    assert rows['two calls']['agree'] and rows['two calls']['trl'] == [look, pay]
    assert rows['plain answer']['agree'] and rows['plain answer']['ours'] == []
    # malformed JSON: ours answers the model with a parse error (a tool message) and the rollout goes on; TRL's falls
    # back to plain text, so the broken call becomes the final message and ends the rollout
    assert rows['malformed json']['ours_errors'] == ['bad_json'] and rows['malformed json']['trl'] == []
    assert '<tool_call>' in rows['malformed json']['trl_content']
    # one broken call of two: ours makes the good one and reports the other; TRL's makes neither
    assert rows['one good, one malformed']['ours'] == [look] and rows['one good, one malformed']['trl'] == []
    # a tool that does not exist: ours reports it to the model; TRL's parses it, and its loop answers "not found"
    assert rows['unknown tool']['ours_errors'] == ['unknown_tool']
    assert rows['unknown tool']['trl'] == [('refund', {'account_id': 'AC-1'})]
    # the XML call form (Qwen3-Coder's): ours reads it; TRL's Qwen3 template does not
    assert rows['xml form']['ours'] == [look] and rows['xml form']['trl'] == []
    assert rows['unterminated call']['ours_errors'] == ['unterminated_call'] and rows['unterminated call']['trl'] == []
    # a value the schema cannot type: ours refuses the call with a message; TRL's passes the string on (the tool's
    # own validation refuses it)
    assert rows['word for an integer']['ours_errors'] == ['bad_argument']
    assert rows['word for an integer']['trl'] == [('pay', {'account_id': 'AC-1', 'amount_cents': 'lots'})]


def test_trl_renders_the_prompt_our_episodes_render():
    "With trl_tokenizer and the environment's chat_template_kwargs, TRL's prompt is our ChatFormat's, token for token."
    from thinkingbox_training.interpret import ChatFormat

    env = trl_environment([CANCEL])
    tok = trl_tokenizer(AutoTokenizer.from_pretrained(MODEL))
    Env = env.environment_factory
    methods = [
        getattr(Env(), n)
        for n, _ in inspect.getmembers(Env, inspect.isfunction)
        if not n.startswith('_') and n != 'reset'
    ]
    prompt = env.train_dataset[0]['prompt']
    trl_ids = tok.apply_chat_template(
        prompt, tools=methods, add_generation_prompt=True, return_dict=False, **env.chat_template_kwargs
    )
    specs = {s['function']['name']: s for s in domain_tool_specs('retail')}
    specs['ask_customer'] = get_json_schema(Env.ask_customer)
    ours = ChatFormat(AutoTokenizer.from_pretrained(MODEL)).prompt_ids(prompt, [specs[m.__name__] for m in methods])
    assert trl_ids == ours
    # without our tool texts TRL renders the tools from the methods' signatures: text the tiny policy never saw
    plain = tok.apply_chat_template(prompt, tools=methods, add_generation_prompt=True, return_dict=False)
    assert len(plain) > 4 * len(ours)


# ---------------------------------------------------------------- a plain GRPOTrainer step on the tiny policy


@pytest.fixture(scope='module')
def trainer(tmp_path_factory):
    """A plain TRL GRPOTrainer on two retail tasks; the judge's endpoint is down, so episodes of the task with a rubric
    are void (a system error at grading), those of the other are graded by state."""
    server = StandInServer(fail_first=10**9).__enter__()
    grader = Grader(judge=OpenAIJudge(model='judge', base_url=server.base_url, max_retries=0))
    env = trl_environment([QUESTION, CANCEL], grader=grader)
    tok = trl_tokenizer(AutoTokenizer.from_pretrained(MODEL))
    args = GRPOConfig(
        output_dir=str(tmp_path_factory.mktemp('grpo')),
        per_device_train_batch_size=4,
        num_generations=2,
        max_completion_length=384,
        max_tool_calling_iterations=3,
        max_steps=1,
        learning_rate=1e-3,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to='none',
        save_strategy='no',
        disable_tqdm=True,
        seed=0,
        shuffle_dataset=False,
        logging_steps=1,
        chat_template_kwargs=env.chat_template_kwargs,
    )
    t = GRPOTrainer(
        AutoModelForCausalLM.from_pretrained(MODEL),
        reward_funcs=env.reward_funcs,
        args=args,
        train_dataset=env.train_dataset,
        environment_factory=env.environment_factory,
        processing_class=tok,
    )
    t.remove_callback(PrinterCallback)
    yield t
    server.__exit__()


def test_plain_grpo_trainer_trains_a_step(trainer):
    trainer.train()
    assert trainer.state.global_step == 1
    logged = trainer.state.log_history[0]
    assert 'rewards/verdict_reward/mean' in logged and logged['tools/call_frequency'] > 0, logged
    envs = trainer.environments
    assert sorted(e.task.uid for e in envs) == sorted([QUESTION.uid, CANCEL.uid] * 2)
    assert any(e._ts.calls for e in envs if e._ts)  # the policy's calls reached the episodes' MCP sessions
    tools = {n for n, _ in inspect.getmembers(type(envs[0]), inspect.isfunction) if not n.startswith('_')}
    assert {'reset', 'ask_customer', 'cancel_order', 'get_order'} <= tools


def test_void_episodes_get_no_advantage_in_trls_step(trainer):
    "Rollouts whose grading failed (reward None) are left out of the group baseline and get advantage 0."
    import torch

    rows = [dict(r) for r in trainer.train_dataset for _ in range(2)]
    trainer.model.train()
    out = trainer._generate_and_score_completions(rows)
    void = [e.system_error is not None for e in trainer.environments]
    assert void == [r['task_uid'] == QUESTION.uid for r in rows]
    assert all('grading failed' in e.system_error for e, v in zip(trainer.environments, void) if v)
    assert torch.all(out['advantages'][torch.tensor(void)] == 0)


class Agrees:
    "A judge for tests of the state check: yes to every rubric item (their test function decides here)."

    name = 'agrees'

    async def ask(self, item, final_message, transcript=None):
        return JudgeAnswer(yes=True, explanation='test stub')


def test_a_thinkingbox_development_task_runs_as_a_trl_environment():
    "ThinkingBox's email server (their development tasks) behind the same environment: their test function decides."
    if not os.environ.get('THINKINGBOX_DATA'):
        pytest.skip('THINKINGBOX_DATA is not set: point it at a thinkingbox-data checkout')
    from thinkingbox_training.thinkingbox import load_thinkingbox

    task = next(t for t in load_thinkingbox('email_system_org.py') if t.uid.endswith(':test_email_manager_of_manager'))
    with pytest.raises(ValueError, match='rule judge cannot read'):  # its judge questions: the rule judge reads none
        trl_environment([task])
    Env = trl_environment([task], grader=Grader(judge=Agrees())).environment_factory

    def reward(to):
        e = Env()
        e.reset(task_uid=task.uid)

        async def go():
            await e.get_user_profile()
            await e.get_contact(contact_id='contact-001')
            await e.send_email(
                to=to, cc='', subject='Project A', body='Are you free for a meeting regarding Project A on Thursday?'
            )
            return await verdict_reward([[{'role': 'assistant', 'content': 'Sent.'}]], environments=[e])

        return run(go())

    assert reward('carol@company.com') == [1.0]  # the manager's manager
    assert reward('bob@company.com') == [0.0]
