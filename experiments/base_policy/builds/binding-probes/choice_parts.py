"""Where does the item choice fail? (2026-11-30, after think_after.py span stayed at 0.02.) Real choice cuts of asking
demonstrations (`DemoPolicy(ask_which=True)`), warm on shipped 8a, renamed and shuffled as the build does, with one of:
`span`: the call's turn first writes, in `<think>`, the result's fragment for the chosen item
(`"product": "Yoga Mat", "item_id": "OI-186385"`); `list`: the expert's question lists the order's items with their ids
("Which item of order OR-18638 do you mean: the Yoga Mat (OI-186385) or the LED Desk Lamp (OI-186386)?"), so the
call's id sits next to the product the customer then names. The loss is on the think block or the question, and on
the call's item id. Every 50 steps, on 300 held-out cuts (seed 77): for each part, the share whose every token is the
argmax (teacher-forced). AdamW 1e-3, 30 steps' warmup. Run with data/models/builds/12a's get-order-product-first.patch:
  OMP_NUM_THREADS=1 python choice_parts.py span 100 32    choice_parts_span.log
  OMP_NUM_THREADS=1 python choice_parts.py list 100 32    choice_parts_list.log   (the two side by side)"""
import sys, random, time, torch
from pathlib import Path
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import (model_dir, run_demonstrations, demo_tasks, DEMO_SEED, CopyDrills, DemoPolicy,
                                              BuildConfig, binding_drill, result_items, _render, _batch)
sys.path.insert(0, str(Path(__file__).parent)); from drills import train_by_part
how, steps, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if how not in ('span', 'list'): raise ValueError(f"how must be 'span' or 'list', not {how!r}")
tok = AutoTokenizer.from_pretrained(str(model_dir())); lm = AutoModelForCausalLM.from_pretrained(str(model_dir()))
cfg = BuildConfig()
def varied(cut):
    product, order, _, call = binding_drill(cut)
    item = call['tool_calls'][0]['function']['arguments']['item_id']
    if how == 'span':
        return cut[:-1] + [{**call, 'reasoning_content': f'"product": "{product}", "item_id": "{item}"'}]
    items = next(its for its in map(result_items, reversed(cut)) if any(i['item_id'] == item for i in its))
    listing = ' or '.join(f"the {i['product']} ({i['item_id']})" for i in items)
    return [{**m, 'content': m['content'].replace('do you mean?', f'do you mean: {listing}?')}
            if m['role'] == 'assistant' and (m.get('content') or '').startswith('Which item') else m for m in cut]
def cuts(n, seed):
    d = CopyDrills(run_demonstrations(demo_tasks(n=n, seed=seed), DemoPolicy(ask_which=True)), through=cfg.cut_through,
                   digits=cfg.rename_digits, items=cfg.shuffle_items)
    return d, [(varied(c), t) for c, t in d.choices if binding_drill(c)]
def parts(text):
    "name -> (start, end) character spans of what the loss covers."
    k = text.rindex('"item_id": "') + len('"item_id": "'); out = {'call_id': (k, text.index('"', k))}
    if how == 'span':
        s, e = text.rindex('<think>'), text.rindex('</think>') + len('</think>')
        p = text.index('"product": "', s) + len('"product": "'); i = text.index('"item_id": "', s) + len('"item_id": "')
        out.update(think=(s, e), think_product=(p, text.index('"', p)), think_id=(i, text.index('"', i)))
    else:
        s = text.rindex('do you mean: ') + len('do you mean: '); out['question'] = (s, text.index('<|im_end|>', s))
    return out
def draw(d, pool, rng):
    msgs, tools = rng.choice(pool); msgs = d.rename(msgs, rng); text = _render(msgs, tools)
    enc = tok.backend_tokenizer.encode(text, add_special_tokens=False); ps = parts(text)
    inside = lambda a, name: ps[name][0] <= a < ps[name][1]
    names = [n for n in ps if n in ('call_id', 'think', 'question')]
    labels = [t if any(inside(a, n) for n in names) else -100 for t, (a, _) in zip(enc.ids, enc.offsets)]
    return enc.ids, labels, {n: [inside(a, n) for a, _ in enc.offsets] for n in ps}
(dt, train), (dh, held) = cuts(60, DEMO_SEED), cuts(20, 77)
H = [draw(dh, held, random.Random(10**6 + i)) for i in range(300)]
print(how, 'train choice cuts', len(train), 'held-out', len(held), flush=True)
print(_render(*held[0])[-520:], flush=True)
pad = tok.convert_tokens_to_ids('<|endoftext|>')
train_by_part(lm, lambda rng: [draw(dt, train, rng)[:2] for _ in range(per)], H, pad, steps, tag=how)
lm.save_pretrained(f'/tmp/choice_parts_{how}')
