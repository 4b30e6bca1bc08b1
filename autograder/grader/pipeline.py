"""Grade one learner notebook the way an instructor's ``nbgrader autograde`` would, with stricter rules.

:func:`grade_notebook` is the whole grading, read top to bottom in :func:`_grade`: plain steps
on one :class:`Grading` (everything known about this submission so far), called one after
another, as nbgrader's Autograde converter lists its preprocessors. A step ends the grading
early by raising :class:`~autograder.common.errors.GradingError`: every test at zero, with its
reason (a notebook that cannot be read, a refused sandbox...).

The steps, in order (docs/architecture.md walks through them):

1. ``find_assignment``: the assignment (the notebook's folder name) and its source notebook;
2. ``read_json``: the file's size and JSON (:mod:`.submission`); then, in a temporary folder:
3. ``open_box``: the kernel's containment (:mod:`autograder.sandbox`), its box and data files;
4. ``start_kernel``: the kernel's process starts, and boots while the next steps run (:mod:`.execution`);
5. ``check_box``: the sandbox's probe (once per grading process): a refusal ends here, before any cell;
6. ``read_notebook``: the JSON read as a notebook by nbformat (old formats upgraded);
7. ``make_gradebook``: a scratch gradebook holding the source's cells (:mod:`.gradebook`);
8. ``sanitize_submission``: test cells restored from the source, as ``autograde`` does;
9. ``prepare_judge``: the trusted judge (:mod:`autograder.judge`) and its program runner; test
   cells are not run;
10. with the kernel held open (``open_kernel``: nbclient's ``setup_kernel``): ``execute``, the
    notebook's own cells under time limits, then ``judge``, each test decided on the live
    kernel; the sandbox's processes are killed when the block ends;
11. ``score``: points from the judge's verdicts alone, through nbgrader's ``SaveAutoGrades``;
12. ``save_graded_copy``: the executed notebook, sanitized, for the formgrader.

The result (the JSON contract) and its human forms are :mod:`.result`'s.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from jupyter_core.utils import run_sync

from .gradebook import nbgrader_resources, save_autogrades, scratch_gradebook
from ..common.course import GradingError, data_files, find_course_root, read_source, source_notebook
from ..common.settings import Settings
from .execution import early_kernel, kill_kernel, make_client
from .result import Result, assignment_of, zero_result
from ..sandbox.containment import Sandbox, chown_tree, open_sandbox
from ..sandbox.kernel_manager import run_dir_base
from ..sandbox.probe import check_sandbox, probe_refusal
from .submission import read_json as read_json_of, read_submission, sanitize
from . import startup

DEFAULT_CELL_TIMEOUT = 120
DEFAULT_NOTEBOOK_TIMEOUT = 600


@dataclass(frozen=True)
class Options:
    """How to grade a notebook: the command's settings, the command line's and the batch's choices."""

    settings: Settings
    root: Path | None = None
    cell_timeout: int = DEFAULT_CELL_TIMEOUT
    notebook_timeout: int = DEFAULT_NOTEBOOK_TIMEOUT
    save_graded: Path | None = None
    hide: tuple = ()   # more folders its kernel must not see (a batch's other submissions)
    alone: bool = False  # graded again alone after a starved grading: starved again is a zero (batch)


@dataclass
class Grading:
    """One submission on its way through the steps of :func:`_grade`: each reads what earlier ones left."""

    given: str                      # the path as given (the result's ``notebook``)
    path: Path
    options: Options
    assignment: str = ""
    root: Path | None = None
    source: Path | None = None      # solutions/<assignment>/<assignment>.ipynb
    nb: object = None               # the submission's JSON, then the notebook, then the executed one
    tmp: Path | None = None         # this grading's temporary folder
    res: dict = field(default_factory=dict)  # nbgrader's resources
    deadline: float = 0.0
    box: Sandbox | None = None
    box_dir: Path | None = None     # all its kernel may write (besides private temporary folders)
    box_limit: str = ""
    workdir: Path | None = None
    judge: object = None            # autograder.judge.JudgeStep
    kernel: object = None           # the kernel manager of the kernel started early (start_kernel)
    client: object = None           # the nbclient client that holds it open (execution.make_client)
    judge_error: Exception | None = None  # the grader's own failure while judging
    result: Result | None = None

    @property
    def home(self) -> Path:
        return self.box_dir / "home"


