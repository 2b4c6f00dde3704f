"""Build 14a (2026-11-30): 13a's recipe (`ask_which`, `think_which`, `product_echo=0.2`, get_order listing each
item's product first) on a retail domain whose order items have opaque ids (`item_number`: an order's items no longer
share its digits, so `OI-604181` and `OI-184374` differ from their first digit group on). Run from a copy of the
repository with opaque-item-ids.patch applied (it carries 12a's get_order change too) and `tbt generate-tasks` rerun:
  OMP_NUM_THREADS=2 PYTHONPATH=<copy> python run.py > build.log
parts.log: `PYTHONPATH=<copy> python ../13a/parts.py /tmp/builds/14a`, 13a's per-part probe on this domain's cuts."""
from thinkingbox_training.base_policy import BuildConfig, build_base_policy
build_base_policy(BuildConfig(out='/tmp/builds/14a', ask_which=True, think_which=True, product_echo=0.2), log=print)
