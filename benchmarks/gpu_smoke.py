"""One prepared GPU check (issue 31): the project's own code on one GPU, with a 0.5B-shaped Qwen3 of random weights.

    bash benchmarks/gpu_smoke.sh               # on a CUDA machine (the wrapper installs the carried wheels first)
    bash benchmarks/gpu_smoke.sh --cpu-check   # here: the same code on tiny shapes, on CPU

It measures
1. generation tokens/s of the transformers sampler the project trains and evaluates with (`HFPolicy.sample`: per-row
   prefill, one batched decode loop, per-attempt seeds), at batch 8 and 64, over prompts rendered from the bundled
   bench tasks (system prompt, policy, tool specs: ~600-1000 tokens with the shipped tokenizer);
2. one GRPO step of the project's trainer (`TBTTrainer`, bf16): seconds and peak GPU memory. The episodes come from
   the scripted expert, half of them flawed, tokenized like a model's turns: a random model fails every task, so its own
   episodes would give zero-variance groups and a skipped step (nothing to time);
3. the logprob gap in bf16: the sampler's logprob of each sampled token against a full forward pass over prompt and
   completion (what TRL's trainer recomputes), max and mean over the sampled tokens, with float32 as the reference.
vLLM parts are skipped with a message (vllm is not installed on the machine this script was prepared for).
Without CUDA and without --cpu-check it exits with status 2 and says so. The summary is printed as JSON and written
to --out (default $OUT/gpu_smoke.json when $OUT is set, else benchmarks/gpu_smoke.json).
"""
import argparse, importlib.util, json, os, platform, sys, time, traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# Qwen3-0.6B's shape (0.6B parameters with its 151,936-token vocabulary; ~0.44B without the tied embedding)
QWEN3_06B = dict(vocab_size=151936, hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, head_dim=128, intermediate_size=3072, max_position_embeddings=40960,
                 rope_theta=1e6, tie_word_embeddings=True)
TINY = dict(vocab_size=4096, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, intermediate_size=192, max_position_embeddings=4096, rope_theta=1e6, tie_word_embeddings=True)

# Binary wheels too big for the 64 MiB carried beside the working tree (cp312: pyarrow 53 MB, scipy 34 MB,
# pandas 12 MB):
# the GRPO part needs them (datasets, which TRL imports, and the metrics module) and is skipped where they are missing.
NOT_CARRIED = {'pyarrow', 'scipy', 'pandas'}

def requirements() -> list:
    "Pinned distributions the project needs beyond torch, transformers and their direct requirements (from here)."
    import importlib.metadata as md, re
    def reqs(n):
        try: d = md.distribution(n)
        except md.PackageNotFoundError: return None
        return [re.split(r'[ ;<>=!~\[(]', r, maxsplit=1)[0].lower().replace('_', '-')
                for r in d.requires or [] if 'extra ==' not in r]
    def closure(roots):
        seen, todo = set(), list(roots)
        while todo:
            n = todo.pop()
            if n in seen or (r := reqs(n)) is None: continue
            seen.add(n); todo += r
        return seen
    there = closure(['torch']) | {'transformers'} | set(reqs('transformers') or [])
    need = closure(['thinkingbox-training']) - there - NOT_CARRIED - {'thinkingbox-training'}
    return [f'{n}=={md.version(n)}' for n in sorted(need)]

def args_():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--cpu-check', action='store_true', help='run the same code on tiny shapes on CPU (no CUDA needed)')
    p.add_argument('--max-tokens', type=int, default=None, help='tokens sampled per row (default 128 on GPU, 8 on CPU)')
    p.add_argument('--budget-s', type=float, default=210, help='parts not started by then are skipped')
    p.add_argument('--out', default=None)
    p.add_argument('--requirements', action='store_true',
                   help='print the pinned wheels to carry (used by --build-wheels) and exit')
    return p.parse_args()

def model_for(shape:dict, dtype, device, seed:int=0):
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(seed)
    rope = {'rope_type': 'default', 'rope_theta': shape['rope_theta']}
    cfg = Qwen3Config(**{k: v for k, v in shape.items() if k != 'rope_theta'}, rope_parameters=rope,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None)
    with torch.device(device): m = Qwen3ForCausalLM(cfg)     # initialised where it runs (0.6B on a CPU takes a while)
    return m.to(dtype=dtype)

