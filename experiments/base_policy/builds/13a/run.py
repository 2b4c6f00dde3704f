"""Build 13a (2026-11-30): 8a's recipe with demonstrations that ask which item after the order's lookup (`ask_which`),
whose call on that item first writes its product and id in its think block (`think_which`), and a fifth of the echo
drills' values made-up product names (`product_echo=0.2`), so copying words is drilled from the first step. Run from a
copy of the repository with builds/12a/get-order-product-first.patch applied (get_order lists each item's product
first, so the think block copies the result's own text):
  OMP_NUM_THREADS=2 PYTHONPATH=<copy> python run.py > build.log"""
from thinkingbox_training.base_policy import BuildConfig, build_base_policy
build_base_policy(BuildConfig(out='/tmp/builds/13a', ask_which=True, think_which=True, product_echo=0.2), log=print)
