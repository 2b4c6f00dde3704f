"""`tbt openenv-serve` holds what `tbt mcp-serve` holds: Host and Origin checked (DNS rebinding, cross-site requests
and WebSockets), JSON bodies only, bodies over 4 MiB refused before they are read, idle sessions released, resets
to unknown or empty task ids refused naming them and changing nothing, and the shared hostile calls each the
agent's failed call. The server runs in the separate OpenEnv environment (tests/test_ecosystem_openenv.py builds
it); the checks are made with OpenEnv's own client (openenv_hostile.py) and with raw HTTP."""

import base64, contextlib, json, os, socket, subprocess, sys, time
from pathlib import Path
import pytest
from hostile_calls import CASES, RESERVED, TASK, WIRE, check_failed

sys.path.insert(0, str(Path(__file__).parent.parent))
from conftest import skip_unless_ci  # noqa: E402
from test_ecosystem_openenv import free_port, openenv_python  # noqa: E402

ROOT = Path(__file__).parent.parent.parent
HERE = Path(__file__).parent
ENV = dict(os.environ, PYTHONPATH=f'{ROOT}{os.pathsep}{HERE}')
SERVE = (
    'import sys, hostile_calls; from thinkingbox_training.ecosystem import openenv_serve; '
    'sys.exit(openenv_serve(sys.argv[1], port=int(sys.argv[2]), max_sessions=2, idle_timeout=2.0))'
)


@pytest.fixture(scope='module')
def py():
    try:
        return openenv_python()
    except Exception as e:
        skip_unless_ci(f'the OpenEnv environment could not be built: {e}')


@pytest.fixture(scope='module')
def server(py, tmp_path_factory):
    """The server's port (the hostile domain's task, 2 sessions, 2 s idle limit) and OpenEnv's client playing against it
    (started beside it: each spends seconds importing OpenEnv)."""
    tasks = tmp_path_factory.mktemp('openenv') / 'hostile.jsonl'
    task = TASK.model_copy(update={'limits': TASK.limits.model_copy(update={'max_turns': 200})})
    tasks.write_text(task.model_dump_json() + '\n')
    port = free_port()
    p = subprocess.Popen([py, '-c', SERVE, str(tasks), str(port)], env=ENV, cwd=ROOT, stderr=subprocess.PIPE)
    play = [py, HERE / 'openenv_hostile.py', str(port)]
    c = subprocess.Popen(play, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(6000):  # the server imports OpenEnv first (seconds)
            if p.poll() is not None:
                raise AssertionError(f'the server stopped: {p.stderr.read().decode()[-3000:]}')
            with socket.socket() as s:
                if s.connect_ex(('127.0.0.1', port)) == 0:
                    break
            time.sleep(0.05)
        yield port, c
    finally:
        c.kill()
        c.wait(30)
        p.terminate()
        p.wait(30)


@pytest.fixture(scope='module')
def client(py, server):
    "What OpenEnv's client met: one run of openenv_hostile.py."
    out, err = server[1].communicate(timeout=300)
    assert server[1].returncode == 0, err[-3000:]
    return json.loads(out)


def raw(port, method, path, headers: dict = None, body: bytes = b'', chunks=None, timeout=10) -> tuple:
    "(status, body text) of one raw HTTP request; `chunks`: a body streamed with no Content-Length."
    h = {'Host': f'127.0.0.1:{port}', 'Content-Type': 'application/json', 'Connection': 'close'} | (headers or {})
    if chunks is None:
        h.setdefault('Content-Length', str(len(body)))
    else:
        h['Transfer-Encoding'] = 'chunked'
    head = f'{method} {path} HTTP/1.1\r\n' + ''.join(f'{k}: {v}\r\n' for k, v in h.items() if v is not None)
    with socket.create_connection(('127.0.0.1', port), timeout=timeout) as s:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):  # the server may answer before the body
            s.sendall(head.encode() + b'\r\n' + body)
            for c in chunks or ():
                s.sendall(b'%x\r\n%s\r\n' % (len(c), c))
            if chunks is not None:
                s.sendall(b'0\r\n\r\n')
        out = b''
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):
                out += chunk
    head, _, rest = out.partition(b'\r\n\r\n')
    return int(head.split()[1]), rest.decode('utf-8', 'replace')


RESET = json.dumps({'task_uid': TASK.uid}).encode()
MIB = b'x' * 2**20


