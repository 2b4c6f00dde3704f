"""Per-episode environment cost on ThinkingBox-Bench tasks: setup, tool calls and grading through our harness.

    THINKINGBOX_DATA=/path/to/thinkingbox-data python benchmarks/thinkingbox_env.py [--tasks 40] [--release NAME]

For a seeded sample of the release's tasks (spread over its five scenarios): build the episode's backend (fresh
SandboxToolsSystems from their server package, patched with the task's rows), open our MCP session and list its
tools, make the golden calls through MCP, grade the final state (their stable-state hash, the expected state
cached per task as in a campaign). Medians over tasks of wall time per stage and of the process's CPU time per
episode (robust on a shared machine); the expected state's first computation (a golden replay) is reported apart.
For scale, their harness's session proxy (one stdio server process per session), measured once:
session create 2.4 s median, destroy 0.95 s, a tool call 25-90 ms, grading 0.10 s.

    python benchmarks/thinkingbox_env.py --their-texts PYTHON

prints, as JSON, what their development servers answer to a few refused calls when run as their harness runs them:
each a stdio process of PYTHON (an environment with their servers' own dependencies, e.g. `pip install
fastmcp==3.4.11 typesense`, which brings mcp 1.x), called with mcp's client there. tests/test_thinkingbox_servers.py
compares our texts with these.
"""

import argparse, asyncio, os, random, statistics, time

os.environ.setdefault('OMP_NUM_THREADS', '1')
from thinkingbox_training.thinkingbox import load_thinkingbox
from thinkingbox_training.tasks import get_domain
from thinkingbox_training.tools import ToolSession
from thinkingbox_training.grader import Grader, JudgeAnswer, expected_state


class TimingJudge:
    "Answers every rubric item yes, without a model: this benchmark times the environment; no verdict is reported."

    name = 'timing-stub'

    async def ask(self, item, final_message, transcript=None):
        return JudgeAnswer(yes=True)


async def one(task, grader):
    dom = get_domain(task.domain)
    t = time.perf_counter()
    expected_state(task)
    first_expected = time.perf_counter() - t
    c0, t0 = time.process_time(), time.perf_counter()
    db = dom.provision(task)
    t1 = time.perf_counter()
    async with ToolSession(db) as ts:
        await ts.tool_specs()
        t2 = time.perf_counter()
        for c in task.golden:
            await ts.call(c.name, c.arguments)
        t3 = time.perf_counter()
    t4 = time.perf_counter()
    v = await grader.grade(task, db, 'Done.')
    t5, c1 = time.perf_counter(), time.process_time()
    assert v.reward == 1, (task.uid, v.explain())
    return {
        'provision': t1 - t0,
        'mcp_session': (t2 - t1) + (t4 - t3),
        'grade': t5 - t4,
        'total': t5 - t0,
        'per_call': (t3 - t2) / max(1, len(task.golden)),
        'cpu': c1 - c0,
        'calls': len(task.golden),
        'golden_replay': first_expected,
    }


# run by PYTHON (their servers' environment): one stdio server process per module, the calls, their texts as JSON
_THEIR_TEXTS = r"""
import asyncio, json, os, sys
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
D = os.environ['THINKINGBOX_DATA']
env = dict(os.environ, PYTHONPATH=f'{D}/servers/thinkingbox_tools:{D}/servers/tb_business_ops_servers_202606')
CASES = json.loads(sys.argv[1])
async def one(module, init, calls):
    p = StdioServerParameters(command=sys.executable, args=['-m', module], env=env)
    async with stdio_client(p) as (r, w), ClientSession(r, w) as s:
        await s.initialize()
        await s.call_tool('__reserved__init', {'config': init})
        out = []
        for name, args in calls:
            x = await s.call_tool(name, args)
            out.append({'tool': name, 'arguments': args, 'is_error': x.isError,
                        'text': '\n'.join(c.text for c in x.content)})
        return out
async def main(): return {m: await one(m, *c) for m, c in CASES.items()}
print(json.dumps(asyncio.run(main()), indent=1))
"""

THEIR_CASES = {  # module -> (init config, calls): refusals by the tool and by the framework, and one success
    'thinkingbox_tools.mcp_online_banking': (
        {'accounts': [{'account_type': 'checking', 'account_number': '1', 'balance': 10.0}], 'payees': []},
        [
            ('get_balance', {'account_number': 'nope'}),
            ('get_balance', {}),
            ('transfer', {'from_account': '1', 'to_account': '2', 'amount': 'lots'}),
            ('get_accounts', {}),
        ],
    ),
    'thinkingbox_tools.mcp_email_system': (
        {'users': {'a@x.com': {'profile': {'email': 'a@x.com'}}}},
        [
            ('get_contact', {'contact_id': 'nope'}),
            ('list_emails', {'folder': 7}),
            ('send_email', {'to': 'b@x.com'}),
            ('list_contacts', {}),
        ],
    ),
}


def their_texts(python: str):
    "What their development servers answer, run as their harness runs them by `python` (see the docstring)."
    import json, subprocess
    from thinkingbox_training.thinkingbox import data_dir

    env = dict(os.environ, THINKINGBOX_DATA=str(data_dir()))
    r = subprocess.run(
        [python, '-c', _THEIR_TEXTS, json.dumps(THEIR_CASES)], env=env, capture_output=True, text=True, timeout=300
    )
    if r.returncode:
        raise SystemExit(r.stderr[-2000:])
    print(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--tasks', type=int, default=40)
    ap.add_argument('--release', default='thinkingbox_bench_v1')
    ap.add_argument('--seed', type=int, default=0)
    ap.add_argument('--their-texts', metavar='PYTHON', help="print their servers' answers to refused calls")
    a = ap.parse_args()
    if a.their_texts:
        return their_texts(a.their_texts)
    t = time.perf_counter()
    tasks = load_thinkingbox(a.release)
    load_s = time.perf_counter() - t
    sample = random.Random(a.seed).sample(tasks, min(a.tasks, len(tasks)))
    grader = Grader(judge=TimingJudge())  # the rule judge reads no ThinkingBox rubric item

    async def run():
        return [await one(t, grader) for t in sample]

    rows = asyncio.run(run())
    med = lambda k: statistics.median(r[k] for r in rows) * 1000
    print(
        f'{len(tasks)} tasks loaded in {load_s:.1f} s; {len(rows)} golden episodes, '
        f'{statistics.median(r["calls"] for r in rows):.0f} calls median'
    )
    for k in ('provision', 'mcp_session', 'per_call', 'grade', 'golden_replay', 'total', 'cpu'):
        print(f'{k:>14}: {med(k):8.2f} ms median')
    print(f'thinkingbox_episode_cpu_ms_median={med("cpu"):.1f}')


if __name__ == '__main__':
    main()
