"""`import autograder as ag`: every name the notebooks and judges use is public, behind an
explicit ``__all__``, and ``__all__`` names nothing that is not there."""
from __future__ import annotations

import json
import re

import autograder as ag
from conftest import ROOT


def _sources():
    for path in sorted(ROOT.glob("*/**/*.ipynb")):
        if ".venv" in path.parts or ".ipynb_checkpoints" in path.parts:
            continue
        nb = json.loads(path.read_text())
        yield path, "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    for path in sorted(ROOT.glob("solutions/*/judge*.py")):
        yield path, path.read_text()


def test_all_is_explicit_and_complete():
    assert isinstance(ag.__all__, list) and len(ag.__all__) == len(set(ag.__all__))
    missing = [n for n in ag.__all__ if not hasattr(ag, n)]
    assert not missing, missing


def test_every_name_the_notebooks_use_is_in_all():
    used = {}
    for path, text in _sources():
        for name in re.findall(r"\bag\.([A-Za-z_]\w*)", text):
            used.setdefault(name, path.relative_to(ROOT).as_posix())
    assert len(used) > 10
    not_public = {n: where for n, where in used.items() if n not in ag.__all__ and n != "__version__"
                  and not hasattr(getattr(ag, n, None), "__file__")}   # submodules (ag.device, ...) are fine
    assert not not_public, not_public
