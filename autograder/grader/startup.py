"""What a grading command imports and prepares once, before its first notebook.

Four sides, each needed at a later point of a notebook's grading:

* :func:`kernel_side` (jupyter_client, the kernelspec): to start its kernel;
* :func:`notebook_side` (nbformat, its schema's validator): to read the notebook, once its
  kernel has started;
* :func:`grading_side` (nbgrader and its gradebook's ORM, about 0.8 s): to sanitize the
  submission and score it;
* :func:`judge_side` (JAX, about 1.3 s): only once the notebook's cells have run, when the
  judge reads and runs the learner's programs; :func:`package_side` (the package's checks,
  channel and Kernel, with NumPy) then too, imported by the judge's own thread where it is not
  imported before a fork.

A parallel batch imports them all in the parent before its grading processes fork (each
inherits them, and their pages stay shared). With one grading process (a learner's
one-notebook command, ``--jobs 1``) the parent imports only the kernel's side; the grading
process imports nbformat and nbgrader while its kernel boots (:mod:`~autograder.grader.pipeline`
starts the kernel first), and JAX in a thread of the pipeline's ``execute`` step while the kernel
runs the notebook (:func:`judge_side_niced`; the step ends when both are done): none is then
added to the notebook's time.

Neither side starts a thread of its own or a JAX backend (a process may still fork after it).
Best effort: what fails here is done (or reported) by the grading itself.
"""
from __future__ import annotations

import threading

def kernel_side() -> None:
    """What starting a kernel needs (jupyter_client, the kernelspec)."""
    from jupyter_client.manager import AsyncKernelManager  # noqa: F401

    _quietly(_kernelspec_ready)


def notebook_side() -> None:
    """What reading a notebook needs (nbformat, its schema's validator): a one-notebook command
    imports it after its kernel has started (pipeline's read_notebook)."""
    import nbformat  # noqa: F401

    _quietly(_validator_ready)


def grading_side() -> None:
    import nbformat  # noqa: F401
    import concurrent.futures.thread  # noqa: F401 - the judge's test threads (loaded on first use)

    import nbgrader.api  # noqa: F401
    from nbgrader.preprocessors import (CheckCellMetadata, ClearOutput, DeduplicateIds, Execute,  # noqa: F401
                                        OverwriteCells, SaveAutoGrades)

    _quietly(_gradebook_ready)


def judge_side() -> None:
    """JAX for the judge: imported, never started (no backend, no thread). Third-party modules
    only: the grading's own thread imports the package's modules meanwhile, and two threads
    importing one circle of modules could each hold a part of it."""
    import jax.extend  # the judge reads programs' primitives with it (checkify, pallas)
    import jax.numpy  # noqa: F401
    from jaxlib.mlir.dialects import builtin, mhlo  # noqa: F401 - read with a learner's program


def before_fork(parallel: bool) -> None:
    """What a batch imports once, before its grading processes fork: each inherits it. One
    grading process (a learner's one-notebook command, ``--jobs 1``) imports nearly all of it
    itself, while its first kernel boots and runs."""
    kernel_side()
    if parallel:
        notebook_side()
        grading_side()
        judge_side()
        from .. import judge
        from ..agent import fixtures  # noqa: F401 - the judge's side
        from ..judge import allowlist, mlir, programs, runner  # noqa: F401
        from ..sandbox import containment, kernel_manager, probe  # noqa: F401

        package_side()
        judge.ensure_judge_devices()  # before JAX starts: a grading process judges every chapter


def package_side() -> None:
    """Every name of ``autograder``'s and ``autograder.judge``'s ``__all__`` (loaded on first use
    otherwise): the checks, the channel and the Kernel a judge uses."""
    import autograder
    import autograder.judge

    for package in (autograder, autograder.judge):
        for name in package.__all__:
            getattr(package, name)


def judge_side_niced() -> None:
    """:func:`judge_side` at a lower priority (the pipeline's ``execute`` runs it in a thread
    beside the kernel running the notebook): on Linux a thread's nice value is its own, and the
    kernel, whose time the learner waits for, comes first."""
    import os

    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass
    _quietly(judge_side)


def _quietly(step) -> None:
    try:
        step()
    except Exception:  # noqa: BLE001 - done, or reported, by the grading itself
        pass


def _gradebook_ready():
    import sqlite3  # noqa: F401 - the scratch gradebooks are SQLite files

    import sqlalchemy.dialects.sqlite  # noqa: F401
    from sqlalchemy.orm import configure_mappers

    configure_mappers()  # nbgrader's ORM classes, set up on their first query otherwise


def _validator_ready():
    import nbformat

    nbformat.validate(nbformat.v4.new_notebook())  # compiles nbformat's schema validator


def _kernelspec_ready():
    from ..sandbox.kernel_manager import kernel_specs

    kernel_specs().get_kernel_spec("python3")  # imports ipykernel's kernelspec
