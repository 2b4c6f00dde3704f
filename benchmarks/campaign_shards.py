"""Campaigns in shards: the same probe-like campaign in one process and in two, and episodes/s per concurrency.

    python benchmarks/campaign_shards.py [--policy data/models/tiny-qwen3] [--tasks 48] [--k 2] [--reps 2]
                                         [--concurrency 16] [--sweep 4,8,16,32] [--sweep-shards 2]

1. The same campaign (the first --tasks training tasks x --k, under the tiny recipe's budgets and sampling, the
   in-process tool transport: what `tbt probe --recipe` runs), with shards=1 and shards=2 in turn, --reps times
   each, every run into a fresh directory; the wall time of `run_campaign` includes starting the shard process
   (imports and the model's load). Each run's records are compared with the first run's (timing aside).
2. A concurrency sweep: the same campaign at each --sweep setting (episodes live in each process) with
   --sweep-shards shards: episodes/s per setting, so the default can be chosen from measurement.
The load average (`/proc/loadavg`) is printed before and after: on a loaded machine the ratio is depressed.
The last lines are the episodes/s of each, `campaign_shards_cpu_ratio_2=` (the CPU seconds of two shards, the
shard process's start included, over one process's) and `campaign_shards_speedup_2=<median of the paired wall-time
ratios>`.
"""

import argparse, os, resource, statistics, tempfile, time

os.environ.setdefault('OMP_NUM_THREADS', '1')
from pathlib import Path
from thinkingbox_training.campaigns import campaign_records, recipe_budgets, run_campaign
from thinkingbox_training.policies import SamplingConfig
from thinkingbox_training.tasks import load_tasks

ROOT = Path(__file__).resolve().parents[1]


def load() -> str:
    return open('/proc/loadavg').read().split(' ')[:3].__repr__()


def cpu_s() -> float:
    "CPU seconds of this process and of its children that ended (the shards, joined)."
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def untimed(recs):
    return [{f: v for f, v in r.items() if f not in ('duration_s', 'campaign')} for r in recs]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--policy', default=str(ROOT / 'data' / 'models' / 'tiny-qwen3'))
    ap.add_argument('--task-file', default=str(ROOT / 'data' / 'tasks' / 'retail_train.jsonl'))
    ap.add_argument('--recipe', default=str(ROOT / 'scripts' / 'recipes' / 'tiny_cpu.yaml'))
    ap.add_argument('--tasks', type=int, default=48)
    ap.add_argument('--k', type=int, default=2)
    ap.add_argument('--reps', type=int, default=2)
    ap.add_argument('--concurrency', type=int, default=16)
    ap.add_argument('--sweep', default='4,8,16,32')
    ap.add_argument('--sweep-shards', type=int, default=2)
    a = ap.parse_args()
    tasks = [t for t in load_tasks(a.task_file) if t.split == 'train'][: a.tasks]
    budgets, samp = recipe_budgets(a.recipe)
    samp = {k: samp[k] for k in ('temperature', 'top_p', 'top_k')}  # the recipe's sampling (not its judge's budget)
    sampling = SamplingConfig(**samp, max_tokens=budgets['max_tokens_per_turn'], seed=0)
    n = len(tasks) * a.k
    tmp = Path(tempfile.mkdtemp(prefix='campaign_shards-'))
    print(
        f'{len(tasks)} tasks x {a.k} = {n} episodes, policy {a.policy}, budgets {budgets}, '
        f'{os.cpu_count()} cores; load average before: {load()}',
        flush=True,
    )
    ref, cpu = None, {}

    def timed(shards: int, concurrency: int, tag: str) -> float:
        nonlocal ref
        out = tmp / f'{tag}-s{shards}-c{concurrency}'
        c0 = cpu_s()
        t0 = time.perf_counter()
        r = run_campaign(
            out,
            tasks,
            a.policy,
            a.k,
            sampling=sampling,
            budgets=budgets,
            concurrency=concurrency,
            progress=False,
            runner_kw={'tool_transport': 'inprocess'},
            shards=shards,
        )
        dt = time.perf_counter() - t0
        cpu[shards, concurrency, tag] = cpu_s() - c0
        assert r['executed'] == n and not r['system_errors_left'], r
        recs = untimed(campaign_records(out))
        ref = ref or recs
        same = sum(x == y for x, y in zip(recs, ref))
        print(
            f'  shards={shards} concurrency={concurrency}: {dt:.1f} s, {n / dt:.2f} episodes/s, '
            f'CPU {cpu[shards, concurrency, tag]:.1f} s (this process and its shards), '
            f"records equal to the first run's: {same}/{n}, load {load()}",
            flush=True,
        )
        return dt

    print(f'1. shards=1 vs shards=2 at concurrency {a.concurrency}, alternating, {a.reps} reps', flush=True)
    one, two = [], []
    for rep in range(a.reps):
        for s, acc in ((1, one), (2, two)) if rep % 2 == 0 else ((2, two), (1, one)):
            acc.append(timed(s, a.concurrency, f'r{rep}'))
    ratios = [x / y for x, y in zip(one, two)]
    print(f'   paired ratios: {", ".join(f"{r:.2f}" for r in ratios)}')
    sweep = [int(c) for c in a.sweep.split(',') if c]
    print(f'2. concurrency sweep at shards={a.sweep_shards}', flush=True)
    rates = {c: n / timed(a.sweep_shards, c, 'sweep') for c in sweep}
    print(f'load average after: {load()}')
    for c, v in rates.items():
        print(f'campaign_episodes_per_s_shards{a.sweep_shards}_c{c}={v:.2f}')
    print(f'campaign_episodes_per_s_1={n / statistics.median(one):.2f}')
    print(f'campaign_episodes_per_s_2={n / statistics.median(two):.2f}')
    c1 = statistics.median(v for (s, c, t), v in cpu.items() if s == 1 and t != 'sweep')
    c2 = statistics.median(v for (s, c, t), v in cpu.items() if s == 2 and t != 'sweep')
    print(f'campaign_shards_cpu_ratio_2={c2 / c1:.2f}')  # what the shards cost in CPU over one process
    print(f'campaign_shards_speedup_2={statistics.median(ratios):.2f}')


if __name__ == '__main__':
    main()
