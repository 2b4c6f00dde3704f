"""The episode protocol is a property of the task format: ThinkingBox-format tasks run under ThinkingBox's own
agent-user protocol (their agent instructions and tools, their simulated user, their end rules, their judge request,
their sampling parameters), read from their checkouts at run time; our own domains keep ours.

Real episodes: a development task of their data (`banking.py`, graded by its own asserts), our engine, their server
in process, and one stand-in OpenAI-compatible HTTP server that plays agent, user and judge and keeps every request."""

import json, os
import pytest
from thinkingbox_training.episode import OURS, EpisodeRunner, protocol_for
from thinkingbox_training.grader import Grader, OpenAIJudge
from thinkingbox_training.policies import ChatEndpointPolicy, SamplingConfig, chat_request_problems
from thinkingbox_training.tasks import UserSpec
from thinkingbox_training.users import StandInServer

END_TURN_TOOL = 'InjectionAttackInToolResponse'


@pytest.fixture(scope='module')
def tb():
    "Their protocol files and one banking task (with a user context and one judge question)."
    if not os.environ.get('THINKINGBOX_DATA'):
        pytest.skip('THINKINGBOX_DATA is not set (the thinkingbox-data checkout)')
    from thinkingbox_training.thinkingbox import load_thinkingbox, their_protocol_files

    tasks = {t.uid.split(':')[1]: t for t in load_thinkingbox('banking.py')}
    return their_protocol_files(), tasks['test_pay_mortgage']


def _answer(message: dict) -> dict:
    return {
        'id': 'c',
        'object': 'chat.completion',
        'created': 0,
        'model': 'agent',
        'choices': [{'index': 0, 'finish_reason': 'stop', 'message': message}],
        'usage': {'prompt_tokens': 1, 'completion_tokens': 1, 'total_tokens': 2},
    }


def run(theirs, task, script: list, user_reply: str = 'Yes, please go ahead.'):
    """One episode of `task` with a `chat:` agent that answers by `script` (a text, or a whole message, per agent
    turn; the last one repeats), their user and their judge, all on one stand-in server: (episode, requests)."""

    def chat(messages):
        first = messages[0]['content'] if messages and messages[0]['role'] == 'system' else ''
        if first == theirs['SYSTEM_PROMPT']:
            return user_reply
        if first == theirs['SYSTEM_TEXT_YESNO']:
            return 'Yes'
        turn = sum(m['role'] == 'assistant' for m in messages)
        step = script[min(turn, len(script) - 1)]
        return _answer({'role': 'assistant', 'content': step} if isinstance(step, str) else step)

    with StandInServer(chat=chat) as srv:
        pol = ChatEndpointPolicy('agent', base_url=srv.base_url, sampling=SamplingConfig(max_tokens=4096))
        runner = EpisodeRunner(
            pol,
            grader=Grader(judge=OpenAIJudge('judge', base_url=srv.base_url)),
            user='openai:user',
            user_kw={'base_url': srv.base_url},
        )
        [ep] = runner.run_sync([(task, 0)])
    roles = {'agent': [], 'user': [], 'judge': []}
    for _, body in srv.requests:
        first = body['messages'][0]['content']
        role = (
            'user' if first == theirs['SYSTEM_PROMPT'] else 'judge' if first == theirs['SYSTEM_TEXT_YESNO'] else 'agent'
        )
        roles[role].append(body)
    return ep, roles


