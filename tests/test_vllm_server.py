"""The stand-in vLLM server: TRL's VLLMClient against it, EndpointPolicy token-exact through it, TRL's weight sync into
it over vLLM's endpoints (the gloo transport in place of NCCL), weight loads recorded."""

import asyncio, contextlib, copy, socket, time, types
import pytest, torch
from thinkingbox_training.policies import EndpointPolicy, GenRequest, HFPolicy, SamplingConfig, tiny_qwen3
from thinkingbox_training.vllm_server import BadRequest, VLLMStandIn, cpu_weight_transfer, weights_digest
from grpo_fixtures import tokenizer

TOK = tokenizer()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def trl_generation(model, srv):
    "TRL's server-mode VLLMGeneration on `model` (call inside cpu_weight_transfer()), joined to the stand-in's group."
    from accelerate import Accelerator
    from trl.generation.vllm_generation import VLLMGeneration

    return VLLMGeneration(
        model=model,
        accelerator=Accelerator(cpu=True),
        processing_class=TOK,
        mode='server',
        server_base_url=srv.url,
        group_port=free_port(),
        server_timeout=10,
    )


@pytest.fixture
def served():
    model = tiny_qwen3(TOK)
    local = HFPolicy(model, TOK, SamplingConfig(max_tokens=10), name='local')
    with VLLMStandIn(HFPolicy(copy.deepcopy(model), TOK), model_name='tiny') as srv:
        yield local, srv


def prompt(local, text='Please pay 300 cents from AC-1.'):
    return local.fmt.prompt_ids([{'role': 'user', 'content': text}])


def test_trl_vllm_client_runs_against_the_stand_in(served, monkeypatch):
    import trl.generation.vllm_client as vc

    monkeypatch.setattr(
        vc, 'is_vllm_available', lambda *a, **k: True
    )  # VLLMClient refuses to start without vLLM; only HTTP is used
    local, srv = served
    client = vc.VLLMClient(base_url=srv.url)
    assert client.model == 'tiny' and client.get_world_size() == 1
    assert client.get_server_info()['model_config']['logprobs_mode'] == 'processed_logprobs'
    ids = [prompt(local), prompt(local, 'Hello.')]
    out = client.generate(ids, n=2, temperature=1.0, max_tokens=10, generation_kwargs={'seed': 7})
    assert out['prompt_ids'] == ids and len(out['completion_ids']) == 4
    want = local.sample([ids[0], ids[0]], [7, 8], 10)  # the n samples of a prompt take seeds seed, seed+1
    assert out['completion_ids'][:2] == [g.token_ids for g in want]
    got_lp = [row[0] for row in out['logprobs'][0]]
    assert torch.allclose(torch.tensor(got_lp), torch.tensor(want[0].logprobs), atol=1e-5)
    client.reset_prefix_cache()
    assert [p for _, m, p in srv.calls if m == 'POST'] == ['/v1/completions', '/reset_prefix_cache']
    with pytest.raises(Exception, match='does not implement repetition_penalty'):
        client.generate(ids, repetition_penalty=1.2, max_tokens=4)


def test_endpoint_policy_is_token_exact_with_logprobs(served):
    local, srv = served
    p = prompt(local)
    ep = EndpointPolicy(None, TOK, base_url=srv.base_url, sampling=local.sampling)
    seeds = [2**62 + 11, 5, 123456789]  # whole 63-bit attempt seeds reach the server
    reqs = [
        GenRequest(messages=[], tools=[], task=None, repetition=i, turn=0, seed=s, max_tokens=10, prompt_ids=p)
        for i, s in enumerate(seeds)
    ]
    got = asyncio.run(ep.generate(reqs))
    want = local.sample([p] * 3, seeds, 10)
    assert [g.token_ids for g in got] == [g.token_ids for g in want]
    for g, w in zip(got, want):
        assert g.finish == w.finish and g.text == local.fmt.decode(w.token_ids)
        assert all(abs(a - b) < 1e-5 for a, b in zip(g.logprobs, w.logprobs))
    assert sorted(c['seed'] for c in srv.completions) == sorted(seeds)  # requests run concurrently
    assert ep.policy_id == 'endpoint:tiny'


