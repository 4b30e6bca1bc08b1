"""Running a judge: its files found and loaded by path, each test's verdict, and
:class:`JudgeStep`, the grading pipeline's step that judges a live kernel
(:mod:`autograder.grader.pipeline`)."""
from __future__ import annotations

import functools
import importlib.util
import time
from pathlib import Path

from typing import TYPE_CHECKING

from ..common.course import CHECK_TAG, JUDGE, is_judge_file, is_test_cell
from .channel import REQUEST_TIMEOUT, Channel, ChannelError, LearnerError, answered
from .outcome import PASSED, Verdict, failed, learner_text, not_graded
from .starvation import Starved, starved_alone
from .runner import RUN_TIMEOUT, ProgramFailure, ProgramRunner, RunnerFault, ensure_judge_devices, use
from .runner import extend as runner_extend

if TYPE_CHECKING:  # NumPy and the feedback are imported by the judge's thread, when it runs
    from .kernel import Kernel


def judge_path(assignment_dir: Path) -> Path:
    return Path(assignment_dir) / JUDGE


def judge_paths(assignment_dir: Path) -> list[Path]:
    """The assignment's judge files (:func:`~autograder.common.course.is_judge_file`): ``judge.py``,
    then any ``judge_<exercise>.py`` beside it (an exercise's judge in a file of its own), by name."""
    return sorted((p for p in Path(assignment_dir).iterdir() if p.is_file() and is_judge_file(p.name)),
                  key=lambda p: (p.name != JUDGE, p.name))


def judge_tests(assignment_dir: Path) -> dict:
    """``{test_<name>: function}`` over every judge file of the assignment; a test defined in two
    files is an error of the course, not of the learner."""
    tests: dict = {}
    for path in judge_paths(assignment_dir):
        module = load_judge(path)
        for name, f in vars(module).items():
            if name.startswith("test_") and callable(f) and getattr(f, "__module__", None) == module.__name__:
                if name in tests:
                    raise ValueError(f"{name} is defined in two judge files of {Path(assignment_dir).name}")
                tests[name] = f
    return tests


_LOADED: dict = {}  # (path, mtime, size) -> module: a grading process loads each judge once


