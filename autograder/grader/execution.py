"""Executing a sanitized submission in a fresh, contained kernel, with nbclient's own API.

:class:`GradingClient` is nbgrader's ``Execute`` (an nbclient ``NotebookClient``).
:meth:`~GradingClient.kernel_open` holds the kernel open with nbclient's own
``setup_kernel`` while the pipeline runs its steps on it: :meth:`~GradingClient.run_cells`
(the notebook's own cells, nbclient's ``execute_cell`` each, under a per-notebook deadline:
``timeout_func`` and ``on_cell_start``; huge outputs cut: ``on_cell_executed``), then the judge
on the :class:`LiveKernel` it yields. A watchdog kills the kernel past the deadline; the
kernel's stdout/stderr go to ``/dev/null``; when the block ends, every process of the sandbox
is killed. Nothing the kernel replies about its own cells decides a grade: the judge does,
from data.
"""
from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass

from ..sandbox.environment import kernel_env
from ..sandbox.kernel_manager import kernel_manager_class
from ..sandbox.launch import DEFAULT_CPU_LIMIT

DEFAULT_OUTPUT_LIMIT = 1_000_000  # characters of output kept per cell


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
    """A fresh kernel for one notebook, started now (the manager :func:`make_client`'s client
    holds open later): it boots while the grading prepares the rest. ``None`` when it cannot
    start: the client then starts one itself, and reports its failure as for any kernel."""
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

# The reply a cell that ran past its time limit gets (the kernel is interrupted, and the next
# cells run). Every field of an error reply: nbgrader's Execute copies the traceback into the
# cell's outputs, and a reply without one raised KeyError there, which ended the whole run as
# if the kernel had died (every test of the notebook at zero, its other answers included).
TIMEOUT_ERROR = {"ename": "CellTimeoutError", "evalue": "the cell ran past its time limit",
                 "traceback": ["CellTimeoutError: the cell ran past its time limit; the kernel was "
                               "interrupted and the next cells ran"]}


def make_client(cell_timeout: int, deadline: float, home=None, box=None, box_dir=None):
    """The client of one submission's kernel (see the module's docstring)."""
    from jupyter_core.utils import ensure_async, run_sync
    from nbclient import NotebookClient
    from nbclient.exceptions import DeadKernelError
    from nbformat.v4 import new_output
    from nbgrader.preprocessors import Execute

    contained = box is not None and box.uid is not None

    class GradingClient(Execute):
        """nbgrader's Execute, held open by :meth:`kernel_open`, with a notebook deadline and a
        watchdog."""

        def __init__(self, **kw):
            super().__init__(**kw)
            self.died_at = None     # index of the cell during which the kernel died (-1: it never started)
            self.finished = False   # every cell ran, before the deadline
            self.current = -1
            self.sandbox_ended = False  # every process of the sandbox killed once the replies were in
            self.output_seen: dict = {}  # characters of output each cell sent (its index -> count)

        # -- nbclient hooks
        def _cell_start(self, cell, cell_index):
            self.current = cell_index
            if cell.cell_type == "code" and deadline - time.monotonic() <= 1:
                raise OutOfTime

        def _cell_timeout(self, cell):
            return int(max(1, min(cell_timeout, deadline - time.monotonic())))

        def output(self, outs, msg, display_id, cell_index):
            # Kept while the cell runs up to the limit, then dropped: a cell that prints without
            # end grew this process's memory (1.2 GB in 30 s) until its cap or the time limit.
            seen = self.output_seen.get(cell_index, 0) + len(str(msg.get("content", "")))
            self.output_seen[cell_index] = seen
            if seen > DEFAULT_OUTPUT_LIMIT:
                return None
            return super().output(outs, msg, display_id, cell_index)

        def on_cell_executed(self, **kwargs):
            super().on_cell_executed(**kwargs)
            cell = kwargs["cell"]
            size = max(self.output_seen.get(kwargs.get("cell_index"), 0),
                       sum(len(str(o)) for o in cell.get("outputs", [])))
            if size > DEFAULT_OUTPUT_LIMIT:  # keep the graded notebook small
                cell.outputs = [new_output(
                    "stream", name="stdout", text=f"[{size} characters of output removed by the grader]")]

        # -- the kernel, held open
        @contextmanager
        def kernel_open(self, nb, resources=None, km=None):
            """nbclient's ``setup_kernel`` on ``km`` (a kernel started early, or None: one is
            started here): yields the :class:`LiveKernel` (None when the kernel could not start,
            :attr:`died_at` -1) while the caller runs the notebook and judges it; then kills
            every process of the sandbox."""
            NotebookClient.__init__(self, nb, km)  # as nbconvert's ExecutePreprocessor does
            self._check_assign_resources(resources)
            self.on_cell_start = self._cell_start
            self.timeout_func = self._cell_timeout
            devnull = open(os.devnull, "wb")  # noqa: SIM115 - closed below
            watchdog = threading.Timer(max(1.0, deadline - time.monotonic() + 5), self._kill)
            watchdog.daemon = True
            watchdog.start()
            started = False
            try:
                with self.setup_kernel(stdout=devnull, stderr=devnull, stdin=devnull,
                                       env=kernel_env(home, contained)):
                    started = True
                    yield LiveKernel(self.km, deadline)
                    self._end_sandbox()  # every reply is in
            except Exception:  # the kernel died while starting (re-raised: any later error)
                if started:
                    raise
                self.died_at = -1
                yield None
            finally:
                watchdog.cancel()
                devnull.close()
                self._kill()
                if not self.owns_km and self.kc is not None:  # an early kernel's: nbclient leaves it open
                    try:
                        self.kc.stop_channels()
                    except Exception:  # noqa: BLE001
                        pass

        def run_cells(self) -> None:
            """The notebook's own cells, as nbclient's ``execute`` runs them in its kernel; a
            kernel that dies or a deadline that passes ends the run (:attr:`died_at`)."""
            try:
                run_sync(self._run_cells)()
            except OutOfTime:
                pass
            except DeadKernelError:
                self.died_at = self.current
            except Exception:  # noqa: BLE001 - the kernel died while running or stopping
                if self.died_at is None:
                    self.died_at = self.current

        async def _run_cells(self):
            info = await self.async_wait_for_reply(await ensure_async(self.kc.kernel_info()))
            if info is not None and "language_info" in info["content"]:
                self.nb.metadata["language_info"] = info["content"]["language_info"]
            for index, cell in enumerate(self.nb.cells):
                await self.async_execute_cell(cell, index, execution_count=self.code_cells_executed + 1)
            self.set_widgets_metadata()
            self.finished = True

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

    # "immediate": every reply is in, and whatever the kernel's atexit hooks would do is of no
    # use to grading (a graceful shutdown of a JAX kernel costs a second of wall time).
    return GradingClient(timeout=cell_timeout, interrupt_on_timeout=True, allow_errors=True,
                         error_on_timeout=TIMEOUT_ERROR,
                         kernel_name=KERNEL_NAME, record_timing=False, startup_timeout=120,
                         shutdown_kernel="immediate",
                         kernel_manager_class=kernel_manager_class(box, box_dir, DEFAULT_CPU_LIMIT))
