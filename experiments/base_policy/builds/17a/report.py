"""The reports of 17a-17c: `rollouts` with the policy at TEMPERATURE on seed SEED (2, 3, 4), as `tbt policy-report --seed SEED --k 8` does at 1.0.
  OMP_NUM_THREADS=2 python report.py MODEL TEMPERATURE OUT [SEED]"""
import sys, json, time
from thinkingbox_training.base_policy import rollouts, episode_metrics, format_report
from thinkingbox_training.policies import HFPolicy, SamplingConfig
d, T, out = sys.argv[1], float(sys.argv[2]), sys.argv[3]
seed = int(sys.argv[4]) if len(sys.argv) > 4 else 2
t = time.perf_counter()
m = episode_metrics(rollouts(HFPolicy(d, sampling=SamplingConfig(temperature=T, seed=seed)), seed=seed, k=8, n=2))
m['wall_s'] = round(time.perf_counter() - t, 1); m['run'] = {'model': d, 'temperature': T, 'seed': seed}
open(out, 'w').write(json.dumps(m, indent=1)); print(format_report(m))
