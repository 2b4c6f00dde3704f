"""`tbt mcp-serve --transport http` under many clients at once, and its answers to malformed HTTP requests.

The server keeps one database for its life, shared by every client, and runs their tool calls one at a time. Ten
clients calling at once, in each of our domains, leave a state equal to the successful calls replayed one by one on a
fresh database; a refused call commits nothing; every failed call is the domain's own refusal, never a server fault
worded as the client's bad arguments (`... failed on these arguments (InvalidRequestError: ...)`)."""

import asyncio, contextlib, re, socket, threading, time
import mcp, pytest
from thinkingbox_training.backend import diff_states, episode_state
from thinkingbox_training.domains.retail import retail_seed
from thinkingbox_training.serve import MCP_MAX_BODY, http_server, serving_session
from thinkingbox_training.tasks import get_domain


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def served(domain):
    "The server `tbt mcp-serve --transport http` runs (`http_server`), in this process so that its state can be read."
    ts, port = serving_session(domain), free_port()
    srv = http_server(ts, port=port)
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    for _ in range(500):
        if srv.started:
            break
        time.sleep(0.02)
    try:
        yield ts, f'http://127.0.0.1:{port}/mcp', port
    finally:
        srv.should_exit = True
        th.join(30)


async def client(url, calls):
    "One MCP client making `calls` in turn: [(name, arguments, is_error, text)]."
    out = []
    async with mcp.Client(url) as c:
        for name, args in calls:
            r = await c.call_tool(name, args)
            out.append((name, args, r.is_error, '\n'.join(x.text for x in r.content)))
    return out


def crowd(url, workloads):
    "Every workload on its own client, all at once; the calls' results in the order they were answered."

    async def go():
        return await asyncio.gather(*[client(url, w) for w in workloads])

    return [r for rs in asyncio.run(go()) for r in rs]


# each domain: ten clients' calls, the refusals they may meet, and how many calls must succeed
RETAIL = retail_seed()
EMAIL = {c['id']: c['email'] for c in RETAIL['customer']}
ORDERS = [
    o
    for o in RETAIL['order']
    if o['status'] == 'placed' and o['id'] not in {c['order_id'] for c in RETAIL['compensation']}
][:4]
WORKLOADS = {
    # 6 clients pay 1 cent from AC-1, 4 pay a million cents from AC-2 (it holds 500), 25 times each
    'demo': (
        [[('pay', {'account_id': 'AC-1', 'amount_cents': 1})] * 25] * 6
        + [[('pay', {'account_id': 'AC-2', 'amount_cents': 1_000_000})] * 25] * 4,
        [r'insufficient funds on AC-2'],
        150,
    ),
    # ten clients refund the same five payments and open the same two tickets: one of each may succeed
    'travel': (
        [
            [('refund_payment', {'payment_id': f'PM-5000{i}', 'reason': 'charged twice'}) for i in range(1, 6)]
            + [
                (
                    'open_ticket',
                    {
                        'booking_id': f'BK-1000{i}',
                        'category': 'billing',
                        'summary': 'the traveller reports a double charge',
                    },
                )
                for i in (1, 2)
            ]
        ]
        * 10,
        [r'payment PM-5000\d is already fully refunded', r'ticket \d+ \(billing\) is already open for booking'],
        7,
    ),
    # ten clients credit the same four orders (once per order) and open a ticket on each
    'retail': (
        [
            [
                ('issue_goodwill_credit', {'order_id': o['id'], 'email': EMAIL[o['customer_id']], 'percent': 10})
                for o in ORDERS
            ]
            + [
                (
                    'open_ticket',
                    {
                        'order_id': o['id'],
                        'email': EMAIL[o['customer_id']],
                        'category': 'general',
                        'summary': 'late delivery',
                    },
                )
                for o in ORDERS
            ]
        ]
        * 10,
        [r'order OR-\d+ already received goodwill credit', r'order OR-\d+ already has an open general ticket'],
        8,
    ),
}


@pytest.mark.parametrize('domain', list(WORKLOADS))
def test_ten_clients_at_once_leave_exactly_the_successful_calls(domain):
    workloads, refusals, n_ok = WORKLOADS[domain]
    assert len(workloads) == 10 and (domain != 'retail' or len(ORDERS) == 4)
    with served(domain) as (ts, url, _):
        results = crowd(url, workloads)
        served_state = episode_state(ts.db.db)
    ok = [(n, a) for n, a, err, _ in results if not err]
    wrong = [t for _, _, err, t in results if err and not any(re.search(p, t) for p in refusals)]
    assert not wrong, f"{len(wrong)} calls failed with other than the domain's refusals, e.g. {wrong[:3]}"
    assert len(ok) == n_ok, (len(ok), n_ok)
    with get_domain(domain).provision() as fresh:  # the successful calls, one by one, on a fresh database
        for name, args in ok:
            fresh.run_tool(name, args)
        diff = diff_states(episode_state(fresh), served_state)
    assert diff.equal, diff.reasons[:5]


# malformed HTTP requests: each answered with a 4xx whose body says what is wrong, at once
def raw_post(port, headers: str, body: bytes = b'', timeout=10) -> tuple[int, str]:
    "(status, body) of one raw HTTP request to /mcp; the body read to the end (the server closes or sends its length)."
    with socket.create_connection(('127.0.0.1', port), timeout=timeout) as s:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):  # a server may answer before the body ends
            s.sendall(
                (
                    f'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n'
                    'Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n'
                    f'Connection: close\r\n{headers}\r\n'
                ).encode()
                + body
            )
            s.shutdown(socket.SHUT_WR)
        out = b''
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):
                out += chunk
    head, _, rest = out.partition(b'\r\n\r\n')
    return int(head.split()[1]), rest.decode('utf-8', 'replace')


BIG = b'{"x": "' + b'a' * (MCP_MAX_BODY + 10) + b'"}'
MALFORMED = {
    'content_length_negative': ('Content-Length: -1\r\n', b'{}', 400, 'Content-Length'),
    'content_length_not_a_number': ('Content-Length: abc\r\n', b'{}', 400, 'Content-Length'),
    'content_length_twice': ('Content-Length: 2\r\nContent-Length: 3\r\n', b'{}', 400, 'Content-Length'),
    'body_over_the_bound': (f'Content-Length: {len(BIG)}\r\n', BIG, 413, 'too large'),
    'chunked_body_over_the_bound': (
        'Transfer-Encoding: chunked\r\n',
        b''.join(b'%x\r\n%s\r\n' % (len(BIG[i : i + 2**20]), BIG[i : i + 2**20]) for i in range(0, len(BIG), 2**20))
        + b'0\r\n\r\n',
        413,
        'too large',
    ),
    'bad_json': ('Content-Length: 5\r\n', b'{oops', 400, 'Parse error'),
    'not_an_object': ('Content-Length: 5\r\n', b'[1,2]', 400, 'single JSON-RPC request'),
    'params_null': ('', b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":null}', 400, 'params._meta'),
}


def test_malformed_requests_get_a_4xx_naming_what_is_wrong():
    with served('demo') as (ts, url, port):
        got = {}
        for case, (headers, body, *_) in MALFORMED.items():
            headers = headers or f'Content-Length: {len(body)}\r\n'
            t0 = time.monotonic()
            got[case] = (*raw_post(port, headers, body), time.monotonic() - t0)
        still = crowd(url, [[('get_account', {'account_id': 'AC-1'})]])  # and the server still serves
    for case, (_, _, code, says) in MALFORMED.items():
        status, text, took = got[case]
        assert status == code and says in text and took < 5, (case, status, text[:200], took)
    assert still[0][2] is False
