"""The shipped base policy (data/models/tiny-qwen3): it loads fast as a Qwen3 checkpoint with the right end and pad
tokens, its chat template renders exactly as the interpreter's ChatFormat, its tokenizer is current for the domains'
prompts, and a short seeded rollout through the episode engine gives well-formed token trajectories."""
import time
from dataclasses import replace
import pytest
from thinkingbox_training.base_policy import model_dir, stale_prompt_lines, domain_prompt, episode_metrics, DOMAINS
from thinkingbox_training.interpret import ChatFormat
from thinkingbox_training.policies import HFPolicy, SamplingConfig
from thinkingbox_training.episode import EpisodeRunner
from thinkingbox_training.tasks import generate_tasks

MODEL = model_dir()
pytestmark = pytest.mark.skipif(not (MODEL/'model.safetensors').exists(), reason='no shipped model: run `tbt build-base-policy`')

@pytest.fixture(scope='module')
def policy():
    return HFPolicy(str(MODEL), sampling=SamplingConfig(temperature=1.0, seed=3, max_tokens=96))

def test_loads_fast_as_qwen3():
    from transformers import AutoModelForCausalLM, AutoTokenizer
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(MODEL)
    tok = AutoTokenizer.from_pretrained(MODEL)
    assert time.perf_counter() - t0 < 5
    assert type(model).__name__ == 'Qwen3ForCausalLM'
    assert tok.eos_token == '<|im_end|>' and tok.pad_token == '<|endoftext|>'
    assert model.config.eos_token_id == tok.eos_token_id and model.config.pad_token_id == tok.pad_token_id
    assert model.config.vocab_size == len(tok)
    g = model.generation_config
    assert g.eos_token_id == tok.eos_token_id
    assert all(getattr(g, k, None) in (None, 1.0) for k in ('temperature', 'top_p')) and getattr(g, 'top_k', None) in (None, 0)
    assert sum(p.stat().st_size for p in MODEL.iterdir()) < 20e6

def test_template_renders_as_chat_format(policy):
    tok, fmt = policy.tokenizer, policy.fmt
    msgs, tools = domain_prompt('travel')
    conv = msgs + [{'role': 'user', 'content': 'Cancel BK-10017 please.'},
                   {'role': 'assistant', 'content': '', 'tool_calls': [{'type': 'function', 'function': {'name': 'get_booking', 'arguments': {'booking_id': 'BK-10017'}}}]},
                   {'role': 'tool', 'name': 'get_booking', 'content': '{"booking_id": "BK-10017"}'},
                   {'role': 'assistant', 'content': 'Done.'}]
    for m, gen in ((conv, False), (conv[:4], True)):
        assert tok.apply_chat_template(m, tools=tools, tokenize=False, add_generation_prompt=gen) == fmt.render(m, tools, add_generation_prompt=gen)
    ids = fmt.encode(fmt.render(msgs, tools))
    assert len(ids) < 150 and fmt.decode(ids) == fmt.render(msgs, tools)

def test_tokenizer_is_current_for_the_domains(policy):
    stale = stale_prompt_lines(policy.tokenizer, DOMAINS)
    assert not stale, f'{len(stale)} line(s) of the domains\' system turns changed since the build: rerun `tbt build-base-policy`; e.g. {stale[0][:80]!r}'

def test_default_build_config_makes_the_shipped_pre_tokenizer():
    "`BuildConfig()` rebuilds the shipped policy: its tokenizer splits text as the shipped one does (8a: identifier digits split 3, 2, 1)."
    import json
    from thinkingbox_training.base_policy import BuildConfig
    from thinkingbox_training.interpret import make_tokenizer
    split = lambda t: t['pre_tokenizer']['pretokenizers'][0]['pattern']
    made = make_tokenizer(['OI-753122 OR-75312'] * 4, vocab_size=300, id_digits=BuildConfig().id_digits)
    assert split(json.loads(made.backend_tokenizer.to_str())) == split(json.loads((MODEL/'tokenizer.json').read_text()))

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
    from thinkingbox_training.base_policy import recorded, report_line
    build, report, speed = recorded()
    assert report['run']['seed'] != 1000 and report['episodes'] == report['run']['k'] * sum(f['tasks'] for f in report['families'].values())
    assert report_line(report).startswith('wellformed=') and {r['batch'] for r in speed['rows'] if r['what'] == 'generate'} == {8, 32}

