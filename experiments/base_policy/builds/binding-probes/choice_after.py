"""Choice probe (2026-11-30, after builds 12a and 12b): can shipped build 8a, which copies well, learn the item choice
from real choice cuts once the demonstrator asks which item after the lookup (`DemoPolicy(ask_which=True)`)?
Cuts as the build makes them (`CopyDrills.cut(choice=True)`: system turn, opening message, everything from the
exchange that shows the call's ids through the question and answer, the call; shuffled and renamed), the loss on the
chosen item id (`loss='arg:item_id'`); `exact` is the share of 300 held-out cuts (fresh demonstrations, seed 77) whose
item id and closing quote are all argmax. AdamW 1e-3, 30 steps' warmup. Run with data/models/builds/12a's
get-order-product-first.patch applied (as 12a and 12b were built):
  OMP_NUM_THREADS=2 python choice_after.py 150 32    choice_after.log (997 s, alone on the machine)"""
import sys, random
from pathlib import Path
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import model_dir, run_demonstrations, demo_tasks, DEMO_SEED, CopyDrills, DemoPolicy, BuildConfig, encode_conversation
sys.path.insert(0, str(Path(__file__).parent)); from drills import train_probe
steps, per = int(sys.argv[1]), int(sys.argv[2])
tok = AutoTokenizer.from_pretrained(str(model_dir())); lm = AutoModelForCausalLM.from_pretrained(str(model_dir()))
cfg = BuildConfig()
def cuts(n, seed):
    return CopyDrills(run_demonstrations(demo_tasks(n=n, seed=seed), DemoPolicy(ask_which=True)), through=cfg.cut_through,
                      digits=cfg.rename_digits, items=cfg.shuffle_items)
train, held = cuts(60, DEMO_SEED), cuts(20, 77)
draw = lambda d, rng: encode_conversation(tok, *d.cut(rng, choice=True), loss='arg:item_id')
H = [draw(held, random.Random(10**6 + i)) for i in range(300)]
print('train choice cuts', len(train.choices), 'held-out', len(held.choices), flush=True)
train_probe(lm, tok, lambda rng: draw(train, rng), H, steps, per, 1e-3, 'choice_after', chunk=50)
