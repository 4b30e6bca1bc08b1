"""nbgrader's gradebook, as grading uses it.

- :func:`template_gradebook`: the source notebook's cells recorded once per source version
  (``generate_assignment``'s ``SaveCells``), cached, and copied for each submission:
  :func:`scratch_gradebook` (nothing is written into the checkout);
- :func:`save_autogrades`: nbgrader's ``SaveAutoGrades`` on the executed notebook, read back
  as the per-test rows of a result.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from ..common.course import cache_dir, test_cells

STUDENT = "learner"


# Packages whose ``__init__`` imports far more than grading uses: nbgrader's loads its Jupyter
# server extensions (formgrader, assignment and course lists: about half a second), the
# preprocessors' packages every preprocessor, nbconvert's every exporter (Jinja2, Mistune,
# Pygments...). Grading imports only a few of their submodules.
LAZY_PACKAGES = ("nbgrader", "nbgrader.preprocessors", "nbgrader.auth", "nbconvert", "nbconvert.preprocessors",
                 "nbconvert.exporters")  # nbgrader.auth: the gradebook needs its Authenticator, not requests


def import_nbgrader() -> None:
    """Make nbgrader's and nbconvert's packages (:data:`LAZY_PACKAGES`) import lazily: each is
    then a module with the package's ``__path__`` whose names (those its ``__init__`` imports,
    ``from .base import Preprocessor``...) are imported on first use, one submodule at a time;
    any other name (``__all__``, a function the ``__init__`` defines) runs the real ``__init__``
    first. Grading then loads about 0.25 s less of CPU on every command. Does nothing for a
    package already imported (in full, or this way)."""
    for name in LAZY_PACKAGES:
        _lazy_package(name)
    _lazy_archive_util()


def _lazy_package(name: str) -> None:
    import ast
    import importlib
    import importlib.util
    import threading
    import types

    if name in sys.modules:
        return
    parent, _, child = name.rpartition(".")
    if parent and parent not in sys.modules:
        return  # its parent was left alone: so is it
    try:
        spec = importlib.util.find_spec(name)
        source = spec.loader.get_source(name) if spec is not None and spec.submodule_search_locations else None
        tree = ast.parse(source or "")
    except Exception:  # noqa: BLE001 - not installed, or unreadable: the usual import says why
        return
    if source is None:
        return
    names = {}  # name -> (module it is read from, its name there, whether it is that module's submodule)
    statements = list(tree.body)
    while statements:  # the module's own imports, also under try and if (not in its functions)
        node = statements.pop()
        if isinstance(node, (ast.Try, ast.If)):
            statements += node.body + node.orelse + getattr(node, "finalbody", [])
            statements += [s for h in getattr(node, "handlers", []) for s in h.body]
        elif isinstance(node, ast.ImportFrom):
            module = importlib.util.resolve_name("." * node.level + (node.module or ""), name) \
                if node.level else node.module
            for alias in node.names:
                if alias.name != "*":
                    names[alias.asname or alias.name] = (module, alias.name, node.level > 0 and not node.module)
    package = types.ModuleType(name, f"{name}, its names imported when first used")
    package.__spec__, package.__file__, package.__loader__ = spec, spec.origin, spec.loader
    package.__path__, package.__package__ = list(spec.submodule_search_locations), name
    lock = threading.RLock()

    def full():
        with lock:
            if package.__dict__.pop("__getattr__", None) is not None:
                spec.loader.exec_module(package)  # the real __init__, in this module

    def lazy(attr):
        where = names.get(attr)
        if where is None:
            if attr.startswith("__") and attr != "__all__":  # what the import system asks of any module
                raise AttributeError(attr)
            if importlib.util.find_spec(f"{name}.{attr}") is not None:
                raise AttributeError(attr)  # a submodule not imported yet (``from . import utils``): the import system imports it
            full()
            return getattr(package, attr)
        module, inner, submodule = where
        value = (importlib.import_module(f"{module}.{inner}") if submodule
                 else getattr(importlib.import_module(module), inner))
        setattr(package, attr, value)
        return value

    package.__getattr__ = lazy
    sys.modules[name] = package
    if parent:
        setattr(sys.modules[parent], child, package)


def _lazy_archive_util() -> None:
    """``nbgrader.utils`` imports three functions of ``setuptools.archive_util`` (for unpacking
    zip files), and that import loads setuptools and ``pkg_resources``, which scans every
    installed distribution: about 0.13 s of CPU on every command, for functions grading never
    calls. Until one of them is called, stand-ins that import the real module then take their
    place; once setuptools is imported, this does nothing."""
    name = "setuptools.archive_util"
    if "setuptools" in sys.modules or name in sys.modules:
        return
    import importlib
    import importlib.util
    import types

    try:
        if importlib.util.find_spec("setuptools") is None:
            return
    except (ImportError, ValueError):
        return
    stand_in = types.ModuleType(name, "setuptools.archive_util, imported when first used")

    def real():
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]
        return importlib.import_module(name)

    def forward(attr):
        def call(*args, **kwargs):
            return getattr(real(), attr)(*args, **kwargs)
        call.__name__ = call.__qualname__ = attr
        return call

    for attr in ("unpack_archive", "unpack_tarfile", "unpack_zipfile"):
        setattr(stand_in, attr, forward(attr))

    def anything_else(attr):
        if attr.startswith("__"):  # what the import system asks of any module (__path__, ...)
            raise AttributeError(attr)
        return getattr(real(), attr)

    stand_in.__getattr__ = anything_else
    sys.modules[name] = stand_in


def nbgrader_resources(assignment, notebook_id, db_url, workdir=None) -> dict:
    """The ``resources`` nbgrader's preprocessors expect for one notebook of ``assignment``."""
    res = {"nbgrader": {"assignment": assignment, "notebook": notebook_id, "student": STUDENT,
                        "db_url": db_url}, "unique_key": notebook_id}
    if workdir is not None:
        res["metadata"] = {"path": str(workdir)}
    return res