def test_host_origin_and_content_type_are_checked(server):
    port, _ = server
    assert raw(port, 'POST', '/reset', body=RESET)[0] == 200
    status, text = raw(port, 'POST', '/reset', {'Host': f'evil.example:{port}'}, RESET)  # DNS rebinding
    assert status == 421 and 'evil.example' in text, (status, text)
    status, text = raw(port, 'POST', '/reset', {'Origin': 'http://evil.example'}, RESET)
    assert status == 403 and 'evil.example' in text, (status, text)
    create = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'openenv/session/create', 'params': {}}).encode()
    status, text = raw(port, 'POST', '/mcp', {'Content-Type': 'text/plain'}, create)  # a cross-site simple request
    assert status == 415 and 'text/plain' in text, (status, text)
    # a WebSocket from another site: refused at the handshake
    key = base64.b64encode(os.urandom(16)).decode()
    ws = {'Upgrade': 'websocket', 'Connection': 'Upgrade', 'Sec-WebSocket-Key': key, 'Sec-WebSocket-Version': '13'}
    status, _ = raw(port, 'GET', '/ws', ws | {'Origin': 'http://evil.example', 'Content-Type': None})
    assert status == 403, status


@pytest.mark.parametrize('path', ['/reset', '/step', '/mcp'])
def test_bodies_over_the_limit_are_refused_before_they_are_read(server, path):
    port, _ = server
    t0 = time.monotonic()
    status, text = raw(port, 'POST', path, {'Content-Length': str(64 * 2**20)})  # declared; not a byte sent
    assert status == 413 and 'too large' in text and time.monotonic() - t0 < 5, (status, text)
    status, text = raw(port, 'POST', path, chunks=[MIB] * 5)  # streamed, no length: refused past 4 MiB
    assert status == 413 and 'too large' in text, (status, text)


def test_reset_to_an_unknown_or_empty_task_is_a_4xx_naming_it(server):
    port, _ = server
    status, text = raw(port, 'POST', '/reset', body=json.dumps({'task_uid': 'hostile/nope'}).encode())
    assert status == 404 and 'hostile/nope' in text, (status, text)
    status, text = raw(port, 'POST', '/reset', body=json.dumps({'task_uid': ''}).encode())
    assert status == 422 and "task_uid must name a task, got ''" in text, (status, text)


@pytest.mark.parametrize('case', WIRE)
def test_a_hostile_call_over_openenv_is_the_agents_failed_call(client, case):
    got = client
    r = got['calls'][case]
    if case == 'nested_3000':  # past what Python's json reads: refused before the server parses it, in its protocol
        assert r['raw']['type'] == 'error' and 'nested deeper than 500 levels' in r['raw']['data']['message'], r
        return
    check_failed(CASES[case], r['text'], r['is_error'])
    assert r['done'] is False, r


def test_after_hostile_calls_and_failed_resets_the_episode_goes_on(client):
    got = client
    assert not set(RESERVED) & set(got['listed']) and 'add_note' in got['listed']
    assert got['good'] == {'text': '{"ok": true}', 'is_error': False, 'done': False}
    assert [('hostile/nope' in m, "''" in m) for m in got['failed_resets']] == [(True, False), (False, True)]
    assert got['after_failed_reset']['is_error'] is False, got['after_failed_reset']
    # the same episode, to its verdict: nothing the hostile calls wrote, two notes where one was expected
    assert got['end']['done'] is True and got['end']['reward'] == 0.0, got['end']


def test_idle_and_cross_site_sessions_do_not_lock_others_out(client):
    got = client
    s = got['sessions']
    assert 'InvalidStatus' in s['cross_site'] and '403' in s['cross_site'], s
    assert 'capacity' in s['third_while_full'].lower(), s  # two sessions, both taken
    assert s['idle_after'] == 'ConnectionClosedOK' or 'Closed' in s['idle_after'], s
    assert s['third_after'] == TASK.uid, s


@pytest.mark.slow
def test_idle_sessions_opened_over_http_are_released(server, client):
    "Sessions opened with `openenv/session/create` and left idle fill the server, then OpenEnv's reaper frees them."
    port, _ = server
    create = json.dumps({'jsonrpc': '2.0', 'id': 1, 'method': 'openenv/session/create', 'params': {}}).encode()
    got = [json.loads(raw(port, 'POST', '/mcp', body=create)[1]) for _ in range(3)]
    assert ['session_id' in (g.get('result') or {}) for g in got] == [True, True, False], got
    assert 'capacity' in json.dumps(got[2]).lower(), got[2]
    time.sleep(8)  # the reaper looks every 5 s for sessions idle past the 2 s limit
    again = json.loads(raw(port, 'POST', '/mcp', body=create)[1])
    assert 'session_id' in again['result'], again
