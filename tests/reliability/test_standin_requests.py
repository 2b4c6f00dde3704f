"""The vLLM stand-in server (`vllm_server.VLLMStandIn`) against bad and oversized requests, over raw HTTP.

Every malformed request is answered at once with a 4xx whose message starts with the field it names (and whose
OpenAI-style `param` is that field); none closes the connection without an answer or hangs. A body over the bound
(sized from the model: a full weight load fits) is refused before it is read, and one request's generation is bounded
(n, max_tokens) and takes the lock a sequence at a time, so that other clients are served in between."""

import contextlib, copy, json, re, socket, threading, time
import pytest, torch
from thinkingbox_training.policies import HFPolicy, tiny_qwen3
from concurrent.futures import ThreadPoolExecutor
from thinkingbox_training.vllm_server import (
    GlooSendArgs,
    GlooTransfer,
    VLLMStandIn,
    body_bound,
    cpu_weight_transfer,
    weights_digest,
)
from grpo_fixtures import tokenizer

TOK = tokenizer()


@pytest.fixture(scope='module')
def srv():
    with VLLMStandIn(HFPolicy(tiny_qwen3(TOK), TOK), model_name='tiny', body_timeout_s=1.0) as s:
        yield s


def raw(srv, head: str, body: bytes = b'', path='/v1/completions', timeout=10, wait_s=0.0) -> tuple[int, dict, float]:
    "(status, JSON answer, seconds) of one raw HTTP request; `wait_s`: pause with the connection open before reading."
    t0 = time.monotonic()
    with socket.create_connection(srv.httpd.server_address, timeout=timeout) as s:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):  # a server may answer before the body ends
            s.sendall(
                f'POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{head}\r\n'.encode() + body
            )
        time.sleep(wait_s)
        out = b''
        with contextlib.suppress(ConnectionResetError):
            while True:
                head_, _, rest = out.partition(b'\r\n\r\n')
                n = next(
                    (int(h.split(b':')[1]) for h in head_.split(b'\r\n') if h.lower().startswith(b'content-length:')),
                    None,
                )
                if n is not None and len(rest) >= n:
                    break
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
    assert out, 'the connection closed without an answer'
    head_, _, rest = out.partition(b'\r\n\r\n')
    return int(head_.split()[1]), json.loads(rest or b'{}'), time.monotonic() - t0


def post(srv, obj, path='/v1/completions'):
    body = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
    return raw(srv, f'Content-Length: {len(body)}\r\n', body, path)


P = [1, 2, 3]
BAD_JSON = {  # case: (body, the field the answer names)
    'not_json': (b'{oops', 'body'),
    'json_nested_too_deep': (b'[' * 100_000 + b']' * 100_000, 'body'),
    'not_an_object': (b'[1, 2]', 'body'),
    'empty_object_no_prompt': ({}, 'prompt'),
    'prompt_null': ({'prompt': None}, 'prompt'),
    'prompt_empty_list': ({'prompt': []}, 'prompt'),
    'prompt_a_number': ({'prompt': 7}, 'prompt'),
    'prompt_an_object': ({'prompt': {'a': 1}}, 'prompt'),
    'prompt_an_empty_sequence': ({'prompt': [[]]}, 'prompt[0]'),
    'token_id_over_the_vocabulary': ({'prompt': [1, 10**6]}, 'prompt[0][1]'),
    'token_id_negative': ({'prompt': [-1]}, 'prompt[0][0]'),
    'token_id_huge': ({'prompt': [[1, 10**30]]}, 'prompt[0][1]'),
    'token_id_a_float': ({'prompt': [1.5]}, 'prompt[0][0]'),
    'token_id_a_string': ({'prompt': [[1, 'a']]}, 'prompt[0][1]'),
    'token_id_a_boolean': ({'prompt': [[True]]}, 'prompt[0][0]'),
    'prompt_over_the_context': ({'prompt': [1] * 8192}, 'prompt[0]'),
    'too_many_prompts': ({'prompt': [P] * 2000}, 'prompt'),
    'n_zero': ({'prompt': P, 'n': 0}, 'n'),
    'n_negative': ({'prompt': P, 'n': -3}, 'n'),
    'n_huge': ({'prompt': P, 'n': 100_000}, 'n'),
    'n_a_string': ({'prompt': P, 'n': '2'}, 'n'),
    'max_tokens_1e9_float': ({'prompt': P, 'max_tokens': 1e9}, 'max_tokens'),
    'max_tokens_1e9': ({'prompt': P, 'max_tokens': 10**9}, 'max_tokens'),
    'max_tokens_zero': ({'prompt': P, 'max_tokens': 0}, 'max_tokens'),
    'temperature_negative': ({'prompt': P, 'temperature': -1}, 'temperature'),
    'temperature_a_string': ({'prompt': P, 'temperature': 'hot'}, 'temperature'),
    'temperature_nan': (b'{"prompt": [1, 2], "temperature": NaN}', 'temperature'),
    'top_p_over_one': ({'prompt': P, 'top_p': 5}, 'top_p'),
    'top_p_zero': ({'prompt': P, 'top_p': 0}, 'top_p'),
    'top_p_negative': ({'prompt': P, 'top_p': -0.5}, 'top_p'),
    'top_k_below_minus_one': ({'prompt': P, 'top_k': -2}, 'top_k'),
    'seed_a_string': ({'prompt': P, 'seed': 'x'}, 'seed'),
    'stop_token_ids_a_string': ({'prompt': P, 'stop_token_ids': 'x'}, 'stop_token_ids'),
    'stop_token_ids_nested': ({'prompt': P, 'stop_token_ids': [[1]]}, 'stop_token_ids'),
    'prompt_logprobs_negative': ({'prompt': P, 'prompt_logprobs': -1}, 'prompt_logprobs'),
    'prompt_logprobs_a_string': ({'prompt': P, 'prompt_logprobs': 'all'}, 'prompt_logprobs'),
}


