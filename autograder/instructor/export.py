"""What leaves the gradebook: the grade CSVs (``export``) and the class report
(:mod:`.report`)."""
from __future__ import annotations

import csv
import io
from pathlib import Path

from ..common.settings import without_password
from .course import Course
from .files import special, write_atomic
from .gradebook import check_gradebook, course_gradebook

NOT_GRADED = "not graded"


def not_graded(grade) -> bool:
    """A gradebook grade the grader left not graded (autograde clears its automatic score and
    marks it for manual grading: :func:`autograder.instructor.grading._record`), and no one has
    graded by hand since."""
    return grade.auto_score is None and grade.manual_score is None


def export(course: Course, out: Path, summary: Path | None = None, problems: list | None = None) -> Path:
    """Write ``student,assignment,exercise,points,max_points,hints_seen,hints_from,status`` rows
    from the gradebook to ``out`` and, to ``summary`` (default: ``<out's name>-summary.csv``
    beside a regular ``out``; none beside ``/dev/stdout``), one row per student: a column per
    assignment (its points; empty where nothing was recorded) and their total.

    A test the grader left not graded (:func:`not_graded`) is a row with empty points and the
    status ``not graded`` (else ``graded``); in the summary its assignment and the student's
    total say ``not graded``: never an earlier grade, never a missing learner.

    Hints seen are what the learner's own files report (:func:`submitted_hints`; the grader
    records none): ``hints_from`` says so (``learner``), and a count is at most the exercise's
    number of hints. A submission whose hints cannot be read gets empty counts, is appended to
    ``problems`` as ``(student, assignment, why)``, and stops nothing."""
    check_gradebook(course.db_url)
    out = Path(out)
    summary = summary if summary is not None else summary_path(out)
    fh = io.StringIO(newline="")
    points: dict[str, dict[str, float]] = {}
    with course_gradebook(course.db_url) as gb:  # a consistent view: no write is half seen
        writer = csv.writer(fh)
        writer.writerow(["student", "assignment", "exercise", "points", "max_points", "hints_seen", "hints_from",
                         "status"])
        names = sorted(a.name for a in gb.assignments)
        students = sorted(s.id for s in gb.students)
        for assignment, student, notebook, sub in _graded_notebooks(gb):
            try:
                hints = submitted_hints(course, student, assignment, notebook)
            except Exception as exc:  # noqa: BLE001 - one learner's files never stop the class's export
                hints = None
                if problems is not None:
                    problems.append((student, assignment, f"its hints cannot be read ({type(exc).__name__}: {exc})"))
            for g in sorted(sub.grades, key=lambda g: g.name):
                exercise = g.name.removeprefix("test_")
                missing = not_graded(g)
                writer.writerow([student, assignment, exercise, "" if missing else f"{g.score:g}", f"{g.max_score:g}",
                                 "" if hints is None else hints.get(exercise, 0), "learner",
                                 NOT_GRADED if missing else "graded"])
                got = points.setdefault(student, {})
                got[assignment] = None if missing or got.get(assignment, 0.0) is None else (
                    got.get(assignment, 0.0) + g.score)
    write_atomic(out, fh.getvalue().encode())
    if summary is not None:
        fh = io.StringIO(newline="")
        writer = csv.writer(fh)
        writer.writerow(["student", *names, "total"])
        for student in students:
            got = points.get(student, {})
            cells = ["" if a not in got else NOT_GRADED if got[a] is None else f"{got[a]:g}" for a in names]
            total = NOT_GRADED if None in got.values() else f"{sum(got.values()):g}"
            writer.writerow([student, *cells, total])
        write_atomic(Path(summary), fh.getvalue().encode())
    return out


def summary_path(out: Path) -> Path | None:
    """Where :func:`export` writes the summary beside ``out`` by default (None beside a special file)."""
    out = Path(out)
    return None if special(out) else out.with_name(f"{out.stem}-summary{out.suffix or '.csv'}")


def submitted_hints(course: Course, student: str, assignment: str, notebook: str) -> dict[str, int]:
    """``{exercise: hints seen}`` as the submitted notebook and the ``.hints.json`` beside it
    report (:func:`autograder.hints.seen`), each at most the exercise's number of hints."""
    from ..hints import seen, shipped

    most = {exercise: len(hints) for exercise, hints in shipped(assignment).items()}
    reported = seen(course.submitted / student / assignment / f"{notebook}.ipynb")
    return {e: min(n, most[e]) if e in most else n for e, n in reported.items()}


def gradebook_points(course: Course) -> dict:
    """``{(student, assignment): {exercise: (points, max_points)}}`` from the gradebook, without
    the tests left not graded (:func:`not_graded`)."""
    check_gradebook(course.db_url)
    points: dict = {}
    with course_gradebook(course.db_url) as gb:
        for assignment, student, _, sub in _graded_notebooks(gb):
            got = points.setdefault((student, assignment), {})
            for g in sub.grades:
                if not not_graded(g):
                    got[g.name.removeprefix("test_")] = (float(g.score), float(g.max_score))
    return points


def _graded_notebooks(gb):
    """``(assignment, student, notebook, its nbgrader SubmissionNotebook)`` of every submission in
    the gradebook ``gb``, by assignment then student."""
    from nbgrader.api import MissingEntry

    students = sorted(s.id for s in gb.students)
    for assignment in sorted(gb.assignments, key=lambda a: a.name):
        for student in students:
            for nb in assignment.notebooks:
                try:
                    yield assignment.name, student, nb.name, gb.find_submission_notebook(
                        nb.name, assignment.name, student)
                except MissingEntry:
                    continue


def class_report(course: Course, out: Path) -> tuple[Path, list]:
    """Write the class report (:mod:`autograder.instructor.report`) to ``out``; returns it and the
    submissions it could not use, ``(student, assignment, why)`` (a result that cannot be read,
    hints that cannot be read), each left out of the page without stopping it."""
    from .report import render, tripped, ungradable, unreadable

    points = gradebook_points(course)
    problems = [(s, a, f"its result cannot be read: {why}") for s, a, why in unreadable(course.autograded)]
    hints = {}
    with course_gradebook(course.db_url) as gb:
        notebooks = [(s, a, nb) for a, s, nb, _ in _graded_notebooks(gb)]
    for student, assignment, notebook in notebooks:
        try:
            hints[student, assignment] = submitted_hints(course, student, assignment, notebook)
        except Exception as exc:  # noqa: BLE001 - one learner's files never stop the class's report
            problems.append((student, assignment, f"its hints cannot be read ({type(exc).__name__}: {exc})"))
    page = render(points, tripped(course.autograded), without_password(course.db_url),
                  not_graded=ungradable(course.autograded), hints=hints)
    write_atomic(Path(out), page.encode("utf-8"))
    return Path(out), problems
