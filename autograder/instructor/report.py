"""The class report (``python -m autograder report``): one HTML page, with its plots inside it
(PNG, base64), that an instructor opens from JupyterLab.

- per exercise: the share of learners who passed it (full points in the gradebook), and how many
  hints they saw (as their notebooks report it);
- per idea: how many learners tripped on it. A failed test is filed under the idea its feedback
  names (:func:`autograder.feedback.where`'s pointer to the section that teaches it), under
  ``unanswered`` for a stub left as it was, ``raised an error`` for an exception of the learner's
  own that JAX does not explain, ``did not run`` for a test that never ran, and ``no idea named``
  otherwise: never under an idea its judge did not name;
- per learner: their points against the maximum, per assignment and in all;
- apart: the submissions that could not be graded (no notebook the grader could read, recorded
  as zero): they count as no learner's result anywhere above.

Points come from the gradebook (what ``export`` writes, manual changes included:
:func:`autograder.instructor.class_report` reads them and writes the page); feedback from each
submission's ``result.json`` beside its graded notebook.
"""
from __future__ import annotations

import base64
import html
import io
import json
import re
from collections import defaultdict
from pathlib import Path

RAISED = "raised an error"
DID_NOT_RUN = "did not run"
UNNAMED = "no idea named"
# feedback.explain_error's words for an exception it cannot explain: "`f` raised KeyError: ..."
_RAISED = re.compile(r"\braised [A-Za-z_][\w.]*: ")


def idea_of(test: dict) -> str:
    """The idea a failed ``test`` (a result's test entry) tripped on, as its feedback names it."""
    from ..feedback import TAUGHT_IN, where

    text = test.get("feedback") or ""
    if "not answered yet" in text:
        return "unanswered"
    if text.startswith("This test did not run"):
        return DID_NOT_RUN
    named = [idea for idea in TAUGHT_IN if (pointer := where(idea)) and pointer in text]
    if named == ["numerics"] and _RAISED.search(text):  # the classifier's fallback: no idea at all
        return RAISED
    if named:
        return max(named, key=lambda idea: len(where(idea)))  # the most specific pointer
    return RAISED if _RAISED.search(text) else UNNAMED


def _results(autograded: Path):
    """``(student, assignment, result)`` of every ``result.json`` that can be used (a dict whose
    ``tests`` is a list): see :func:`unreadable` for the others."""
    for student, assignment, result in _read(autograded):
        if isinstance(result, dict) and isinstance(result.get("tests", []), list):
            yield student, assignment, result


def _read(autograded: Path):
    for path in sorted(Path(autograded).glob("*/*/result.json")):
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError) as exc:
            result = exc
        yield path.parent.parent.name, path.parent.name, result


def unreadable(autograded: Path) -> list[tuple[str, str, str]]:
    """``(student, assignment, why)`` of every ``result.json`` that cannot be used."""
    return [(s, a, f"{type(r).__name__}: {r}" if isinstance(r, Exception) else "not a grader's result")
            for s, a, r in _read(autograded)
            if not (isinstance(r, dict) and isinstance(r.get("tests", []), list))]


def tripped(autograded: Path) -> dict[str, set[str]]:
    """``{idea: {students who failed a test on it}}`` from the submissions' results (a submission
    that could not be graded tested no idea)."""
    who: dict[str, set[str]] = defaultdict(set)
    for student, _, result in _results(autograded):
        if result.get("error"):  # not graded (no notebook it could read, ...): no idea was tested
            continue
        for test in result.get("tests") or []:
            if isinstance(test, dict) and not test.get("passed"):
                who[idea_of(test)].add(student)
    return dict(who)


def ungradable(autograded: Path) -> dict[tuple[str, str], str]:
    """``{(student, assignment): why}`` of the submissions the grader could not grade (their
    ``result.json`` says why): recorded as zero (no notebook it can read: the submission's own
    fault), or left not graded by the grader's or the machine's fault (``not_graded``)."""
    return {(student, assignment): (f"not graded, the grader's or the machine's fault (run autograde again): "
                                    f"{result['error']}" if result.get("not_graded") else
                                    f"recorded as zero (ask the learner to submit again): {result['error']}")
            for student, assignment, result in _results(autograded) if result.get("error")}


