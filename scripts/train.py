"""GRPO with database-state rewards: the one script entry point, for `accelerate launch`.

    accelerate launch --config_file scripts/accelerate/cpu.yaml scripts/train.py \
        --config scripts/recipes/tiny_cpu.yaml --output_dir data/runs/tiny-cpu-accelerate/model  # not `make train`'s
    accelerate launch --config_file scripts/accelerate/zero3_multinode.yaml --machine_rank $NODE_RANK \
        --main_process_ip $MASTER_ADDR scripts/train.py --config scripts/recipes/reference_qwen3.yaml
    python scripts/train.py --config scripts/recipes/reference_qwen3.yaml --dry-run   # check a recipe anywhere

Everything is in `thinkingbox_training.grpo.main` (nbs/10b_grpo.ipynb; the trainer: nbs/10_grpo.ipynb and
nbs/10a_trl_adapter.ipynb); every other job is a `tbt` subcommand.
"""

import sys
from thinkingbox_training.grpo import ConfigError, main

if __name__ == '__main__':
    try:
        sys.exit(main())
    except ConfigError as e:
        sys.exit(f'error: {e}')  # a bad recipe or option: one line, no traceback
