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
