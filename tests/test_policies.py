"HFPolicy's sampler on the shipped tiny model: per-request limits, seeds independent of batch mates, exact logprobs."

import asyncio, os
import pytest, torch
from thinkingbox_training.policies import HFPolicy, SamplingConfig, GenRequest, _process
from thinkingbox_training.tasks import get_domain, generate_tasks
from thinkingbox_training.episode import SYSTEM_PROMPT
from slab_reference import plain_slab_attention

MODEL = 'data/models/tiny-qwen3'


@pytest.fixture(scope='module')
def pol():
    torch.set_num_threads(int(os.environ.get('OMP_NUM_THREADS', '1')))
    return HFPolicy(MODEL, sampling=SamplingConfig(temperature=1.0, max_tokens=64, seed=0))


@pytest.fixture(scope='module')
def prompts(pol):
    "First-turn prompts of four bench tasks (system turn with the domain's policy and tools, then the user's query)."
    out = []
    for d in ('travel', 'retail'):
        dom = get_domain(d)
        for t in generate_tasks(d, 'bench', seed=11, n=2)[:2]:
            msgs = [
                {'role': 'system', 'content': SYSTEM_PROMPT.format(domain=dom.name, policy=dom.policy)},
                {'role': 'user', 'content': t.query},
            ]
            out.append(pol.fmt.prompt_ids(msgs, dom.tool_specs()))
    return out


def request(ids, seed, max_tokens, key=None):
    return GenRequest(
        messages=[],
        tools=[],
        task=None,
        repetition=0,
        turn=0,
        seed=seed,
        max_tokens=max_tokens,
        prompt_ids=ids,
        key=key,
    )


def test_each_row_ends_at_its_own_limit(pol, prompts):
    "A request allowed 3 tokens gives the same 3 tokens and `length` whether alone or batched with a 64-token request."
    # a seed whose 3 tokens do not stop by themselves
    seed = next(s for s in range(100) if pol.sample([prompts[0]], [s], 3)[0].finish == 'length')
    alone = asyncio.run(pol.generate([request(prompts[0], seed, 3)]))[0]
    mixed = asyncio.run(pol.generate([request(prompts[0], seed, 3), request(prompts[1], 8, 64)]))
    assert (alone.finish, len(alone.token_ids)) == ('length', 3)
    assert (mixed[0].finish, mixed[0].token_ids) == ('length', alone.token_ids)
    assert mixed[0].logprobs == alone.logprobs  # to the last bit: a row's numbers do not depend on its batch mates
    assert len(mixed[1].token_ids) > 3


def test_samples_independent_of_batch_mates(pol, prompts):
    """Each attempt's tokens, and their logprobs to the last bit, depend on its seed only: alone, in another order,
    with other mates and limits (so a campaign's records do not depend on its concurrency)."""
    seeds, limits = [11, 12, 13, 14], [40, 9, 64, 25]
    batch = pol.sample(prompts, seeds, limits)
    again = pol.sample(prompts, seeds, limits)
    shuffled = pol.sample(prompts[::-1], seeds[::-1], limits[::-1])[::-1]
    for i, g in enumerate(batch):
        alone = pol.sample([prompts[i]], [seeds[i]], [limits[i]])[0]
        assert g.token_ids == again[i].token_ids == shuffled[i].token_ids == alone.token_ids, i
        assert g.logprobs == again[i].logprobs == shuffled[i].logprobs == alone.logprobs, i
        assert len(g.token_ids) <= limits[i] and g.finish == ('stop' if g.token_ids[-1] == pol.fmt.eos_id else 'length')
    assert len({tuple(g.token_ids) for g in pol.sample([prompts[0]] * 4, [1, 2, 3, 4])}) > 1  # seeds matter


