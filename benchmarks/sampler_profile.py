"""Where HFPolicy's sampling CPU goes on campaign-like episodes, and what the in-place slab attention saves.

    OMP_NUM_THREADS=1 python benchmarks/sampler_profile.py [--tasks 16] [--k 1] [--orderings]

Runs the same episodes (bench tasks of data/tasks under their own limits, 256 tokens a turn, concurrency 16, the
shipped base policy) twice in one process: with the slab attention as first written (out of place, the mask
repeated per query head) and with the package's (in place, the mask broadcast). Both must give identical
samples (token ids and logprobs, ==). It reports process CPU (not wall: the machine may be shared) in the
batched prefill, in decoding and in all, the mean attention width against the columns rows use, and the prefill's
padded positions. With --orderings it also runs 4 tasks x 16 attempts in two orders with the package's attention:
task-major (16 attempts of one task live together, as k=20 campaigns run) and 4 attempts of each task at a time (as
k=4 campaigns run); same episodes, so only the batching differs.
The last lines are `prefill_speedup=<plain/in-place prefill CPU>` and `sample_speedup=<same for all sampling>`.
"""

import argparse, asyncio, os, random, sys, time
from pathlib import Path

os.environ.setdefault('OMP_NUM_THREADS', '1')
import torch

torch.set_num_threads(int(os.environ['OMP_NUM_THREADS']))
import thinkingbox_training.policies as policies
from thinkingbox_training.policies import HFPolicy, SamplingConfig, _Slab
from thinkingbox_training.tasks import load_tasks
from thinkingbox_training.episode import EpisodeRunner

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests'))
from slab_reference import plain_slab_attention  # noqa: E402  (the reference the tests hold the sampler to)

CPU = {'prefill': 0.0, 'sample': 0.0, 'width_cols': 0, 'used_cols': 0, 'padded': 0, 'fed': 0, 'prefix': set()}


def instrument():
    "Count process CPU in HFPolicy._prefill and HFPolicy.sample, attention widths and prefill padding."
    pre, smp, at = HFPolicy._prefill, HFPolicy.sample, _Slab.at

    def _prefill(self, slab, chunks, chunk=32):
        c0 = time.process_time()
        try:
            return pre(self, slab, chunks, chunk)
        finally:
            CPU['prefill'] += time.process_time() - c0
            C = max(map(len, chunks))  # positions fed: per 32-position stretch, the rows with ids in it
            for j0 in range(0, C, chunk):
                CPU['padded'] += sum(min(C, j0 + chunk) - j0 for x in chunks if C - len(x) < j0 + chunk)
            CPU['fed'] += sum(map(len, chunks))
            CPU['prefix'] |= {p[0][0].shape[2] for p in slab.prefix if p}

    def sample(self, *a, **kw):
        c0 = time.process_time()
        try:
            return smp(self, *a, **kw)
        finally:
            CPU['sample'] += time.process_time() - c0

    def _at(self, cols):
        out = at(self, cols)
        b = cols.shape[0]
        CPU['width_cols'] += self.width * b * cols.shape[1]
        CPU['used_cols'] += int((cols + 1).sum())  # what each query position reads of its own row
        return out

    HFPolicy._prefill, HFPolicy.sample, _Slab.at = _prefill, sample, _at


def run(pol, jobs, concurrency=16):
    for k in CPU:
        CPU[k] = set() if k == 'prefix' else 0
    c0 = time.process_time()
    eps = asyncio.run(EpisodeRunner(pol, concurrency=concurrency).run(jobs))
    return eps, {**CPU, 'all': time.process_time() - c0}


def show(name, eps, st):
    n = len(eps)
    return (
        f'{name:>10}: {n} episodes, process CPU {st["all"]:.2f} s ({st["all"] / n:.3f} s/episode): sampling '
        f'{st["sample"]:.2f} s, of it prefill {st["prefill"]:.2f} s'
    )


if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--model', default='data/models/tiny-qwen3')
    p.add_argument('--tasks', type=int, default=16)
    p.add_argument('--k', type=int, default=1)
    p.add_argument('--seed', type=int, default=0, help='which bench tasks (a shuffle seed)')
    p.add_argument('--orderings', action='store_true')
    a = p.parse_args()
    bench = [
        t for t in load_tasks('data/tasks/retail_bench.jsonl', 'data/tasks/travel_bench.jsonl') if t.split == 'bench'
    ]
    random.Random(a.seed).shuffle(bench)
    pol = HFPolicy(a.model, sampling=SamplingConfig(temperature=1.0, max_tokens=256, seed=0))
    instrument()
    jobs = [(t, r) for t in bench[: a.tasks] for r in range(a.k)]
    print(
        f'{pol.policy_id}, OMP_NUM_THREADS={os.environ["OMP_NUM_THREADS"]}, {len(jobs)} episodes at concurrency 16 '
        f'(process CPU; the machine may be shared)'
    )
    package = policies._slab_attention
    policies._slab_attention = plain_slab_attention
    e0, s0 = run(pol, jobs)
    policies._slab_attention = package
    e1, s1 = run(pol, jobs)
    same = sum(
        x.trajectory.completion_ids == y.trajectory.completion_ids and x.trajectory.logprobs == y.trajectory.logprobs
        for x, y in zip(e0, e1)
    )
    print(show('plain', e0, s0))
    print(show('in place', e1, s1))
    toks = sum(sum(e.trajectory.mask) for e in e1)
    print(
        f'  identical samples (token ids and logprobs ==): {same}/{len(jobs)}; {toks} sampled tokens; '
        f'shared system turn {sorted(s1["prefix"])} tokens; prefill fed {s1["fed"]} ids in {s1["padded"]} '
        f'positions; attention width {s1["width_cols"] / max(1, s1["used_cols"]):.2f}x the columns rows use'
    )
    if a.orderings:
        ts = bench[:4]
        by_task = [(t, r) for t in ts for r in range(16)]
        by_four = [(t, r) for r0 in range(0, 16, 4) for t in ts for r in range(r0, r0 + 4)]
        ea, sa = run(pol, by_task)
        eb, sb = run(pol, by_four)
        key = lambda e: (e.task.uid, e.repetition)
        ids = {key(e): e.trajectory.completion_ids for e in ea}
        print(show('k=16 order', ea, sa))
        print(show('k=4 order', eb, sb))
        print(
            f'  same episodes in both orders: {sum(ids[key(e)] == e.trajectory.completion_ids for e in eb)}/64; '
            f'CPU per episode task-major / by fours: {sa["all"] / sb["all"]:.2f}'
        )
    assert same == len(jobs), 'the in-place attention changed samples'
    print(f'prefill_speedup={s0["prefill"] / s1["prefill"]:.2f}\nsample_speedup={s0["sample"] / s1["sample"]:.2f}')
