"Continuous batching in the episode engine: turns join a running decode; each episode samples what it does alone."

import asyncio, os
import pytest, torch
from thinkingbox_training.episode import EpisodeRunner, _Batcher
from thinkingbox_training.policies import HFPolicy, SamplingConfig
from thinkingbox_training.tasks import generate_tasks, Limits

MODEL = 'data/models/tiny-qwen3'


@pytest.fixture(scope='module')
def pol():
    torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', '1')))
    return HFPolicy(MODEL, sampling=SamplingConfig(temperature=1.0, max_tokens=24, seed=0))


def jobs(n=8):
    lim = Limits(max_turns=3, max_tokens_per_turn=24, max_episode_tokens=8192, wall_clock_s=600)
    ts = [t for d in ('travel', 'retail') for t in generate_tasks(d, 'bench', seed=11, n=1)[: n // 2]]
    return [(t.model_copy(update={'limits': lim}), r) for r, t in enumerate(ts)]


def run(pol, js, concurrency, continuous=True, monkeypatch=None):
    monkeypatch.setattr(_Batcher, 'continuous', continuous)
    r = EpisodeRunner(pol, concurrency=concurrency)
    s0 = dict(pol.stats)
    eps = asyncio.run(r.run(js))
    return eps, {k: pol.stats[k] - s0[k] for k in ('joins', 'decode_steps', 'decode_rows')}, r.stats


def test_turns_join_the_running_decode_with_the_samples_of_one_episode_at_a_time(pol, monkeypatch):
    """At concurrency 4, later turns and new episodes join a decode under way (joins counted by the sampler), and each
    episode's tokens and records equal those of the step-wise batcher and of one episode at a time."""
    js = jobs()
    cont, st, stats = run(pol, js, 4, True, monkeypatch)
    step, st_step, _ = run(pol, js, 4, False, monkeypatch)
    alone, _, _ = run(pol, js, 1, True, monkeypatch)
    assert st['joins'] > 0 and st_step['joins'] == 0
    assert sum(stats['batch_sizes']) == sum(e.trajectory.turns for e in cont)  # every turn counted once
    for a, b, c in zip(cont, step, alone):
        assert a.trajectory.completion_ids == b.trajectory.completion_ids == c.trajectory.completion_ids, a.task.uid
        assert a.reward == b.reward == c.reward and a.trajectory.termination == c.trajectory.termination
    assert sum(len(e.trajectory.completion_ids) for e in cont) > 100  # enough sampled tokens to mean something
