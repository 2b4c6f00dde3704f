"""Virtual environments that some tests need beside the project's own (packages that cannot sit in `.venv`), built once
per content and cached under `$TBT_CHECKPOINT_CACHE` (default `~/.cache/thinkingbox_training`)."""

import fcntl, hashlib, json, os, shutil, subprocess, sys, venv
from pathlib import Path

CACHE = Path(os.environ.get('TBT_CHECKPOINT_CACHE', Path.home() / '.cache' / 'thinkingbox_training'))


def cached_venv(
    name: str,  # the environment's name in the cache
    requirements: list,  # what pip installs into it
    stamp: list = (),  # anything else its content depends on (paths, files' text)
    finish=None,  # called with the new environment's Python before it is published
) -> Path:
    "The Python of a cached environment, built on first use (a lock keeps builds apart; a failed one leaves none)."
    key = hashlib.sha256(json.dumps([requirements, *stamp, sys.version_info[:2]]).encode()).hexdigest()[:12]
    home = CACHE / f'{name}-{key}'
    py = home / 'bin' / 'python'
    if py.exists():
        return py
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f'{name}-{key}.lock', 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if py.exists():
            return py
        tmp = home.with_name(home.name + '.building')
        shutil.rmtree(tmp, ignore_errors=True)
        venv.create(tmp, with_pip=True)
        r = subprocess.run(
            [tmp / 'bin' / 'python', '-m', 'pip', 'install', '-q', *requirements], capture_output=True, text=True
        )
        if r.returncode:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f'pip install {" ".join(requirements)} failed: {r.stderr[-2000:]}')
        if finish:
            finish(tmp / 'bin' / 'python')
        tmp.rename(home)  # only `python -m` is used: the scripts' shebangs name the build folder
    return py


# ---- verifiers (PyPI 0.4.0): environments/tbt_tasks ----

# verifiers 0.4.0 pins mcp==2.0.0 and openai<3 (the project's own environment holds mcp 2.3 and openai 3), so it
# gets an environment of its own. The checkout goes on PYTHONPATH: the package's code is always the checkout's.
VERIFIERS_PINS = ['verifiers==0.4.0', 'mcp==2.0.0', 'openai>=2.54,<3', 'setuptools>=77']
# What the package needs at run time besides these: its dependencies less the training stack (torch, TRL, accelerate,
# datasets), which an environment's rollouts never import, and the ThinkingBox extra (their servers' imports).
_TRAINING_STACK = {'torch', 'trl', 'accelerate', 'datasets'}


def verifiers_requirements(root: Path) -> list:
    "What the verifiers environment installs: the pins above and the project's run-time dependencies it needs."
    import re, tomllib

    proj = tomllib.loads((Path(root) / 'pyproject.toml').read_text())['project']
    deps = [d for d in proj['dependencies'] if re.split(r'[<>=!~ \[;]', d)[0] not in _TRAINING_STACK]
    pinned = {re.split(r'[<>=!~ \[;]', p)[0] for p in VERIFIERS_PINS}
    deps = [d for d in deps if re.split(r'[<>=!~ \[;]', d)[0] not in pinned]
    return [*VERIFIERS_PINS, *deps, *proj['optional-dependencies']['thinkingbox']]


def verifiers_python(root: Path) -> Path:
    "The Python of the verifiers environment (keyed by its requirements), built on first use."
    return cached_venv('verifiers-venv', verifiers_requirements(root))