def test_concurrent_turns_share_one_decode_and_a_next_turn_its_kept_cache_token_exact(served):
    """The sequences of concurrent requests are decoded in one batch (more than one row per forward), an episode's
    next turn starts from its previous turn's kept KV cache (only its new tokens are fed), and neither changes a
    token or a logprob: the stand-in sampling each sequence alone (batched=False) gives the same."""
    local, srv = served
    alone = VLLMStandIn(HFPolicy(copy.deepcopy(srv.policy.model), TOK), batched=False)  # complete() called directly
    p, st = prompt(local), srv.policy.stats
    ep = EndpointPolicy(None, TOK, base_url=srv.base_url, sampling=local.sampling)

    def req(ids, seed):
        return GenRequest(
            messages=[], tools=[], task=None, repetition=0, turn=0, seed=seed, max_tokens=10, prompt_ids=ids
        )

    got = asyncio.run(ep.generate([req(p, s) for s in range(6)]))
    assert st['decode_rows'] > st['decode_steps'] > 0, st
    nxt = p + got[0].token_ids + p[-4:]  # the first episode's next turn: its history and a few new tokens
    fed = st['prefill_tokens']
    got.append(asyncio.run(ep.generate([req(nxt, 9)]))[0])
    assert st['prefill_tokens'] - fed == len(nxt) - (len(p) + len(got[0].token_ids) - 1)  # what the cache lacks
    want = alone._sample_all([(p, s) for s in range(6)] + [(nxt, 9)], 10, local.sampling)
    assert [g.token_ids for g in got] == [g.token_ids for g in want]
    assert max(abs(a - b) for g, w in zip(got, want) for a, b in zip(g.logprobs, w.logprobs)) < 1e-5
    assert [c['seed'] for c in alone.completions] == [*range(6), 9] and len(srv.completions) == 7


