"""Scratchpad probe (2026-11-30, after choice_after.py and binding_parts.py): can shipped build 8a learn the item choice
on real choice cuts of asking demonstrations (`DemoPolicy(ask_which=True)`) when the call's turn first writes, in its
`<think>` block, the tool result's own text for the chosen item? `span`: the reasoning is the result's fragment
`"product": "Yoga Mat", "item_id": "OI-186385"` (so the id is copied from right after the product just written, as an
induction copy, and the call copies it from the line above); `plain`: `The Yoga Mat is OI-186385.`; `none`: no
reasoning (as choice_after.py). Cuts as the build makes them (`CopyDrills`: renamed, items shuffled), the loss on the
think block (tags included) and the call's item id; `exact` is the share of 300 held-out cuts (fresh demonstrations,
seed 77) whose every such token is the argmax, so greedy decoding writes the reasoning and the right id. AdamW 1e-3, 30
steps' warmup. Run with data/models/builds/12a's get-order-product-first.patch applied:
  OMP_NUM_THREADS=2 python think_after.py span 150 32     think_after_span.log"""
import sys, random
from pathlib import Path
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import (model_dir, run_demonstrations, demo_tasks, DEMO_SEED, CopyDrills, DemoPolicy,
                                              BuildConfig, encode_conversation, binding_drill, _render)
sys.path.insert(0, str(Path(__file__).parent)); from drills import train_probe
how, steps, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if how not in ('span', 'plain', 'none'): raise ValueError(f"how must be 'span', 'plain' or 'none', not {how!r}")
tok = AutoTokenizer.from_pretrained(str(model_dir())); lm = AutoModelForCausalLM.from_pretrained(str(model_dir()))
cfg = BuildConfig()
def reasoned(cut):
    product, _, _, call = binding_drill(cut)
    item = call['tool_calls'][0]['function']['arguments']['item_id']
    r = {'span': f'"product": "{product}", "item_id": "{item}"', 'plain': f'The {product} is {item}.', 'none': None}[how]
    return cut[:-1] + [{**call, 'reasoning_content': r}] if r else cut
def cuts(n, seed):
    d = CopyDrills(run_demonstrations(demo_tasks(n=n, seed=seed), DemoPolicy(ask_which=True)), through=cfg.cut_through,
                   digits=cfg.rename_digits, items=cfg.shuffle_items)
    return d, [(reasoned(c), t) for c, t in d.choices if binding_drill(c)]
def draw(d, pool, rng):
    msgs, tools = rng.choice(pool); msgs = d.rename(msgs, rng)
    ids, labels = encode_conversation(tok, msgs, tools, loss='arg:item_id')
    if how != 'none':
        text = _render(msgs, tools); offs = tok.backend_tokenizer.encode(text, add_special_tokens=False).offsets
        s, e = text.rindex('<think>'), text.rindex('</think>') + len('</think>')
        labels = [t if s <= a < e else l for t, l, (a, _) in zip(ids, labels, offs)]
    return ids, labels
(dt, train), (dh, held) = cuts(60, DEMO_SEED), cuts(20, 77)
H = [draw(dh, held, random.Random(10**6 + i)) for i in range(300)]
print(how, 'train choice cuts', len(train), 'held-out', len(held), flush=True)
print(_render(*held[0])[-700:], flush=True)
train_probe(lm, tok, lambda rng: draw(dt, train, rng), H, steps, per, 1e-3, how, chunk=50)
