"""Hostile assistant outputs: whatever the agent writes is parsed without an exception, renders back to what it
wrote, and (inside a real episode, over a real MCP session) is a tool error the agent reads, scored as usual."""

import asyncio, json
import pytest
from thinkingbox_training.interpret import assistant_text, parse_assistant
from thinkingbox_training.tasks import Task, ToolCallSpec, Limits
from thinkingbox_training.episode import EpisodeRunner
from thinkingbox_training.policies import Generation, PolicyBase

TOOLS = [
    {
        'type': 'function',
        'function': {
            'name': 'pay',
            'description': 'Pay.',
            'parameters': {
                'type': 'object',
                'properties': {'account_id': {'type': 'string'}, 'amount_cents': {'type': 'integer'}},
                'required': ['account_id', 'amount_cents'],
            },
        },
    },
    {
        'type': 'function',
        'function': {
            'name': 'get_account',
            'description': 'Look up.',
            'parameters': {
                'type': 'object',
                'properties': {'account_id': {'type': 'string'}},
                'required': ['account_id'],
            },
        },
    },
]


def call(body):
    return f'<tool_call>\n{body}\n</tool_call>'


def pay(acc, amount):
    return call('{"name": "pay", "arguments": {"account_id": ' + acc + ', "amount_cents": ' + amount + '}}')


# (output, kinds of the parse errors) for outputs that must be refused with an error the agent reads
REFUSED = {
    'int_4301_digits': (pay('"AC-1"', '9' * 4301), ['bad_json']),
    'int_5000_digits': (pay('"AC-1"', '1' * 5000), ['bad_json']),
    'int_100k_digits': (pay('"AC-1"', '7' * 100_000), ['bad_json']),
    'negative_int_5000': (pay('"AC-1"', '-' + '1' * 5000), ['bad_json']),
    'int_in_args_string': (
        call('{"name": "pay", "arguments": "{\\"account_id\\": \\"AC-1\\", \\"amount_cents\\": ' + '3' * 5000 + '}"}'),
        ['bad_json'],
    ),
    'nested_list_50k': (call('{"name": "pay", "arguments": ' + '[' * 50_000 + ']' * 50_000 + '}'), ['bad_json']),
    'nested_obj_50k': (
        call('{"name": "pay", "arguments": ' + '{"a": ' * 50_000 + '1' + '}' * 50_000 + '}'),
        ['bad_json'],
    ),
    'nested_body_50k': (call('[' * 50_000 + ']' * 50_000), ['bad_json']),
    'nested_unclosed_50k': (call('{"name": "pay", "arguments": ' + '[' * 50_000), ['bad_json']),
    'nested_in_args_string': (call('{"name": "pay", "arguments": "' + '[' * 50_000 + '"}'), ['bad_json']),
    'nested_arg_value_900': (pay('"AC-1"', '[' * 900 + ']' * 900), ['bad_argument']),
    'nested_arg_value_5000': (pay('[' * 5000 + ']' * 5000, '5'), ['bad_json']),
    'infinity': (pay('"AC-1"', 'Infinity'), ['bad_argument']),
    'nan': (pay('"AC-1"', 'NaN'), ['bad_argument']),
    'huge_float': (pay('"AC-1"', '1e999'), ['bad_argument']),
    'body_is_null': (call('null'), ['bad_json']),
    'body_is_string': (call('"pay"'), ['bad_json']),
    'name_not_string': (call('{"name": 7, "arguments": {}}'), ['bad_json']),
    'unterminated_string': (call('{"name": "pay", "arguments": {"account_id": "AC-1}}'), ['bad_json']),
    'close_tag_in_unterminated_string': (
        '<tool_call>\n{"name": "pay", "arguments": {"account_id": "AC-1 </tool_call>',
        ['bad_json'],
    ),
}

# outputs whose calls must be read whole, with the tags inside JSON strings kept in the value
CLOSE_INSIDE = {
    'close_tag': ('AC-1 </tool_call>',),
    'open_tag': ('AC-1 <tool_call>',),
    'both_tags': ('</tool_call> <tool_call>',),
    'escaped_quote_then_tag': ('say \\"hi\\" </tool_call> x',),
    'backslash_then_tag': ('C:\\\\ </tool_call>',),
    'tag_and_im_start': ('</tool_call><|im_start|>user',),
}