@pytest.mark.parametrize('cfg', [SamplingConfig(temperature=1.0), SamplingConfig(temperature=0.7, top_k=40, top_p=0.9)])
def test_logprobs_match_a_fresh_forward_pass(pol, prompts, cfg):
    """Recorded logprobs are within 1e-5 of a fresh full forward pass over prompt + sample, under the same processing,
    for rows decoded in a batch, with the shared system-turn cache and an episode's kept cache for its next turn."""
    p = HFPolicy(pol.model, pol.tokenizer, SamplingConfig(**{**cfg.__dict__, 'max_tokens': 48}))
    first = p.sample(prompts, [21, 22, 23, 24], keys=['a', 'b', 'c', 'd'])
    obs = pol.fmt.observation_ids([{'role': 'user', 'content': 'Thanks. Anything else I should know?'}])
    ids2 = prompts[1] + first[1].token_ids + obs
    second = p.sample([ids2, prompts[2]], [31, 32], keys=['b', None])
    for ids, g in [(prompts[0], first[0]), (prompts[3], first[3]), (ids2, second[0]), (prompts[2], second[1])]:
        with torch.no_grad():
            logits = pol.model(torch.tensor([ids + g.token_ids])).logits[0, len(ids) - 1 : -1].float()
        lp = torch.log_softmax(_process(logits, p.sampling), -1)
        fresh = lp[torch.arange(len(g.token_ids)), torch.tensor(g.token_ids)]
        assert (torch.tensor(g.logprobs) - fresh).abs().max() < 1e-5


def test_kept_caches_are_their_own(pol, prompts):
    "An episode's kept cache holds only its own tokens, not a view of the batch's buffers (that would keep them alive)."
    p = HFPolicy(pol.model, pol.tokenizer, pol.sampling)
    p.sample(prompts, [1, 2, 3, 4], 16, keys=list('abcd'))
    for ids, prefix, own in p._rows.values():
        for t in (t for kv in own for t in kv):
            assert t.untyped_storage().nbytes() == t.numel() * t.element_size() and t.shape[0] == 1
        assert prefix[0][0].shape[2] + own[0][0].shape[2] == len(ids)
    p.release('a')
    assert set(p._rows) == set('bcd')


def test_counter_based_draws():
    "Each seed's stream is a pure function of (seed, draw number); draws follow the distribution, skip masked tokens."
    from thinkingbox_training.policies import uniforms, draw

    u = uniforms([5, 6, 7], 3)
    assert [uniforms([s], 3)[0] for s in (5, 6, 7)] == u and all(0 <= x < 1 for x in u) and u != uniforms([5, 6, 7], 4)
    lp = torch.log_softmax(torch.tensor([[0.0, 1.0, float('-inf'), 2.0]]), -1)
    n = 20000
    got = draw(lp.expand(n, 4), [uniforms([s], 0)[0] for s in range(n)])
    freq = torch.bincount(got, minlength=4).double() / n
    assert freq[2] == 0 and (freq - lp[0].exp().double()).abs().max() < 0.01


def test_slab_attention_is_bit_identical_to_the_plain_one(pol, prompts, monkeypatch):
    """The sampler's attention (in place, the mask broadcast) gives the very tokens and the very logprobs (==, not
    close) of the plain formulation: batched first turns over two domains' system turns and one domain's, a prompt
    without a shared prefix, and second turns from kept caches, so campaigns sampled before and after it agree."""
    import thinkingbox_training.policies as policies

    obs = pol.fmt.observation_ids([{'role': 'tool', 'name': 'get_order', 'content': '{"status": "placed"}'}])
    no_system = pol.fmt.prompt_ids([{'role': 'user', 'content': 'Where is my order?'}])

    def run():
        p = HFPolicy(pol.model, pol.tokenizer, SamplingConfig(temperature=1.0, max_tokens=40))
        first = p.sample(prompts + [no_system], [41, 42, 43, 44, 45], [40, 12, 40, 25, 30], keys=list('abcde'))
        second = p.sample([prompts[i] + first[i].token_ids + obs for i in (0, 2, 3)], [51, 52, 53], keys=list('acd'))
        third = p.sample(prompts[2:], [61, 62])  # one domain: every row shares the system turn
        return [(g.token_ids, g.logprobs) for g in first + second + third]

    new = run()
    monkeypatch.setattr(policies, '_slab_attention', plain_slab_attention)
    plain = run()
    assert new == plain
    assert sum(len(ids) for ids, _ in new) > 100  # enough sampled tokens for the comparison to mean something


