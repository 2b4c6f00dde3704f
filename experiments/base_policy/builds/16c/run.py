"""Build 16c (2026-12-01): 16a with the product id in the customer's messages only (the query and the simulated
user's `item` fact); the demonstrations' replies and the user's context name the product without it, as main's do.
Run from a copy of the repository with builds/16c/product-id-in-query.patch applied:
  OMP_NUM_THREADS=2 PYTHONPATH=<copy> python run.py > build.log"""
from thinkingbox_training.base_policy import BuildConfig, build_base_policy
build_base_policy(BuildConfig(out='/tmp/builds/16c'), log=print)
