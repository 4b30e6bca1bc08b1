"""A simulated Colab session: Colab's JAX (0.7.2), nothing from the repo but a built wheel of the
package and the notebooks themselves. Every chapter executes, and one exercise is graded by its
own test cells (with a correct answer) while the released notebook runs its self-check."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = [pytest.mark.notebook, pytest.mark.slow, pytest.mark.xdist_group("colab")]
COLAB_PINS = ["jax==0.7.2", "jaxlib==0.7.2", "ipykernel", "nbclient", "nbformat", "matplotlib",
              "ipywidgets", "rich"]
VENV = ROOT / ".venv-colab"

RUNNER = textwrap.dedent('''
    import json, sys, time, nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError
    report = {}
    for path in sys.argv[1:]:
        nb = nbformat.read(path, as_version=4)
        start = time.time()
        try:
            NotebookClient(nb, kernel_name="python3", timeout=600, allow_errors="/exercises/" in path,
                           resources={"metadata": {"path": str(__import__("pathlib").Path(path).parent)}}).execute()
            report[path] = {"ok": True, "seconds": time.time() - start, "nb": nb}
        except CellExecutionError as exc:
            report[path] = {"ok": False, "error": str(exc)[-3000:]}
    for v in report.values():
        nb = v.pop("nb", None)
        if nb is not None:
            v["last_output"] = "".join(str(o.get("data", {}).get("text/plain", "")) + o.get("text", "")
                                       for o in nb.cells[-1].get("outputs", []))
    print(json.dumps(report))
''')


def _colab_python(tmp: Path) -> Path:
    python = VENV / "bin" / "python"
    stamp = VENV / "pins.json"
    if not python.exists() or not stamp.exists() or json.loads(stamp.read_text()) != COLAB_PINS:
        shutil.rmtree(VENV, ignore_errors=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        *COLAB_PINS], check=True)
        stamp.write_text(json.dumps(COLAB_PINS))
    wheels = tmp / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
                    "-w", str(wheels), str(ROOT)], check=True)
    wheel = next(wheels.glob("*.whl"))
    # Install as Colab's install cell would: the package's own requirements, JAX left as it is.
    constraints = tmp / "constraints.txt"
    constraints.write_text("jax==0.7.2\njaxlib==0.7.2\n")
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--force-reinstall", "--no-deps", str(wheel)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "-c", str(constraints), str(wheel)], check=True)
    return python


def test_course_runs_on_colabs_jax(tmp_path):
    python = _colab_python(tmp_path)
    version = subprocess.run([str(python), "-c", "import jax; print(jax.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "0.7.2"
    work = tmp_path / "session"  # only the notebooks: no autograder/ folder beside them
    shutil.copytree(ROOT / "course", work / "course")
    shutil.copytree(ROOT / "exercises", work / "exercises")
    ex = work / "exercises" / "01_phases" / "01_phases.ipynb"
    solved = work / "solved" / "01_phases.ipynb"
    solved.parent.mkdir()
    shutil.copy(ROOT / "solutions" / "01_phases" / "01_phases.ipynb", solved)
    (work / "runner.py").write_text(RUNNER)
    notebooks = sorted((work / "course").glob("*.ipynb")) + [solved, ex]
    proc = subprocess.run([str(python), str(work / "runner.py"), *map(str, notebooks)],
                          capture_output=True, text=True, cwd=work, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    course_failures = {Path(p).name: r["error"] for p, r in report.items() if not r["ok"]}
    assert not course_failures, json.dumps(course_failures, indent=1)[:6000]
    # the solved notebook passed every test cell; the released one (run through its errors)
    # ends with the self-check table, which shows every exercise failing
    assert report[str(solved)]["ok"]
    assert report[str(ex)]["ok"]
    assert "0/4 exercises pass their visible tests" in report[str(ex)]["last_output"]
