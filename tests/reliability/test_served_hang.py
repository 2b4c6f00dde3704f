"""`tbt mcp-serve` with a tool that hangs (it holds the server's one queue): a call whose client was told it timed out
is never applied, neither the hung one (rolled back when it ends) nor those queued behind it (never started), and
calls waiting behind it cost no thread."""

import asyncio, threading, time
import mcp
from hostile_calls import RELEASE, notes
from test_served_backend import free_port
from thinkingbox_training.serve import http_server, serving_session


def test_calls_past_their_deadline_are_never_applied_and_waiting_costs_no_thread():
    RELEASE.clear()
    ts, port = serving_session('hostile', timeout_s=0.6), free_port()
    srv = http_server(ts, port=port)
    th = threading.Thread(target=srv.run, daemon=True)
    th.start()
    url = f'http://127.0.0.1:{port}/mcp'
    try:
        for _ in range(500):
            if srv.started:
                break
            time.sleep(0.02)

        async def go():
            async with mcp.Client(url) as c:
                await c.call_tool('add_note', {'text': 'first'})  # the worker thread exists from here on
                before = threading.active_count()
                hung = asyncio.ensure_future(c.call_tool('hang', {'seconds': 30}))
                await asyncio.sleep(0.1)
                queued = [asyncio.ensure_future(c.call_tool('add_note', {'text': f'q{i}'})) for i in range(100)]
                peak = before
                while not all(q.done() for q in queued):
                    peak = max(peak, threading.active_count())
                    await asyncio.sleep(0.05)
                told = [(await hung)] + [q.result() for q in queued]
                RELEASE.set()  # the hang ends: its write must not be committed
                await asyncio.sleep(0.3)
                after = await c.call_tool('add_note', {'text': 'after'})
                return before, peak, told, after

        before, peak, told, after = asyncio.run(go())
    finally:
        RELEASE.set()
        srv.should_exit = True
        th.join(30)
    texts = {r.content[0].text for r in told}
    assert all(r.is_error for r in told) and texts == {
        'Error executing tool hang: tool hang timed out after 0.6s',
        'Error executing tool add_note: tool add_note timed out after 0.6s',
    }, texts
    assert not after.is_error, after
    assert notes(ts.db.db) == ['first', 'after'], notes(ts.db.db)[
        :5
    ]  # neither the hung call nor any queued one was applied
    assert peak - before <= 10, (before, peak)  # 101 calls waiting: no thread each (the previous code: +100)
