"""Rollout throughput of the episode engine.

    python benchmarks/rollout_throughput.py [--model DIR] [--n 8,32,64] [--max-tokens 48]

1. The scripted expert (environment-bound): episodes per second and the share of wall time in each stage.
2. A small local model on CPU: N episodes run concurrently (one batched generate call per step) against the
   same N episodes at concurrency 1 (same model, tasks and seeds), for each N. The model is the shipped base
   policy when `data/models/` has one (or --model), else a randomly initialised tiny Qwen3 on a tokenizer
   trained on the domains' text (it samples junk, so its episodes are short; the batching ratio is what counts).
3. With --concurrency 16,32,64: a probe-like campaign (--probe episodes of --probe-turns turns) at each
   concurrency, twice over, in one process: wall time, episodes/s and the run's peak RSS (VmHWM, reset before each
   run), so memory growth across runs shows.
4. With --compare 16,32 (the default): continuous batching (requests join the running decode, rows leave as they
   end) against step-wise batching (`_Batcher.continuous = False`: one call when every live episode waits, decoded
   until its longest row ends), on the same --compare-episodes main-job-like episodes (up to --probe-turns turns of
   up to 96 tokens) at each concurrency, --compare-reps runs of each in alternating order: rows per decode forward,
   sampled tokens/s, wall and process CPU seconds (and the sampling thread's CPU in prefill and decode), and how
   many episodes sampled the very same tokens in every run.
The last lines are `batched_speedup_cpu_32=<ratio of process CPU times>` and `batched_speedup_32=<ratio of wall times>`
(with --n including 32), then `continuous_cpu_ratio_32=<step-wise / continuous process CPU>` and
`rows_per_forward_32=<continuous>` (with --compare including 32).
"""

import argparse, asyncio, os, random, statistics, time

os.environ.setdefault('OMP_NUM_THREADS', '1')
from pathlib import Path
import torch

torch.set_num_threads(int(os.environ['OMP_NUM_THREADS']))
from thinkingbox_training.tasks import generate_tasks, get_domain, Limits
from thinkingbox_training.episode import EpisodeRunner, _Batcher
from thinkingbox_training.policies import ScriptedPolicy, HFPolicy, SamplingConfig, tiny_qwen3
from thinkingbox_training.interpret import make_tokenizer


def domains():
    out = []
    for d in ('travel', 'retail'):
        try:
            get_domain(d)
            out.append(d)
        except KeyError:
            pass
    return out


