"""Executing a sanitized submission in a fresh, contained kernel, with nbclient's own loop.

:class:`GradingExecute` is nbgrader's ``Execute`` (an nbclient ``NotebookClient``) run through
``NotebookClient.execute`` and its hooks: a per-notebook deadline (``timeout_func`` and
``on_cell_start``), huge outputs cut (``on_cell_executed``), a watchdog that kills the kernel
past the deadline, and the kernel's stdout/stderr sent to ``/dev/null``. After the notebook's
own cells have run, while the kernel is still alive, every callback of ``after_cells``
receives a :class:`LiveKernel` (the trusted judge plugs in there); then the sandbox's
processes are killed. Nothing the kernel replies about its own cells decides a grade: the
judge does, from data.
"""
from __future__ import annotations

import inspect
import os
import signal
import threading
import time
from dataclasses import dataclass

from ..sandbox.environment import kernel_env
from ..sandbox.kernel_manager import kernel_manager_class
from ..sandbox.launch import DEFAULT_CPU_LIMIT

DEFAULT_OUTPUT_LIMIT = 1_000_000  # characters of output kept per cell
_END_MARK = "autograder-end-of-notebook"  # metadata of the cell appended to run after-cell hooks


class OutOfTime(Exception):
    """The notebook's time limit is used up: no further cell is started."""


@dataclass
class LiveKernel:
    """The kernel of a graded notebook after its cells have run, still alive: its ``manager``
    and the notebook's ``deadline`` (``time.monotonic()``)."""

    manager: object
    deadline: float

    def blocking_client(self):
        """A new, started blocking client of this kernel (the caller stops its channels)."""
        from jupyter_client import BlockingKernelClient

        kc = BlockingKernelClient()
        kc.load_connection_info(self.manager.get_connection_info(session=False))
        kc.start_channels()
        return kc


def early_kernel(home, box, box_dir, cwd):
    """A fresh kernel for one notebook, started now (the manager :func:`make_executor`'s executor
    will use): it boots while the grading prepares the rest. ``None`` when it cannot start: the
    executor then starts one itself, and reports its failure as for any kernel."""
    from jupyter_core.utils import run_sync

    contained = box is not None and box.uid is not None
    km = kernel_manager_class(box, box_dir, DEFAULT_CPU_LIMIT)(kernel_name=KERNEL_NAME)
    try:
        with open(os.devnull, "wb") as devnull:
            run_sync(km.start_kernel)(extra_arguments=["--HistoryManager.hist_file=:memory:"],
                                      cwd=str(cwd), stdout=devnull, stderr=devnull, stdin=devnull,
                                      env=kernel_env(home, contained))
    except Exception:  # noqa: BLE001 - started again by the executor, which reports its failure
        kill_kernel(km)
        return None
    return km


