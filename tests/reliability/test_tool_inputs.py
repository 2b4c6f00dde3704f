"""Hostile tool inputs over every tool of every domain, through real MCP sessions on real SQLite episodes.

Each case is one call a policy could make: wrong types, missing arguments, 1 MB strings, lone surrogates, NUL
bytes, SQL-injection strings, huge and non-finite numbers, bad enums and dates, other customers' ids. Each must
come back as a clear tool error the agent reads (never a system error), and leave the episode's state intact."""

import asyncio, math
import pytest
from thinkingbox_training.tasks import Task, generate_tasks, get_domain
from thinkingbox_training.backend import AgentInputError, ToolError
from thinkingbox_training.tools import ToolSession
from thinkingbox_training.domains.travel import SEED as TRAVEL_SEED
from thinkingbox_training.domains.retail import retail_seed

MB = 'X' * 1_000_000
SURROGATE = 'OR-\ud800'
SQL = "' OR 1=1; DROP TABLE booking; --"
# words a clear error uses when it names the value at fault rather than the argument
CLEAR = (
    'not found',
    'no traveller with',
    'no customer with',
    'belongs to another',
    'not valid Unicode',
    'has no item of product',
    'is not the email on order',
    'failed on these arguments',
)
ID_VALUES = {
    'int': 12345,
    'list': ['X-1'],
    'null': None,
    'mb': MB,
    'surrogate': SURROGATE,
    'nul': 'X-1\x00',
    'sql': SQL,
    'empty': '',
}
SOME_ID_VALUES = ('surrogate', 'sql')


def _task(domain, family) -> Task:
    return next(t for t in generate_tasks(domain, 'bench', seed=1, n=1) if t.family == family)


TRAVEL = _task('travel', 'cancel_within_window')
RETAIL = _task('retail', 'return_in_window')


def _travel_base() -> dict:
    b, p = TRAVEL.init['booking'][0], TRAVEL.init['payment'][0]
    hotel = next(r['hotel_id'] for r in TRAVEL_SEED['room'] if r['id'] == b['room_id'])
    room = next(r['id'] for r in TRAVEL_SEED['room'] if r['hotel_id'] == hotel and r['id'] != b['room_id'])
    bk, dates = {'booking_id': b['id']}, {'check_in': '2026-12-01', 'check_out': '2026-12-03'}
    return {
        'find_traveller': {'email': TRAVEL.init['traveller'][0]['email']},
        'get_booking': bk,
        'list_rooms': {'hotel_id': hotel},
        'quote_change': bk | {'room_id': room},
        'cancel_booking': bk,
        'change_dates': bk | dates,
        'change_room': bk | {'room_id': room},
        'upgrade_with_points': bk | {'room_id': room},
        'request_approval': bk | {'kind': 'rate_cap'} | dates,
        'refund_payment': {'payment_id': p['id'], 'reason': 'duplicate charge'},
        'open_ticket': bk | {'category': 'complaint', 'summary': 'The room was far too noisy at night.'},
    }


def _retail_base() -> dict:
    o, item = RETAIL.init['order'][0], RETAIL.init['order_item'][0]
    on = {'order_id': o['id'], 'email': RETAIL.user.facts['email']}
    ship = RETAIL.init['shipment'][0]['id']
    return {
        'get_order': {'order_id': o['id']},
        'find_customer_orders': {'email': on['email']},
        'list_variants': {'product_id': item['product_id']},
        'cancel_order': on,
        'change_shipping_address': {
            'shipment_id': ship,
            'email': on['email'],
            'new_address': '9 New Road, York YO1 7HH',
        },
        'create_return': on | {'product_id': item['product_id'], 'reason': 'unwanted'},
        'send_replacement': on | {'product_id': item['product_id']},
        'exchange_item': on | {'product_id': item['product_id'], 'new_product_id': item['product_id']},
        'issue_goodwill_credit': on | {'percent': 10},
        'open_ticket': on | {'category': 'general', 'summary': 'Where is it?'},
    }


