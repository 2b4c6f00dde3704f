"""Sampling ahead (max_staleness >= 1): the weights version of every episode counted exactly, stale groups dropped
and refilled, the importance ratio logged, the episode budget kept, and a run killed mid-way resumed."""

import json, os, signal, subprocess, sys, time, warnings
import pytest, torch
from pathlib import Path

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore', message='.*use_cache=True.*')
from transformers import PrinterCallback, TrainerCallback
from thinkingbox_training.grpo import TBTTrainer
from thinkingbox_training.grpo_core import stamp, staleness
from thinkingbox_training.policies import ScriptedPolicy, tiny_qwen3
from thinkingbox_training.tasks import write_tasks
from grpo_fixtures import pay_task, tokenizer, cpu_config

TOK = tokenizer()
TASKS = [pay_task(i) for i in range(8)]


def trainer(tmp_path, policy=None, callbacks=None, **kw):
    t = TBTTrainer(
        tiny_qwen3(TOK),
        cpu_config(tmp_path / 'out', **kw),
        TASKS,
        processing_class=TOK,
        policy=policy,
        callbacks=callbacks,
    )
    t.remove_callback(PrinterCallback)
    return t


class Nudge(TrainerCallback):
    "Keep the weights each step starts from (version = step); after each step scale the final norm: versions differ."

    def __init__(self):
        self.t, self.start = None, {}

    def on_step_begin(self, args, state, control, **kw):
        self.start[state.global_step] = {k: v.detach().clone() for k, v in self.t.model.state_dict().items()}

    def on_step_end(self, args, state, control, **kw):
        with torch.no_grad():
            self.t.model.model.norm.weight.mul_(1.5)


def replayed_gap(row, weights: dict) -> float:
    "How far `row`'s recorded logprobs are from those a model holding `weights` gives its sampled tokens (max, nats)."
    m = tiny_qwen3(TOK)
    m.load_state_dict(weights)
    ids = torch.tensor([row.prompt_ids + row.completion_ids])
    with torch.no_grad():
        lp = torch.log_softmax(m(input_ids=ids).logits[0, :-1].double(), -1)
    n = len(row.prompt_ids)
    got = lp[n - 1 :].gather(-1, ids[0, n:, None])[:, 0]
    on = torch.tensor(row.env_mask, dtype=torch.bool)
    return float((got[on] - torch.tensor(row.logprobs, dtype=torch.float64)[on]).abs().max())


def test_each_episode_records_the_version_that_sampled_it_and_staleness_is_exact(tmp_path):
    """The model plays its own episodes, one step ahead. The producer's copy of the weights of each version it records
    must be the trainer's weights at the start of the step of that number (fingerprints), so a version counted one off
    (published before the optimizer step, or after the next) fails here; staleness = step - version, within the bound,
    recorded and logged; the importance ratio against the sampler is applied (TRL's) and logged (ours)."""
    nudge = Nudge()
    t = trainer(
        tmp_path,
        callbacks=[nudge],
        max_staleness=1,
        max_steps=4,
        max_tokens_per_turn=8,
        max_turns=2,
        max_refill_rounds=1,
    )
    nudge.t = t
    t.train()
    fp, inst = t._trained_fp, t.producer.installed
    assert len({f[1] for f in fp.values()}) == 4  # the four versions differ, so a wrong label cannot match
    # the producer's copy holds version v's weights (parameters) and its forward uses them (the probe's logprobs)
    assert inst and all(fp[v][0] == inst[v][0] and abs(fp[v][1] - inst[v][1]) < 1e-6 for v in inst), (fp, inst)
    assert 'system_error' not in {k for rec in t.step_log for k in rec['kinds']}
    # and the episodes were sampled by those weights: replayed under version v's, their recorded logprobs agree;
    # under the next version's they do not (so a sampler using other weights than its label's would fail here)
    old = [r for r in t.last_batch if r.versions[0] == 2]  # step 3's first round, sampled while step 2 trained
    assert old, [r.versions for r in t.last_batch]
    for r in old[:2]:
        assert replayed_gap(r, nudge.start[2]) < 1e-3 < replayed_gap(r, nudge.start[3])
    ahead = 0
    for rec in t.step_log:
        step = rec['step']
        for r, vs in zip(rec['rounds'], rec['versions']):
            for v in vs:
                assert 0 <= step - v <= 1 and (r == 0 or v == step)  # refills: this step's own weights
                ahead += step - v
    assert ahead > 0  # some episodes were sampled while an earlier step trained (else this test could not fail)
    logs = [h for h in t.state.log_history if 'loss' in h]
    assert len(logs) == 4 and t.producer.discarded == 0
    for h, rec in zip(logs, t.step_log):
        assert h['tbt/staleness_max'] == max(
            (rec['step'] - v for i in rec['selected'] for v in rec['versions'][i]), default=0
        )
        assert h['tbt/stale_groups'] == 0 and 'sampling/importance_sampling_ratio/mean' in h
        assert {'tbt/behaviour_ratio', 'tbt/behaviour_clip_share', 'tbt/behaviour_kl'} <= set(h)


