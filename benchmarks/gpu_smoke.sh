#!/usr/bin/env bash
# One prepared GPU check (issue 31); what it measures: benchmarks/gpu_smoke.py's docstring.
#
#   bash benchmarks/gpu_smoke.sh --build-wheels   # here, with network: the wheels to carry, into benchmarks/wheels/ (git-ignored)
#   bash benchmarks/gpu_smoke.sh                  # on the GPU machine (no network): stops within 4 minutes
#   bash benchmarks/gpu_smoke.sh --cpu-check      # anywhere: the same code on tiny shapes, on CPU
#
# The GPU machine it was prepared for has Python 3.12 with torch and transformers, and none of trl, mcp, vllm:
# the project's other pure-Python dependencies (and a few small binary ones) travel as cp312 wheels and are installed
# there, without an index, into a venv that sees the system's torch. Where an environment already has them (this
# repository's .venv), that environment is used as it is. Exit status: 0 measured, 1 a part failed, 2 no CUDA
# (without --cpu-check), 3 the environment could not be prepared, 124 the time limit.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=benchmarks/wheels
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ] && PY=.venv/bin/python

if [ "${1:-}" = "--build-wheels" ]; then
    mkdir -p "$WHEELS"
    "$PY" benchmarks/gpu_smoke.py --requirements > "$WHEELS/requirements.txt" || exit 3
    "$PY" -m pip download -q --no-deps --python-version 3.12 --implementation cp --abi cp312 \
        --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
        --only-binary=:all: -d "$WHEELS" -r "$WHEELS/requirements.txt" || exit 3
    du -sh "$WHEELS"; ls "$WHEELS" | wc -l
    exit 0
fi

if "$PY" -c 'import trl, mcp, sqlmodel' 2>/dev/null; then
    RUN=$PY
else
    if ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
        echo "gpu_smoke: $PY lacks the project's dependencies (trl, mcp, ...) and $WHEELS/ has no wheels:" \
             "build them with \`bash benchmarks/gpu_smoke.sh --build-wheels\` where a package index is reachable" >&2
        exit 3
    fi
    VENV=${TMPDIR:-/tmp}/tbt-gpu-smoke-venv
    t0=$SECONDS
    # --without-pip: no ensurepip needed; the system's pip (seen through --system-site-packages) installs into the venv
    [ -x "$VENV/bin/python" ] || "$PY" -m venv --system-site-packages --without-pip "$VENV" || exit 3
    "$VENV/bin/python" -m pip install -q --no-index --no-deps --disable-pip-version-check "$WHEELS"/*.whl || exit 3
    echo "gpu_smoke: $(ls "$WHEELS"/*.whl | wc -l) wheels installed into $VENV in $((SECONDS - t0)) s"
    RUN=$VENV/bin/python
fi
# on the GPU the whole script stays within 4 minutes (the install's time comes off the measurements'); a CPU check,
# on a shared machine, gets 20
case " $* " in *" --cpu-check "*) LIMIT=${GPU_SMOKE_LIMIT_S:-1200} ;; *) LIMIT=${GPU_SMOKE_LIMIT_S:-240} ;; esac
LEFT=$((LIMIT - SECONDS - 5))
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" timeout "$LEFT" "$RUN" benchmarks/gpu_smoke.py --budget-s $((LEFT - 40)) "$@"
