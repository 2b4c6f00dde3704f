"The stand-in vLLM server: TRL's own VLLMClient against it, EndpointPolicy token-exact through it, weight loads recorded."
import asyncio, copy, math
from pathlib import Path
import pytest, torch
from thinkingbox_training.policies import EndpointPolicy, GenRequest, HFPolicy, SamplingConfig, tiny_qwen3
from thinkingbox_training.vllm_server import VLLMStandIn, StandInWeightSync, weights_digest
from grpo_fixtures import tokenizer

TOK = tokenizer()

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
    monkeypatch.setattr(vc, 'is_vllm_available', lambda *a, **k: True)   # VLLMClient refuses to start without vLLM; only HTTP is used
    local, srv = served
    client = vc.VLLMClient(base_url=srv.url)
    assert client.model == 'tiny' and client.get_world_size() == 1
    assert client.get_server_info()['model_config']['logprobs_mode'] == 'processed_logprobs'
    ids = [prompt(local), prompt(local, 'Hello.')]
    out = client.generate(ids, n=2, temperature=1.0, max_tokens=10, generation_kwargs={'seed': 7})
    assert out['prompt_ids'] == ids and len(out['completion_ids']) == 4
    want = local.sample([ids[0], ids[0]], [7, 8], 10)   # the n samples of a prompt take seeds seed, seed+1
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
    seeds = [2**62 + 11, 5, 123456789]                # whole 63-bit attempt seeds reach the server
    reqs = [GenRequest(messages=[], tools=[], task=None, repetition=i, turn=0, seed=s, max_tokens=10, prompt_ids=p)
            for i, s in enumerate(seeds)]
    got = asyncio.run(ep.generate(reqs))
    want = local.sample([p] * 3, seeds, 10)
    assert [g.token_ids for g in got] == [g.token_ids for g in want]
    for g, w in zip(got, want):
        assert g.finish == w.finish and g.text == local.fmt.decode(w.token_ids)
        assert all(abs(a - b) < 1e-5 for a, b in zip(g.logprobs, w.logprobs))
    assert sorted(c['seed'] for c in srv.completions) == sorted(seeds)     # requests run concurrently
    assert ep.policy_id == 'endpoint:tiny'

def test_a_server_reading_other_prompt_ids_is_refused(served, monkeypatch):
    local, srv = served
    real = srv.complete
    monkeypatch.setattr(srv, 'complete', lambda body: real({**body, 'prompt': body['prompt'][:-1]}))  # a server that drops a token
    ep = EndpointPolicy('tiny', TOK, base_url=srv.base_url)
    req = GenRequest(messages=[], tools=[], task=None, repetition=0, turn=0, seed=1, max_tokens=4, prompt_ids=prompt(local))
    with pytest.raises(RuntimeError, match='not token-exact'): asyncio.run(ep.generate([req]))

def test_weight_sync_loads_the_trainers_weights_and_is_recorded(served):
    local, srv = served
    sync = StandInWeightSync(local.model, srv.url)
    with torch.no_grad():
        for q in local.model.parameters(): q.add_(0.01 * torch.randn_like(q))
    assert srv.digest != weights_digest(local.model)
    sync.sync_weights()
    assert srv.digest == weights_digest(local.model) and [w['version'] for w in srv.weight_loads] == [1]
    assert srv.weight_loads[0]['tensors'] == len(list(local.model.parameters()))
    assert [p for _, m, p in srv.calls if m == 'POST'] == ['/stand_in/load_weights', '/reset_prefix_cache']
    p = prompt(local)
    out = srv.complete({'prompt': p, 'seed': 3, 'max_tokens': 10, 'return_token_ids': True})
    assert out['choices'][0]['token_ids'] == local.sample([p], [3], 10)[0].token_ids
    assert srv.completions[-1]['weights_version'] == 1

def test_nccl_weight_transfer_is_refused_with_the_reason(served):
    _, srv = served
    code, body = srv.handle('POST', '/init_weight_transfer_engine', {})
    assert code == 501 and 'needs CUDA' in body['error']['message']
