"""The travel domain: self-checks of every generated task, determinism and splits, tool error paths, rollback."""

import asyncio, json
import pytest
from thinkingbox_training.tasks import Task, generate_tasks, exclude
from thinkingbox_training.backend import ToolError, canonical_state
from thinkingbox_training.grader import self_check
from thinkingbox_training.tools import ToolSession
from thinkingbox_training.domains.travel import SEED, travel

TRAIN = dict(split='train', seed=0, n=40)
BENCH = dict(split='bench', seed=1, n=20)


@pytest.fixture(scope='module')
def train():
    return generate_tasks('travel', **TRAIN)


@pytest.fixture(scope='module')
def bench():
    return generate_tasks('travel', **BENCH)


async def _check_all(tasks, batch=40):
    problems = []
    for i in range(0, len(tasks), batch):
        for ps in await asyncio.gather(*[self_check(t) for t in tasks[i : i + batch]]):
            problems += ps
    return problems


def test_self_check_every_task(train, bench):
    "Golden path passes through MCP, doing nothing fails (unless noop_ok), each wrong move fails for its stated reason."
    problems = asyncio.run(_check_all(train + bench))
    assert problems == [], '\n'.join(problems[:10])


def test_families_and_splits(train, bench):
    fams = travel.families
    assert len(fams) >= 6 and sum(f.bench_only for f in fams.values()) >= 2
    held_out = {n for n, f in fams.items() if f.bench_only}
    assert held_out == {'group_rebooking', 'loyalty_upgrade', 'approved_downgrade'}
    assert {t.family for t in train} == set(fams) - held_out
    assert {t.family for t in bench} == set(fams)
    assert all(t.held_out_family == (t.family in held_out) for t in train + bench)
    assert len(train) == 9 * 40 and len(bench) == 12 * 20
    uids = [t.uid for t in train + bench]
    assert len(set(uids)) == len(uids)
    assert not {t.uid for t in train} & {t.uid for t in bench}
    assert exclude(train + bench, bench_uids=[t.uid for t in bench]) == train
    # distinct situations, every family with both no-op and policy tasks where declared
    assert len({json.dumps(t.init, sort_keys=True) for t in train + bench}) == len(uids)
    tags = {f: set().union(*[set(t.tags) for t in train + bench if t.family == f]) for f in fams}
    assert 'noop_ok' in tags['booking_status_question']
    assert 'multi_step' in tags['cancel_trip'] and 'multi_step' in tags['group_rebooking']
    assert sum(1 for t in train if t.rubric) > 0
    assert all(f.wrong_moves for f in fams.values() if f.policy_sensitive)


def test_deterministic(bench):
    again = generate_tasks('travel', **BENCH)
    assert [t.model_dump() for t in again] == [t.model_dump() for t in bench]
    other = generate_tasks('travel', split='bench', seed=2, n=20)
    assert not {t.query for t in other} & {t.query for t in bench} or sum(
        a.init != b.init for a, b in zip(other, bench)
    ) == len(bench)


def test_task_ids_avoid_the_seed(train, bench):
    seed_ids = {r['id'] for rows in SEED.values() for r in rows}
    for t in train + bench:
        for table, rows in t.init.items():
            for r in rows:
                assert r['id'] not in seed_ids, (t.uid, table, r['id'])  # init only adds rows, never patches the seed


# ---- tool error paths: each refusal names the thing at fault and changes nothing


def _seed(status, **kw):
    return next(b for b in SEED['booking'] if b['status'] == status and all(b[k] == v for k, v in kw.items()))


def _refused(db, name, args, *phrases):
    before = db.snapshot()
    with pytest.raises(ToolError) as e:
        db.run_tool(name, args)
    for p in phrases:
        assert p in str(e.value), (name, str(e.value), p)
    assert db.snapshot() == before
    return str(e.value)


def test_read_tool_errors():
    with travel.provision() as db:
        _refused(db, 'find_traveller', {'email': 'nobody@nowhere.example'}, 'nobody@nowhere.example')
        _refused(db, 'get_booking', {'booking_id': 'BK-1'}, "booking 'BK-1' not found")
        _refused(db, 'list_rooms', {'hotel_id': 'HT-999'}, "hotel 'HT-999' not found")
        b = _seed('confirmed')
        hotel = next(r['hotel_id'] for r in SEED['room'] if r['id'] == b['room_id'])
        other_hotel_room = next(r['id'] for r in SEED['room'] if r['hotel_id'] != hotel)
        _refused(db, 'quote_change', {'booking_id': b['id'], 'room_id': other_hotel_room}, other_hotel_room, b['id'])
        _refused(
            db, 'quote_change', {'booking_id': b['id'], 'check_in': '2026-09-01'}, 'check_in 2026-09-01 is in the past'
        )
        _refused(
            db,
            'quote_change',
            {'booking_id': b['id'], 'check_in': '2026-11-10', 'check_out': '2026-11-10'},
            'check_out 2026-11-10 must be after',
        )
        _refused(
            db, 'quote_change', {'booking_id': b['id'], 'check_in': '2026-11-01', 'check_out': '2026-12-15'}, '30-night'
        )
        _refused(db, 'quote_change', {'booking_id': _seed('checked_in')['id']}, _seed('checked_in')['id'], 'checked_in')
        first = SEED['traveller'][0]
        assert db.run_tool('find_traveller', {'email': first['email'].upper()})['traveller_id'] == first['id']


