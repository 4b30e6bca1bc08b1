"""The instructor's workflow on top of nbgrader: collect -> autograde -> feedback -> export.

Course state lives in a course-state folder (default ``.course/`` beside ``nbgrader_config.py``,
git-ignored): nbgrader's ``submitted/``, ``autograded/`` and ``feedback/`` layouts and the
gradebook (SQLite by default; any SQLAlchemy URL through ``--db-url`` or ``$COURSE_DB_URL``).

- ``collect FOLDER --assignment A``: downloaded files (an LMS export of
  ``<student>_<anything>.ipynb``, or zips of them) into ``submitted/<student>/A/A.ipynb``.
  (``nbgrader collect A`` does the same from nbgrader's exchange.)
- ``autograde [A ...]``: every submission (of the given assignments) graded in parallel by the
  project's grader and recorded in the gradebook; the executed notebook goes to
  ``autograded/`` for the formgrader, the result JSON beside it.
- ``feedback``: one HTML page per submission with the learner-facing messages (never the
  hidden test code).
- ``export``: a CSV of points per student, assignment and exercise, from the gradebook.
"""
from __future__ import annotations

import csv
import html
import json
import os
import re
import shutil
import sys
import zipfile
from pathlib import Path

from .course import assignments, find_course_root, source_notebook
from .gradebook import STUDENT, build_gradebook
from .result import zero_result


class Course:
    """Paths of one course: its root (holding solutions/) and its state folder."""

    def __init__(self, root=None, state=None, db_url=None):
        self.root = Path(root).resolve() if root else find_course_root()
        self.state = Path(state or os.environ.get("COURSE_STATE") or self.root / ".course").resolve()
        self.db_url = db_url or os.environ.get("COURSE_DB_URL") or f"sqlite:///{self.state / 'gradebook.db'}"
        self.submitted = self.state / "submitted"
        self.autograded = self.state / "autograded"
        self.feedback = self.state / "feedback"

    def assignments(self):
        return assignments(self.root)


_STUDENT_RE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9.\-]*)_")


def student_of(filename: str) -> str | None:
    """The student id of an LMS export's file name ``<student>_<anything>``."""
    m = _STUDENT_RE.match(Path(filename).name)
    return m.group(1) if m else None


def collect(folder, assignment: str, course: Course) -> list[tuple[str, Path]]:
    """Copy ``<student>_*.ipynb`` files and ``<student>_*.zip`` archives from ``folder`` into
    nbgrader's submitted layout. Returns ``[(student, destination)]``; files whose name has no
    student id are reported on stderr and skipped."""
    if assignment not in course.assignments():
        raise SystemExit(f"unknown assignment {assignment!r}; known: {', '.join(course.assignments())}")
    collected = []
    for item in sorted(Path(folder).iterdir()):
        student = student_of(item.name)
        if student is None or item.suffix not in (".ipynb", ".zip"):
            print(f"collect: skipped {item.name} (expected <student>_<anything>.ipynb or .zip)",
                  file=sys.stderr)
            continue
        dest = course.submitted / student / assignment / f"{assignment}.ipynb"
        dest.parent.mkdir(parents=True, exist_ok=True)
        if item.suffix == ".ipynb":
            shutil.copyfile(item, dest)
        else:
            try:
                with zipfile.ZipFile(item) as zf:
                    names = [n for n in zf.namelist() if n.endswith(".ipynb") and "__MACOSX" not in n]
                    best = next((n for n in names if Path(n).stem == assignment), names[0] if names else None)
                    if best is None:
                        print(f"collect: {item.name} holds no notebook", file=sys.stderr)
                        continue
                    dest.write_bytes(zf.read(best))
            except zipfile.BadZipFile:
                print(f"collect: {item.name} is not a valid zip; kept as is for grading", file=sys.stderr)
                shutil.copyfile(item, dest)
        collected.append((student, dest))
    return collected


def submissions(course: Course, assignments=None):
    """``[(student, assignment, notebook path or None)]`` found in the submitted folder."""
    wanted = set(assignments or course.assignments())
    found = []
    if not course.submitted.is_dir():
        return found
    for student_dir in sorted(p for p in course.submitted.iterdir() if p.is_dir()):
        for a_dir in sorted(p for p in student_dir.iterdir() if p.is_dir() and p.name in wanted):
            nbs = sorted(a_dir.glob("*.ipynb"))
            pick = next((n for n in nbs if n.stem == a_dir.name), nbs[0] if nbs else None)
            found.append((student_dir.name, a_dir.name, pick))
    return found


def _record(course: Course, student: str, assignment: str, result: dict) -> None:
    from nbgrader.api import Gradebook

    source = source_notebook(assignment, course.root)
    with Gradebook(course.db_url) as gb:
        gb.update_or_create_student(student)
        gb.update_or_create_submission(assignment, student)
        for t in result["tests"]:
            grade = gb.find_grade(t["grade_id"], source.stem, assignment, student)
            grade.auto_score = float(t["points"])
            grade.needs_manual_grade = False
        gb.db.commit()


