"""Rollout throughput of the vLLM server path against the transformers path, on the same episodes.

    python benchmarks/server_rollouts.py [--model DIR] [--n 16] [--turns 3] [--max-tokens 32]

Both paths play the same N bench episodes (same tasks, repetitions, seeds) with the same model:
1. transformers: `HFPolicy` in this process, every live episode's turn in one batched decode loop;
2. server: per-episode requests from `EndpointPolicy` (token ids in, ids and logprobs out) over HTTP to a server.
Here the server is the CPU stand-in of `vllm_server` (`VLLMStandIn`): a transformers model that samples one
sequence at a time, behind a lock. So the figure measures what the client path costs (HTTP, JSON, no batching
across requests), not what vLLM does on a GPU, where the server batches every request it holds (continuous
batching) and the trainer's processes keep their GPUs for training. It also checks that both paths sample the
same tokens and get the same rewards. The last line is `server_over_transformers=<ratio of episodes/s>`.
"""

import argparse, asyncio, copy, logging, os, random, time

os.environ.setdefault('OMP_NUM_THREADS', '1')
from pathlib import Path
import torch

torch.set_num_threads(int(os.environ['OMP_NUM_THREADS']))
from thinkingbox_training.tasks import generate_tasks, get_domain, Limits
from thinkingbox_training.episode import EpisodeRunner
from thinkingbox_training.policies import EndpointPolicy, HFPolicy, SamplingConfig
from thinkingbox_training.vllm_server import VLLMStandIn


def bench_tasks(n: int, lim: Limits) -> list:
    ts = []
    for d in ('travel', 'retail'):
        try:
            get_domain(d)
        except KeyError:
            continue
        ts += generate_tasks(d, 'bench', seed=11, n=8)
    random.Random(0).shuffle(ts)
    return [t.model_copy(update={'limits': lim}) for t in (ts * (n // max(1, len(ts)) + 1))[:n]]


def play(policy, jobs: list, sampling: SamplingConfig) -> tuple:
    r = EpisodeRunner(policy, sampling=sampling, concurrency=len(jobs))
    t0 = time.perf_counter()
    eps = asyncio.run(r.run(jobs))
    return eps, time.perf_counter() - t0


if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--model', default='data/models/tiny-qwen3')
    p.add_argument('--n', type=int, default=16, help='episodes, all live at once')
    p.add_argument('--turns', type=int, default=3)
    p.add_argument('--max-tokens', type=int, default=32)
    a = p.parse_args()
    logging.getLogger('httpx').setLevel(logging.WARNING)  # one INFO line per request otherwise
    sampling = SamplingConfig(temperature=1.0, max_tokens=a.max_tokens, seed=0)
    local = HFPolicy(a.model, sampling=sampling, name=Path(a.model).name)
    jobs = [
        (t, rep)
        for rep, t in enumerate(
            bench_tasks(a.n, Limits(max_turns=a.turns, max_tokens_per_turn=a.max_tokens, max_episode_tokens=16384))
        )
    ]
    print(
        f'model {local.policy_id}: {sum(q.numel() for q in local.model.parameters()) / 1e6:.2f}M parameters; '
        f'{len(jobs)} episodes '
        f'live at once, up to {a.turns} turns of {a.max_tokens} tokens; OMP_NUM_THREADS={os.environ["OMP_NUM_THREADS"]}'
    )
    print(
        'server = the CPU stand-in (VLLMStandIn: transformers, one sequence at a time), NOT vLLM: '
        'the figure is the client '
        "path's cost, not a vLLM server's throughput"
    )
    rows = {}
    e_hf, w_hf = play(local, jobs, sampling)
    with VLLMStandIn(HFPolicy(copy.deepcopy(local.model), local.tokenizer), model_name=local.policy_id) as srv:
        e_srv, w_srv = play(
            EndpointPolicy(None, local.tokenizer, base_url=srv.base_url, sampling=sampling), jobs, sampling
        )
        requests = len(srv.completions)
    for name, eps, wall in (('transformers', e_hf, w_hf), ('server', e_srv, w_srv)):
        toks = sum(sum(e.trajectory.mask) for e in eps)
        rows[name] = len(eps) / wall
        print(
            f'  {name:12}: {wall:7.2f} s  {len(eps) / wall:6.2f} episodes/s  {toks / wall:7.1f} sampled tokens/s  '
            f'reward mean {sum(e.reward or 0 for e in eps) / len(eps):.3f}'
        )
    same = sum(x.trajectory.completion_ids == y.trajectory.completion_ids for x, y in zip(e_hf, e_srv))
    print(
        f'  {requests} server requests; identical episodes (every token) {same}/{len(jobs)}; '
        f'same rewards {sum(x.reward == y.reward for x, y in zip(e_hf, e_srv))}/{len(jobs)}'
    )
    print(f'server_over_transformers={rows["server"] / rows["transformers"]:.2f}')
