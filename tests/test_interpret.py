"Dense tests of interpret: template parity, parse round trips and fuzzing, argument typing, token trajectories, faults."

import json, random, string, time
from dataclasses import replace
from pathlib import Path

import pytest
from transformers import AutoTokenizer
from transformers.utils.chat_template_utils import _compile_jinja_template

from thinkingbox_training.interpret import (
    QWEN3_CHAT_TEMPLATE,
    ADDED_TOKENS,
    SPECIAL_TOKENS,
    PARSE_ERROR_KINDS,
    ChatFormat,
    TokenTrajectory,
    AssistantTurn,
    ParseError,
    ToolCall,
    assistant_text,
    make_tokenizer,
    parse_assistant,
    type_arguments,
)

SHIPPED_QWEN3 = (Path(__import__('trl').__file__).parent / 'chat_templates' / 'qwen3.jinja').read_text()

TOOLS = [
    {
        'type': 'function',
        'function': {
            'name': 'get_order',
            'description': 'Look up an order.',
            'parameters': {'type': 'object', 'properties': {'order_id': {'type': 'string'}}, 'required': ['order_id']},
        },
    },
    {
        'type': 'function',
        'function': {
            'name': 'update',
            'description': 'Change an order.',
            'parameters': {
                'type': 'object',
                'properties': {
                    'order_id': {'type': 'string'},
                    'qty': {'type': 'integer'},
                    'price': {'type': 'number'},
                    'gift': {'type': 'boolean'},
                    'note': {'type': ['string', 'null']},
                    'tags': {'type': 'array', 'items': {'type': 'integer'}},
                    'address': {
                        'type': 'object',
                        'properties': {'zip': {'type': 'string'}, 'floor': {'type': 'integer'}},
                    },
                    'speed': {'type': 'string', 'enum': ['slow', 'fast']},
                },
                'required': ['order_id', 'qty'],
            },
        },
    },
    {
        'type': 'function',
        'function': {
            'name': 'ping',
            'description': 'No arguments.',
            'parameters': {'type': 'object', 'properties': {}},
        },
    },
]

WORDS = [
    'order',
    'ORD-',
    'BK-',
    'refund',
    'the',
    'café',
    '数据',
    '🙂',
    'ok',
    '"quoted"',
    "it's",
    '{',
    '}',
    '  ',
    '\t',
    'a\nb',
    '12345',
    '007',
]


def words(rng, n):
    return ' '.join(rng.choice(WORDS) for _ in range(n))


def random_args(rng, name):
    if name == 'get_order':
        return {'order_id': rng.choice([f'ORD-{rng.randint(0, 10**6)}', '007', 'true', 'null', '3.5', 'x y'])}
    if name == 'ping':
        return {}
    a = {'order_id': f'ORD-{rng.randint(0, 999)}', 'qty': rng.randint(-5, 10**9)}
    if rng.random() < 0.5:
        a['price'] = rng.choice([2.5, 0.125, 19.99, 7])
    if rng.random() < 0.5:
        a['gift'] = rng.random() < 0.5
    if rng.random() < 0.5:
        a['note'] = rng.choice([None, 'leave at door', '007', ''])
    if rng.random() < 0.5:
        a['tags'] = [rng.randint(0, 99) for _ in range(rng.randint(0, 3))]
    if rng.random() < 0.3:
        a['address'] = {'zip': '01234', 'floor': rng.randint(0, 9)}
    if rng.random() < 0.3:
        a['speed'] = rng.choice(['slow', 'fast'])
    return a


def random_assistant(rng, calls=None):
    m = {
        'role': 'assistant',
        'content': words(rng, rng.randint(0, 6)).strip(),
        'reasoning_content': rng.choice([None, '', words(rng, rng.randint(1, 12)).strip() or 'x']),
    }
    n = rng.randint(0, 3) if calls is None else calls
    if n:
        m['tool_calls'] = []
        for _ in range(n):
            name = rng.choice(['get_order', 'update', 'ping'])
            call = {'name': name, 'arguments': random_args(rng, name)}
            m['tool_calls'].append({'type': 'function', 'function': call})
    return m


def random_observation(rng):
    if rng.random() < 0.25:
        return [{'role': 'user', 'content': words(rng, rng.randint(1, 8))}]
    return [
        {
            'role': 'tool',
            'name': 'get_order',
            'content': json.dumps({'id': f'ORD-{rng.randint(0, 99999)}', 'n': rng.randint(0, 99)}),
        }
        for _ in range(rng.randint(1, 3))
    ]


def random_conversation(rng, turns):
    msgs = ([{'role': 'system', 'content': 'You are a shop assistant.'}] if rng.random() < 0.7 else []) + [
        {'role': 'user', 'content': words(rng, rng.randint(1, 8))}
    ]
    for t in range(turns):
        msgs.append(random_assistant(rng))
        if t < turns - 1:
            msgs += random_observation(rng)
    return msgs


@pytest.fixture(scope='module')
def tok():
    rng = random.Random(1)
    render = _compile_jinja_template(QWEN3_CHAT_TEMPLATE).render
    corpus = [render(messages=random_conversation(rng, 3), tools=TOOLS if i % 5 == 0 else None) for i in range(300)]
    return make_tokenizer(corpus)


