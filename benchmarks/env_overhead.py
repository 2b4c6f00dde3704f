"""Per-episode environment overhead with the expert policy, split into stages.

    python benchmarks/env_overhead.py [--domains travel,retail] [--tasks 60] [--calls 10]

For every task: provision a fresh database (template copy), open the episode's MCP session and list its tools,
make the expert's tool calls through MCP, grade the final state. Each task's golden calls are padded with
read-only lookups (the domain's first read tool on an id from the task) up to --calls calls, so every episode
makes the same number of calls. Medians over tasks, wall time per stage and the process's CPU time per episode (robust when the machine
is shared), then `env_overhead_ms_median=<value>`.
The floor, measured in the same run: each episode's SQL (every statement its tool calls issued, traced on its
SQLite connection with the values bound) replayed on a fresh template copy through raw sqlite3, then graded by
comparing every table with the final state the episode reached: `env_floor_ms_median=` and
`env_overhead_vs_floor=` (the ratio of the two medians) are the last lines.
For scale, measured on this machine while planning the project: the ThinkingBox harness ~5.7 s to create a session,
~2.3 s to destroy it, ~33 ms a tool call, ~0.15 s to grade; tau2-bench ~130 ms to reset, ~290 ms to grade.
"""
import argparse, asyncio, os, sqlite3, statistics, time
os.environ.setdefault('OMP_NUM_THREADS', '1')
from thinkingbox_training.tasks import generate_tasks, get_domain
from thinkingbox_training.tools import ToolSession
from thinkingbox_training.grader import Grader, RuleJudge, expected_state

def padded_calls(task, n):
    "The golden calls, then repeats of its read-only first call (or of the last call when there is none) up to n."
    calls = [(c.name, c.arguments) for c in task.golden]
    reads = [c for c in calls if c[0].startswith(('get_', 'find_', 'list_', 'search_', 'lookup_'))]
    filler = reads[0] if reads else None
    while filler and len(calls) < n: calls.insert(0, filler)
    return calls

async def one(task, grader, n):
    dom = get_domain(task.domain)
    c0 = time.process_time()
    t0 = time.perf_counter()
    db = dom.provision(task)
    t1 = time.perf_counter()
    sql = []
    async with ToolSession(db) as ts:
        await ts.tool_specs()
        t2 = time.perf_counter()
        calls = padded_calls(task, n)
        db.conn.set_trace_callback(sql.append)  # costs a little time, inside the measured episode (so against us)
        for name, args in calls: await ts.call(name, args)
        db.conn.set_trace_callback(None)
        t3 = time.perf_counter()
    t4 = time.perf_counter()
    v = await grader.grade(task, db, task.reply)
    t5 = time.perf_counter()
    c1 = time.process_time()
    assert v.reward == 1, (task.uid, v.explain())
    final = tables(db.conn, dom)
    db.close()
    return {'provision': t1 - t0, 'mcp_session': (t2 - t1) + (t4 - t3), 'tool_calls': t3 - t2, 'grade': t5 - t4,
            'total': t5 - t0, 'cpu': c1 - c0, 'calls': len(calls), 'sql': sql, 'final': final}

def tables(conn, dom) -> dict:
    "Every table's rows, in a fixed order."
    return {name: sorted(conn.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr) for name in dom.tables}

def floor(task, sql, final) -> tuple:
    "Wall and CPU seconds to replay an episode's SQL on raw sqlite3 (same template copy) and grade it by comparing the tables."
    dom = get_domain(task.domain)
    tpl = dom.template(task)
    c0, t0 = time.process_time(), time.perf_counter()
    conn = sqlite3.connect(':memory:', isolation_level=None)
    tpl.conn.backup(conn)
    conn.execute('PRAGMA foreign_keys=ON')
    for s in sql: conn.execute(s)
    same = tables(conn, dom) == final
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    conn.close()
    assert same, f'{task.uid}: the replayed SQL did not reach the episode\'s final state'
    return dt, dc

async def main(domains, n_tasks, n_calls):
    grader = Grader(judge=RuleJudge())
    tasks = []
    for d in domains:
        ts = generate_tasks(d, 'bench', seed=7, n=max(1, n_tasks // max(1, len(get_domain(d).families))))
        tasks += ts
    for t in tasks: expected_state(t); get_domain(t.domain).template(t)  # warm the per-task caches, as a campaign would
    rows = [await one(t, grader, n_calls) for t in tasks]
    for t, r in zip(tasks, rows): r['floor'], r['floor_cpu'] = floor(t, r['sql'], r['final'])
    med = lambda k: statistics.median(r[k] for r in rows) * 1e3
    calls = statistics.median(r['calls'] for r in rows)
    print(f'{len(rows)} episodes of {",".join(domains)}, median {calls:.0f} tool calls each (this machine, OMP_NUM_THREADS=1)')
    for k in ('provision', 'mcp_session', 'tool_calls', 'grade'):
        print(f'  {k:12} {med(k):8.2f} ms' + (f'   ({med(k) / calls:.2f} ms per call)' if k == 'tool_calls' else ''))
    print(f'  process CPU per episode {med("cpu"):.2f} ms (all threads; unlike wall time, not inflated by other processes)')
    print(f'  SQL statements per episode (median) {statistics.median(len(r["sql"]) for r in rows):.0f}')
    print(f'  floor: process CPU per episode {med("floor_cpu"):.3f} ms; CPU ratio {med("cpu") / med("floor_cpu"):.1f}x')
    print(f'env_overhead_ms_median={med("total"):.2f}')
    print(f'env_floor_ms_median={med("floor"):.3f}')
    print(f'env_overhead_vs_floor={med("total") / med("floor"):.1f}')

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--domains', default=None, help='comma-separated domains (default: travel,retail when present, else demo)')
    p.add_argument('--tasks', type=int, default=60)
    p.add_argument('--calls', type=int, default=10)
    a = p.parse_args()
    if a.domains: doms = a.domains.split(',')
    else:
        doms = []
        for d in ('travel', 'retail'):
            try: get_domain(d); doms.append(d)
            except KeyError: pass
        doms = doms or ['demo']
    asyncio.run(main(doms, a.tasks, a.calls))
