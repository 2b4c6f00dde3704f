"""Build 16a (2026-12-01): 8a's recipe (`BuildConfig()` defaults) on a retail domain whose item writes take the item's
`product_id`, which the customer quotes from the receipt ('the Bluetooth Speaker (PR-2002)'), instead of the order
item's `item_id`, which the agent had to pick from get_order's list by the product's name. Run from a copy of the
repository with builds/16a/product-id-writes.patch applied:
  OMP_NUM_THREADS=2 PYTHONPATH=<copy> python run.py > build.log"""
from thinkingbox_training.base_policy import BuildConfig, build_base_policy
build_base_policy(BuildConfig(out='/tmp/builds/16a'), log=print)