BASE = {
    'travel': _travel_base(),
    'retail': _retail_base(),
    'demo': {'get_account': {'account_id': 'AC-1'}, 'pay': {'account_id': 'AC-1', 'amount_cents': 100}},
}
TASK = {'travel': TRAVEL, 'retail': RETAIL, 'demo': None}
IDS = {
    'travel': ['email', 'booking_id', 'hotel_id', 'room_id', 'payment_id'],
    'retail': ['order_id', 'email', 'shipment_id', 'product_id', 'new_product_id'],
    'demo': ['account_id'],
}
ENUMS = {'kind': ['bogus', 'RATE_CAP'], 'category': ['bogus', ''], 'reason': ['bogus'], 'refund_method': ['cash']}
DATES = ['tomorrow', '2026-13-45', 20261201, '9999-12-31T25:00']
INTS = {
    'amount_cents': ['abc', 1.5, 10**30, -5, math.inf, math.nan, None],
    'percent': [0, 101, 'ten', 10**30, -1, 2.5],
    'quantity': [0, -1, 'two', 10**30],
}
TEXT = {
    'reason': [123, SURROGATE],
    'summary': [['a list'], SURROGATE + ' noisy room'],
    'new_address': [None, 'x\ud83d\ude00\udfff road'],
}


def _cases():
    out = []
    for dom, tools in BASE.items():
        for tool, base in tools.items():
            out.append(pytest.param(dom, tool, {}, id=f'{dom}-{tool}-no-arguments'))
            ids = [a for a in base if a in IDS[dom]]
            for arg in base:
                if arg in ids:
                    for k in ID_VALUES if arg == ids[0] else SOME_ID_VALUES:
                        out.append(pytest.param(dom, tool, base | {arg: ID_VALUES[k]}, id=f'{dom}-{tool}-{arg}-{k}'))
                if arg in ('check_in', 'check_out'):
                    for v in DATES[:2] if arg == 'check_out' else DATES:
                        out.append(pytest.param(dom, tool, base | {arg: v}, id=f'{dom}-{tool}-{arg}-{v}'))
                if arg in ENUMS and isinstance(base[arg], str) and not (tool == 'refund_payment' and arg == 'reason'):
                    for v in ENUMS[arg]:
                        out.append(
                            pytest.param(dom, tool, base | {arg: v}, id=f'{dom}-{tool}-{arg}-enum-{v or "empty"}')
                        )
                if arg in INTS:
                    for v in INTS[arg]:
                        out.append(pytest.param(dom, tool, base | {arg: v}, id=f'{dom}-{tool}-{arg}-{str(v)[:12]}'))
                if arg in TEXT and not (arg == 'reason' and tool != 'refund_payment'):
                    for i, v in enumerate(TEXT[arg]):
                        out.append(pytest.param(dom, tool, base | {arg: v}, id=f'{dom}-{tool}-{arg}-text{i}'))
    return out


CASES = _cases()


def test_every_tool_of_every_domain_is_attacked():
    attacked = {(c.values[0], c.values[1]) for c in CASES}
    assert attacked == {(d, t) for d in BASE for t in get_domain(d).tools}
    assert len(CASES) >= 60


async def _call(dom_name, tool, args):
    dom = get_domain(dom_name)
    task = TASK[dom_name]
    with dom.provision(task) as db:
        async with ToolSession(db) as ts:
            r = await ts.call(tool, args)
        return r, db.snapshot(), dom.template(task).initial


@pytest.mark.parametrize('dom,tool,args', CASES)
def test_bad_input_is_a_clear_tool_error_and_changes_nothing(dom, tool, args):
    r, state, initial = asyncio.run(_call(dom, tool, args))
    assert r.is_error, f'{tool} accepted {str(args)[:200]}: {r.text[:300]}'
    assert r.system_error is None, r.system_error
    assert 0 < len(r.text) < 2000, f'the error echoes the input: {len(r.text)} characters'
    named = (
        [a for a in args if a in r.text]
        or [w for w in CLEAR if w in r.text]
        or (['Field required'] if not args else [])
    )
    assert named, f'the error names neither an argument nor what is wrong: {r.text[:300]}'
    assert state == initial


