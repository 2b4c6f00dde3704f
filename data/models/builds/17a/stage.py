"""Polish a saved build: more mixed steps (`sft` with no echo-only start) at a gentle learning rate, on demonstrations
of `n` tasks per family (DEMO_SEED), with a fresh optimizer and seeded draws.
  OMP_NUM_THREADS=2 python stage.py SRC OUT STEPS LR N [CHOICE [SEED]]"""
import sys, json, time
from pathlib import Path
from dataclasses import asdict, replace
from transformers import AutoTokenizer, AutoModelForCausalLM
from thinkingbox_training.base_policy import *
from thinkingbox_training.base_policy import sft
src, out, steps, lr, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
choice = int(sys.argv[6]) if len(sys.argv) > 6 else 0
pseed = int(sys.argv[7]) if len(sys.argv) > 7 else 1
cfg = BuildConfig(out=str(out), polish_steps=steps, polish_lr=lr, polish_choice=choice)
T = time.perf_counter()
eps = run_demonstrations(demo_tasks(tuple(cfg.domains.split(",")), n=n), DemoPolicy())
eps = [e for e in eps if e.trajectory.status == 'ok' and not invented_ids(e.trajectory.messages)]
print(f'demonstrations: {len(eps)} kept', flush=True)
drills = CopyDrills(eps, through=cfg.cut_through, digits=cfg.rename_digits, items=cfg.shuffle_items)
tok, model = AutoTokenizer.from_pretrained(str(src)), AutoModelForCausalLM.from_pretrained(str(src))
rec = json.loads((src/'build.json').read_text()); rec['polish_config'] = {'src': str(src), 'steps': steps, 'lr': lr, 'tasks_per_family': n, 'choice': choice, 'seed': pseed}
again = replace(cfg, seed=pseed, echo_only_steps=0, steps=steps, lr=lr, choice_drills=choice, binding_drills=0)
rec['polish'] = sft(model, tok, [(e.trajectory.messages, e.trajectory.tools) for e in eps], drills, again, log=lambda r: print(r, flush=True))
out.mkdir(parents=True, exist_ok=True); model.save_pretrained(out); tok.save_pretrained(out)
rec['size_bytes'] = sum(p.stat().st_size for p in out.iterdir() if p.is_file())
rec['polish_wall_s'] = round(time.perf_counter() - T, 1)
m = episode_metrics(rollouts(out, seed=DEMO_SEED + 1, k=cfg.check_k, n=cfg.check_tasks)); rec['check'] = m
print(format_report(m), flush=True)
(out/'build.json').write_text(json.dumps(rec, indent=1))
print(f'polished in {rec["polish_wall_s"]/60:.1f} min', flush=True)
