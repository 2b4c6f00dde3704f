"""`tbt mcp-serve` reached by the official MCP Inspector's CLI (npm), as a new user would: how long the server takes
to start, and whether the Inspector's default 15 s connect timeout holds over stdio, where it includes that start.

    python benchmarks/mcp_clients.py [--n 3] [--domain demo]

Per repetition:
1. `import`: seconds to import `thinkingbox_training.serve` alone, and `tbt --help` (every command module);
2. `stdio start`: spawn `tbt mcp-serve` over stdio and time until it answers MCP's initialize (the SDK's client);
3. the Inspector's `tools/list` over stdio with its defaults, and with `--connect-timeout 180000`;
4. `tbt mcp-serve --transport http`: seconds until the port listens, then the Inspector's `tools/list` with defaults.
The last line is `stdio_start_s=<median> inspector_default_stdio_ok=<k>/<n>`. The Inspector is installed once into
~/.cache/thinkingbox_training/ (tests/test_ecosystem_inspector.py does the same).
"""

import argparse, asyncio, json, os, socket, statistics, subprocess, sys, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / 'tests'))
from test_ecosystem_inspector import inspector_cli  # noqa: E402

TBT = [sys.executable, '-c', 'import sys; from thinkingbox_training.cli import main; sys.exit(main())']
ENV = dict(os.environ, PYTHONPATH=str(ROOT))


def seconds(cmd: list, **kw) -> tuple:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, **kw)
    return time.perf_counter() - t0, r


async def stdio_start(domain: str) -> float:
    "Seconds from spawning `tbt mcp-serve` to its answer to initialize."
    import mcp
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=TBT[0], args=TBT[1:] + ['mcp-serve', '--domain', domain], env=ENV)
    t0 = time.perf_counter()
    async with mcp.Client(params) as c:
        dt = time.perf_counter() - t0
        await c.list_tools()
    return dt


def inspector_list(cli, *target, timeout_ms=None) -> tuple:
    extra = ['--connect-timeout', str(timeout_ms)] if timeout_ms else []
    dt, r = seconds([str(cli), '--cli', '--format', 'json', *extra, '--method', 'tools/list', *target], timeout=600)
    try:
        ok = 'result' in json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        ok = False
    return dt, ok


def http_run(cli, domain: str) -> tuple:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    t0 = time.perf_counter()
    p = subprocess.Popen(
        TBT + ['mcp-serve', '--domain', domain, '--transport', 'http', '--port', str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    try:
        while True:
            with socket.socket() as s:
                if s.connect_ex(('127.0.0.1', port)) == 0:
                    break
            time.sleep(0.05)
        listen = time.perf_counter() - t0
        return listen, *inspector_list(cli, f'http://127.0.0.1:{port}/mcp')
    finally:
        p.terminate()
        p.wait(30)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--n', type=int, default=3)
    ap.add_argument('--domain', default='demo')
    a = ap.parse_args()
    cli = inspector_cli()
    stdio = ['-e', f'PYTHONPATH={ROOT}', '--', *TBT, 'mcp-serve', '--domain', a.domain]
    starts, oks = [], 0
    for i in range(a.n):
        imp, _ = seconds([sys.executable, '-c', 'import thinkingbox_training.serve'])
        helps, _ = seconds(TBT + ['--help'])
        start = asyncio.run(stdio_start(a.domain))
        starts.append(start)
        d_default, ok_default = inspector_list(cli, *stdio)
        d_long, ok_long = inspector_list(cli, *stdio, timeout_ms=180000)
        listen, d_http, ok_http = http_run(cli, a.domain)
        oks += ok_default
        load = os.getloadavg()[0]
        print(
            f'rep {i}: load {load:.1f}; import serve {imp:.2f}s, tbt --help {helps:.2f}s; stdio start {start:.2f}s; '
            f'inspector stdio default {d_default:.2f}s ok={ok_default}, 180 s timeout {d_long:.2f}s ok={ok_long}; '
            f'http listens after {listen:.2f}s, inspector {d_http:.2f}s ok={ok_http}',
            flush=True,
        )
    print(f'stdio_start_s={statistics.median(starts):.2f} inspector_default_stdio_ok={oks}/{a.n}')


if __name__ == '__main__':
    main()
