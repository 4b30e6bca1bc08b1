"""Grade learner notebooks the way an instructor's ``nbgrader autograde`` would, with stricter rules.

Built from nbgrader's own preprocessors, run in-process on a throw-away
gradebook in a temporary course directory (nothing is written into the
checkout):

1. the assignment's source notebook (``solutions/<assignment>/``) goes through
   nbgrader's ``ClearSolutions`` -> ``ComputeChecksums`` -> ``SaveCells``, as in
   ``generate_assignment``: the gradebook now holds every test cell *with* its
   hidden tests, and the released stub of every answer cell;
2. the submission goes through ``ClearOutput`` -> ``DeduplicateIds`` ->
   ``OverwriteKernelspec`` -> ``OverwriteCells`` (missing cells added back) ->
   ``CheckCellMetadata``, as in ``autograde``: edited, emptied, deleted,
   duplicated or retyped test cells are restored from the source;
3. it is executed in a fresh kernel (nbgrader's ``Execute``) under a per-cell
   and a per-notebook time limit, with the kernel's own stdout/stderr sent to
   ``/dev/null`` and a watchdog that kills the kernel's process group; as root,
   the kernel runs in a PID namespace of its own under an unprivileged uid of its
   own (:class:`Sandbox`), so it can write only its own folder and nothing it
   starts outlives its grading;
4. each test cell is scored from the kernel's *execute reply* for that cell
   (finished without error = full points), not from what it printed: outputs
   are replaced before nbgrader's ``SaveAutoGrades`` scores them, so stderr
   warnings cost nothing and displayed "results" earn nothing.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_CELL_TIMEOUT = 120
DEFAULT_NOTEBOOK_TIMEOUT = 600
STUDENT = "learner"


class GradingError(Exception):
    """A notebook that cannot be graded; the message says why, for a person."""


# --------------------------------------------------------------------------- locating things

def package_root() -> Path:
    """The directory that contains the ``autograder`` package."""
    return Path(__file__).resolve().parent.parent


def find_course_root(start: Path | None = None) -> Path:
    """The course root (the folder holding ``solutions/``).

    Looked up in ``$AUTOGRADER_COURSE_ROOT``, then upwards from ``start`` and the
    current directory, then beside the package (a checkout).
    """
    env = os.environ.get("AUTOGRADER_COURSE_ROOT")
    candidates = [Path(env)] if env else []
    for base in (start, Path.cwd()):
        if base is not None:
            base = Path(base).resolve()
            candidates += [base, *base.parents]
    candidates.append(package_root())
    for c in candidates:
        if (c / "solutions").is_dir():
            return c
    raise GradingError("cannot find the course's solutions/ folder: run from the course checkout "
                       "or set AUTOGRADER_COURSE_ROOT")


def source_notebook(assignment: str, root: Path) -> Path:
    """The nbgrader source notebook of ``assignment``."""
    folder = root / "solutions" / assignment
    if not folder.is_dir():
        known = sorted(p.name for p in (root / "solutions").iterdir() if p.is_dir())
        raise GradingError(f"unknown assignment {assignment!r} (the notebook's folder name); "
                           f"known assignments: {', '.join(known)}")
    preferred = folder / f"{assignment}.ipynb"
    if preferred.exists():
        return preferred
    notebooks = sorted(folder.glob("*.ipynb"))
    if len(notebooks) != 1:
        raise GradingError(f"assignment {assignment!r} has no single source notebook in {folder}")
    return notebooks[0]


# --------------------------------------------------------------------------- reading submissions

def read_submission(path: Path):
    """Read and validate a submitted notebook, upgrading old formats; raise GradingError if unusable."""
    import nbformat

    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError as exc:
        raise GradingError(f"no such file: {path}") from exc
    except OSError as exc:
        raise GradingError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GradingError(f"{path} is not a notebook: it is not valid JSON ({exc})") from exc
    if not isinstance(data, dict) or "nbformat" not in data:
        raise GradingError(f"{path} is not a Jupyter notebook (no 'nbformat' field)")
    try:
        nb = nbformat.reads(json.dumps(data), as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat raises many kinds
        raise GradingError(f"{path} is not a notebook nbformat can read: {exc}") from exc
    cells = []
    for cell in nb.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") not in ("code", "markdown", "raw"):
            continue
        cell.setdefault("metadata", nbformat.NotebookNode())
        if not isinstance(cell.metadata, dict):
            cell.metadata = nbformat.NotebookNode()
        src = cell.get("source", "")
        cell["source"] = "".join(src) if isinstance(src, list) else str(src)
        if cell.cell_type == "code":
            cell.setdefault("outputs", [])
            cell.setdefault("execution_count", None)
        nbg = cell.metadata.get("nbgrader")
        if nbg is not None and (not isinstance(nbg, dict) or not isinstance(nbg.get("grade_id", ""), str)):
            del cell.metadata["nbgrader"]
        cells.append(cell)
    nb.cells = cells
    return nb


# --------------------------------------------------------------------------- the gradebook

def _resources(assignment, notebook_id, db_url, workdir=None):
    res = {"nbgrader": {"assignment": assignment, "notebook": notebook_id, "student": STUDENT,
                        "db_url": db_url}, "unique_key": notebook_id}
    if workdir is not None:
        res["metadata"] = {"path": str(workdir)}
    return res


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
    res = _resources(assignment, notebook_id, db_url)
    for pp in (LockCells, ClearSolutions, ClearOutput, CheckCellMetadata, ComputeChecksums,
               SaveCells, ClearHiddenTests, ComputeChecksums):
        nb, res = pp().preprocess(nb, res)
    return nb


def fast_alembic_version():
    """nbgrader asks the ``alembic`` command for its schema version on every new gradebook
    (a subprocess, seconds): ask once per process."""
    import nbgrader.api as api

    if not getattr(api.get_alembic_version, "_cached", False):
        version = api.get_alembic_version()
        cached = lambda: version  # noqa: E731
        cached._cached = True
        api.get_alembic_version = cached


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "jax-course-autograder"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _template_gradebook(source: Path, assignment: str) -> Path:
    """A gradebook holding the source notebook's cells, built once per source version and copied
    for every submission (nbgrader's gradebook is slow to create)."""
    import hashlib

    import nbgrader

    digest = hashlib.sha256(source.read_bytes() + assignment.encode() + nbgrader.__version__.encode()).hexdigest()[:20]
    path = _cache_dir() / f"{assignment}-{digest}.db"
    if not path.exists():
        ensure_tools_on_path()
        fast_alembic_version()
        fd, tmp = tempfile.mkstemp(suffix=".db", dir=path.parent)
        os.close(fd)
        os.unlink(tmp)
        build_gradebook(source, assignment, f"sqlite:///{tmp}")
        with __import__("nbgrader.api", fromlist=["Gradebook"]).Gradebook(f"sqlite:///{tmp}") as gb:
            gb.update_or_create_student(STUDENT)
            gb.update_or_create_submission(assignment, STUDENT)
        os.replace(tmp, path)
    return path


_SOURCES: dict = {}


def _read_source(source: Path):
    """The source notebook, parsed once per process and version (callers must not modify it)."""
    import nbformat

    st = os.stat(source)
    key = (str(source), st.st_mtime_ns, st.st_size)
    if key not in _SOURCES:
        _SOURCES[key] = nbformat.read(str(source), as_version=4)
    return _SOURCES[key]


def test_cells(source_path: Path):
    """``[(grade_id, points)]`` of the autograded test cells of a source notebook, in order.

    Read as nbgrader's ``is_grade`` and ``is_solution`` do, without importing nbgrader: the list
    is also what a result reports when grading itself failed (nbgrader unusable included)."""
    nb = _read_source(Path(source_path))
    tests = []
    for c in nb.cells:
        meta = c.get("metadata", {}).get("nbgrader", {})
        if c.get("cell_type") == "code" and meta.get("grade", False) and not meta.get("solution", False):
            tests.append((meta["grade_id"], float(meta.get("points", 0))))
    return tests


# --------------------------------------------------------------------------- containment

SANDBOX_UIDS = range(61000, 61184)  # above login.defs' UID_MAX, below systemd's dynamic users
NAMESPACE = "pid-namespace+uid"     # the ``containment`` of a result graded in a sandbox
PROCESS_GROUP = "process-group"     # ... and of one graded with the grader's own uid


@dataclass
class Sandbox:
    """How one submission's kernel is contained.

    With ``uid`` set (the grader runs as root and has util-linux's ``unshare`` and ``setpriv``),
    the kernel runs as PID 1 of a new PID namespace (when it ends, the kernel kills every process
    left in the namespace, ``setsid`` or not) under ``uid``: a dedicated unprivileged user id,
    locked for this submission alone, that owns nothing but the submission's own folder. At the
    end every process of ``uid`` is killed before the uid is released. Without it, the kernel runs
    with the grader's uid in its own process group (``mode`` says which, ``reason`` why).
    """

    mode: str = PROCESS_GROUP
    reason: str = ""
    uid: int | None = None
    lock_fd: int | None = None
    tools: tuple = ()

    def wrap(self, cmd: list) -> list:
        """The kernel command, run inside the sandbox."""
        if self.uid is None:
            return cmd
        unshare, setpriv = self.tools
        return [unshare, "--pid", "--fork", "--kill-child", setpriv, f"--reuid={self.uid}",
                f"--regid={self.uid}", "--clear-groups", "--no-new-privs", "--", *cmd]

    def kill_all(self) -> None:
        """Kill every process of the sandbox's uid (whatever session or namespace it is in)."""
        if self.uid is None:
            return
        import subprocess

        try:  # kill(-1) from the uid itself reaches exactly that uid's processes (never run as root)
            subprocess.run([self.tools[1], f"--reuid={self.uid}", f"--regid={self.uid}",
                            "--clear-groups", "--", "/bin/sh", "-c",
                            'test "$(id -u)" = "$0" && exec kill -9 -1', str(self.uid)],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30, check=False)
        except (OSError, subprocess.SubprocessError):
            pass

    def close(self) -> None:
        """Kill what is left of the uid, remove its files from shared temporary folders, unlock it."""
        if self.uid is None or self.lock_fd is None:
            return
        self.kill_all()
        for shared in {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}:
            try:
                entries = list(os.scandir(shared))
            except OSError:
                continue
            for e in entries:
                try:
                    if e.stat(follow_symlinks=False).st_uid == self.uid:
                        if e.is_dir(follow_symlinks=False):
                            shutil.rmtree(e.path, ignore_errors=True)
                        else:
                            os.unlink(e.path)
                except OSError:
                    pass
        os.close(self.lock_fd)
        self.lock_fd = None


def _sandbox_uids() -> range:
    spec = os.environ.get("AUTOGRADER_SANDBOX_UIDS", "")
    if spec:
        lo, _, hi = spec.partition("-")
        return range(int(lo), int(hi or lo) + 1)
    return SANDBOX_UIDS


def _lock_dir() -> Path | None:
    """A folder only root can write, for the uid locks (shared by every grader on the machine)."""
    import stat

    base = Path("/run/lock") if os.access("/run/lock", os.W_OK) else Path(tempfile.gettempdir())
    path = base / "jax-course-autograder-uids"
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        return None
    return path


def open_sandbox(deadline: float) -> Sandbox:
    """Lock a sandbox uid for one submission, or say why the kernel cannot be contained by one."""
    import fcntl
    import pwd

    if os.environ.get("AUTOGRADER_SANDBOX", "").lower() in ("0", "off", "no"):
        return Sandbox(reason="disabled by AUTOGRADER_SANDBOX")
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return Sandbox(reason="the grader does not run as root")
    tools = tuple(shutil.which(t, path="/usr/bin:/bin:/usr/sbin:/sbin:" + os.environ.get("PATH", ""))
                  for t in ("unshare", "setpriv"))
    if not all(tools):
        return Sandbox(reason="util-linux's unshare and setpriv are not installed")
    locks = _lock_dir()
    if locks is None:
        return Sandbox(reason="no private folder for the sandbox uid locks")
    while True:
        for uid in _sandbox_uids():
            try:
                pwd.getpwuid(uid)
                continue  # a real account: never borrow it
            except KeyError:
                pass
            fd = os.open(locks / f"uid-{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                continue
            box = Sandbox(NAMESPACE, "", uid, fd, tools)
            box.kill_all()  # leftovers of a grader that crashed while holding this uid
            return box
        if time.monotonic() > deadline:
            raise GradingError("every sandbox uid stayed busy until the notebook's time limit")
        time.sleep(0.2)


_PROBE = ("import os, sys, importlib.util as u; open(sys.argv[1]).close(); "
          "p = sys.argv[2] + '/.probe'; open(p, 'w').close(); os.remove(p); "
          "assert u.find_spec('ipykernel')")


_CHECKED: dict = {}


def _check_sandbox(box: Sandbox, home: Path) -> str:
    """'' if the sandbox uid can start the kernel (reach Python, the package and its home).

    Checked once per process and temporary folder: what it reaches is the same for every uid."""
    key = (sys.executable, str(home.parent.parent.parent))
    if key not in _CHECKED:
        _CHECKED[key] = _probe_sandbox(box, home)
    return _CHECKED[key]


def _probe_sandbox(box: Sandbox, home: Path) -> str:
    import subprocess

    probe = box.wrap([sys.executable, "-I", "-c", _PROBE,
                      str(package_root() / "autograder" / "__init__.py"), str(home)])
    try:
        proc = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the sandbox could not start: {exc}"
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip()
        err = err.splitlines()[-1] if err else "no message"
        return (f"the sandbox uid cannot run {sys.executable}, read the autograder package or "
                f"write its home folder ({err})")
    return ""


def _chown_tree(path: Path, uid: int) -> None:
    os.chown(path, uid, uid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


def _sandboxed_kernel_manager(box: Sandbox, connection_file: Path):
    """A jupyter_client kernel manager whose kernel command runs inside ``box``."""
    from jupyter_client.manager import AsyncKernelManager

    class SandboxedKernelManager(AsyncKernelManager):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.connection_file = str(connection_file)

        def write_connection_file(self, **kw):
            super().write_connection_file(**kw)
            os.chown(self.connection_file, box.uid, box.uid)  # the kernel must read its ports and key

        def format_kernel_cmd(self, extra_arguments=None):
            return box.wrap(super().format_kernel_cmd(extra_arguments))

    return SandboxedKernelManager


# --------------------------------------------------------------------------- execution

DEFAULT_CPU_LIMIT = 1800      # CPU seconds for one kernel (all its threads)
DEFAULT_OUTPUT_LIMIT = 1_000_000  # characters of output kept per cell


SANDBOX_NPROC = 4096  # processes and threads of one sandbox uid (a fork bomb stops there)


def _kernel_limits(cpu_seconds: int, nproc: int | None = None):
    """Runs in the kernel process before it starts: CPU-time limit, no core dumps (and, for a
    sandbox uid of its own, a cap on its processes)."""
    def apply():
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nproc:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    return apply


def _kernel_env(home: Path | None) -> dict:
    """The kernel's environment: the grader's, less what would point it at the grader's files."""
    env = dict(os.environ)
    env.pop("NBGRADER_EXECUTION", None)
    if home is not None:
        for name in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME",
                     "XDG_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                     "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR"):
            env.pop(name, None)
        env["HOME"] = str(home)
        env["TMPDIR"] = str(home / "tmp")
    return env


def _make_executor(cell_timeout: int, deadline: float, cpu_limit: int = DEFAULT_CPU_LIMIT,
                   home: Path | None = None, box: Sandbox | None = None,
                   connection_file: Path | None = None):
    from nbclient.exceptions import DeadKernelError
    from nbformat.v4 import new_output
    from nbgrader.preprocessors import Execute

    class GradingExecute(Execute):
        """nbgrader's Execute with a notebook deadline, a watchdog, and the replies recorded."""

        def __init__(self, **kw):
            super().__init__(**kw)
            self.replies = {}
            self.skipped = set()
            self.died_at = None
            self.timed_out = set()

        def on_cell_executed(self, **kwargs):
            super().on_cell_executed(**kwargs)
            self.replies[kwargs["cell_index"]] = kwargs["execute_reply"]["content"]
            cell = kwargs["cell"]
            size = sum(len(str(o)) for o in cell.get("outputs", []))
            if size > DEFAULT_OUTPUT_LIMIT:  # keep the graded notebook small (and the guard's mark)
                marks = [o for o in cell.get("outputs", []) if _GUARD_MIME in o.get("data", {})]
                cell.outputs = marks[:1] + [new_output(
                    "stream", name="stdout", text=f"[{size} characters of output removed by the grader]")]

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
            if box is not None:
                box.kill_all()  # the namespace's init is gone; so is anything that left the group

        def _end_sandbox(self):
            """Every reply is in: kill the sandbox's processes (the kernel first among them) and
            let ``unshare`` reap the kernel, rather than a graceful shutdown (a second of wall
            time) or killing ``unshare`` first (the kernel's CPU time would then go uncounted)."""
            if box is None or box.uid is None:
                return
            box.kill_all()
            process = getattr(getattr(self.km, "provisioner", None), "process", None)
            try:
                if process is not None:
                    process.wait(timeout=5)
            except Exception:  # noqa: BLE001 - cleanup kills it anyway
                pass

        def preprocess(self, nb, resources=None, km=None):
            from nbclient import NotebookClient

            NotebookClient.__init__(self, nb, km)
            self.reset_execution_trackers()
            self._check_assign_resources(resources)
            devnull = open(os.devnull, "wb")  # noqa: SIM115 - closed below
            watchdog = threading.Timer(max(1.0, deadline - time.monotonic() + 5), self._kill)
            watchdog.daemon = True
            try:
                nproc = SANDBOX_NPROC if box is not None and box.uid is not None else None
                with self.setup_kernel(stdout=devnull, stderr=devnull, stdin=devnull,
                                       env=_kernel_env(home),
                                       preexec_fn=_kernel_limits(cpu_limit, nproc)):
                    watchdog.start()
                    self.wait_for_reply(self.kc.kernel_info())
                    for index, cell in enumerate(self.nb.cells):
                        if cell.cell_type != "code":
                            continue
                        remaining = deadline - time.monotonic()
                        if remaining <= 1 or self.died_at is not None:
                            self.skipped.add(index)
                            continue
                        self.timeout = int(max(1, min(cell_timeout, remaining)))
                        try:
                            self.execute_cell(cell, index, store_history=True)
                        except DeadKernelError:
                            self.died_at = index
                        except Exception:  # noqa: BLE001 - timeouts and kernel trouble
                            if time.monotonic() >= deadline - 1:
                                self.timed_out.add(index)
                            self.died_at = index
                        if index not in self.replies and self.died_at is None:
                            self.timed_out.add(index)
                    self._end_sandbox()
            except Exception:  # noqa: BLE001 - the kernel died while starting or stopping
                if self.died_at is None:
                    self.died_at = -1
            finally:
                watchdog.cancel()
                devnull.close()
                self._kill()
            return self.nb, self.resources

    extra = {}
    if box is not None and box.uid is not None:
        extra["kernel_manager_class"] = _sandboxed_kernel_manager(box, connection_file)
    # "immediate": every reply is in, and whatever the kernel's atexit hooks would do is of no
    # use to grading (a graceful shutdown of a JAX kernel costs a second of wall time).
    return GradingExecute(timeout=cell_timeout, interrupt_on_timeout=True, allow_errors=True,
                          kernel_name="python3", record_timing=False, startup_timeout=120,
                          shutdown_kernel="immediate", **extra)


_GUARD_MIME = "application/x-autograder-guard"

_GUARD_SETUP = """\
def _autograder_guard_factory(token):
    import builtins, sys, threading, types
    import numpy, numpy.testing, jax, jax.numpy
    import importlib, pkgutil
    import autograder
    for info in pkgutil.iter_modules(autograder.__path__):
        if info.name not in ("__main__", "grading"):
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


class _DropEmptyMetadata:
    """After nbgrader's DeduplicateIds, a duplicate keeps an empty ``nbgrader`` dict, which
    CheckCellMetadata rejects: the duplicate becomes an ordinary cell instead."""

    def preprocess(self, nb, res):
        for cell in nb.cells:
            if "nbgrader" in cell.metadata and not cell.metadata["nbgrader"].get("grade_id"):
                del cell.metadata["nbgrader"]
        return nb, res


def _install_guard(nb) -> str:
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


def _guard_ran(cell, index: int, token: str) -> bool:
    """The guard at the top of test cell ``index`` ran as written: it left its mark, which a
    test cell rewritten by the learner's code (an input transformer) does not."""
    want = f"{token}:{index}"
    return any(o.get("output_type") == "display_data" and o.get("data", {}).get(_GUARD_MIME) == want
               for o in cell.get("outputs", []))


def _feedback_for(reply, index, executor, cell_timeout) -> str:
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


@dataclass
class Result:
    notebook: str
    assignment: str | None
    score: float = 0.0
    max_score: float = 0.0
    tests: list = field(default_factory=list)
    error: str | None = None
    containment: str | None = None  # NAMESPACE or PROCESS_GROUP; None when nothing ran
    containment_reason: str = ""    # why a kernel ran without a sandbox

    def as_dict(self):
        d = {"notebook": self.notebook, "assignment": self.assignment, "score": self.score,
             "max_score": self.max_score, "tests": self.tests}
        if self.error:
            d["error"] = self.error
        if self.containment:
            d["containment"] = self.containment
            if self.containment_reason:
                d["containment_reason"] = self.containment_reason
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "Result":
        return cls(d["notebook"], d["assignment"], d["score"], d["max_score"], d["tests"],
                   d.get("error"), d.get("containment"), d.get("containment_reason", ""))


def zero_result(given: str, assignment, source, error) -> Result:
    """A result with every test of the source notebook (its points as ``max_points``) at zero.

    For a submission that could not be graded: ``error`` says why, and each test's feedback
    repeats it. Without a source notebook (an unknown assignment) there are no tests to list.
    """
    res = Result(given, assignment, error=error)
    if source is not None:
        for grade_id, points in test_cells(source):
            res.tests.append({"grade_id": grade_id, "exercise": grade_id.removeprefix("test_"),
                              "points": 0.0, "max_points": points, "passed": False,
                              "feedback": f"Not graded: {error}"})
        res.max_score = sum(t["max_points"] for t in res.tests)
    return res


def failed_result(path, error: str, root: Path | None = None) -> Result:
    """The result of a notebook whose grading itself failed (an internal error, a dead worker):
    every test of its assignment at zero, when the assignment's source can still be found."""
    given = str(path)
    assignment = Path(path).resolve().parent.name
    try:
        source = source_notebook(assignment, Path(root) if root else find_course_root(Path(path).parent))
        return zero_result(given, assignment, source, error)
    except Exception:  # noqa: BLE001 - the error is reported either way
        return Result(given, assignment, error=error)


def grade_notebook(path, *, root: Path | None = None, cell_timeout: int = DEFAULT_CELL_TIMEOUT,
                   notebook_timeout: int = DEFAULT_NOTEBOOK_TIMEOUT, cpu_limit: int = DEFAULT_CPU_LIMIT,
                   save_graded: Path | None = None) -> Result:
    """Grade one submitted notebook. Never raises for a bad submission: the result says why."""
    given = str(path)
    path = Path(path)
    assignment = path.resolve().parent.name
    try:
        root = root or find_course_root(path.parent)
        source = source_notebook(assignment, root)
    except GradingError as exc:
        if not path.exists():  # a mistyped path says so, whatever folder it names
            return Result(given, assignment, error=f"no such file: {given}")
        return Result(given, assignment, error=str(exc))
    try:
        nb = read_submission(path)
    except GradingError as exc:
        return zero_result(given, assignment, source, str(exc))
    with tempfile.TemporaryDirectory(prefix="run-") as tmp:
        return _grade_in(Path(tmp), nb, given, assignment, source, cell_timeout, notebook_timeout,
                         cpu_limit, save_graded)


def ensure_tools_on_path():
    """nbgrader's gradebook runs the ``alembic`` command: make this Python's scripts findable."""
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")


def _grade_in(tmp: Path, nb, given, assignment, source, cell_timeout, notebook_timeout,
              cpu_limit=DEFAULT_CPU_LIMIT, save_graded=None) -> Result:
    import nbformat

    ensure_tools_on_path()
    warnings.filterwarnings("ignore", module="nbgrader")
    warnings.filterwarnings("ignore", category=Warning, message=".*not in session.*")
    from nbformat.v4 import new_output
    from nbgrader import utils
    from nbgrader.api import Gradebook
    from nbgrader.preprocessors import (CheckCellMetadata, ClearOutput, DeduplicateIds,
                                        OverwriteCells, OverwriteKernelspec, SaveAutoGrades)

    db_path = tmp / "gradebook.db"
    db_url = f"sqlite:///{db_path}"
    notebook_id = source.stem
    shutil.copy(_template_gradebook(source, assignment), db_path)
    released = _read_source(source)
    box_dir = tmp / "box"  # all the submission's kernel may write (besides shared temp folders)
    workdir = box_dir / "work" / assignment
    workdir.mkdir(parents=True)
    for item in source.parent.iterdir():  # data files the assignment ships, not notebooks
        if item.suffix != ".ipynb" and not item.name.startswith("."):
            (shutil.copytree if item.is_dir() else shutil.copy)(item, workdir / item.name)
    res = _resources(assignment, notebook_id, db_url, workdir)
    nb.metadata["kernelspec"] = copy.deepcopy(released.metadata.get("kernelspec", {}))
    try:
        for pp in (ClearOutput(), DeduplicateIds(), _DropEmptyMetadata(), OverwriteKernelspec(),
                   OverwriteCells(add_missing_cells=True), CheckCellMetadata()):
            nb, res = pp.preprocess(nb, res)
    except Exception as exc:  # noqa: BLE001 - metadata nbgrader refuses
        return zero_result(given, assignment, source, f"the notebook's cell metadata is unusable: {exc}")

    nb = nbformat.from_dict(nb)  # cells nbgrader re-added hold plain dicts
    nb.cells = [c for c in nb.cells if "check-my-answers" not in c.metadata.get("tags", [])
                or "nbgrader" in c.metadata]  # the self-check only re-runs visible tests
    guard_token = _install_guard(nb)
    deadline = time.monotonic() + notebook_timeout
    home = box_dir / "home"
    (home / "tmp").mkdir(parents=True)
    box = open_sandbox(deadline)
    env_path = str(package_root())
    old_pp = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = env_path + (os.pathsep + old_pp if old_pp else "")
    try:
        if box.uid is not None:
            # Only the box is the sandbox uid's; the gradebook and connection file beside it
            # stay root's (the folder is traversable, not listable).
            os.chmod(tmp, 0o711)
            os.chmod(db_path, 0o600)
            _chown_tree(box_dir, box.uid)
            os.chmod(box_dir, 0o700)
            os.chmod(home, 0o700)
            problem = _check_sandbox(box, home)
            if problem:
                box.close()
                box = Sandbox(reason=problem)
        executor = _make_executor(cell_timeout, deadline, cpu_limit, home, box, tmp / "kernel.json")
        nb, res = executor.preprocess(nb, res)
    finally:
        box.close()
        if old_pp is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old_pp

    # Score from the execute replies: outputs are replaced, so nothing printed counts.
    feedback = {}
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or not utils.is_grade(cell) or utils.is_solution(cell):
            continue
        grade_id = cell.metadata.nbgrader["grade_id"]
        reply = executor.replies.get(index)
        finished = (reply is not None and reply.get("status") == "ok"
                    and index not in executor.timed_out
                    and (executor.died_at is None or index < executor.died_at))
        tampered = finished and not _guard_ran(cell, index, guard_token)
        finished = finished and not tampered
        fb = "" if finished else (
            "This test cell did not run as written (learner code changed how cells run, e.g. "
            "with an IPython input transformer), so it does not count." if tampered else
            _feedback_for(reply, index, executor, cell_timeout)
            or "Did not finish: the kernel stopped during this test.")
        feedback[grade_id] = fb
        cell.outputs = [] if finished else [new_output("error", ename="Failed", evalue=fb, traceback=[])]
    SaveAutoGrades().preprocess(nb, res)

    result = Result(given, assignment, containment=box.mode, containment_reason=box.reason)
    with Gradebook(db_url) as gb:
        submission = gb.find_submission_notebook(notebook_id, assignment, STUDENT)
        grades = {g.name: g for g in submission.grades}
        for grade_id, points in test_cells(source):
            g = grades.get(grade_id)
            got = float(g.auto_score) if g is not None and g.auto_score is not None else 0.0
            got = got if grade_id in feedback else 0.0
            result.tests.append({
                "grade_id": grade_id, "exercise": grade_id.removeprefix("test_"),
                "points": got, "max_points": points, "passed": got == points,
                "feedback": "" if got == points else (feedback.get(grade_id) or "This test did not run."),
            })
    result.score = sum(t["points"] for t in result.tests)
    result.max_score = sum(t["max_points"] for t in result.tests)
    if save_graded is not None:  # the executed notebook, for the formgrader (instructors only)
        save_graded = Path(save_graded)
        save_graded.parent.mkdir(parents=True, exist_ok=True)
        nb.cells = nb.cells[1:]  # drop the grader's guard cell
        nbformat.write(nb, str(save_graded))
    return result


# --------------------------------------------------------------------------- command line

def format_human(result: Result) -> str:
    lines = [f"{result.notebook} ({result.assignment}): {result.score:g}/{result.max_score:g}"]
    if result.error:
        lines.append(f"  could not be graded: {result.error}")
    for t in result.tests:
        mark = "PASS" if t["passed"] else "FAIL"
        lines.append(f"  [{mark}] {t['exercise']} ({t['points']:g}/{t['max_points']:g})")
        if not t["passed"] and t["feedback"]:
            lines.append(f"         {t['feedback']}")
    return "\n".join(lines)


def format_progress(results) -> str:
    """Progress across chapters, for a person: one row per notebook (its assignment, exercises
    passed of all, points) and a total line."""
    assignments = [r.assignment or "?" for r in results]
    labels = [a if assignments.count(a) == 1 else f"{a} ({r.notebook})"
              for a, r in zip(assignments, results)]
    rows = []
    for label, r in zip(labels, results):
        passed = sum(bool(t["passed"]) for t in r.tests)
        rows.append((label, f"{passed}/{len(r.tests)}", f"{r.score:g}/{r.max_score:g}",
                     "not graded" if r.error else ""))
    passed = sum(bool(t["passed"]) for r in results for t in r.tests)
    total = sum(len(r.tests) for r in results)
    rows.append(("total", f"{passed}/{total}",
                 f"{sum(r.score for r in results):g}/{sum(r.max_score for r in results):g}", ""))
    wl = max(len("assignment"), *(len(r[0]) for r in rows))
    we = max(len("exercises passed"), *(len(r[1]) for r in rows))
    wp = max(len("points"), *(len(r[2]) for r in rows))
    lines = ["Progress by chapter", f"  {'assignment':<{wl}}  {'exercises passed':>{we}}  {'points':>{wp}}"]
    for label, ex, pts, note in rows:
        if label == "total":
            lines.append("  " + "-" * (wl + we + wp + 4))
        lines.append(f"  {label:<{wl}}  {ex:>{we}}  {pts:>{wp}}  {note}".rstrip())
    return "\n".join(lines)


class _StdoutGuard:
    """Keep file descriptor 1 for our JSON only: everything else written there goes to stderr."""

    def __enter__(self):
        sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(2, 1)
        return os.fdopen(os.dup(self.saved), "w", encoding="utf-8")

    def __exit__(self, *exc):
        sys.stdout.flush()
        os.dup2(self.saved, 1)
        os.close(self.saved)
        return False


def grade_command(args) -> int:
    root = Path(args.root).resolve() if args.root else None
    results = []
    ok = True
    with _StdoutGuard() as out:
        from .batch import grade_many

        results = grade_many(args.notebooks, workers=args.jobs, progress=args.progress, root=root,
                             cell_timeout=args.cell_timeout, notebook_timeout=args.notebook_timeout)
        for nb, result in zip(args.notebooks, results):
            if result.error:
                ok = False
                print(f"autograder: cannot grade {nb}: {result.error}", file=sys.stderr)
        if len(results) > 1 or args.progress:
            from .batch import containment_summary

            line = containment_summary(results)
            if line:
                print(f"autograder: {line}", file=sys.stderr)
        if args.json:
            payload = results[0].as_dict() if len(results) == 1 else [r.as_dict() for r in results]
            out.write(json.dumps(payload, indent=2) + "\n")
        else:
            blocks = [format_human(r) for r in results]
            if len(results) > 1:
                blocks.append(format_progress(results))
            out.write("\n\n".join(blocks) + "\n")
        out.flush()
        out.close()
    return 0 if ok else 1