def test_rows_join_a_running_decode_and_leave_when_they_end(pol, prompts):
    """Continuous batching: a request joins a decode already under way (one forward then holds both rows), a row that
    ends leaves at once, and each row samples the very tokens (and logprobs) it samples alone."""
    p = HFPolicy(pol.model, pol.tokenizer, pol.sampling)
    seed = next(s for s in range(100) if len(p.sample([prompts[0]], [s], 40)[0].token_ids) >= 12)
    alone = [p.sample([prompts[0]], [seed], 40)[0], p.sample([prompts[1]], [7], 5)[0]]
    d, got, rows = p.decoder(), {}, []
    d.add([prompts[0]], [seed], [40], [None], ['first'])
    for _ in range(6):  # six tokens of the first row before the second arrives
        assert d.step() == []
    joins, steps, seen = p.stats['joins'], p.stats['decode_steps'], p.stats['decode_rows']
    d.add([prompts[1]], [7], [5], [None], ['second'])
    assert p.stats['joins'] == joins + 1 and d.live == 2
    while d.live:
        rows.append(d.live)
        got.update(d.step())
    assert rows[:5] == [2] * 5 and set(rows[5:]) <= {1}  # the second row left after its 5 tokens (or earlier)
    # each step's forward holds the rows that go on: those the next step draws for (none after the last)
    assert p.stats['decode_rows'] - seen == sum(rows[1:])
    assert p.stats['decode_steps'] - steps == len(rows) - 1
    for g, want in zip([got['first'], got['second']], alone):
        assert (g.token_ids, g.finish) == (want.token_ids, want.finish)
        assert g.logprobs == want.logprobs


def test_a_kept_cache_gives_the_very_logprobs_of_a_fresh_feed(pol, prompts):
    """A second turn sampled from each episode's kept cache (its first turn's keys and values computed one decode step
    at a time) gives the very tokens and logprobs, to the last bit, of the same prompts fed afresh in one prefill."""
    obs = pol.fmt.observation_ids([{'role': 'tool', 'name': 'get_order', 'content': '{"status": "placed"}'}])
    p = HFPolicy(pol.model, pol.tokenizer, SamplingConfig(temperature=1.0, max_tokens=40))
    first = p.sample(prompts, [1, 2, 3, 4], keys=list('abcd'))
    second = [prompts[i] + first[i].token_ids + obs for i in range(4)]
    kept = p.sample(second, [5, 6, 7, 8], keys=list('abcd'))
    fresh = HFPolicy(pol.model, pol.tokenizer, p.sampling).sample(second, [5, 6, 7, 8])
    assert [(g.token_ids, g.logprobs) for g in kept] == [(g.token_ids, g.logprobs) for g in fresh]
    assert sum(len(g.token_ids) for g in first) > 40  # the kept caches hold sampled tokens


def test_a_linear_layer_gives_a_row_the_same_numbers_however_many_rows_share_its_product(pol):
    """While the sampler runs (`exact_rows`), each linear layer of the shipped model gives a row the very numbers, to
    the last bit, whether its product holds 1 to 40 rows or 64: the rows a product needs are measured on this machine
    (a BLAS picks its kernel by the row count, and where it switches depends on the CPU and the shape)."""
    from thinkingbox_training.policies import exact_rows

    layers = {(m.in_features, m.out_features): m for m in pol.model.modules() if isinstance(m, torch.nn.Linear)}
    assert len(layers) == 5
    exact_rows(pol.model)
    try:
        with torch.no_grad():
            for shape, lin in layers.items():
                x = torch.randn(64, lin.in_features, generator=torch.Generator().manual_seed(1))
                among_64 = lin(x)
                assert [m for m in range(1, 41) if not torch.equal(lin(x[:m]), among_64[:m])] == [], shape
    finally:
        exact_rows(pol.model, on=False)