def test_a_report_of_other_weights_is_refused(tmp_path):
    import json, shutil
    from thinkingbox_training.base_policy import recorded
    for f in ('model.safetensors', 'build.json', 'report.json', 'speed.json'): shutil.copy(MODEL/f, tmp_path/f)
    r = json.loads((tmp_path/'report.json').read_text()); r['run']['weights_sha256'] = '0' * 64
    (tmp_path/'report.json').write_text(json.dumps(r))
    with pytest.raises(ValueError, match='report.json was measured on other weights'): recorded(tmp_path)

def test_choice_cuts_are_the_calls_that_pick_one_listed_item():
    "A cut is a choice when its call needs an item a tool result listed among others; an order id, or a lone item, is not."
    import json
    from thinkingbox_training.base_policy import is_choice_cut, listed_items
    order = lambda *ids: {'role': 'tool', 'content': json.dumps({'order_id': 'OR-12345', 'items': [{'item_id': i, 'product': f'P{i}'} for i in ids]})}
    call = lambda **a: {'role': 'assistant', 'content': '', 'tool_calls': [{'type': 'function', 'function': {'name': 'create_return', 'arguments': a}}]}
    assert listed_items([order('OI-123451', 'OI-123452')]) == {'OI-123451': 2, 'OI-123452': 2}
    assert listed_items([order('OI-123451')]) == {}
    assert is_choice_cut([order('OI-123451', 'OI-123452'), call(order_id='OR-12345', item_id='OI-123452')])
    assert not is_choice_cut([order('OI-123451', 'OI-123452'), call(order_id='OR-12345')])
    assert not is_choice_cut([order('OI-123451'), call(order_id='OR-12345', item_id='OI-123451')])
    assert not is_choice_cut([{'role': 'tool', 'content': 'not json "items"'}, call(item_id='OI-123451')])

def test_polish_saved_runs_passes_in_order_and_records_their_source(tmp_path):
    "A polish pass on saved weights changes them and keeps the tokenizer; build.json names the source's weights; a pass runs only after the passes before it."
    import json, shutil
    from safetensors.torch import load_file
    from thinkingbox_training.base_policy import BuildConfig, polish_saved, weights_sha256
    cfg = BuildConfig(polish_steps=2, polish_choice=0, polish_tasks_per_family=(1, 1), episodes_per_step=2,
                      cut_drills=2, echo_drills=2, check_tasks=0, log_every=1)
    src, one, two = tmp_path/'src', tmp_path/'one', tmp_path/'two'
    shutil.copytree(MODEL, src)  # a build's first pass: its record without polish passes
    rec = json.loads((src/'build.json').read_text()); rec.pop('polish', None)
    (src/'build.json').write_text(json.dumps(rec))
    quiet = lambda *a: None
    with pytest.raises(ValueError, match='records polish passes \\[\\]; the next to run is 1, not \\[2\\]'):
        polish_saved(src, replace(cfg, out=str(one)), passes=[2], log=quiet)
    rec = polish_saved(src, replace(cfg, out=str(one)), passes=[1], log=quiet)
    assert rec['polished_from']['weights_sha256'] == weights_sha256(src) != weights_sha256(one)
    before, after = load_file(src/'model.safetensors'), load_file(one/'model.safetensors')
    assert before.keys() == after.keys() and any((before[k] != after[k]).any() for k in before)
    assert (one/'tokenizer.json').read_text() == (src/'tokenizer.json').read_text()
    with pytest.raises(ValueError, match='records polish passes \\[1\\]; the next to run is 2, not \\[1\\]'):
        polish_saved(one, replace(cfg, out=str(two)), passes=[1], log=quiet)
    polish_saved(one, replace(cfg, out=str(two)), passes=[2], log=quiet)
    saved = json.loads((two/'build.json').read_text())
    assert saved['config']['polish_tasks_per_family'] == [1, 1] and saved['polished_from']['weights_sha256'] == weights_sha256(one)
    assert [(r['polish_pass'], r['step']) for r in saved['polish'] if 'step' in r] == [(1, 1), (1, 2), (2, 1), (2, 2)]
    with pytest.raises(ValueError, match='is the source'): polish_saved(src, replace(cfg, out=str(src)))
    with pytest.raises(ValueError, match='polish_steps is 0'): polish_saved(src, BuildConfig(out=str(tmp_path/'q')))
    with pytest.raises(ValueError, match='not \\[3\\]'): polish_saved(two, replace(cfg, out=str(tmp_path/'q')), passes=[3])
