"""One prepared GPU check: a Qwen3-shaped model's bf16 GRPO-loss step on one GPU, its tokens/s and peak memory
against the memory plan (nbs/10_grpo.ipynb, "A memory plan").

    bash benchmarks/gpu_smoke.sh               # on a CUDA machine: stops within 4 minutes
    bash benchmarks/gpu_smoke.sh --cpu-check   # anywhere: the same code on tiny shapes, on CPU

Written for the GPU machine as it is: torch, transformers, accelerate, peft and TensorBoard, but no TRL, vLLM or
DeepSpeed and no network. TRL cannot travel within the 64 MiB carried beside the working tree (it imports `datasets`,
which needs pyarrow's 53 MB wheel), so neither can the project's trainer: the step here is the trainer's loss computed
directly, as TRL computes it with the reference recipe's settings (token-mean "dapo" loss, clip 0.2, no KL, one
episode a micro-batch): the full logits, their float32 log-softmax at the sampled tokens, the clipped ratio against
the old (detached) logprobs, times a +-1 advantage; backward; an AdamW step. The memory plan's formula is read from
thinkingbox_training/grpo_core.py's source (that module imports transformers), so the plan printed is the one the
trainer checks.

Each length runs the recipe that the plan covers on one GPU, LoRA (peft, rank 32 on every linear layer, the base
frozen in bf16), on a Qwen3-8B-shaped model of random weights; it reports per length the tokens/s of the step, the
peak (torch.cuda.max_memory_allocated) and the plan, and their ratio. On a CPU (--cpu-check) the shape is tiny,
float32, and the peak is the growth of the process's VmHWM. Exit status: 0 measured, 1 a part failed, 2 no CUDA
(without --cpu-check). Then the shortest length once more while two more copies of the weights are held, as
sampling ahead in process holds them (the producer's model and the snapshot it installs; the plan adds them: the
memory plan's `ahead_bytes`); with a vLLM server (the async cluster recipe) the trainer's GPU holds nothing more, so
this part measures the in-process variant only. It has not run on a GPU yet. The summary is printed as JSON and
written to --out (default $OUT/gpu_smoke.json when $OUT is set, else benchmarks/gpu_smoke.json).
"""

import argparse, ast, json, os, platform, sys, time, traceback
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QWEN3_8B = dict(
    vocab_size=151936,
    hidden_size=4096,
    num_hidden_layers=36,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    intermediate_size=12288,
    tie_word_embeddings=False,
)
TINY = dict(
    vocab_size=4096,
    hidden_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    intermediate_size=384,
    tie_word_embeddings=True,
)
TARGETS = ['q_proj', 'k_proj', 'v_proj', 'o_proj', 'gate_proj', 'up_proj', 'down_proj']


def plan_functions() -> dict:
    "memory_plan and max_fitting_tokens from the trainer core's source, without importing it (it imports transformers)."
    tree = ast.parse((ROOT / 'thinkingbox_training' / 'grpo_core.py').read_text())
    keep = [n for n in tree.body if getattr(n, 'name', None) in ('MemoryPlan', 'memory_plan', 'max_fitting_tokens')]
    assert len(keep) == 3, 'memory_plan, MemoryPlan or max_fitting_tokens is gone from grpo_core.py'
    ns = {'dataclass': dataclass}
    exec(compile(ast.Module(body=keep, type_ignores=[]), 'grpo_core.py', 'exec'), ns)
    return ns


def status_kb(key) -> int:
    return int(next(ln.split()[1] for ln in open('/proc/self/status') if ln.startswith(key + ':')))


def model_for(shape, dtype, device, rank):
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(**shape, max_position_embeddings=65536, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    with torch.device(device):
        m = Qwen3ForCausalLM(cfg).to(dtype)  # initialised where it runs
    m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={'use_reentrant': False})
    m.enable_input_require_grads()
    m.config.use_cache = False
    m = get_peft_model(
        m, LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=TARGETS, lora_dropout=0.0, task_type='CAUSAL_LM')
    )  # peft keeps the adapters in float32
    m.train()
    return m, cfg


