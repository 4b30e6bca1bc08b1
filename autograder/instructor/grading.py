"""``autograde``: every collected submission graded (:mod:`autograder.grader.batch`) into the
gradebook and ``autograded/``; a rerun reuses a result whose submission, assignment, grader and
limits are unchanged."""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

from ..common.course import source_notebook
from ..common.errors import GradingError
from ..grader.gradebook import alembic_version_once, build_gradebook
from ..grader.result import zero_result
from .collecting import submissions
from .course import Course
from .files import write_atomic
from .gradebook import check_gradebook, course_gradebook, gradebook_lock

def _record(course: Course, student: str, assignment: str, result: dict, ungraded=None) -> None:
    """One submission's grades into the gradebook, all or nothing (a rerun rewrites the same rows).
    ``ungraded``: the grade_ids the grader left not graded (its own fault or the machine's, never
    the learner's), or ``"all"``: their automatic score is cleared and they are marked for manual
    grading, so that neither the formgrader nor the export shows an earlier grade for them (a
    manual score the instructor gave stays)."""
    from ..common.course import test_cells

    source = source_notebook(assignment, course.root)
    timestamp = submitted_timestamp(course, student, assignment)
    scores = {t["grade_id"]: float(t["points"]) for t in result.get("tests") or []}
    ungraded = {gid for gid, _ in test_cells(source)} if ungraded == "all" else set(ungraded or ())
    with course_gradebook(course.db_url) as gb:
        known = gb.update_or_create_student(student)
        if known.first_name is None and known.last_name is None:  # else the formgrader says "None, None"
            known.last_name, known.first_name = _person(student), ""
        # nbgrader's formgrader counts a submission as autograded only when the gradebook's
        # timestamp is the one in submitted/<student>/<assignment>/timestamp.txt
        submission = gb.update_or_create_submission(assignment, student, timestamp=timestamp)
        _complete_submission(gb, submission)
        for gid in sorted(set(scores) | ungraded):
            grade = gb.find_grade(gid, source.stem, assignment, student)
            if gid in ungraded:
                grade.auto_score = None
                grade.needs_manual_grade = True
            else:
                grade.auto_score = scores[gid]
                grade.needs_manual_grade = False


def ungraded_tests(result: dict):
    """The grade_ids a result with an ``error`` left not graded: those its error names (``not
    graded: <grade_id>: <why>; ...``, the judge's tests it could not grade, each with the
    test's own feedback), else ``"all"`` (the grading failed as a whole)."""
    error = str(result.get("error") or "")
    named = {t["grade_id"] for t in result.get("tests") or []
             if isinstance(t, dict) and f"{t.get('grade_id')}: {t.get('feedback')}" in error}
    return named if error.startswith("not graded: ") and named else "all"


def _person(student: str) -> str:
    """A name for ``student``: the full name of the local user of that name (a hub's learner),
    else the id itself."""
    import pwd

    try:
        name = pwd.getpwnam(student).pw_gecos.split(",")[0].strip()
    except (KeyError, OSError):
        name = ""
    return name or student


def _complete_submission(gb, submission) -> int:
    """Add the rows nbgrader's ``add_submission`` would have made and ``submission`` lacks: a
    submission created before the assignment's notebook or cells were recorded (nbgrader's
    collect or its formgrader list it early, an nbgrader run stopped half-way) has no grade for
    them, and writing a grade would fail. Rows that exist (with manual grades, comments) are
    kept. Returns the number of rows added."""
    from nbgrader.api import Comment, Grade, SubmittedNotebook

    added = 0
    have = {nb.notebook.name: nb for nb in submission.notebooks}
    for notebook in submission.assignment.notebooks:
        sub_nb = have.get(notebook.name)
        if sub_nb is None:
            sub_nb = SubmittedNotebook(notebook=notebook, assignment=submission)
            gb.db.add(sub_nb)
            added += 1
        grades = {g.cell_id for g in sub_nb.grades}
        comments = {c.cell_id for c in sub_nb.comments}
        for cell in list(notebook.grade_cells) + list(notebook.task_cells):
            if cell.id not in grades:
                gb.db.add(Grade(cell_id=cell.id, notebook=sub_nb))
                added += 1
        for cell in list(notebook.solution_cells) + list(notebook.task_cells):
            if cell.id not in comments:
                gb.db.add(Comment(cell_id=cell.id, notebook=sub_nb))
                added += 1
    if added:
        gb.db.flush()
    return added


def submitted_timestamp(course: Course, student: str, assignment: str):
    """The submission's time from nbgrader's ``timestamp.txt`` (as nbgrader parses it), or None."""
    from nbgrader.utils import parse_utc

    path = course.submitted / student / assignment / "timestamp.txt"
    try:
        return parse_utc(path.read_text().strip())
    except (OSError, ValueError, OverflowError):
        return None


