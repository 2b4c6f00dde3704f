"""Played by tests/reliability/test_openenv_served.py with the Python of the separate OpenEnv environment, against
`tbt openenv-serve` serving the hostile domain (2 sessions, 2 s idle limit): the shared hostile calls, failed resets,
idle and cross-site sessions, each through OpenEnv's own client. Prints one JSON object."""

import asyncio, json, socket, sys, time
import websockets
from openenv.core.generic_client import GenericEnvClient
from hostile_calls import HOSTILE, TASK, to_json


def observed(r) -> dict:
    o = r.observation if isinstance(r.observation, dict) else r.observation.model_dump()
    res, err = o.get('result') or {}, o.get('error')
    text = res.get('data') if isinstance(res, dict) else None
    return {
        'text': text or (err or {}).get('message') or '',
        'is_error': bool(res.get('is_error') or err),
        'done': r.done,
    }


def step(tool, arguments):
    return {'type': 'call_tool', 'tool_name': tool, 'arguments': arguments}


async def hostile(url: str) -> dict:
    out = {'calls': {}}
    async with GenericEnvClient(base_url=url) as env:
        await env.reset(task_uid=TASK.uid)
        for c in HOSTILE:
            if not c.wire:
                continue
            if c.id == 'nested_3000':  # OpenEnv's client cannot write it (json.dumps recurses): the raw message
                await env._ws.send('{"type": "step", "data": ' + to_json(step(c.tool, c.arguments)) + '}')
                raw = json.loads(await env._ws.recv())
                out['calls'][c.id] = {'raw': raw}
                continue
            out['calls'][c.id] = observed(await env.step(step(c.tool, c.arguments)))
        listed = await env.step({'type': 'list_tools'})
        obs = listed.observation if isinstance(listed.observation, dict) else listed.observation.model_dump()
        out['listed'] = [t['name'] for t in obs['tools']]
        out['good'] = observed(await env.step(step('add_note', {'text': 'hello'})))
        out['failed_resets'] = []
        for bad in ('hostile/nope', ''):
            try:
                await env.reset(task_uid=bad)
                out['failed_resets'].append('accepted')
            except RuntimeError as e:
                out['failed_resets'].append(str(e))
        out['after_failed_reset'] = observed(await env.step(step('add_note', {'text': 'again'})))
        end = await env.step(step('send_message', {'message': 'Noted.'}))
        out['end'] = {'done': end.done, 'reward': end.reward}
    return out


async def sessions(url: str, ws_url: str) -> dict:
    "Two idle sessions fill the server; a cross-site one is refused; the idle ones are released after 2 s."
    out = {}
    try:
        async with websockets.connect(ws_url, additional_headers={'Origin': 'http://evil.example'}) as ws:
            await ws.send(json.dumps({'type': 'reset', 'data': {'task_uid': TASK.uid}}))
            out['cross_site'] = 'accepted: ' + (await ws.recv())[:200]
    except Exception as e:
        out['cross_site'] = f'{type(e).__name__}: {e}'
    a, b = GenericEnvClient(base_url=url), GenericEnvClient(base_url=url)
    await a.reset(task_uid=TASK.uid)
    await b.reset(task_uid=TASK.uid)
    async with websockets.connect(ws_url) as ws:  # the server answers a third at once, then closes
        try:
            out['third_while_full'] = await asyncio.wait_for(ws.recv(), 10)
        except Exception as e:
            out['third_while_full'] = f'{type(e).__name__}: {e}'
    await asyncio.sleep(3)  # over the 2 s idle limit
    try:
        await a.step(step('add_note', {'text': 'late'}))
        out['idle_after'] = 'still open'
    except Exception as e:
        out['idle_after'] = type(e).__name__
    c = GenericEnvClient(base_url=url)
    r = await c.reset(task_uid=TASK.uid)
    out['third_after'] = r.observation['task_uid']
    for e in (a, b, c):
        await e.disconnect()
    return out


def wait_for(port: int, timeout_s: float = 300):
    "Wait for the server, started beside this script (both spend seconds importing OpenEnv)."
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        with socket.socket() as s:
            if s.connect_ex(('127.0.0.1', port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f'no server on port {port} after {timeout_s}s')


if __name__ == '__main__':
    port = int(sys.argv[1])
    wait_for(port)
    url = f'http://127.0.0.1:{port}'
    got = asyncio.run(hostile(url))
    got['sessions'] = asyncio.run(sessions(url, f'ws://127.0.0.1:{port}/ws'))
    print(json.dumps(got))
