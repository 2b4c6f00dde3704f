"""Does 12a's item choice on binding drills carry over to real choice cuts? Teacher-forced, every token of the chosen
item id (and its closing quote) argmax, on 200 of each drawn from fresh demonstrations (seed 77, 20 tasks per family)
made by the demonstrator that asks which item, shuffled and renamed as the build does. Run with 12a's
get-order-product-first.patch applied, as the build was:
  OMP_NUM_THREADS=2 python transfer_probe.py /path/to/12a    -> transfer_probe.log
(12a's weights are not committed: `BuildConfig(binding_drills=8, ask_which=True)` with the patch rebuilds them.)"""
import sys, random, torch
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import BuildConfig, CopyDrills, DemoPolicy, run_demonstrations, demo_tasks, encode_conversation, _batch
path = sys.argv[1]
tok, lm = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path).eval()
cfg = BuildConfig()
held = CopyDrills(run_demonstrations(demo_tasks(n=20, seed=77), DemoPolicy(ask_which=True)), through=cfg.cut_through,
                  digits=cfg.rename_digits, items=cfg.shuffle_items)
pad = tok.convert_tokens_to_ids('<|endoftext|>')
def exact(exs):
    ok = 0
    with torch.no_grad():
        for i in range(0, len(exs), 50):
            X, Y = _batch(exs[i:i + 50], pad); pred = lm(input_ids=X).logits.argmax(-1)[:, :-1]; y = Y[:, 1:]
            ok += ((pred == y) | (y == -100)).all(1).sum().item()
    return ok / len(exs)
rng = random.Random(5)
B = [encode_conversation(tok, *held.binding(rng), loss='arg:item_id') for _ in range(200)]
C = [encode_conversation(tok, *held.cut(rng, choice=True), loss='arg:item_id') for _ in range(200)]
def no_system(rng):
    m, _ = held.cut(rng, choice=True); return encode_conversation(tok, m[1:], None, loss='arg:item_id')
D = [no_system(rng) for _ in range(200)]
print('binding drills (held-out)', exact(B), 'choice cuts', exact(C), 'choice cuts without system turn', exact(D), flush=True)
