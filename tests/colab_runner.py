"""Executes notebooks in the simulated Colab session, several at once, and prints one JSON
object: path -> {"ok", "seconds", "outputs"} (or {"ok": False, "error"}).

    python colab_runner.py WORKERS NOTEBOOK [NOTEBOOK ...]

Run with the Colab venv's interpreter, from a folder holding this file and notebook_runner.py
(tests/test_colab.py copies both there, the runner from scripts/): each notebook runs through
:func:`notebook_runner.execute_notebook`, nbclient without the widget stall, with a probe cell
appended that prints the kernel's JAX, Python and interpreter (``PROBE`` below).
"""
import json
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

PROBE = "KERNEL-PROBE"


def run(path):
    import nbformat
    from nbclient.exceptions import CellExecutionError

    from notebook_runner import execute_notebook

    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        "import sys, jax\nprint(%r, jax.__version__, sys.version_info[0], sys.version_info[1], sys.executable)" % PROBE))
    start = time.time()
    try:
        execute_notebook(nb, Path(path).parent, timeout=600)
    except CellExecutionError as exc:
        return path, {"ok": False, "error": str(exc)[-3000:]}
    texts = ["".join(str(o.get("data", {}).get("text/plain", "")) + o.get("text", "")
                     for o in c.get("outputs", [])) for c in nb.cells if c.cell_type == "code"]
    return path, {"ok": True, "seconds": round(time.time() - start, 1), "outputs": texts}


if __name__ == "__main__":
    with ProcessPoolExecutor(int(sys.argv[1])) as pool:
        print(json.dumps(dict(pool.map(run, sys.argv[2:]))))
