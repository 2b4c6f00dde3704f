"""Are a row's numbers independent of its batch mates? The kernel facts the sampler relies on, and a campaign check.

    OMP_NUM_THREADS=1 python benchmarks/batch_invariance.py [--episodes 32] [--concurrency 16]

1. Kernel facts on this machine (float32, this torch's BLAS): for a linear layer of the shipped model's shapes and
   for a batched product, the row counts M at which row 0 differs (to the last bit) from the same row computed among
   64 rows; for each linear layer shape of the shipped model, the rows its products need (`rows_needed`, what the
   sampler pads a product of fewer rows to); for attention's normaliser and values (a sum and a product over
   positions, the positions past the live ones masked zeros), the row counts M and lengths K at which row 0 differs
   from M=8, K=256, summed in one go and in blocks of 256 positions (what the sampler does).
2. A campaign check with the shipped policy: --episodes bench episodes (up to 4 turns of up to 96 tokens) run at
   --concurrency and again one at a time, with the sampler as it is (each linear layer's products padded to the rows
   it needs, attention's few query rows to `MIN_ROWS` 4) and with few-row products not padded (`MIN_ROWS` 1). Per
   setting: attempts whose tokens differ, attempts whose logprobs differ in any bit, and the process CPU of the
   concurrent run.
The last lines are `differing_tokens_exact=<n>` `differing_logprobs_exact=<n>`, the same with `_off`, and
`exact_cpu_ratio=<process CPU with the padding / without>`.
"""

import argparse, asyncio, os, random, time

os.environ.setdefault('OMP_NUM_THREADS', '1')
import torch

torch.set_num_threads(int(os.environ['OMP_NUM_THREADS']))
import thinkingbox_training.policies as policies
from thinkingbox_training.episode import EpisodeRunner
from thinkingbox_training.policies import HFPolicy, SamplingConfig
from thinkingbox_training.tasks import Limits, generate_tasks


def row_counts_that_differ(f, inner: int, rows: int = 64) -> list:
    "Row counts M in 1..16 at which row 0 of f(x[:M]) differs from row 0 of f(x[:rows])."
    x = torch.randn(rows, inner)
    ref = f(x)[:1]
    return [m for m in range(1, 17) if not torch.equal(f(x[:m])[:1], ref)]


def inner_length_changes(blocks: bool, step: int = 256) -> str:
    """Row 0 of (sum, product with values) over positions whose first 200 are live and the rest masked zeros, for
    M rows and K positions, against M=8, K=256: the (M, K) where it differs, summed in one go or in blocks of `step`."""
    e, v = torch.rand(1, 2, 5000, 2048), torch.randn(1, 2, 2048, 32)
    e[..., 200:] = 0

    def f(m, k):
        if not blocks:
            x = e[:, :, :m, :k].contiguous()
            return x.sum(-1), x @ v[:, :, :k]
        out = [
            (e[:, :, :m, j : j + step].sum(-1), e[:, :, :m, j : j + step] @ v[:, :, j : j + step])
            for j in range(0, k, step)
        ]
        return sum(a for a, _ in out[1:]) + out[0][0], sum(b for _, b in out[1:]) + out[0][1]

    ref = [t[:, :, :1] for t in f(8, 256)]
    bad = [
        (m, k)
        for m in (8, 96, 768, 5000)
        for k in (256, 512, 1024, 2048)
        if not all(torch.equal(a[:, :, :1], b) for a, b in zip(f(m, k), ref))
    ]
    return f'{len(bad)} of 16 (M, K) differ {bad[:4]}'


def kernel_facts(model):
    lin = torch.nn.Linear(192, 576, bias=False)
    with torch.no_grad():
        print(f'linear 192->576: row 0 differs from its value among 64 rows at M = {row_counts_that_differ(lin, 192)}')
        shapes = {(m.in_features, m.out_features): m for m in model.modules() if isinstance(m, torch.nn.Linear)}
        need = ', '.join(f'{i}->{o}: {policies.rows_needed(m)}' for (i, o), m in sorted(shapes.items()))
        print(f"rows a linear layer's products need (the shipped model's shapes): {need}")
        w = torch.randn(2, 32, 1500)
        bmm = lambda x: (x.view(1, -1, 32).expand(2, -1, -1) @ w)[0]
        print(f'batched product (K=32, N=1500): differs at M = {row_counts_that_differ(bmm, 32)}')
        print(f'sum and product over positions with masked zeros trailing, in one go: {inner_length_changes(False)}')
        print(f'the same in blocks of 256 positions: {inner_length_changes(True)}')


def campaign(pol, jobs, concurrency):
    r = EpisodeRunner(pol, concurrency=concurrency)
    c0 = time.process_time()
    eps = asyncio.run(r.run(jobs))
    return [(e.trajectory.completion_ids, e.trajectory.logprobs) for e in eps], time.process_time() - c0


if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--model', default='data/models/tiny-qwen3')
    p.add_argument('--episodes', type=int, default=32)
    p.add_argument('--concurrency', type=int, default=16)
    a = p.parse_args()
    torch.manual_seed(0)
    pol = HFPolicy(a.model, sampling=SamplingConfig(temperature=1.0, max_tokens=96, seed=0))
    kernel_facts(pol.model)
    lim = Limits(max_turns=4, max_tokens_per_turn=96, max_episode_tokens=8192, wall_clock_s=3600)
    tasks = [t for d in ('travel', 'retail') for t in generate_tasks(d, 'bench', seed=11, n=8)]
    random.Random(0).shuffle(tasks)
    jobs = [(t.model_copy(update={'limits': lim}), rep) for rep, t in enumerate((tasks * 8)[: a.episodes])]
    exact, needed = policies.MIN_ROWS, policies.rows_needed
    out = {}
    for name, rows in (('exact', exact), ('off', 1)):
        policies.MIN_ROWS = rows
        policies.rows_needed = needed if name == 'exact' else lambda layer: 1
        together, cpu = campaign(pol, jobs, a.concurrency)
        alone, _ = campaign(pol, jobs, 1)
        toks = sum(x[0] != y[0] for x, y in zip(together, alone))
        lps = sum(x[1] != y[1] for x, y in zip(together, alone))
        out[name] = (toks, lps, cpu)
        print(
            f'{name} (MIN_ROWS={rows}, linear layers padded to {"rows_needed" if name == "exact" else 1}): '
            f'{len(jobs)} episodes at concurrency {a.concurrency} '
            f'against one at a time: tokens differ in {toks}, logprobs in {lps}; process CPU at concurrency '
            f'{a.concurrency} {cpu:.1f} s'
        )
    policies.MIN_ROWS, policies.rows_needed = exact, needed
    for name, (toks, lps, _) in out.items():
        print(f'differing_tokens_{name}={toks}')
        print(f'differing_logprobs_{name}={lps}')
    print(f'exact_cpu_ratio={out["exact"][2] / out["off"][2]:.3f}')