# --------------------------------------------------------------------------- the steps

def find_assignment(g: Grading) -> None:
    # the folder the notebook was given in, links not followed (a notebook linked from elsewhere
    # into exercises/03_purity/ is 03_purity's): nbgrader's layout, as the path names it
    g.assignment = assignment_of(g.path)
    try:
        g.root = g.options.root or find_course_root(g.path.parent, g.options.settings.course_root)
        g.source = source_notebook(g.assignment, g.root)
    except GradingError:
        if not g.path.exists():  # a mistyped path says so, whatever folder it names
            raise GradingError(f"no such file: {g.given}") from None
        if g.path.is_dir():  # the assignment's folder, or one above, given for its notebook
            raise GradingError(f"{g.given} is a folder, not a notebook file") from None
        raise


def read_json(g: Grading) -> None:
    g.nb = read_json_of(g.path, g.options.settings.max_notebook_bytes)


def read_notebook(g: Grading) -> None:
    # after start_kernel: nbformat's import and its schema's validator (a fifth of a second, where
    # a one-notebook command has not imported them yet) while the kernel boots
    g.nb = read_submission(g.path, g.nb)


def start_kernel(g: Grading) -> None:
    g.kernel = early_kernel(g.home, g.box, g.box_dir, g.workdir)


def check_box(g: Grading) -> None:
    if not g.box.contained:
        return
    # The verdict (known at once where this process probed before), else a probe that runs while
    # the kernel boots: no cell reaches the kernel before it. Its secrets exist now (the gradebook
    # does not yet): the source folder, the submitted file.
    secrets = [str(g.source.parent), str(g.path.resolve())]
    problem = check_sandbox(g.box, g.home, g.workdir, secrets)
    if problem:
        raise GradingError(probe_refusal(problem))


def make_gradebook(g: Grading) -> None:
    warnings.filterwarnings("ignore", module="nbgrader")
    warnings.filterwarnings("ignore", category=Warning, message=".*not in session.*")
    db_url = scratch_gradebook(g.source, g.assignment, g.tmp)
    g.res = nbgrader_resources(g.assignment, g.source.stem, db_url, g.workdir)


def open_box(g: Grading) -> None:
    import shutil

    g.box_dir = g.tmp / "box"
    g.deadline = time.monotonic() + g.options.notebook_timeout
    g.box = open_sandbox(g.deadline, g.options.settings, g.root, g.path, g.options.hide)
    if g.box.refused:
        raise GradingError(g.box.reason)
    g.box_limit = g.box.mount_box(g.box_dir)
    g.workdir = g.box_dir / "work" / g.assignment
    g.workdir.mkdir(parents=True)
    for item in data_files(g.source):
        (shutil.copytree if item.is_dir() else shutil.copy)(item, g.workdir / item.name)
    (g.home / "tmp").mkdir(parents=True)
    if g.box.contained:
        # Only the box is the sandbox uid's, and only the box (with the interpreter and the package)
        # is in the kernel's view: the gradebook beside it, the course and other submissions are not.
        chown_tree(g.box_dir, g.box.uid)
        os.chmod(g.box_dir, 0o700)
        os.chmod(g.home, 0o700)
        g.box.keep_rw = [str(g.box_dir)]


def sanitize_submission(g: Grading) -> None:
    g.nb = sanitize(g.nb, g.res, read_source(g.source))


def prepare_judge(g: Grading) -> None:
    from ..judge import JudgeStep

    # solutions/<a>/judge.py decides
    from ..judge.seeding import learner_of

    # the learner (the folder above the assignment's) fixes the hidden inputs: a regrade draws the same
    g.judge = JudgeStep.for_source(g.source, g.options.cell_timeout, g.options.settings,
                                   learner=learner_of(g.path), alone=g.options.alone)
    if g.judge is None:
        raise GradingError(f"the course has no judge for {g.assignment} (solutions/{g.assignment}/judge.py), "
                     "so it cannot be graded: ask your instructor")
    g.judge.prepare(g.nb)  # test cells and "Check my answers" are not run in the kernel


def open_kernel(g: Grading):
    """The kernel held open (nbclient's ``setup_kernel``) for :func:`execute` and :func:`judge`:
    the context manager yields the live kernel (None: it could not start)."""
    g.client = make_client(g.options.cell_timeout, g.deadline, g.home, g.box, g.box_dir)
    kernel, g.kernel = g.kernel, None  # the client's now: killed by it
    return g.client.kernel_open(g.nb, g.res, km=kernel)


