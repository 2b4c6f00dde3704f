"Isolation and fault injection of per-episode MCP tool sessions, on the demo domain."
import asyncio, random
import pytest
from thinkingbox_training.tasks import Task, ToolCallSpec, get_domain
from thinkingbox_training.backend import Domain, canonical_state
from thinkingbox_training.tools import ToolSession
from thinkingbox_training.domains.demo import DemoBase

demo = get_domain('demo')

def test_64_concurrent_episodes_each_end_in_exactly_their_own_state():
    # Each episode pays its own amounts, interleaved with the others' calls at every await point;
    # the final state of each must be exactly what its own calls alone produce.
    plans = {i: [random.Random(i).randint(1, 90) for _ in range(5)] for i in range(64)}
    async def episode(i):
        with demo.provision() as db:
            async with ToolSession(db) as ts:
                for amount in plans[i]:
                    r = await ts.call('pay', {'account_id': 'AC-1', 'amount_cents': amount})
                    assert not r.is_error, r.text
                    await asyncio.sleep(random.random() / 1000)
            return db.snapshot()
    async def main(): return await asyncio.gather(*[episode(i) for i in range(64)])
    states = asyncio.run(main())
    for i, st in enumerate(states):
        acc = {r['id']: r for r in st['account']}
        assert acc['AC-1']['balance_cents'] == 10_000 - sum(plans[i])
        assert sorted(p['amount_cents'] for p in st['payment']) == sorted(plans[i])
        assert acc['AC-2']['balance_cents'] == 500

def test_tasks_get_their_own_init_and_templates_are_not_modified():
    t1 = Task(uid='demo/x/1', domain='demo', family='x', split='train', query='q', init={'account': [{'id': 'AC-1', 'balance_cents': 1}]})
    t2 = Task(uid='demo/x/2', domain='demo', family='x', split='train', query='q', init={'account': [{'id': 'AC-9', 'balance_cents': 7}]})
    with demo.provision(t1) as a, demo.provision(t2) as b:
        a.run_tool('pay', {'account_id': 'AC-2', 'amount_cents': 100})
        assert {r['id']: r['balance_cents'] for r in a.snapshot()['account']} == {'AC-1': 1, 'AC-2': 400}
        assert {r['id']: r['balance_cents'] for r in b.snapshot()['account']} == {'AC-1': 10_000, 'AC-2': 500, 'AC-9': 7}
    with demo.provision(t1) as again:
        assert again.snapshot() == demo.template(t1).initial

def test_allowed_tools_restrict_what_the_agent_sees_and_can_call():
    async def main():
        with demo.provision() as db:
            async with ToolSession(db, allowed=['get_account']) as ts:
                assert [s['function']['name'] for s in await ts.tool_specs()] == ['get_account']
                r = await ts.call('pay', {'account_id': 'AC-1', 'amount_cents': 1})
                assert r.is_error and r.system_error is None
            return db.snapshot()
    assert asyncio.run(main()) == demo.template().initial
    with pytest.raises(ValueError, match='no tools'):
        with demo.provision() as db: ToolSession(db, allowed=['teleport'])

def test_crash_mid_write_rolls_back_and_is_a_system_error():
    dom = Domain('crashy', DemoBase, seed=demo.seed, policy='', register=False)
    @dom.tool
    def pay_then_crash(ctx, account_id: str) -> dict:
        "Writes, then the backend dies."
        from thinkingbox_training.domains.demo import Account
        ctx.get(Account, account_id).balance_cents = 0
        ctx.session.flush()
        raise OSError('disk I/O error')
    async def main():
        with dom.provision() as db:
            async with ToolSession(db) as ts:
                r = await ts.call('pay_then_crash', {'account_id': 'AC-1'})
            return r, ts.system_error, db.snapshot()
    r, err, state = asyncio.run(main())
    assert r.is_error and r.system_error == err == 'tool pay_then_crash crashed: OSError: disk I/O error'
    assert state == demo.template().initial