def _barh(labels, values, xlabel, xmax=None, integer=False) -> str:
    """A horizontal bar chart, as base64 PNG (``integer``: ticks at whole numbers only)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7, 0.35 * len(labels) + 1))
    ax.barh(range(len(labels)), values, color="#3b6ea5")
    if integer:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yticks(range(len(labels)), labels)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    if xmax is not None:
        ax.set_xlim(0, xmax)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _table(head, rows) -> str:
    cells = "".join(f"<th>{html.escape(str(h))}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{cells}</tr>{body}</table>"


def _figure(png: str, alt: str) -> str:
    return f'<p><img alt="{html.escape(alt)}" src="data:image/png;base64,{png}"></p>'


def render(points: dict, who: dict[str, set[str]], gradebook: str, not_graded: dict | None = None,
           hints: dict | None = None) -> str:
    """The class report's page: ``points`` as :func:`autograder.instructor.gradebook_points` gives
    them, ``who`` as :func:`tripped` does, ``gradebook`` the name of where points came from,
    ``not_graded`` as :func:`ungradable` gives it (listed apart, counted nowhere else) and
    ``hints`` ``{(student, assignment): {exercise: hints seen}}``."""
    from ..feedback import TAUGHT_IN, where

    not_graded, hints = not_graded or {}, hints or {}
    graded = {k: got for k, got in points.items() if k not in not_graded}
    students = sorted({s for s, _ in graded})
    assignments = sorted({a for _, a in points})
    sections = [f"<p>{len(students)} learner(s) graded, {len(assignments)} assignment(s) in the gradebook "
                f"<code>{html.escape(gradebook)}</code>"
                + (f"; {len(not_graded)} submission(s) could not be graded (below)" if not_graded else "")
                + ".</p>"]

    exercises = sorted({(a, e) for (_, a), got in graded.items() for e in got})
    rate_rows, labels, rates = [], [], []
    for a, e in exercises:
        results = [(s, got[e]) for (s, aa), got in graded.items() if aa == a and e in got]
        passed = sum(1 for _, (p, m) in results if m > 0 and p >= m)
        rate = passed / len(results) if results else 0.0
        seen = [_count(hints.get((s, a), {}).get(e)) for s, _ in results]
        helped = sum(1 for n in seen if n)
        rate_rows.append((a, e, f"{passed} / {len(results)}", f"{100 * rate:.0f}%",
                          f"{helped} / {len(results)}", sum(seen)))
        labels.append(f"{a}: {e}")
        rates.append(100 * rate)
    sections.append("<h2>Pass rate per exercise</h2><p>Hints: the learners who saw at least one hint of "
                    "the exercise, and the hints seen in all, as their notebooks report it.</p>")
    if exercises:
        sections.append(_figure(_barh(labels, rates, "learners who passed (%)", 100), "pass rate per exercise"))
    sections.append(_table(["assignment", "exercise", "passed", "pass rate", "saw a hint", "hints seen"],
                           rate_rows))

    ideas = sorted(who, key=lambda i: (-len(who[i]), i))
    sections.append("<h2>Ideas learners tripped on</h2><p>A learner counts once per idea: a failed "
                    "test is filed under the idea its feedback names (a stub left unanswered under "
                    f"<i>unanswered</i>, an exception of the learner's own under <i>{RAISED}</i>).</p>")
    if ideas:
        sections.append(_figure(_barh(ideas, [len(who[i]) for i in ideas], "learners", None, integer=True),
                                "learners per idea"))
    sections.append(_table(["idea", "where it is taught", "learners", "who"],
                           [(i, where(i).removeprefix("see ") if i in TAUGHT_IN else "", len(who[i]),
                             ", ".join(sorted(who[i]))) for i in ideas]))

    progress_rows, totals = [], []
    for s in students:
        row, got_all, max_all = [s], 0.0, 0.0
        for a in assignments:
            got = graded.get((s, a))
            if got is None:
                row.append("not graded" if (s, a) in not_graded else "")
                continue
            p, m = sum(v[0] for v in got.values()), sum(v[1] for v in got.values())
            got_all, max_all = got_all + p, max_all + m
            row.append(f"{p:g} / {m:g}")
        row.append(f"{got_all:g} / {max_all:g}")
        progress_rows.append(row)
        totals.append(100 * got_all / max_all if max_all else 0.0)
    sections.append("<h2>Progress per learner</h2>")
    if students:
        sections.append(_figure(_barh(students, totals, "points of the assignments they submitted (%)", 100),
                                "progress per learner"))
    sections.append(_table(["learner", *assignments, "total"], progress_rows))

    if not_graded:
        sections.append("<h2>Submissions that could not be graded</h2><p>Counted in no figure above. "
                        "Each says whether it is recorded as zero (no notebook the grader can read: ask "
                        "the learner to submit again) or left not graded by the grader's or the "
                        "machine's fault (marked so in the gradebook: run autograde again).</p>")
        sections.append(_table(["learner", "assignment", "why"],
                               [(s, a, why) for (s, a), why in sorted(not_graded.items())]))

    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Class report</title>
<style>body{{font-family:sans-serif;max-width:64em;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{padding:.3em .6em;text-align:left;border-bottom:1px solid #ddd;vertical-align:top}}</style>
</head><body><h1>Class report</h1>{"".join(sections)}</body></html>"""
    return page


def _count(n) -> int:
    """A hint count as reported by a learner's notebook: a whole number, at least 0."""
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0