def autograde(course: Course, assignments=None, workers=None, progress=True, **limits):
    """Grade every submission and record it in the gradebook; return the list of rows."""
    from .batch import grade_many, summary
    from .grading import Result, ensure_tools_on_path, fast_alembic_version

    ensure_tools_on_path()
    found = submissions(course, assignments)
    for a in sorted({a for _, a, _ in found}):
        fast_alembic_version()
        build_gradebook(source_notebook(a, course.root), a, course.db_url)
    to_grade = [(s, a, p) for s, a, p in found if p is not None]

    def per_job(path):
        s, a = Path(path).parent.parent.name, Path(path).parent.name
        return {"save_graded": course.autograded / s / a / f"{a}.ipynb"}

    results = grade_many([p for _, _, p in to_grade], workers=workers, progress=progress,
                         root=course.root, per_job=per_job, **limits)
    by_path = {str(p): r for (_, _, p), r in zip(to_grade, results)}
    rows = []
    for s, a, p in found:
        src = source_notebook(a, course.root)
        if p is None:
            r = zero_result(str(course.submitted / s / a), a, src, "no notebook submitted")
        else:
            r = by_path[str(p)]
            if not r.tests:  # e.g. an internal error: every test still appears, with zero
                r = zero_result(r.notebook, a, src, r.error or "not graded")
        d = r.as_dict()
        d["student"] = s
        out = course.autograded / s / a / "result.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(d, indent=2))
        _record(course, s, a, d)
        rows.append(d)
    print(summary([Result.from_dict(r) for r in rows]), file=sys.stderr)
    return rows


def feedback(course: Course) -> list[Path]:
    """Write one HTML page per autograded submission; return their paths."""
    pages = []
    for result_path in sorted(course.autograded.glob("*/*/result.json")):
        r = json.loads(result_path.read_text())
        student, assignment = result_path.parent.parent.name, result_path.parent.name
        rows = "".join(
            f"<tr class='{'pass' if t['passed'] else 'fail'}'><td><code>{html.escape(t['exercise'])}</code></td>"
            f"<td>{t['points']:g} / {t['max_points']:g}</td>"
            f"<td>{html.escape(t['feedback']) if not t['passed'] else 'passed'}</td></tr>"
            for t in r["tests"])
        problem = f"<p class='fail'>{html.escape(r['error'])}</p>" if r.get("error") else ""
        page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>{html.escape(assignment)}: feedback for {html.escape(student)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}td,th{{padding:.4em;vertical-align:top;
text-align:left;border-bottom:1px solid #ddd}}.pass td:nth-child(2){{color:green}}.fail{{color:#b00020}}</style>
</head><body><h1>{html.escape(assignment)}</h1><p>Student: <b>{html.escape(student)}</b> &middot;
score <b>{r['score']:g} / {r['max_score']:g}</b></p>{problem}
<table><tr><th>exercise</th><th>points</th><th>feedback</th></tr>{rows}</table>
<p>Each message names the idea of JAX's mental model that the test found broken and the course
section that teaches it.</p></body></html>"""
        out = course.feedback / student / assignment / f"{assignment}.html"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(page, encoding="utf-8")
        pages.append(out)
    return pages


def export(course: Course, out: Path) -> Path:
    """Write ``student,assignment,exercise,points,max_points`` rows from the gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with Gradebook(course.db_url) as gb, out.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["student", "assignment", "exercise", "points", "max_points"])
        for assignment in sorted(gb.assignments, key=lambda a: a.name):
            for student in sorted(gb.students, key=lambda s: s.id):
                for nb in assignment.notebooks:
                    try:
                        sub = gb.find_submission_notebook(nb.name, assignment.name, student.id)
                    except MissingEntry:
                        continue
                    for g in sorted(sub.grades, key=lambda g: g.name):
                        writer.writerow([student.id, assignment.name, g.name.removeprefix("test_"),
                                         f"{g.score:g}", f"{g.max_score:g}"])
    return out


__all__ = ["Course", "collect", "autograde", "feedback", "export", "student_of", "STUDENT"]


def add_parsers(sub) -> None:
    """The instructor subcommands of ``python -m autograder``."""
    def common(p):
        p.add_argument("--root", help="course root holding solutions/ (default: found automatically)")
        p.add_argument("--state", help="course-state folder (default: .course/ in the course root)")
        p.add_argument("--db-url", help="gradebook SQLAlchemy URL (default: sqlite in the state folder)")
        return p

    p = common(sub.add_parser("collect", help="collect downloaded submissions into nbgrader's layout"))
    p.add_argument("folder", help="folder of <student>_<anything>.ipynb files or zips")
    p.add_argument("--assignment", "-a", required=True)
    p = common(sub.add_parser("autograde", help="grade every submission into the gradebook"))
    p.add_argument("assignments", nargs="*", help="only these assignments (default: all)")
    p.add_argument("--jobs", "-j", type=int, default=None, help="parallel graders (default: one per core)")
    p.add_argument("--cell-timeout", type=int, default=120)
    p.add_argument("--notebook-timeout", type=int, default=600)
    common(sub.add_parser("feedback", help="one HTML feedback page per graded submission"))
    p = common(sub.add_parser("export", help="CSV of points per student, assignment and exercise"))
    p.add_argument("--out", default=None, help="CSV path (default: <state>/grades.csv)")


def run(args) -> int:
    course = Course(args.root, args.state, args.db_url)
    if args.command == "collect":
        got = collect(args.folder, args.assignment, course)
        print(f"collected {len(got)} submission(s) of {args.assignment} into {course.submitted}")
    elif args.command == "autograde":
        rows = autograde(course, args.assignments or None, workers=args.jobs,
                         progress=sys.stderr.isatty(), cell_timeout=args.cell_timeout,
                         notebook_timeout=args.notebook_timeout)
        print(f"autograded {len(rows)} submission(s) into {course.db_url}")
    elif args.command == "feedback":
        pages = feedback(course)
        print(f"wrote {len(pages)} feedback page(s) under {course.feedback}")
    elif args.command == "export":
        out = export(course, Path(args.out) if args.out else course.state / "grades.csv")
        print(f"wrote {out}")
    return 0
