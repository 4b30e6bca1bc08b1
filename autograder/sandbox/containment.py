"""How a submission's kernel (and the judge's program runner) is contained: by bubblewrap, as
root or not. docs/security.md ("Containment") says what a contained kernel sees and may do.

:func:`limited` starts a kernel under the launcher's ``limits`` (CPU time, memory, death with
the grading process); :meth:`Sandbox.wrap` runs it in bubblewrap's view (:func:`bwrap_command`:
an allow-list of files built from an empty root, :func:`kernel_paths` read-only, the box
read-write) with an allow-listed environment (:func:`kernel_env`). As root (``NAMESPACE``) the
kernel also gets an unprivileged uid locked for it (``AUTOGRADER_SANDBOX_UIDS``), cgroups of its
own (:func:`memory_cgroup`, :func:`share_cgroups`) and a box that is a tmpfs
(:meth:`Sandbox.mount_box`, in the grading process's own mount namespace:
:func:`private_mounts`). Without root (``USER_NAMESPACE``) bubblewrap adds a user namespace and
the kernel keeps the grader's uid.

:func:`open_sandbox` returns the :class:`Sandbox` of one submission. It **fails closed**: a
sandbox that cannot be set up (bubblewrap missing, or unable to create namespaces here:
:func:`bwrap_problem`) is a refusal (mode ``REFUSED``, ``reason`` naming the cause and the
fix), unless the operator asked for no sandbox (``--no-sandbox`` or ``AUTOGRADER_SANDBOX=off``:
mode ``NONE``).
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..common.course import GradingError, package_root
from ..common.settings import Settings

DEFAULT_CPU_LIMIT = 1800      # CPU seconds for one kernel (all its threads)

NAMESPACE = "namespaces+uid"    # ``containment``: bubblewrap as root: own namespaces, uid and cgroups
PROCESS_GROUP = "process-group"  # ... the grader's uid, the kernel in its own process group (no longer made)
USER_NAMESPACE = "user-namespace"  # ... bubblewrap: unprivileged user, mount, PID and network namespaces
NONE = "none"                    # ... no sandbox, as the operator asked
REFUSED = "refused"              # (never in a result: the notebook is not run)

_SYSTEM = {"/", "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev",
           "/run", "/var", "/opt"}  # never hidden from a kernel (it could not start)


def package_module(module: str) -> list:
    """The command that runs ``module``, a module of this package, as root or in a sandbox:
    ``python -s -P -m MODULE`` (no user site, not the current folder: nothing a submission
    wrote can stand in for a module), with an environment of :func:`with_package`."""
    return [sys.executable, "-s", "-P", "-m", module]


def with_package(env: dict) -> dict:
    """``env`` with the folder holding this package first on ``PYTHONPATH``: a process it starts
    imports this package, wherever this process found it (a checkout, a venv, a wheel)."""
    rest = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": str(package_root()) + (os.pathsep + rest if rest else "")}


LAUNCHER = package_module("autograder.sandbox.launcher")


def limit_judge_memory(mb: int) -> None:
    """Cap this grading process's data memory (``RLIMIT_DATA``, the soft limit) at ``mb`` MiB
    (``AUTOGRADER_JUDGE_MEMORY_MB``; below about 600 MiB a grading process could not even start
    its kernel's client threads): what the judge reads and builds here from a submission cannot
    take the machine's memory. Kernels do not inherit it (the launcher's ``limits`` lifts it).
    Not where JAX has a GPU or TPU plugin installed (``jax_plugins``: jax-cuda*, jax-rocm*; or
    ``libtpu``): their runtimes map memory of their own, which this cap was not measured with."""
    import importlib.util
    import resource

    if any(importlib.util.find_spec(name) for name in ("jax_plugins", "libtpu")):
        return
    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    limit = mb << 20 if hard == resource.RLIM_INFINITY else min(mb << 20, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, hard))


_MS_NOSUID, _MS_NODEV, _MS_REC, _MS_PRIVATE, _MNT_DETACH = 2, 4, 16384, 1 << 18, 2
_PRIVATE_MOUNTS = []  # [True] once this process has a mount namespace of its own


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    """mount(2) itself (``ctypes``), an OSError naming what failed."""
    import ctypes

    from .launcher import libc

    def c(text):
        return text.encode() if text else None
    if libc().mount(c(source), c(target), c(fstype), ctypes.c_ulong(flags), c(data)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mounting {fstype or 'private propagation'} on {target} failed: "
                             f"{os.strerror(error)}")


def private_mounts() -> None:
    """Give this process (a grading process, as root) a mount namespace of its own, whose mounts
    propagate nowhere: the boxes' tmpfs mounts are made there, seen by this process and the
    kernels it starts, and they vanish with it, however it ends. Must run while the process has
    a single thread (``unshare(CLONE_NEWNS)`` refuses otherwise)."""
    if _PRIVATE_MOUNTS or not hasattr(os, "unshare") or os.geteuid() != 0:
        return
    try:
        os.unshare(os.CLONE_NEWNS)
        _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    except OSError:
        return  # its mounts could reach the machine's: none is made (boxes stay on disk)
    _PRIVATE_MOUNTS.append(True)


@dataclass
class Sandbox:
    """How one submission's kernel is contained (see the module's docstring)."""

    mode: str = PROCESS_GROUP
    reason: str = ""
    uid: int | None = None       # the sandbox uid as root; the grader's own in USER_NAMESPACE mode
    lock_fd: int | None = None   # the uid's lock, as root
    bwrap: str = ""              # bubblewrap
    token: str = ""              # names this sandbox's bwrap processes (its host name)
    cgroup: str | None = None    # the kernel's memory cgroup folder, when there is one
    cgroups: list = field(default_factory=list)  # its CPU share and thread cap (share_cgroups)
    hide: list = field(default_factory=list)
    keep_rw: list = field(default_factory=list)
    ended: bool = True           # no process of the sandbox since its last kill_all
    box_mount: str | None = None  # the box's tmpfs (see mount_box), unmounted by close
    memory_mb: int = 0           # its limits, from the command's settings (open_sandbox)
    threads: int = 0
    box_mb: int = 0

    @property
    def refused(self) -> bool:
        return self.mode == REFUSED

    @property
    def contained(self) -> bool:
        return self.uid is not None

    @property
    def as_root(self) -> bool:
        return self.mode == NAMESPACE

    def wrap(self, cmd: list) -> list:
        """The kernel command, run inside the sandbox: bubblewrap's view, then the launcher's
        ``limits`` in it (the thread cap; as root, the drop to the sandbox uid, last)."""
        if self.uid is None:
            return cmd
        self.ended = False
        # RLIMIT_NPROC, set inside: without root it counts the sandbox's own processes only, in
        # its user namespace (Linux 5.14 and later), not all of the grader's uid
        inside = [*LAUNCHER, "limits", f"--nproc={self.threads}"]
        if self.as_root:
            inside += [f"--uid={self.uid}", *[f"--readable={p}" for p in [*kernel_paths(), *self.keep_rw]]]
        return [*bwrap_command(self.bwrap, self.token, self.keep_rw, self.hide, self.as_root), "--",
                *inside, "--", *cmd]

    def kill_all(self) -> None:
        """Kill every process of the sandbox: as root, every process of its uid (whatever session
        or namespace it is in: ``kill(-1, SIGKILL)`` as that uid, ``launcher kill``); without
        root, its bwrap processes (everything inside dies with them)."""
        if self.uid is None:
            return
        if not self.as_root:
            _kill_bwrap(self.token)
            self.ended = True
            return
        import subprocess

        try:
            subprocess.run([*LAUNCHER, "kill", str(self.uid)], cwd="/", env=with_package({}),
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30, check=True)
            self.ended = True
        except (OSError, subprocess.SubprocessError):
            pass

    def mount_box(self, box_dir: Path) -> str:
        """As root, in a grading process with its own mount namespace (:func:`private_mounts`),
        put an empty tmpfs of ``box_mb`` MiB on ``box_dir``, the one folder a contained kernel may
        write: what it writes counts against its memory cgroup, never the machine's disk. The
        limit's words for the result, '' when there is none."""
        if not self.as_root or not _PRIVATE_MOUNTS:
            return ""
        mb = self.box_mb
        box_dir.mkdir(parents=True, exist_ok=True)
        try:
            _mount("tmpfs", str(box_dir), "tmpfs", _MS_NOSUID | _MS_NODEV, f"mode=0700,size={mb}m")
        except OSError as exc:
            raise GradingError(f"the sandbox's box cannot be set up: {exc.strerror}") from None
        self.box_mount = str(box_dir)
        return f"files limited to {mb} MiB (a tmpfs)"

    def close(self) -> None:
        """Kill what is left of the sandbox; as root, unmount its box, remove its cgroups and
        unlock its uid."""
        if not self.ended:
            self.kill_all()
        if not self.as_root or self.lock_fd is None:
            return
        if self.box_mount:
            from .launcher import libc

            libc().umount2(self.box_mount.encode(), _MNT_DETACH)
            self.box_mount = None
        for folder in [self.cgroup, *self.cgroups] if self.cgroup else self.cgroups:
            for _ in range(50):  # its processes are gone once the kernel's namespace is
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)
        self.cgroup, self.cgroups = None, []
        os.ftruncate(self.lock_fd, 0)  # released cleanly: nothing of this uid is left
        os.close(self.lock_fd)
        self.lock_fd = None


