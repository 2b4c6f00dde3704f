"""The shipped base policy (data/models/tiny-qwen3): it loads fast as a Qwen3 checkpoint with the right end and pad
tokens, its chat template renders exactly as the interpreter's ChatFormat, its tokenizer is current for the domains'
prompts, and a short seeded rollout through the episode engine gives well-formed token trajectories. And its recipe:
`BuildConfig()` is what the shipped build.json records, and the whole build runs at toy size."""

import pytest
from tbt_lab.base_policy import (
    model_dir,
    stale_prompt_lines,
    domain_prompt,
    episode_metrics,
    report_line,
    POLICY_DOMAINS,
)
from tbt_lab.policy_report import recorded
from thinkingbox_training.policies import HFPolicy, SamplingConfig
from thinkingbox_training.episode import EpisodeRunner
from thinkingbox_training.tasks import generate_tasks

MODEL = model_dir()
pytestmark = pytest.mark.skipif(
    not (MODEL / 'model.safetensors').exists(), reason='no shipped model: run `tbt build-base-policy`'
)


@pytest.fixture(scope='module')
def policy():
    return HFPolicy(str(MODEL), sampling=SamplingConfig(temperature=1.0, seed=3, max_tokens=96))


def test_loads_as_qwen3():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(MODEL)
    tok = AutoTokenizer.from_pretrained(MODEL)
    assert type(model).__name__ == 'Qwen3ForCausalLM'
    assert tok.eos_token == '<|im_end|>' and tok.pad_token == '<|endoftext|>'
    assert model.config.eos_token_id == tok.eos_token_id and model.config.pad_token_id == tok.pad_token_id
    assert model.config.vocab_size == len(tok)
    g = model.generation_config
    assert g.eos_token_id == tok.eos_token_id
    assert all(getattr(g, k, None) in (None, 1.0) for k in ('temperature', 'top_p'))
    assert getattr(g, 'top_k', None) in (None, 0)
    assert sum(p.stat().st_size for p in MODEL.iterdir()) < 20e6


def test_template_renders_as_chat_format(policy):
    tok, fmt = policy.tokenizer, policy.fmt
    msgs, tools = domain_prompt('travel')
    lookup = {'type': 'function', 'function': {'name': 'get_booking', 'arguments': {'booking_id': 'BK-10017'}}}
    conv = msgs + [
        {'role': 'user', 'content': 'Cancel BK-10017 please.'},
        {'role': 'assistant', 'content': '', 'tool_calls': [lookup]},
        {'role': 'tool', 'name': 'get_booking', 'content': '{"booking_id": "BK-10017"}'},
        {'role': 'assistant', 'content': 'Done.'},
    ]
    for m, gen in ((conv, False), (conv[:4], True)):
        want = fmt.render(m, tools, add_generation_prompt=gen)
        assert tok.apply_chat_template(m, tools=tools, tokenize=False, add_generation_prompt=gen) == want
    ids = fmt.encode(fmt.render(msgs, tools))
    assert len(ids) < 150 and fmt.decode(ids) == fmt.render(msgs, tools)


def test_tokenizer_is_current_for_the_domains(policy):
    stale = stale_prompt_lines(policy.tokenizer, POLICY_DOMAINS)
    assert not stale, (
        f"{len(stale)} line(s) of the domains' system turns changed since the build: "
        f'rerun `tbt build-base-policy`; e.g. {stale[0][:80]!r}'
    )


def test_the_recipe_makes_the_shipped_pre_tokenizer():
    "The build's tokenizer splits text as the shipped one does (identifier digits 3, 2, 1)."
    import json
    from thinkingbox_training.interpret import make_tokenizer

    split = lambda t: t['pre_tokenizer']['pretokenizers'][0]['pattern']
    made = make_tokenizer(['OI-753122 OR-75312'] * 4, vocab_size=300)
    assert split(json.loads(made.backend_tokenizer.to_str())) == split(
        json.loads((MODEL / 'tokenizer.json').read_text())
    )


