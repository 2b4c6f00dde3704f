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


async def crowd(url):
    "Ten clients at once (as in tests/reliability): 6 pay 1 cent from AC-1, 4 a million cents from AC-2, 25 times each."

    async def one(account, cents):
        async with mcp.Client(url) as c:
            return [(await c.call_tool('pay', {'account_id': account, 'amount_cents': cents})) for _ in range(25)]

    runs = await asyncio.gather(*[one('AC-1', 1) for _ in range(6)], *[one('AC-2', 1_000_000) for _ in range(4)])
    async with mcp.Client(url) as c:
        after = [(await c.call_tool('get_account', {'account_id': a})).content[0].text for a in ('AC-1', 'AC-2')]
    return [r for rs in runs for r in rs], after


def check(names, paid, refused, after):
    assert names == ['get_account', 'pay']
    assert not paid.is_error and refused.is_error and 'AC-404' in refused.content[0].text
    assert '9750' in after  # the seed's 10,000 cents less the payment: the server keeps one database


def test_stdio():
    params = StdioServerParameters(command=TBT[0], args=TBT[1:] + ['mcp-serve', '--domain', 'demo'])
    check(*asyncio.run(use(mcp.Client(params))))


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_streamable_http_on_localhost():
    port = free_port()
    p = subprocess.Popen(
        TBT + ['mcp-serve', '--domain', 'demo', '--transport', 'http', '--port', str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(600):  # the server imports the package first: allow for a busy machine
            if p.poll() is not None:
                raise AssertionError(p.stderr.read().decode())
            with socket.socket() as s:
                if s.connect_ex(('127.0.0.1', port)) == 0:
                    break
            time.sleep(0.1)
        check(*asyncio.run(use(mcp.Client(f'http://127.0.0.1:{port}/mcp'))))
        results, after = asyncio.run(crowd(f'http://127.0.0.1:{port}/mcp'))
    finally:
        p.terminate()
        p.wait(timeout=30)
    # one database for every client, one call at a time: AC-1 paid exactly its 150 calls, the refused ones left nothing
    refusals = {r.content[0].text for r in results if r.is_error}
    assert refusals == {'Error executing tool pay: insufficient funds on AC-2'}
    assert sum(not r.is_error for r in results) == 150
    assert after == ['{"id": "AC-1", "balance_cents": 9600}', '{"id": "AC-2", "balance_cents": 500}']
