"Isolation and fault injection of per-episode MCP tool sessions, on the demo domain."

import asyncio, random
import pytest
from thinkingbox_training.tasks import Task, get_domain
from thinkingbox_training.backend import Domain
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

    async def main():
        return await asyncio.gather(*[episode(i) for i in range(64)])

    states = asyncio.run(main())
    for i, st in enumerate(states):
        acc = {r['id']: r for r in st['account']}
        assert acc['AC-1']['balance_cents'] == 10_000 - sum(plans[i])
        assert sorted(p['amount_cents'] for p in st['payment']) == sorted(plans[i])
        assert acc['AC-2']['balance_cents'] == 500


def test_tasks_get_their_own_init_and_templates_are_not_modified():
    t1 = Task(
        uid='demo/x/1',
        domain='demo',
        family='x',
        split='train',
        query='q',
        init={'account': [{'id': 'AC-1', 'balance_cents': 1}]},
    )
    t2 = Task(
        uid='demo/x/2',
        domain='demo',
        family='x',
        split='train',
        query='q',
        init={'account': [{'id': 'AC-9', 'balance_cents': 7}]},
    )
    with demo.provision(t1) as a, demo.provision(t2) as b:
        a.run_tool('pay', {'account_id': 'AC-2', 'amount_cents': 100})
        assert {r['id']: r['balance_cents'] for r in a.snapshot()['account']} == {'AC-1': 1, 'AC-2': 400}
        balances = {r['id']: r['balance_cents'] for r in b.snapshot()['account']}
        assert balances == {'AC-1': 10_000, 'AC-2': 500, 'AC-9': 7}
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
        with demo.provision() as db:
            ToolSession(db, allowed=['teleport'])


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


# --- the in-process path: the same texts and states as MCP ---------------------------------------------------------
import importlib.util, pathlib
from thinkingbox_training.tasks import generate_tasks
from thinkingbox_training.tools import InProcessToolSession, TOOL_TRANSPORTS, tool_session


def _hostile():
    "The reliability suite's hostile-input module (its cases and their tasks)."
    path = pathlib.Path(__file__).parent / 'reliability' / 'test_tool_inputs.py'
    spec = importlib.util.spec_from_file_location('_hostile_tool_inputs', path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


async def _replay(dom, task, calls, transport):
    "Specs, each call's outcome and the final state of `calls` on one transport."
    with dom.provision(task) as db:
        async with tool_session(db, transport=transport) as ts:
            specs = await ts.tool_specs()
            rs = [await ts.call(n, a) for n, a in calls]
            outs = [(r.name, r.text, r.is_error, r.system_error, r.agent_exception) for r in rs]
            return specs, outs, ts.agent_exceptions, ts.system_error, db.snapshot()


def test_inprocess_texts_are_byte_identical_to_mcp_on_every_hostile_input():
    "Every hostile case of the reliability suite (all tools of all domains): same bytes, same verdicts, same state."
    h = _hostile()
    cases = (
        [c.values for c in h.CASES]
        + [(d, 'no_such_tool', {}) for d in h.BASE]
        + [('retail', 'get_order', {'order_id': 'OR-40002'}), ('travel', 'get_booking', {'booking_id': 'BK-10011'})]
    )
    assert len(cases) > 100

    async def main():
        for dom_name, tool, args in cases:
            dom = get_domain(dom_name)
            mcp_, inp = [await _replay(dom, h.TASK[dom_name], [(tool, args)], t) for t in ('mcp', 'inprocess')]
            assert inp == mcp_, (dom_name, tool, str(args)[:200], inp[1], mcp_[1])
            ((_, text, is_error, system_error, _),) = inp[1]
            assert is_error and system_error is None, (tool, text[:200])  # the reliability suite's verdict, in process
            assert inp[4] == dom.template(h.TASK[dom_name]).initial

    asyncio.run(main())


def test_inprocess_golden_episodes_match_mcp_on_every_bench_task():
    "Each bench task's golden calls (with one unknown tool and one bad argument mixed in): same texts, same end state."

    async def main():
        n = 0
        for d in ('travel', 'retail'):
            dom = get_domain(d)
            for task in generate_tasks(d, 'bench', seed=3, n=2):
                calls = [(c.name, c.arguments) for c in task.golden]
                calls[1:1] = [('teleport', {'to': 'Mars'}), (calls[0][0], {'nonsense': 1})]
                a, b = [await _replay(dom, task, calls, t) for t in ('mcp', 'inprocess')]
                assert a == b, (task.uid, [x for x, y in zip(a[1], b[1]) if x != y])
                n += 1
        return n

    assert asyncio.run(main()) >= 20


def test_inprocess_keeps_the_time_limit_and_the_system_errors():
    dom = Domain('hangs', DemoBase, seed=demo.seed, policy='', register=False)

    @dom.tool
    def hang(ctx, account_id: str) -> dict:
        "Never answers in time."
        import time

        time.sleep(0.5)
        return {}

    async def main():
        with dom.provision() as db:
            async with InProcessToolSession(db, timeout_s=0.05) as ts:
                r = await ts.call('hang', {'account_id': 'AC-1'})
                return r, ts.system_error

    r, err = asyncio.run(main())
    assert r.is_error and r.system_error == err == 'tool hang timed out after 0.05s'


def test_transports_are_named_and_an_unknown_one_is_refused():
    assert set(TOOL_TRANSPORTS) == {'inprocess', 'mcp'}
    with demo.provision() as db:
        assert isinstance(tool_session(db), InProcessToolSession)
        assert type(tool_session(db, transport='mcp')) is ToolSession
        with pytest.raises(ValueError, match="tool_transport 'grpc'"):
            tool_session(db, transport='grpc')


def test_the_engine_runs_in_process_by_default_and_both_transports_give_the_same_episodes():
    "Flawed scripted episodes on both transports: the same conversations (tool texts included) and the same verdicts."
    import inspect
    from thinkingbox_training.episode import EpisodeRunner
    from thinkingbox_training.policies import ScriptedPolicy
    from thinkingbox_training import campaigns

    # training, probing and the main job run in process; tbt evaluate over MCP
    assert inspect.signature(EpisodeRunner).parameters['tool_transport'].default == 'inprocess'
    assert inspect.signature(campaigns.evaluate).parameters['tool_transport'].default == 'mcp'
    with pytest.raises(ValueError, match="tool_transport 'http'"):
        EpisodeRunner(ScriptedPolicy(), tool_transport='http')
    tasks = generate_tasks('retail', 'bench', seed=5, n=1)[:3] + generate_tasks('travel', 'bench', seed=5, n=1)[:3]
    jobs = [(t, r) for t in tasks for r in range(2)]
    runs = {
        tr: EpisodeRunner(ScriptedPolicy(flaw=0.5, seed=1), tool_transport=tr).run_sync(jobs) for tr in TOOL_TRANSPORTS
    }
    a, b = runs['inprocess'], runs['mcp']
    assert [e.trajectory.messages for e in a] == [e.trajectory.messages for e in b]
    assert [(e.reward, e.trajectory.status) for e in a] == [(e.reward, e.trajectory.status) for e in b]
    assert 0 < sum(e.reward for e in a) < len(jobs)