def test_build_config_defaults_are_the_shipped_build():
    """`BuildConfig()` is what the shipped build.json records; the record's other options sit at the one value the
    recipe uses."""
    import json
    from dataclasses import asdict
    from tbt_lab.base_policy import BuildConfig

    shipped = json.loads((MODEL / 'build.json').read_text())['config']
    now = json.loads(json.dumps(asdict(BuildConfig())))
    assert {k: shipped[k] for k in now} == now
    assert {k: v for k, v in shipped.items() if k not in now} == {
        'id_digits': True,
        'shuffle_items': True,
        'rename_digits': True,
        'rename_episodes': True,
        'cut_through': True,
        'cut_loss': 'args',
        'choice_drills': 0,
        'binding_drills': 0,
        'polish_choice': 0,
        'ask_which': False,
        'think_which': False,
        'product_echo': 0.0,
    }


def test_short_rollout_gives_wellformed_trajectories(policy):
    tasks = [generate_tasks('travel', 'train', seed=4, n=1)[1], generate_tasks('retail', 'train', seed=4, n=1)[1]]
    eps = EpisodeRunner(policy, check_tokens=True).run_sync([(t, 0) for t in tasks])
    for e in eps:
        tr = e.trajectory
        assert tr.status in ('ok', 'truncated') and tr.prompt_ids and tr.turns >= 1
        assert len(tr.completion_ids) == len(tr.mask) == len(tr.logprobs)
        assert all((lp is None) == (m == 0) for lp, m in zip(tr.logprobs, tr.mask))
        ends = [i for i in range(len(tr.mask)) if tr.mask[i] and (i + 1 == len(tr.mask) or not tr.mask[i + 1])]
        assert all(tr.completion_ids[i] == policy.fmt.eos_id for i in ends[:-1])
        assert e.verdict.reward in (0, 1)
    assert episode_metrics(eps)['calls_per_episode'] > 0


def test_recorded_reports_are_of_the_shipped_weights():
    build, report, speed = recorded()
    assert report['run']['seed'] != 1000
    assert report['episodes'] == report['run']['k'] * sum(f['tasks'] for f in report['families'].values())
    assert report_line(report).startswith('wellformed=')
    assert {r['batch'] for r in speed['rows'] if r['what'] == 'generate'} == {8, 32}


def test_a_report_of_other_weights_is_refused(tmp_path):
    import json, shutil

    for f in ('model.safetensors', 'build.json', 'report.json', 'speed.json'):
        shutil.copy(MODEL / f, tmp_path / f)
    r = json.loads((tmp_path / 'report.json').read_text())
    r['run']['weights_sha256'] = '0' * 64
    (tmp_path / 'report.json').write_text(json.dumps(r))
    with pytest.raises(ValueError, match='report.json was measured on other weights'):
        recorded(tmp_path)


def test_a_tiny_build_saves_a_loadable_policy_with_its_record(tmp_path):
    "The whole recipe at toy size: demonstrations, tokenizer, SFT, two polish passes on fresh demonstrations, save."
    import json
    from dataclasses import asdict
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from tbt_lab.base_policy import BuildConfig, ModelConfig, build_base_policy

    cfg = BuildConfig(
        out=str(tmp_path / 'p'),
        domains='travel',
        tasks_per_family=1,
        vocab_size=1024,
        model=ModelConfig(hidden_size=32, layers=1, heads=2, kv_heads=1, intermediate_size=64),
        steps=2,
        echo_only_steps=2,
        echo_only_drills=4,
        episodes_per_step=2,
        cut_drills=2,
        echo_drills=2,
        log_every=1,
        check_tasks=0,
        polish_steps=1,
        polish_tasks_per_family=(1, 2),
    )
    rec = build_base_policy(cfg, log=lambda *a: None)
    saved = json.loads((tmp_path / 'p' / 'build.json').read_text())
    assert saved['config'] == json.loads(json.dumps(asdict(cfg))) and 'check' not in saved
    assert [(r['phase'], r.get('polish_pass')) for r in saved['polish']] == [('sft', 1), ('sft', 2)]
    assert saved['demonstrations']['kept'] > 0 and rec['wall_s'] > 0
    tok, model = AutoTokenizer.from_pretrained(tmp_path / 'p'), AutoModelForCausalLM.from_pretrained(tmp_path / 'p')
    assert model.config.vocab_size == len(tok) and tok.eos_token == '<|im_end|>'
    assert stale_prompt_lines(tok, ('travel',)) == []