@pytest.mark.parametrize(
    'dom,tool,args',
    [
        pytest.param('travel', 'get_booking', {'booking_id': 'BK-10011'}, id='travel-get_booking-BK-10011'),
        pytest.param('travel', 'cancel_booking', {'booking_id': 'BK-10011'}, id='travel-cancel_booking-BK-10011'),
        pytest.param(
            'travel',
            'refund_payment',
            {'payment_id': 'PM-50011', 'reason': 'goodwill'},
            id='travel-refund_payment-PM-50011',
        ),
        pytest.param('retail', 'get_order', {'order_id': 'OR-40002'}, id='retail-get_order-OR-40002'),
        pytest.param(
            'retail',
            'find_customer_orders',
            {'email': retail_seed()['customer'][1]['email']},
            id='retail-find_customer_orders-seed',
        ),
        pytest.param(
            'retail',
            'cancel_order',
            {'order_id': 'OR-40005', 'email': retail_seed()['customer'][4]['email']},
            id='retail-cancel_order-seed',
        ),
    ],
)
def test_other_customers_records_are_refused(dom, tool, args):
    "Another traveller's booking and payment, another customer's order and email."
    r, state, initial = asyncio.run(_call(dom, tool, args))
    assert r.is_error and r.system_error is None and 'belongs to another' in r.text, r.text
    text = r.text
    for v in args.values():
        text = text.replace(v, '')  # what the agent typed may be echoed; nothing of theirs
    theirs = ('@', 'VISA', 'AMEX', 'MASTERCARD', 'store_credit')
    assert not any(x in text for x in theirs), 'the refusal shows their data'
    assert state == initial


def test_domain_code_raising_on_the_arguments_is_the_agents_failed_call():
    "A payment of 10**30 cents: SQLite cannot store it (OverflowError), a failed call the agent sees, counted by type."

    async def main():
        dom = get_domain('demo')
        with dom.provision() as db:
            async with ToolSession(db) as ts:
                r = await ts.call('pay', {'account_id': 'AC-1', 'amount_cents': 10**30})
                return r, ts, db.snapshot(), dom.template().initial

    r, ts, state, initial = asyncio.run(main())
    assert r.is_error and r.system_error is None and ts.system_error is None
    assert r.agent_exception == 'OverflowError' and 'pay failed on these arguments (OverflowError' in r.text
    assert ts.agent_exceptions == {'pay': {'OverflowError': 1}} and state == initial


def test_a_lone_surrogate_is_refused_before_any_domain_code_runs():
    "An `OR-\\ud800` id crashed SQLite's encoder (a system error); now an invalid argument, in and out of MCP."
    with get_domain('retail').provision(RETAIL) as db:
        with pytest.raises(ToolError, match=r'order_id: not valid Unicode \(a lone surrogate at position 3\)'):
            db.run_tool('get_order', {'order_id': SURROGATE})
        with pytest.raises(ToolError, match=r'summary: not valid Unicode'):
            db.run_tool('open_ticket', BASE['retail']['open_ticket'] | {'summary': 'ok \udc80'})


def test_infrastructure_failures_stay_system_errors():
    "The line between the agent's failures and ours: an I/O or database-engine error is never the agent's."
    import sqlite3
    from thinkingbox_training.backend import is_infrastructure_error

    assert is_infrastructure_error(OSError('disk I/O error'))
    assert is_infrastructure_error(sqlite3.OperationalError('database is locked'))
    assert not is_infrastructure_error(UnicodeEncodeError('utf-8', 'x', 0, 1, 'surrogates not allowed'))
    assert not is_infrastructure_error(OverflowError('Python int too large'))
    assert not is_infrastructure_error(KeyError('x'))
    assert issubclass(AgentInputError, ToolError)