def execute(g: Grading, live) -> None:
    if live is None:
        return
    # The judge's JAX is imported beside the kernel running the notebook (a thread that ends with
    # this step; nothing to do where it is imported already, as in a forked grading process).
    with ThreadPoolExecutor(1, thread_name_prefix="judge-side-import") as imports:
        if "jax" not in sys.modules:
            imports.submit(startup.judge_side_niced)
        g.client.run_cells()


def judge(g: Grading, live) -> None:
    if live is None or not g.client.finished or time.monotonic() >= g.deadline:
        return  # the kernel died or the time ran out: score says so for every test
    try:
        run_sync(g.judge.__call__)(live)
    except Exception as exc:  # noqa: BLE001 - the grader's fault: every test not graded, said so
        g.judge_error = exc


def score(g: Grading) -> None:
    # Scores come from the judge's verdicts alone: outputs are replaced, and nothing the kernel
    # printed or replied counts.
    g.judge.restore(g.nb)
    # the grader's own failure while judging leaves its undecided tests not graded, never zeros
    feedback = g.judge.write_verdicts(g.nb, _not_judged(g),
                                      graded=g.client.died_at is not None or g.judge_error is None)
    g.result = Result(g.given, g.assignment, containment=g.box.mode,
                      containment_reason="; ".join(r for r in (g.box.reason, g.box_limit) if r))
    g.result.tests = save_autogrades(g.nb, g.res, g.source, feedback)
    g.result.score = sum(t["points"] for t in g.result.tests)
    g.result.max_score = sum(t["max_points"] for t in g.result.tests)
    if g.judge.ungraded:  # the grader's fault or a starved machine's, never the learner's zero
        g.result.error = "not graded: " + "; ".join(f"{gid}: {why}" for gid, why in g.judge.ungraded.items())


def save_graded_copy(g: Grading) -> None:
    """The executed notebook as an instructor may open it anywhere (the formgrader, nbviewer, an
    editor): the learner's HTML outputs and Markdown cleaned by nbconvert's ``SanitizeHTML``
    (scripts, event handlers, unsafe tags and JavaScript outputs removed), as nbgrader_config.py
    also asks of every HTML page nbgrader renders. A learner's script in the instructor's
    browser session could change grades."""
    import nbformat
    from nbconvert.preprocessors.sanitize import SanitizeHTML

    if g.options.save_graded is None:
        return
    save_graded = Path(g.options.save_graded)
    save_graded.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(SanitizeHTML().preprocess(g.nb, {})[0], str(save_graded))


def grade_notebook(path, options: Options) -> Result:
    """Grade one submitted notebook as ``options`` say. Never raises for a bad submission: the
    result says why."""
    return _grade(Grading(str(path), Path(path), options))


def _grade(g: Grading) -> Result:
    try:
        find_assignment(g)
        read_json(g)
        with tempfile.TemporaryDirectory(prefix="run-", dir=run_dir_base()) as tmp, ExitStack() as ends:
            g.tmp = Path(tmp)  # nothing is written into the checkout
            ends.callback(lambda: g.box and g.box.close())  # however the grading ends
            open_box(g)
            ends.callback(lambda: g.kernel and kill_kernel(g.kernel))  # started, never held open
            start_kernel(g)
            check_box(g)
            read_notebook(g)
            make_gradebook(g)
            sanitize_submission(g)
            ends.callback(lambda: g.judge and g.judge.close())  # its runner freed for the next notebook
            prepare_judge(g)
            with open_kernel(g) as live:
                execute(g, live)
                judge(g, live)
            g.box.close()  # every process of its uid killed, its box unmounted
            score(g)
            save_graded_copy(g)
    except GradingError as exc:
        return zero_result(g.given, g.assignment, g.source, str(exc))
    return g.result


def _not_judged(g: Grading) -> str:
    """Why the judge decided nothing (the kernel died or the time ran out before it ran)."""
    if g.client.died_at is not None:
        return ("Not run to completion: the kernel died or was stopped (an exit, a crash, too much "
                "memory, or the time limit) before this test.")
    if g.judge_error is not None:
        return f"Not graded: internal grading error ({type(g.judge_error).__name__})."
    return "Not run: the notebook's time limit was used up before this test."
