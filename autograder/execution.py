"""Executing a sanitized submission in a fresh, contained kernel, with nbclient's own loop.

:class:`GradingExecute` is nbgrader's ``Execute`` (an nbclient ``NotebookClient``) run through
``NotebookClient.execute`` and its hooks: a per-notebook deadline (``timeout_func`` and
``on_cell_start``), the execute reply of every cell recorded (``on_cell_executed``), huge outputs
cut, a watchdog that kills the kernel past the deadline, and the kernel's stdout/stderr sent to
``/dev/null``. After the notebook's own cells have run, while the kernel is still alive, every
callback of ``after_cells`` receives a :class:`LiveKernel` (the trusted judge plugs in there);
then the sandbox's processes are killed.

The *legacy guard* (:func:`install_guard`, :func:`guard_ran`) is the in-kernel restore-and-mark
of test cells that scores depend on until the judge replaces it.
"""
from __future__ import annotations

import inspect
import os
import signal
import threading
import time
from dataclasses import dataclass

from .sandbox import DEFAULT_CPU_LIMIT, kernel_env, kernel_limits, kernel_manager_class

DEFAULT_OUTPUT_LIMIT = 1_000_000  # characters of output kept per cell
_END_MARK = "autograder-end-of-notebook"  # metadata of the cell appended to run after-cell hooks


class OutOfTime(Exception):
    """The notebook's time limit is used up: no further cell is started."""


@dataclass
class LiveKernel:
    """The kernel of a graded notebook after its cells have run, still alive.

    ``client`` is nbclient's (asynchronous) kernel client; ``connection_info`` lets a callback
    open clients of its own (:meth:`blocking_client`); ``deadline`` is the notebook's
    (``time.monotonic()``); ``nb`` the executed notebook."""

    client: object
    manager: object
    nb: object
    deadline: float

    @property
    def connection_info(self) -> dict:
        return self.manager.get_connection_info(session=False)

    def blocking_client(self):
        """A new, started blocking client of this kernel (the caller stops its channels)."""
        from jupyter_client import BlockingKernelClient

        kc = BlockingKernelClient()
        kc.load_connection_info(self.connection_info)
        kc.start_channels()
        return kc