# --------------------------------------------------------------------------- the kernel's side

def die_with_parent():
    """A function for a child of this process to call right after the fork: the launcher's
    :func:`~autograder.sandbox.launcher.die_with_parent`, so a grader stopped by Ctrl-C or killed
    leaves no grading process running on. Prepared here: the child loads nothing (an import in a
    forked child can wait forever on a lock another thread held at the fork), and exits if this
    process ended before its request took effect. Elsewhere than Linux, a function that does nothing."""
    import functools

    from . import launcher as launch

    try:
        prctl = launch.libc().prctl
    except (OSError, AttributeError):  # not Linux: no prctl(2)
        return lambda: None
    return functools.partial(launch.die_with_parent, os.getpid(), prctl)


def limited(cmd: list, cpu_seconds: int, box: Sandbox | None = None, nice: int = 0) -> list:
    """``cmd`` (the kernel's, already wrapped in the sandbox) started by the launcher's
    ``limits``, which sets on itself a CPU-time limit, no core dumps, death with this process
    and, in a sandbox, the memory limit (its cgroup joined, else ``RLIMIT_DATA``) and, as root,
    its CPU share and thread cap (cgroups joined), then executes it. A command rather than
    ``preexec_fn``: no Python runs between the fork and the exec of a grading process in which
    JAX's threads run, and the process is started with ``vfork``, not a copy of that large one.
    ``nice``: added to its nice value (the program runner starts below the kernel)."""
    prefix = [*LAUNCHER, "limits", f"--cpu={cpu_seconds}",
              f"--parent={os.getpid()}", *([f"--nice={nice}"] if nice else [])]
    if box is not None and box.contained:
        prefix.append(f"--memory={box.memory_mb << 20}")
        if box.cgroup:
            prefix.append(f"--cgroup={box.cgroup}")
        prefix += [f"--join={folder}" for folder in box.cgroups]  # its CPU share and thread cap
    return [*prefix, "--", *cmd]


