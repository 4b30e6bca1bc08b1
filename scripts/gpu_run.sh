#!/usr/bin/env bash
# Every notebook of the course and `make bench` on a GPU machine that has JAX but no Jupyter
# (the device tool's nvidia-h200: Python 3.12, JAX with CUDA, no network), as one job.
# Results in $OUT (docs/bench-gpu.md is the report, committed):
#   bench-gpu.md      scripts/bench.py's report, rewritten after each step (an early stop keeps it)
#   executed.tar.gz   every executed notebook, outputs included
#   claims.txt        every executed notebook's `claim:` verdicts and the errors its cells raised
#   log               everything printed
# Jupyter's packages (nbclient, ipykernel, ipywidgets and their needs) travel as wheels in .whl/
# and go to /tmp/site; without .whl/ the script runs on the Python it is given, e.g. here on CPU:
#   PYTHON=.venv/bin/python OUT=/tmp/gpu scripts/gpu_run.sh
# BENCH_LIMIT (seconds, default 600) stops the benchmark in time to pack what it did;
# CELL_TIMEOUT (default 90) is the most one cell may take: a stalled cell fails its notebook.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for the results}"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
# the benchmark's process and each notebook's kernel share one GPU: none takes 75% of it up front
export XLA_PYTHON_CLIENT_PREALLOCATE=false
# the chapters `import autograder` from this checkout
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}

bench() {
    if [ -d .whl ]; then
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site .whl/*.whl || return 1
        export PYTHONPATH=/tmp/site:$PYTHONPATH
    fi
    # the kernel nbclient starts ("python3") is this Python, with this PYTHONPATH
    "$PY" -m ipykernel install --prefix /tmp/kern --name python3 || return 1
    export JUPYTER_PATH=/tmp/kern/share/jupyter
    nvidia-smi
    "$PY" -c 'import jax, autograder as ag; print(ag.device_report(), jax.devices())' || return 1
    timeout "${BENCH_LIMIT:-600}" "$PY" scripts/bench.py --out "$OUT/bench-gpu.md" \
        --executed "$OUT/executed" --cell-timeout "${CELL_TIMEOUT:-90}"
}

mkdir -p "$OUT"
bench 2>&1 | tee "$OUT/log"
status=${PIPESTATUS[0]}
if [ -d "$OUT/executed" ]; then
    # notebook JSON keeps each output line as a string: a verdict is one, an error's name another
    grep -oE 'claim: [^"]*: (holds|does not hold|inconclusive) \([^"]*' "$OUT"/executed/*.ipynb > "$OUT/claims.txt"
    grep -o '"ename": "[^"]*"' "$OUT"/executed/*.ipynb >> "$OUT/claims.txt"
    tar -czf "$OUT/executed.tar.gz" -C "$OUT" executed && rm -rf "$OUT/executed"
fi
echo "gpu_run: exit $status" | tee -a "$OUT/log"
exit "$status"
