"""Peak memory of a training step's forward and backward on a tiny Qwen3, measured, and against the memory plan.

What the main job's 8.0 GB peak RSS is: one micro-batch of 32 whole episodes (the CPU recipe's) holds the logits
(batch x tokens x vocabulary, float32), their log-softmax and every layer's activations for the backward pass.
`--per_device_train_batch_size 8` splits a step into micro-batches of 8 (grouped by length, the same token-mean
loss; nbs/10_grpo.ipynb).

    OMP_NUM_THREADS=1 python benchmarks/train_step_memory.py 8 1500       # micro-batch 8, 1500 tokens, no checkpointing
    OMP_NUM_THREADS=1 python benchmarks/train_step_memory.py --plan       # one episode, checkpointing, plan vs measured

`--plan` runs each (model, tokens) in its own process (the peak, ru_maxrss, never goes down within one), float32 with
gradient checkpointing, and prints the measured growth of the peak (VmHWM) over the loaded model beside `memory_plan`'s
gradients + activations + logits for the same shape (nbs/10_grpo.ipynb, "A memory plan").
"""

import resource, subprocess, sys, time
import torch
from transformers import AutoModelForCausalLM, Qwen3Config

SHAPES = {  # tiny: the shipped policy (vocabulary-heavy); wide: activations weigh more than the logits
    'tiny': dict(path='data/models/tiny-qwen3'),
    'wide': dict(
        hidden_size=512,
        intermediate_size=1536,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=2,
        head_dim=64,
        vocab_size=3967,
        tie_word_embeddings=True,
    ),
}


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # Linux: KiB


def load(name):
    s = SHAPES[name]
    if 'path' in s:
        return AutoModelForCausalLM.from_pretrained(s['path'])
    return AutoModelForCausalLM.from_config(Qwen3Config(**s, max_position_embeddings=65536))


def status_kb(key) -> int:
    return int(next(ln.split()[1] for ln in open('/proc/self/status') if ln.startswith(key + ':')))


def measure(name, T):
    """Peak RSS growth (bytes) of one episode's forward and backward, checkpointed, over the loaded model: the peak
    (VmHWM) reset to the current RSS first (a child's ru_maxrss starts at its parent's, e.g. pytest's)."""
    torch.manual_seed(0)
    m = load(name)
    m.gradient_checkpointing_enable()
    m.train()
    ids = torch.randint(0, m.config.vocab_size, (1, T))
    with open('/proc/self/clear_refs', 'w') as f:
        f.write('5')
    before = status_kb('VmRSS')
    logits = m(ids).logits
    lp = torch.log_softmax(logits.float(), -1).gather(-1, ids.roll(-1, 1)[..., None]).squeeze(-1)
    lp.mean().backward()
    return (status_kb('VmHWM') - before) * 1024, m.config


if __name__ == '__main__':
    torch.set_num_threads(1)
    if sys.argv[1:2] == ['--one']:  # a child of --plan
        got, _ = measure(sys.argv[2], int(sys.argv[3]))
        print(int(got))
        sys.exit()
    if sys.argv[1:2] == ['--plan']:
        from thinkingbox_training.grpo import memory_plan

        print('| model | tokens | measured MB | plan MB (gradients + activations + logits) | plan / measured |')
        print('|---|---|---|---|---|')
        for name in SHAPES:
            for T in (1024, 2048, 4096, 8192):
                got = int(
                    subprocess.run(
                        [sys.executable, __file__, '--one', name, str(T)], capture_output=True, text=True, check=True
                    ).stdout.split()[-1]
                )
                p = memory_plan(load(name).config, T, dtype_bytes=4)
                plan = p.gradients + p.activations + p.logits
                print(f'| {name} | {T} | {got / 1e6:.0f} | {plan / 1e6:.0f} | {plan / got:.2f} |', flush=True)
        sys.exit()
    m = AutoModelForCausalLM.from_pretrained('data/models/tiny-qwen3')
    B, T = int(sys.argv[1]), int(sys.argv[2])
    before = peak_gb()
    ids = torch.randint(0, m.config.vocab_size, (B, T))
    t = time.perf_counter()
    logits = m(ids).logits
    lp = torch.log_softmax(logits.float(), -1).gather(-1, ids.roll(-1, 1)[..., None]).squeeze(-1)
    lp.mean().backward()
    print(
        f'micro_batch={B} tokens={T} logits_gb={logits.numel() * 4 / 1e9:.2f} '
        f'peak_rss_gb={peak_gb():.2f} (after loading {before:.2f}) seconds={time.perf_counter() - t:.1f}'
    )
