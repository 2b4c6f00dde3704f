"""The vLLM stand-in server (`vllm_server.VLLMStandIn`) against bad and oversized requests, over raw HTTP.

Every malformed request is answered at once with a 4xx whose message starts with the field it names (and whose
OpenAI-style `param` is that field); none closes the connection without an answer or hangs. A body over the bound
(sized from the model: a full weight load fits) is refused before it is read, and one request's generation is bounded
(n, max_tokens) and takes the lock a sequence at a time, so that other clients are served in between."""
import base64, contextlib, copy, json, socket, threading, time
import pytest, torch
from thinkingbox_training.policies import HFPolicy, tiny_qwen3
from thinkingbox_training.vllm_server import StandInWeightSync, VLLMStandIn, body_bound, weights_digest
from grpo_fixtures import tokenizer

TOK = tokenizer()


@pytest.fixture(scope='module')
def srv():
    with VLLMStandIn(HFPolicy(tiny_qwen3(TOK), TOK), model_name='tiny', body_timeout_s=1.0) as s:
        yield s


def raw(srv, head:str, body:bytes=b'', path='/v1/completions', timeout=10, wait_s=0.0) -> tuple[int, dict, float]:
    "(status, JSON answer, seconds) of one raw HTTP request; `wait_s`: pause with the connection open before reading."
    t0 = time.monotonic()
    with socket.create_connection(srv.httpd.server_address, timeout=timeout) as s:
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):  # a server may answer before the body ends
            s.sendall(f'POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{head}\r\n'.encode()
                      + body)
        time.sleep(wait_s)
        out = b''
        with contextlib.suppress(ConnectionResetError):
            while True:
                head_, _, rest = out.partition(b'\r\n\r\n')
                n = next((int(h.split(b':')[1]) for h in head_.split(b'\r\n')
                          if h.lower().startswith(b'content-length:')), None)
                if n is not None and len(rest) >= n: break
                chunk = s.recv(65536)
                if not chunk: break
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
        while chunk := c.recv(65536): answer += chunk  # to the end: the stand-in closes after answering
    assert b' 400 ' in answer.split(b'\r\n')[0] and b'the body ended after 9 of 100 bytes' in answer, answer


def test_the_bound_leaves_room_for_a_full_weight_load(srv):
    model = srv.policy.model
    payload = {'tensors': {n: {'dtype': 'float32', 'shape': list(p.shape),
                               'b64': base64.b64encode(p.detach().numpy().tobytes()).decode()}
                           for n, p in model.named_parameters()}}
    size = len(json.dumps(payload))
    assert srv.max_body_bytes == body_bound(model) and 2 * size < srv.max_body_bytes - 16 * 2**20, size
    assert post(srv, payload, '/stand_in/load_weights')[0] == 200


def test_a_refused_weight_load_changes_nothing(srv):
    params = dict(srv.policy.model.named_parameters())
    (name, p), (other, q) = list(params.items())[:2]
    b64 = lambda t: base64.b64encode(t.detach().numpy().tobytes()).decode()  # noqa: E731
    good, shape = {'dtype': 'float32', 'shape': list(p.shape), 'b64': b64(p * 2)}, list(q.shape)
    before = weights_digest(srv.policy.model)
    for bad, field in [({'dtype': 'float32', 'shape': shape, 'b64': '!!'}, 'b64'),
                       ({'dtype': 'float32', 'shape': shape, 'b64': 'AAAA'}, 'b64'),
                       ({'dtype': 'int64', 'shape': shape, 'b64': b64(q)}, 'dtype'),
                       ({'dtype': 'float32', 'shape': shape[::-1] + [1], 'b64': b64(q)}, 'shape'),
                       ('x', None)]:
        status, answer, _ = post(srv, {'tensors': {name: good, other: bad}}, '/stand_in/load_weights')
        want = f"tensors['{other}']" + (f'.{field}' if field else '')
        assert status == 400 and answer['error']['param'] == want, (status, answer)
    for body, field in [({}, 'tensors'), ({'tensors': []}, 'tensors')]:
        status, answer, _ = post(srv, body, '/stand_in/load_weights')
        assert status == 400 and answer['error']['param'] == field, (status, answer)
    assert weights_digest(srv.policy.model) == before == srv.digest


def test_a_large_request_does_not_hold_the_lock(srv):
    "A second client's request is sampled between the sequences of a large one, not after all of them."
    big = threading.Thread(target=post, args=(srv, {'prompt': P, 'n': 80, 'max_tokens': 6, 'seed': 1000,
                                                    'temperature': 1.0}))
    start = len(srv.completions)
    big.start()
    while not any(c['seed'] >= 1000 for c in srv.completions[start:]): time.sleep(0.005)
    status, answer, _ = post(srv, {'prompt': P, 'max_tokens': 2, 'seed': 5})
    big.join(120)
    seeds = [c['seed'] for c in srv.completions[start:]]
    assert status == 200 and len(seeds) == 81, (status, answer, len(seeds))
    assert seeds.index(5) < len(seeds) - 1, seeds  # sampled before the large request ended (the lock was let go)


def test_a_stand_in_of_a_deep_copy_serves_what_it_syncs():
    "The bounds do not stand in the way of the cluster path: a full sync of the trainer's weights, then a sample."
    model = tiny_qwen3(TOK)
    with VLLMStandIn(HFPolicy(copy.deepcopy(model), TOK)) as s:
        with torch.no_grad(): model.model.norm.weight.mul_(2.0)
        StandInWeightSync(model, s.url).sync_weights()
        assert s.digest == weights_digest(model)
        assert post(s, {'prompt': P, 'max_tokens': 3, 'seed': 1})[0] == 200