def test_a_thinkingbox_task_opens_asks_and_is_judged_as_their_harness_does(tb):
    theirs, task = tb
    ep, q = run(theirs, task, ['Which account should I pay it from?', 'Paid $200 to MortgageLender. <DONE>'])
    assert ep.trajectory.status == 'ok' and ep.trajectory.termination == 'agent_done'
    # the agent: their instructions, then the scenario's; the query as written; their tool first, all schemas closed
    a = q['agent'][0]
    system = [m['content'] for m in a['messages'] if m['role'] == 'system']
    assert system[0] == theirs['agent']['system_instructions'] and len(system) == 2
    assert a['messages'][len(system)] == {'role': 'user', 'content': 'Can you pay my Mortgage ?\n'}
    assert a['tools'][0]['function']['name'] == END_TURN_TOOL
    assert all(t['function']['parameters']['additionalProperties'] is False for t in a['tools'])
    # their sampling parameters: no seed, no max_tokens
    assert {k: v for k, v in a.items() if k not in ('messages', 'tools', 'model')} == {
        'temperature': 1.0,
        'max_completion_tokens': 4096,
        'parallel_tool_calls': False,
    }
    # the user: their prompt, one message holding the transcript, the user context and the last agent message
    [u] = q['user']
    assert [m['role'] for m in u['messages']] == ['system', 'user']
    body = u['messages'][1]['content']
    assert 'User: Can you pay my Mortgage ?' in body
    assert 'Assistant: Which account should I pay it from?' in body and task.user.context.strip() in body
    assert body.index('Which account should I pay it from?', body.index(task.user.context.strip())) > 0
    assert u['temperature'] == theirs['sampling']['user']['temperature'] and u['max_completion_tokens'] == 4096
    # the agent's `<DONE>` ended it: the user was asked once, never after it
    assert ep.trajectory.usage['user'].calls == 1 and len(q['agent']) == 2
    # the judge: their prompt, the final reply only and HTML-escaped, temperature 0, seed 42, 128 tokens
    [j] = q['judge']
    assert j['messages'][0]['content'] == theirs['SYSTEM_TEXT_YESNO']
    assert 'Paid $200 to MortgageLender. &lt;DONE&gt;' in j['messages'][1]['content']
    assert 'Which account' not in j['messages'][1]['content']
    assert (j['temperature'], j['seed'], j['max_completion_tokens']) == (0.0, 42, 128)


def test_a_failed_call_stays_with_the_agent_and_its_requests_are_valid(tb):
    theirs, task = tb
    broken = {
        'role': 'assistant',
        'content': None,
        'tool_calls': [
            {'id': 'x', 'type': 'function', 'function': {'name': 'get_balance', 'arguments': '{"account": '}}
        ],
        'reasoning_content': 'I should look the balance up first.',
    }
    ep, q = run(theirs, task, [broken, 'Which account should I pay it from?', 'Done. <DONE>'])
    assert ep.trajectory.malformed_calls == 1 and ep.trajectory.termination == 'agent_done'
    # each call is answered by a tool message; `reasoning_content`, which their harness sends back (vLLM reads it),
    # is the one field OpenAI's types do not name
    problems = [p for b in q['agent'] for p in chat_request_problems(b)]
    assert len(q['agent']) == 3 and problems == ['messages[3]: reasoning_content: Extra inputs are not permitted'] * 2
    # their agent sends the model's reasoning back on later turns
    later = [m for m in q['agent'][1]['messages'] if m['role'] == 'assistant']
    assert later[0].get('reasoning_content') == 'I should look the balance up first.'
    [u] = q['user']
    assert '<tool_call>' not in json.dumps(u['messages']) and 'get_balance' not in u['messages'][1]['content']


def test_their_end_rules_end_turn_tool_ten_user_turns_and_no_user_context(tb):
    theirs, task = tb
    call = {'id': 'i', 'type': 'function', 'function': {'name': END_TURN_TOOL, 'arguments': '{"reason": "x"}'}}
    ep, q = run(theirs, task, [{'role': 'assistant', 'content': None, 'tool_calls': [call]}])
    assert ep.trajectory.termination == 'end_turn_tool' and ep.trajectory.tool_calls == 0 and not q['user']
    ep, q = run(theirs, task, ['Which account should I pay it from?'])  # never done: their ten user turns end it
    assert ep.trajectory.termination == 'max_user_turns' and len(q['user']) == 10 and len(q['agent']) == 11
    alone = task.model_copy(update={'user': UserSpec()})  # no user context: their loop asks no user
    ep, q = run(theirs, alone, ['Which account should I pay it from?'])
    assert ep.trajectory.termination == 'no_user' and not q['user'] and len(q['agent']) == 1


def test_our_domains_keep_our_protocol():
    from thinkingbox_training.tasks import Task, ToolCallSpec
    from thinkingbox_training.users import scripted_chat

    task = Task(
        uid='demo/pay/p',
        domain='demo',
        family='pay',
        split='train',
        query='Pay 30.00 from AC-1.',
        golden=[ToolCallSpec(name='get_account', arguments={'account_id': 'AC-1'})],
    )
    assert protocol_for(task) is OURS

    def chat(messages):
        return scripted_chat(messages) if 'customer talking' in messages[0]['content'] else 'Done, paid.'

    with StandInServer(chat=chat) as srv:
        pol = ChatEndpointPolicy('agent', base_url=srv.base_url, sampling=SamplingConfig(max_tokens=64))
        [ep] = EpisodeRunner(pol, user='openai:user', user_kw={'base_url': srv.base_url}).run_sync([(task, 0)])
    a = srv.requests[0][1]
    assert [m['role'] for m in a['messages']] == ['system', 'user'] and a['max_tokens'] == 64 and 'seed' in a
    assert 'max_completion_tokens' not in a and 'parallel_tool_calls' not in a
    assert ep.trajectory.termination in ('user_stop', 'agent_done')