def prompts(fmt, n:int) -> list:
    "n prompts rendered from the bundled bench tasks (cycled), as the episode runner renders a first turn."
    from thinkingbox_training.tasks import load_tasks, get_domain
    from thinkingbox_training.episode import SYSTEM_PROMPT
    tasks = load_tasks(*sorted(str(p) for p in (ROOT/'data'/'tasks').glob('*_bench.jsonl')))
    out = []
    for i in range(n):
        t = tasks[i % len(tasks)]; d = get_domain(t.domain)
        msgs = [{'role': 'system', 'content': SYSTEM_PROMPT.format(domain=t.domain, policy=d.policy)},
                {'role': 'user', 'content': t.query}]
        out.append(fmt.prompt_ids(msgs, d.tool_specs()))
    return out

def sync(device):
    import torch
    if device == 'cuda': torch.cuda.synchronize()

def generation(model, tok, device, batch:int, max_tokens:int) -> dict:
    "Tokens/s of HFPolicy.sample at this batch (a row that samples the end-of-turn token stops early: counted)."
    from thinkingbox_training.policies import HFPolicy, SamplingConfig
    pol = HFPolicy(model, tok, sampling=SamplingConfig(max_tokens=max_tokens))
    ps = prompts(pol.fmt, batch)
    pol.sample(ps[:2], [0, 1], 2)                       # warm-up (kernels, allocator)
    sync(device); t0 = time.perf_counter()
    gens = pol.sample(ps, list(range(batch)), max_tokens)
    sync(device); dt = time.perf_counter() - t0
    n = sum(len(g.token_ids) for g in gens)
    return {'batch': batch, 'prompt_tokens_mean': round(sum(map(len, ps)) / batch), 'sampled_tokens': n,
            'seconds': round(dt, 3),
            'tokens_per_s': round(n / dt, 1), 'stopped_early': sum(g.finish == 'stop' for g in gens)}

def logprob_gap(model, tok, device, dtype, max_tokens:int, batch:int=8) -> dict:
    "Sampler logprobs (KV cache, batched decode) against one full forward pass over prompt + completion, in `dtype`."
    import torch
    from thinkingbox_training.policies import HFPolicy, SamplingConfig
    pol = HFPolicy(model.to(dtype), tok, sampling=SamplingConfig(max_tokens=max_tokens))
    ps = prompts(pol.fmt, batch)
    gens = pol.sample(ps, list(range(batch)), max_tokens)
    gaps = []
    with torch.no_grad():
        for p, g in zip(ps, gens):
            ids = torch.tensor([list(p) + g.token_ids], device=device)
            lp = torch.log_softmax(model(input_ids=ids).logits[0, len(p) - 1:-1].float(), -1)
            re = lp.gather(-1, torch.tensor(g.token_ids, device=device)[:, None])[:, 0].cpu()
            gaps.append((re - torch.tensor(g.logprobs)).abs())
    g = torch.cat(gaps)
    return {'dtype': str(dtype).replace('torch.', ''), 'tokens': len(g), 'max_abs': float(g.max()),
            'mean_abs': float(g.mean())}

def grpo_step(model, tok, device, tiny:bool, tmp:Path) -> dict:
    "One step of the project's GRPO trainer on the bundled train tasks; seconds and peak GPU memory."
    import torch
    from transformers import PrinterCallback
    from thinkingbox_training.grpo import TBTConfig, TBTTrainer
    from thinkingbox_training.tasks import load_tasks
    from thinkingbox_training.policies import ScriptedPolicy
    pool = load_tasks(*sorted(str(p) for p in (ROOT/'data'/'tasks').glob('*_train.jsonl')))
    groups, size = (2, 4) if tiny else (8, 8)
    cfg = TBTConfig(output_dir=str(tmp/'grpo'), groups_per_step=groups, group_size=size,
                    per_device_train_batch_size=size, max_steps=1, max_refill_rounds=2, learning_rate=1e-6, seed=0,
                    use_cpu=device != 'cuda', bf16=device == 'cuda',
                    gradient_checkpointing=False, report_to='none', save_strategy='no', disable_tqdm=True, max_turns=8,
                    max_tokens_per_turn=64)
    t = TBTTrainer(model, cfg, pool, processing_class=tok, policy=ScriptedPolicy(flaw=0.5, tokenizer=tok))
    t.remove_callback(PrinterCallback)
    if device == 'cuda': torch.cuda.reset_peak_memory_stats()
    sync(device); t0 = time.perf_counter()
    t.train()
    sync(device); dt = time.perf_counter() - t0
    log = next(h for h in t.state.log_history if 'loss' in h)
    out = {'groups': groups, 'group_size': size, 'seconds': round(dt, 2), 'skipped': t.step_log[0]['skipped'],
           'episode_tokens_mean': log.get('tbt/episode_tokens'), 'loss': log['loss']}
    if device == 'cuda': out['peak_gpu_gib'] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
    return out

