"""``feedback``: one HTML page per graded submission."""
from __future__ import annotations

import html
import json
import shutil
import sys
from pathlib import Path

from .course import Course
from .files import write_atomic
from .grading import NotGraded

def feedback(course: Course) -> tuple[list[Path], list[NotGraded]]:
    """Write one HTML page per autograded submission; return their paths, and the submissions
    whose page cannot be written (its result unreadable, a folder that cannot be written: each a
    :class:`NotGraded`), which do not stop the others."""
    pages, problems = [], []
    for result_path in sorted(course.autograded.glob("*/*/result.json")):
        student, assignment = result_path.parent.parent.name, result_path.parent.name
        try:
            pages.append(_feedback_page(course, student, assignment, json.loads(result_path.read_text())))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            problems.append(NotGraded(student=student, assignment=assignment,
                                      reason=f"no feedback page: {result_path} cannot be used "
                                             f"({type(exc).__name__}: {exc})"))
    for n in problems:
        print(f"feedback: {n['student']}/{n['assignment']}: {n['reason']}", file=sys.stderr)
    return pages, problems


def _feedback_page(course: Course, student: str, assignment: str, r: dict) -> Path:
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
    write_atomic(out, page.encode("utf-8"))
    # nbgrader's release_feedback releases a page only beside the submission's timestamp and
    # secret (its own generate_feedback copies them too)
    for name in ("timestamp.txt", "submission_secret.txt"):
        submitted = course.submitted / student / assignment / name
        if submitted.is_file():
            shutil.copyfile(submitted, out.parent / name)
        else:
            (out.parent / name).unlink(missing_ok=True)  # never a stale one of an earlier submission
    return out
