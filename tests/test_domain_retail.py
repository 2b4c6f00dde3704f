"The retail domain: self-checks of every generated task, determinism, splits, tool error paths, no partial writes."

import asyncio, json
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec, generate_tasks, get_domain, load_tasks, write_tasks
from thinkingbox_training.backend import ToolError
from thinkingbox_training.grader import expected_state, self_check
from thinkingbox_training.tools import ToolSession

retail = get_domain('retail')
SEED = retail.seed()
TRAIN = generate_tasks('retail', 'train', seed=0, n=40)
BENCH = generate_tasks('retail', 'bench', seed=1, n=20)
WRITES = {
    'cancel_order',
    'change_shipping_address',
    'create_return',
    'send_replacement',
    'exchange_item',
    'issue_goodwill_credit',
    'open_ticket',
}


def email_of(order_id):
    cid = next(o['customer_id'] for o in SEED['order'] if o['id'] == order_id)
    return next(c['email'] for c in SEED['customer'] if c['id'] == cid)


def items_of(order_id):
    return [i for i in SEED['order_item'] if i['order_id'] == order_id]


def ship_of(order_id):
    return next(s for s in SEED['shipment'] if s['order_id'] == order_id)


def name_of(item):
    return next(p['name'] for p in SEED['product'] if p['id'] == item['product_id'])


def task_with(uid, init=None):
    "A bare task on the seed (plus `init`), to provision a database from."
    return Task(uid=f'retail/test/{uid}', domain='retail', family='test', split='bench', query='-', init=init or {})


# --- every generated task checks itself ---------------------------------------------------------------


def test_self_check_every_generated_task():
    "Golden path passes through MCP, doing nothing fails (passes for noop_ok), each wrong move fails for its reason."

    async def all_checks():
        gate = asyncio.Semaphore(8)  # unbounded, 680 tasks' tool threads queue past the 10 s call limit

        async def one(t):
            async with gate:
                return await self_check(t)

        return await asyncio.gather(*[one(t) for t in TRAIN + BENCH])

    problems = [p for ps in asyncio.run(all_checks()) for p in ps]
    assert problems == [], problems[:5]


# --- generation ----------------------------------------------------------------------------------------


def test_generation_is_deterministic():
    again = generate_tasks('retail', 'train', seed=0, n=40) + generate_tasks('retail', 'bench', seed=1, n=20)
    assert [t.model_dump() for t in again] == [t.model_dump() for t in TRAIN + BENCH]
    other = generate_tasks('retail', 'train', seed=1, n=40)
    assert [t.init for t in other] != [t.init for t in TRAIN]


def test_splits_are_disjoint_and_bench_only_families_stay_out_of_train():
    assert len(TRAIN) == 400 and len(BENCH) == 280
    uids = [t.uid for t in TRAIN + BENCH]
    assert len(set(uids)) == len(uids)
    held_out = {f.name for f in retail.families.values() if f.bench_only}
    assert len(held_out) >= 2
    assert not held_out & {t.family for t in TRAIN}
    assert held_out <= {t.family for t in BENCH}
    assert all(t.held_out_family == (t.family in held_out) for t in BENCH)


def test_tasks_are_distinct():
    "Hundreds of different situations (no two tasks start from the same rows), and the phrasings vary."
    assert len({json.dumps(t.init, sort_keys=True) for t in TRAIN + BENCH}) == len(TRAIN + BENCH)
    by_family = {}
    for t in TRAIN:
        by_family.setdefault(t.family, set()).add(t.query.split(' ')[0])
    assert all(len(v) >= 2 for v in by_family.values()), by_family


def test_families_cover_the_required_kinds():
    fams = retail.families.values()
    assert 6 <= len(retail.families)
    assert all(f.wrong_moves for f in fams if f.policy_sensitive)
    assert any('noop_ok' in t.tags for t in TRAIN)
    assert any('refusal' in t.tags for t in TRAIN)
    assert any(sum(c.name in WRITES for c in t.golden) >= 3 for t in TRAIN)
    assert any(t.rubric for t in TRAIN)
    assert all(len([c for c in t.golden if c.name in WRITES]) == 0 for t in TRAIN + BENCH if 'noop_ok' in t.tags)


