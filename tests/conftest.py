"""Shared helpers for the test suite: paths, filling answers into notebooks, grading."""
from __future__ import annotations

import functools
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from autograder.judge.runner import ensure_judge_devices
from xdist_groups import pytest_collection_modifyitems  # noqa: F401 - the suite's hook (xdist groups)
from in_process import ipython, runner  # noqa: F401 - fixtures of the tests that judge in this process (module-scoped; a module may define its own)

import nbformat
import pytest

# Before any test module imports JAX: the judge's CPU devices (8), as every grading process has them,
# whatever module a worker collects first (test_effect exports sharded programs at import).
ensure_judge_devices()

ROOT = Path(__file__).resolve().parent.parent


ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
COURSE_NOTEBOOKS = sorted((ROOT / "course").glob("*.ipynb"))
PROCESSES = ROOT / "tests" / "processes"  # the programs tests run in a process of their own, by path


_SOCKETS: list[str] = []  # this process's kernel socket folders, removed when it exits


def ipc_manager(asynchronous: bool = False, kernel_name: str = "python3"):
    """A kernel manager whose kernel talks on Unix sockets in a fresh folder of its own.

    The tests start kernels side by side (``pytest -n``, the Colab runner, graders). On TCP,
    jupyter_client picks a free port, frees it, and the kernel binds it again a moment later:
    another process can take it in between and the kernel dies before it answers kernel_info
    (jupyter_client issue 154). A socket path of its own cannot be taken."""
    from jupyter_client.manager import AsyncKernelManager, KernelManager

    if not _SOCKETS:
        import atexit

        atexit.register(lambda: [shutil.rmtree(d, ignore_errors=True) for d in _SOCKETS])
    folder = tempfile.mkdtemp(prefix="kernel-")
    _SOCKETS.append(folder)
    cls = AsyncKernelManager if asynchronous else KernelManager
    return cls(kernel_name=kernel_name, transport="ipc", ip=os.path.join(folder, "k"))


def start_ipc_kernel(startup_timeout: float = 60, **start):
    """``jupyter_client.manager.start_new_kernel`` on :func:`ipc_manager`'s sockets:
    ``(manager, blocking client)``, the kernel ready."""
    km = ipc_manager()
    km.start_kernel(**start)
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=startup_timeout)
    except RuntimeError:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
        raise
    return km, kc


def released_notebook(assignment: str) -> Path:
    return ROOT / "exercises" / assignment / f"{assignment}.ipynb"


def solution_notebook(assignment: str) -> Path:
    return ROOT / "solutions" / assignment / f"{assignment}.ipynb"


def fill_answers(src: Path, answers: dict, dest: Path) -> Path:
    """Copy ``src`` to ``dest`` with the answer cells named in ``answers`` (grade_id -> source) replaced,
    the way a learner (or the acceptance tests) fill in a released notebook."""
    nb = nbformat.read(str(src), as_version=4)
    seen = set()
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id")
        if gid in answers:
            cell.source = answers[gid]
            seen.add(gid)
    missing = set(answers) - seen
    assert not missing, f"no answer cells {missing} in {src}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, str(dest))
    return dest


def import_script(name: str):
    """The module scripts/<name>.py (such as ``notebook_runner``), imported with scripts/ on
    sys.path for the import only, as the tests import the other scripts."""
    import importlib

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "scripts"))


@functools.cache
def release_script() -> dict:
    """scripts/release.py's names (``generate``, ``check``, ``known_answers``...), loaded once."""
    return runpy.run_path(str(ROOT / "scripts" / "release.py"))


def known_answers(assignment: str) -> dict:
    """``{"WRONG": {grade_id: [(source, expected feedback phrase, idea), ...]}, "RIGHT": {grade_id:
    [source, ...]}}``: the known answers held as data in the assignment's judge files."""
    return release_script()["known_answers"](ROOT / "solutions" / assignment)


def wrong_answers(assignment: str) -> dict:
    """``{grade_id: [(source, expected feedback phrase, idea), ...]}`` from the judge files' ``WRONG``."""
    return known_answers(assignment)["WRONG"]


