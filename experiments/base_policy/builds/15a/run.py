"""Build 15a (2026-11-30): 13a's recipe (`ask_which`, `think_which`, `product_echo=0.2`, get_order listing each
item's product first: builds/12a/get-order-product-first.patch) in a bigger model: 6 layers instead of 4, and a key
and value head for each of the 6 query heads instead of 2 shared ones. Run from a copy of the repository with the
patch applied:
  OMP_NUM_THREADS=2 PYTHONPATH=<copy> python run.py > build.log
parts.log: `PYTHONPATH=<copy> python ../13a/parts.py /tmp/builds/15a`, 13a's per-part probe."""
from thinkingbox_training.base_policy import BuildConfig, ModelConfig, build_base_policy
build_base_policy(BuildConfig(out='/tmp/builds/15a', model=ModelConfig(layers=6, kv_heads=6), ask_which=True, think_which=True,
                              product_echo=0.2), log=print)
