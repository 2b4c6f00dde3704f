"""The environment's hot paths: driver-SQL reads in a tool's transaction, and grading from the template's
canonical state. Each must give exactly what the slower, plain path gives."""

from thinkingbox_training.tasks import generate_tasks, get_domain
from thinkingbox_training.backend import Domain, canonical_state, diff_states, episode_state
from thinkingbox_training.grader import expected_state
from thinkingbox_training.domains.demo import Account, DemoBase, demo


def _moves(task) -> list:
    "The task's golden calls, doing nothing, and each of its family's wrong moves, as lists of (name, arguments)."
    fam = get_domain(task.domain).families.get(task.family)
    pair = lambda c: (c['name'], c['arguments']) if isinstance(c, dict) else (c.name, c.arguments)
    wrong = [[pair(c) for c in calls] for calls, _ in (fam.wrong_moves(task) if fam and fam.wrong_moves else [])]
    return [[pair(c) for c in task.golden], []] + wrong


def test_episode_state_is_the_full_canonical_state_after_every_kind_of_move():
    n = changed = 0
    for d in ('travel', 'retail', 'demo'):
        dom = get_domain(d)
        for task in generate_tasks(d, 'bench', seed=11, n=2):
            initial = dom.template(task).initial
            for calls in _moves(task):
                with dom.provision(task) as db:
                    for name, args in calls:
                        try:
                            db.run_tool(name, args)
                        except Exception:
                            pass  # a wrong move may be refused: its state is still graded
                    full, fast = canonical_state(dom, db.snapshot(), initial), episode_state(db, task)
                assert fast == full and list(fast) == list(full), (task.uid, calls)
                assert diff_states(expected_state(task), fast) == diff_states(expected_state(task), full)
                n += 1
                changed += fast != canonical_state(dom, initial, initial)
    assert n >= 30 and changed >= n // 2  # most of the states checked differ from the initial one


def test_tables_changed_back_or_reordered_give_the_full_state():
    with demo.provision() as db:
        db.run_tool('pay', {'account_id': 'AC-1', 'amount_cents': 100})
        # the balance back as it was (the account table's rows are the template's again), and AC-2 deleted and
        # inserted again (the same rows in another order)
        db.conn.execute("UPDATE account SET balance_cents = 10000 WHERE id = 'AC-1'")
        db.conn.execute("DELETE FROM account WHERE id = 'AC-2'")
        db.conn.execute("INSERT INTO account (id, balance_cents, note) VALUES ('AC-2', 500, '')")
        db.conn.commit()
        full = canonical_state(demo, db.snapshot(), demo.template().initial)
        assert episode_state(db) == full
    assert full['account']['AC-1']['balance_cents'] == 10_000 and len(full['payment']) == 1


def test_sql_reads_see_what_the_session_has_not_flushed_yet():
    with demo.provision() as db:
        acc = db.session.get(Account, 'AC-2')
        acc.balance_cents = 7
        # an ORM query would autoflush first; so does Ctx.sql
        assert db.ctx.sql('SELECT balance_cents FROM account WHERE id = ?', 'AC-2') == [{'balance_cents': 7}]
        db.session.rollback()
        assert db.ctx.sql('SELECT balance_cents FROM account WHERE id = ?', 'AC-2') == [{'balance_cents': 500}]


def test_a_call_that_only_reads_opens_no_transaction_and_a_write_is_committed():
    dom = Domain('reads', DemoBase, seed=demo.seed, policy='', register=False)

    @dom.tool
    def balance(ctx, account_id: str) -> dict:
        "The balance, read as driver SQL."
        return ctx.sql('SELECT balance_cents FROM account WHERE id = ?', account_id)[0]

    dom.tool(demo.tools['pay'])
    with dom.provision() as db:
        assert db.run_tool('balance', {'account_id': 'AC-1'}) == {'balance_cents': 10_000}
        assert not db.session.in_transaction() and not db.conn.in_transaction
        db.run_tool('pay', {'account_id': 'AC-1', 'amount_cents': 250})
        assert not db.session.in_transaction() and not db.conn.in_transaction  # committed, not left open
        db.session.rollback()
        assert db.run_tool('balance', {'account_id': 'AC-1'}) == {'balance_cents': 9_750}