def run_grader(paths, *extra, timeout=900, env=None, cwd=ROOT, prefix=(), regrade_starved=True):
    """Run ``python -m autograder grade PATHS --json`` and return (results, stderr, returncode);
    ``env``: variables added to this environment; ``prefix``: a command it runs under.
    ``regrade_starved``: the notebooks a starved machine left not graded are graded again
    (:func:`regrading_starved`; the returncode is then the command's rule, non-zero when a
    notebook has an error); False for tests of starvation itself, which read the raw result."""
    paths = list(paths)
    if not regrade_starved:
        return _grade_command(paths, extra, timeout, env, cwd, prefix)

    def grade(some):
        data, stderr, code = _grade_command(some, extra, timeout, env, cwd, prefix)
        return [data] if isinstance(data, dict) else data, stderr, code

    results, stderr, codes = regrading_starved(grade, paths)
    code = codes[0] if len(codes) == 1 else int(any(r.get("error") for r in results))
    return results[0] if len(paths) == 1 else results, stderr, code


def _grade_command(paths, extra, timeout, env, cwd, prefix):
    """One run of the grade command (see :func:`run_grader`): (its JSON, stderr, returncode)."""
    cmd = [*prefix, sys.executable, "-m", "autograder", "grade", *map(str, paths), "--json", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, **(env or {})})
    try:
        data = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"grader stdout is not JSON: {proc.stdout[:2000]!r}\nstderr: {proc.stderr[-3000:]}")
    # a grading process, in which JAX's threads run once the judge has used it, starts kernels:
    # JAX warns of a deadlock whenever Python code runs between such a fork and its exec
    assert "os.fork() was called" not in proc.stderr, proc.stderr[-3000:]
    return data, proc.stderr, proc.returncode


STARVED_REGRADES = 3  # times the notebooks a starved machine left not graded are graded again


def starved(result: dict) -> list[str]:
    """The grade_ids of ``result``'s tests that were not graded because the machine was starved
    (their feedback is :mod:`autograder.judge.starvation`'s message): the grader's ``error`` for
    that notebook, and a non-zero exit, say a busy machine's, never the answer's. A test starved
    again when graded alone (a zero the grader gives, since the submission might have starved it)
    counts too: the suite's known answers start no work of their own, so on a machine that other
    work keeps busy it is the machine's."""
    from autograder.judge.starvation import Watch, is_starved_alone

    head, tail = Watch(None).message("\0").split("\0")  # the message, whichever process ran out
    return [t["grade_id"] for t in result.get("tests", [])
            if (t["feedback"].startswith(head) and t["feedback"].endswith(tail)) or is_starved_alone(t["feedback"])]


def regrading_starved(grade, paths: list):
    """``grade(paths)`` (returning ``(results, stderr, code)``, one result per path, or None for
    results when the run failed), then exactly the notebooks a starved machine left not graded
    (:func:`starved`) graded again, up to :data:`STARVED_REGRADES` times: on a busy machine a
    batch of known answers is graded late, never reported wrong nor failed. Starved every time:
    the test fails, saying the machine was too starved to grade. Returns (results, the runs'
    stderr joined, every run's code)."""
    results, stderr, code = grade(paths)
    codes = [code]
    for _ in range(STARVED_REGRADES):
        again = [i for i, r in enumerate(results or []) if starved(r)]
        if not again:
            return results, stderr, codes
        more, err, code = grade([paths[i] for i in again])
        stderr += f"\n--- graded again, starved by the machine: {[str(paths[i]) for i in again]}\n" + err
        codes.append(code)
        if more is None:
            return None, stderr, codes
        for i, r in zip(again, more):
            results[i] = r
    left = {str(paths[i]): starved(r) for i, r in enumerate(results) if starved(r)}
    if left:
        pytest.fail(f"the machine was too starved to grade: tests still not graded after {STARVED_REGRADES} "
                    f"re-grades: {left}")
    return results, stderr, codes