def test_write_tool_errors():
    with travel.provision() as db:
        conf, done, inn = _seed('confirmed'), _seed('completed'), _seed('checked_in')
        canc = _seed('cancelled', cancel_fee_cents=0)
        room_of = {r['id']: r for r in SEED['room']}
        cur = room_of[conf['room_id']]
        siblings = [r for r in SEED['room'] if r['hotel_id'] == cur['hotel_id']]
        cheaper = [r for r in siblings if r['nightly_rate_cents'] < cur['nightly_rate_cents']]
        pricier = [r for r in siblings if r['nightly_rate_cents'] > cur['nightly_rate_cents']]
        _refused(db, 'cancel_booking', {'booking_id': canc['id']}, canc['id'], 'is cancelled')
        _refused(db, 'cancel_booking', {'booking_id': done['id']}, done['id'], 'is completed')
        _refused(db, 'cancel_booking', {'booking_id': inn['id']}, inn['id'], 'is checked_in')
        _refused(
            db,
            'change_dates',
            {'booking_id': conf['id'], 'check_in': str(conf['check_in']), 'check_out': str(conf['check_out'])},
            'already runs',
        )
        _refused(
            db,
            'change_dates',
            {'booking_id': inn['id'], 'check_in': '2026-11-01', 'check_out': '2026-11-02'},
            inn['id'],
            'checked_in',
        )
        _refused(
            db,
            'change_room',
            {'booking_id': conf['id'], 'room_id': conf['room_id']},
            'already in room',
            conf['room_id'],
        )
        _refused(db, 'change_room', {'booking_id': conf['id'], 'room_id': 'RM-0'}, "room 'RM-0' not found")
        _refused(
            db, 'request_approval', {'booking_id': conf['id'], 'kind': 'rate_cap'}, 'nothing to approve', conf['id']
        )
        if pricier:
            _refused(
                db,
                'request_approval',
                {'booking_id': conf['id'], 'kind': 'room_downgrade', 'room_id': pricier[0]['id']},
                pricier[0]['id'],
                'not a downgrade',
            )
        _refused(
            db,
            'request_approval',
            {'booking_id': conf['id'], 'kind': 'room_downgrade', 'check_in': '2026-12-01', 'check_out': '2026-12-02'},
            'room_id',
        )
        _refused(db, 'request_approval', {'booking_id': conf['id'], 'kind': 'other'}, 'kind')  # argument validation
        pay = next(p for p in SEED['payment'] if p['booking_id'] == canc['id'])
        _refused(db, 'refund_payment', {'payment_id': pay['id'], 'reason': 'test'}, pay['id'], 'already fully refunded')
        _refused(db, 'refund_payment', {'payment_id': 'PM-1', 'reason': 'test'}, "payment 'PM-1' not found")
        _refused(
            db,
            'open_ticket',
            {'booking_id': 'BK-2', 'category': 'complaint', 'summary': 'The room is noisy at night.'},
            "booking 'BK-2' not found",
        )
        _refused(db, 'open_ticket', {'booking_id': conf['id'], 'category': 'complaint', 'summary': 'bad'}, 'summary')
        open_t = next(t for t in SEED['ticket'] if t['status'] == 'open')
        _refused(
            db,
            'open_ticket',
            {
                'booking_id': open_t['booking_id'],
                'category': open_t['category'],
                'summary': 'Still not fixed, please help.',
            },
            f'ticket {open_t["id"]}',
            'already open',
        )
        if pricier:
            _refused(
                db,
                'upgrade_with_points',
                {'booking_id': conf['id'], 'room_id': cheaper[0]['id'] if cheaper else conf['room_id']},
                'not an upgrade',
            )
        # a filed request cannot be filed twice while pending
        if cheaper:
            downgrade = {'booking_id': conf['id'], 'kind': 'room_downgrade', 'room_id': cheaper[0]['id']}
            db.run_tool('request_approval', downgrade)
            _refused(db, 'request_approval', downgrade, 'already pending')