def kernel_paths() -> list[str]:
    """What a contained kernel sees read-only besides :data:`SYSTEM`, :data:`ETC` and its box:
    the interpreter (the venv and the Python it was made from, wherever they live), the real
    site-packages and the folders of the shared libraries this process loaded that lie outside
    them, and the learner-facing package (``autograder/``, not the checkout around it)."""
    import site

    paths = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(sys.executable), os.path.dirname(os.path.realpath(sys.executable))):
        if p and p not in paths:
            paths.append(p)
    inside = [os.path.realpath(p) for p in paths] + ["/usr", "/lib", "/lib64", "/lib32", "/bin"]
    # the real site-packages: a venv's lib/ may be a link elsewhere (the hub's twin)
    site_packages = [os.path.realpath(p) for p in site.getsitepackages() if os.path.isdir(p)]
    for folder in [*site_packages, *_loaded_library_folders()]:
        if not any(folder == k or folder.startswith(k + "/") for k in inside):
            paths.append(folder)
            inside.append(folder)
    paths.append(str(package_root() / "autograder"))
    return paths


def _loaded_library_folders() -> list[str]:
    """The folders of the shared libraries mapped into this process (``/proc/self/maps``): an
    interpreter built against libraries outside its prefix needs them in the kernel too."""
    try:
        text = Path("/proc/self/maps").read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and fields[5].startswith("/") and ".so" in fields[5]:
            folder = os.path.dirname(os.path.realpath(fields[5]))
            if folder not in out and os.path.isdir(folder):
                out.append(folder)
    return out


# The kernel's environment is an allow-list: these, where the grader has them, and nothing else
# (no cloud credentials, no pip index, no grader's paths). HOME, TMPDIR and PATH are the kernel's own.
KERNEL_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "PYTHONPATH",
              # JAX and XLA: which backend and devices, the memory of an accelerator, log levels
              "JAX_PLATFORMS", "JAX_PLATFORM_NAME", "JAX_ENABLE_X64", "JAX_NUM_CPU_DEVICES",
              "JAX_TRACEBACK_FILTERING", "XLA_FLAGS", "XLA_PYTHON_CLIENT_PREALLOCATE",
              "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR", "TF_CPP_MIN_LOG_LEVEL",
              "CUDA_VISIBLE_DEVICES", "TPU_VISIBLE_CHIPS",
              "AUTOGRADER_KERNEL_TAG")  # the operator's tag, to find the kernels' processes (ps e)
# JAX's import sets TF_CPP_MIN_LOG_LEVEL in its process's environment where it is unset: a kernel
# gets the operator's value (as this module found it), not one the grader's own JAX set since
_SET_BY_JAX = {"TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL")}


