"""Every chapter notebook executes in a fresh kernel: errors only where tagged, a plot, a device report."""
from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import COURSE_NOTEBOOKS, ROOT

pytestmark = pytest.mark.notebook


def execute(path, timeout=300):
    nb = nbformat.read(str(path), as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError on an error in a cell not tagged raises-exception
    return nb


@pytest.mark.parametrize("path", COURSE_NOTEBOOKS, ids=[p.stem for p in COURSE_NOTEBOOKS])
def test_chapter_executes(path):
    nb = execute(path)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "device(s)" in text, "the chapter must report the backend and devices it runs on"
    assert any("image/png" in o.get("data", {}) for o in outputs), "the chapter must draw at least one plot"
    for i, cell in enumerate(nb.cells):
        if "raises-exception" in cell.metadata.get("tags", []):
            assert any(o.output_type == "error" for o in cell.outputs), \
                f"cell {i} is tagged raises-exception but raised nothing"


def test_every_chapter_has_a_notebook():
    chapters = sorted(p.stem for p in (ROOT / "course").glob("*.ipynb"))
    solutions = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir())
    assert set(solutions) <= set(chapters), f"chapters without a course notebook: {set(solutions) - set(chapters)}"
