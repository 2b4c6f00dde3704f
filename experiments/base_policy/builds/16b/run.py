"""Build 16b (2026-12-01): build 16a again with another seed (`seed=1`: the model's initial weights and the drills'
draws), to tell the product-id writes from one build's variance. Run from a copy of the repository with
builds/16a/product-id-writes.patch applied:
  OMP_NUM_THREADS=2 PYTHONPATH=<copy> python run.py > build.log"""
from thinkingbox_training.base_policy import BuildConfig, build_base_policy
build_base_policy(BuildConfig(out='/tmp/builds/16b', seed=1), log=print)