def kernel_env(home: Path, contained: bool = True) -> dict:
    """The kernel's environment. Contained: the allow-list :data:`KERNEL_ENV` of the grader's
    variables, ``HOME`` and ``TMPDIR`` in the box's home, ``PATH`` the interpreter's folder and
    the system's, nothing else. Uncontained (a learner's laptop, or the sandbox turned off), the
    grader's own, less what would point the kernel at the grader's files: such a kernel runs as
    the grader's uid and could read the grader's environment anyway (``/proc/PID/environ``)."""
    if contained:
        env = {k: os.environ[k] for k in KERNEL_ENV if k in os.environ}
        for name, value in _SET_BY_JAX.items():
            env.pop(name, None) if value is None else env.__setitem__(name, value)
        env.setdefault("LANG", "C.UTF-8")
        env["HOME"] = str(home)
        env["TMPDIR"] = str(home / "tmp")
        env["PATH"] = os.path.dirname(sys.executable) + ":/usr/local/bin:/usr/bin:/bin"
        return with_package(env)
    env = dict(os.environ)
    for name in ("NBGRADER_EXECUTION", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
                 "XDG_STATE_HOME", "XDG_RUNTIME_DIR", "JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR",
                 "JUPYTER_RUNTIME_DIR", "IPYTHONDIR", "MPLCONFIGDIR", "COURSE_DB_URL"):
        env.pop(name, None)
    env["HOME"] = str(home)
    env["TMPDIR"] = str(home / "tmp")
    return with_package(env)


SOCKET_PATH_MAX = 100  # bytes of a Unix socket's path (sun_path holds 108, with its NUL)
_RUN_DIR_TAIL = len("/run-12345678/box/k-65535")  # what the grader adds to the base folder


def run_dir_base() -> str | None:
    """The folder for a submission's grading folder (``dir=`` of ``tempfile``): None (the
    temporary folder), unless its path is too long for the kernel's Unix sockets
    (``<run>/box/k-N``); then the first of ``/tmp``, ``/var/tmp``, ``/dev/shm`` that is
    writable. Raises :class:`GradingError` with the fix when none is."""
    base = tempfile.gettempdir()
    if len(os.fsencode(base)) + _RUN_DIR_TAIL <= SOCKET_PATH_MAX:
        return None
    for short in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(short) and os.access(short, os.W_OK | os.X_OK):
            return short
    raise GradingError(f"the temporary folder's path is too long for the kernel's sockets "
                       f"({len(base)} characters: {base}); set TMPDIR to a folder whose path has at "
                       f"most {SOCKET_PATH_MAX - _RUN_DIR_TAIL} characters")


def without_debugger(cmd: list) -> list:
    """``cmd`` (a kernelspec's command) with ``-m ipykernel_launcher`` run without ipykernel's
    debugger; any other command as it is."""
    for i in range(len(cmd) - 1):
        if cmd[i] == "-m" and cmd[i + 1] == "ipykernel_launcher":
            return [*cmd[:i], "-m", "autograder.sandbox.kernel_launcher", *cmd[i + 2:]]
    return list(cmd)


def kernel_specs(**kw):
    """jupyter_client's ``KernelSpecManager`` over Jupyter's kernel folders only: its default also
    searches IPython's old ``~/.ipython/kernels`` (after them: ``python3`` is found first), and
    finding that folder imports IPython, about 50 ms before a kernel can start."""
    from jupyter_client.kernelspec import KernelSpecManager
    from jupyter_core.paths import jupyter_path

    return KernelSpecManager(kernel_dirs=jupyter_path("kernels"), **kw)


def kernel_manager_class(box: Sandbox | None, box_dir: Path, cpu_seconds: int):
    """A jupyter_client kernel manager whose kernel starts under :func:`limited` (wrapped in
    ``box``'s sandbox when it has a uid), with its connection file and its channels on Unix
    sockets in ``box_dir`` (``transport="ipc"``). Unix sockets in a folder of the submission's
    own cannot collide: TCP ports are chosen by the parent, freed, and bound again by the
    kernel, and in a parallel batch another process can take one in between (the kernel then
    dies before it answers, jupyter_client issue 154); a contained kernel has no network."""
    from jupyter_client.manager import AsyncKernelManager
    from traitlets import default

    contained = box is not None and box.contained

    class BoxedKernelManager(AsyncKernelManager):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.transport = "ipc"
            self.ip = str(box_dir / "k")
            self.connection_file = str(box_dir / "kernel.json")

        @default("kernel_spec_manager")
        def _kernel_spec_manager_default(self):
            return kernel_specs(data_dir=self.data_dir)

        def format_kernel_cmd(self, extra_arguments=None):
            cmd = without_debugger(super().format_kernel_cmd(extra_arguments))
            return limited(box.wrap(cmd) if contained else cmd, cpu_seconds, box)

        def write_connection_file(self, **kw):
            super().write_connection_file(**kw)
            if contained:
                chown_tree(Path(self.connection_file), box.uid)  # the kernel must read its key

    return BoxedKernelManager


# --------------------------------------------------------------------------- the view: bubblewrap

BWRAP_INSTALL = ("install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap; Fedora: dnf "
                 "install bubblewrap; Arch: pacman -S bubblewrap)")
USERNS_FIX = ("let ordinary users create user namespaces (sysctl user.max_user_namespaces above 0 "
              "and, where it exists, kernel.unprivileged_userns_clone=1; on Ubuntu 24.04, an "
              "AppArmor profile allowing bwrap, or kernel.apparmor_restrict_unprivileged_userns=0)")
