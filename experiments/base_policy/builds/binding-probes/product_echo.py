"""Can 8a learn to copy words? (2026-11-30, after choice_parts.py span: warm on 8a, the first product token the call's
think block writes was the customer's product 26% of the time, another product of the order 16%, and a product the
conversation never mentioned 58%, on 120 held-out cuts: the model writes product names from its prior, not from the
conversation.) The same span cuts as choice_parts.py (`<think>` holds the result's fragment for the chosen item), half
of each step, and half echo drills of product names: one user message listing 1-3 made-up product names (words of
the retail catalogue recombined, sometimes with a size), the assistant repeating one or all of them. Same held-out
cuts, parts and schedule as choice_parts.py. Run with data/models/builds/12a's get-order-product-first.patch:
  OMP_NUM_THREADS=2 python product_echo.py 150 16 16    product_echo.log (stopped after step 100 to start build 13a)"""
import sys, random, time, re, torch
from pathlib import Path
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import (model_dir, run_demonstrations, demo_tasks, DEMO_SEED, CopyDrills, DemoPolicy,
                                              BuildConfig, binding_drill, result_items, encode_conversation, _render, _batch)
sys.path.insert(0, str(Path(__file__).parent)); from drills import train_by_part
steps, n_cut, n_echo = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
tok = AutoTokenizer.from_pretrained(str(model_dir())); lm = AutoModelForCausalLM.from_pretrained(str(model_dir()))
cfg = BuildConfig()
def varied(cut):
    product, order, _, call = binding_drill(cut)
    item = call['tool_calls'][0]['function']['arguments']['item_id']
    return cut[:-1] + [{**call, 'reasoning_content': f'"product": "{product}", "item_id": "{item}"'}]
def cuts(n, seed):
    d = CopyDrills(run_demonstrations(demo_tasks(n=n, seed=seed), DemoPolicy(ask_which=True)), through=cfg.cut_through,
                   digits=cfg.rename_digits, items=cfg.shuffle_items)
    return d, [(varied(c), t) for c, t in d.choices if binding_drill(c)]
def parts(text):
    k = text.rindex('"item_id": "') + len('"item_id": "'); out = {'call_id': (k, text.index('"', k))}
    s, e = text.rindex('<think>'), text.rindex('</think>') + len('</think>')
    p = text.index('"product": "', s) + len('"product": "'); i = text.index('"item_id": "', s) + len('"item_id": "')
    out.update(think=(s, e), think_product=(p, text.index('"', p)), think_id=(i, text.index('"', i)))
    return out
def draw(d, pool, rng):
    msgs, tools = rng.choice(pool); msgs = d.rename(msgs, rng); text = _render(msgs, tools)
    enc = tok.backend_tokenizer.encode(text, add_special_tokens=False); ps = parts(text)
    inside = lambda a, name: ps[name][0] <= a < ps[name][1]
    labels = [t if inside(a, 'call_id') or inside(a, 'think') else -100 for t, (a, _) in zip(enc.ids, enc.offsets)]
    return enc.ids, labels, {n: [inside(a, n) for a, _ in enc.offsets] for n in ps}
(dt, train), (dh, held) = cuts(60, DEMO_SEED), cuts(20, 77)
names = sorted({i['product'] for c, _ in dt.choices for m in c for i in result_items(m)})
words = sorted({w for n in names for w in re.findall(r"[A-Za-z][\w'-]*", n.split(',')[0])})
def product(rng):
    p = ' '.join(rng.sample(words, rng.randint(1, 3)))
    return p + (f', size {rng.choice(["S", "M", "L", "XL", rng.randint(36, 46)])}' if rng.random() < 0.3 else '')
def echo(rng):
    ps = [product(rng) for _ in range(rng.randint(1, 3))]
    if rng.random() < 0.5:
        k = rng.randrange(len(ps)); ask, ans = f'Which one is number {k + 1}?', ps[k]
    else: ask, ans = f"Please repeat {'it' if len(ps) == 1 else 'them'}.", ', '.join(ps)
    user = f"{rng.choice(['My items', 'I have', 'The products', 'In my order'])}: {', '.join('the ' + p for p in ps)}. {ask}"
    return encode_conversation(tok, [{'role': 'user', 'content': user}, {'role': 'assistant', 'content': ans}], None, loss='last')
H = [draw(dh, held, random.Random(10**6 + i)) for i in range(300)]
print('train choice cuts', len(train), 'held-out', len(held), 'catalogue words', len(words), flush=True)
print(tok.decode(echo(random.Random(1))[0]), flush=True)
pad = tok.convert_tokens_to_ids('<|endoftext|>')
train_by_part(lm, lambda rng: [draw(dt, train, rng)[:2] for _ in range(n_cut)] + [echo(rng) for _ in range(n_echo)], H, pad, steps)
