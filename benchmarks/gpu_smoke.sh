#!/usr/bin/env bash
# One prepared GPU check; what it measures: benchmarks/gpu_smoke.py's docstring.
#
#   bash benchmarks/gpu_smoke.sh               # on the GPU machine (no network, nothing to install): within 4 minutes
#   bash benchmarks/gpu_smoke.sh --cpu-check   # anywhere: the same code on tiny shapes, on CPU
#
# The GPU machine has torch, transformers, accelerate, peft and TensorBoard, and none of TRL, vLLM, DeepSpeed: the
# script needs only the first four and carries nothing. Exit status: 0 measured, 1 a part failed, 2 no CUDA (without
# --cpu-check), 124 the time limit.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python
# on the GPU the whole script stays within 4 minutes; a CPU check, on a shared machine, gets 10
case " $* " in *" --cpu-check "*) LIMIT=${GPU_SMOKE_LIMIT_S:-600} ;; *) LIMIT=${GPU_SMOKE_LIMIT_S:-240} ;; esac
timeout "$LIMIT" "$PY" benchmarks/gpu_smoke.py --budget-s $((LIMIT - 60)) "$@"