def test_task_file_round_trip(tmp_path):
    "Written to JSON Lines and loaded back (dates become ISO strings), a task still provisions and grades the same."
    path = tmp_path / 'retail.jsonl'
    sample = TRAIN[::37] + BENCH[::31]
    write_tasks(sample, path)
    loaded = load_tasks(path)
    assert [t.model_dump() for t in loaded] == [t.model_dump(mode='json') for t in sample]
    for a, b in zip(sample, loaded):
        assert expected_state(b.model_copy(update={'uid': b.uid + '/loaded'})) == expected_state(a)


def test_golden_call_with_a_bad_argument_is_reported():
    credit = ToolCallSpec(name='issue_goodwill_credit', arguments={'order_id': 'OR-1', 'email': 'x', 'percent': 0})
    t = TRAIN[0].model_copy(update={'golden': [credit]})
    assert retail.check_call('issue_goodwill_credit', t.golden[0].arguments)[0][0] == 'arguments.percent'
    assert 'unknown tool' in retail.check_call('refund_everything', {})[0][1]


# --- tool error paths: each message names what is wrong -------------------------------------------------

DELIVERED, IN_TRANSIT, PENDING, CANCELLED, CREDITED = 'OR-40001', 'OR-40004', 'OR-40005', 'OR-40006', 'OR-40002'


def error_cases():
    d_item = items_of(DELIVERED)[0]  # its one unit was returned already (seed history)
    t_item = items_of(IN_TRANSIT)[0]
    e = email_of

    def ret(order, product, reason='unwanted', **more):
        return {'order_id': order, 'email': e(order), 'product_id': product, 'reason': reason, **more}

    return [
        ('get_order', {'order_id': 'OR-1'}, "order 'OR-1' not found"),
        ('find_customer_orders', {'email': 'nobody@example.com'}, "no customer with email 'nobody@example.com'"),
        ('list_variants', {'product_id': 'PR-0'}, "product 'PR-0' not found"),
        ('cancel_order', {'order_id': PENDING, 'email': 'someone@else.com'}, f'not the email on order {PENDING}'),
        ('cancel_order', {'order_id': CANCELLED, 'email': e(CANCELLED)}, f'order {CANCELLED} is already cancelled'),
        ('cancel_order', {'order_id': DELIVERED, 'email': e(DELIVERED)}, f'order {DELIVERED} has been delivered'),
        (
            'change_shipping_address',
            {'shipment_id': 'SH-1', 'email': 'x@y.z', 'new_address': '1 Elm Street, York'},
            "shipment 'SH-1' not found",
        ),
        (
            'change_shipping_address',
            {'shipment_id': ship_of(IN_TRANSIT)['id'], 'email': e(IN_TRANSIT), 'new_address': '1 Elm Street, York'},
            f'shipment {ship_of(IN_TRANSIT)["id"]} is in_transit',
        ),
        (
            'change_shipping_address',
            {'shipment_id': ship_of(PENDING)['id'], 'email': e(PENDING), 'new_address': 'x'},
            'new_address',
        ),
        (
            'create_return',
            ret(DELIVERED, 'PR-9999'),
            f"order {DELIVERED} has no item of product 'PR-9999'; "
            f'its products are {", ".join(i["product_id"] for i in items_of(DELIVERED))}',
        ),
        (
            'create_return',
            ret(DELIVERED, t_item['product_id']),
            f'order {DELIVERED} has no item of product {t_item["product_id"]!r}',
        ),
        ('create_return', ret(DELIVERED, ''), 'product_id'),
        (
            'create_return',
            ret(IN_TRANSIT, t_item['product_id']),
            f'item {t_item["id"]} has not been delivered (shipment {t_item["shipment_id"]} is in_transit)',
        ),
        (
            'create_return',
            ret(DELIVERED, d_item['product_id'], quantity=d_item['quantity'] + 1),
            f'item {d_item["id"]} ({d_item["product_id"]}): only {d_item["quantity"] - 1} unit(s) left to return',
        ),
        ('create_return', ret(DELIVERED, d_item['product_id'], reason='bored'), 'reason'),
        (
            'send_replacement',
            {'order_id': IN_TRANSIT, 'email': e(IN_TRANSIT), 'product_id': t_item['product_id']},
            f'item {t_item["id"]} has not been delivered',
        ),
        (
            'issue_goodwill_credit',
            {'order_id': CREDITED, 'email': e(CREDITED), 'percent': 10},
            f'order {CREDITED} already received goodwill credit (CP-3001)',
        ),
        (
            'issue_goodwill_credit',
            {'order_id': CANCELLED, 'email': e(CANCELLED), 'percent': 10},
            f'order {CANCELLED} is cancelled',
        ),
        ('issue_goodwill_credit', {'order_id': CREDITED, 'email': e(CREDITED), 'percent': 0}, 'percent'),
        (
            'open_ticket',
            {'order_id': DELIVERED, 'email': e(DELIVERED), 'category': 'urgent', 'summary': 'x'},
            'category',
        ),
        ('refund_everything', {}, "unknown tool 'refund_everything'"),
    ]