@pytest.mark.slow  # a process that imports torch and transformers: 10-30 s
def test_tbt_vllm_standin_serves_a_checkpoint_in_a_process_of_its_own(tmp_path):
    """`tbt vllm-standin CHECKPOINT --port P`: a server process the trainer's client reaches over HTTP, sampling the
    checkpoint's own tokens; a SIGTERM from the process that started it ends it cleanly."""
    import subprocess, sys

    model = tiny_qwen3(TOK)
    model.save_pretrained(tmp_path / 'ckpt')
    TOK.save_pretrained(tmp_path / 'ckpt')
    port, code = free_port(), 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
    argv = [sys.executable, '-c', code, 'vllm-standin', str(tmp_path / 'ckpt'), '--port', str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        from thinkingbox_training.grpo_core import check_vllm_server

        assert check_vllm_server(f'http://127.0.0.1:{port}', 120)['model'] == 'ckpt'
        local = HFPolicy(model, TOK, SamplingConfig(max_tokens=8))
        ep = EndpointPolicy(None, TOK, base_url=f'http://127.0.0.1:{port}/v1', sampling=local.sampling)
        p = prompt(local)
        req = GenRequest(messages=[], tools=[], task=None, repetition=0, turn=0, seed=3, max_tokens=8, prompt_ids=p)
        assert asyncio.run(ep.generate([req]))[0].token_ids == local.sample([p], [3], 8)[0].token_ids
    finally:
        proc.terminate()
        rc = proc.wait(timeout=30)
    assert rc == 0, proc.stderr.read().decode()[-1000:]


def test_a_server_reading_other_prompt_ids_is_refused(served, monkeypatch):
    local, srv = served
    real = srv.complete
    monkeypatch.setattr(
        srv, 'complete', lambda body: real({**body, 'prompt': body['prompt'][:-1]})
    )  # a server that drops a token
    ep = EndpointPolicy('tiny', TOK, base_url=srv.base_url)
    req = GenRequest(
        messages=[], tools=[], task=None, repetition=0, turn=0, seed=1, max_tokens=4, prompt_ids=prompt(local)
    )
    with pytest.raises(RuntimeError, match='not token-exact'):
        asyncio.run(ep.generate([req]))


def test_weight_sync_loads_the_trainers_weights_and_is_recorded(served):
    "TRL's own VLLMGeneration.sync_weights (transport replaced) over vLLM's endpoints, with TRL's JSON."
    local, srv = served
    with torch.no_grad():
        for q in local.model.parameters():
            q.add_(0.01 * torch.randn_like(q))
    assert srv.digest != weights_digest(local.model)
    with cpu_weight_transfer(timeout_s=30):
        gen = trl_generation(local.model, srv)
        gen.sync_weights()
    assert srv.digest == weights_digest(local.model) and [w['version'] for w in srv.weight_loads] == [1]
    assert srv.weight_loads[0]['tensors'] == len(list(local.model.parameters()))
    assert [p for _, m, p in srv.calls if m == 'POST'] == [
        '/init_weight_transfer_engine',
        '/start_weight_update',
        '/update_weights',
        '/finish_weight_update',
        '/reset_prefix_cache',
    ]
    p = prompt(local)
    out = srv.complete({'prompt': p, 'seed': 3, 'max_tokens': 10, 'return_token_ids': True})
    assert out['choices'][0]['token_ids'] == local.sample([p], [3], 10)[0].token_ids
    assert srv.completions[-1]['weights_version'] == 1


def test_trl_sync_weights_serves_exactly_the_trainers_weights(served):
    "After TRL's sync the stand-in samples, through TRL's own client, the tokens and logprobs of the trainer's model."
    local, srv = served
    p = prompt(local)
    with torch.no_grad():
        for q in local.model.parameters():
            q.mul_(1.5)
    want = local.sample([p, p], [7, 8], 10)
    with cpu_weight_transfer(timeout_s=30):
        gen = trl_generation(local.model, srv)
        before = gen.vllm_client.generate([p], n=2, temperature=1.0, max_tokens=10, generation_kwargs={'seed': 7})
        assert before['completion_ids'] != [g.token_ids for g in want]  # the server still holds the old weights
        for _ in range(2):  # a second sync, on the same group
            gen.sync_weights()
        out = gen.vllm_client.generate([p], n=2, temperature=1.0, max_tokens=10, generation_kwargs={'seed': 7})
    assert out['completion_ids'] == [g.token_ids for g in want]
    for row, w in zip(out['logprobs'], want):
        assert torch.allclose(torch.tensor([x[0] for x in row]), torch.tensor(w.logprobs), atol=1e-5)
    assert [w['version'] for w in srv.weight_loads] == [1, 2] and srv.digest == weights_digest(local.model)


def test_weight_transfer_without_an_engine_is_refused_naming_it(served):
    _, srv = served
    for path in ('/start_weight_update', '/update_weights', '/finish_weight_update'):
        with pytest.raises(BadRequest, match='init_weight_transfer_engine: no weight-transfer engine'):
            srv.handle('POST', path, {'update_info': {}})  # answered 400 by the HTTP layer (see reliability)
    assert srv.digest == weights_digest(srv.policy.model) and srv.weight_loads == []


def test_the_gloo_transport_stands_in_only_without_vllm(monkeypatch):
    import trl.generation.vllm_client as vc

    monkeypatch.setattr(vc, 'NCCLWeightTransferEngine', object(), raising=False)  # as where vLLM is installed
    with pytest.raises(RuntimeError, match='vLLM is installed'):
        with cpu_weight_transfer():
            pass
    monkeypatch.undo()
    with cpu_weight_transfer():
        assert vc.is_vllm_available()
    assert not hasattr(vc, 'NCCLWeightTransferEngine')  # restored as it was


# ---------------------------------------------------------------- training with use_vllm, through the stand-in

import os, warnings

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore', message='.*use_cache=True.*')
from transformers import PrinterCallback, TrainerCallback
from thinkingbox_training.grader import Grader, Verdict
from thinkingbox_training.grpo import TBTConfig, TBTTrainer
from grpo_fixtures import pay_task

TASKS = [pay_task(i) for i in range(8)]


class ParityGrader(Grader):
    "Reward 1 when the last message has an even length: a random model's groups are then mixed, and steps train."

    async def grade(self, task, db, final_message='', transcript=None):
        return Verdict(reward=int(len(final_message) % 2 == 0))


class Batches(TrainerCallback):
    "The token ids of every step's trained rows."

    def __init__(self):
        self.trainer, self.steps = None, []

    def on_step_end(self, args, state, control, **kw):
        self.steps.append([r.completion_ids for r in self.trainer.last_batch])


def train(tmp_path, srv=None, steps=2, peft_config=None, **kw):
    "Two real steps on the tiny model, episodes sampled in process or (srv) by the stand-in through the client path."
    model = tiny_qwen3(TOK)  # seeded: the same initial weights every call
    base = dict(
        output_dir=str(tmp_path / 'out'),
        groups_per_step=2,
        group_size=4,
        max_steps=steps,
        max_refill_rounds=1,
        learning_rate=1e-2,
        seed=0,
        max_turns=2,
        max_tokens_per_turn=10,
        use_cpu=True,
        bf16=False,
        gradient_checkpointing=False,
        report_to='none',
        save_strategy='no',
        disable_tqdm=True,
    )
    if srv is not None:
        base.update(use_vllm=True, vllm_server_base_url=srv.url, vllm_group_port=free_port())
    cb, sync = Batches(), types.SimpleNamespace(calls=[])  # sync.calls: (time, the trainer's digest) of every sync
    with cpu_weight_transfer(timeout_s=60) if srv is not None else contextlib.nullcontext():
        cfg = TBTConfig(**{**base, **kw})
        t = TBTTrainer(
            model, cfg, TASKS, processing_class=TOK, grader=ParityGrader(), callbacks=[cb], peft_config=peft_config
        )
        if srv is not None:  # TRL's VLLMGeneration; its sync_weights recorded as it starts
            real = t.vllm_generation.sync_weights

            def recorded():
                sync.calls.append((time.monotonic(), weights_digest(t.model)))
                real()

            t.vllm_generation.sync_weights = recorded
        t.remove_callback(PrinterCallback)
        cb.trainer = t
        t.train()
    return t, cb.steps, sync


@pytest.fixture
def stand_in():
    with VLLMStandIn(HFPolicy(tiny_qwen3(TOK), TOK), model_name='tiny') as srv:
        yield srv


def test_each_step_samples_with_the_weights_just_updated(tmp_path, stand_in):
    t, _, sync = train(tmp_path, stand_in)
    assert (
        not any(r['skipped'] for r in t.step_log) and max(r['rounds'][-1] for r in t.step_log) >= 1
    )  # steps trained; refills ran
    # one sync per step, before its first round, on the trainer's weights of that moment; no second sync for refill
    # rounds, and TRL's own sync of the step a no-op
    assert [s['step'] for s in t.sync_log] == [0, 1] and [w['version'] for w in stand_in.weight_loads] == [1, 2]
    (t0, d0), (t1, d1) = sync.calls
    assert d0 != d1  # the first step changed the weights
    for c in stand_in.completions:  # every sample, refill rounds included, used the weights of the latest sync
        assert c['digest'] == (d1 if c['t'] > t1 else d0) and c['t'] > t0
    assert {c['weights_version'] for c in stand_in.completions} == {1, 2}
    # after each sync the server scored the probe with exactly the trainer's weights
    assert [s['step'] for s in t.sync_log] == [0, 1] and max(s['weight_gap'] for s in t.sync_log) < 1e-5, t.sync_log
    gaps = [h['tbt/logprob_gap/mean'] for h in t.state.log_history if 'loss' in h]
    assert len(gaps) == 2 and max(gaps) < 1e-4, gaps  # the gap is logged every step
    assert all(
        'sampling/importance_sampling_ratio/mean' in h for h in t.state.log_history if 'loss' in h
    )  # TRL's correction ran


@pytest.mark.slow
def test_use_vllm_trains_like_the_transformers_sampler(tmp_path, stand_in):
    t_hf, ids_hf, _ = train(tmp_path / 'hf')
    t_srv, ids_srv, _ = train(tmp_path / 'srv', stand_in)
    # the same episodes: tasks, repetitions (seeds), rewards, and every trained token id, step by step
    assert [r['groups'] for r in t_srv.step_log] == [r['groups'] for r in t_hf.step_log]
    assert ids_srv == ids_hf
    gaps = [h['tbt/logprob_gap/mean'] for h in t_hf.state.log_history if 'loss' in h]
    assert len(gaps) == 2 and max(gaps) < 1e-4, gaps


@pytest.mark.parametrize(
    'top_k', [0, 5]
)  # caught by the gap itself, and (top-k: a gap is expected) by the certainty it claims
def test_a_sampler_recording_zero_logprobs_stops_training(tmp_path, stand_in, monkeypatch, top_k):
    real = stand_in.complete

    def zeroed(body):
        out = real(body)
        for c in out['choices']:
            if c['logprobs']:  # not the weight check's probe, which asks for prompt_logprobs only
                c['logprobs']['token_logprobs'] = [0.0] * len(c['token_ids'])
        return out

    monkeypatch.setattr(stand_in, 'complete', zeroed)
    with pytest.raises(RuntimeError, match='the sampler is not the model being trained'):
        train(tmp_path, stand_in, steps=1, top_k=top_k)


def test_a_server_without_processed_logprobs_is_refused(tmp_path, stand_in, monkeypatch):
    real = stand_in.handle
    monkeypatch.setattr(
        stand_in,
        'handle',
        lambda m, p, b: (
            (200, {'vllm_config': {'model_config': {'logprobs_mode': 'raw_logprobs'}}})
            if p == '/server_info'
            else real(m, p, b)
        ),
    )
    with pytest.raises(ValueError, match='restart it with --logprobs-mode processed_logprobs'):
        train(tmp_path, stand_in, steps=1)


def test_colocate_and_uncorrected_truncated_sampling_are_refused(tmp_path):
    base = dict(output_dir=str(tmp_path), groups_per_step=2, group_size=4, use_cpu=True, bf16=False, report_to='none')
    with pytest.raises(ValueError, match='colocate mode'):
        TBTConfig(use_vllm=True, vllm_mode='colocate', **base)
    with pytest.raises(ValueError, match='to vLLM rollouts only'):
        TBTConfig(top_k=20, **base)
    with pytest.raises(ValueError, match='to vLLM rollouts only'):
        TBTConfig(use_vllm=True, top_p=0.95, vllm_importance_sampling_correction=False, **base)
    c = TBTConfig(use_vllm=True, top_p=0.95, top_k=20, **base)
    assert (c.vllm_mode, c.vllm_importance_sampling_mode, c.vllm_importance_sampling_clip_max) == (
        'server',
        'token_truncate',
        3.0,
    )


def test_top_k_sampling_trains_with_the_importance_sampling_correction(tmp_path, stand_in):
    t, _, _ = train(tmp_path, stand_in, steps=1, top_k=5)
    h = [h for h in t.state.log_history if 'loss' in h][0]
    # the sampler's logprobs are those of the top-5 distribution: each kept token is likelier there than under the whole
    # one TRL scores, so the gap is real and every importance ratio (trainer's over sampler's probability) is at most 1
    assert h['tbt/logprob_gap/mean'] > 0.01 and h['sampling/importance_sampling_ratio/max'] <= 1 + 1e-5
    assert h['sampling/importance_sampling_ratio/min'] < 0.99


def test_truncated_sampling_without_recorded_logprobs_stops(tmp_path, stand_in, monkeypatch):
    real = stand_in.complete

    def unknown(body):
        out = real(body)
        for c in out['choices']:
            if c['logprobs']:  # not the weight check's probe, which asks for prompt_logprobs only
                c['logprobs']['token_logprobs'] = [None] * len(c['token_ids'])
        return out

    monkeypatch.setattr(stand_in, 'complete', unknown)
    with pytest.raises(RuntimeError, match='have no recorded logprob'):
        train(tmp_path, stand_in, steps=1, top_k=5)


def test_a_server_that_misses_weight_syncs_stops_the_run_at_the_tiny_recipes_lr(tmp_path):
    """A server that answers every weight update but keeps its old weights: the probe scored after the sync of step 1
    differs from the trained model's (0.035 nats measured, tolerance 1e-3), and the run stops there; the sampled
    tokens' logprob gap alone (0.5 nats) lets such a run train."""
    with VLLMStandIn(HFPolicy(tiny_qwen3(TOK), TOK), model_name='tiny', ignore_weight_updates=True) as srv:
        t, _, _ = train(tmp_path / 'unchecked', srv, steps=2, learning_rate=2e-4, weight_check_tolerance=None)
        gaps = [h['tbt/logprob_gap/mean'] for h in t.state.log_history if 'loss' in h]
        assert len(gaps) == 2 and max(gaps) < 0.1, gaps  # both steps trained on stale samples
        with pytest.raises(RuntimeError, match=r'sync of step 1: .* not serving the weights just sent'):
            train(tmp_path / 'checked', srv, steps=2, learning_rate=2e-4)
        assert srv.weight_loads and not any(w['applied'] for w in srv.weight_loads)


def test_lora_syncs_the_merged_weights_into_the_server(tmp_path, stand_in):
    """With LoRA, TRL's _iter_named_params merges the adapters and sends base-model names: the server then holds the
    merged weights (the weight check, tolerance 1e-3, passes after each step's sync) and samples with them."""
    from peft import LoraConfig

    lora = LoraConfig(r=4, lora_alpha=8, target_modules=['q_proj', 'v_proj'], lora_dropout=0.0, task_type='CAUSAL_LM')
    t, _, _ = train(tmp_path, stand_in, peft_config=lora, learning_rate=5e-2)
    assert not any(r['skipped'] for r in t.step_log) and [s['step'] for s in t.sync_log] == [0, 1]
    assert max(s['weight_gap'] for s in t.sync_log) < 1e-5 and t.sync_log[1]['weights_moved'] > 1e-3, t.sync_log
    merged = copy.deepcopy(t.model).merge_and_unload()
    assert stand_in.digest != weights_digest(merged)  # step 1 trained after the last sync
    assert stand_in.weight_loads[-1]['tensors'] == len(list(merged.parameters()))