@pytest.fixture(scope='module')
def fmt(tok):
    return ChatFormat(tok)


# ---------------------------------------------------------------- the template


def test_template_is_qwen3_format_where_qwen3_keeps_reasoning():
    "Where the shipped template keeps reasoning (after the last user turn), ours renders byte for byte the same."
    ours, shipped = _compile_jinja_template(QWEN3_CHAT_TEMPLATE).render, _compile_jinja_template(SHIPPED_QWEN3).render
    rng = random.Random(2)
    for _ in range(200):
        msgs = random_conversation(rng, rng.randint(1, 4))
        last_user = max(i for i, m in enumerate(msgs) if m['role'] == 'user')
        for i, m in enumerate(msgs):
            if m['role'] != 'assistant':
                continue
            if i < last_user:
                m['reasoning_content'] = None  # Qwen3 drops these blocks
            else:
                m['reasoning_content'] = m['reasoning_content'] or 'thinking'  # and keeps non-empty ones
        for tools in (None, TOOLS):
            for gen in (False, True):
                if gen and msgs[-1]['role'] == 'assistant':
                    continue
                kw = dict(messages=msgs, tools=tools, add_generation_prompt=gen)
                assert ours(**kw) == shipped(**kw)


def test_template_is_prefix_preserving():
    render = _compile_jinja_template(QWEN3_CHAT_TEMPLATE).render
    rng = random.Random(3)
    for _ in range(100):
        msgs = random_conversation(rng, rng.randint(2, 5))
        full = render(messages=msgs, tools=TOOLS)
        for n in range(1, len(msgs)):
            if msgs[n - 1]['role'] == msgs[n]['role'] == 'tool':
                continue  # consecutive results share one user turn
            assert full.startswith(render(messages=msgs[:n], tools=TOOLS))


def test_assistant_text_is_the_template_in_python():
    render = _compile_jinja_template(QWEN3_CHAT_TEMPLATE).render
    rng = random.Random(4)
    extra = [
        {'role': 'assistant', 'content': '\n\nlead', 'reasoning_content': '\n r \n'},
        {'role': 'assistant', 'content': None, 'tool_calls': [{'function': {'name': 'ping', 'arguments': '{}'}}]},
        {'role': 'assistant', 'content': ['a', 1]},
    ]
    for m in [random_assistant(rng) for _ in range(300)] + extra:
        assert render(messages=[m]) == '<|im_start|>assistant\n' + assistant_text(m) + '<|im_end|>\n'


def test_tool_results_group_into_one_user_turn_and_non_string_content_is_json():
    render = _compile_jinja_template(QWEN3_CHAT_TEMPLATE).render
    out = render(
        messages=[
            {'role': 'tool', 'name': 'a', 'content': '1'},
            {'role': 'tool', 'name': 'b', 'content': {'x': 1}},
            {'role': 'user', 'content': 'hi'},
            {'role': 'tool', 'name': 'c', 'content': None},
        ]
    )
    assert out == (
        '<|im_start|>user\n<tool_response>\n1\n</tool_response>\n'
        '<tool_response>\n{"x": 1}\n</tool_response><|im_end|>\n'
        '<|im_start|>user\nhi<|im_end|>\n<|im_start|>user\n<tool_response>\n\n</tool_response><|im_end|>\n'
    )