@pytest.mark.parametrize(
    'name,args,message', error_cases(), ids=lambda x: x if isinstance(x, str) and len(x) < 30 else None
)
def test_tool_errors_name_what_is_wrong(name, args, message):
    with retail.provision() as db:
        with pytest.raises(ToolError, match=None) as e:
            db.run_tool(name, args)
        assert message in str(e.value), str(e.value)
        assert db.snapshot() == retail.template().initial


def test_tool_errors_that_need_a_situation():
    "Out of stock, already replaced, not a variant, another price, duplicate ticket: on a seed order patched for each."
    oid, email = 'OR-40007', email_of('OR-40007')
    it = items_of(oid)[0]
    pid = it['product_id']
    sized = next(p for p in SEED['product'] if p['model'] == 'Trail Runner 2' and p['id'] != pid)
    other_size = next(
        p for p in SEED['product'] if p['model'] == 'Trail Runner 2' and p['id'] not in (pid, sized['id'])
    )
    shoe = {
        'order_item': [
            {'id': it['id'], 'product_id': sized['id'], 'unit_price_cents': sized['price_cents'], 'quantity': 1}
        ]
    }
    cases = [
        (
            {'product': [{'id': pid, 'stock': 0}]},
            'send_replacement',
            {'product_id': it['product_id']},
            f'product {pid} (',
        ),
        (
            {'order_item': [{'id': it['id'], 'replaced_qty': it['quantity']}]},
            'send_replacement',
            {'product_id': it['product_id']},
            'already replaced',
        ),
        (
            shoe,
            'exchange_item',
            {'product_id': sized['id'], 'new_product_id': 'PR-2001'},
            'PR-2001 (Noise-cancelling Headphones) is not another variant of Trail Runner 2',
        ),
        (shoe, 'exchange_item', {'product_id': sized['id'], 'new_product_id': sized['id']}, 'is not another variant'),
        (
            shoe | {'product': [{'id': other_size['id'], 'price_cents': 13900}]},
            'exchange_item',
            {'product_id': sized['id'], 'new_product_id': other_size['id']},
            f'product {other_size["id"]} costs 13900 cents, not {sized["price_cents"]}',
        ),
        (
            shoe | {'product': [{'id': other_size['id'], 'stock': 0}]},
            'exchange_item',
            {'product_id': sized['id'], 'new_product_id': other_size['id']},
            f'product {other_size["id"]} ({other_size["name"]}) is out of stock',
        ),
    ]
    for k, (init, name, args, message) in enumerate(cases):
        with retail.provision(task_with(f'situation-{k}', init)) as db:
            with pytest.raises(ToolError) as e:
                db.run_tool(name, {'order_id': oid, 'email': email} | args)
            assert message in str(e.value), (name, str(e.value))
    with retail.provision() as db:
        args = {'order_id': oid, 'email': email, 'category': 'supervisor_review', 'summary': 'late'}
        db.run_tool('open_ticket', args)
        with pytest.raises(ToolError, match=f'order {oid} already has an open supervisor_review ticket'):
            db.run_tool('open_ticket', args)