def test_a_missing_harness_checkout_is_one_line_naming_the_variable(tb, tmp_path, monkeypatch):
    from thinkingbox_training.thinkingbox import ThinkingBoxDataError, their_protocol_files

    monkeypatch.setenv('THINKINGBOX_HARNESS', str(tmp_path / 'nowhere'))
    their_protocol_files.cache_clear()
    try:
        with pytest.raises(ThinkingBoxDataError) as e:
            their_protocol_files()
    finally:
        monkeypatch.delenv('THINKINGBOX_HARNESS')
        their_protocol_files.cache_clear()
    msg = str(e.value)
    assert 'THINKINGBOX_HARNESS' in msg and str(tmp_path / 'nowhere') in msg and '\n' not in msg


def test_the_bench_command_refuses_a_missing_harness_checkout_before_anything_runs(tb, tmp_path, monkeypatch, capsys):
    from thinkingbox_training.thinkingbox import their_protocol_files, thinkingbox_bench

    monkeypatch.setenv('THINKINGBOX_HARNESS', str(tmp_path / 'nowhere'))
    their_protocol_files.cache_clear()
    try:
        rc = thinkingbox_bench(release='banking.py', policy='scripted', k=1, out=str(tmp_path / 'c'), quiet=True)
    finally:
        monkeypatch.delenv('THINKINGBOX_HARNESS')
        their_protocol_files.cache_clear()
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1 and 'THINKINGBOX_HARNESS' in err, err
    assert not (tmp_path / 'c').exists()


class HashJudge:
    "A stand-in judge that passes about half of all replies, by a hash of the text: groups of sampled replies differ."

    name = 'hash'

    async def ask(self, item, final_message, transcript=None):
        import hashlib
        from thinkingbox_training.grader import JudgeAnswer

        return JudgeAnswer(yes=hashlib.sha256((final_message or '').encode()).digest()[0] % 2 == 0)


def test_a_grpo_step_on_a_thinkingbox_development_task_runs_their_protocol_token_exact(tb, tmp_path):
    "The tiny model samples its own episodes of a banking task under their protocol; TRL trains on them token-exact."
    import torch
    from transformers import PrinterCallback
    from grpo_fixtures import cpu_config, sampled_logprobs
    from thinkingbox_training.grpo import TBTTrainer, task_prompt
    from thinkingbox_training.interpret import make_tokenizer
    from thinkingbox_training.policies import tiny_qwen3
    from thinkingbox_training.tasks import get_domain
    from thinkingbox_training.thinkingbox import load_thinkingbox

    theirs, _ = tb
    task = next(t for t in load_thinkingbox('banking.py') if t.uid.endswith(':test_check_balance_1'))
    messages, tools = protocol_for(task).opening(task, get_domain(task.domain), [])
    tok = make_tokenizer([m['content'] for m in messages] + [json.dumps(t) for t in tools], vocab_size=1500)
    kw = dict(groups_per_step=1, max_tokens_per_turn=8, max_turns=2)
    t = TBTTrainer(
        tiny_qwen3(tok),
        cpu_config(tmp_path / 'out', **kw),
        [task],
        processing_class=tok,
        grader=Grader(judge=HashJudge()),
    )
    t.remove_callback(PrinterCallback)
    torch.manual_seed(0)
    t.model.eval()
    out = t._generate_and_score_completions([{'prompt': task_prompt(task.uid)}] * 4)
    prompt = tok.decode(out['prompt_ids'][0][out['prompt_mask'][0].bool()])
    assert prompt.index(theirs['agent']['system_instructions'].strip()) < prompt.index('InjectionAttackInToolResponse')
    rec, trl_lp, mask = sampled_logprobs(t, out)
    assert mask.sum() > 8 and torch.allclose(rec[mask], trl_lp[mask], atol=1e-4), (rec[mask] - trl_lp[mask]).abs().max()
    before = sum(float(p.detach().double().sum()) for p in t.model.parameters())
    t.model.train()
    t.train()
    [step] = t.step_log
    assert not step['skipped'] and step['selected'], step
    assert sum(float(p.detach().double().sum()) for p in t.model.parameters()) != before