def test_assistant_masks_match_the_generated_parts(tok, fmt):
    rng = random.Random(5)
    for _ in range(30):
        msgs = random_conversation(rng, rng.randint(1, 4))
        out = tok.apply_chat_template(
            msgs, tools=TOOLS, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        gen = [i for i, m in zip(out['input_ids'], out['assistant_masks']) if m]
        assert fmt.decode(gen) == ''.join(assistant_text(m) + '<|im_end|>' for m in msgs if m['role'] == 'assistant')


# ---------------------------------------------------------------- the tokenizer


def test_tokenizer_markers_eos_pad_and_size(tok):
    assert len(tok) <= 2048
    for t in SPECIAL_TOKENS + ADDED_TOKENS:
        assert len(tok.encode(t)) == 1, t
    assert [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS] == [0, 1, 2]
    assert (tok.eos_token, tok.pad_token, tok.eos_token_id, tok.pad_token_id) == ('<|im_end|>', '<|endoftext|>', 2, 0)
    assert tok.chat_template == QWEN3_CHAT_TEMPLATE
    # added, not special
    assert tok.decode(tok.encode('<think>x</think>'), skip_special_tokens=True) == '<think>x</think>'
    assert tok.encode('ab') == tok.encode('ab', add_special_tokens=True)  # no BOS/EOS added


def test_tokenizer_pretokenizer_groups_digits_and_keeps_id_prefixes(tok):
    pieces = lambda s: [p for p, _ in tok.backend_tokenizer.pre_tokenizer.pre_tokenize_str(s)]
    assert pieces('1234567') == ['123', '456', '7']
    assert pieces('ORD-12 "BK-3" x BK-') == ['ORD-', '12', 'Ġ"', 'BK-', '3', '"', 'Ġx', 'Ġ', 'BK-']
    assert pieces('Hello World') == ['Hello', 'ĠWorld']
    assert 'ORD-' in tok.tokenize(' ORD-42')


def test_tokenizer_splits_identifier_digits_so_a_child_id_spells_its_parent():
    texts = ['order OR-75312 item OI-753122 total 1234567 BK-10042'] * 4
    pieces = lambda t, s: [p for p, _ in t.backend_tokenizer.pre_tokenizer.pre_tokenize_str(s)]
    split = make_tokenizer(texts, vocab_size=400)
    assert pieces(split, 'OR-75312') == ['OR-', '753', '12'] and pieces(split, 'OI-753122') == ['OI-', '753', '12', '2']
    # numbers that are not identifiers keep plain threes; a 5-digit id is 3, 2
    assert pieces(split, 'total 1234567')[-3:] == ['123', '456', '7']
    assert pieces(split, 'BK-10042') == ['BK-', '100', '42']
    assert split.decode(split.encode('"OI-753122"')) == '"OI-753122"'


def test_tokenizer_round_trips_any_text_and_saves(tok, tmp_path):
    rng = random.Random(6)
    alphabet = string.printable + 'éüß数据🙂\u200b\x00'
    texts = [''.join(rng.choice(alphabet) for _ in range(rng.randint(0, 80))) for _ in range(300)]
    texts += ['<|im_start|>user\nx<|im_end|>\n', '<tool_call>\n{"a": 1}\n</tool_call>', '   leading', 'trailing\n\n\n']
    tok.save_pretrained(tmp_path)
    tok2 = AutoTokenizer.from_pretrained(tmp_path)
    for t in texts:
        ids = tok.encode(t)
        assert tok.decode(ids) == t
        assert tok2.encode(t) == ids
    assert tok2.chat_template == QWEN3_CHAT_TEMPLATE
    assert (tok2.eos_token, tok2.pad_token) == ('<|im_end|>', '<|endoftext|>')
    msgs = random_conversation(rng, 3)
    assert ChatFormat(tok2).render(msgs, TOOLS) == ChatFormat(tok).render(msgs, TOOLS)


def test_tokenizer_is_fast_and_rejects_a_tiny_vocabulary():
    rng = random.Random(7)
    render = _compile_jinja_template(QWEN3_CHAT_TEMPLATE).render
    corpus = [render(messages=random_conversation(rng, 4), tools=TOOLS) for _ in range(120)]
    assert sum(map(len, corpus)) > 300_000
    t = time.perf_counter()
    make_tokenizer(corpus)
    assert time.perf_counter() - t < 10
    with pytest.raises(ValueError, match='vocab_size'):
        make_tokenizer(['abc'], vocab_size=200)


# ---------------------------------------------------------------- ChatFormat


def test_chatformat_agrees_with_apply_chat_template(tok, fmt):
    rng = random.Random(8)
    for _ in range(50):
        msgs = random_conversation(rng, rng.randint(1, 4))
        assert fmt.render(msgs, TOOLS) == tok.apply_chat_template(msgs, tools=TOOLS, tokenize=False)
        p = msgs[:2]
        assert fmt.prompt_ids(p, TOOLS) == tok.apply_chat_template(
            p, tools=TOOLS, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        text = fmt.render(msgs, TOOLS)
        assert fmt.encode(text) == tok.encode(text, add_special_tokens=False) and fmt.decode(fmt.encode(text)) == text


def test_chatformat_picks_its_template(tok):
    assert ChatFormat(tok).template == QWEN3_CHAT_TEMPLATE
    t2 = make_tokenizer(['hello world'] * 10, template=SHIPPED_QWEN3)
    assert ChatFormat(t2).template == QWEN3_CHAT_TEMPLATE  # a Qwen3-style template is replaced by ours
    other = (
        '{% for m in messages %}<|im_start|>{{ m.content }}<|im_end|>{% endfor %}'
        '{% if add_generation_prompt %}>{% endif %}'
    )
    assert ChatFormat(tok, template=other).template == other  # explicit wins
    t3 = make_tokenizer(['hello world'] * 10, template='{% for m in messages %}[{{ m.content }}]<|im_end|>{% endfor %}')
    assert ChatFormat(t3).template.startswith('{% for m in messages %}[')  # a foreign template is kept
    t4 = make_tokenizer(['hello world'] * 10)
    t4.chat_template = None
    assert ChatFormat(t4).template == QWEN3_CHAT_TEMPLATE


def test_chatformat_needs_an_end_of_turn_token():
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders
    from transformers import PreTrainedTokenizerFast

    bt = Tokenizer(models.BPE())
    bt.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bt.decoder = decoders.ByteLevel()
    bt.add_tokens(list(pre_tokenizers.ByteLevel.alphabet()))
    bare = PreTrainedTokenizerFast(tokenizer_object=bt)
    with pytest.raises(ValueError, match='end of a turn'):
        ChatFormat(bare)


def test_observation_ids_are_the_full_rendering_delta(fmt):
    rng = random.Random(9)
    for _ in range(100):
        msgs = random_conversation(rng, rng.randint(1, 3))
        obs = random_observation(rng)
        before, after = fmt.render(msgs, TOOLS), fmt.render(msgs + obs, TOOLS, add_generation_prompt=True)
        assert after.startswith(before)
        assert fmt.observation_text(obs) == after[len(before) - 1 :]  # from the "\n" after <|im_end|>
        assert fmt.observation_text(obs).endswith('<|im_end|>\n<|im_start|>assistant\n')


# ---------------------------------------------------------------- typing arguments

TABLE = [  # value, schema, expected (or 'ERR')
    ('+5', {'type': 'integer'}, 5),
    ('007', {'type': 'integer'}, 7),
    (' 1e2 ', {'type': 'integer'}, 100),
    ('0x10', {'type': 'integer'}, 'ERR'),
    ('1_000', {'type': 'integer'}, 'ERR'),
    ('inf', {'type': 'number'}, 'ERR'),
    (float('inf'), {'type': 'number'}, 'ERR'),
    (float('nan'), {'type': 'integer'}, 'ERR'),
    (10**30, {'type': 'integer'}, 10**30),
    ('.5', {'type': 'number'}, 0.5),
    (5, {'type': 'number'}, 5),
    ('', {'type': 'integer'}, 'ERR'),
    ('TRUE', {'type': 'boolean'}, True),
    (' false\n', {'type': 'boolean'}, False),
    (None, {'type': 'boolean'}, 'ERR'),
    ('None', {'type': 'null'}, None),
    ('nil', {'type': 'null'}, 'ERR'),
    ('null', {'type': 'string'}, 'null'),
    ('true', {'type': 'string'}, 'true'),
    (True, {'type': 'string'}, 'ERR'),
    (2.5, {'type': 'string'}, 'ERR'),
    (7, {'type': 'string'}, 'ERR'),
    ('7', {'type': 'string'}, '7'),  # a number the model wrote is not text
    ([1], {'type': 'string'}, 'ERR'),
    ('', {'type': 'string'}, ''),
    ('  x ', {'type': 'string'}, '  x '),
    ('["a"]', {'type': 'array', 'items': {'type': 'integer'}}, 'ERR'),
    (['1', 2], {'type': 'array', 'items': {'type': 'integer'}}, [1, 2]),
    (
        '{"zip": "1234", "floor": "3"}',
        {'type': 'object', 'properties': {'zip': {'type': 'string'}, 'floor': {'type': 'integer'}}},
        {'zip': '1234', 'floor': 3},
    ),
    (
        '{"zip": 1234, "floor": "3"}',
        {'type': 'object', 'properties': {'zip': {'type': 'string'}, 'floor': {'type': 'integer'}}},
        'ERR',
    ),
    ({'floor': 'x'}, {'type': 'object', 'properties': {'floor': {'type': 'integer'}}}, 'ERR'),
    ('3', {'type': ['null', 'string']}, '3'),
    ('null', {'type': ['null', 'string']}, 'null'),
    (None, {'type': ['null', 'string']}, None),
    ('3', {'anyOf': [{'type': 'integer'}, {'type': 'null'}]}, 3),
    ('3', {'oneOf': [{'type': 'boolean'}, {'$ref': '#/x'}]}, '3'),
    (1, {'enum': [True, False]}, 'ERR'),
    (True, {'type': 'boolean', 'enum': [True]}, True),
    ('fast', {'enum': ['slow']}, 'ERR'),
    (3, {'type': 'integer', 'enum': [3.0]}, 3),
    ('x', {'type': 'weird'}, 'x'),
    ({'any': 1}, {}, {'any': 1}),
]


@pytest.mark.parametrize('value,schema,want', TABLE)
def test_type_arguments_table(value, schema, want):
    typed, errs = type_arguments({'p': value}, {'type': 'object', 'properties': {'p': schema}}, tool='t')
    if want == 'ERR':
        assert [(e.kind, e.tool, e.argument) for e in errs] == [('bad_argument', 't', 'p')] and "'p'" in errs[0].message
        assert typed['p'] is value
    else:
        assert errs == [] and typed['p'] == want and type(typed['p']) is type(want)


def test_type_arguments_required_unknown_and_extra():
    schema = {'type': 'object', 'properties': {'a': {'type': 'integer'}}, 'required': ['a', 'b']}
    typed, errs = type_arguments({'c': '1'}, schema, tool='t')
    assert [(e.kind, e.argument) for e in errs] == [
        ('unknown_argument', 'c'),
        ('missing_argument', 'a'),
        ('missing_argument', 'b'),
    ]
    assert errs[1].message == "t: missing required argument 'a' (integer)"
    assert errs[2].message == "t: missing required argument 'b'"
    open_schema = {**schema, 'required': [], 'additionalProperties': {'type': 'integer'}}
    assert type_arguments({'c': '1'}, open_schema) == ({'c': 1}, [])
    assert type_arguments({'c': '1'}, {'type': 'object'}) == ({'c': '1'}, [])  # no properties declared: anything goes
    assert type_arguments({'a': '1'}, None) == ({'a': '1'}, [])
    typed, errs = type_arguments(['a'], schema, tool='t')
    assert typed == {} and errs[0].kind == 'bad_argument' and 'must be a JSON object' in errs[0].message


def test_type_arguments_is_idempotent_and_keeps_order():
    rng = random.Random(10)
    schema = TOOLS[1]['function']['parameters']
    for _ in range(200):
        args = random_args(rng, 'update')
        as_text = {k: v if isinstance(v, str) else json.dumps(v) for k, v in args.items()}  # the XML form: all strings
        typed, errs = type_arguments(as_text, schema)
        # a string-or-null keeps "null" as text
        want = {**args, **({'note': 'null'} if 'note' in args and args['note'] is None else {})}
        assert errs == [] and typed == want and list(typed) == list(args)
        assert type_arguments(typed, schema) == (typed, [])


# ---------------------------------------------------------------- parsing


def test_render_parse_round_trip(fmt):
    rng = random.Random(11)
    for _ in range(500):
        m = random_assistant(rng, calls=rng.randint(0, 4))
        text = fmt.render([m])[len('<|im_start|>assistant\n') :]
        for t in (text, text.rstrip('\n'), text[: -len('<|im_end|>\n')]):
            turn = fmt.parse(t, TOOLS)
            assert turn.errors == [] and turn.message == m, (t, turn)
            assert [c.as_dict() for c in turn.tool_calls] == m.get('tool_calls', [])


def test_parse_xml_form_types_arguments():
    text = (
        '<think>\nok\n</think>\n\nSure.\n<tool_call>\n<function=update>\n<parameter=order_id>\n007\n</parameter>\n'
        '<parameter=qty>\n3\n</parameter>\n<parameter=tags>\n[1, 2]\n</parameter>\n'
        '<parameter=note>\nline one\nline two\n</parameter>\n'
        '<parameter=address>\n{"zip": "01234", "floor": 2}\n</parameter>\n</function>\n</tool_call>\n'
        '<tool_call>\n<function=ping>\n</function>\n</tool_call><|im_end|>'
    )
    turn = parse_assistant(text, TOOLS)
    assert turn.errors == [] and turn.content == 'Sure.' and turn.reasoning == 'ok'
    assert [c.name for c in turn.tool_calls] == ['update', 'ping']
    assert turn.tool_calls[0].arguments == {
        'order_id': '007',
        'qty': 3,
        'tags': [1, 2],
        'note': 'line one\nline two',
        'address': {'zip': '01234', 'floor': 2},
    }
    raw = turn.tool_calls[0].raw
    assert raw.startswith('<tool_call>\n<function=update>') and raw.endswith('</tool_call>')
    assert assistant_text(turn.message) == text[: -len('<|im_end|>')]


def test_parse_reasoning_variants():
    cases = {
        'plain': (None, 'plain'),
        '<think>\nr\n</think>\n\nc': ('r', 'c'),
        '<think>r</think>c': ('r', 'c'),
        '<think>\n\n</think>\n\nc': ('', 'c'),
        'r\n</think>\n\nc<|im_end|>': ('r', 'c'),
        '<think>\ncut off mid': ('cut off mid', ''),
        '<think>\nr\n</think>\n\n<|im_end|>\ngarbage': ('r', ''),
    }
    for text, (reasoning, content) in cases.items():
        turn = parse_assistant(text, TOOLS)
        assert (turn.reasoning, turn.content, turn.errors, turn.raw) == (reasoning, content, [], text), text


MALFORMED = [  # text after the reasoning, expected kinds, a word the first message must contain
    ('<tool_call>\n{"name": "get_order", "arguments": {"order_id": "1"}\n</tool_call>', ['bad_json'], 'get_order'),
    ('<tool_call>\nget_order(order_id=1)\n</tool_call>', ['bad_json'], 'valid JSON'),
    ('<tool_call>\n["get_order"]\n</tool_call>', ['bad_json'], '"name"'),
    ('<tool_call>\n{"name": "get_order", "arguments": "{bad"}\n</tool_call>', ['bad_json'], 'get_order'),
    ('<tool_call>\n{"name": "get_order", "arguments": [1]}\n</tool_call>', ['bad_json'], 'get_order'),
    (
        '<tool_call>\n<function=get_order>\n<parameter=order_id>\n1\n</parameter>\n</tool_call>',
        ['bad_xml'],
        'get_order',
    ),
    (
        '<tool_call>\n<function=get_order>\n<parameter=order_id>1</parameter><parameter=order_id>2</parameter>'
        '</function>\n</tool_call>',
        ['bad_xml'],
        'twice',
    ),
    ('<tool_call>\n{"name": "get_order", "arguments": {"order_id": "1"}}', ['unterminated_call'], 'get_order'),
    ('<tool_call>\n<function=ping>\n</function>', ['unterminated_call'], 'ping'),
    (
        '<tool_call>\n{"name": "ping", "arguments": {}}\n<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>',
        ['unterminated_call'],
        'ping',
    ),
    ('<tool_call>\n{"name": "pong", "arguments": {}}\n</tool_call>', ['unknown_tool'], 'get_order, update, ping'),
    ('<tool_call>\n{"name": "update", "arguments": {"order_id": "1"}}\n</tool_call>', ['missing_argument'], 'qty'),
    (
        '<tool_call>\n{"name": "update", "arguments": {"order_id": "1", "qty": 2.5}}\n</tool_call>',
        ['bad_argument'],
        'qty',
    ),
    (
        '<tool_call>\n{"name": "update", "arguments": {"order_id": "1", "qty": 1, "speed": "warp"}}\n</tool_call>',
        ['bad_argument'],
        'speed',
    ),
    ('<tool_call>\n{"name": "ping", "arguments": {"x": 1}}\n</tool_call>', ['unknown_argument'], "'x'"),
    (
        '<tool_call>\n{"name": "update", "arguments": {"qty": "many", "zzz": 1}}\n</tool_call>',
        ['bad_argument', 'unknown_argument', 'missing_argument'],
        'update',
    ),
]


@pytest.mark.parametrize('body,kinds,word', MALFORMED)
def test_malformed_outputs(body, kinds, word):
    text = '<think>\nhmm\n</think>\n\n' + body + '<|im_end|>'
    turn = parse_assistant(text, TOOLS)
    assert sorted(e.kind for e in turn.errors) == sorted(kinds)
    assert all(e.kind in PARSE_ERROR_KINDS for e in turn.errors)
    assert word in turn.errors[0].message, turn.errors[0].message
    assert all(e.raw for e in turn.errors if e.kind not in ('missing_argument',))
    msg = turn.errors[0].as_tool_message()
    assert msg['role'] == 'tool' and msg['content'].startswith('Error: ') and msg['name']
    assert assistant_text(turn.message) == text[: -len('<|im_end|>')]  # the history keeps the generated text


def test_parse_error_as_tool_message_without_a_tool_name():
    e = parse_assistant('<tool_call>\nnot json\n</tool_call>', TOOLS).errors[0]
    assert isinstance(e, ParseError) and e.tool is None
    assert e.as_tool_message() == {'role': 'tool', 'name': 'tool_call', 'content': 'Error: ' + e.message}


def test_good_calls_survive_bad_neighbours_and_tools_none():
    good = '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "1"}}\n</tool_call>'
    turn = parse_assistant(good + '\n<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>\n' + good, TOOLS)
    assert [c.name for c in turn.tool_calls] == ['get_order', 'get_order']
    assert [e.kind for e in turn.errors] == ['unknown_tool']
    assert 'tool_calls' not in turn.message  # rendered verbatim instead, so the calls are not rendered twice
    turn = parse_assistant('<tool_call>\n{"name": "anything", "arguments": {"n": "1"}}\n</tool_call>', None)
    assert turn.tool_calls == [ToolCall('anything', {'n': '1'}, turn.tool_calls[0].raw)] and turn.errors == []
    assert [e.kind for e in parse_assistant(good, []).errors] == ['unknown_tool']
    turn = parse_assistant('<tool_call>\n{"name": "get_order", "parameters": {"order_id": "12"}}\n</tool_call>', TOOLS)
    assert turn.tool_calls[0].arguments == {'order_id': '12'}  # "parameters" alias
    turn = parse_assistant('<tool_call>\n{"name": "get_order", "parameters": {"order_id": 12}}\n</tool_call>', TOOLS)
    assert turn.tool_calls == [] and [(e.kind, e.argument) for e in turn.errors] == [('bad_argument', 'order_id')]
    assert "'order_id' must be a string, got 12" in turn.errors[0].message  # a number for a string id: not taken
    bare = [t['function'] for t in TOOLS]  # bare function specs work too
    assert parse_assistant(good, bare).tool_calls[0].name == 'get_order'


FRAGMENTS = [
    '<think>',
    '</think>',
    '\n',
    '\n\n',
    '<tool_call>',
    '</tool_call>',
    '{"name": "get_order", "arguments": {"order_id": "7"}}',
    '{"name": "update", "arguments": {"order_id": "7", "qty": "2"}}',
    '<function=update>',
    '<function=ping>',
    '</function>',
    '<parameter=qty>',
    '<parameter=order_id>',
    '</parameter>',
    'hello',
    ' ',
    '{',
    '"',
    '12',
    'é',
    '<|im_end|>',
    '<tool_response>',
]


def test_fuzz_parse_never_raises_and_message_renders_back():
    rng = random.Random(12)
    for _ in range(3000):
        text = ''.join(rng.choice(FRAGMENTS) for _ in range(rng.randint(0, 14)))
        turn = parse_assistant(text, rng.choice([TOOLS, None, []]))
        assert isinstance(turn, AssistantTurn) and turn.raw == text
        assert assistant_text(turn.message) == text.split('<|im_end|>')[0], text
        for e in turn.errors:
            assert e.kind in PARSE_ERROR_KINDS and e.message


# ---------------------------------------------------------------- token trajectories


def run_episode(fmt, msgs, tools, sample=None):
    "Replay a conversation as an episode: sampled assistant turns, observation deltas, parsed messages."
    sample = sample or (lambda m: fmt.encode(assistant_text(m) + '<|im_end|>'))
    k = next(i for i, m in enumerate(msgs) if m['role'] == 'assistant')
    traj, history = TokenTrajectory.start(fmt, msgs[:k], tools), list(msgs[:k])
    while k < len(msgs):
        ids = sample(msgs[k])
        traj.add_sampled(ids, [-float(i % 7) for i in range(len(ids))])
        history.append(fmt.parse(fmt.decode(ids), tools).message)
        k += 1
        obs = []
        while k < len(msgs) and msgs[k]['role'] != 'assistant':
            obs.append(msgs[k])
            k += 1
        if obs:
            traj.add_observation(obs)
            history += obs
    return traj, history


def test_delta_rendering_equals_full_rendering(tok, fmt):
    rng = random.Random(13)
    for _ in range(150):
        msgs = random_conversation(rng, rng.randint(1, 5))
        if rng.random() < 0.5:
            msgs += random_observation(rng)
        traj, history = run_episode(fmt, msgs, TOOLS)
        assert history == msgs
        traj.check(history)
        ends_with_assistant = msgs[-1]['role'] == 'assistant'
        full = fmt.encode(fmt.render(msgs, TOOLS, add_generation_prompt=not ends_with_assistant))
        assert traj.ids == (full[:-1] if ends_with_assistant else full)  # up to the final <|im_end|>
        # masks cover exactly the sampled tokens, which are exactly transformers' assistant tokens
        out = tok.apply_chat_template(
            msgs,
            tools=TOOLS,
            tokenize=True,
            return_dict=True,
            return_assistant_tokens_mask=True,
            add_generation_prompt=not ends_with_assistant,
        )
        mask = [0] * len(traj.prompt_ids) + traj.mask
        assert mask == out['assistant_masks'][: len(mask)] and sum(out['assistant_masks']) == sum(traj.mask)
        assert len(traj.completion_ids) == len(traj.mask) == len(traj.logprobs)
        assert all((lp is None) == (m == 0) for lp, m in zip(traj.logprobs, traj.mask))
        assert [k for k, s, e in traj.segments][0] == 'sampled' and traj.segments[-1][2] == len(traj.completion_ids)


def test_non_canonical_samples_check_by_text(fmt):
    "A model may sample a non-canonical tokenization: the text must agree, the ids are kept as sampled."
    rng = random.Random(14)
    per_char = lambda m: [i for ch in assistant_text(m) for i in fmt.encode(ch)] + [fmt.eos_id]
    for _ in range(30):
        msgs = random_conversation(rng, 3)
        traj, history = run_episode(fmt, msgs, TOOLS, sample=per_char)
        traj.check(history)
        assert any(
            fmt.encode(fmt.decode(traj.completion_ids[s:e])) != traj.completion_ids[s:e]
            for k, s, e in traj.segments
            if k == 'sampled'
        )
        # the observations are still checked token for token, each against its own text
        obs = [(s, e) for k, s, e in traj.segments if k == 'observation']
        if not obs:
            continue
        s, e = obs[-1]
        split = [i for ch in fmt.decode(traj.completion_ids[s:e]) for i in fmt.encode(ch)]
        d = len(split) - (e - s)
        bad = replace(
            traj,
            completion_ids=traj.completion_ids[:s] + split + traj.completion_ids[e:],
            mask=traj.mask[:s] + [0] * len(split) + traj.mask[e:],
            logprobs=traj.logprobs[:s] + [None] * len(split) + traj.logprobs[e:],
            segments=[(k, a + d * (a > s), b + d * (b >= e)) for k, a, b in traj.segments],
        )
        last_obs = len(traj.segments) - 1 - (traj.segments[-1][0] == 'sampled')
        with pytest.raises(ValueError, match=rf'differ at token \d+ \(in observation segment {last_obs}'):
            bad.check(history)


def test_check_catches_faults(fmt):
    rng = random.Random(15)
    msgs = random_conversation(rng, 4)
    traj, history = run_episode(fmt, msgs, TOOLS)
    traj.check(history)
    obs = next(i for i, (k, s, e) in enumerate(traj.segments) if k == 'observation')
    _, s, e = traj.segments[obs]
    bad = replace(
        traj, completion_ids=traj.completion_ids[: s + 2] + [fmt.encode('Z')[0]] + traj.completion_ids[s + 3 :]
    )
    with pytest.raises(ValueError, match=f'observation segment {obs}'):
        bad.check(history)
    cut = replace(traj, completion_ids=traj.completion_ids[:-3], mask=traj.mask[:-3], logprobs=traj.logprobs[:-3])
    with pytest.raises(ValueError, match='differ at character'):
        cut.check(history)
    with pytest.raises(ValueError, match='mask entries'):
        replace(traj, mask=traj.mask[:-1]).check(history)
    with pytest.raises(ValueError, match=r'sampled segment 0, completion tokens 0-\d+ has mask \[0\]'):
        replace(traj, mask=[0] * len(traj.mask)).check(history)
    with pytest.raises(ValueError, match='do not tile'):
        replace(traj, segments=traj.segments[:-1]).check(history)
    with pytest.raises(ValueError, match='differ at character'):
        traj.check(history[:-1] + [{**history[-1], 'content': 'other'}])
    with pytest.raises(ValueError, match='differ at character'):
        traj.check(history, tools=TOOLS[:1])
    # same text, different (non-canonical) observation tokens: caught token for token
    split = [i for ch in fmt.decode(traj.completion_ids[s:e]) for i in fmt.encode(ch)]
    assert split != traj.completion_ids[s:e]
    d = len(split) - (e - s)
    bad = replace(
        traj,
        completion_ids=traj.completion_ids[:s] + split + traj.completion_ids[e:],
        mask=traj.mask[:s] + [0] * len(split) + traj.mask[e:],
        logprobs=traj.logprobs[:s] + [None] * len(split) + traj.logprobs[e:],
        # the text is identical
        segments=[(k, a + d * (a > s), b + d * (b >= e)) for k, a, b in traj.segments],
    )
    with pytest.raises(ValueError, match='differ at token'):
        bad.check(history)
    with pytest.raises(ValueError, match='logprobs'):
        traj.add_sampled([1, 2], [0.0])


def test_shipped_qwen3_template_breaks_parity(tok, fmt):
    naive = ChatFormat(tok, template=SHIPPED_QWEN3)
    msgs = [
        {'role': 'user', 'content': 'hi'},
        {'role': 'assistant', 'content': 'a', 'reasoning_content': 'r1'},
        {'role': 'user', 'content': 'more'},
        {'role': 'assistant', 'content': 'b', 'reasoning_content': 'r2'},
    ]
    traj, history = run_episode(fmt, msgs, None)
    traj.check(history)
    with pytest.raises(ValueError, match=r'differ at character \d+ \(in sampled segment 0'):
        replace(traj, fmt=naive).check(history)
    with pytest.raises(ValueError, match='not prefix-preserving'):
        naive.observation_ids([{'role': 'user', 'content': 'x'}])
    # within a tool loop Qwen3 keeps the reasoning
    naive.observation_ids([{'role': 'tool', 'name': 't', 'content': 'x'}])


def test_truncated_trajectory_checks_up_to_the_cut(fmt):
    prompt = [{'role': 'user', 'content': 'hi'}]
    for partial in ['<think>\nstill thinking', '<think>\nr\n</think>\n\npartial answ', '<tool_call>\n{"name": "pi']:
        traj = TokenTrajectory.start(fmt, prompt, TOOLS).add_sampled(fmt.encode(partial))
        traj.check(prompt + [fmt.parse(partial, TOOLS).message])


# ---------------------------------------------------------------- speed (generous bounds: a shared, busy machine)


def test_parse_and_observation_are_fast(fmt):
    m = random_assistant(random.Random(17), calls=3)
    text = assistant_text(m) + '<|im_end|>'
    obs = [{'role': 'tool', 'name': 'get_order', 'content': '{"id": "ORD-1"}'}] * 2

    def median_us(f, n=200):
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        return sorted(ts)[n // 2] * 1e6

    assert median_us(lambda: parse_assistant(text, TOOLS).message) < 1000
    assert median_us(lambda: fmt.observation_ids(obs)) < 2000


def test_check_accepts_a_sampled_newline_that_merges_with_the_header_on_reencoding():
    "Seen on the first probing run of the tiny policy: the model began a turn with '\\n' after the header's '\\n'."
    from thinkingbox_training.interpret import make_tokenizer, ChatFormat, TokenTrajectory

    tok = make_tokenizer(['hello\n\nworld ' * 50, 'a\n\nb' * 30], vocab_size=400)
    fmt = ChatFormat(tok)
    assert len(fmt.encode('\n\nhello')) < len(fmt.encode('\n') + fmt.encode('\nhello'))  # the merge really happens
    msgs = [{'role': 'user', 'content': 'hi'}]
    tt = TokenTrajectory.start(fmt, msgs)
    tt.add_sampled(fmt.encode('\n') + fmt.encode('hello') + [fmt.eos_id])
    tt.check(msgs + [{'role': 'assistant', 'content': '\nhello'}])
    obs = [{'role': 'tool', 'name': 'x', 'content': 'ok'}]
    call_x = {'type': 'function', 'function': {'name': 'x', 'arguments': {}}}
    msgs2 = msgs + [{'role': 'assistant', 'content': '', 'tool_calls': [call_x]}]
    tt2 = TokenTrajectory.start(fmt, msgs)
    from thinkingbox_training.interpret import assistant_text

    tt2.add_sampled(fmt.encode(assistant_text(msgs2[-1])) + [fmt.eos_id]).add_observation(obs)
    tt2.add_sampled(fmt.encode('\n') + fmt.encode('hello') + [fmt.eos_id])
    tt2.check(msgs2 + obs + [{'role': 'assistant', 'content': '\nhello'}])
    with pytest.raises(ValueError, match='differ'):  # a real difference in the text is still an error
        tt2.check(msgs2 + obs + [{'role': 'assistant', 'content': '\nhellO'}])
