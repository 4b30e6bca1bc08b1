"""A simulated Colab session: Colab's JAX (0.7.2) and the packages Colab ships beside it, with
nothing from the repo but a built wheel of the package and the notebooks themselves.

Python: Colab runs Python 3.13 (since its August 2026 runtime), and so does the simulation: the
interpreter that ``scripts/find_python.sh 3.13`` finds (PATH, then pyenv's copies). Without one
the tests fail and say how to get it: a simulation on another Python would not be Colab's.

What runs in ``.venv-colab`` (rebuilt only when the pins or the interpreter change):

1. every chapter of course/ executes, and the kernel that ran it reports JAX 0.7.2 (a probe cell
   appended to each notebook, and the chapter's own ``device_report`` line);
2. every assignment of exercises/, with the answers of solutions/ filled into a copy of the
   released notebook, executes without an error and its final self-check reports N/N;
3. the checks' unit tests (tests/test_checks.py, tests/test_checks_chapters.py) pass under
   JAX 0.7.2, with the installed wheel, not the checkout, as ``autograder``.

Grading (``python -m autograder grade``) needs nbgrader, which requires ipython>=8.10 while Colab
ships ipython 7.34.0, so it cannot live in the Colab kernel's environment: it runs in a second
venv, ``.venv-colab-grading``, with the same JAX-side pins (jax/jaxlib 0.7.2, numpy, scipy,
ml_dtypes, matplotlib) and nbgrader's own requirements. One assignment is graded there: the
solution gets full marks and the released (blank) notebook zero.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from colab_runner import PROBE
from conftest import ASSIGNMENTS, ROOT, fill_answers, released_notebook, solution_notebook

pytestmark = [pytest.mark.notebook, pytest.mark.slow, pytest.mark.slow_env, pytest.mark.xdist_group("colab")]

COLAB_JAX = "0.7.2"
# Versions from Colab's own published `pip freeze` of its GPU runtime with jax 0.7.2
# (github.com/googlecolab/backend-info, pip-freeze.gpu.txt, mid-2026, the Python 3.12 image).
# The Python 3.13 image's list could not be found; these are the closest known versions.
JAX_SIDE = [
    f"jax=={COLAB_JAX}", f"jaxlib=={COLAB_JAX}",
    "ml_dtypes==0.5.4", "opt_einsum==3.4.0", "scipy==1.16.3",
    # Colab's Python 3.13 image ships NumPy 2.1.3
    "numpy==2.1.3",
    "matplotlib==3.10.0",
]
COLAB_PINS = JAX_SIDE + [
    # the kernel and widgets exactly as Colab pins them (google-colab requires ipykernel 6.17.1)
    "ipykernel==6.17.1", "ipython==7.34.0", "jupyter_client==7.4.9", "traitlets==5.7.1",
    "tornado==6.5.1", "pyzmq==26.2.1", "matplotlib-inline==0.2.2",
    "ipywidgets==7.7.1", "widgetsnbextension==3.6.10", "jupyterlab_widgets==3.0.16",
    "nbclient==0.10.4", "nbformat==5.10.4", "rich==13.9.4", "pytest==8.4.2",
]
VENV = ROOT / ".venv-colab"
GRADING_VENV = ROOT / ".venv-colab-grading"
GRADED = "03_purity"   # the assignment graded with `python -m autograder grade`
WORKERS = 2            # notebooks executed at once (CI has 2 cores)



def _base_python() -> tuple[str, str]:
    """Colab's interpreter, Python 3.13 (the one ``scripts/find_python.sh 3.13`` finds)."""
    proc = subprocess.run([str(ROOT / "scripts" / "find_python.sh"), "3.13"], capture_output=True, text=True)
    assert proc.returncode == 0, "the Colab simulation needs Python 3.13:\n" + proc.stderr
    return proc.stdout.strip(), "3.13"


def _pip(python, *args):
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *args],
                   check=True)


