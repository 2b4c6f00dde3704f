"""Binding probe (2026-11-30): the package's binding drills (`CopyDrills.binding`: real get_order results and real
item calls from the demonstrations, shuffled and renamed) warm on shipped 8a, with the product named in one of two
places. `before`: as build 11a had them, in the opening message ("I'd like to return the <product> from order <id>."),
before the get_order call and its result. `after`: the opening message names the order alone ("I need help with
order <id>.") and the same request comes as a user turn after get_order's result. Loss on the chosen item id
(`loss='arg:item_id'`); `exact` is the share of 300 held-out drills (fresh demonstrations, seed 77) whose item id
and closing quote are all argmax. AdamW 1e-3, 30 steps' warmup. The runs behind the logs:
  OMP_NUM_THREADS=2 python binding_after.py after 150 32    binding_after.log (get_order as on main: item id, then product)
  OMP_NUM_THREADS=2 python binding_after.py after 150 64    binding_after_pfirst.log (with data/models/builds/11a's
      get-order-product-first.patch applied while the demonstrations were generated, the first minute)
A `before` run beside them was stopped at its start to leave the machine to the second: build 11a and drills.py's
conversation drills are that case."""
import sys, random
from pathlib import Path
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import model_dir, run_demonstrations, demo_tasks, DEMO_SEED, CopyDrills, encode_conversation
sys.path.insert(0, str(Path(__file__).parent)); from drills import train_probe
where, steps, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if where not in ('before', 'after'): raise ValueError(f"where the product is named: 'before' or 'after', not {where!r}")
tok = AutoTokenizer.from_pretrained(str(model_dir())); lm = AutoModelForCausalLM.from_pretrained(str(model_dir()))
train = CopyDrills(run_demonstrations(demo_tasks(n=60, seed=DEMO_SEED)), through=True, digits=True, items=True)
held = CopyDrills(run_demonstrations(demo_tasks(n=20, seed=77)), through=True, digits=True, items=True)
def drill(d, rng):
    msgs, _ = d.binding(rng)
    if where == 'after':
        order = msgs[-1]['tool_calls'][0]['function']['arguments']['order_id']
        msgs = [{'role': 'user', 'content': f'I need help with order {order}.'}, *msgs[1:-1], msgs[0], msgs[-1]]
    return encode_conversation(tok, msgs, None, loss='arg:item_id')
H = [drill(held, random.Random(10**6 + i)) for i in range(300)]
print(where, 'train bindings', len(train.bindings), 'held-out bindings', len(held.bindings), flush=True)
train_probe(lm, tok, lambda rng: drill(train, rng), H, steps, per, 1e-3, where, chunk=50)
