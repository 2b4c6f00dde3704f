"""Build 13a's item choice, part by part (2026-11-30): on 300 held-out choice cuts of asking, reasoning demonstrations
(`DemoPolicy(ask_which=True, think_which=True)`, tasks of seed 77, renamed and shuffled as the build does), teacher-forced,
the share whose every token is the argmax for: the think block's product, its item id, and the call's item id. Run
from the build's patched copy of the repository:
  OMP_NUM_THREADS=2 PYTHONPATH=<copy> python parts.py /tmp/builds/13a > parts.log
`choice_cuts` and `argmax` are shared with 14a's `id_tokens.py`."""
import sys, random, torch
from collections import Counter
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import (run_demonstrations, demo_tasks, CopyDrills, DemoPolicy, BuildConfig, _render)

def choice_cuts(path, n):
    "The model at `path`, its tokenizer, and `n` held-out choice cuts with reasoning, each as (messages, text)."
    tok = AutoTokenizer.from_pretrained(path); lm = AutoModelForCausalLM.from_pretrained(path).eval()
    cfg = BuildConfig()
    d = CopyDrills(run_demonstrations(demo_tasks(n=20, seed=77), DemoPolicy(ask_which=True, think_which=True)),
                   through=cfg.cut_through, digits=cfg.rename_digits, items=cfg.shuffle_items)
    pool = [(c, t) for c, t in d.choices if c[-1].get('reasoning_content')]
    cuts = []
    for j in range(n):
        rng = random.Random(10**6 + j); msgs, tools = rng.choice(pool); msgs = d.rename(msgs, rng)
        cuts.append((msgs, _render(msgs, tools)))
    return tok, lm, len(pool), cuts

def argmax(tok, lm, text):
    "The text's tokens (with offsets) and the model's argmax next token at each position."
    enc = tok.backend_tokenizer.encode(text, add_special_tokens=False)
    with torch.no_grad(): return enc, lm(input_ids=torch.tensor([enc.ids])).logits[0].argmax(-1)

def parts(text):
    k = text.rindex('"item_id": "') + len('"item_id": "'); s = text.rindex('<think>')
    p = text.index('"product": "', s) + len('"product": "'); i = text.index('"item_id": "', s) + len('"item_id": "')
    return {'think_product': (p, text.index('"', p)), 'think_id': (i, text.index('"', i)), 'call_id': (k, text.index('"', k))}

if __name__ == '__main__':
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    tok, lm, pooled, cuts = choice_cuts(sys.argv[1], n)
    ok = Counter()
    for _, text in cuts:
        enc, pred = argmax(tok, lm, text)
        for name, (a, b) in parts(text).items():
            ok[name] += all(pred[q - 1].item() == enc.ids[q] for q, (s, _) in enumerate(enc.offsets) if a <= s < b)
    print('choice cuts with reasoning', pooled, '| scored', n, '|', ' '.join(f'{k} {v / n:.3f}' for k, v in ok.items()), flush=True)
