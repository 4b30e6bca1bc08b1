"""The class report (``python -m autograder report``): one HTML page, with its plots inside it
(PNG, base64), that an instructor opens from JupyterLab.

- per exercise: the share of learners who passed it (full points in the gradebook);
- per idea: how many learners tripped on it. A failed test's idea is the one its feedback names
  (:func:`autograder.feedback.where`'s pointer to the section that teaches it), else
  ``unanswered`` for a stub left as it was, else the idea the manifest gives its exercise;
- per learner: their points against the maximum, per assignment and in all.

Points come from the gradebook (what ``export`` writes, manual changes included:
:func:`autograder.instructor.class_report` reads them and writes the page); feedback from each
submission's ``result.json`` beside its graded notebook.
"""
from __future__ import annotations

import base64
import html
import io
import json
from collections import defaultdict
from pathlib import Path


def idea_of(test: dict, assignment: str) -> str:
    """The idea a failed ``test`` (a result's test entry) tripped on."""
    from ..feedback import TAUGHT_IN, where
    from ..manifest import load

    text = test.get("feedback") or ""
    for idea in TAUGHT_IN:
        pointer = where(idea)
        if pointer and pointer in text:
            return idea
    if "not answered yet" in text:
        return "unanswered"
    entry = next((e for e in load().exercises if e.name == test.get("exercise") and e.chapter == assignment), None)
    return entry.idea if entry is not None else "unknown"


def tripped(autograded: Path) -> dict[str, set[str]]:
    """``{idea: {students who failed a test on it}}`` from the submissions' results (a submission
    that could not be graded tested no idea)."""
    who: dict[str, set[str]] = defaultdict(set)
    for path in sorted(Path(autograded).glob("*/*/result.json")):
        student, assignment = path.parent.parent.name, path.parent.name
        try:
            result = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if result.get("error"):  # not graded (no notebook it could read, ...): no idea was tested
            continue
        for test in result.get("tests") or []:
            if not test.get("passed"):
                who[idea_of(test, assignment)].add(student)
    return dict(who)


def _barh(labels, values, xlabel, xmax=None) -> str:
    """A horizontal bar chart, as base64 PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 0.35 * len(labels) + 1))
    ax.barh(range(len(labels)), values, color="#3b6ea5")
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


def render(points: dict, who: dict[str, set[str]], gradebook: str) -> str:
    """The class report's page: ``points`` as :func:`autograder.instructor.gradebook_points` gives
    them, ``who`` as :func:`tripped` does, ``gradebook`` the name of where points came from."""
    from ..feedback import TAUGHT_IN, where

    students = sorted({s for s, _ in points})
    assignments = sorted({a for _, a in points})
    sections = [f"<p>{len(students)} learner(s), {len(assignments)} assignment(s) in the gradebook "
                f"<code>{html.escape(gradebook)}</code>.</p>"]

    exercises = sorted({(a, e) for (_, a), got in points.items() for e in got})
    rate_rows, labels, rates = [], [], []
    for a, e in exercises:
        graded = [got[e] for (_, aa), got in points.items() if aa == a and e in got]
        passed = sum(1 for p, m in graded if m > 0 and p >= m)
        rate = passed / len(graded) if graded else 0.0
        rate_rows.append((a, e, f"{passed} / {len(graded)}", f"{100 * rate:.0f}%"))
        labels.append(f"{a}: {e}")
        rates.append(100 * rate)
    sections.append("<h2>Pass rate per exercise</h2>")
    if exercises:
        sections.append(_figure(_barh(labels, rates, "learners who passed (%)", 100), "pass rate per exercise"))
    sections.append(_table(["assignment", "exercise", "passed", "pass rate"], rate_rows))

    ideas = sorted(who, key=lambda i: (-len(who[i]), i))
    sections.append("<h2>Ideas learners tripped on</h2><p>A learner counts once per idea: a failed "
                    "test whose feedback names it (a stub left unanswered counts as <i>unanswered</i>).</p>")
    if ideas:
        sections.append(_figure(_barh(ideas, [len(who[i]) for i in ideas], "learners", None), "learners per idea"))
    sections.append(_table(["idea", "where it is taught", "learners", "who"],
                           [(i, where(i).removeprefix("see ") if i in TAUGHT_IN else "", len(who[i]),
                             ", ".join(sorted(who[i]))) for i in ideas]))

    progress_rows, totals = [], []
    for s in students:
        row, got_all, max_all = [s], 0.0, 0.0
        for a in assignments:
            got = points.get((s, a))
            if got is None:
                row.append("")
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

    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>Class report</title>
<style>body{{font-family:sans-serif;max-width:64em;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{padding:.3em .6em;text-align:left;border-bottom:1px solid #ddd;vertical-align:top}}</style>
</head><body><h1>Class report</h1>{"".join(sections)}</body></html>"""
    return page
