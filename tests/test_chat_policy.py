"`chat:` policies: the requests a hosted chat model is sent are valid for OpenAI's chat API, whatever the model wrote."

import json
import pytest
from thinkingbox_training.episode import EpisodeRunner
from thinkingbox_training.policies import ChatEndpointPolicy, chat_messages, chat_request_problems
from thinkingbox_training.tasks import Task, ToolCallSpec
from thinkingbox_training.users import StandInServer

TASK = Task(
    uid='demo/pay/chat',
    domain='demo',
    family='pay',
    split='bench',
    query='Please pay 30.00 from AC-1.',
    golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': 3000})],
    reply='Paid.',
)


def call(name, arguments, i):
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {'id': f'model-{i}', 'type': 'function', 'function': {'name': name, 'arguments': text}}


# what the model answers, turn by turn: its message (content, tool calls, reasoning apart from the content)
TURNS = [
    {
        'content': None,
        'reasoning_content': 'Look the account up first.',
        'tool_calls': [
            call('get_account', {'account_id': 'AC-1'}, 0),
            call('pay', {'account_id': 'AC-1', 'amount_cents': 'thirty'}, 1),  # a bad argument
            call('refund', {'payment_id': 'PY-1'}, 2),
        ],
    },  # an unknown tool
    {'content': 'Paying now.', 'tool_calls': [call('pay', '{"account_id": "AC-1", "amount_cents": 30', 3)]},  # not JSON
    {
        'content': None,
        'tool_calls': [
            call('pay', {'account_id': 'AC-1', 'amount_cents': 3000}, 4),
            call('get_account', {'account_id': 'AC-1'}, 5),
        ],
    },
    {'content': 'Done: 30.00 was paid from AC-1.', 'reasoning_content': 'The payment went through.'},
]


def scripted_model(messages):
    turn = sum(m['role'] == 'assistant' for m in messages)
    msg = {'role': 'assistant', **TURNS[min(turn, len(TURNS) - 1)]}
    choice = {'index': 0, 'finish_reason': 'tool_calls' if msg.get('tool_calls') else 'stop', 'message': msg}
    return {
        'id': 'c',
        'object': 'chat.completion',
        'created': 0,
        'model': 'm',
        'choices': [choice],
        'usage': {'prompt_tokens': 1, 'completion_tokens': 1, 'total_tokens': 2},
    }


@pytest.fixture(scope='module')
def episode():
    with StandInServer(chat=scripted_model) as srv:
        [e] = EpisodeRunner(ChatEndpointPolicy('m', base_url=srv.base_url)).run_sync([(TASK, 0)])
        return e, [body for path, body in srv.requests if path.endswith('/chat/completions')]


def test_every_request_is_valid_for_the_chat_api(episode):
    e, bodies = episode
    assert e.trajectory.status == 'ok' and e.reward == 1 and len(bodies) == 4
    for body in bodies:
        assert chat_request_problems(body) == []


def test_failed_calls_are_tool_calls_answered_by_their_error(episode):
    _, bodies = episode
    msgs = bodies[1]['messages']
    a = msgs[2]
    assert a['role'] == 'assistant' and [c['function']['name'] for c in a['tool_calls']] == [
        'get_account',
        'pay',
        'refund',
    ]
    answers = {m['tool_call_id']: m['content'] for m in msgs[3:6]}
    ids = [c['id'] for c in a['tool_calls']]
    assert [m['role'] for m in msgs[3:6]] == ['tool'] * 3 and set(answers) == set(ids)
    assert '"AC-1"' in answers[ids[0]]  # the lookup's result
    assert answers[ids[1]].startswith('Error:') and 'amount_cents' in answers[ids[1]]  # the bad argument
    assert answers[ids[2]].startswith('Error:') and "unknown tool 'refund'" in answers[ids[2]]
    last = bodies[3]['messages']
    bad = next(m for m in last if m['role'] == 'assistant' and m['content'] == 'Paying now.')
    assert bad['tool_calls'][0]['function']['arguments'] == '{"account_id": "AC-1", "amount_cents": 30'
    ids = [c['id'] for m in last if m['role'] == 'assistant' for c in m.get('tool_calls') or []]
    assert len(ids) == 6 == len(set(ids))  # unique per call, the same tool called three times included


def test_the_models_reasoning_is_kept(episode):
    e, bodies = episode
    said = [m for m in e.trajectory.messages if m['role'] == 'assistant']
    assert said[0]['reasoning_content'] == 'Look the account up first.'
    assert said[-1]['reasoning_content'] == 'The payment went through.'
    assert said[-1]['content'] == 'Done: 30.00 was paid from AC-1.'
    assert all('reasoning_content' not in m for b in bodies for m in b['messages'])  # not a field of OpenAI's API
    back = chat_messages(e.trajectory.messages, e.trajectory.tools, reasoning=True)
    assert [m.get('reasoning_content') for m in back if m['role'] == 'assistant'][0] == 'Look the account up first.'


def test_the_validator_refuses_what_the_chat_api_refuses():
    tools = [{'type': 'function', 'function': {'name': 'pay', 'parameters': {'type': 'object', 'properties': {}}}}]
    user = {'role': 'user', 'content': 'Pay.'}
    pay = {'id': 'pay', 'type': 'function', 'function': {'name': 'pay', 'arguments': '{}'}}
    cases = {
        'a tool message after a plain assistant message': [
            user,
            {'role': 'assistant', 'content': 'x'},
            {'role': 'tool', 'tool_call_id': 'pay', 'content': 'e'},
        ],
        'a tool message naming its tool': [
            user,
            {'role': 'assistant', 'content': None, 'tool_calls': [pay]},
            {'role': 'tool', 'tool_call_id': 'pay', 'name': 'pay', 'content': 'ok'},
        ],
        'one id for two calls': [
            user,
            {'role': 'assistant', 'content': None, 'tool_calls': [pay]},
            {'role': 'tool', 'tool_call_id': 'pay', 'content': 'ok'},
            {'role': 'assistant', 'content': None, 'tool_calls': [pay]},
            {'role': 'tool', 'tool_call_id': 'pay', 'content': 'ok'},
        ],
        'a call left unanswered': [user, {'role': 'assistant', 'content': None, 'tool_calls': [pay]}, user],
        'arguments that are not text': [
            user,
            {
                'role': 'assistant',
                'content': None,
                'tool_calls': [{**pay, 'function': {'name': 'pay', 'arguments': {}}}],
            },
            {'role': 'tool', 'tool_call_id': 'pay', 'content': 'ok'},
        ],
    }
    for why, msgs in cases.items():
        assert chat_request_problems({'messages': msgs, 'tools': tools}), why
    assert chat_request_problems({'messages': cases['one id for two calls'][:3], 'tools': tools}) == []
