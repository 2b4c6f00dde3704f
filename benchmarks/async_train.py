"""The train stage of the main job's recipe, synchronous against sampling ahead: wall time, CPU seconds, cores busy.

    python benchmarks/async_train.py --steps 4                      # max_staleness 0, then 1, the same steps each
    python benchmarks/async_train.py --steps 4 --staleness 0 1 2

Each run is `tbt`'s training entry point (grpo.main) in a fresh process on scripts/recipes/tiny_cpu.yaml with the
committed pool of data/runs/tiny-cpu, in micro-batches of 8 as the main job trains, output under a temporary folder;
the line per run gives wall seconds, the process's CPU seconds (user + system, from wait4), cores busy on average
(CPU / wall), peak resident memory, and the steps' mean staleness. On a shared machine the numbers say as much about
the neighbours as about the trainer: the load average before each run is printed with it."""

import argparse, json, os, subprocess, sys, tempfile, time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(steps: int, staleness: int, out: Path) -> dict:
    argv = [
        sys.executable,
        '-c',
        'import sys; from thinkingbox_training.grpo import main; sys.exit(main(sys.argv[1:]))',
    ]
    argv += ['--config', 'scripts/recipes/tiny_cpu.yaml', '--pool_file', 'data/runs/tiny-cpu/pool/pool.txt']
    argv += ['--output_dir', str(out), '--max_steps', str(steps), '--max_staleness', str(staleness)]
    argv += ['--disable_tqdm', 'true', '--per_device_train_batch_size', '8']  # the main job's micro-batches
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f'max_staleness={staleness}: training failed: {p.stderr.read().decode()[-2000:]}')
    log = json.loads((out / 'training_log.json').read_text())
    stale = [h['tbt/staleness_mean'] for h in log['log_history'] if 'tbt/staleness_mean' in h]
    cpu = ru.ru_utime + ru.ru_stime
    return {
        'max_staleness': staleness,
        'steps': len(log['steps']),
        'wall_s': round(wall, 1),
        'cpu_s': round(cpu, 1),
        'cores_busy': round(cpu / wall, 2),
        'peak_rss_gb': round(ru.ru_maxrss / 2**20, 2),
        'staleness_mean': round(sum(stale) / len(stale), 2) if stale else 0.0,
        'load_before': round(load, 1),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--steps', type=int, default=4)
    ap.add_argument('--staleness', type=int, nargs='+', default=[0, 1])
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        for s in a.staleness:
            print(json.dumps(run(a.steps, s, Path(d) / f's{s}')), flush=True)


if __name__ == '__main__':
    main()
