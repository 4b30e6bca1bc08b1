"""The kernel's view of the machine, built by bubblewrap: an allow-list of files from an empty
root (:func:`bwrap_command`, :func:`kernel_paths`), what it must never see
(:func:`hidden_paths`), and whether bubblewrap can contain a process here
(:func:`bwrap_problem`)."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

from ..common.course import package_root
from ..common.settings import Settings
from .launch import interpreter

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
# Without root: a user namespace that its processes cannot leave for one of their own (whose
# capabilities would let them mount, or unshare again); bubblewrap 0.8 and later.
NO_NESTED_USERNS = ["--unshare-user", "--disable-userns"]


def namespaces(bwrap: str, as_root: bool) -> list[str]:
    """bubblewrap's namespace options for a sandbox (:data:`NAMESPACES`), without root with
    :data:`NO_NESTED_USERNS` where this bubblewrap has them."""
    return NAMESPACES[as_root] + (NO_NESTED_USERNS if not as_root and nested_userns_refused(bwrap) else [])


_HELP: dict = {}


def nested_userns_refused(bwrap: str) -> bool:
    """Whether ``bwrap`` can refuse nested user namespaces (``--disable-userns``, bubblewrap 0.8)."""
    if bwrap not in _HELP:
        import subprocess

        try:
            _HELP[bwrap] = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            _HELP[bwrap] = ""
    return "--disable-userns" in _HELP[bwrap]


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
            proc = subprocess.run([bwrap, *namespaces(bwrap, as_root), "--die-with-parent", "--ro-bind", "/", "/",
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


def bwrap_command(bwrap: str, token: str, keep_rw=(), hide=(), as_root: bool = False, scratch_mb: int = 0) -> list[str]:
    """bubblewrap's command line for a kernel or program runner (the command follows, after
    ``--``; the view is described in docs/security.md): namespaces of its own (a user namespace
    too unless ``as_root``, one its processes cannot leave for another: :func:`namespaces`), a
    root built empty with the allow-list (:data:`SYSTEM`, :data:`ETC`, an accelerator's devices,
    :func:`kernel_paths`) read-only and ``keep_rw`` (the box) read-write, each with the links on
    the way to it made again; a folder of ``hide`` that lies inside a kept one is emptied.
    ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are tmpfs of their own, together at most
    ``scratch_mb`` MiB when it is given (their pages are memory no memory limit counts: half for
    ``/tmp``, a quarter for each other). ``token`` names its processes for :meth:`Sandbox.kill_all`."""
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
    scratch = []
    for path, share in (("/tmp", 2), ("/var/tmp", 4), ("/dev/shm", 4)):
        scratch += [*(["--size", str((scratch_mb << 20) // share)] if scratch_mb else []), "--tmpfs", path]
    return [bwrap, *namespaces(bwrap, as_root), "--die-with-parent", "--new-session", "--unsetenv", "JPY_PARENT_PID",
            "--hostname", token, "--proc", "/proc", "--dev", "/dev", *scratch,
            *[a for d in sorted(folders - {"/"}) for a in ("--dir", d)], *cmd]


def kill_bwrap(token: str) -> None:
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


def kernel_paths() -> list[str]:
    """What a contained kernel sees read-only besides :data:`SYSTEM`, :data:`ETC` and its box:
    the interpreter (the venv and the Python it was made from, wherever they live), the real
    site-packages and the folders of the shared libraries this process loaded that lie outside
    them, and the learner-facing package (``autograder/``, not the checkout around it)."""
    import site

    paths = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
              os.path.dirname(interpreter()), os.path.dirname(os.path.realpath(sys.executable))):
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


_SYSTEM = {"/", "/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev",
           "/run", "/var", "/opt"}  # never hidden from a kernel (it could not start)


def hidden_paths(settings: Settings, root: Path | None, submission: Path | None, extra=()) -> list[str]:
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
