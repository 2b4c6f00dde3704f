"""`tbt mcp-serve` reached by an MCP client we did not write: the official MCP Inspector's CLI mode (npm), with the
client's default timeouts, listing tools and calling them over stdio and streamable HTTP.

The Inspector is installed once into ~/.cache/thinkingbox_training/ (npm, ~110 MB). Without npm the test skips, except
under CI=true, where a skip would hide a missing install step: there it fails."""

import fcntl, json, os, shutil, socket, subprocess, sys, time
from pathlib import Path
import pytest
from conftest import skip_unless_ci
from venvs import CACHE

ROOT = Path(__file__).parent.parent
INSPECTOR = '@modelcontextprotocol/inspector@2.12.0'
TBT = [sys.executable, '-c', 'import sys; from thinkingbox_training.cli import main; sys.exit(main())']


def inspector_cli() -> Path:
    "The Inspector's launcher, installed with npm on first use."
    home = CACHE / ('mcp-inspector-' + INSPECTOR.rsplit('@', 1)[1])
    exe = home / 'node_modules' / '.bin' / 'mcp-inspector'
    if exe.exists():
        return exe
    if shutil.which('npm') is None:
        raise RuntimeError('npm is not installed')
    home.mkdir(parents=True, exist_ok=True)
    with open(home / '.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if exe.exists():
            return exe
        r = subprocess.run(
            ['npm', 'install', '--prefix', str(home), '--no-audit', '--no-fund', INSPECTOR],
            capture_output=True,
            text=True,
        )
        if r.returncode or not exe.exists():
            raise RuntimeError(f'npm install {INSPECTOR} failed: {r.stderr[-2000:]}')
    return exe


@pytest.fixture(scope='module')
def cli():
    try:
        return inspector_cli()
    except Exception as e:
        skip_unless_ci(f'the MCP Inspector could not be installed: {e}')


def inspect(cli, *args) -> tuple:
    "(exit code, the JSON result, seconds): one Inspector CLI call with its defaults (15 s to connect)."
    t0 = time.perf_counter()
    r = subprocess.run([cli, '--cli', '--format', 'json', *args], capture_output=True, text=True, timeout=300)
    out = r.stdout.strip() or r.stderr.strip()
    try:
        res = json.loads(out.splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError(f'the Inspector printed no JSON: {r.stdout}{r.stderr}') from None
    # a connect timeout names the time the server had (benchmarks/mcp_clients.py measures `tbt mcp-serve`'s start)
    assert 'result' in res, f'{res} after {time.perf_counter() - t0:.1f}s (load average {os.getloadavg()[0]:.1f})'
    return r.returncode, res, time.perf_counter() - t0


PAY = [
    '--method',
    'tools/call',
    '--tool-name',
    'pay',
    '--tool-args-json',
    '{"account_id": "AC-1", "amount_cents": 250}',
]
REFUSED = [
    '--method',
    'tools/call',
    '--tool-name',
    'pay',
    '--tool-args-json',
    '{"account_id": "AC-404", "amount_cents": 1}',
]


def check(listed, paid, refused):
    tools = {t['name']: t for t in listed[1]['result']['tools']}
    assert listed[0] == 0 and sorted(tools) == ['get_account', 'pay']
    assert tools['pay']['inputSchema']['required'] == ['account_id', 'amount_cents']
    assert paid[0] == 0
    assert paid[1]['result'] == {'content': [{'type': 'text', 'text': '{"balance_cents": 9750}'}], 'isError': False}
    if refused is None:
        return
    # a refused call is a tool error the client reads (the Inspector exits 5 on a result with isError)
    assert refused[1]['result']['isError']
    assert "account 'AC-404' not found" in refused[1]['result']['content'][0]['text']


def test_inspector_over_stdio(cli):
    "The Inspector starts `tbt mcp-serve` itself: its 15 s connect timeout includes the server's start."
    server = ['-e', f'PYTHONPATH={ROOT}', '--', *TBT, 'mcp-serve', '--domain', 'demo']
    listed, paid = [inspect(cli, *m, *server) for m in (['--method', 'tools/list'], PAY)]  # each starts a server
    check(listed, paid, None)


def test_inspector_over_streamable_http(cli):
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    p = subprocess.Popen(
        TBT + ['mcp-serve', '--domain', 'demo', '--transport', 'http', '--port', str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    try:
        # the Inspector does not wait for a server that is not listening yet (connection refused: it fails at once)
        for _ in range(1200):
            if p.poll() is not None:
                raise AssertionError(p.stderr.read().decode())
            with socket.socket() as s:
                if s.connect_ex(('127.0.0.1', port)) == 0:
                    break
            time.sleep(0.1)
        url = f'http://127.0.0.1:{port}/mcp'
        # each Inspector call is a session of its own: the pay comes first, whether sessions share a database or not
        check(*[inspect(cli, *m, url) for m in (['--method', 'tools/list'], PAY, REFUSED)])
    finally:
        p.terminate()
        p.wait(30)