@pytest.mark.parametrize('case', list(BAD_JSON))
def test_a_bad_completion_request_gets_a_400_naming_the_field(srv, case):
    body, field = BAD_JSON[case]
    status, answer, took = post(srv, body)
    err = answer.get('error', {})
    assert status == 400 and err.get('param') == field and err['message'].startswith(f'{field}: '), (status, answer)
    assert took < 5


BAD_HTTP = {  # case: (headers, body, wait before reading, status, what the message says)
    'content_length_negative': ('Content-Length: -1\r\n', b'{}', 0, 400, 'Content-Length: '),
    'content_length_not_a_number': ('Content-Length: abc\r\n', b'{}', 0, 400, 'Content-Length: '),
    'content_length_twice': ('Content-Length: 2\r\nContent-Length: 3\r\n', b'{}', 0, 400, 'Content-Length: '),
    'content_length_64_mb_unsent': (f'Content-Length: {64 * 2**20}\r\n', b'', 0, 413, 'Content-Length: '),
    'content_length_64_mb_sent': (f'Content-Length: {64 * 2**20}\r\n', b'x' * 64 * 2**20, 0, 413, 'Content-Length: '),
    'chunked': ('Transfer-Encoding: chunked\r\n', b'2\r\n{}\r\n0\r\n\r\n', 0, 411, 'Transfer-Encoding: '),
    'body_stops_arriving': ('Content-Length: 100\r\n', b'{"prompt"', 2.0, 408, 'Content-Length: '),
}


@pytest.mark.parametrize('case', list(BAD_HTTP))
def test_a_malformed_http_request_gets_a_4xx_at_once(srv, case):
    headers, body, wait, code, says = BAD_HTTP[case]
    status, answer, took = raw(srv, headers, body, wait_s=wait)
    assert status == code and answer['error']['message'].startswith(says), (status, answer)
    assert took < 5 + wait
    assert post(srv, {'prompt': P, 'max_tokens': 1, 'seed': 1})[0] == 200  # and the server still serves


def test_a_body_that_ends_early_is_answered():
    with VLLMStandIn(HFPolicy(tiny_qwen3(TOK), TOK)) as s, socket.create_connection(s.httpd.server_address) as c:
        c.sendall(b'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"prompt"')
        c.shutdown(socket.SHUT_WR)
        c.settimeout(10)
        answer = b''
        while chunk := c.recv(65536):
            answer += chunk  # to the end: the stand-in closes after answering
    assert b' 400 ' in answer.split(b'\r\n')[0] and b'the body ended after 9 of 100 bytes' in answer, answer


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def trl_generation(model, s):
    "TRL's server-mode VLLMGeneration on `model` (inside cpu_weight_transfer()), joined to stand-in `s`'s group."
    from accelerate import Accelerator
    from trl.generation.vllm_generation import VLLMGeneration

    return VLLMGeneration(
        model=model,
        accelerator=Accelerator(cpu=True),
        processing_class=TOK,
        mode='server',
        server_base_url=s.url,
        group_port=free_port(),
        server_timeout=10,
    )


def test_the_bound_leaves_room_for_a_full_weight_sync():
    "The weights travel over the transfer group; the requests of a full sync carry their names, dtypes and shapes only."
    model = tiny_qwen3(TOK)
    with VLLMStandIn(HFPolicy(copy.deepcopy(model), TOK)) as s, cpu_weight_transfer(timeout_s=30):
        gen, sent = trl_generation(model, s), []
        real = gen.vllm_client.session.post

        def post_(url, **kw):
            sent.append(len(json.dumps(kw.get('json'))))
            return real(url, **kw)

        gen.vllm_client.session.post = post_
        gen.sync_weights()
    assert s.max_body_bytes == body_bound(model) and max(sent) < 2**20 < s.max_body_bytes, sent
    assert s.weight_loads[-1]['tensors'] == len(list(model.parameters()))