@contextlib.contextmanager
def _exclusive(path: Path):
    """Hold a lock on ``path`` (a venv) across processes: two pytest workers must never build
    or install into the same venv at once (that left half-written packages behind)."""
    name = hashlib.sha1(str(path).encode()).hexdigest()[:12]
    with open(Path(tempfile.gettempdir()) / f"course-venv-{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _venv(path: Path, pins: list[str], base: str, version: str) -> Path:
    """A venv at ``path`` holding ``pins``; reused while the pins and the interpreter are the same."""
    with _exclusive(path):
        return _build_venv(path, pins, base, version)


def _build_venv(path: Path, pins: list[str], base: str, version: str) -> Path:
    python = path / "bin" / "python"
    stamp = path / "pins.json"
    wanted = {"python": version, "pins": pins}
    if not (python.exists() and stamp.exists() and json.loads(stamp.read_text()) == wanted):
        shutil.rmtree(path, ignore_errors=True)
        made = subprocess.run([base, "-m", "venv", str(path)], capture_output=True, text=True, cwd=ROOT)
        if made.returncode:
            raise RuntimeError(f"could not create the venv {path}:\n{made.stdout}{made.stderr}")
        _pip(python, *pins)
        stamp.write_text(json.dumps(wanted))
    return python


def _install_wheel(python: Path, wheel: Path, pins: list[str], tmp: Path, extra: str = "") -> None:
    """Install the package as Colab's install cell would: its own requirements, the pinned
    versions left as they are (a constraint, so a conflict fails instead of upgrading them)."""
    with _exclusive(python.parent.parent):
        _install_wheel_unlocked(python, wheel, pins, tmp, extra)


def _install_wheel_unlocked(python: Path, wheel: Path, pins: list[str], tmp: Path, extra: str) -> None:
    constraints = tmp / f"constraints-{python.parent.parent.name}.txt"
    constraints.write_text("\n".join(pins) + "\n")
    _pip(python, "--force-reinstall", "--no-deps", str(wheel))
    try:  # fast when the venv already has every requirement (a cached venv): no index needed
        subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-index",
                        "-c", str(constraints), f"{wheel}{extra}"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        _pip(python, "-c", str(constraints), f"{wheel}{extra}")


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("colab")
    base, version = _base_python()
    wheels = tmp / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--disable-pip-version-check",
                    "-w", str(wheels), str(ROOT)], check=True)
    wheel = next(wheels.glob("*.whl"))
    python = _venv(VENV, COLAB_PINS, base, version)
    _install_wheel(python, wheel, COLAB_PINS, tmp)
    return {"python": python, "version": version, "wheel": wheel, "base": base, "tmp": tmp}


def _answers(assignment: str) -> dict:
    """grade_id -> the solution's answer, without nbgrader's solution markers."""
    nb = nbformat.read(str(solution_notebook(assignment)), as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]:
            "\n".join(l for l in c.source.splitlines() if l.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION"))
            for c in nb.cells if c.metadata.get("nbgrader", {}).get("solution")}


def _session(tmp: Path) -> Path:
    """What a learner has on Colab: the notebooks only (no autograder/ folder beside them)."""
    work = tmp / "session"
    if not work.exists():
        shutil.copytree(ROOT / "course", work / "course")
        for a in ASSIGNMENTS:
            fill_answers(released_notebook(a), _answers(a), work / "solved" / a / f"{a}.ipynb")
    return work


