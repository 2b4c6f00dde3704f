"""The main job's work beside training (`Beside`): a failure beside is one line naming it; training failing stops the
process beside; the job killed, the process beside ends on its own (so a rerun finds its campaign free)."""

import os, signal, subprocess, sys, time
from pathlib import Path
import pytest
from thinkingbox_training.pipeline import Beside, _one_core_beside

ROOT = Path(__file__).resolve().parents[1]


def alive(pid: int) -> bool:
    try:
        return b'zombie' not in Path(f'/proc/{pid}/status').read_bytes().lower()
    except OSError:
        return False


def test_a_failure_beside_is_one_line_naming_it(tmp_path):
    b = Beside('eval-base', Path.read_text, [tmp_path / 'nowhere.txt']).start()
    with pytest.raises(SystemExit) as e:
        b.join()
    msg = str(e.value)
    assert msg.startswith('eval-base, run beside, failed: FileNotFoundError: ') and 'nowhere.txt' in msg
    assert '\n' not in msg and b.proc.exitcode == 1


def test_training_failing_stops_the_process_beside_it():
    import torch

    b, threads, t0 = Beside('eval-base', time.sleep, [60]), torch.get_num_threads(), time.perf_counter()
    with pytest.raises(RuntimeError, match='training failed'):
        with _one_core_beside(b):
            assert b.started and b.proc.is_alive() and torch.get_num_threads() == max(1, threads - 1)
            raise RuntimeError('training failed')
    assert not b.proc.is_alive() and b.proc.exitcode == -signal.SIGTERM and time.perf_counter() - t0 < 30
    assert torch.get_num_threads() == threads  # this process's cores given back


@pytest.mark.skipif(not Path('/proc/self/status').exists(), reason='reads /proc')
def test_the_process_beside_ends_when_the_job_is_killed():
    job = (
        'import time\nfrom thinkingbox_training.pipeline import Beside\n'
        "b = Beside('eval-base', time.sleep, [120]).start()\nprint(b.proc.pid, flush=True)\ntime.sleep(120)\n"
    )
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(ROOT), os.environ.get('PYTHONPATH', '')])}
    p = subprocess.Popen([sys.executable, '-c', job], stdout=subprocess.PIPE, text=True, env=env)
    try:
        kid = int(p.stdout.readline())
        assert alive(kid)
        p.kill()  # SIGKILL: no cleanup in the job
        p.wait()
        t0 = time.time()
        while alive(kid) and time.time() - t0 < 10:
            time.sleep(0.1)
        assert not alive(kid), 'the process beside outlived the job'
    finally:
        p.kill()