def _fingerprint(course: Course, notebook: Path, assignment: str, limits: dict) -> str:
    """What a grade depends on: the submission, the assignment's trusted files (source notebook,
    judge, data), the grader's code, its limits and the versions it grades with."""
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256(b"autograde-v1\0")
    h.update(Path(notebook).read_bytes())
    folder = course.root / "solutions" / assignment
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        h.update(f"\0{f.relative_to(folder)}\0".encode() + f.read_bytes())
    package = Path(__file__).parent  # the grader's code, its subpackages (grader/, judge/...) too
    for f in sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts):
        h.update(f"\0{f.relative_to(package)}\0".encode() + f.read_bytes())
    h.update(json.dumps(limits, sort_keys=True, default=str).encode() + sys.version.encode())
    for dist in ("jax", "jaxlib", "numpy", "nbgrader", "nbclient", "ipykernel"):
        try:
            h.update(f"\0{dist}={version(dist)}".encode())
        except PackageNotFoundError:
            pass
    return h.hexdigest()


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _reusable(course: Course, student: str, assignment: str, fingerprint: str) -> dict | None:
    """The earlier result of this very submission, graded by this very grader, if any (an error is
    always graded again: it may have been the machine's), and only while the graded notebook
    beside it is still the one this grader saved (nbgrader's own autograde replaces it)."""
    out = course.autograded / student / assignment
    try:
        d = json.loads((out / "result.json").read_text())
    except (OSError, ValueError):
        return None
    if (d.get("fingerprint") == fingerprint and not d.get("error") and d.get("tests")
            and d.get("graded_notebook") == _digest(out / f"{assignment}.ipynb")):
        return d
    return None


def _unusable(notebook: Path, limit: int) -> str | None:
    """Why the submitted file is not a notebook the grader can read (a grade of zero: the
    submission's own fault), or None. ``limit``: the bytes the grader reads."""
    from ..grader.submission import read_json, read_submission

    try:
        read_submission(notebook, read_json(notebook, limit))
    except GradingError as exc:
        return str(exc)
    return None


def _prepare_output(folder: Path) -> str | None:
    """Make ``folder`` (autograded/<student>/<assignment>) a place this run can write: created
    when missing, made writable when it is ours (nbgrader's autograde leaves its files read-only;
    the graded notebook itself is replaced, never written in place). The reason it cannot be,
    or None."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            if folder.stat().st_uid == os.geteuid():
                os.chmod(folder, folder.stat().st_mode | 0o700)
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"{folder} cannot be written by this user (uid {os.geteuid()})"
        for leftover in folder.glob(".grading-*"):
            leftover.unlink()
    except OSError as exc:
        return f"{folder} cannot be prepared: {exc.strerror or exc}"
    return None


def show_failures(notebook: Path) -> int:
    """Give every error output of the graded ``notebook`` that has an empty traceback (a failed
    test's: its feedback is in ``evalue``) a traceback of ``ename: evalue``: the formgrader (and
    nbconvert's HTML) shows an error by its traceback, and showed an empty grey box. Returns the
    number of outputs changed; the file is rewritten only when there are some."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    changed = 0
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) if isinstance(cell, dict) else []:
            if isinstance(out, dict) and out.get("output_type") == "error" and not out.get("traceback"):
                out["traceback"] = [f"{out.get('ename') or 'Error'}: {out.get('evalue') or ''}"]
                changed += 1
    if changed:
        write_atomic(Path(notebook), (json.dumps(nb, indent=1, ensure_ascii=False) + "\n").encode("utf-8"))
    return changed


class NotGraded(dict):
    """A submission this run could not grade: ``{student, assignment, reason}``."""