NAMESPACES_FIX = ("run the grader where root may create mount, PID and network namespaces and "
                  "mount file systems (in a container: CAP_SYS_ADMIN, e.g. docker run --privileged, "
                  "and an unconfined seccomp/AppArmor profile)")

# The kernel's view is an allow-list: a root built empty, then only these, read-only.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "hosts",
       "host.conf", "localtime", "timezone", "alternatives", "fonts", "mime.types", "os-release",
       "debian_version", "locale.alias", "ssl", "ca-certificates", "matplotlibrc")
ACCELERATORS = ("nvidia", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps",
                "dri", "kfd", "accel", "vfio")  # /dev entries a GPU or TPU runtime opens, when present
# As root bubblewrap needs no user namespace (with one, no other uid could be mapped in it)
NAMESPACES = {True: ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"],
              False: ["--unshare-all"]}


def find_bwrap() -> str | None:
    """bubblewrap's ``bwrap`` (on PATH or in the system's folders), None where it is not installed."""
    return shutil.which("bwrap", path=os.environ.get("PATH", "") + ":/usr/bin:/bin")


_BWRAP_PROBED: dict = {}


def bwrap_problem(bwrap: str | None, as_root: bool = False) -> tuple[str, str]:
    """``("", "")`` when ``bwrap`` can contain a process here (probed once per process: a
    command run with the sandbox's namespaces), else (the cause, its fix)."""
    if not bwrap:
        return "bubblewrap is not installed", BWRAP_INSTALL
    if (bwrap, as_root) not in _BWRAP_PROBED:
        import subprocess

        try:
            proc = subprocess.run([bwrap, *NAMESPACES[as_root], "--die-with-parent", "--ro-bind", "/", "/",
                                   "true"], stdin=subprocess.DEVNULL, capture_output=True, timeout=60,
                                  cwd="/")
            err = proc.stderr.decode(errors="replace").strip().splitlines()
            problem = "" if proc.returncode == 0 else (
                err[-1] if err else f"{bwrap} exited with status {proc.returncode}")
        except (OSError, subprocess.SubprocessError) as exc:
            problem = f"{bwrap} could not run ({exc})"
        _BWRAP_PROBED[bwrap, as_root] = problem
    problem = _BWRAP_PROBED[bwrap, as_root]
    if not problem:
        return "", ""
    return f"bubblewrap cannot create namespaces here ({problem})", NAMESPACES_FIX if as_root else USERNS_FIX


def _resolve(path: str) -> tuple[list[tuple[str, str]], str]:
    """The symbolic links met on the way to ``path`` (``[(link, its text)]``) and where it leads:
    the kernel must find ``path`` itself, not only its real place (a venv's ``bin/python``)."""
    links, todo, done = [], [c for c in os.path.abspath(path).split("/") if c], "/"
    for _ in range(64):
        if not todo:
            return links, done
        nxt = os.path.join(done, todo.pop(0))
        if os.path.islink(nxt):
            text = os.readlink(nxt)
            links.append((nxt, text))
            target = os.path.normpath(os.path.join(done, text))
            todo = [c for c in target.split("/") if c] + todo
            done = "/"
        else:
            done = nxt
    return links, os.path.realpath(path)


def bwrap_command(bwrap: str, token: str, keep_rw=(), hide=(), as_root: bool = False) -> list[str]:
    """bubblewrap's command line for a kernel or program runner (the command follows, after
    ``--``; the view is described in docs/security.md): namespaces of its own (a user namespace
    too unless ``as_root``), a root built empty with the allow-list (:data:`SYSTEM`, :data:`ETC`,
    an accelerator's devices, :func:`kernel_paths`) read-only and ``keep_rw`` (the box)
    read-write, each with the links on the way to it made again; a folder of ``hide`` that lies
    inside a kept one is emptied. ``token`` names its processes for :meth:`Sandbox.kill_all`."""
    cmd = []
    devices = [f"/dev/{n}" for n in sorted(os.listdir("/dev"))
               if n in ACCELERATORS or n.startswith(("nvidia", "accel"))]
    for path in devices:
        cmd += ["--dev-bind", path, path]
    if devices and os.path.isdir("/sys"):
        cmd += ["--ro-bind", "/sys", "/sys"]  # a GPU or TPU runtime reads its devices there
    for path in [*SYSTEM, *(f"/etc/{n}" for n in ETC)]:
        if os.path.islink(path):
            cmd += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            cmd += ["--ro-bind", path, path]
    keep = [(p, "--ro-bind", *_resolve(p)) for p in kernel_paths()]
    keep += [(p, "--bind", *_resolve(p)) for p in keep_rw]
    links = set()
    for _, how, way, real in sorted(keep, key=lambda k: k[3].rstrip("/").count("/")):
        if not os.path.exists(real):
            continue
        for link, text in way:
            if link not in links:
                links.add(link)
                cmd += ["--symlink", text, link]
        cmd += [how, real, real]
    kept = [real for *_, real in keep]
    for path in sorted({os.path.realpath(p) for p in hide}):
        if os.path.isdir(path) and any(path.startswith(k + "/") for k in kept):
            cmd += ["--tmpfs", path]
    # the folders leading to each path, made first, 0755 (bubblewrap 0.8 makes them 0700, which
    # a sandbox uid could not go through)
    folders = {os.path.dirname(cmd[i + 2]) for i, op in enumerate(cmd) if op in ("--ro-bind", "--bind", "--symlink")}
    # No --as-pid-1: bubblewrap's init (root, as root) is the parent that dies with the grading
    # process, and the whole PID namespace with it (the dropped uid's own death signal would be
    # refused, sent from a bwrap without capabilities). jupyter_client's JPY_PARENT_PID is unset:
    # the grader's pid means nothing there, and ipykernel would take init for a sign it is orphaned.
    return [bwrap, *NAMESPACES[as_root], "--die-with-parent", "--new-session", "--unsetenv", "JPY_PARENT_PID",
            "--hostname", token, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs", "/var/tmp",
            "--tmpfs", "/dev/shm", *[a for d in sorted(folders - {"/"}) for a in ("--dir", d)], *cmd]