def ensure_tools_on_path():
    """nbgrader's gradebook runs the ``alembic`` command: make this Python's scripts findable."""
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def fast_alembic_version():
    """nbgrader asks the ``alembic`` command for its schema version on every new gradebook
    (a subprocess, seconds): ask once per process."""
    import nbgrader.api as api

    if not getattr(api.get_alembic_version, "_cached", False):
        version = api.get_alembic_version()
        cached = lambda: version  # noqa: E731
        cached._cached = True
        api.get_alembic_version = cached


def build_gradebook(source_path: Path, assignment: str, db_url: str):
    """Record the source notebook's cells in a gradebook, as ``generate_assignment`` does.

    Returns the released version of the notebook (solutions and hidden tests cleared).
    """
    import nbformat
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import (CheckCellMetadata, ClearHiddenTests, ClearOutput,
                                        ClearSolutions, ComputeChecksums, LockCells, SaveCells)

    nb = nbformat.read(str(source_path), as_version=4)
    notebook_id = source_path.stem
    with Gradebook(db_url) as gb:
        gb.update_or_create_assignment(assignment)
    res = nbgrader_resources(assignment, notebook_id, db_url)
    for pp in (LockCells, ClearSolutions, ClearOutput, CheckCellMetadata, ComputeChecksums,
               SaveCells, ClearHiddenTests, ComputeChecksums):
        nb, res = pp().preprocess(nb, res)
    return nb


def template_gradebook(source: Path, assignment: str) -> Path:
    """A gradebook holding the source notebook's cells, built once per source version and copied
    for every submission (nbgrader's gradebook is slow to create)."""
    import hashlib

    import nbgrader

    digest = hashlib.sha256(source.read_bytes() + assignment.encode() + nbgrader.__version__.encode()).hexdigest()[:20]
    path = cache_dir() / f"{assignment}-{digest}.db"
    if not path.exists():
        from nbgrader.api import Gradebook

        ensure_tools_on_path()
        fast_alembic_version()
        fd, tmp = tempfile.mkstemp(suffix=".db", dir=path.parent)
        os.close(fd)
        os.unlink(tmp)
        build_gradebook(source, assignment, f"sqlite:///{tmp}")
        with Gradebook(f"sqlite:///{tmp}") as gb:
            gb.update_or_create_student(STUDENT)
            gb.update_or_create_submission(assignment, STUDENT)
        os.replace(tmp, path)
    return path


def scratch_gradebook(source: Path, assignment: str, folder: Path) -> str:
    """A gradebook of one submission in ``folder`` (a copy of the template, readable by the
    grader only); returns its URL."""
    db_path = Path(folder) / "gradebook.db"
    shutil.copy(template_gradebook(source, assignment), db_path)
    os.chmod(db_path, 0o600)
    return f"sqlite:///{db_path}"


def save_autogrades(nb, res, source: Path, feedback: dict) -> list[dict]:
    """nbgrader's ``SaveAutoGrades`` on the executed notebook, then one row per test of the
    source: its points (zero for a test absent from ``feedback``, i.e. never scored) and, when it
    lost points, the learner-facing ``feedback`` for it."""
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import SaveAutoGrades

    SaveAutoGrades().preprocess(nb, res)
    info = res["nbgrader"]
    rows = []
    with Gradebook(info["db_url"]) as gb:
        submission = gb.find_submission_notebook(info["notebook"], info["assignment"], STUDENT)
        grades = {g.name: g for g in submission.grades}
        for grade_id, points in test_cells(source):
            g = grades.get(grade_id)
            got = float(g.auto_score) if g is not None and g.auto_score is not None else 0.0
            got = got if grade_id in feedback else 0.0
            rows.append({
                "grade_id": grade_id, "exercise": grade_id.removeprefix("test_"),
                "points": got, "max_points": points, "passed": got == points,
                "feedback": "" if got == points else (feedback.get(grade_id) or "This test did not run."),
            })
    return rows
