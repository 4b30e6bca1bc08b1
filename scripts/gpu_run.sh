#!/usr/bin/env bash
# Every notebook of the course and `make bench` on an accelerator machine that has JAX but no
# Jupyter (the device tool's machines: an NVIDIA GPU, or a one-chip TPU v5e as Colab's), as one
# job. Results in $OUT (docs/bench-gpu.md and docs/bench-tpu.md are such reports, committed):
#   bench-<backend>.md  scripts/bench.py's report, rewritten after each step (an early stop keeps it)
#   executed.tar.gz     every executed notebook, outputs included
#   claims.txt          every executed notebook's `claim:` verdicts and the errors its cells raised
#   grading.txt         with GRADE_HELD=1: every solution graded while another process holds the device
#   log                 everything printed
# The device is opened only by child processes, one at a time (a TPU opens for one process at a
# time): bench.py's measuring child, then each notebook's kernel; grading never opens it.
# Jupyter's packages (nbclient, ipykernel, nbgrader and their needs) travel as wheels in .whl/ and
# go to /tmp/site; matplotlib comes from the machine's own index where it has one
# (/opt/pypi/simple on the TPU machines). Where TCP is refused even on loopback (the TPU
# machines), kernels start through scripts/kernel_without_tcp.py. Without .whl/ the script runs
# on the Python it is given, e.g. here on CPU:
#   PYTHON=.venv/bin/python WHEELS=none OUT=/tmp/acc NOTEBOOKS='^course/01' scripts/gpu_run.sh
# NOTEBOOKS: regex over the notebooks' paths (default: course/ and solutions/; '^exercises/' for
# the released exercises with their starting code); BENCH_ARGS: more arguments for bench.py
# (e.g. --no-kernels); BENCH_LIMIT (seconds, default 540) stops the benchmark in time to pack
# what it did; CELL_TIMEOUT (default 90) is the most one cell may take; GAP (default 3) the seconds
# between two programs that open the device (a TPU can refuse one that opens it just after
# another closed it), not timed; WHEELS (default .whl) the
# folder of wheels; GRADE_HELD=1 grades the solutions (GRADE_PATTERN: a regex over their paths;
# GRADE_JOBS grading processes, default 4) while another process holds the device; BENCH=0 skips
# the benchmark (grading only, e.g. `GRADE_HELD=1 BENCH=0`: about two minutes on the TPU machine).
# ARCHIVE: a `git archive` of one commit (e.g. `git archive -o build/head.tar HEAD`, carried to the
# machine): everything runs in that tree, extracted to /tmp/tree, so a shared working tree's
# uncommitted edits are not measured; the commit is printed (and saved in $OUT/commit). FLOORS: a
# file for the kernel floors: measured and saved there by the first run, reused by the next ones
# on the same machine (each costs ~45 s on a TPU).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for the results}"
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}
if [ -n "${ARCHIVE:-}" ]; then
    [[ $WHEELS = /* ]] || WHEELS=$PWD/$WHEELS
    [[ $ARCHIVE = /* ]] || ARCHIVE=$PWD/$ARCHIVE
    rm -rf /tmp/tree && mkdir -p /tmp/tree && tar -xf "$ARCHIVE" -C /tmp/tree || exit 1
    commit=$("$PY" -c 'import sys, tarfile; print(tarfile.open(sys.argv[1]).pax_headers.get("comment", "unknown"))' "$ARCHIVE")
    mkdir -p "$OUT" && echo "$commit" > "$OUT/commit"
    echo "gpu_run: the tree of commit $commit (git archive), in /tmp/tree"
    cd /tmp/tree || exit 1
fi
export PYTHONUNBUFFERED=1
# a GPU shared by the measuring child and each kernel in turn: none takes 75% of it up front
export XLA_PYTHON_CLIENT_PREALLOCATE=false
# the chapters `import autograder` from this checkout
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
# a machine whose home is read-only or shared: Jupyter's and matplotlib's files under /tmp
export HOME=${HOME:-/tmp/home} MPLCONFIGDIR=${MPLCONFIGDIR:-/tmp/mpl} IPYTHONDIR=${IPYTHONDIR:-/tmp/ipy}

install() {
    [ -d "$WHEELS" ] || return 0
    if [ ! -e /tmp/site/.done ]; then
        PIP_CONFIG_FILE=/dev/null "$PY" -m pip install --isolated -q --no-index --no-deps --no-compile \
            --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl || return 1
        if ! "$PY" -c 'import matplotlib' 2>/dev/null && [ -d /opt/pypi/simple ]; then
            PIP_CONFIG_FILE=/dev/null "$PY" -m pip install --isolated -q --no-deps --no-compile --no-cache-dir \
                --only-binary=:all: --index-url file:///opt/pypi/simple --target /tmp/site \
                matplotlib pillow fonttools kiwisolver contourpy cycler pyparsing || return 1
        fi
        touch /tmp/site/.done
    fi
    # after this checkout, before the machine's own packages: its JAX stays the one imported
    export PYTHONPATH=$PWD:/tmp/site:${PYTHONPATH#"$PWD:"}
    export PATH=/tmp/site/bin:$PATH   # nbgrader's alembic
}

kernel_spec() {
    # the kernel nbclient starts ("python3") is this Python, with this PYTHONPATH
    "$PY" -m ipykernel install --prefix /tmp/kern --name python3 >/dev/null || return 1
    export JUPYTER_PATH=/tmp/kern/share/jupyter
    if ! "$PY" -c 'import socket; socket.socket(socket.AF_INET).bind(("127.0.0.1", 0))' 2>/dev/null; then
        echo "gpu_run: no TCP here, even on loopback: kernels start through scripts/kernel_without_tcp.py"
        "$PY" - "$PWD/scripts/kernel_without_tcp.py" <<'PY' || return 1
import json, sys
path = "/tmp/kern/share/jupyter/kernels/python3/kernel.json"
spec = json.load(open(path))
i = spec["argv"].index("ipykernel_launcher")
spec["argv"][i - 1:i + 1] = [sys.argv[1]]        # "-m ipykernel_launcher" -> the script
json.dump(spec, open(path, "w"), indent=1)
PY
    fi
}

bench() {
    install || return 1
    kernel_spec || return 1
    command -v nvidia-smi >/dev/null && nvidia-smi
    # which backend (in a child that ends, so the device is free again) names the report
    backend=$("$PY" -c 'import jax; print(jax.default_backend())') || return 1
    echo "gpu_run: backend $backend"
    sleep 3   # a TPU can refuse a process that opens it just after another closed it
    local floors=()
    [ -n "${FLOORS:-}" ] && [ -s "$FLOORS" ] && floors=(--floors "$(cat "$FLOORS")") && echo "gpu_run: floors from $FLOORS"
    timeout "${BENCH_LIMIT:-540}" "$PY" scripts/bench.py --out "$OUT/bench-$backend.md" \
        --executed "$OUT/executed" --cell-timeout "${CELL_TIMEOUT:-90}" --gap "${GAP:-3}" \
        ${NOTEBOOKS:+--notebooks "$NOTEBOOKS"} "${floors[@]}" ${BENCH_ARGS:-} 2>&1 | tee /tmp/bench.err
    local rc=${PIPESTATUS[0]}
    # bench.py prints the floors it measured (or was given) as JSON: saved for the next run
    [ -n "${FLOORS:-}" ] && [ ! -s "$FLOORS" ] && sed -n 's/^bench: floors //p' /tmp/bench.err | tail -1 > "$FLOORS"
    return "$rc"
}

grade_held() {
    # every solution graded from the command line (one batch, GRADE_JOBS grading processes) while
    # another process holds the device, as a Colab cell grades while the notebook holds the chip:
    # grading must compute on the CPU
    install && kernel_spec || return 1   # (bench ran in a pipeline's subshell: its exports are not here)
    rm -f /tmp/held
    "$PY" -c 'import jax, time; print("holder:", jax.devices(), flush=True); open("/tmp/held", "w").close(); time.sleep(900)' &
    local holder=$!
    # until the holder has the device, or has ended without it (nothing this host can open: a
    # stand-in for a held one, as JAX_PLATFORMS=tpu is on a CPU machine)
    for _ in $(seq 120); do [ -e /tmp/held ] || ! kill -0 "$holder" 2>/dev/null && break; sleep 1; done
    [ -e /tmp/held ] || echo "holder: could not open the device; grading goes on, the device unopenable"
    "$PY" -c 'import sys, jax; print(f"grader: Python {sys.version.split()[0]}, JAX {jax.__version__}")'
    local notebooks=()
    for nb in solutions/*/*.ipynb; do
        [[ $nb =~ ${GRADE_PATTERN:-.} && $nb != */.ipynb_checkpoints/* ]] && notebooks+=("$nb")
    done
    local t0=$SECONDS
    # uncontained (--no-sandbox, said in each result's `containment`): these machines have no
    # bubblewrap, and the code graded is the course's own solutions
    timeout "${GRADE_LIMIT:-300}" "$PY" -m autograder grade "${notebooks[@]}" --json --no-sandbox \
        --jobs "${GRADE_JOBS:-4}" > /tmp/grade.json 2>/tmp/grade.err
    local rc=$?
    echo "graded ${#notebooks[@]} notebook(s) in $((SECONDS - t0)) s (exit $rc), the device held by another process"
    "$PY" - <<'PY'
import json
try:
    results = json.load(open("/tmp/grade.json"))
except Exception as exc:
    raise SystemExit(f"no result ({exc}): " + open("/tmp/grade.err").read()[-2000:])
for r in results if isinstance(results, list) else [results]:
    bad = [f"{t['exercise']}: {t['feedback'][:300]}" for t in r.get("tests", []) if not t["passed"]]
    print(f"{r.get('notebook', '?')}: {r.get('score', 0):g}/{r.get('max_score', 0):g}"
          + f" (containment: {r.get('containment', '?')})"
          + (f" error: {r['error']}" if r.get("error") else "") + "".join(f"\n    {b}" for b in bad))
PY
    kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null
}

mkdir -p "$OUT" "$HOME" "$MPLCONFIGDIR" "$IPYTHONDIR"
status=0
if [ "${BENCH:-1}" != 0 ]; then
    bench 2>&1 | tee "$OUT/log"
    status=${PIPESTATUS[0]}
fi
if [ -d "$OUT/executed" ]; then
    # notebook JSON keeps each output line as a string: a verdict is one, an error's name another
    grep -oE 'claim: [^"]*: (holds|does not hold|inconclusive) \([^"]*' "$OUT"/executed/*.ipynb > "$OUT/claims.txt"
    grep -o '"ename": "[^"]*"' "$OUT"/executed/*.ipynb >> "$OUT/claims.txt"
    tar -czf "$OUT/executed.tar.gz" -C "$OUT" executed && rm -rf "$OUT/executed"
fi
if [ "${GRADE_HELD:-0}" = 1 ]; then
    grade_held 2>&1 | tee "$OUT/grading.txt"
fi
echo "gpu_run: exit $status" | tee -a "$OUT/log"
exit "$status"
