"""Build 12b = build 12a (`BuildConfig(binding_drills=8, ask_which=True)` with ../12a/get-order-product-first.patch
applied, saved in /tmp/b12/model) + the polish pass: the steps `build_base_policy(BuildConfig(binding_drills=8,
ask_which=True, polish_steps=S))` runs after its `sft`. The pass draws from its own seeded rng with a fresh optimizer,
so stopping and reloading in between changes nothing. Ran (with the patch applied) as
  OMP_NUM_THREADS=2 python stage.py 250 /tmp/b12s/model    -> polish.log, build.json
(it ran before `ask_which` existed, when the demonstrator always asked; `ask_which=True` is that.)"""
import sys, json, time
from pathlib import Path
from dataclasses import asdict, replace
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import *
from thinkingbox_training.base_policy import sft
steps = int(sys.argv[1]); src, out = Path('/tmp/b12/model'), Path(sys.argv[2])
cfg = BuildConfig(out=str(out), binding_drills=8, polish_steps=steps, ask_which=True)
T = time.perf_counter()
eps = run_demonstrations(demo_tasks(tuple(cfg.domains.split(",")), n=cfg.tasks_per_family), DemoPolicy(ask_which=True))
eps = [e for e in eps if e.trajectory.status == 'ok' and not invented_ids(e.trajectory.messages)]
drills = CopyDrills(eps, through=cfg.cut_through, digits=cfg.rename_digits, items=cfg.shuffle_items)
tok, model = AutoTokenizer.from_pretrained(str(src)), AutoModelForCausalLM.from_pretrained(str(src))
rec = json.loads((src/'build.json').read_text()); rec['config'] = asdict(cfg)
again = replace(cfg, seed=cfg.seed + 1, echo_only_steps=0, steps=cfg.polish_steps, lr=cfg.polish_lr, choice_drills=cfg.polish_choice, binding_drills=0)
rec['polish'] = sft(model, tok, [(e.trajectory.messages, e.trajectory.tools) for e in eps], drills, again, log=lambda r: print(r, flush=True))
out.mkdir(parents=True, exist_ok=True); model.save_pretrained(out); tok.save_pretrained(out)
rec['size_bytes'] = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
rec['polish_wall_s'] = round(time.perf_counter() - T, 1)
m = episode_metrics(rollouts(out, seed=DEMO_SEED + 1, k=cfg.check_k, n=cfg.check_tasks)); rec['check'] = m
print(format_report(m), flush=True)
(out/'build.json').write_text(json.dumps(rec, indent=1))
