"""Strict tool arguments in our own domains, and refusals that name nothing the agent did not give.

Our domains (demo, travel, retail) take an argument only as its declared JSON type, as written: `true` is not an
integer, `1` is not a string, and an argument a tool does not declare is not dropped. Each is the agent's failed
call, on every path a call enters a domain (an MCP session, the in-process session, and an episode's parser), and
nothing changes. A task format chooses its rule (`argument_validation`): 'lax' keeps pydantic's coercions.
A refusal of another customer's record names only what the agent typed: never the order behind a shipment."""

import asyncio, re
import pytest
from thinkingbox_training.backend import Domain
from thinkingbox_training.domains.demo import DemoBase
from thinkingbox_training.interpret import parse_assistant
from thinkingbox_training.tasks import generate_tasks, get_domain
from thinkingbox_training.tools import TOOL_TRANSPORTS, tool_session
from test_tool_inputs import BASE, TASK

# one case per domain and kind: a boolean for an integer, an integer for a string, an argument not declared
STRICT = [
    ('demo', 'pay', 'amount_cents', True),
    ('demo', 'get_account', 'account_id', 1),
    ('demo', 'get_account', 'note', 'extra'),
    ('retail', 'create_return', 'quantity', True),
    ('retail', 'issue_goodwill_credit', 'percent', True),
    ('retail', 'send_replacement', 'quantity', False),
    ('retail', 'get_order', 'order_id', 40005),
    ('retail', 'open_ticket', 'summary', 12345),
    ('retail', 'get_order', 'include_secrets', True),
    ('retail', 'cancel_order', 'reason', 'customer asked'),
    ('travel', 'get_booking', 'booking_id', 10011),
    ('travel', 'refund_payment', 'reason', 3),
    ('travel', 'change_dates', 'check_in', 20261201),
    ('travel', 'cancel_booking', 'waive_fee', True),
]


def _args(dom, tool, arg, value):
    return BASE[dom][tool] | {arg: value}


async def _calls(dom_name, tool, args):
    "The result and final state of one call on each transport."
    dom, out = get_domain(dom_name), {}
    for transport in TOOL_TRANSPORTS:
        with dom.provision(TASK[dom_name]) as db:
            async with tool_session(db, transport=transport) as ts:
                out[transport] = (await ts.call(tool, args), db.snapshot())
    return out, dom.template(TASK[dom_name]).initial


@pytest.mark.parametrize('dom,tool,arg,value', [pytest.param(*c, id=f'{c[0]}-{c[1]}-{c[2]}-{c[3]!r}') for c in STRICT])
def test_a_value_of_another_type_or_an_unknown_argument_is_the_agents_failed_call(dom, tool, arg, value):
    "On MCP and in process: an error naming the argument, not a system error, and the state intact."
    out, initial = asyncio.run(_calls(dom, tool, _args(dom, tool, arg, value)))
    for transport, (r, state) in out.items():
        assert r.is_error, f'{transport}: {tool} took {arg}={value!r}: {r.text[:200]}'
        assert r.system_error is None and arg in r.text, r.text
        assert state == initial, f'{transport}: {tool} changed the state'
    assert out['mcp'][0].text == out['inprocess'][0].text


def test_the_issues_refund_of_true_units():
    "`quantity: true` was taken as one unit and the refund went through; now nothing is refunded."
    out, initial = asyncio.run(_calls('retail', 'create_return', _args('retail', 'create_return', 'quantity', True)))
    r, state = out['mcp']
    assert 'quantity' in r.text and 'Input should be a valid integer' in r.text
    assert state['refund'] == initial['refund'] and state['return_request'] == initial['return_request']


def test_values_of_their_declared_types_still_work():
    "Strictness takes nothing that was right: the base calls, an ISO date, an omitted optional, a null optional."

    async def main():
        out = []
        for dom_name, tool, args in [
            ('demo', 'pay', BASE['demo']['pay']),
            ('retail', 'get_order', BASE['retail']['get_order']),
            ('travel', 'quote_change', BASE['travel']['quote_change'] | {'check_in': None}),
            ('travel', 'change_dates', BASE['travel']['change_dates']),
        ]:
            dom = get_domain(dom_name)
            with dom.provision(TASK[dom_name]) as db:
                async with tool_session(db) as ts:
                    out.append(await ts.call(tool, args))
        return out

    rs = asyncio.run(main())
    assert [r.is_error for r in rs[:3]] == [False] * 3, [r.text[:200] for r in rs]
    assert not rs[3].is_error or 'valid date' not in rs[3].text, rs[3].text  # a date as an ISO string is a date