def _kill_bwrap(token: str) -> None:
    """SIGKILL this user's ``bwrap`` processes started with ``token`` (its host name, random):
    every process inside dies with them (their PID namespace's first process asked to,
    ``--die-with-parent``)."""
    import signal

    me, wanted = os.getuid(), (b"--hostname", os.fsencode(token))
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            if entry.stat().st_uid != me:
                continue
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
            if wanted in zip(argv, argv[1:]):
                os.kill(int(entry.name), signal.SIGKILL)
        except (OSError, ValueError):
            continue


# --------------------------------------------------------------------------- setting it up

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


def _refusal(cause: str, fix: str) -> str:
    return (f"the sandbox cannot be set up: {cause}. Fix: {fix}; or, to grade without containment "
            "(only for code you trust), pass --no-sandbox or set AUTOGRADER_SANDBOX=off.")


def _own_cgroup(controller: str) -> str | None:
    """This process's cgroup path in the hierarchy of ``controller`` ('' for cgroup v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if (controller and controller in controllers.split(",")) or (not controller and controllers == ""):
            return path
    return None


def _new_cgroup(parent: Path, uid: int) -> Path:
    """A new cgroup for ``uid`` below ``parent``, once the empty ones a grader that died left
    there for it are removed (the uid is locked by this process now)."""
    for old in parent.glob(f"autograder-{uid}-*"):
        try:
            old.rmdir()
        except OSError:
            pass
    folder = parent / f"autograder-{uid}-{os.getpid()}"
    folder.mkdir(exist_ok=True)
    return folder


def memory_cgroup(uid: int, mb: int, cgroups: bool = True) -> tuple[str | None, str]:
    """A new memory cgroup (v1, or v2 with the memory controller) below the grader's own, limited
    to ``mb`` MiB; returns (its folder or None, how memory is limited). ``cgroups``: False where
    the operator turned them off (``AUTOGRADER_MEMORY_CGROUP``)."""
    if not cgroups:
        return None, f"memory limit {mb} MiB per process (RLIMIT_DATA: memory cgroups turned off)"
    limit = str(mb << 20)
    v1 = Path("/sys/fs/cgroup/memory")
    try:
        own = _own_cgroup("memory")
        if own is not None and (v1 / "memory.limit_in_bytes").exists():
            folder = _new_cgroup(v1 / own.lstrip("/"), uid)
            (folder / "memory.limit_in_bytes").write_text(limit)
            if (folder / "memory.memsw.limit_in_bytes").exists():
                (folder / "memory.memsw.limit_in_bytes").write_text(limit)
            return str(folder), f"memory limit {mb} MiB (a memory cgroup, v1)"
        v2 = Path("/sys/fs/cgroup")
        own = _own_cgroup("")
        if own is not None and "memory" in (v2 / "cgroup.controllers").read_text().split():
            parent = v2 / own.lstrip("/")
            if "memory" not in (parent / "cgroup.subtree_control").read_text().split():
                (parent / "cgroup.subtree_control").write_text("+memory")
            folder = _new_cgroup(parent, uid)
            (folder / "memory.max").write_text(limit)
            if (folder / "memory.swap.max").exists():
                (folder / "memory.swap.max").write_text("0")
            return str(folder), f"memory limit {mb} MiB (a memory cgroup, v2)"
    except OSError:
        pass
    return None, f"memory limit {mb} MiB per process (RLIMIT_DATA: no memory cgroup could be made)"


def thread_cap(nproc: int) -> int:
    """Processes and threads one kernel or program runner may have (``pids.max``, and
    ``RLIMIT_NPROC``), never more than ``nproc`` (``AUTOGRADER_NPROC``): enough for JAX's thread
    pools here, far from the hundreds of busy threads that would starve its neighbours."""
    return min(nproc, max(256, 16 * (os.cpu_count() or 1)))


def cpu_quota_cores() -> int:
    """The CPUs one kernel or program runner may use at once (``cpu.max``/``cfs_quota_us``):
    all but one where there are several, so that a submission never takes the whole machine."""
    return max(1, (os.cpu_count() or 1) - 1)


def share_cgroups(uid: int, threads: int, memory: str | None = None, cgroups: bool = True) -> tuple[list[str], str]:
    """New cgroups below the grader's own giving a kernel (or program runner) of ``uid`` an
    equal CPU share, at most :func:`cpu_quota_cores` CPUs and ``threads`` threads: ``(their
    folders, how CPU and threads are limited)``. cgroup v1 (the cpu and pids hierarchies) or v2
    (set on ``memory``, the memory cgroup, where there is one: a process is in one cgroup of
    v2); none where they cannot be made (``RLIMIT_NPROC`` alone then caps threads)."""
    if not cgroups:
        return [], "no CPU share (cgroups turned off)"
    cores = cpu_quota_cores()
    made: list[str] = []
    try:
        v1 = {c: Path("/sys/fs/cgroup") / c for c in ("cpu", "pids")}
        if (v1["cpu"] / "cpu.shares").exists() and (v1["pids"] / "cgroup.procs").exists():
            for controller, root in v1.items():
                own = _own_cgroup(controller)
                if own is None:
                    raise OSError(f"no {controller} cgroup")
                folder = _new_cgroup(root / own.lstrip("/"), uid)
                made.append(str(folder))
                if controller == "cpu":
                    period = int((folder / "cpu.cfs_period_us").read_text())
                    (folder / "cpu.cfs_quota_us").write_text(str(cores * period))
                else:
                    (folder / "pids.max").write_text(str(threads))
            return made, f"{cores} CPU(s) and {threads} threads at most, an equal CPU share (cgroups v1)"
        v2 = Path("/sys/fs/cgroup")
        own = _own_cgroup("")
        if own is not None and {"cpu", "pids"} <= set((v2 / "cgroup.controllers").read_text().split()):
            parent = v2 / own.lstrip("/")
            enabled = (parent / "cgroup.subtree_control").read_text().split()
            for controller in ("cpu", "pids"):
                if controller not in enabled:
                    (parent / "cgroup.subtree_control").write_text(f"+{controller}")
            if memory:  # one cgroup per process in v2: the memory cgroup's, where there is one
                folder = Path(memory)
            else:
                folder = _new_cgroup(parent, uid)
                made.append(str(folder))
            (folder / "cpu.weight").write_text("100")
            (folder / "cpu.max").write_text(f"{cores * 100000} 100000")
            (folder / "pids.max").write_text(str(threads))
            return made, f"{cores} CPU(s) and {threads} threads at most, an equal CPU share (cgroups v2)"
    except OSError:
        pass
    for folder in reversed(made):
        try:
            os.rmdir(folder)
        except OSError:
            pass
    return [], f"no CPU share (no cgroup could be made); {threads} threads at most (RLIMIT_NPROC)"


def _hidden_paths(settings: Settings, root: Path | None, submission: Path | None, extra=()) -> list[str]:
    """What a contained kernel must never see: the course, the package's checkout, the course
    state, temporary folders, the submission's own folders and ``extra``. The kernel's view is
    an allow-list, so none is in it; one inside a kept folder (a course inside a conda
    environment) is emptied there (:func:`bwrap_command`)."""
    from ..common.course import cache_dir

    paths = [tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm", "/run/lock",
             "/dev/mqueue", cache_dir()]  # the template gradebooks hold the source's cells
    # the folder around the package: a checkout is hidden, but an installed package's folder is
    # the venv's site-packages (Colab, a wheel), which the kernel needs
    around = package_root().resolve()
    if (around / "solutions").is_dir() or not str(around).startswith(os.path.realpath(sys.prefix) + os.sep):
        paths.insert(0, package_root())
    if root is not None:
        paths.append(root)
    paths += [p for p in (settings.course_state, settings.course_root) if p]
    paths += settings.hide
    paths += list(extra)
    for kept in (Path(sys.prefix), package_root()):  # a course around the venv or the package
        paths += [p for p in Path(kept).resolve().parents if (p / "solutions").is_dir()]
    if submission is not None:
        folder = Path(submission).resolve().parent
        paths += [folder, folder.parent]
    out = []
    for p in paths:
        p = os.path.realpath(p)
        if p not in _SYSTEM and p not in out:
            out.append(p)
    return out


def open_sandbox(deadline: float, settings: Settings, root: Path | None = None,
                 submission: Path | None = None, hide=()) -> Sandbox:
    """The sandbox of one submission (as root, with a sandbox uid locked for it), or say why its
    kernel cannot be contained, as the command's ``settings`` say."""
    import fcntl
    import pwd
    import secrets as random_names

    limits = dict(memory_mb=settings.memory_mb, threads=thread_cap(settings.nproc), box_mb=settings.box_mb)
    if not settings.sandbox:
        return Sandbox(NONE, "the operator turned the sandbox off (--no-sandbox or "
                             "AUTOGRADER_SANDBOX=off): the kernel ran with the grader's uid, "
                             "its files and its network", **limits)
    as_root = os.geteuid() == 0
    bwrap = find_bwrap()
    cause, fix = bwrap_problem(bwrap, as_root)
    if cause:
        return Sandbox(REFUSED, _refusal(cause, fix))
    token, hidden = f"autograder-{random_names.token_hex(8)}", _hidden_paths(settings, root, submission, hide)
    if not as_root:
        return Sandbox(USER_NAMESPACE, f"bubblewrap: user, mount, PID and network namespaces of its own, "
                                       f"the grader's uid; memory limit {settings.memory_mb} MiB per process "
                                       f"(RLIMIT_DATA); {limits['threads']} threads at most (RLIMIT_NPROC in "
                                       f"its user namespace); no CPU share without root",
                       os.getuid(), bwrap=bwrap, token=token, hide=hidden, **limits)
    locks = _lock_dir()
    if locks is None:
        return Sandbox(REFUSED, _refusal("there is no private folder for the sandbox uid locks (/run/lock "
                                         "or the temporary folder, owned by root, not writable by others)",
                                         "make /run/lock writable by root only"))
    while True:
        for uid in settings.sandbox_uids:
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
            box = Sandbox(NAMESPACE, "", uid, fd, bwrap, token, hide=hidden, **limits)
            if os.pread(fd, 4, 0) == b"busy":  # its last grader died holding it: kill what is left
                box.kill_all()
            os.pwrite(fd, b"busy", 0)
            box.cgroup, memory = memory_cgroup(uid, settings.memory_mb, settings.memory_cgroup)
            box.cgroups, share = share_cgroups(uid, box.threads, box.cgroup, settings.memory_cgroup)
            box.reason = (f"bubblewrap: mount, PID and network namespaces of its own, uid {uid} of its "
                          f"own; {memory}; {share}")
            return box
        if time.monotonic() > deadline:
            raise GradingError("every sandbox uid stayed busy until the notebook's time limit")
        time.sleep(0.2)