GRADE_SAVING = PROCESSES / "grade_saving.py"  # the process of grade_saving


def grade_saving(paths, saved: dict, out: Path, *, root=None, jobs: int = 2, env=None, cwd=ROOT,
                 timeout=900, regrade_starved=True):
    """Grade ``paths`` in one batch, the executed notebook of each path of ``saved`` kept where it
    says (the instructor's copy, as ``autograde`` keeps it), and return (results, stderr,
    returncode): what a contained kernel printed comes back only that way, since it can write
    nowhere but its box (see :func:`printed`). ``out``: where the results are written.
    ``regrade_starved``: as :func:`run_grader`'s."""
    paths = [str(p) for p in paths]
    saved = {str(k): str(v) for k, v in saved.items()}

    def grade(some):
        args = json.dumps([some, {p: saved[p] for p in some if p in saved}, str(root) if root else None, jobs,
                           str(out)])
        Path(out).unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, str(GRADE_SAVING), args], capture_output=True, text=True,
                              timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})})
        results = json.loads(Path(out).read_text()) if Path(out).exists() else None
        return results, proc.stderr, proc.returncode

    if not regrade_starved:
        return grade(paths)
    results, stderr, codes = regrading_starved(grade, paths)
    return results, stderr, max(codes)


def printed(saved: Path, prefix: str):
    """The rest of the first line starting with ``prefix`` that the notebook saved at ``saved``
    printed (None if it never did)."""
    if not Path(saved).exists():
        return None
    for cell in nbformat.read(str(saved), as_version=4).cells:
        for output in cell.get("outputs", []):
            for line in output.get("text", "").splitlines():
                if line.startswith(prefix):
                    return line[len(prefix):]
    return None


def course_in_0700(*assignments) -> Path:
    """A minimal course checkout (the autograder package; each assignment's source notebook, judge
    and release) in a new 0700 temporary folder, which the sandbox uid cannot enter: grade from
    there with ``--root`` and ``PYTHONPATH`` set to it. The caller removes it."""
    import shutil
    import tempfile

    course = Path(tempfile.mkdtemp(prefix="course-0700-"))
    assert (course.stat().st_mode & 0o777) == 0o700
    shutil.copytree(ROOT / "autograder", course / "autograder",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for a in assignments:
        shutil.copytree(ROOT / "solutions" / a, course / "solutions" / a)
        shutil.copytree(ROOT / "exercises" / a, course / "exercises" / a)
    return course


def wait_until_serving(proc, url: str, seconds: float, what: str, log=lambda: "") -> None:
    """Poll ``url`` until it answers; fail (with ``log()``) if ``proc`` exits or ``seconds`` pass."""
    import time
    import urllib.request

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with {proc.returncode}: {log()}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(0.5)
    pytest.fail(f"{what} did not answer on {url} within {seconds:g} s: {log()}")


def grade_attack_table(table: dict, tmp: Path) -> dict:
    """Grade every row of an attack table (tests/attacks.py: rows with ``assignment``, ``released``
    and ``filled(answers)``) in one contained batch, with each assignment's solution beside them
    (the correct control, ``control-<assignment>``): ``{name: result}``."""
    paths, names = [], []
    for name, attack in table.items():
        a = attack.assignment
        base = released_notebook(a) if attack.released else solution_notebook(a)
        answers = {c.metadata["nbgrader"]["grade_id"]: c.source
                   for c in nbformat.read(str(base), as_version=4).cells
                   if c.metadata.get("nbgrader", {}).get("solution")}
        paths.append(fill_answers(base, attack.filled(answers), tmp / name / a / f"{a}.ipynb"))
        names.append(name)
    for a in sorted({attack.assignment for attack in table.values()}):
        paths.append(fill_answers(solution_notebook(a), {}, tmp / f"control-{a}" / a / f"{a}.ipynb"))
        names.append(f"control-{a}")
    results, stderr, code = run_grader(paths, "--jobs", "2")
    assert code == 0, stderr[-3000:]
    return dict(zip(names, results))