def make_executor(cell_timeout: int, deadline: float, cpu_limit: int = DEFAULT_CPU_LIMIT,
                  home=None, box=None, box_dir=None, after_cells=()):
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
            self.replies = {}       # cell index -> execute reply content
            self.skipped = set()    # code cells not started (the notebook's time was up)
            self.died_at = None     # index of the cell during which the kernel died
            self.timed_out = set()  # cells that did not finish within their time
            self.after_cells_error = None
            self.current = -1
            self.sandbox_ended = False  # every process of the sandbox killed once the replies were in

        # -- nbclient hooks
        def _cell_start(self, cell, cell_index):
            if cell.cell_type == "raw" and cell.metadata.get(_END_MARK):
                return self._run_after_cells()
            self.current = cell_index
            remaining = deadline - time.monotonic()
            if remaining <= 1 and cell.cell_type == "code":
                raise OutOfTime

        def _cell_timeout(self, cell):
            return int(max(1, min(cell_timeout, deadline - time.monotonic())))

        def on_cell_executed(self, **kwargs):
            super().on_cell_executed(**kwargs)
            content = kwargs["execute_reply"]["content"]
            self.replies[kwargs["cell_index"]] = content
            if content.get("ename") == "CellTimeoutError":
                self.timed_out.add(kwargs["cell_index"])
            cell = kwargs["cell"]
            size = sum(len(str(o)) for o in cell.get("outputs", []))
            if size > DEFAULT_OUTPUT_LIMIT:  # keep the graded notebook small (and the guard's mark)
                marks = [o for o in cell.get("outputs", []) if _GUARD_MIME in o.get("data", {})]
                cell.outputs = marks[:1] + [new_output(
                    "stream", name="stdout", text=f"[{size} characters of output removed by the grader]")]

        async def _run_after_cells(self):
            live = LiveKernel(self.kc, self.km, self.nb, deadline)
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
            prov = getattr(getattr(self, "km", None), "provisioner", None)
            pgid = getattr(prov, "pgid", None)
            try:
                if pgid:
                    os.killpg(pgid, signal.SIGKILL)
                elif getattr(prov, "pid", None):
                    os.kill(prov.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass
            if box is not None and not self.sandbox_ended:
                box.kill_all()  # the namespace's init is gone; so is anything that left the group

        def _end_sandbox(self):
            """Every reply is in: kill the sandbox's processes (the kernel first among them) and
            let ``unshare`` reap the kernel, rather than a graceful shutdown (a second of wall
            time) or killing ``unshare`` first (the kernel's CPU time would then go uncounted)."""
            if not contained:
                return
            box.kill_all()
            self.sandbox_ended = True
            process = getattr(getattr(self.km, "provisioner", None), "process", None)
            try:
                if process is not None:
                    process.wait(timeout=5)
            except Exception:  # noqa: BLE001 - cleanup kills it anyway
                pass

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
                self.execute(stdout=devnull, stderr=devnull, stdin=devnull, env=kernel_env(home),
                             preexec_fn=kernel_limits(cpu_limit, box))
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
                nb.cells = [c for c in nb.cells if not c.metadata.get(_END_MARK)]
                self.nb = nb
            for index, cell in enumerate(nb.cells):
                if cell.cell_type == "code" and index not in self.replies:
                    if self.died_at is None or index < self.died_at:
                        self.skipped.add(index)
            return self.nb, self.resources

    extra = {}
    if contained:
        extra["kernel_manager_class"] = kernel_manager_class(box, box_dir)
    # "immediate": every reply is in, and whatever the kernel's atexit hooks would do is of no
    # use to grading (a graceful shutdown of a JAX kernel costs a second of wall time).
    return GradingExecute(timeout=cell_timeout, interrupt_on_timeout=True, allow_errors=True,
                          error_on_timeout={"ename": "CellTimeoutError",
                                            "evalue": "the cell ran past its time limit"},
                          kernel_name="python3", record_timing=False, startup_timeout=120,
                          shutdown_kernel="immediate", **extra)


def feedback_for(reply, index, executor, cell_timeout) -> str:
    """What a learner is told about test cell ``index`` that did not pass."""
    if reply is None:
        if index in executor.skipped and executor.died_at is None:
            return "Not run: the notebook's time limit was used up before this test."
        if executor.died_at is not None and index >= executor.died_at:
            return ("Not run to completion: the kernel died or was stopped (an exit, a crash, "
                    "too much memory, or the time limit) before this test finished.")
        return f"Did not finish within {cell_timeout} s: an infinite loop or a very slow answer?"
    if reply.get("status") == "ok":
        return ""
    ename, evalue = reply.get("ename", "Error"), (reply.get("evalue") or "").strip()
    if ename == "ExerciseFailure":
        return evalue
    if ename in ("CellTimeoutError", "KeyboardInterrupt"):
        return f"Did not finish within the time limit ({cell_timeout} s per cell): an infinite loop?"
    if ename == "NameError":
        return (f"{ename}: {evalue}. The exercise's function is not defined: run its answer cell, "
                "and keep the function's name as given.")
    return f"The test raised {ename}: {evalue}"[:1000]


# --------------------------------------------------------------------------- the legacy guard

_GUARD_MIME = "application/x-autograder-guard"

_GUARD_SETUP = """\
def _autograder_guard_factory(token):
    import builtins, sys, threading, types
    import numpy, numpy.testing, jax, jax.numpy
    import importlib, pkgutil
    import autograder
    for info in pkgutil.iter_modules(autograder.__path__):
        if info.name not in ("__main__", "grading", "batch", "instructor", "course", "submission",
                             "gradebook", "sandbox", "execution", "result", "launch", "judge", "wire"):
            importlib.import_module("autograder." + info.name)
    full = {n: m for n, m in list(sys.modules.items())
            if n == "autograder" or n.startswith("autograder.")}
    partial = {n: sys.modules[n] for n in ("numpy", "numpy.testing", "jax", "jax.numpy")}
    snaps = {n: dict(m.__dict__) for n, m in {**full, **partial}.items()}
    hooks = autograder.feedback.AFTER_LEARNER_CODE
    # Function objects can be changed in place (f.__code__ = ...): keep what they were.
    funcs, classes = [], []
    for n, m in {**full, **partial}.items():
        for v in list(vars(m).values()):
            if isinstance(v, types.FunctionType):
                funcs.append((v, v.__code__, v.__defaults__, v.__kwdefaults__))
            elif isinstance(v, type) and n in full and v.__module__.startswith("autograder"):
                classes.append((v, dict(v.__dict__)))
                for w in list(vars(v).values()):
                    w = getattr(w, "__func__", w)
                    if isinstance(w, types.FunctionType):
                        funcs.append((w, w.__code__, w.__defaults__, w.__kwdefaults__))
    builtins_snap = dict(builtins.__dict__)
    trace, profile = sys.gettrace(), sys.getprofile()
    ip = get_ipython() if "get_ipython" in globals() else None
    if ip is not None:
        ip_manager, ip_custom = ip.input_transformer_manager, ip.custom_exceptions
        # (owner, attribute, the list, its items): both the list and what it holds come back
        ip_lists = [(o, a, getattr(o, a), list(getattr(o, a))) for o, a in
                    ((ip_manager, "cleanup_transforms"), (ip_manager, "line_transforms"),
                     (ip_manager, "token_transformers"),
                     (ip, "input_transformers_post"), (ip, "ast_transformers"))]
        names = ("transform_cell", "transform_ast", "run_cell", "_run_cell", "run_cell_async",
                 "run_ast_nodes", "run_code", "showtraceback", "user_expressions", "ev", "ex")
        ip_classes = [(c, {k: vars(c)[k] for k in names if k in vars(c)})
                      for c in (*type(ip).__mro__, *type(ip_manager).__mro__) if c is not object]
    class ReadOnlyModule(types.ModuleType):
        def __setattr__(self, name, value):
            raise AttributeError(f"{self.__name__} is read-only while grading")
        def __delattr__(self, name):
            raise AttributeError(f"{self.__name__} is read-only while grading")
    def restore():
        for n, m in {**full, **partial}.items():
            sys.modules[n] = m
            d = m.__dict__
            if n in full:
                for k in [k for k in d if k not in snaps[n]]:
                    del d[k]
                if type(m) is not ReadOnlyModule:
                    m.__class__ = ReadOnlyModule
            d.update(snaps[n])
        for f, code, defaults, kwdefaults in funcs:
            if f.__code__ is not code:
                f.__code__ = code
            if f.__defaults__ is not defaults:
                f.__defaults__ = defaults
            if f.__kwdefaults__ is not kwdefaults:
                f.__kwdefaults__ = kwdefaults
        for c, attrs in classes:
            for k, v in attrs.items():
                if k not in ("__dict__", "__weakref__") and vars(c).get(k) is not v:
                    type.__setattr__(c, k, v)
        for k, v in builtins_snap.items():
            if builtins.__dict__.get(k) is not v:
                builtins.__dict__[k] = v
        sys.settrace(trace)
        sys.setprofile(profile)
        threading.settrace(None)
        threading.setprofile(None)
        if ip is not None:
            ip.input_transformer_manager, ip.custom_exceptions = ip_manager, ip_custom
            for owner, attr, lst, items in ip_lists:
                if getattr(owner, attr) is not lst:
                    setattr(owner, attr, lst)
                if lst != items:
                    lst[:] = items
            for k in names:
                if k in vars(ip):  # a method shadowed on the instance
                    delattr(ip, k)
            for c, methods in ip_classes:
                for k in names:
                    if k in methods and vars(c).get(k) is not methods[k]:
                        type.__setattr__(c, k, methods[k])
                    elif k not in methods and k in vars(c):
                        type.__delattr__(c, k)
            ip.events = events
            ensure_after_cell()
        hooks[:] = [restore]
    def after_cell(*_):
        restore()
    def guard(index):
        restore()
        if ip is not None:
            from IPython.display import display
            hm = ip.history_manager
            raw, parsed = hm.input_hist_raw[-1], hm.input_hist_parsed[-1]
            # what ran is not what IPython itself makes of the cell (history drops the last newline)
            if ip.transform_cell(raw).rstrip() != parsed.rstrip():
                raise autograder.feedback.ExerciseFailure(
                    "tampering", "this test cell was changed before it ran (an input "
                    "transformer installed by a learner cell?); it does not count.")
            display({"@MIME@": f"{token}:{index}"}, raw=True)
    def ensure_after_cell():
        # restore after every cell, so that what a learner cell changes is undone before the
        # next cell (a test) is even transformed; other hooks (matplotlib's, the learner's) stay
        callbacks = events.callbacks.setdefault("post_run_cell", [])
        if after_cell not in callbacks:
            callbacks.append(after_cell)
    if ip is not None:
        events = ip.events
        ensure_after_cell()
    restore()
    return guard
__import__("builtins").__dict__["@NAME@"] = _autograder_guard_factory("@TOKEN@")
del _autograder_guard_factory
"""


def install_guard(nb) -> str:
    """Restore pristine modules before every test.

    A first cell, run before any learner code, snapshots the namespaces of the
    ``autograder`` modules, NumPy and ``jax.numpy``; every test cell then starts by
    restoring them, so patches made by learner cells (``ag.check_close = ...``,
    ``np.allclose = lambda *a, **k: True``) are undone before the test runs.
    """
    import secrets

    from nbformat.v4 import new_code_cell
    from nbgrader import utils

    name, token = f"_{secrets.token_hex(12)}", secrets.token_hex(16)
    setup = _GUARD_SETUP.replace("@NAME@", name).replace("@TOKEN@", token).replace("@MIME@", _GUARD_MIME)
    nb.cells.insert(0, new_code_cell(setup))
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and utils.is_grade(cell) and not utils.is_solution(cell):
            cell.source = f"{name}({index})\n" + cell.source
    return token


def guard_ran(cell, index: int, token: str) -> bool:
    """The guard at the top of test cell ``index`` ran as written: it left its mark, which a
    test cell rewritten by the learner's code (an input transformer) does not."""
    want = f"{token}:{index}"
    return any(o.get("output_type") == "display_data" and o.get("data", {}).get(_GUARD_MIME) == want
               for o in cell.get("outputs", []))


