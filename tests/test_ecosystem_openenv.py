"""Our tasks as an OpenEnv environment, served by `tbt openenv-serve` and played with OpenEnv's own clients.

OpenEnv 0.3.0 needs fastmcp>=3 and gradio, which must not enter the project's environment (a real fastmcp makes our
ThinkingBox stand-in step aside for one that lacks what their servers import). So this test builds an environment of
its own once, cached under ~/.cache/thinkingbox_training/ (keyed by a hash of its requirements), with no torch: the
server side imports only the package's light modules, from this checkout (PYTHONPATH). Under CI=true a missing
environment fails the run instead of skipping."""

import json, os, socket, subprocess
from pathlib import Path
import pytest
from conftest import skip_unless_ci
from venvs import cached_venv
from thinkingbox_training.tasks import load_tasks
from thinkingbox_training.users import StandInServer

ROOT = Path(__file__).parent.parent
REQUIREMENTS = ['openenv-core==0.3.0', 'mcp>=2.0,<3', 'sqlmodel>=0.0.24', 'fastcore>=1.8', 'pyyaml', 'pydantic>=2.7']


def openenv_python() -> Path:
    "The Python of the OpenEnv environment, built on first use."
    return cached_venv('openenv-venv', REQUIREMENTS)


@pytest.fixture(scope='module')
def py():
    try:
        return openenv_python()
    except Exception as e:
        skip_unless_ci(f'the OpenEnv environment could not be built: {e}')


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def test_the_openenv_environment_has_no_torch_and_ours_has_no_openenv(py):
    "OpenEnv stays out of the project's environment; the server side needs no torch."
    import importlib.util

    assert importlib.util.find_spec('openenv') is None
    r = subprocess.run(
        [
            py,
            '-c',
            'import importlib.util as u; print(u.find_spec("torch") is None, u.find_spec("openenv") is not None)',
        ],
        capture_output=True,
        text=True,
    )
    assert r.stdout.split() == ['True', 'True'], r.stderr


def test_an_episode_to_its_verdict_with_openenvs_client(py):
    task = next(t for t in load_tasks(ROOT / 'data/tasks/retail_train.jsonl') if t.family == 'cancel_before_shipping')
    port = free_port()
    # the simulated user behind an OpenAI-compatible endpoint (our scripted stand-in), which refuses the first four
    # requests: the void episode's one reply and its three retries
    with StandInServer(fail_first=4) as user:
        env = dict(os.environ, PYTHONPATH=str(ROOT), TBT_USER_BASE_URL=user.base_url)
        code = (
            'import sys; from thinkingbox_training.ecosystem import openenv_serve; '
            'sys.exit(openenv_serve(sys.argv[1], port=int(sys.argv[2]), user="openai:stand-in"))'
        )
        p = subprocess.Popen(
            [py, '-c', code, str(ROOT / 'data/tasks/retail_train.jsonl'), str(port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )
        try:
            # the episodes' client starts beside the server and waits for it: each spends seconds importing OpenEnv
            golden = json.dumps([c.model_dump() for c in task.golden])
            r = subprocess.run(
                [py, ROOT / 'tests' / 'openenv_episodes.py', str(port), task.uid, golden, task.reply],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )
            if p.poll() is not None:
                raise AssertionError(f'the server stopped: {p.stderr.read().decode()[-3000:]}')
            assert r.returncode == 0, r.stderr[-3000:]
            out = json.loads(r.stdout)
        finally:
            p.terminate()
            p.wait(30)
    assert out['prompt'][1] == {'role': 'user', 'content': task.query}
    assert 'cancel_order' in out['tools'] and 'send_message' in out['tools']
    # a system error (the user's endpoint failed after its retries) ends the episode with no reward, never 0
    assert out['void']['done'] and out['void']['reward'] is None
    assert 'failed after 4 attempts' in out['void']['state']['system_error']
    g = out['golden']
    assert not any(s['done'] for s in g['steps']) and g['steps'][-1]['result']['is_error'] is False
    assert g['done'] and g['reward'] == 1.0 and g['other_session'] == 1.0
    assert 'reset first' in g['after_end']
    assert out['nothing'] == {'done': True, 'reward': 0.0}
