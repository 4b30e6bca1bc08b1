"""The instructor's subcommands of ``python -m autograder``: collect, autograde, feedback,
export, report."""
from __future__ import annotations

import sys
from pathlib import Path

from ..common.errors import GradingError
from ..common.settings import Settings, without_password
from .collecting import collect
from .course import Course
from .export import class_report, export, summary_path
from .feedback_pages import feedback
from .gradebook import GradebookError, one_line
from .grading import autograde

def add_parsers(sub) -> None:
    """The instructor subcommands of ``python -m autograder``."""
    from ..grader.cli import add_limits

    def common(p):
        p.add_argument("--root", help="course root holding solutions/ (default: found automatically)")
        p.add_argument("--state", help="course-state folder (default: .course/ in the course root)")
        p.add_argument("--db-url", help="gradebook SQLAlchemy URL, e.g. postgresql://user:pw@host/db "
                                        "(default: $COURSE_DB_URL, else sqlite in the state folder)")
        p.add_argument("--reports", help="folder of the grade CSVs and the class report (default: "
                                         "$COURSE_REPORTS, else the state folder)")
        return p

    p = common(sub.add_parser("collect", help="collect downloaded submissions into nbgrader's layout"))
    p.add_argument("folder", help="folder of <student>_<anything>.ipynb files or zips")
    p.add_argument("--assignment", "-a", required=True)
    p = common(sub.add_parser("autograde", help="grade every submission into the gradebook"))
    p.add_argument("assignments", nargs="*", help="only these assignments (default: all)")
    add_limits(p)
    p.add_argument("--regrade", action="store_true",
                   help="grade every submission again, even those unchanged since their last grading")
    p.add_argument("--student", action="append", default=None,
                   help="only this student's submissions (may be given more than once)")
    common(sub.add_parser("feedback", help="one HTML feedback page per graded submission"))
    p = common(sub.add_parser("export", help="CSV of points per student, assignment and exercise, "
                                             "and a summary CSV: one row per student"))
    p.add_argument("--out", default=None, help="CSV path (default: <reports>/grades.csv)")
    p.add_argument("--summary", default=None, help="the per-student summary CSV (default: beside --out, "
                                                   "named <out>-summary.csv)")
    p = common(sub.add_parser("report", help="the class report: one HTML page with plots (pass rate per "
                                            "exercise, learners per idea they tripped on, progress per learner)"))
    p.add_argument("--out", default=None, help="HTML path (default: <reports>/class-report.html)")


def run(args) -> int:
    """Run an instructor's subcommand; 2 when its settings, its course or its gradebook cannot be
    used (said in one line, before anything is done where it can be)."""
    course = None
    try:
        course = Course(args.root, args.state, args.db_url, args.reports, Settings.load())
        return _run(args, course)
    except (GradingError, GradebookError) as exc:
        print(f"{args.command}: {exc}", file=sys.stderr)
    except Exception as exc:  # the database went away mid-run: say so, without a traceback
        from sqlalchemy.exc import DBAPIError

        if course is None or not isinstance(exc, DBAPIError):
            raise
        print(f"{args.command}: the gradebook {without_password(course.db_url)} failed: "
              f"{one_line(exc, course.db_url)}", file=sys.stderr)
    return 2


def _run(args, course: Course) -> int:
    if args.command == "collect":
        refused = []
        got = collect(args.folder, args.assignment, course, refused)
        print(f"collected {len(got)} submission(s) of {args.assignment} into {course.submitted}"
              + (f"; {len(refused)} file(s) refused: " + ", ".join(name for name, _ in refused) if refused else ""))
        if refused:
            return 1
    elif args.command == "autograde":
        rows, missed, unreadable = autograde(course, args.assignments or None, workers=args.jobs,
                                             progress=sys.stderr.isatty(), regrade=args.regrade,
                                             students=args.student,
                                             cell_timeout=args.cell_timeout,
                                             notebook_timeout=args.notebook_timeout)
        print(f"autograded {len(rows)} submission(s) into {without_password(course.db_url)}"
              + (f"; {len(missed)} NOT graded: " + ", ".join(f"{n['student']}/{n['assignment']}"
                                                          for n in missed) if missed else "")
              + (f"; {len(unreadable)} not a notebook (zero): " + ", ".join(
                  f"{n['student']}/{n['assignment']}" for n in unreadable) if unreadable else ""))
        if missed or unreadable:
            return 1
    elif args.command == "feedback":
        pages, problems = feedback(course)
        print(f"wrote {len(pages)} feedback page(s) under {course.feedback}"
              + (f"; {len(problems)} NOT written: " + ", ".join(f"{n['student']}/{n['assignment']}"
                                                             for n in problems) if problems else ""))
        if problems:
            return 1
    elif args.command == "export":
        out = Path(args.out) if args.out else course.reports / "grades.csv"
        summary = Path(args.summary) if args.summary else summary_path(out)
        problems = []
        export(course, out, summary, problems)
        # on stderr: stdout may be the CSV itself (--out /dev/stdout)
        print(f"wrote {out}" + (f" and {summary}" if summary else ""), file=sys.stderr)
        return _named(args.command, problems)
    elif args.command == "report":
        out, problems = class_report(course, Path(args.out) if args.out else course.reports / "class-report.html")
        print(f"wrote {out}")
        return _named(args.command, problems)
    return 0


def _named(command: str, problems: list) -> int:
    """Name every submission ``command`` went on past (``(student, assignment, why)``): 1 when
    there is one, else 0."""
    for student, assignment, why in problems:
        print(f"{command}: {student}/{assignment}: {why}", file=sys.stderr)
    if problems:
        print(f"{command}: {len(problems)} submission(s) left out or incomplete (named above); "
              "everyone else's is written", file=sys.stderr)
    return 1 if problems else 0
