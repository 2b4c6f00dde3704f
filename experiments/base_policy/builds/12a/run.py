"""Build 12a: `BuildConfig(binding_drills=8, ask_which=True)` with get-order-product-first.patch applied. It ran before
`ask_which` existed, when the demonstrator always asked which item, as
  OMP_NUM_THREADS=2 PYTHONPATH=<a copy of the repository> python -u run.py > build.log    (71.2 min, alone on the machine)
build.json is what it wrote beside the weights (not committed), choice.json is `choice_accuracy(model, ask_which=True)`."""
from thinkingbox_training.base_policy import build_base_policy, BuildConfig
build_base_policy(BuildConfig(out='/tmp/b12/model', binding_drills=8, ask_which=True), log=print)