def _sigkill(km) -> None:
    """SIGKILL the kernel of manager ``km`` (its process group where it has one)."""
    prov = getattr(km, "provisioner", None)
    pgid = getattr(prov, "pgid", None)
    try:
        if pgid:
            os.killpg(pgid, signal.SIGKILL)
        elif getattr(prov, "pid", None):
            os.kill(prov.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def _reap(km) -> None:
    """Wait (5 s at most) for the process that started the kernel of manager ``km`` to end."""
    process = getattr(getattr(km, "provisioner", None), "process", None)
    try:
        if process is not None:
            process.wait(timeout=5)
    except Exception:  # noqa: BLE001 - cleanup kills it anyway
        pass


def kill_kernel(km) -> None:
    """Kill an early kernel that no executor took, and reap it (the sandbox's other processes
    die with the sandbox)."""
    _sigkill(km)
    _reap(km)


KERNEL_NAME = "python3"


def make_executor(cell_timeout: int, deadline: float, home=None, box=None, box_dir=None, after_cells=()):
    """The executor of one submission (see the module's docstring); ``after_cells``: callables
    ``f(live: LiveKernel)`` (or coroutine functions), run in order after the notebook's cells."""
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError
    from nbformat.v4 import new_output, new_raw_cell
    from nbgrader.preprocessors import Execute

    contained = box is not None and box.uid is not None

    class GradingExecute(Execute):
        """nbgrader's Execute with a notebook deadline, a watchdog, and the replies recorded."""

        def __init__(self, **kw):
            super().__init__(**kw)
            self.died_at = None     # index of the cell during which the kernel died
            self.after_cells_error = None
            self.current = -1
            self.sandbox_ended = False  # every process of the sandbox killed once the replies were in

        # -- nbclient hooks
        def _cell_start(self, cell, cell_index):
            if cell.cell_type == "raw" and cell.metadata.get(_END_MARK):
                return self._run_after_cells()
            self.current = cell_index
            if cell.cell_type == "code" and deadline - time.monotonic() <= 1:
                raise OutOfTime

        def _cell_timeout(self, cell):
            return int(max(1, min(cell_timeout, deadline - time.monotonic())))

        def on_cell_executed(self, **kwargs):
            super().on_cell_executed(**kwargs)
            cell = kwargs["cell"]
            size = sum(len(str(o)) for o in cell.get("outputs", []))
            if size > DEFAULT_OUTPUT_LIMIT:  # keep the graded notebook small
                cell.outputs = [new_output(
                    "stream", name="stdout", text=f"[{size} characters of output removed by the grader]")]

        async def _run_after_cells(self):
            live = LiveKernel(self.km, deadline)
            try:
                for callback in after_cells:
                    if time.monotonic() >= deadline:
                        break
                    out = callback(live)
                    if inspect.isawaitable(out):
                        await out
            except Exception as exc:  # noqa: BLE001 - reported by the caller
                self.after_cells_error = exc
            self._end_sandbox()

        # -- the kernel's end
        def _kill(self):
            _sigkill(getattr(self, "km", None))
            if box is not None and not self.sandbox_ended:
                box.kill_all()  # the namespace's init is gone; so is anything that left the group

        def _end_sandbox(self):
            """Every reply is in: kill the sandbox's processes (the kernel first among them) and
            let the sandbox's launcher reap the kernel, rather than a graceful shutdown (a second
            of wall time) or killing the launcher first (the kernel's CPU time would then go
            uncounted)."""
            if not contained:
                return
            box.kill_all()
            self.sandbox_ended = True
            _reap(self.km)

        def preprocess(self, nb, resources=None, km=None):
            NotebookClient.__init__(self, nb, km)  # as nbconvert's ExecutePreprocessor does
            self._check_assign_resources(resources)
            self.on_cell_start = self._cell_start
            self.timeout_func = self._cell_timeout
            nb.cells.append(new_raw_cell("", metadata={_END_MARK: True}))
            devnull = open(os.devnull, "wb")  # noqa: SIM115 - closed below
            watchdog = threading.Timer(max(1.0, deadline - time.monotonic() + 5), self._kill)
            watchdog.daemon = True
            watchdog.start()
            try:
                self.execute(stdout=devnull, stderr=devnull, stdin=devnull, env=kernel_env(home, contained))
            except OutOfTime:
                pass
            except DeadKernelError:
                self.died_at = self.current
            except Exception:  # noqa: BLE001 - the kernel died while starting, running or stopping
                if self.died_at is None:
                    self.died_at = self.current
            finally:
                watchdog.cancel()
                devnull.close()
                self._kill()
                if not self.owns_km and self.kc is not None:  # an early kernel's: nbclient leaves it open
                    try:
                        self.kc.stop_channels()
                    except Exception:  # noqa: BLE001
                        pass
                nb.cells = [c for c in nb.cells if not c.metadata.get(_END_MARK)]
                self.nb = nb
            return self.nb, self.resources

    # "immediate": every reply is in, and whatever the kernel's atexit hooks would do is of no
    # use to grading (a graceful shutdown of a JAX kernel costs a second of wall time).
    return GradingExecute(timeout=cell_timeout, interrupt_on_timeout=True, allow_errors=True,
                          error_on_timeout={"ename": "CellTimeoutError",
                                            "evalue": "the cell ran past its time limit"},
                          kernel_name=KERNEL_NAME, record_timing=False, startup_timeout=120,
                          shutdown_kernel="immediate",
                          kernel_manager_class=kernel_manager_class(box, box_dir, DEFAULT_CPU_LIMIT))
