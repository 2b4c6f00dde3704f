"`tbt mcp-serve`: a standalone MCP server of one of our domains, reached with the SDK's client over stdio and HTTP."
import asyncio, socket, subprocess, sys, time
import mcp
from mcp.client.stdio import StdioServerParameters

TBT = [sys.executable, '-c', 'import sys; from thinkingbox_training.cli import main; sys.exit(main())']

async def use(client):
    async with client as c:
        names = [t.name for t in (await c.list_tools()).tools]
        paid = await c.call_tool('pay', {'account_id': 'AC-1', 'amount_cents': 250})
        refused = await c.call_tool('pay', {'account_id': 'AC-404', 'amount_cents': 1})
        after = (await c.call_tool('get_account', {'account_id': 'AC-1'})).content[0].text
    return names, paid, refused, after

def check(names, paid, refused, after):
    assert names == ['get_account', 'pay']
    assert not paid.is_error and refused.is_error and 'AC-404' in refused.content[0].text
    assert '9750' in after  # the seed's 10,000 cents less the payment: the server keeps one database

def test_stdio():
    params = StdioServerParameters(command=TBT[0], args=TBT[1:] + ['mcp-serve', '--domain', 'demo'])
    check(*asyncio.run(use(mcp.Client(params))))

def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def test_streamable_http_on_localhost():
    port = free_port()
    p = subprocess.Popen(TBT + ['mcp-serve', '--domain', 'demo', '--transport', 'http', '--port', str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(600):  # the server imports the package first: allow for a busy machine
            if p.poll() is not None: raise AssertionError(p.stderr.read().decode())
            with socket.socket() as s:
                if s.connect_ex(('127.0.0.1', port)) == 0: break
            time.sleep(0.1)
        check(*asyncio.run(use(mcp.Client(f'http://127.0.0.1:{port}/mcp'))))
    finally:
        p.terminate(); p.wait(timeout=30)