def test_failed_write_leaves_no_partial_change():
    "upgrade_with_points changes the room and deducts the points before it finds the points short: both rolled back."
    room_of = {r['id']: r for r in SEED['room']}
    b = next(b for b in SEED['booking'] if b['status'] == 'confirmed' and room_of[b['room_id']]['kind'] == 'standard')
    trav = b['traveller_id']
    hotel = room_of[b['room_id']]['hotel_id']
    suite = next(r['id'] for r in SEED['room'] if r['hotel_id'] == hotel and r['kind'] == 'suite')
    task = Task(
        uid='travel/test/no-points',
        domain='travel',
        family='test',
        split='train',
        query='upgrade me',
        init={'traveller': [{'id': trav, 'loyalty_points': 10}]},
    )
    with travel.provision(task) as db:
        before = db.snapshot()
        _refused(
            db,
            'upgrade_with_points',
            {'booking_id': b['id'], 'room_id': suite},
            trav,
            b['id'],
            suite,
            'has 10 loyalty points',
        )
        assert db.snapshot() == before
        view = db.run_tool('get_booking', {'booking_id': b['id']})  # the session sees the rolled-back values too
        assert view['room']['id'] == b['room_id'] and view['traveller']['loyalty_points'] == 10


def test_errors_reach_the_agent_through_mcp():
    async def run():
        with travel.provision() as db:
            async with ToolSession(db) as ts:
                r = await ts.call('cancel_booking', {'booking_id': 'BK-404'})
                assert r.is_error and "booking 'BK-404' not found" in r.text and r.system_error is None
                r = await ts.call(
                    'change_dates', {'booking_id': 'BK-404', 'check_in': 'soon', 'check_out': '2026-11-02'}
                )
                assert r.is_error and 'check_in' in r.text and r.system_error is None
                assert {s['function']['name'] for s in await ts.tool_specs()} == set(travel.tools)

    asyncio.run(run())


def test_amounts_follow_the_policy():
    "A late cancellation keeps exactly the first night; a downgrade request changes no booking, payment or refund."
    late = next(
        t
        for t in generate_tasks('travel', 'train', seed=3, n=6)
        if t.family == 'cancel_late_fee' and 'noop_ok' not in t.tags
    )
    with travel.provision(late) as db:
        b = late.golden[0].arguments['booking_id']
        view = db.run_tool('get_booking', {'booking_id': b})
        out = db.run_tool('cancel_booking', {'booking_id': b})
        assert out['late_fee_cents'] == view['nightly_rates_cents'][0] == view['late_fee_if_cancelled_now_cents'] > 0
        assert sum(r['amount_cents'] for r in out['refunds']) == view['total_cents'] - out['late_fee_cents']
    down = generate_tasks('travel', 'train', seed=3, n=1)[0]
    assert down.family == 'downgrade_needs_approval'
    with travel.provision(down) as db:
        init = travel.template(down).initial
        for c in down.golden:
            db.run_tool(c.name, c.arguments)
        s0, s1 = canonical_state(travel, init, init), canonical_state(travel, db.snapshot(), init)
        assert {t for t in s0 if s0[t] != s1[t]} == {'approval_request'}


def test_task_file_round_trip(tmp_path, bench):
    "Written as JSON Lines and loaded back (init timestamps and dates as ISO text), a task keeps its expected state."
    from thinkingbox_training.tasks import write_tasks, load_tasks
    from thinkingbox_training.grader import expected_state

    write_tasks(bench, tmp_path / 'travel.jsonl')
    loaded = load_tasks(tmp_path / 'travel.jsonl')
    assert [t.model_dump() for t in loaded] == [t.model_dump() for t in bench]
    t = next(t for t in loaded if t.family == 'group_rebooking')
    fresh = t.model_copy(update={'uid': t.uid + '-reloaded'})
    assert expected_state(fresh) == expected_state(next(b for b in bench if b.uid == t.uid))
    assert asyncio.run(self_check(fresh)) == []


def test_every_task_serves_one_traveller_or_their_company(train, bench):
    """A task serves its traveller; group rebooking serves the coordinator's company. Cross-customer moves cover
    every tool."""
    for t in train + bench:
        travellers = {r['id']: r for r in t.init['traveller']}
        if t.family == 'group_rebooking':
            assert {r['company_id'] for r in travellers.values()} == {t.customer}
        else:
            assert list(travellers) == [t.customer]
    moves = travel.cross_customer_moves(bench[0])
    # the hotels are public
    assert {c['name'] for calls, _ in moves for c in calls} == set(travel.tools) - {'list_rooms'}