def main() -> int:
    a = args_()
    if a.requirements: print('\n'.join(requirements())); return 0
    import torch
    cuda = torch.cuda.is_available()
    if not cuda and not a.cpu_check:
        print('gpu_smoke: no CUDA device here (torch.cuda.is_available() is False). This script measures a GPU; '
              'run `bash benchmarks/gpu_smoke.sh --cpu-check` for the same code on tiny shapes on CPU.',
              file=sys.stderr)
        return 2
    device = 'cuda' if cuda and not a.cpu_check else 'cpu'
    tiny = device == 'cpu'
    shape, max_tokens = (TINY, a.max_tokens or 8) if tiny else (QWEN3_06B, a.max_tokens or 128)
    from transformers import AutoTokenizer
    import transformers
    tok = AutoTokenizer.from_pretrained(ROOT/'data'/'models'/'tiny-qwen3')   # the shipped tokenizer and its chat format
    t_start = time.perf_counter()
    name = torch.cuda.get_device_name() if device == 'cuda' else platform.processor() or 'cpu'
    out = {'date': time.strftime('%Y-%m-%d %H:%M %Z'), 'device': name,
           'torch': torch.__version__, 'transformers': transformers.__version__, 'python': platform.python_version(),
           'shape': 'tiny (--cpu-check)' if tiny else 'Qwen3-0.6B', 'max_tokens': max_tokens, 'parts': {}}
    model = model_for(shape, torch.float32, device)
    out['parameters'] = sum(p.numel() for p in model.parameters())
    tmp = Path(os.environ.get('TMPDIR', '/tmp'))/f'gpu_smoke_{os.getpid()}'
    def part(name, fn):
        if time.perf_counter() - t_start > a.budget_s:
            out['parts'][name] = f'skipped: the {a.budget_s:.0f} s budget was spent'; return
        t0 = time.perf_counter()
        try: out['parts'][name] = fn()
        except Exception as e:
            out['parts'][name] = f'failed: {type(e).__name__}: {e}'; traceback.print_exc()
        print(f'{name} ({time.perf_counter() - t0:.1f} s):', json.dumps(out['parts'][name]), flush=True)
    half = [model_for(shape, torch.bfloat16, device)]     # dropped after its parts, to free its memory
    for b in (8, 64): part(f'generate_bf16_batch{b}', lambda b=b: generation(half[0], tok, device, b, max_tokens))
    part('logprob_gap_bf16', lambda: logprob_gap(half[0], tok, device, torch.bfloat16, max_tokens))
    half.clear()
    part('logprob_gap_fp32', lambda: logprob_gap(model, tok, device, torch.float32, max_tokens))
    needed = ('trl', 'mcp', 'datasets', 'sqlmodel', 'matplotlib', *sorted(NOT_CARRIED))
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing: out['parts']['grpo_step'] = f'skipped: not installed here: {", ".join(missing)}'
    else: part('grpo_step', lambda: grpo_step(model, tok, device, tiny, tmp))
    out['parts']['vllm'] = ('skipped: vllm is installed, but this script has no vLLM part yet'
                            if importlib.util.find_spec('vllm') else 'skipped: vllm is not installed on this machine')
    out['seconds'] = round(time.perf_counter() - t_start, 1)
    folder = Path(os.environ['OUT']) if os.environ.get('OUT') else ROOT/'benchmarks'
    dest = Path(a.out) if a.out else folder/'gpu_smoke.json'
    dest.write_text(json.dumps(out, indent=1) + '\n')
    print(json.dumps(out, indent=1)); print('written', dest)
    return 0 if all(not str(v).startswith('failed') for v in out['parts'].values()) else 1

if __name__ == '__main__': sys.exit(main())
