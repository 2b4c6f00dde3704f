"""Binding probe (2026-11-30): can shipped build 8a learn which listed item a customer names, on short dense drills?

Each drill is one user message that lists an order's 2-4 items and then asks to return one of them by its product;
the assistant answers its item id. `text`: the items as `OI-...: product` (`idfirst`, the order get_order uses) or
`product: OI-...` (`pfirst`); `json`: as get_order's JSON objects with all their fields. Warm start from
data/models/tiny-qwen3, AdamW at 1e-3, 64 drills a step; `exact` is the share of 300 held-out drills whose every
answer token is the argmax (chance, one of 2-4 items: 0.36). The runs behind the logs:
  OMP_NUM_THREADS=1 python drills.py text pfirst 400 64 warm    text_pfirst.log (stopped after step 300)
  OMP_NUM_THREADS=1 python drills.py text idfirst 400 64 warm   text_idfirst.log (stopped after step 300)
  OMP_NUM_THREADS=2 python drills.py json pfirst 200 64 warm    json_pfirst.log (stopped after step 150)
`before`: the request comes before the listing, in the same user message:
  OMP_NUM_THREADS=1 python drills.py text pfirst 300 64 warm before   text_pfirst_before.log
  OMP_NUM_THREADS=2 python drills.py json pfirst 150 64 warm before   json_pfirst_before.log
`conv=call` (with `json`): the request opens a conversation, a get_order call and its result list the items, and the
answer is `create_return(order_id, item_id)`; `exact` then needs both arguments. `conv=text`: the answer is the id alone:
  OMP_NUM_THREADS=2 python drills.py json pfirst 150 64 warm conv=call     json_pfirst_conv.log (run as a bare `conv`, since renamed)
  OMP_NUM_THREADS=2 python drills.py json pfirst 150 64 warm conv=text     json_pfirst_convtext.log
`conv=split` (with `json`): the `before` drill with its user message split in two user turns, the request then the list:
  OMP_NUM_THREADS=2 python drills.py json pfirst 150 64 warm conv=split    json_pfirst_split.log
`conv=after` (with `json`): `conv=text` with the product moved out of the opening message ('I need help with order ...')
into a user turn after get_order's result; the answer is the id alone:
  OMP_NUM_THREADS=2 python drills.py json pfirst 150 64 warm conv=after    json_pfirst_after.log"""
import sys, json, random, time, torch
from transformers import AutoTokenizer
from thinkingbox_training.base_policy import model_dir, make_model, ModelConfig, encode_conversation, fresh_identifier, _batch
from thinkingbox_training.domains.retail import CATALOGUE
NAMES = [c[1] for c in CATALOGUE]
def drill(tok, rng, listing:str='json', order:str='pfirst', before:bool=False, conv:str=''):
    "One drill's (token ids, labels) and its answer."
    if conv not in ('', 'call', 'text', 'split', 'after'): raise ValueError(f"conv must be 'call', 'text', 'split' or 'after', not {conv!r}")
    if conv and listing != 'json': raise ValueError(f"a conversation drill lists the items as get_order does: listing must be 'json', not {listing!r}")
    orid = fresh_identifier('OR-40001', rng); n = rng.randint(2, 4)
    prods = rng.sample(NAMES, n); digs = rng.sample('123456789', n)
    ids = [f'OI-{orid[3:]}{d}' for d in digs]; k = rng.randrange(n)
    if listing == 'text':
        lst, has = '; '.join(f'{i}: {p}' if order == 'idfirst' else f'{p}: {i}' for i, p in zip(ids, prods)), 'has'
    else:
        its = [{'item_id': i, 'product_id': fresh_identifier('PR-1000', rng), 'product': p, 'quantity': 1, 'unit_price_cents': rng.randrange(1000, 40000, 100), 'returned_qty': 0, 'replaced_qty': 0, 'shipment_id': f'SH-{orid[3:]}{digs[0]}'} for i, p in zip(ids, prods)]
        if order == 'pfirst': its = [{'product': d.pop('product'), **d} for d in its]
        lst, has = json.dumps(its), 'items:'
    ask = f"{rng.choice(['Please return the', 'I want to send back the', 'Replace the'])} {prods[k]}"
    if conv == 'split':  # the `before` drill's user message split in two user turns at the request's end: nothing else differs
        msgs = [{'role': 'user', 'content': f'{ask}.'}, {'role': 'user', 'content': f'Order {orid} {has} {lst}.'}, {'role': 'assistant', 'content': ids[k]}]
        return encode_conversation(tok, msgs, None), ids[k]
    if conv:  # the request opens a conversation, get_order's result lists the items; the answer: the write call ('call') or the id alone ('text')
        call = lambda name, a: {'role': 'assistant', 'content': '', 'tool_calls': [{'type': 'function', 'function': {'name': name, 'arguments': a}}]}
        msgs = [{'role': 'user', 'content': f'{ask} from order {orid}.'}, call('get_order', {'order_id': orid}),
                {'role': 'tool', 'content': json.dumps({'order_id': orid, 'status': 'delivered', 'items': its})}]
        if conv == 'after':  # the opening message names the order alone; the product comes in a user turn after the list
            msgs[0] = {'role': 'user', 'content': f'I need help with order {orid}.'}
            return encode_conversation(tok, msgs + [{'role': 'user', 'content': f'{ask}.'}, {'role': 'assistant', 'content': ids[k]}], None, loss='last'), ids[k]
        if conv == 'text': return encode_conversation(tok, msgs + [{'role': 'assistant', 'content': ids[k]}], None, loss='last'), ids[k]
        return encode_conversation(tok, msgs + [call('create_return', {'order_id': orid, 'item_id': ids[k]})], None, loss='args'), ids[k]
    user = f'{ask}. Order {orid} {has} {lst}.' if before else f'Order {orid} {has} {lst}. {ask}.'
    msgs = [{'role': 'user', 'content': user}, {'role': 'assistant', 'content': ids[k]}]
    return encode_conversation(tok, msgs, None), ids[k]
