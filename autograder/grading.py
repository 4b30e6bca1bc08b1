"""Grade learner notebooks the way an instructor's ``nbgrader autograde`` would, with stricter rules.

The orchestration of a pipeline of small named steps, each a module of its own (nothing is
written into the checkout: each submission is graded in a temporary folder):

1. :mod:`autograder.course`: the assignment (the notebook's folder name) and its source
   notebook (``solutions/<assignment>/``);
2. :mod:`autograder.gradebook`: a scratch gradebook holding the source's cells (nbgrader's
   ``ClearSolutions`` -> ``ComputeChecksums`` -> ``SaveCells``, cached per source version);
3. :mod:`autograder.submission`: the submission read and sanitized as ``autograde`` does
   (edited, emptied, deleted, duplicated or retyped test cells restored from the source);
4. :mod:`autograder.sandbox`: the kernel's containment (as root: namespaces and a uid of its
   own, or a refusal; ``--no-sandbox``/``AUTOGRADER_SANDBOX=off`` to run uncontained);
5. :mod:`autograder.execution`: a fresh kernel runs the notebook under a per-cell and a
   per-notebook time limit, through nbclient's own loop and hooks; after the cells, the
   ``after_cells`` callbacks get the live kernel;
6. scoring: each test cell is scored from the kernel's *execute reply* for that cell, then
   nbgrader's ``SaveAutoGrades`` (:func:`autograder.gradebook.save_autogrades`);
7. :mod:`autograder.result`: the result (the JSON contract) and its human-readable forms.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

# Public names, importable from here as before the split.
from .course import GradingError, find_course_root, package_root, source_notebook, test_cells  # noqa: F401
from .execution import make_executor
from .gradebook import (STUDENT, build_gradebook, ensure_tools_on_path,  # noqa: F401
                        fast_alembic_version, import_nbgrader, nbgrader_resources, save_autogrades, scratch_gradebook)
from .judge import JudgeStep
from .result import Result, failed_result, format_human, format_progress, zero_result  # noqa: F401
from .sandbox import (DEFAULT_CPU_LIMIT, NAMESPACE, NONE, PROCESS_GROUP, Sandbox,  # noqa: F401
                      check_sandbox, chown_tree, open_sandbox, probe_refusal, run_dir_base)
from .submission import read_submission, sanitize

DEFAULT_CELL_TIMEOUT = 120
DEFAULT_NOTEBOOK_TIMEOUT = 600


def grade_notebook(path, *, root: Path | None = None, cell_timeout: int = DEFAULT_CELL_TIMEOUT,
                   notebook_timeout: int = DEFAULT_NOTEBOOK_TIMEOUT, cpu_limit: int = DEFAULT_CPU_LIMIT,
                   save_graded: Path | None = None, hide=()) -> Result:
    """Grade one submitted notebook. Never raises for a bad submission: the result says why.

    ``hide``: more folders its kernel must not see (a batch's other submissions)."""
    import_nbgrader()
    given = str(path)
    path = Path(path)
    assignment = path.resolve().parent.name
    try:
        root = root or find_course_root(path.parent)
        source = source_notebook(assignment, root)
    except GradingError as exc:
        if not path.exists():  # a mistyped path says so, whatever folder it names
            return Result(given, assignment, error=f"no such file: {given}")
        return Result(given, assignment, error=str(exc))
    try:
        nb = read_submission(path)
    except GradingError as exc:
        return zero_result(given, assignment, source, str(exc))
    try:
        base = run_dir_base()
    except GradingError as exc:
        return zero_result(given, assignment, source, str(exc))
    with tempfile.TemporaryDirectory(prefix="run-", dir=base) as tmp:
        return _grade_in(Path(tmp), nb, given, assignment, source, cell_timeout, notebook_timeout,
                         cpu_limit, save_graded, root, path, hide)


def _grade_in(tmp: Path, nb, given, assignment, source, cell_timeout, notebook_timeout,
              cpu_limit=DEFAULT_CPU_LIMIT, save_graded=None, root=None, path=None, hide=()) -> Result:
    import shutil

    import nbformat

    from .course import data_files, read_source

    ensure_tools_on_path()
    warnings.filterwarnings("ignore", module="nbgrader")
    warnings.filterwarnings("ignore", category=Warning, message=".*not in session.*")

    # the gradebook, the sandbox and the submission's folders
    db_url = scratch_gradebook(source, assignment, tmp)
    box_dir = tmp / "box"  # all the submission's kernel may write (besides private temp folders)
    deadline = time.monotonic() + notebook_timeout
    box = open_sandbox(deadline, root, path, hide)
    if box.refused:
        return zero_result(given, assignment, source, box.reason)
    old_pp = os.environ.get("PYTHONPATH")
    try:
        try:
            box_limit = box.mount_box(box_dir)
        except GradingError as exc:
            return zero_result(given, assignment, source, str(exc))
        workdir = box_dir / "work" / assignment
        workdir.mkdir(parents=True)
        for item in data_files(source):
            (shutil.copytree if item.is_dir() else shutil.copy)(item, workdir / item.name)
        res = nbgrader_resources(assignment, source.stem, db_url, workdir)

        # the submission, sanitized
        try:
            nb = sanitize(nb, res, read_source(source))
        except GradingError as exc:
            return zero_result(given, assignment, source, str(exc))
        judge = JudgeStep.for_source(source, cell_timeout)  # solutions/<a>/judge.py decides
        if judge is None:
            return zero_result(given, assignment, source,
                               f"the course has no judge for {assignment} (solutions/{assignment}/judge.py), "
                               "so it cannot be graded: ask your instructor")
        judge.prepare(nb)  # test cells and "Check my answers" are not run in the kernel

        # the execution
        home = box_dir / "home"
        (home / "tmp").mkdir(parents=True)
        after_cells = [judge]  # f(live: execution.LiveKernel), called with the kernel alive
        os.environ["PYTHONPATH"] = str(package_root()) + (os.pathsep + old_pp if old_pp else "")
        if box.contained:
            # Only the box is the sandbox uid's, and only the box is in the kernel's view: the
            # gradebook beside it, the course and other submissions are hidden (sandbox.py).
            chown_tree(box_dir, box.uid)
            os.chmod(box_dir, 0o700)
            os.chmod(home, 0o700)
            box.keep_rw = [str(box_dir)]
            problem = check_sandbox(box, home, workdir, [str(source.parent), str(tmp / "gradebook.db")])
            if problem:
                return zero_result(given, assignment, source, probe_refusal(problem))
        executor = make_executor(cell_timeout, deadline, cpu_limit, home, box, box_dir,
                                 after_cells=after_cells)
        nb, res = executor.preprocess(nb, res)
    finally:
        box.close()
        if old_pp is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_pp

    # Scores come from the judge's verdicts alone: outputs are replaced, and nothing the kernel
    # printed or replied counts.
    judge.restore(nb)
    feedback = judge.write_verdicts(nb, _not_judged(executor))

    result = Result(given, assignment, containment=box.mode,
                    containment_reason="; ".join(r for r in (box.reason, box_limit) if r))
    result.tests = save_autogrades(nb, res, source, feedback)
    result.score = sum(t["points"] for t in result.tests)
    result.max_score = sum(t["max_points"] for t in result.tests)
    if save_graded is not None:  # the executed notebook, for the formgrader (instructors only)
        save_graded = Path(save_graded)
        save_graded.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(sanitized_for_viewing(nb), str(save_graded))
    return result


def sanitized_for_viewing(nb):
    """``nb`` as an instructor may open it anywhere (the formgrader, nbviewer, an editor): the
    learner's HTML outputs and Markdown cleaned by nbconvert's ``SanitizeHTML`` (scripts, event
    handlers, unsafe tags and JavaScript outputs removed), as nbgrader_config.py also asks of
    every HTML page nbgrader renders. A learner's script in the instructor's browser session
    could change grades."""
    from nbconvert.preprocessors.sanitize import SanitizeHTML

    nb, _ = SanitizeHTML().preprocess(nb, {})
    return nb


def _not_judged(executor) -> str:
    """Why the judge decided nothing (the kernel died or the time ran out before it ran)."""
    if executor.died_at is not None:
        return ("Not run to completion: the kernel died or was stopped (an exit, a crash, too much "
                "memory, or the time limit) before this test.")
    if executor.after_cells_error is not None:
        return f"Not graded: internal grading error ({type(executor.after_cells_error).__name__})."
    return "Not run: the notebook's time limit was used up before this test."


# --------------------------------------------------------------------------- command line

class _StdoutGuard:
    """Keep file descriptor 1 for our JSON only: everything else written there goes to stderr."""

    def __enter__(self):
        sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(2, 1)
        return os.fdopen(os.dup(self.saved), "w", encoding="utf-8")

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)
        return False


def grade_command(args) -> int:
    root = Path(args.root).resolve() if args.root else None
    if getattr(args, "no_sandbox", False):
        os.environ["AUTOGRADER_SANDBOX"] = "off"  # read by every worker
    results = []
    ok = True
    with _StdoutGuard() as out:
        from .batch import grade_many

        results = grade_many(args.notebooks, workers=args.jobs, progress=args.progress, root=root,
                             cell_timeout=args.cell_timeout, notebook_timeout=args.notebook_timeout)
        for nb, result in zip(args.notebooks, results):
            if result.error:
                ok = False
                print(f"autograder: cannot grade {nb}: {result.error}", file=sys.stderr)
        if len(results) > 1 or args.progress:
            from .batch import containment_summary

            line = containment_summary(results)
            if line:
                print(f"autograder: {line}", file=sys.stderr)
        if args.json:
            payload = results[0].as_dict() if len(results) == 1 else [r.as_dict() for r in results]
            out.write(json.dumps(payload, indent=2) + "\n")
        else:
            blocks = [format_human(r) for r in results]
            if len(results) > 1:
                blocks.append(format_progress(results))
            out.write("\n\n".join(blocks) + "\n")
        out.flush()
        out.close()
    return 0 if ok else 1