def autograde(course: Course, assignments=None, workers=None, progress=True, regrade=False,
              students=None, **limits):
    """Grade every submission (of ``assignments``, of ``students``) and record it in the
    gradebook. Returns ``(rows, not_graded, unreadable)``: the results recorded, the submissions
    that could not be graded and those recorded as zero (each a :class:`NotGraded`).

    A submission is recorded when the grader graded it, or when its file is not a notebook it can
    read (zero: the submission's own fault). When grading itself failed, in whole or for some
    tests (an internal error, the sandbox refused, the grader's process died or hung, a starved
    machine, the graded notebook could not be saved), the tests it left are recorded *not
    graded* (:func:`_record`'s ``ungraded``: no earlier grade stands for them, in the gradebook,
    the formgrader or the export), its result says why, and it is named in the summary.

    Safe to run while other ``autograde``/``export`` runs use the same gradebook (see the module's
    docstring). A submission whose result is current is not graded again unless ``regrade``."""
    from ..grader.batch import grade_many, summary
    from ..grader.result import Result

    check_gradebook(course.db_url)
    found = [f for f in submissions(course, assignments) if students is None or f[0] in students]
    for a in sorted({a for _, a, _ in found}):
        with gradebook_lock(course.db_url):
            alembic_version_once()
            build_gradebook(source_notebook(a, course.root), a, course.db_url)
    fingerprints = {(s, a): _fingerprint(course, p, a, limits) for s, a, p in found if p is not None}
    reused = {} if regrade else {k: d for k, fp in fingerprints.items()
                                 if (d := _reusable(course, *k, fp)) is not None}
    not_graded: list[NotGraded] = []
    unreadable: list[NotGraded] = []  # recorded as zero: no notebook the grader can read
    to_grade = []
    for s, a, p in found:
        if p is None or (s, a) in reused:
            continue
        problem = _prepare_output(course.autograded / s / a)
        if problem:
            not_graded.append(NotGraded(student=s, assignment=a, reason=problem))
        else:
            to_grade.append((s, a, p))
    skipped = {(n["student"], n["assignment"]) for n in not_graded}
    ungraded: dict = {}  # {(student, assignment): the grade_ids left not graded, or "all"}
    recorded = set()

    def saved(s, a):  # the graded notebook is written beside its place, then moved there
        return course.autograded / s / a / f".grading-{a}.ipynb"

    def per_job(path):
        return {"save_graded": saved(Path(path).parent.parent.name, Path(path).parent.name)}

    results = grade_many([p for _, _, p in to_grade], course.settings, workers=workers, progress=progress,
                         root=course.root, per_job=per_job, **limits) if to_grade else []
    by_path = {str(p): r for (_, _, p), r in zip(to_grade, results)}
    rows = []
    for s, a, p in found:
        if (s, a) in skipped:
            continue
        src = source_notebook(a, course.root)
        out = course.autograded / s / a
        if (s, a) in reused:
            d = reused[(s, a)]
        else:
            if p is None:
                r = zero_result(str(course.submitted / s / a), a, src, "no notebook submitted")
                unreadable.append(NotGraded(student=s, assignment=a, reason="no notebook submitted"))
            else:
                r = by_path[str(p)]
                if r.error:
                    why = _unusable(p, course.settings.max_notebook_bytes)
                    if why is None:  # the grader's failure, not the submission's: not graded
                        ungraded[(s, a)] = ungraded_tests(r.as_dict())
                        not_graded.append(NotGraded(student=s, assignment=a, reason=r.error))
                    else:
                        r = zero_result(r.notebook, a, src, why)  # the submission's own fault
                        unreadable.append(NotGraded(student=s, assignment=a, reason=why))
            d = r.as_dict()
            d["student"] = s
            if (s, a) in ungraded:
                d["not_graded"] = sorted(ungraded[(s, a)]) if ungraded[(s, a)] != "all" else "all"
            if p is not None:
                d["fingerprint"] = fingerprints[(s, a)]
            try:
                if saved(s, a).exists():
                    show_failures(saved(s, a))
                    os.replace(saved(s, a), out / f"{a}.ipynb")  # over a read-only one too
                d["graded_notebook"] = _digest(out / f"{a}.ipynb") if not r.error else None
                write_atomic(out / "result.json", json.dumps(d, indent=2).encode())
            except OSError as exc:
                saved(s, a).unlink(missing_ok=True)
                if (s, a) not in ungraded:
                    not_graded.append(NotGraded(student=s, assignment=a,
                                                reason=f"its result cannot be saved in {out}: {exc}"))
                ungraded[(s, a)] = "all"
                continue
        _record(course, s, a, d, ungraded.get((s, a)))
        recorded.add((s, a))
        if (s, a) not in ungraded:
            rows.append(d)
    for n in not_graded:  # in the gradebook all the same: marked not graded, never an earlier grade
        key = (n["student"], n["assignment"])
        if key not in recorded:
            _record(course, *key, {}, "all")
            recorded.add(key)
    if reused:
        print(f"autograde: {len(reused)} submission(s) unchanged since they were graded: their "
              f"results reused (--regrade grades them again)", file=sys.stderr)
    print(summary([Result.from_dict(r) for r in rows]), file=sys.stderr)
    if not_graded:
        print(f"autograde: {len(not_graded)} submission(s) NOT graded, by the grader's or the machine's "
              "fault, not the learner's: their tests left are marked 'not graded' in the gradebook "
              "(needing a manual grade in the formgrader) and in the export, never an earlier grade. "
              "Fix the cause and run autograde again:", file=sys.stderr)
        for n in not_graded:
            print(f"  {n['student']}/{n['assignment']}: {n['reason']}", file=sys.stderr)
    if unreadable:
        print(f"autograde: {len(unreadable)} submission(s) hold no notebook the grader can read; each "
              "is recorded as zero (ask the learner to submit again):", file=sys.stderr)
        for n in unreadable:
            print(f"  {n['student']}/{n['assignment']}: {n['reason']}", file=sys.stderr)
    return rows, not_graded, unreadable