def test_groups_past_the_bound_are_dropped_counted_and_refilled_within_the_budget(tmp_path):
    """A producer that hands over episodes 2 versions old at max_staleness 1: their groups are 'stale', dropped and
    counted, the step refills them with its own weights; the episode budget counts every generated episode."""
    t = trainer(
        tmp_path, policy=ScriptedPolicy(flaw=0.5, tokenizer=TOK), max_staleness=1, max_steps=3, episode_budget=40
    )
    produce = t._produce
    t._produce = lambda step, version: (
        stamp(produce(step, version), version - 2) if step >= 2 else produce(step, version)
    )
    t.train()
    rec = t.step_log[-1]
    assert rec['step'] == 2 and rec['stale_groups'] == 2 and rec['kinds'][:2] == ['stale', 'stale']
    assert all(rd > 0 for i, rd in enumerate(rec['rounds']) if i in rec['selected'])  # trained on refills only
    assert [h['tbt/stale_groups'] for h in t.state.log_history if 'loss' in h] == [0, 0, 2]
    assert t.training_episodes == sum(len(g) for r in t.step_log for g in r['groups']) <= 40
    assert all(staleness(r, 2) == 0 for r in t.last_batch if not r.filler)
    b = t.step_log[-1]['behaviour']  # the scripted expert records logprob 0.0: ratios below 1, a positive KL
    assert 0 < b['ratio'] < 1 and 0 <= b['clip_share'] <= 1 and b['kl'] > 0


def _recipe(tmp_path, **kw) -> str:
    write_tasks(TASKS, tmp_path / 'tasks.jsonl')
    lines = dict(
        task_files=[str(tmp_path / 'tasks.jsonl')],
        groups_per_step=2,
        group_size=2,
        use_cpu=True,
        bf16=False,
        report_to='none',
        gradient_checkpointing=False,
        output_dir=str(tmp_path / 'run'),
        max_staleness=1,
        max_turns=1,
        max_tokens_per_turn=6,
        max_refill_rounds=0,
        disable_tqdm=True,
        save_strategy='steps',
        save_steps=1,
        **kw,
    )
    (tmp_path / 'r.yaml').write_text(''.join(f'{k}: {json.dumps(v)}\n' for k, v in lines.items()))
    return str(tmp_path / 'r.yaml')