_CHECKED: dict = {}


def check_sandbox(box: Sandbox, home: Path, workdir: Path, secrets=()) -> str:
    """'' if a kernel can start in ``box``: the sandbox uid, in its view of the files, imports
    ipykernel and the autograder package, writes its home, and cannot see ``secrets``; else
    what went wrong. A success is kept per process, temporary folder and ``bwrap`` (the view's
    allow-list is the same for every uid and notebook, so later notebooks reuse it); a failure
    is probed again by the next notebook (a busy machine's timeout refuses only its own)."""
    import subprocess

    key = (sys.executable, str(home.parent.parent.parent), box.mode, box.bwrap)
    if key in _CHECKED:
        return _CHECKED[key]
    probe = box.wrap([*LAUNCHER, "check", f"--home={home}", f"--package={package_root() / 'autograder'}",
                      *[f"--secret={s}" for s in secrets]])
    try:
        proc = subprocess.run(limited(probe, 60, box), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=60, cwd=workdir, env=kernel_env(home))
        err = proc.stderr.decode(errors="replace").strip()
        err = err.splitlines()[-1] if err else f"exit status {proc.returncode}"
        problem = f"a kernel could not start in the sandbox ({err})" if proc.returncode else ""
    except (OSError, subprocess.SubprocessError) as exc:
        problem = f"the sandbox could not start: {exc}"
    if not problem:
        _CHECKED[key] = problem
    return problem


def probe_refusal(problem: str) -> str:
    """The refusal's words for a failed :func:`check_sandbox`, with the fix for its real cause:
    a file the sandbox uid cannot read (named, with its mode), a mount or namespace refused (the
    machine's permissions), or what the kernel's view lacks."""
    if "cannot read" in problem:
        fix = "make the files it names readable by other users"
    elif "bwrap" in problem or "bubblewrap" in problem or "not permitted" in problem:
        fix = NAMESPACES_FIX if os.geteuid() == 0 else USERNS_FIX
    else:
        fix = ("report it: the kernel's view (bwrap_command in autograder/sandbox/containment.py) lacks "
               "a file the kernel needs; its error says which")
    return _refusal(problem, fix)


def chown_tree(path: Path, uid: int) -> None:
    if uid == os.geteuid():
        return  # already its (bubblewrap's sandbox runs with the grader's uid)
    os.chown(path, uid, uid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)
