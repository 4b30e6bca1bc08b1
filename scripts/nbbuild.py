"""Tiny helpers for writing course and nbgrader notebooks from Python (used by maintainers).

    from nbbuild import md, code, given, answer, tests, notebook, write
    write("solutions/03_purity/03_purity.ipynb", notebook([
        md("# Purity"), given("given_data", "DATA = ..."),
        answer("step", "def step(state, x):\\n    ### BEGIN SOLUTION\\n ...\\n    ### END SOLUTION"),
        tests("test_step", '\"\"\"`step` is pure.\"\"\"\\n...', points=1),
    ]))

Cells carry nbgrader metadata exactly as nbgrader's create_assignment extension writes it.
"""
from __future__ import annotations

import textwrap

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook


def _src(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def md(text: str, **meta):
    cell = new_markdown_cell(_src(text))
    cell.metadata.update(meta)
    return cell


def code(text: str, tags=(), **meta):
    cell = new_code_cell(_src(text))
    if tags:
        cell.metadata["tags"] = list(tags)
    cell.metadata.update(meta)
    return cell


def _nbgrader(cell, grade_id, *, grade, solution, locked, points=None):
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    cell.metadata["nbgrader"] = meta
    if locked:
        cell.metadata["deletable"] = False
        cell.metadata["editable"] = False
    return cell


def given(grade_id: str, text: str):
    """A read-only code cell defining objects the exercise gives (restored when graded)."""
    return _nbgrader(code(text), grade_id, grade=False, solution=False, locked=True)


def answer(grade_id: str, text: str, starting: str | None = None):
    """An autograded answer cell (``### BEGIN SOLUTION`` / ``### END SOLUTION`` inside).

    ``starting`` is the broken or impure code the learner starts from: ``make release``
    puts it in the released answer cell instead of nbgrader's ``raise NotImplementedError()``.
    """
    cell = _nbgrader(code(text), grade_id, grade=False, solution=True, locked=False)
    if starting is not None:
        cell.metadata["course"] = {"starting_code": _src(starting)}
    return cell


def tests(grade_id: str, text: str, points: float = 1):
    """An autograded tests cell (``### BEGIN HIDDEN TESTS`` / ``### END HIDDEN TESTS`` inside)."""
    return _nbgrader(code(text), grade_id, grade=True, solution=False, locked=True, points=points)


def notebook(cells, slideshow: bool = False):
    nb = new_notebook(cells=list(cells))
    nb.metadata["kernelspec"] = {"display_name": "Python 3 (ipykernel)", "language": "python",
                                 "name": "python3"}
    nb.metadata["language_info"] = {"name": "python"}
    return nb


def write(path, nb):
    for i, cell in enumerate(nb.cells):
        cell["id"] = cell.metadata.get("nbgrader", {}).get("grade_id", f"cell-{i}")[:64]
    nbformat.validate(nb)
    nbformat.write(nb, str(path))
