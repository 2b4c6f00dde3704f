"""Episodes against a served OpenEnv environment of ours, played with OpenEnv's own clients; run by
tests/test_ecosystem_openenv.py with the Python of the separate OpenEnv environment. Prints one JSON object."""

import asyncio, json, socket, sys, time
from openenv.core.env_server.mcp_types import CallToolAction
from openenv.core.generic_client import GenericEnvClient
from openenv.core.mcp_client import MCPToolClient


async def main(url: str, uid: str, golden: list, reply: str) -> dict:
    out = {}
    # a void episode first: the user's endpoint fails (the test's stand-in refuses its first requests)
    async with GenericEnvClient(base_url=url) as env:
        r = await env.reset(task_uid=uid)
        out['prompt'] = r.observation['prompt']
        s = await env.step({'type': 'call_tool', 'tool_name': 'send_message', 'arguments': {'message': 'Your email?'}})
        out['void'] = {'done': s.done, 'reward': s.reward, 'state': await env.state()}
    async with MCPToolClient(base_url=url) as a, MCPToolClient(base_url=url) as b:
        await a.reset(task_uid=uid)
        await b.reset(task_uid=uid)
        out['tools'] = [t.name for t in await a.list_tools()]
        steps = []
        for c in golden:
            s = await a.step(CallToolAction(tool_name=c['name'], arguments=c['arguments']))
            steps.append({'done': s.done, 'reward': s.reward, 'result': s.observation.result})
        # the other session's database is its own: the golden path passes there too
        for c in golden:
            await b.step(CallToolAction(tool_name=c['name'], arguments=c['arguments']))
        end_a = await a.step(CallToolAction(tool_name='send_message', arguments={'message': reply}))
        end_b = await b.step(CallToolAction(tool_name='send_message', arguments={'message': reply}))
        after = await a.step(CallToolAction(tool_name=golden[0]['name'], arguments=golden[0]['arguments']))
        out['golden'] = {
            'steps': steps,
            'done': end_a.done,
            'reward': end_a.reward,
            'other_session': end_b.reward,
            'after_end': after.observation.error.message if after.observation.error else None,
        }
        # doing nothing but answering fails (reward 0, not None)
        await a.reset(task_uid=uid)
        s = await a.step(CallToolAction(tool_name='send_message', arguments={'message': reply}))
        out['nothing'] = {'done': s.done, 'reward': s.reward}
    return out


def wait_for(port: int, timeout_s: float = 300):
    "Wait for the server, started beside this script (both spend seconds importing OpenEnv, which imports gradio)."
    t0 = time.time()
    while time.time() - t0 < timeout_s:
        with socket.socket() as s:
            if s.connect_ex(('127.0.0.1', port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f'no server on port {port} after {timeout_s}s')


if __name__ == '__main__':
    port, uid, golden, reply = int(sys.argv[1]), sys.argv[2], json.loads(sys.argv[3]), sys.argv[4]
    wait_for(port)
    url = f'http://127.0.0.1:{port}'
    print(json.dumps(asyncio.run(main(url, uid, golden, reply)), default=str))