def test_a_refused_weight_load_changes_nothing():
    """Metadata that does not fit the served model is refused whole (400 naming the field, before a tensor is sent);
    TRL's client raises it, nothing is copied, and the group still carries the next sync."""
    model = tiny_qwen3(TOK)
    with VLLMStandIn(HFPolicy(copy.deepcopy(model), TOK)) as s, cpu_weight_transfer(timeout_s=30):
        gen = trl_generation(model, s)
        client = gen.vllm_client
        with torch.no_grad():
            model.model.norm.weight.mul_(2.0)
        before = weights_digest(s.policy.model)
        (name, p), (other, q) = list(model.named_parameters())[:2]
        good = (name, 'float32', list(p.shape))
        for meta, field in [
            ([good, ('no.such.weight', 'float32', list(q.shape))], 'update_info.names[1]'),
            ([good, (other, 'int64', list(q.shape))], 'update_info.dtype_names[1]'),
            ([good, (other, 'float32', list(q.shape)[::-1] + [1])], 'update_info.shapes[1]'),
            ([good, (name, 'float32', list(p.shape))], 'update_info.names[1]'),
        ]:
            with pytest.raises(Exception, match=re.escape(f'"param": "{field}"')):
                client.update_named_params(meta, iter([(name, p.data * 2), (other, q.data)]))
        for body, field in [
            ({}, 'update_info'),
            ({'update_info': []}, 'update_info'),
            ({'update_info': {'names': [name], 'dtype_names': [], 'shapes': []}}, 'update_info.dtype_names'),
            (
                {
                    'update_info': {
                        'names': [name],
                        'dtype_names': ['float32'],
                        'shapes': [list(p.shape)],
                        'packed': 'yes',
                    }
                },
                'update_info.packed',
            ),
        ]:
            client._start_weight_update()
            with pytest.raises(Exception, match=re.escape(f'"param": "{field}"')):
                with ThreadPoolExecutor(1) as ex:  # the server answers the refusal over the group too: receive it
                    answer = ex.submit(client._post, f'{s.url}/update_weights', json=body)
                    GlooTransfer.trainer_send_weights(iter([]), GlooSendArgs(client.communicator))
                    answer.result()
        assert weights_digest(s.policy.model) == before == s.digest and s.weight_loads == []
        gen.sync_weights()  # the group is still in step: the next sync loads every weight
        assert s.digest == weights_digest(model) != before and [w['version'] for w in s.weight_loads] == [1]


@pytest.fixture
def fresh():
    "A stand-in no trainer has joined (the module's `srv` may have been)."
    with VLLMStandIn(HFPolicy(tiny_qwen3(TOK), TOK)) as s:
        yield s


def test_a_weight_update_request_before_the_engine_is_refused(fresh):
    srv = fresh
    for path in ('/init_weight_transfer_engine', '/start_weight_update', '/update_weights', '/finish_weight_update'):
        status, answer, _ = post(srv, {}, path)
        field = 'init_info' if path == '/init_weight_transfer_engine' else 'init_weight_transfer_engine'
        assert status == 400 and answer['error']['param'] == field, (path, status, answer)
    info = {'master_address': '127.0.0.1', 'master_port': 1, 'rank_offset': 1, 'world_size': 2}
    for bad, field in [
        ({'master_address': 5}, 'master_address'),
        ({'master_port': 70000}, 'master_port'),
        ({'master_port': 'x'}, 'master_port'),
        ({'rank_offset': 0}, 'rank_offset'),
        ({'world_size': 3}, 'world_size'),
        ({'world_size': None}, 'world_size'),
    ]:
        status, answer, _ = post(srv, {'init_info': {**info, **bad}}, '/init_weight_transfer_engine')
        assert status == 400 and answer['error']['param'] == f'init_info.{field}', (bad, status, answer)


def test_a_large_request_does_not_hold_back_a_small_one(srv):
    "A second client's request is sampled while a large one is decoded (it joins the running batch), not after it."
    big = threading.Thread(
        target=post, args=(srv, {'prompt': P, 'n': 80, 'max_tokens': 40, 'seed': 1000, 'temperature': 1.0})
    )
    start, steps = len(srv.completions), srv.policy.stats['decode_steps']
    big.start()
    while srv.policy.stats['decode_steps'] == steps:  # the large request is being decoded
        time.sleep(0.005)
    status, answer, _ = post(srv, {'prompt': P, 'max_tokens': 2, 'seed': 5})
    big.join(120)
    seeds = [c['seed'] for c in srv.completions[start:]]
    assert status == 200 and len(seeds) == 81, (status, answer, len(seeds))
    assert seeds.index(5) < len(seeds) - 1, seeds  # sampled before the large request ended


def test_a_stand_in_of_a_deep_copy_serves_what_it_syncs():
    "The bounds do not stand in the way of the cluster path: a full sync of the trainer's weights, then a sample."
    model = tiny_qwen3(TOK)
    with VLLMStandIn(HFPolicy(copy.deepcopy(model), TOK)) as s, cpu_weight_transfer(timeout_s=30):
        with torch.no_grad():
            model.model.norm.weight.mul_(2.0)
        trl_generation(model, s).sync_weights()
        assert s.digest == weights_digest(model)
        assert post(s, {'prompt': P, 'max_tokens': 3, 'seed': 1})[0] == 200
