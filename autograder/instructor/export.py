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

def export(course: Course, out: Path, summary: Path | None = None) -> Path:
    """Write ``student,assignment,exercise,points,max_points,hints_seen`` rows from the gradebook
    (hints seen: :func:`autograder.hints.seen` of the submitted notebook) to ``out`` and, to
    ``summary`` (default: ``<out's name>-summary.csv`` beside a regular ``out``; none beside
    ``/dev/stdout``), one row per student: a column per assignment (its points; empty
    where nothing was recorded) and their total."""
    from ..hints import seen

    check_gradebook(course.db_url)
    out = Path(out)
    if summary is None and not special(out):
        summary = out.with_name(f"{out.stem}-summary{out.suffix or '.csv'}")
    fh = io.StringIO(newline="")
    points: dict[str, dict[str, float]] = {}
    with course_gradebook(course.db_url) as gb:  # a consistent view: no write is half seen
        writer = csv.writer(fh)
        writer.writerow(["student", "assignment", "exercise", "points", "max_points", "hints_seen"])
        names = sorted(a.name for a in gb.assignments)
        students = sorted(s.id for s in gb.students)
        for assignment, student, notebook, sub in _graded_notebooks(gb):
            hints = seen(course.submitted / student / assignment / f"{notebook}.ipynb")
            for g in sorted(sub.grades, key=lambda g: g.name):
                exercise = g.name.removeprefix("test_")
                writer.writerow([student, assignment, exercise, f"{g.score:g}", f"{g.max_score:g}",
                                 hints.get(exercise, 0)])
                got = points.setdefault(student, {})
                got[assignment] = got.get(assignment, 0.0) + g.score
    write_atomic(out, fh.getvalue().encode())
    if summary is not None:
        fh = io.StringIO(newline="")
        writer = csv.writer(fh)
        writer.writerow(["student", *names, "total"])
        for student in students:
            got = points.get(student, {})
            writer.writerow([student, *(f"{got[a]:g}" if a in got else "" for a in names),
                             f"{sum(got.values()):g}"])
        write_atomic(Path(summary), fh.getvalue().encode())
    return out


def gradebook_points(course: Course) -> dict:
    """``{(student, assignment): {exercise: (points, max_points)}}`` from the gradebook."""
    check_gradebook(course.db_url)
    points: dict = {}
    with course_gradebook(course.db_url) as gb:
        for assignment, student, _, sub in _graded_notebooks(gb):
            got = points.setdefault((student, assignment), {})
            for g in sub.grades:
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


def class_report(course: Course, out: Path) -> Path:
    """Write the class report (:mod:`autograder.instructor.report`) to ``out``; returns it."""
    from .report import render, tripped

    page = render(gradebook_points(course), tripped(course.autograded), without_password(course.db_url))
    write_atomic(Path(out), page.encode("utf-8"))
    return Path(out)