def exact_by_part(model, held:list, pad:int, chunk:int=50) -> str:
    """For `held` drills ((ids, labels, {part: token mask}) triples), the share whose every token of each part is the
    argmax, teacher-forced, as text ('call_id 0.330 think_id ...'); scored `chunk` drills at a time."""
    model.eval(); ok = {n: 0 for n in held[0][2]}
    with torch.no_grad():
        for i in range(0, len(held), chunk):
            part = held[i:i + chunk]; X, _ = _batch([(a, b) for a, b, _ in part], pad); pred = model(input_ids=X).logits.argmax(-1)
            for j, (ids, _, masks) in enumerate(part):
                for n, m in masks.items(): ok[n] += all(pred[j, p - 1].item() == ids[p] for p, on in enumerate(m) if on)
    model.train(); return ' '.join(f'{n} {v / len(held):.3f}' for n, v in ok.items())

def train_by_part(model, batch, held:list, pad:int, steps:int, tag:str='', every:int=50):
    """Train `model` on `batch(rng)` ((ids, labels) pairs) a step: AdamW (0.9, 0.98) at 1e-3 after 30 steps' warmup,
    weight decay 0.01, gradients clipped at 1. Before the first step and every `every` steps, print `exact_by_part`
    on `held`, after `tag`."""
    head = f'{tag} ' if tag else ''
    print(head + 'step 0', exact_by_part(model, held, pad), flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=0.01)
    rng, t0 = random.Random(0), time.time(); model.train()
    for step in range(1, steps + 1):
        for g in opt.param_groups: g['lr'] = 1e-3 * min(1, step / 30)
        X, Y = _batch(batch(rng), pad)
        loss = model(input_ids=X, labels=Y).loss; loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step(); opt.zero_grad()
        if step % every == 0:
            print(head + f'step {step} loss {loss.item():.3f}', exact_by_part(model, held, pad), f'{time.time() - t0:.0f}s', flush=True)

def train_probe(model, tok, draw, held:list, steps:int, per:int, lr:float, tag:str, chunk:int=300):
    """Train `model` on `per` drills a step from `draw(rng)` ((ids, labels) pairs): AdamW (0.9, 0.98), weight decay
    0.01, 30 steps' warmup, then `lr`; gradients clipped at 1. Before the first step and every 50 steps, print the loss
    and `exact`: the share of `held` drills whose every labelled token is the argmax (scored `chunk` drills at a time)."""
    pad = tok.convert_tokens_to_ids('<|endoftext|>')
    def evaluate():
        model.eval(); ok = 0
        with torch.no_grad():
            for i in range(0, len(held), chunk):
                X, Y = _batch(held[i:i + chunk], pad); pred = model(input_ids=X).logits.argmax(-1)[:, :-1]; y = Y[:, 1:]
                ok += ((pred == y) | (y == -100)).all(1).sum().item()
        model.train(); return ok / len(held)
    print(tag, f'step 0 exact {evaluate():.3f}', flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01)
    rng, t0 = random.Random(0), time.time(); model.train()
    for step in range(1, steps + 1):
        for g in opt.param_groups: g['lr'] = lr * min(1, step / 30)
        X, Y = _batch([draw(rng) for _ in range(per)], pad)
        loss = model(input_ids=X, labels=Y).loss; loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0); opt.step(); opt.zero_grad()
        if step % 50 == 0: print(tag, f'step {step} loss {loss.item():.3f} exact {evaluate():.3f} {time.time() - t0:.0f}s', flush=True)
if __name__ == '__main__':
    listing, order, steps, per = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    before, conv = 'before' in sys.argv, next((a[5:] for a in sys.argv if a.startswith('conv=')), '')
    tok = AutoTokenizer.from_pretrained(str(model_dir()))
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(str(model_dir())) if 'warm' in sys.argv else make_model(tok, ModelConfig(), seed=0)
    held = [drill(tok, random.Random(10**6 + i), listing, order, before, conv)[0] for i in range(300)]
    train_probe(model, tok, lambda rng: drill(tok, rng, listing, order, before, conv)[0], held, steps, per,
                1e-3 if 'warm' in sys.argv else 3e-3, order)