def bench_tasks(n):
    ts = [t for d in domains() for t in generate_tasks(d, 'bench', seed=11, n=8)]
    random.Random(0).shuffle(ts)
    return (ts * (n // max(1, len(ts)) + 1))[:n]


def rss_mb(field='VmRSS') -> float:
    "This process's resident memory (VmRSS) or its peak since the last reset (VmHWM), in MB (Linux)."
    for line in open('/proc/self/status'):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
    return float('nan')


def reset_peak():
    "Start a new peak-RSS window (Linux: writing 5 to clear_refs resets VmHWM)."
    try:
        open('/proc/self/clear_refs', 'w').write('5')
    except OSError:
        pass


def run(policy, jobs, concurrency):
    r = EpisodeRunner(policy, concurrency=concurrency)
    t0, c0 = time.perf_counter(), time.process_time()
    eps = asyncio.run(r.run(jobs))
    r.stats['cpu_s'] = time.process_time() - c0  # all threads; unlike wall time, not inflated by other processes
    return eps, time.perf_counter() - t0, r.stats


def load_model(path):
    if path and Path(path).exists():
        return HFPolicy(path, sampling=SAMPLING, name=Path(path).name)
    shipped = sorted(Path('data/models').glob('*/config.json')) if Path('data/models').exists() else []
    if shipped:
        return HFPolicy(shipped[0].parent, sampling=SAMPLING, name=shipped[0].parent.name)
    texts = []
    for t in bench_tasks(64):
        dom = get_domain(t.domain)
        texts += [t.query, dom.policy, str(dom.tool_specs())]
    tok = make_tokenizer(texts, vocab_size=2048)
    return HFPolicy(tiny_qwen3(tok, hidden_size=128, layers=2, intermediate=384), tok, SAMPLING, name='tiny-random')


if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument('--model', default=None)
    p.add_argument('--n', default='8,32,64')
    p.add_argument('--max-tokens', type=int, default=48)
    p.add_argument('--turns', type=int, default=3)
    p.add_argument(
        '--concurrency', default='', help='comma-separated concurrencies for the probe-like sweep (e.g. 16,32,64)'
    )
    p.add_argument('--probe', type=int, default=96, help='episodes of the probe-like sweep')
    p.add_argument('--probe-turns', type=int, default=6)
    p.add_argument('--compare', default='16,32', help='concurrencies for continuous vs step-wise batching ("" skips)')
    p.add_argument('--compare-episodes', type=int, default=64)
    p.add_argument('--compare-reps', type=int, default=2)
    p.add_argument('--skip-scripted', action='store_true', help='skip part 1 (the scripted expert)')
    a = p.parse_args()
    SAMPLING = SamplingConfig(temperature=1.0, max_tokens=a.max_tokens, seed=0)

    if not a.skip_scripted:
        jobs = [(t, 0) for t in bench_tasks(256)]
        eps, wall, st = run(ScriptedPolicy(), jobs, 64)
        assert all(e.reward == 1 for e in eps), 'the expert must pass every task'
        print(
            f'scripted expert: {len(eps)} episodes in {wall:.2f} s = {len(eps) / wall:.1f} episodes/s (concurrency 64)'
        )
        eps1, wall1, st1 = run(ScriptedPolicy(), jobs[:64], 1)  # one at a time: stage times do not overlap
        stages = ('setup_s', 'model_s', 'tool_s', 'user_s', 'grade_s')
        print(
            f'  at concurrency 1: {64 / wall1:.1f} episodes/s; share of wall time: '
            + ', '.join(f'{k[:-2]} {st1[k] / wall1:.0%}' for k in stages)
            + f', engine/other {1 - sum(st1[k] for k in stages) / wall1:.0%}'
        )

    pol = load_model(a.model)
    print(
        f'model {pol.policy_id}: {sum(p.numel() for p in pol.model.parameters()) / 1e6:.2f}M parameters, '
        f'max {a.max_tokens} tokens per turn, {a.turns} turns per episode, '
        f'OMP_NUM_THREADS={os.environ["OMP_NUM_THREADS"]}'
    )
    speed, cpu = {}, {}
    for n in [int(x) for x in a.n.split(',') if x]:
        lim = Limits(max_turns=a.turns, max_tokens_per_turn=a.max_tokens, max_episode_tokens=8192)
        tasks = [t.model_copy(update={'limits': lim}) for t in bench_tasks(n)]
        jobs = [(t, 0) for t in tasks]
        p0 = dict(pol.stats)
        eb, wb, sb = run(pol, jobs, n)
        p1 = dict(pol.stats)
        es, ws, ss = run(pol, jobs, 1)
        p2 = dict(pol.stats)

        def split(a, b, w):
            pre, dec = b['prefill_s'] - a['prefill_s'], b['decode_s'] - a['decode_s']
            return f'prefill {pre:.2f} s, decode {dec:.2f} s, rest {w - pre - dec:.2f} s'

        same = sum(x.trajectory.completion_ids == y.trajectory.completion_ids for x, y in zip(eb, es))
        toks = sum(sum(e.trajectory.mask) for e in eb)
        speed[n] = ws / wb
        print(
            f'  N={n:3}: batched {wb:7.2f} s ({n / wb:6.2f} ep/s, {toks / wb:7.0f} sampled tok/s, '
            f'{sb["model_calls"]} model calls) | sequential {ws:7.2f} s ({n / ws:6.2f} ep/s)'
            f' | speedup {ws / wb:5.2f}x | identical samples {same}/{n}'
        )
        print(f'         where the time goes: batched {split(p0, p1, wb)} | sequential {split(p1, p2, ws)}')
        cpu[n] = ss['cpu_s'] / sb['cpu_s']
        print(
            f'         process CPU: batched {sb["cpu_s"]:.2f} s, sequential {ss["cpu_s"]:.2f} s, speedup {cpu[n]:.2f}x'
        )
    if a.concurrency:
        lim = Limits(
            max_turns=a.probe_turns, max_tokens_per_turn=a.max_tokens, max_episode_tokens=8192, wall_clock_s=3600
        )
        jobs = [(t.model_copy(update={'limits': lim}), rep) for rep, t in enumerate(bench_tasks(a.probe))]
        first = None
        print(
            f'probe-like sweep: {len(jobs)} episodes of up to {a.probe_turns} turns, '
            'each concurrency twice in this process'
        )
        for rnd in (1, 2):
            for c in [int(x) for x in a.concurrency.split(',')]:
                reset_peak()
                e, w, st = run(pol, jobs, c)
                ids = [x.trajectory.completion_ids for x in e]
                first = first or ids
                toks = sum(sum(x.trajectory.mask) for x in e)
                live = sum(st['batch_sizes']) / max(1, len(st['batch_sizes']))
                same = sum(x == y for x, y in zip(ids, first))
                print(
                    f'  run {rnd} concurrency {c:3}: {w:7.2f} s ({len(e) / w:5.2f} ep/s, '
                    f'{toks / w:6.0f} sampled tok/s, mean live batch {live:5.1f})'
                    f' | peak RSS {rss_mb("VmHWM"):6.0f} MB, after {rss_mb():6.0f} MB'
                    f' | samples identical to the first run: {same}/{len(ids)}'
                )
    cont = {}
    if a.compare:
        lim = Limits(max_turns=a.probe_turns, max_tokens_per_turn=96, max_episode_tokens=8192, wall_clock_s=3600)
        jobs = [(t.model_copy(update={'limits': lim}), rep) for rep, t in enumerate(bench_tasks(a.compare_episodes))]
        print(
            f'continuous vs step-wise batching: {len(jobs)} episodes of up to {a.probe_turns} turns of up to 96 '
            f'tokens, {a.compare_reps} runs of each, alternating (medians; the machine load changes between runs)'
        )
        for c in [int(x) for x in a.compare.split(',')]:
            got = {'step-wise': [], 'continuous': []}
            for rep in range(a.compare_reps):
                for mode in ('step-wise', 'continuous') if rep % 2 == 0 else ('continuous', 'step-wise'):
                    _Batcher.continuous = mode == 'continuous'
                    p0 = dict(pol.stats)
                    e, w, st = run(pol, jobs, c)
                    d = {k: pol.stats[k] - p0[k] for k in pol.stats}
                    toks = sum(sum(x.trajectory.mask) for x in e)
                    rpf = d['decode_rows'] / max(1, d['decode_steps'])
                    got[mode].append((w, st['cpu_s'], rpf, [x.trajectory.completion_ids for x in e]))
                    print(
                        f'  concurrency {c:3} {mode:10}: {w:6.2f} s wall, {st["cpu_s"]:6.2f} s CPU (sampling thread: '
                        f'prefill {d["prefill_cpu_s"]:5.2f}, decode {d["decode_cpu_s"]:5.2f}), {toks / w:5.0f} sampled '
                        f'tok/s ({toks / st["cpu_s"]:4.0f} per CPU s), {rpf:4.1f} rows per forward, '
                        f'{d["decode_steps"]} decode forwards, {d["joins"]} joins, load {os.getloadavg()[0]:.1f}'
                    )
            _Batcher.continuous = True
            med = lambda mode, i, got=got: statistics.median(r[i] for r in got[mode])
            ref = got['step-wise'][0][3]
            same = min(sum(x == y for x, y in zip(r[3], ref)) for m in got for r in got[m])
            cont[c] = (med('step-wise', 1) / med('continuous', 1), med('continuous', 2))
            print(
                f'  concurrency {c:3}: continuous/step-wise (medians): '
                f'wall {med("step-wise", 0) / med("continuous", 0):.2f}x faster, CPU {cont[c][0]:.2f}x less, '
                f'rows per forward {med("step-wise", 2):.1f} -> {cont[c][1]:.1f}'
                f' | identical samples in every run {same}/{len(jobs)}'
            )
    if 32 in speed:
        print(f'batched_speedup_cpu_32={cpu[32]:.2f}\nbatched_speedup_32={speed[32]:.2f}')
    if 32 in cont:
        print(f'continuous_cpu_ratio_32={cont[32][0]:.2f}\nrows_per_forward_32={cont[32][1]:.1f}')
