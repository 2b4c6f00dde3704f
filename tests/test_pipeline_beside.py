"""The main job's work beside training (`Beside`): the base evaluation beside records what it records in process;
training failing stops the process beside; the job killed, the process beside ends on its own (so a rerun finds its
campaign free)."""

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


def test_the_jobs_base_evaluation_beside_records_what_it_records_in_process(tmp_path):
    "The job's own call (`_eval_base`), beside and here: the same records (a failure beside: `nbs/12_pipeline.ipynb`)."
    from thinkingbox_training.campaigns import RunSpec, campaign_records
    from thinkingbox_training.pipeline import MainJob, _eval_base, job_tasks

    tasks = str(ROOT / 'data' / 'tasks')
    jobs = [MainJob(runs_dir=str(tmp_path), run=r, bench_per_family=1, task_dir=tasks) for r in 'ab']
    files, _, bench, _ = job_tasks(jobs[0])
    how = {'evaluate': RunSpec()}  # each bench task under its own budgets, as the job's evaluation
    call = lambda job: _eval_base(job, bench[:4], files, 'scripted:flaw=0.5', how, shards=1, progress=False)
    beside = Beside('eval-base', *call(jobs[0])).start()
    fn, args, kw = call(jobs[1])
    here = fn(*args, **kw)
    assert beside.join()['executed'] == here['executed'] == 4 * jobs[0].bench_k
    a, b = (campaign_records(tmp_path / r / 'eval-base') for r in 'ab')
    untimed = lambda recs: [{f: v for f, v in x.items() if f not in ('duration_s', 'campaign')} for x in recs]
    assert untimed(a) == untimed(b) and 0 < sum(x['reward'] for x in a) < len(a)  # mixed outcomes, the same ones


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