def test_item_writes_find_the_item_by_its_product():
    "By product id (spaces around it ignored); after an exchange and its way back, the item with units left."
    oid, email = 'OR-40007', email_of('OR-40007')
    it = items_of(oid)[0]
    for product in (it['product_id'], f' {it["product_id"]} '):
        with retail.provision() as db:
            db.run_tool('create_return', {'order_id': oid, 'email': email, 'product_id': product, 'reason': 'unwanted'})
            assert db.run_tool('get_order', {'order_id': oid})['returns'][-1]['item_id'] == it['id'], product
    with retail.provision() as db:  # a product's name is not its id
        with pytest.raises(ToolError, match=f'order {oid} has no item of product {name_of(it)!r}'):
            db.run_tool(
                'create_return', {'order_id': oid, 'email': email, 'product_id': name_of(it), 'reason': 'unwanted'}
            )
    # after an exchange and its way back the order lists a product twice; the first item has no unit left
    twice = {'order_item': [it | {'returned_qty': it['quantity']}, it | {'id': it['id'] + '9', 'quantity': 1}]}
    with retail.provision(task_with('exchange-and-back', twice)) as db:
        db.run_tool(
            'create_return', {'order_id': oid, 'email': email, 'product_id': it['product_id'], 'reason': 'unwanted'}
        )
        assert db.run_tool('get_order', {'order_id': oid})['returns'][-1]['item_id'] == it['id'] + '9'


# --- failed writes leave nothing behind ----------------------------------------------------------------


def test_a_refused_return_leaves_no_partial_write():
    """create_return marks the item returned, restocks and files the return before it finds the payment exhausted:
    all rolled back."""
    oid = 'OR-40007'
    pay = next(p for p in SEED['payment'] if p['order_id'] == oid)
    task = task_with('exhausted-payment', {'payment': [{'id': pay['id'], 'refunded_cents': pay['amount_cents']}]})
    with retail.provision(task) as db:
        before = db.snapshot()
        with pytest.raises(ToolError, match=f'exceeds the 0 cents left on payment {pay["id"]}'):
            db.run_tool(
                'create_return',
                {
                    'order_id': oid,
                    'email': email_of(oid),
                    'product_id': items_of(oid)[0]['product_id'],
                    'reason': 'unwanted',
                },
            )
        assert db.snapshot() == before
        # the same session still works afterwards
        assert db.run_tool('get_order', {'order_id': oid})['items'][0]['returned_qty'] == 0


def test_refusals_reach_the_agent_through_mcp_as_errors_not_system_errors():
    async def run():
        with retail.provision() as db:
            async with ToolSession(db) as ts:
                r = await ts.call('cancel_order', {'order_id': DELIVERED, 'email': email_of(DELIVERED)})
                ok = await ts.call('cancel_order', {'order_id': PENDING, 'email': email_of(PENDING).upper()})
                return r, ok, ts.system_error

    r, ok, system_error = asyncio.run(run())
    assert r.is_error and f'order {DELIVERED} has been delivered' in r.text and r.system_error is None
    assert not ok.is_error and '"status": "cancelled"' in ok.text  # the email check ignores case
    assert system_error is None


def test_every_task_serves_its_shops_customer_and_nobody_else():
    "Each task names its customer (the one customer of its `init`); the self-check above runs the cross-customer moves."
    assert all(t.customer == t.init['customer'][0]['id'] and len(t.init['customer']) == 1 for t in TRAIN + BENCH)
    moves = retail.cross_customer_moves(TRAIN[0])
    # the catalogue is public
    assert {c['name'] for calls, _ in moves for c in calls} == set(retail.tools) - {'list_variants'}
