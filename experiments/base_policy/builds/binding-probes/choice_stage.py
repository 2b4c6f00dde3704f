"""Binding probe (2026-11-30): a warm stage on 8a over real choice cuts, with get_order listing each item's product
before its id. Run with that change applied to nbs/domains/02_retail.ipynb (get_order's items query selecting
`p.name AS product, i.id AS item_id, i.product_id, ...`) and exported. Each step: 16 choice cuts without the system turn,
2 with it, 4 cuts, 12 echo drills, 4 demonstrations; AdamW 1e-3, 20 steps' warmup, linear decay over the last 40%.
`choice` is teacher-forced item choice, `choice_accuracy(n=150, seed=77)` (chance 0.35). The runs computed it with a
loop of their own, since replaced by that call; `choice_accuracy` on the saved models of the last two runs gives
their logged 0.373 and 0.313.
Run: python choice_stage.py /tmp/stage 250 16   (log: choice_stage.log; stopped at step 225 once choice was 0.34 at 100 and 200)
With `compact`, the short cuts also drop every exchange but get_order's (no find_customer_orders result listing the
customer's products, no question for the email and its answer):
     python choice_stage.py /tmp/stage 200 32 compact   (log: choice_stage_compact.log)
With `drills`, each step also has 32 of drills.py's JSON drills (product first, the request after the listing):
     python choice_stage.py /tmp/stage 200 16 compact drills   (log: choice_stage_drills.log)"""
import sys, random, time, statistics, torch
from collections import defaultdict
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import (model_dir, run_demonstrations, demo_tasks, DEMO_SEED, CopyDrills,
                                               choice_accuracy, encode_conversation, part_loss)
from pathlib import Path
sys.path.insert(0, str(Path(__file__).parent)); from drills import drill
torch.set_num_threads(2)
out, steps, short_n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
path = str(model_dir())
tok, lm = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
t0 = time.time()
eps = run_demonstrations(demo_tasks(n=160, seed=DEMO_SEED))
drills = CopyDrills(eps, through=True, digits=True, items=True)
print('demos', len(eps), 'choices', len(drills.choices), f'{time.time()-t0:.0f}s', flush=True)
def choice():
    "Teacher-forced item choice of the model as it stands: `choice_accuracy` on 150 cuts of fresh demonstrations (seed 77)."
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        lm.save_pretrained(d); tok.save_pretrained(d)
        return choice_accuracy(d, n=150, tasks_per_family=40, seed=77)['item']
print('step 0 choice', round(choice(), 3), flush=True)
pad = tok.convert_tokens_to_ids('<|endoftext|>')
def short(msgs):
    "A choice cut without its system turn; with `compact`, also without any exchange but get_order's."
    if 'compact' not in sys.argv: return msgs[1:]
    kept, keep = [msgs[1]], False
    for m in msgs[2:-1]:
        if m['role'] == 'assistant': keep = any((tc.get('function') or tc)['name'] == 'get_order' for tc in m.get('tool_calls') or [])
        if keep: kept.append(m)
    return kept + [msgs[-1]]
opt = torch.optim.AdamW(lm.parameters(), lr=1e-3, betas=(0.9, 0.98), weight_decay=0.01)
rng = random.Random(0); E = [(e.trajectory.messages, e.trajectory.tools) for e in eps]; acc = defaultdict(list); lm.train()
for n in range(1, steps + 1):
    lr = 1e-3 * min(1, n / 20) * min(1, (steps - n + 1) / (0.4 * steps))
    for g in opt.param_groups: g['lr'] = lr
    parts = {'short': [encode_conversation(tok, short(drills.cut(rng, choice=True)[0]), None, loss='args') for _ in range(short_n)],
             'drill': [drill(tok, rng)[0] for _ in range(32 if 'drills' in sys.argv else 0)],
             'choice': [encode_conversation(tok, *drills.cut(rng, choice=True), loss='args') for _ in range(2)],
             'cut': [encode_conversation(tok, *drills.cut(rng), loss='args') for _ in range(4)],
             'echo': [encode_conversation(tok, *drills.echo(rng)) for _ in range(12)],
             'episode': [encode_conversation(tok, drills.rename(m, rng), t) for m, t in rng.sample(E, 4)]}
    loss = 0
    for k, ex in parts.items():
        if not ex: continue
        l, a = part_loss(lm, ex, pad, 4096); loss = loss + l; acc[k].append(a)
    opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0); opt.step()
    if n % 25 == 0:
        print(n, f'lr {lr:.5f}', {k: round(statistics.mean(v), 3) for k, v in acc.items()}, f'{time.time()-t0:.0f}s', flush=True); acc.clear()
    if n % 100 == 0 or n == steps: print('step', n, 'choice', round(choice(), 3), flush=True)
lm.eval(); lm.save_pretrained(out); tok.save_pretrained(out)
print('saved', out, f'{time.time()-t0:.0f}s')
