"""Which token of the think block's item id does build 14a get wrong? (2026-11-30) On the held-out choice cuts of
13a's `parts.py` (seed 77, renamed and shuffled as the build does), teacher-forced, for the cuts whose think-block
product is right: the share of cuts whose argmax gives each token of the id after it (`OI-`, then the digit groups),
and, for the first digit group, whether a wrong argmax is the first group of another listed item. Run from the copy
with opaque-item-ids.patch applied:
  OMP_NUM_THREADS=1 PYTHONPATH=<copy> python id_tokens.py /tmp/builds/14a > id_tokens.log"""
import sys, random, torch
from collections import Counter
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import (run_demonstrations, demo_tasks, CopyDrills, DemoPolicy, BuildConfig, _render,
                                              listed_items)
path = sys.argv[1]
tok = AutoTokenizer.from_pretrained(path); lm = AutoModelForCausalLM.from_pretrained(path).eval()
cfg = BuildConfig()
d = CopyDrills(run_demonstrations(demo_tasks(n=20, seed=77), DemoPolicy(ask_which=True, think_which=True)),
               through=cfg.cut_through, digits=cfg.rename_digits, items=cfg.shuffle_items)
pool = [(c, t) for c, t in d.choices if c[-1].get('reasoning_content')]
right, cuts, first_other = Counter(), 0, Counter()
with torch.no_grad():
    for j in range(int(sys.argv[2]) if len(sys.argv) > 2 else 300):
        rng = random.Random(10**6 + j); msgs, tools = rng.choice(pool); msgs = d.rename(msgs, rng); text = _render(msgs, tools)
        enc = tok.backend_tokenizer.encode(text, add_special_tokens=False)
        pred = lm(input_ids=torch.tensor([enc.ids])).logits[0].argmax(-1)
        s = text.rindex('<think>')
        p = text.index('"product": "', s) + len('"product": "'); pe = text.index('"', p)
        if not all(pred[q - 1].item() == enc.ids[q] for q, (a, _) in enumerate(enc.offsets) if p <= a < pe): continue
        cuts += 1
        i = text.index('"item_id": "', s) + len('"item_id": "'); ie = text.index('"', i)
        toks = [q for q, (a, _) in enumerate(enc.offsets) if i <= a < ie]
        for k, q in enumerate(toks): right[k] += pred[q - 1].item() == enc.ids[q]
        q = toks[1]  # the first digit group
        if pred[q - 1].item() != enc.ids[q]:
            firsts = {tok.backend_tokenizer.encode(v, add_special_tokens=False).ids[1] for v in listed_items(msgs[:-1])}
            first_other[pred[q - 1].item() in firsts] += 1
print(f'cuts with the right product: {cuts}; id tokens right, in order:', [round(right[k] / cuts, 3) for k in sorted(right)],
      '| wrong first digit group that is another listed item\'s:', dict(first_other), flush=True)