def test_a_run_killed_while_sampling_ahead_resumes_and_ends_at_max_steps(tmp_path):
    """kill -9 once checkpoint-2 is complete, while later steps are sampled ahead; resume: the steps of the checkpoint
    are kept, none trained twice, every step recorded once, the run ends at max_steps. The episodes in flight at the
    kill die with the process; the resumed run samples those steps again (same tasks, same seeds)."""
    base = tmp_path / 'base'
    tiny_qwen3(TOK).save_pretrained(base)
    TOK.save_pretrained(base)
    argv = [
        sys.executable,
        '-c',
        'import sys; from thinkingbox_training.grpo import main; sys.exit(main(sys.argv[1:]))',
        '--config',
        _recipe(tmp_path),
        '--policy_model',
        str(base),
        '--max_steps',
        '6',
    ]
    run = tmp_path / 'run'
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t0 = time.monotonic()
    while not (run / 'checkpoint-2' / 'tbt_state.json').exists():
        assert p.poll() is None, p.stderr.read().decode()[-2000:]
        assert time.monotonic() - t0 < 120
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    done = sorted(int(d.name.split('-')[1]) for d in run.glob('checkpoint-*'))
    assert done[-1] < 6, done  # killed before the end
    assert subprocess.run(argv + ['--resume_from_checkpoint', 'true'], capture_output=True).returncode == 0
    log = json.loads((run / 'training_log.json').read_text())
    assert [s['step'] for s in log['steps']] == list(range(6))
    state = json.loads((run / 'checkpoint-6' / 'trainer_state.json').read_text())
    assert state['global_step'] == 6
    assert [h['step'] for h in state['log_history'] if 'loss' in h] == list(range(1, 7))  # each step once
    assert log['episodes_used'] == 6 * 4 and log['sampled_ahead_unused'] == 0  # the run ended at max_steps


def test_server_mode_samples_ahead_through_its_own_client(tmp_path):
    """use_vllm with max_staleness 1, against the CPU stand-in of a vLLM server: the first rounds of later steps come
    from the server through the producer's own client while a step trains; the weights reach the server once a step
    (its weight check passes), every episode within the bound, the correction logged."""
    from test_vllm_server import train
    from thinkingbox_training.vllm_server import VLLMStandIn
    from thinkingbox_training.policies import HFPolicy

    with VLLMStandIn(HFPolicy(tiny_qwen3(TOK), TOK), model_name='tiny') as srv:
        t, _, _ = train(tmp_path, srv, steps=3, max_staleness=1, learning_rate=1e-3)
    assert [s['step'] for s in t.sync_log] == [0, 1, 2] and t._ahead is not None
    assert all(0 <= rec['step'] - v <= 1 for rec in t.step_log for vs in rec['versions'] for v in vs)
    assert any(rec['step'] - v == 1 for rec in t.step_log for vs in rec['versions'] for v in vs)
    logs = [h for h in t.state.log_history if 'loss' in h]
    assert len(logs) == 3 and all('tbt/behaviour_kl' in h and 'tbt/weight_check_gap' in h for h in logs)


def test_the_async_cluster_recipe_is_the_reference_one_with_the_option(capsys):
    """reference_qwen3_async.yaml differs from reference_qwen3.yaml only in max_staleness and its output folder, and
    passes a dry run; sampling ahead in process over several processes is refused in one line naming the option."""
    import yaml
    from thinkingbox_training.grpo import ConfigError, parse_config

    recipes = Path(__file__).parent.parent / 'scripts' / 'recipes'
    sync, ahead = (
        yaml.safe_load((recipes / f).read_text()) for f in ('reference_qwen3.yaml', 'reference_qwen3_async.yaml')
    )
    assert {k for k in sync.keys() | ahead.keys() if sync.get(k) != ahead.get(k)} == {'max_staleness', 'output_dir'}
    assert ahead['max_staleness'] == 1
    assert (
        parse_config(['--config', str(recipes / 'reference_qwen3_async.yaml'), '--dry_run', 'true']).max_staleness == 1
    )
    with pytest.raises(ConfigError, match='max_staleness=1') as e:
        parse_config(
            [
                '--config',
                str(recipes / 'reference_qwen3_async.yaml'),
                '--use_vllm',
                'false',
                '--top_p',
                '1.0',
                '--top_k',
                '0',
                '--dry_run',
                'true',
            ]
        )
    assert '\n' not in str(e.value)
