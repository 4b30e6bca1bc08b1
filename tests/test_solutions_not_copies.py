"""No exercise is a copy job: no solution is a code cell of the chapters (course/*.ipynb) with at
most one line changed, once names are set aside (a cell whose variables were renamed is the same
cell). A solution that is one has nothing left for the learner to work out; the exercise must
combine the chapter's idea with another, on a problem no cell solves."""
from __future__ import annotations

import builtins
import difflib
import io
import keyword
import tokenize

import nbformat
import pytest

from conftest import ASSIGNMENTS, ROOT, solution_notebook

# Names that are the same in every cell (JAX's modules, builtins, keywords): kept as they are.
# Any other name becomes one placeholder (a renamed variable changes nothing, and a line added
# does not shift the names of the others), and every string is one token.
KEPT = {"jax", "jnp", "lax", "np", "random", "tree", "tree_util", "ops", "nn", "self"} \
    | set(dir(builtins)) | set(keyword.kwlist)
MOST_CHANGED = 1  # a solution must differ from every chapter cell in more lines than this


def canonical(source: str) -> list[str]:
    """The code lines of a cell with its own names made one placeholder and strings one token;
    comments, blank lines, IPython magics and the nbgrader markers are left out."""
    text = "\n".join(line for line in source.splitlines()
                     if not line.lstrip().startswith(("%", "!")) and "### " not in line)
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return [line.strip() for line in text.splitlines() if line.strip()]
    lines, line, previous = [], [], ""
    for tok in tokens:
        if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.ENDMARKER):
            if line:
                lines.append(" ".join(line))
            line = []
            continue
        if tok.type in (tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT):
            continue
        text = tok.string
        if tok.type == tokenize.NAME and text not in KEPT and previous != ".":
            text = "NAME"
        elif tok.type == tokenize.STRING:
            text = "STRING"
        line.append(text)
        previous = tok.string
    return lines


def lines_changed(a: list[str], b: list[str]) -> int:
    """How many lines must change (replaced, added or removed) to turn ``a`` into ``b``."""
    return sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in
               difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes() if tag != "equal")


def _chapter_cells() -> list[tuple[str, list[str]]]:
    return [(path.name, canonical(cell.source)) for path in sorted((ROOT / "course").glob("*.ipynb"))
            for cell in nbformat.read(str(path), as_version=4).cells if cell.cell_type == "code"]


def _solutions(assignment: str) -> list[tuple[str, str]]:
    nb = nbformat.read(str(solution_notebook(assignment)), as_version=4)
    return [(cell.metadata["nbgrader"]["grade_id"], cell.source) for cell in nb.cells
            if cell.metadata.get("nbgrader", {}).get("solution")]


def nearest_cell(solution: str, cells) -> tuple[int, str]:
    """(lines changed, chapter) of the chapter cell nearest to ``solution``."""
    mine = canonical(solution)
    return min(((lines_changed(mine, theirs), name) for name, theirs in cells if theirs), default=(len(mine), ""))


@pytest.fixture(scope="module")
def chapter_cells():
    return _chapter_cells()


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_no_solution_is_a_chapter_cell_with_one_line_changed(assignment, chapter_cells):
    copies = []
    for gid, source in _solutions(assignment):
        changed, chapter = nearest_cell(source, chapter_cells)
        if changed <= MOST_CHANGED:
            copies.append(f"{gid}: a cell of course/{chapter} with {changed} line(s) changed")
    assert not copies, f"{assignment}: copy jobs, solved by a chapter cell:\n  " + "\n  ".join(copies)


def test_a_renamed_cell_with_one_line_changed_is_found(chapter_cells):
    """The comparison sees through renaming and counts changed lines: a chapter cell with one
    line altered is a copy, with two lines added it is not."""
    assert canonical("def f(a, b):\n    return a * b\n") == canonical("def g(x, y):\n    return x * y  # same\n")
    assert canonical("def f(a):\n    return a * 2\n") != canonical("def f(a):\n    return a * 3.5\n")
    cell = next(c.source for path in sorted((ROOT / "course").glob("*.ipynb"))
                for c in nbformat.read(str(path), as_version=4).cells
                if c.cell_type == "code" and 4 <= len(canonical(c.source)) <= 12
                and "raises-exception" not in c.metadata.get("tags", []))
    last = [line for line in cell.splitlines() if line.strip() and not line.lstrip().startswith("#")][-1]
    one = cell.replace(last, last + "  # changed\nzz_extra = 1", 1)
    assert nearest_cell(one, chapter_cells)[0] <= MOST_CHANGED
    two = "zz_first = 1\n" + one
    assert lines_changed(canonical(two), canonical(cell)) == 2