def grpo_step(m, opt, vocab, tokens, device, epsilon=0.2) -> dict:
    "One episode's GRPO loss (TRL's, dapo, no KL), backward and AdamW step; seconds and peak."
    import torch

    ids = torch.randint(0, vocab, (1, tokens), device=device)
    adv = torch.where(torch.arange(tokens - 1, device=device) % 2 == 0, 1.0, -1.0)[None]
    if device == 'cuda':
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = 0
    else:
        with open('/proc/self/clear_refs', 'w') as f:
            f.write('5')
        base = status_kb('VmRSS')
    t0 = time.perf_counter()
    logits = m(input_ids=ids).logits[:, :-1]
    lp = torch.log_softmax(logits.float(), -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    ratio = torch.exp(lp - lp.detach())  # one pass a batch: the old logprobs are these, detached, as in TRL
    loss = -torch.min(ratio * adv, ratio.clamp(1 - epsilon, 1 + epsilon) * adv).mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if device == 'cuda':
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = (status_kb('VmHWM') - base) * 1024
    dt = time.perf_counter() - t0
    return {
        'tokens': tokens,
        'seconds': round(dt, 3),
        'tokens_per_s': round(tokens / dt, 1),
        'peak_gib': round(peak / 2**30, 3),
        'loss': round(float(loss), 4),
    }


def ahead_step(m, opt, cfg, tokens, device, plan, dtype) -> dict:
    """The step again while the weights are held twice more, as sampling ahead in process holds them (max_staleness >= 1
    without a vLLM server: the producer's copy and the snapshot it installs next); the plan adds `ahead_bytes`."""
    import copy, torch

    sampler = copy.deepcopy(m).eval().requires_grad_(False)
    snapshot = {k: v.detach().clone() for k, v in m.state_dict().items()}
    try:
        r = grpo_step(m, opt, cfg.vocab_size, tokens, device)
    finally:
        del sampler, snapshot
        if device == 'cuda':
            torch.cuda.empty_cache()
    p = plan['memory_plan'](cfg, tokens, lora_rank=32, dtype_bytes=2 if dtype == torch.bfloat16 else 4)
    # on a CPU the copies exist before the peak is reset: only the step's growth is compared, as for the other lengths
    r['plan_gib'] = round((p.total + 2 * p.weights if device == 'cuda' else p.activations + p.logits) / 2**30, 3)
    r['plan_over_peak'] = round(r['plan_gib'] / r['peak_gib'], 2) if r['peak_gib'] else None
    r['part'] = 'sampling ahead in process: two more copies of the weights held'
    return r


def args_():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--cpu-check', action='store_true', help='the same code on tiny shapes on CPU (no CUDA needed)')
    p.add_argument(
        '--tokens',
        type=int,
        nargs='*',
        default=None,
        help='episode lengths (default 4096 8192 16384 on a GPU, 256 512 on a CPU)',
    )
    p.add_argument('--budget-s', type=float, default=200, help='lengths not started by then are skipped')
    p.add_argument('--out', default=None)
    return p.parse_args()


def main() -> int:
    a = args_()
    import torch, transformers, peft

    cuda = torch.cuda.is_available()
    if not cuda and not a.cpu_check:
        print(
            'gpu_smoke: no CUDA device here (torch.cuda.is_available() is False). This script measures a GPU; '
            'run `bash benchmarks/gpu_smoke.sh --cpu-check` for the same code on tiny shapes on CPU.',
            file=sys.stderr,
        )
        return 2
    device = 'cuda' if cuda and not a.cpu_check else 'cpu'
    shape, dtype = (QWEN3_8B, torch.bfloat16) if device == 'cuda' else (TINY, torch.float32)
    lengths = a.tokens or ([4096, 8192, 16384] if device == 'cuda' else [256, 512])
    t_start = time.perf_counter()
    plan = plan_functions()
    out = {
        'date': time.strftime('%Y-%m-%d %H:%M %Z'),
        'device': torch.cuda.get_device_name() if device == 'cuda' else platform.processor() or 'cpu',
        'torch': torch.__version__,
        'transformers': transformers.__version__,
        'peft': peft.__version__,
        'shape': 'Qwen3-8B' if device == 'cuda' else 'tiny (--cpu-check)',
        'dtype': str(dtype),
        'lora_rank': 32,
        'steps': [],
        'failed': [],
    }
    m, cfg = model_for(shape, dtype, device, 32)
    out['parameters'] = sum(p.numel() for p in m.parameters())
    out['trainable'] = sum(p.numel() for p in m.parameters() if p.requires_grad)
    opt = torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-5)
    grpo_step(m, opt, cfg.vocab_size, min(lengths), device)  # warm-up: kernels, AdamW's states
    if device == 'cuda':
        out['gpu_total_gib'] = round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1)
    for n in lengths:
        if time.perf_counter() - t_start > a.budget_s:
            out['failed'].append(f'{n} tokens: skipped, the {a.budget_s:.0f} s budget was spent')
            continue
        try:
            r = grpo_step(m, opt, cfg.vocab_size, n, device)
            p = plan['memory_plan'](cfg, n, lora_rank=32, dtype_bytes=2 if dtype == torch.bfloat16 else 4)
            # on a CPU the model was loaded before the peak was reset: the plan's part that grows is compared
            r['plan_gib'] = round((p.total if device == 'cuda' else p.activations + p.logits) / 2**30, 3)
            r['plan_over_peak'] = round(r['plan_gib'] / r['peak_gib'], 2) if r['peak_gib'] else None
            out['steps'].append(r)
            print(json.dumps(r), flush=True)
        except Exception as e:
            out['failed'].append(f'{n} tokens: {type(e).__name__}: {str(e).splitlines()[0]}')
            traceback.print_exc()
            if device == 'cuda':
                torch.cuda.empty_cache()
    if out['steps'] and time.perf_counter() - t_start <= a.budget_s:
        try:
            out['ahead'] = ahead_step(m, opt, cfg, min(lengths), device, plan, dtype)
            print(json.dumps(out['ahead']), flush=True)
        except Exception as e:
            out['failed'].append(f'sampling ahead: {type(e).__name__}: {str(e).splitlines()[0]}')
            traceback.print_exc()
    if device == 'cuda':
        out['plan_max_fitting_tokens'] = plan['max_fitting_tokens'](
            cfg, int(out['gpu_total_gib'] * 2**30), lora_rank=32
        )
    out['seconds'] = round(time.perf_counter() - t_start, 1)
    folder = Path(os.environ['OUT']) if os.environ.get('OUT') else ROOT / 'benchmarks'
    dest = Path(a.out) if a.out else folder / 'gpu_smoke.json'
    dest.write_text(json.dumps(out, indent=1) + '\n')
    print(json.dumps(out, indent=1))
    print('written', dest)
    return 1 if out['failed'] or not out['steps'] else 0


if __name__ == '__main__':
    sys.exit(main())
