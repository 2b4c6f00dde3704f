"""Which product does the trained `choice_parts.py span` probe write first? (2026-11-30.) Loads the weights that run
saved (/tmp/choice_parts_span), and on 120 held-out cuts of the same kind (seed 77) compares the argmax token after
`<think>\n"product": "` with the first token of the customer's product, of the order's other products, or neither. Run
with data/models/builds/12a's get-order-product-first.patch applied, after choice_parts.py span:
  OMP_NUM_THREADS=1 python first_product_token.py    -> right 31, another listed 19, else 70 (of 120)"""
import random, torch, json
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import *
from thinkingbox_training.base_policy import _render
tok = AutoTokenizer.from_pretrained(str(model_dir())); lm = AutoModelForCausalLM.from_pretrained('/tmp/choice_parts_span').eval()
cfg = BuildConfig()
d = CopyDrills(run_demonstrations(demo_tasks(n=20, seed=77), DemoPolicy(ask_which=True)), through=cfg.cut_through, digits=cfg.rename_digits, items=cfg.shuffle_items)
pool = [c for c, t in d.choices if binding_drill(c)]
tools = d.choices[0][1]
from collections import Counter
res = Counter(); forms = Counter()
for i in range(120):
    rng = random.Random(10**6 + i)
    cut = rng.choice(pool)
    product, order, _, call = binding_drill(cut)
    item = call['tool_calls'][0]['function']['arguments']['item_id']
    cut = cut[:-1] + [{**call, 'reasoning_content': f'"product": "{product}", "item_id": "{item}"'}]
    msgs = d.rename(cut, rng); text = _render(msgs, tools)
    s = text.rindex('<think>'); p = text.index('"product": "', s) + len('"product": "')
    enc = tok.backend_tokenizer.encode(text, add_special_tokens=False)
    k = next(j for j, (a, _) in enumerate(enc.offsets) if a >= p)
    with torch.no_grad(): logits = lm(input_ids=torch.tensor([enc.ids[:k]])).logits[0, -1]
    pred = tok.decode([logits.argmax().item()])
    items = next(its for its in map(result_items, reversed(msgs)) if any(x['item_id'] for x in its))
    names = [x['product'] for x in items]
    first = [tok.decode([tok(n)['input_ids'][0]]) for n in names]
    right = tok.decode([enc.ids[k]])
    pos = names.index(product) if product in names else -1
    res['right' if pred == right else 'other listed' if pred in first else 'else'] += 1
    res[f'pred_is_listed_pos{first.index(pred) if pred in first else "-"}'] += 1
    if i < 6: print(repr(right), repr(pred), names, 'user:', [m['content'] for m in msgs if m['role']=='user'][-1])
print(res)