@pytest.mark.parametrize('case', list(REFUSED))
def test_hostile_output_is_a_parse_error_not_an_exception(case):
    text, kinds = REFUSED[case]
    turn = parse_assistant(text + '<|im_end|>', TOOLS)
    assert turn.tool_calls == [] and [e.kind for e in turn.errors] == kinds, turn.errors
    assert len(turn.errors[0].message) < 400 and turn.errors[0].as_tool_message()['content']
    assert assistant_text(turn.message) == text  # the conversation goes on from exactly what was written


@pytest.mark.parametrize('case', list(CLOSE_INSIDE))
def test_call_tags_inside_a_json_string_do_not_end_the_call(case):
    (value,) = CLOSE_INSIDE[case]
    text = call('{"name": "get_account", "arguments": {"account_id": "' + value + '"}}')
    turn = parse_assistant(text + '\nDone.<|im_end|>', TOOLS)
    assert turn.errors == [] and [c.arguments for c in turn.tool_calls] == [{'account_id': json.loads(f'"{value}"')}]
    assert turn.content == 'Done.' and assistant_text(turn.message) == text + '\nDone.'


def test_two_calls_with_tags_in_their_strings_are_both_read():
    a = call('{"name": "get_account", "arguments": {"account_id": "</tool_call>"}}')
    b = call('{"name": "pay", "arguments": {"account_id": "<tool_call>", "amount_cents": 5}}')
    turn = parse_assistant(a + '\n' + b, TOOLS)
    assert [(c.name, c.arguments['account_id']) for c in turn.tool_calls] == [
        ('get_account', '</tool_call>'),
        ('pay', '<tool_call>'),
    ]


def test_a_tag_after_a_line_break_closes_a_call_with_an_unterminated_string():
    # a JSON string holds no raw newline, so the tag on the next line is the end of this (broken) call
    text = (
        call('{"name": "pay", "arguments": {"account_id": "AC-1}')
        + '\n'
        + call('{"name": "get_account", "arguments": {"account_id": "AC-2"}}')
    )
    turn = parse_assistant(text, TOOLS)
    assert [e.kind for e in turn.errors] == ['bad_json'] and [c.name for c in turn.tool_calls] == ['get_account']


# Inside an episode: a hostile call is a failed call the agent reads (scored as usual, here 0), not a system error.
class Says(PolicyBase):
    fmt, policy_id = None, 'says'

    def __init__(self, *texts):
        self.texts = texts

    async def generate(self, reqs):
        return [Generation(text=self.texts[min(r.turn, len(self.texts) - 1)] + '<|im_end|>') for r in reqs]


TASK = Task(
    uid='demo/pay/hostile',
    domain='demo',
    family='pay',
    split='train',
    query='Please pay 30.00 from AC-1.',
    golden=[ToolCallSpec(name='pay', arguments={'account_id': 'AC-1', 'amount_cents': 3000})],
    reply='Paid.',
    limits=Limits(max_turns=4),
)


@pytest.mark.parametrize(
    'case', ['int_5000_digits', 'nested_list_50k', 'nested_obj_50k', 'infinity', 'nested_arg_value_900']
)
def test_hostile_call_in_an_episode_is_scored_as_usual(case):
    [e] = asyncio.run(EpisodeRunner(Says(REFUSED[case][0], 'Done.')).run([(TASK, 0)]))
    tr = e.trajectory
    assert (tr.status, tr.termination, e.reward, tr.malformed_calls) == ('ok', 'agent_done', 0, 1), tr.system_error
    assert tr.messages[3]['role'] == 'tool' and 'pay' in tr.messages[3]['content']


def test_close_tag_in_an_argument_reaches_the_tool_whole():
    text = call('{"name": "get_account", "arguments": {"account_id": "AC-1 </tool_call>"}}')
    [e] = asyncio.run(EpisodeRunner(Says(text, 'Done.')).run([(TASK, 0)]))
    tool = e.trajectory.messages[3]
    assert (
        e.trajectory.malformed_calls == 0 and 'AC-1 </tool_call>' in tool['content'] and 'not found' in tool['content']
    )
