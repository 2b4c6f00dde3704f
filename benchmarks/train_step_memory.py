"""Peak memory of a training step's forward and backward on the shipped tiny policy, by micro-batch size.

What the main job's 8.0 GB peak RSS is: one micro-batch of 32 whole episodes (the CPU recipe's) holds the logits
(batch x tokens x vocabulary, float32), their log-softmax and every layer's activations for the backward pass.
`--per_device_train_batch_size 8` splits a step into micro-batches of 8 (grouped by length, the same token-mean
loss; nbs/10_grpo.ipynb).

    OMP_NUM_THREADS=1 python benchmarks/train_step_memory.py 8 1500
    OMP_NUM_THREADS=1 python benchmarks/train_step_memory.py 32 1500

Run each size in its own process: the peak (ru_maxrss) never goes down within one.
"""
import resource, sys, time
import torch
from transformers import AutoModelForCausalLM

def peak_gb() -> float: return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # Linux: KiB

if __name__ == '__main__':
    torch.set_num_threads(1)
    B, T = int(sys.argv[1]), int(sys.argv[2])
    m = AutoModelForCausalLM.from_pretrained('data/models/tiny-qwen3')
    before = peak_gb()
    ids = torch.randint(0, m.config.vocab_size, (B, T))
    t = time.perf_counter()
    logits = m(ids).logits
    lp = torch.log_softmax(logits.float(), -1).gather(-1, ids.roll(-1, 1)[..., None]).squeeze(-1)
    lp.mean().backward()
    print(f'micro_batch={B} tokens={T} logits_gb={logits.numel() * 4 / 1e9:.2f} '
          f'peak_rss_gb={peak_gb():.2f} (after loading {before:.2f}) seconds={time.perf_counter() - t:.1f}')
