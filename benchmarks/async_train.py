"""The train stage of the main job's recipe, synchronous against sampling ahead, generation in the trainer's process or
in a server process of its own: wall time, CPU seconds and peak memory of the process tree, cores busy.

    python benchmarks/async_train.py --steps 4                      # in process: max_staleness 0, then 1
    python benchmarks/async_train.py --steps 4 --sampler process server   # both samplers, 0 and 1 each
    python benchmarks/async_train.py --steps 4 --staleness 0 1 2

Each run is `tbt`'s training entry point (grpo.main) in a fresh process on scripts/recipes/tiny_cpu.yaml with the
committed pool of data/runs/tiny-cpu, in micro-batches of 8 as the main job trains, output under a temporary folder.
`--sampler process`: the trainer samples its episodes itself (max_staleness 1: on a thread, with a copy of the
weights). `--sampler server`: the model's generation runs in a `tbt vllm-standin` process started for the run (the
same checkpoint), the trainer reaching it with use_vllm inside `cpu_weight_transfer()` and sending it the weights
after every step; the episodes themselves (tools, user, grader) stay in the trainer's process.
The line per run gives wall seconds, the CPU seconds of the process tree (user + system of the trainer and the
server, from wait4; the server's alone beside them), cores busy on average (CPU / wall), the peak of the tree's
resident memory summed over its processes (VmRSS of every process under this one, sampled every 0.5 s), and the
steps' mean staleness. On a shared machine the numbers say as much about the neighbours as about the trainer: the
load average before each run is printed with it."""

import argparse, json, os, socket, subprocess, sys, tempfile, threading, time, urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECIPE, POOL, MODEL = 'scripts/recipes/tiny_cpu.yaml', 'data/runs/tiny-cpu/pool/pool.txt', 'data/models/tiny-qwen3'
TRAIN = 'import sys; from thinkingbox_training.grpo import main; sys.exit(main(sys.argv[1:]))'
TRAIN_SERVED = (  # the weights reach the stand-in over gloo, where a GPU trainer's reach vLLM over NCCL
    'import sys; from thinkingbox_training.grpo import main; from thinkingbox_training.vllm_server import '
    'cpu_weight_transfer\nwith cpu_weight_transfer(): sys.exit(main(sys.argv[1:]))'
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def tree_rss(root: int) -> int:
    "Resident bytes of `root` and every process under it (VmRSS from /proc)."
    kids: dict = {}
    for d in Path('/proc').iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / 'stat').read_text().rsplit(')', 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d.name))
    total, todo = 0, list(kids.get(root, []))
    while todo:
        pid = todo.pop()
        todo += kids.get(pid, [])
        try:
            for line in Path(f'/proc/{pid}/status').read_text().splitlines():
                if line.startswith('VmRSS:'):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


class PeakRSS(threading.Thread):
    "The peak, over the run, of the resident memory summed over this process's children and theirs."

    def __init__(self, every_s: float = 0.5):
        super().__init__(daemon=True)
        self.every_s, self.peak, self.stop = every_s, 0, threading.Event()

    def run(self):
        while not self.stop.wait(self.every_s):
            self.peak = max(self.peak, tree_rss(os.getpid()))


def wait_up(url: str, proc, timeout_s: float = 120.0):
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        if proc.poll() is not None:
            raise SystemExit(f'the stand-in server exited: {proc.stderr.read().decode()[-2000:]}')
        try:
            with urllib.request.urlopen(url + '/health', timeout=2):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f'the stand-in server did not answer at {url} within {timeout_s:.0f} s')


def run(steps: int, staleness: int, sampler: str, out: Path) -> dict:
    argv = [
        sys.executable,
        '-c',
        TRAIN_SERVED if sampler == 'server' else TRAIN,
        '--config',
        RECIPE,
        '--pool_file',
        POOL,
        '--output_dir',
        str(out),
    ]
    argv += ['--max_steps', str(steps), '--max_staleness', str(staleness)]
    argv += ['--disable_tqdm', 'true', '--per_device_train_batch_size', '8']  # the main job's micro-batches
    load = os.getloadavg()[0]
    peak = PeakRSS()
    peak.start()
    t0, server = time.monotonic(), None
    cpu = served = 0.0
    if sampler == 'server':  # its start is part of the run's wall time, as the trainer's own model load is
        port = free_port()
        url = f'http://127.0.0.1:{port}'
        server = subprocess.Popen(
            [str(Path(sys.executable).parent / 'tbt'), 'vllm-standin', MODEL, '--port', str(port)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        wait_up(url, server)
        argv += ['--use_vllm', 'true', '--vllm_server_base_url', url, '--vllm_group_port', str(free_port())]
    try:
        p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _, status, ru = os.wait4(p.pid, 0)
        cpu += ru.ru_utime + ru.ru_stime
    finally:
        if server is not None:
            server.terminate()
            _, _, sru = os.wait4(server.pid, 0)
            served = sru.ru_utime + sru.ru_stime
    wall = time.monotonic() - t0
    peak.stop.set()
    peak.join()
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f'{sampler} max_staleness={staleness}: training failed: {p.stderr.read().decode()[-2000:]}')
    log = json.loads((out / 'training_log.json').read_text())
    stale = [h['tbt/staleness_mean'] for h in log['log_history'] if 'tbt/staleness_mean' in h]
    return {
        'sampler': sampler,
        'max_staleness': staleness,
        'steps': len(log['steps']),
        'wall_s': round(wall, 1),
        'cpu_s': round(cpu + served, 1),
        'server_cpu_s': round(served, 1),
        'cores_busy': round((cpu + served) / wall, 2),
        'peak_rss_gb': round(peak.peak / 2**30, 2),
        'staleness_mean': round(sum(stale) / len(stale), 2) if stale else 0.0,
        'load_before': round(load, 1),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--steps', type=int, default=4)
    ap.add_argument('--staleness', type=int, nargs='+', default=[0, 1])
    ap.add_argument('--sampler', choices=['process', 'server'], nargs='+', default=['process'])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for sampler in a.sampler:
            for s in a.staleness:
                print(json.dumps(run(a.steps, s, sampler, Path(d) / f'{sampler}{s}')), flush=True)


if __name__ == '__main__':
    main()
