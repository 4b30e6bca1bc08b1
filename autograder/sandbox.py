"""How a submission's kernel is contained.

As root (with util-linux's ``unshare`` and ``setpriv``), each kernel runs in a PID namespace of
its own under an unprivileged uid of its own, locked for one submission: :func:`open_sandbox`
returns the :class:`Sandbox`, whose :meth:`Sandbox.wrap` turns the kernel command into the
contained one and :meth:`Sandbox.close` kills whatever the uid left behind. Without root, the
kernel runs with the grader's uid in its own process group (``mode`` says which, ``reason``
why). :func:`kernel_manager_class`, :func:`kernel_env` and :func:`kernel_limits` are the kernel's
side of it: its command, environment and resource limits.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .course import GradingError, package_root

DEFAULT_CPU_LIMIT = 1800      # CPU seconds for one kernel (all its threads)


SANDBOX_NPROC = 4096  # processes and threads of one sandbox uid (a fork bomb stops there)


def kernel_limits(cpu_seconds: int, nproc: int | None = None):
    """Runs in the kernel process before it starts: CPU-time limit, no core dumps (and, for a
    sandbox uid of its own, a cap on its processes)."""
    def apply():
        import resource

        resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if nproc:
            resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    return apply


def kernel_env(home: Path | None) -> dict:
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


def check_sandbox(box: Sandbox, home: Path) -> str:
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


def chown_tree(path: Path, uid: int) -> None:
    os.chown(path, uid, uid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)


def kernel_manager_class(box: Sandbox, connection_file: Path):
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


