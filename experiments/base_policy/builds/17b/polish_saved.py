"""17b again through the library: `polish_saved` on 16c's weights (pass 1 of `SHIPPED`), to check that it trains as the
staging script that made 17b did. Ran as OMP_NUM_THREADS=2 PYTHONPATH=<main at 0d38404> python polish_saved.py -> polish_saved.log;
its last line compares the weights' sha256 with the staged 17b's (kept in data/runs/_scratch/build-17b)."""
from dataclasses import replace
from thinkingbox_training.base_policy import SHIPPED, polish_saved, weights_sha256
polish_saved('/work/main/data/runs/_scratch/build-16c', replace(SHIPPED, out='/tmp/repro/17b'), passes=[1], log=print)
print('sha', weights_sha256('/tmp/repro/17b'), 'staged', weights_sha256('/work/main/data/runs/_scratch/build-17b'))