def test_the_parser_does_not_turn_a_number_into_a_string():
    "An episode's calls pass the parser first: it converts text (the XML form) but never a number into text."
    tools = get_domain('demo').tool_specs()
    turn = parse_assistant('<tool_call>\n{"name": "get_account", "arguments": {"account_id": 1}}\n</tool_call>', tools)
    assert turn.tool_calls == [] and [(e.kind, e.argument) for e in turn.errors] == [('bad_argument', 'account_id')]
    xml = (
        '<tool_call>\n<function=pay>\n<parameter=account_id>\nAC-1\n</parameter>\n'
        '<parameter=amount_cents>\n250\n</parameter>\n</function>\n</tool_call>'
    )
    assert parse_assistant(xml, tools).tool_calls[0].arguments == {'account_id': 'AC-1', 'amount_cents': 250}


def _lax_demo(mode):
    dom = Domain(f'{mode}-demo', DemoBase, seed=get_domain('demo').seed, policy='', register=False)
    dom.argument_validation = mode
    for f in get_domain('demo').tools.values():
        dom.tool(f)
    return dom


def test_a_task_format_may_choose_lax_validation():
    "The seam: 'lax' is pydantic's lax mode (what a ThinkingBox server does: `true` is 1); anything else is refused."
    from thinkingbox_training.tools import argument_validation

    dom = _lax_demo('lax')

    async def main():
        with dom.provision() as db:
            async with tool_session(db) as ts:
                r = await ts.call('pay', {'account_id': 'AC-1', 'amount_cents': True, 'note': 'dropped'})
            return r, db.snapshot()

    r, state = asyncio.run(main())
    assert not r.is_error and r.text == '{"balance_cents": 9999}' and state['account'][0]['balance_cents'] == 9999
    assert argument_validation(get_domain('travel')) == 'strict'
    with pytest.raises(ValueError, match=r"domain loose-demo: argument_validation 'loose': expected one of "):
        argument_validation(_lax_demo('loose'))


# ---------------------------------------------------------------- refusals name only what the agent gave

ID = re.compile(r'\b[A-Z]{2}-\d+\b')


def _moves(dom_name, n=1):
    "Every cross-customer move of a generated task of each family (each call on another customer's record)."
    dom = get_domain(dom_name)
    tasks = generate_tasks(dom_name, 'bench', seed=3, n=n)
    return [(t, c) for t in tasks for calls, _ in dom.cross_customer_moves(t) for c in calls]


@pytest.mark.parametrize('dom_name', ['retail', 'travel'])
def test_a_refusal_names_no_record_the_agent_did_not_give(dom_name):
    "Each call on another customer's records is refused, and its text holds no id but those in its arguments."
    dom = get_domain(dom_name)

    async def main():
        out = []
        for task, c in _moves(dom_name):
            with dom.provision(task) as db:
                async with tool_session(db) as ts:
                    out.append((c, await ts.call(c['name'], c['arguments'])))
        return out

    results = asyncio.run(main())
    assert len(results) >= 8 and {c['name'] for c, _ in results} >= {'get_order', 'get_booking'} & set(dom.tools)
    for c, r in results:
        assert r.is_error and 'belongs to another' in r.text, (c, r.text)
        given = {i for v in c['arguments'].values() for i in ID.findall(str(v))}
        assert set(ID.findall(r.text)) <= given, f'{c["name"]} {c["arguments"]}: {r.text}'


def test_the_issues_shipment_of_another_customer():
    "Another customer's shipment id: the refusal named its order (`OR-40005`), now the shipment."
    seed = get_domain('retail').seed()
    mine = TASK['retail'].customer
    order = next(o for o in seed['order'] if o['customer_id'] != mine and o['status'] == 'placed')
    ship = next(s['id'] for s in seed['shipment'] if s['order_id'] == order['id'])
    email = next(c['email'] for c in seed['customer'] if c['id'] == order['customer_id'])
    args = {'shipment_id': ship, 'email': email, 'new_address': '1 Other Road, Leeds LS2 7EY'}
    out, initial = asyncio.run(_calls('retail', 'change_shipping_address', args))
    for r, state in out.values():
        assert r.text == (
            f'Error executing tool change_shipping_address: shipment {ship} belongs to another '
            'customer: you may only see and change the orders of the customer you serve'
        ), r.text
        assert order['id'] not in r.text and state == initial