def load_judge(path: Path):
    """The judge module at ``path``, loaded by file path (not through ``sys.path``), once per
    process and version of the file: a grading process that grades many notebooks keeps the
    module, and what its functions have compiled (judge files hold no state between
    notebooks: every draw comes from the ``Kernel`` of each grading)."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _LOADED:
        spec = importlib.util.spec_from_file_location(f"_autograder_judge_{path.parent.name}_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _LOADED[key] = module
    return _LOADED[key]


def verdict(test, k: Kernel, grade_id: str, *, alone: bool = False) -> Verdict:
    """Run one judge test: :data:`~.outcome.PASSED` only when ``test(k)`` returned normally
    (having checked all its evidence) and no claim of the kernel failed; claims are applied
    after the evidence (:meth:`Kernel.claim` keeps a failing one in ``k.failed_claims``): a test
    that fails on its evidence says so first, then what a failed claim saw. Every failure
    carries a fixed message of the judge's, the learner's text after it made safe
    (:mod:`.outcome`). ``alone``: the notebook is graded alone, after a starved first grading:
    a test starved again scores zero (the submission's own doing, :mod:`.starvation`)."""
    if hasattr(k, "failed_claims"):
        k.failed_claims = []  # this test's own (a serial judge passes one Kernel to every test)
    if hasattr(k, "asked"):
        k.asked = 0  # ... and so are its requests
    v = _evidence(test, k, grade_id, alone)
    claims = getattr(k, "failed_claims", None) or []
    if not claims or not v.graded:
        return v
    if v.passed:
        return claims[0]
    return Verdict(False, f"{v.feedback} Also, {claims[0].feedback[0].lower()}{claims[0].feedback[1:]}")


def _evidence(test, k: Kernel, grade_id: str, alone: bool = False) -> Verdict:
    """The verdict of ``test(k)``'s own evidence (claims aside). "Not graded" is never the
    learner's choice: it is left for the machine (a starved one, the first time) and for a
    judge that fails before it asked the kernel anything (its own bug, whatever the learner
    wrote); an exception raised once the judge holds what the learner's code gave (a value, a
    program) fails the test, naming it."""
    from .. import wire
    from ..feedback import ExerciseFailure, explain_error

    try:
        test(k)
    except Starved as exc:  # the machine's fault, not the learner's: an error, never a zero
        if alone:  # ... unless it happens again with nothing else graded: the submission's own
            return failed(starved_alone("The code under test"), str(exc).removeprefix("Not graded: "))
        return not_graded(str(exc))
    except ExerciseFailure as exc:
        return _failed(str(exc), "This test's check failed.")
    except ChannelError as exc:
        return _failed(str(exc), "The grader could not use the kernel's reply.")
    except RunnerFault as exc:  # the grader's own runner: the machine's fault
        return not_graded(f"Not graded: {exc}")
    except ProgramFailure as exc:
        return _failed(str(exc), "The program could not be run by the grader.")
    except LearnerError as exc:
        if isinstance(exc, NameError):
            return failed(f"{type(exc).__name__}: {learner_text(exc, 300)}. The exercise's function is not "
                          "defined: run its answer cell, and keep the function's name as given.")
        return _failed(str(explain_error(exc.kernel_mro or [type(exc).__name__], str(exc), exc.label)),
                       "The code under test raised an error.")
    except wire.WireError as exc:
        return failed("The value could not be sent to the kernel", str(exc))
    except Exception as exc:  # noqa: BLE001 - what the learner's code gave, or a bug of the judge
        if getattr(k, "asked", 0):
            return failed(f"The grader could not check what the code under test gave: it raised {type(exc).__name__} "
                          "while checking it (a value or program of another type, shape or signature than the "
                          "exercise asks for?)", str(exc)[:300])
        return not_graded(f"Not graded: the grader's own check for {grade_id} failed ({type(exc).__name__}: "
                          f"{str(exc)[:300]}); please tell the course staff.")
    return PASSED


def _failed(message: str, fallback: str) -> Verdict:
    """A failure with the judge's ``message`` (trusted code wrote it, though learner text may be
    quoted in it: made safe), or ``fallback`` where nothing is left of it."""
    return failed(message if learner_text(message) else fallback)


JUDGE_THREADS = 2  # tests judged side by side (see run_judge)


def run_judge(assignment_dir, kernel_client=None, *, grade_ids=None, kernel: Kernel | None = None,
              runner: ProgramRunner | None = None, threads: int | None = None, key: bytes | None = None,
              alone: bool = False, **channel_kw) -> dict:
    """``{grade_id: Verdict}`` (:mod:`.outcome`) for the judge file of ``assignment_dir`` (the trusted
    ``solutions/<assignment>/``), run against a live kernel.

    ``grade_ids`` (default: the file's ``test_*`` functions) are the test cells to judge; one
    the file has no function is not graded, with a message. ``runner``: the program runner of
    this grading (default: :func:`autograder.judge.runner.current`). ``key``: the submission's
    key (:mod:`.seeding`), which fixes every test's hidden inputs (default: drawn afresh).
    ``alone``: the notebook is graded alone after a starved grading (see :func:`verdict`).

    Tests are judged ``threads`` at a time (default :data:`JUDGE_THREADS`; 1 where a judge file
    of the assignment sets ``SERIAL_TESTS = True``, as one that times the kernel's work must):
    while one test's program runs in the program runner (another process) or its reference is
    computed here, another test's requests keep the kernel busy. Each test has its own time
    limit and its own random draws (:meth:`Kernel.for_test`), whatever order they run in; the kernel answers one request
    at a time, whichever test sent it, so a request sees the kernel as a lone test would.
    """
    from .. import feedback
    from .kernel import Kernel

    try:
        tests = judge_tests(assignment_dir)
        serial = any(getattr(load_judge(p), "SERIAL_TESTS", False) for p in judge_paths(assignment_dir))
    except Exception as exc:  # noqa: BLE001
        msg = not_graded(f"Not graded: the grader's judge file cannot be loaded ({type(exc).__name__}: {exc}).")
        return {g: msg for g in (grade_ids or [])}
    k = kernel or Kernel(kernel_client, runner=runner, key=key, **channel_kw)
    ids = list(grade_ids if grade_ids is not None else tests)
    width = 1 if serial or not hasattr(k, "for_test") else max(1, min(threads or JUDGE_THREADS, len(ids)))

    def judge_one(gid, kk):
        test = tests.get(gid)
        channel = getattr(kk, "channel", None)
        if isinstance(channel, Channel):  # a test cell's time limit, as when tests ran in the kernel
            channel.test_deadline = time.monotonic() + channel.timeout
            if runner is not None:  # its programs' runs share it
                runner.deadline = min(d for d in (channel.test_deadline, channel.deadline) if d is not None)
                # time spent waiting for another test's request or run is not this test's
                channel.on_wait = functools.partial(runner_extend, runner)
                runner.on_wait = channel.extend
        return (verdict(test, kk, gid, alone=alone) if test is not None else
                not_graded(f"Not graded: the grader's judge has no check for {gid}; please tell the course staff."))

    # learner errors are explained for this assignment's chapter, wherever they surface
    views = [k.for_test(gid) if hasattr(k, "for_test") else k for gid in ids]  # each test's own draws
    with feedback.chapter(Path(assignment_dir).name):
        if width == 1:
            return {gid: judge_one(gid, view) for gid, view in zip(ids, views)}
        import contextvars
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(width, thread_name_prefix="judge") as pool:
            futures = [pool.submit(contextvars.copy_context().run, judge_one, gid, view)
                       for gid, view in zip(ids, views)]
            return {gid: f.result() for gid, f in zip(ids, futures)}


# --------------------------------------------------------------------------- the grading step

def _iopub_ready(kc, end: float) -> None:
    """Wait until a new client's IOPub subscription receives messages (a kernel_info request's
    busy/idle arrives): quicker than ``wait_for_ready``, which polls at fixed intervals."""
    while time.monotonic() < end:
        if answered(kc.get_iopub_msg, kc.kernel_info(), min(end, time.monotonic() + 0.25)):
            return
    raise ChannelError("The grader could not connect to the kernel.")


class JudgeStep:
    """Grading with a judge: the notebook's test cells and its "Check my answers" cell are not
    run (:meth:`prepare` makes them raw cells while the kernel runs the others, :meth:`restore`
    puts them back); after the other cells, as the grading pipeline's ``judge`` step (the kernel
    held open, :mod:`autograder.grader.execution`), :func:`run_judge` decides each test on it;
    :meth:`write_verdicts` writes them into the test cells (an error output when failing,
    nothing when passing) for nbgrader's ``SaveAutoGrades`` and the gradebook."""

    def __init__(self, assignment_dir: Path, cell_timeout: float = REQUEST_TIMEOUT, settings=None,
                 learner: str | None = None, alone: bool = False):
        self.assignment_dir = Path(assignment_dir)
        self.alone = alone  # graded alone after a starved grading: starved again is a zero
        self.learner = learner  # whose submission (its hidden inputs' seed, :mod:`.seeding`); None: fresh draws
        self.cell_timeout = cell_timeout
        self.settings = settings  # the command's (Settings), for the program runner's sandbox
        self.verdicts: dict | None = None  # {grade_id: Verdict}; None: the judge did not run
        self.ungraded: dict = {}  # {grade_id: why} of the tests not graded (see write_verdicts)
        self.grade_ids: list = []
        self._hidden: list = []
        self.runner: ProgramRunner | None = None  # this notebook's program runner (see prepare)

    @classmethod
    def for_source(cls, source_notebook: Path, cell_timeout: float = REQUEST_TIMEOUT, settings=None,
                   learner: str | None = None, alone: bool = False):
        """The step for an assignment that has a judge file, else ``None`` (it cannot be graded)."""
        folder = Path(source_notebook).parent
        return cls(folder, cell_timeout, settings, learner, alone) if judge_path(folder).is_file() else None

    def key(self) -> bytes | None:
        """The submission's key (:func:`.seeding.submission_key`) under the course's grading
        secret, or None where no learner is named. Raises OSError/ValueError where the secret
        can be neither read nor made."""
        from .seeding import course_secret, secret_path, submission_key

        if self.learner is None:
            return None
        path = secret_path(self.assignment_dir.parent.parent, getattr(self.settings, "course_state", "") or "")
        return submission_key(course_secret(path), self.assignment_dir.name, self.learner)

    @staticmethod
    def skips(cell) -> bool:
        """Cells the kernel does not run when a judge decides."""
        return is_test_cell(cell) or CHECK_TAG in (cell.get("metadata", {}).get("tags") or [])

    def prepare(self, nb) -> None:
        """Hide the cells the kernel does not run, and start this notebook's own program runner
        (contained, warm while the kernel runs the notebook; its start never fails the
        notebook: a runner that cannot start fails the tests that run a program, saying so)."""
        self.grade_ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_test_cell(c)]
        self._hidden = [c for c in nb.cells if self.skips(c)]
        for cell in self._hidden:
            cell.cell_type = "raw"
        if self.runner is None:
            self.runner = ProgramRunner(settings=self.settings)  # its own: no other submission's programs
            self.runner.timeout = min(float(self.cell_timeout), RUN_TIMEOUT)
            try:
                self.runner.start()
            except Exception:  # noqa: BLE001 - said by the first run that needs it
                pass

    def close(self) -> None:
        """This notebook is done with its program runner (idempotent): it is stopped."""
        if self.runner is not None:
            use(None)
            self.runner.deadline = None
            self.runner.close()
            self.runner = None

    def restore(self, nb) -> None:
        for cell in self._hidden:
            cell.cell_type = "code"
            cell.outputs = []
            cell.execution_count = None
        self._hidden = []

    async def __call__(self, live) -> None:
        """Judge the live kernel (:class:`autograder.grader.execution.LiveKernel`), in a thread of its
        own with a blocking client, so the manager's coroutines (alive, interrupt) still run."""
        import asyncio
        import contextvars

        loop = asyncio.get_running_loop()
        manager = live.manager

        def on_loop(coro_fn):
            def run():
                return asyncio.run_coroutine_threadsafe(coro_fn(), loop).result(10)
            return run

        try:
            key = self.key()
        except (OSError, ValueError) as exc:  # the course's fault: no test can be drawn for
            msg = not_graded(f"Not graded: the course's grading secret cannot be read or made ({exc}).")
            self.verdicts = {g: msg for g in self.grade_ids}
            return

        def judge():
            kc = live.blocking_client()
            try:
                _iopub_ready(kc, time.monotonic() + 30)
                ensure_judge_devices()  # before JAX starts (a no-op where it has)
                use(self.runner)  # judges' own Exported objects run in it too
                return run_judge(self.assignment_dir, kc, grade_ids=self.grade_ids, runner=self.runner, key=key, alone=self.alone,
                                 timeout=self.cell_timeout, deadline=live.deadline,
                                 alive=on_loop(manager.is_alive), interrupt=on_loop(manager.interrupt_kernel),
                                 pid=lambda: getattr(getattr(manager, "provisioner", None), "pid", None))
            finally:
                kc.stop_channels()

        try:
            # a fresh context: jupyter_core keeps the running loop in a context variable, which
            # the blocking client's thread must not inherit
            self.verdicts = await loop.run_in_executor(None, contextvars.Context().run, judge)
        except Exception as exc:  # noqa: BLE001 - the grader's fault: zero, said plainly
            msg = not_graded(f"Not graded: the grader could not reach the kernel ({type(exc).__name__}: {exc}).")
            self.verdicts = {g: msg for g in self.grade_ids}

    def write_verdicts(self, nb, not_judged: str, graded: bool = True) -> dict:
        """Write each test cell's verdict as its outputs; ``{grade_id: feedback}`` ('' exactly
        for a passed test). Tests the judge did not decide fail with ``not_judged``: a zero where
        the submission's run ended them (the kernel died, the time ran out), not graded where
        ``graded`` is false (the grader's own failure). :attr:`ungraded` is then ``{grade_id: why}``
        of the tests that could not be graded (the grader's fault or the machine's: an error,
        not a zero)."""
        from nbformat.v4 import new_output

        self.close()  # the judge is done: no more programs to run
        why = not_judged or "Not run to completion."
        undecided = failed(why) if graded else not_graded(why)
        feedback, self.ungraded = {}, {}
        for cell in nb.cells:
            if not is_test_cell(cell):
                continue
            gid = cell.metadata["nbgrader"]["grade_id"]
            v = (self.verdicts or {}).get(gid)
            v = v if isinstance(v, Verdict) else undecided
            feedback[gid] = v.feedback
            if not v.graded:
                self.ungraded[gid] = v.feedback
            cell.outputs = [] if v.passed else [new_output("error", ename="Failed", evalue=v.feedback, traceback=[])]
            cell.execution_count = None
        return feedback
