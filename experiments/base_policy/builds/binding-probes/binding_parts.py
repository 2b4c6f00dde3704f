"""Which part of a real conversation stops the binding? (2026-11-30, after choice_after.py.) Binding drills of
demonstrations that ask which item (`DemoPolicy(ask_which=True)`: the terse opening naming product and order, get_order's
exchange, the question, the answer naming the product, the call), warm on shipped 8a, loss on the chosen item id,
AdamW 1e-3, 64 a step; `exact` on 300 held-out drills (seed 77) as in binding_after.py. `terse`: as `CopyDrills.binding`
draws them (no system turn); `system`: the same with retail's system turn and tools in front, as in an episode.
Run with data/models/builds/12a's get-order-product-first.patch applied:
  OMP_NUM_THREADS=2 python binding_parts.py terse 100 64     binding_parts_terse.log (beside a CI run for its first 7 minutes)
The `system` run was stopped at its start for lack of session time: it is the next probe to run."""
import sys, random
from pathlib import Path
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import model_dir, run_demonstrations, demo_tasks, DEMO_SEED, CopyDrills, DemoPolicy, encode_conversation
sys.path.insert(0, str(Path(__file__).parent)); from drills import train_probe
part, steps, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if part not in ('terse', 'system'): raise ValueError(f"part must be 'terse' or 'system', not {part!r}")
tok = AutoTokenizer.from_pretrained(str(model_dir())); lm = AutoModelForCausalLM.from_pretrained(str(model_dir()))
drills = lambda n, seed: CopyDrills(run_demonstrations(demo_tasks(n=n, seed=seed), DemoPolicy(ask_which=True)), through=True, digits=True, items=True)
train, held = drills(60, DEMO_SEED), drills(20, 77)
def drill(d, rng):
    msgs, _ = d.binding(rng)
    head, tools = d.prompts['retail'] if part == 'system' else ([], None)
    return encode_conversation(tok, head + msgs, tools, loss='arg:item_id')
H = [drill(held, random.Random(10**6 + i)) for i in range(300)]
print(part, 'train bindings', len(train.bindings), 'held-out bindings', len(held.bindings), flush=True)
train_probe(lm, tok, lambda rng: drill(train, rng), H, steps, per, 1e-3, part, chunk=50)
