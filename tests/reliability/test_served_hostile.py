"""`tbt mcp-serve --transport http` (the server `http_server` builds) meets the shared hostile calls as raw JSON-RPC
posts (the SDK's client cannot write arguments nested past 255 levels): each is the caller's failed call, or, past
what a JSON reader takes, a 4xx naming the nesting; nothing is committed and the server still serves. And the
checks every server of ours makes (`RequestGuard`): Host, Origin, JSON bodies, body size."""

import contextlib, json, re, socket, threading, time
import pytest
from hostile_calls import CASES, GOOD, WIRE, check_failed, notes, to_json
from test_served_backend import free_port
from thinkingbox_training.serve import MCP_MAX_BODY, http_server, serving_session


@pytest.fixture(scope='module')
def server():
    ts, port = serving_session('hostile'), free_port()
    srv = http_server(ts, port=port)
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    for _ in range(500):
        if srv.started:
            break
        time.sleep(0.02)
    yield ts, port
    srv.should_exit = True
    th.join(30)


def raw_post(port, headers: str, body: bytes = b'', host: str = None) -> tuple:
    "(status, body) of one raw POST to /mcp, read until the server closes (no half-close: uvicorn reads it as gone)."
    with socket.create_connection(('127.0.0.1', port), timeout=30) as s:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):  # a server may answer before the body ends
            s.sendall(
                (
                    f'POST /mcp HTTP/1.1\r\nHost: {host or f"127.0.0.1:{port}"}\r\nContent-Type: application/json\r\n'
                    'Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n'
                    f'Connection: close\r\n{headers}\r\n'
                ).encode()
                + body
            )
        out = b''
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):
                out += chunk
    head, _, rest = out.partition(b'\r\n\r\n')
    return int(head.split()[1]), rest.decode('utf-8', 'replace')


META = {'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {}}


def call(port, tool, arguments, headers='') -> tuple:
    "(HTTP status, the JSON-RPC answer or the body text) of one tools/call."
    body = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"_meta": %s, "name": %s, "arguments": %s}}'
    body = (body % (json.dumps(META), json.dumps(tool), to_json(arguments))).encode()
    routing = f'Mcp-Method: tools/call\r\nMcp-Name: {tool}\r\n'
    status, text = raw_post(port, f'Content-Length: {len(body)}\r\n{routing}{headers}', body)
    m = re.search(r'^data: (.*)$', text, re.M)  # an event stream, or plain JSON
    try:
        return status, json.loads(m.group(1) if m else text)
    except ValueError:
        return status, text


@pytest.mark.parametrize('case', WIRE)
def test_a_hostile_call_to_the_served_domain_is_the_callers_failed_call(server, case):
    ts, port = server
    c = CASES[case]
    status, r = call(port, c.tool, c.arguments)
    if status == 200:
        res = r['result']
        check_failed(c, '\n'.join(x['text'] for x in res['content']), res.get('isError'))
    else:  # past what the server's JSON reader takes: refused, naming why
        assert case == 'nested_3000' and 400 <= status < 500 and 'deep' in json.dumps(r).lower(), (status, r)
    assert notes(ts.db.db) == []
    assert call(port, 'store', {'data': {}})[1]['result'].get('isError') is not True  # and it still serves


def test_a_good_call_after_them_is_applied(server):
    ts, port = server
    status, r = call(port, *GOOD)
    assert status == 200 and not r['result'].get('isError') and notes(ts.db.db) == ['hello']


GUARDED = {  # headers -> (status, what the one-line answer names)
    'foreign_host': ('', 421, 'evil.example'),
    'foreign_origin': ('Origin: http://evil.example\r\n', 403, 'evil.example'),
    'null_origin': ('Origin: null\r\n', 403, 'null'),
    'origin_other_port': ('Origin: http://127.0.0.1:1\r\n', 403, '127.0.0.1:1'),
}


@pytest.mark.parametrize('case', list(GUARDED))
def test_foreign_hosts_and_origins_are_refused(server, case):
    _, port = server
    headers, code, says = GUARDED[case]
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'
    host = 'evil.example' if case == 'foreign_host' else None  # DNS rebinding: a name that resolved to us
    status, text = raw_post(port, f'Content-Length: {len(body)}\r\n{headers}', body, host)
    assert status == code and says in text, (status, text)


def test_a_form_or_text_post_is_refused_and_a_declared_big_body_is_refused_unread(server):
    _, port = server
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}'
    status, text = raw_post(port, f'Content-Length: {len(body)}\r\nContent-Type: text/plain\r\n', body)
    assert status == 415 and 'text/plain' in text, (status, text)
    t0 = time.monotonic()
    status, text = raw_post(port, f'Content-Length: {16 * MCP_MAX_BODY}\r\n')  # not a byte of it sent
    assert status == 413 and 'too large' in text and time.monotonic() - t0 < 5, (status, text)
