"""Does 13a, which copies the product into its think block, learn the id after it from real choice cuts? (2026-11-30.)
Warm on 13a's weights: 32 choice cuts a step of asking, reasoning demonstrations (`DemoPolicy(ask_which=True,
think_which=True)`, the build's own seed, renamed and shuffled as the build does), the loss on the think block and the
call's item id, AdamW 1e-3 with 30 steps' warmup; every 50 steps, on 300 held-out cuts (seed 77), teacher-forced, the
share whose every token is the argmax for each part, as parts.py scores them. Run from the build's patched copy:
  OMP_NUM_THREADS=2 PYTHONPATH=<copy> python warm_choice.py /tmp/builds/13a 100 32 > warm_choice.log
`fresh`: every id renamed with fresh digits of its own (`rename_identifiers(digits=False)`), so an order's items no longer
share their digits with each other and the order (a probe of item ids that are not look-alikes):
  OMP_NUM_THREADS=2 PYTHONPATH=<copy> python warm_choice.py /tmp/builds/13a 100 32 fresh > warm_choice_fresh.log"""
import sys, random, time, torch
from transformers import AutoTokenizer, AutoModelForCausalLM
from pathlib import Path
from thinkingbox_training.base_policy import (run_demonstrations, demo_tasks, DEMO_SEED, CopyDrills, DemoPolicy, BuildConfig, _render, _batch)
sys.path.insert(0, str(Path(__file__).parent.parent/'binding-probes')); from drills import train_by_part
path, steps, per, fresh = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 'fresh' in sys.argv[4:]
tok = AutoTokenizer.from_pretrained(path); lm = AutoModelForCausalLM.from_pretrained(path)
cfg = BuildConfig()
def cuts(n, seed):
    d = CopyDrills(run_demonstrations(demo_tasks(n=n, seed=seed), DemoPolicy(ask_which=True, think_which=True)),
                   through=cfg.cut_through, digits=cfg.rename_digits and not fresh, items=cfg.shuffle_items)
    return d, [(c, t) for c, t in d.choices if c[-1].get('reasoning_content')]
def parts(text):
    k = text.rindex('"item_id": "') + len('"item_id": "'); s = text.rindex('<think>')
    p = text.index('"product": "', s) + len('"product": "'); i = text.index('"item_id": "', s) + len('"item_id": "')
    return {'think': (s, text.rindex('</think>') + len('</think>')), 'think_product': (p, text.index('"', p)),
            'think_id': (i, text.index('"', i)), 'call_id': (k, text.index('"', k))}
def draw(d, pool, rng):
    msgs, tools = rng.choice(pool); msgs = d.rename(msgs, rng); text = _render(msgs, tools)
    enc = tok.backend_tokenizer.encode(text, add_special_tokens=False); ps = parts(text)
    inside = lambda a, n: ps[n][0] <= a < ps[n][1]
    labels = [t if inside(a, 'think') or inside(a, 'call_id') else -100 for t, (a, _) in zip(enc.ids, enc.offsets)]
    return enc.ids, labels, {n: [inside(a, n) for a, _ in enc.offsets] for n in ps if n != 'think'}
(dt, train), (dh, held) = cuts(60, DEMO_SEED), cuts(20, 77)
H = [draw(dh, held, random.Random(10**6 + i)) for i in range(300)]
pad = tok.convert_tokens_to_ids('<|endoftext|>')
print('train choice cuts', len(train), 'held-out', len(held), flush=True)
train_by_part(lm, lambda rng: [draw(dt, train, rng)[:2] for _ in range(per)], H, pad, steps)