def test_python_version_is_colabs(colab):
    """The simulation's kernel runs Colab's Python (3.13) and Colab's JAX (0.7.2)."""
    out = subprocess.run([str(colab["python"]), "-c", "import sys, jax; print('%d.%d' % sys.version_info[:2], jax.__version__)"],
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["3.13", COLAB_JAX]


def test_course_and_solved_exercises_run_on_colabs_jax(colab):
    python, work = colab["python"], _session(colab["tmp"])
    for runner in ("tests/colab_runner.py", "scripts/notebook_runner.py"):   # nbclient without the widget stall
        shutil.copy(ROOT / runner, work / Path(runner).name)
    chapters = sorted((work / "course").glob("*.ipynb"))
    solved = {a: work / "solved" / a / f"{a}.ipynb" for a in ASSIGNMENTS}
    assert len(chapters) == 10 and len(solved) == 10
    notebooks = chapters + list(solved.values())
    proc = subprocess.run([str(python), str(work / "colab_runner.py"), str(WORKERS), *map(str, notebooks)],
                          capture_output=True, text=True, cwd=work, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    failures = {Path(p).name: r["error"] for p, r in report.items() if not r["ok"]}
    assert not failures, json.dumps(failures, indent=1)[:8000]
    print("seconds per notebook:", {Path(p).relative_to(work).as_posix(): r["seconds"] for p, r in report.items()})

    for path in notebooks:
        outputs = report[str(path)]["outputs"]
        # the kernel that executed the notebook, not just the venv, ran Colab's JAX
        probe = outputs[-1].split()
        assert probe[:4] == [PROBE, COLAB_JAX, *colab["version"].split(".")], (path.name, outputs[-1])
        assert Path(probe[4]).parent.parent == VENV, probe  # the Colab venv's interpreter
        reports = [m for o in outputs for m in re.findall(r"JAX (\S+) on [A-Z]+: ", o)]
        assert reports and set(reports) == {COLAB_JAX}, (path.name, reports)

    for a, path in solved.items():
        n = sum(1 for c in nbformat.read(str(released_notebook(a)), as_version=4).cells
                if c.metadata.get("nbgrader", {}).get("solution"))
        selfcheck = report[str(path)]["outputs"][-2]   # the notebook's own last cell
        assert f"{n}/{n} exercises pass their visible tests" in selfcheck, (a, selfcheck)


def test_checks_unit_tests_pass_on_colabs_jax(colab):
    """tests/test_checks*.py against the installed wheel under JAX 0.7.2."""
    work = colab["tmp"] / "unit"
    (work / "tests").mkdir(parents=True)
    for name in ("conftest.py", "in_process.py", "xdist_groups.py", "test_checks.py",
                 "test_checks_chapters.py"):
        shutil.copy(ROOT / "tests" / name, work / "tests" / name)
    shutil.copytree(ROOT / "tests" / "processes", work / "tests" / "processes")  # run by path
    shutil.copytree(ROOT / "solutions", work / "solutions")  # conftest lists the assignments
    shutil.copytree(ROOT / "course", work / "course")        # the chapters the feedback points to
    (work / "pytest.ini").write_text("[pytest]\nmarkers =\n    notebook: executes a notebook\n    slow: slow\n")
    proc = subprocess.run([str(colab["python"]), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x",
                           "tests/test_checks.py", "tests/test_checks_chapters.py"],
                          capture_output=True, text=True, cwd=work, timeout=900)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    where = subprocess.run([str(colab["python"]), "-c", "import autograder; print(autograder.__file__)"],
                           capture_output=True, text=True, cwd=work, check=True).stdout
    assert str(VENV) in where, where   # the wheel was tested, not the checkout


def test_grading_on_colabs_jax(colab):
    """``python -m autograder grade``: full marks for the solution, zero for the blank notebook."""
    python = _venv(GRADING_VENV, JAX_SIDE, colab["base"], colab["version"])
    _install_wheel(python, colab["wheel"], JAX_SIDE, colab["tmp"], extra="[grading]")
    work = colab["tmp"] / "grading"
    shutil.copytree(ROOT / "solutions", work / "course" / "solutions")
    solved = fill_answers(released_notebook(GRADED), _answers(GRADED), work / "solved" / GRADED / f"{GRADED}.ipynb")
    blank = work / "blank" / GRADED / f"{GRADED}.ipynb"
    blank.parent.mkdir(parents=True)
    shutil.copy(released_notebook(GRADED), blank)
    proc = subprocess.run([str(python), "-m", "autograder", "grade", str(solved), str(blank), "--json",
                           "--root", str(work / "course"), "--jobs", str(WORKERS)],
                          capture_output=True, text=True, cwd=work, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    good, bad = json.loads(proc.stdout)
    assert good["max_score"] > 0 and good["score"] == good["max_score"], good
    assert all(t["passed"] for t in good["tests"]), good
    assert bad["score"] == 0 and bad["max_score"] == good["max_score"], bad
    assert not any(t["passed"] for t in bad["tests"]), bad
    jax_version = subprocess.run([str(python), "-c", "import jax; print(jax.__version__)"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    assert jax_version == COLAB_JAX
