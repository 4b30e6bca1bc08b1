"""The sandbox's launcher: run as root inside the kernel's new namespaces, it builds the kernel's
view of the file system, drops to the sandbox uid and executes the kernel.

Started by :meth:`autograder.sandbox.Sandbox.wrap` as ``unshare --mount --propagation private
--pid --net --fork --kill-child -- python -I .../launch.py run [options] -- KERNEL...``; this
file then runs as PID 1 of a new PID namespace, in a private mount namespace and a network
namespace with nothing but a loopback interface that is down (the kernel talks to the grader
over Unix sockets). It uses the standard library only (``-I``: no user site, no
``PYTHONPATH``, not the current folder).

``run``:

1. a fresh ``/proc`` (the namespace's own processes only);
2. a handle on every path to keep (``--ro``: the venv, the Python installation, the
   ``autograder`` package; ``--rw``: the submission's box), taken *before* anything is hidden;
3. every path of ``--hide`` (the course checkout, the course state, temporary folders) and every
   folder on the way to a kept path that the sandbox uid could not enter (a 0700 home or
   temporary folder) gets an empty tmpfs mounted over it: what it held is out of reach;
4. every kept path is bind-mounted back at its own absolute path (read-only, or read-write for
   the box), with the folders leading to it created traversable in the tmpfs above it;
5. ``setgroups([])``, ``setresgid``, ``setresuid`` to the sandbox uid, ``no_new_privs``, then
   ``execve`` of the kernel in the current folder (the submission's).

``check`` runs as the sandbox uid inside that view (the same ``run``, with this module as the
"kernel"): it exits non-zero, saying why, unless ipykernel and the ``autograder`` package import,
the home folder is writable, and the paths given cannot be read.

``limits``: started by the grading process (see :func:`autograder.sandbox.limited`), before
``unshare`` or, without a sandbox, the kernel itself: it asks to die with that process
(``PR_SET_PDEATHSIG``, kept across ``execve``), lifts the grading process's own soft limit on
data memory, sets the CPU-time limit and no core dumps, in a
sandbox a cap on processes and the memory limit (the cgroup joined, or ``RLIMIT_DATA``), and
executes the rest of its command line.

``kill UID``: as root, become ``UID`` and kill every process of it (``kill(-1)`` from that uid
reaches exactly its processes, in whatever session or namespace).
"""
from __future__ import annotations

import argparse
import ctypes
import os
import signal
import stat
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT, MS_BIND = 1, 2, 4, 8, 32, 4096
MS_REC, MS_PRIVATE = 16384, 1 << 18


def libc():
    """The C library, for prctl(2) and mount(2) (``ctypes``; loaded once)."""
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


_LIBC = None


def die_with_parent(parent: int = 0, prctl=None) -> None:
    """Ask for SIGKILL when the parent ends (``PR_SET_PDEATHSIG``: Linux only; kept across
    ``execve``, cleared by a change of uid), then exit at once if ``parent`` (a pid) is no
    longer the parent: it ended before the request took effect. ``prctl``: the C function,
    looked up beforehand by a caller that must not load anything here (a forked child)."""
    if sys.platform.startswith("linux"):
        (prctl or libc().prctl)(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent and os.getppid() != parent:
        os._exit(1)


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    """mount(2) itself (a dozen per kernel: no ``mount`` program started for each)."""
    def c(text):
        return text.encode() if text else None
    if libc().mount(c(source), c(target), c(fstype), ctypes.c_ulong(flags), c(data)) != 0:
        what = fstype or ("a read-only remount" if flags & MS_REMOUNT else "a bind mount")
        raise SystemExit(f"autograder sandbox: mounting {what} on {target} failed: "
                         f"{os.strerror(ctypes.get_errno())}")


def _ancestors(path: str) -> list[str]:
    """``/a``, ``/a/b``, ... of an absolute path, itself excluded."""
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[:i + 1]) for i in range(len(parts))]


def _enterable_by_others(path: str) -> bool:
    try:
        st = os.stat(path)
    except OSError:
        return True  # nothing there to hide
    return bool(st.st_mode & stat.S_IXOTH)


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


def build_view(keep_ro: list[str], keep_rw: list[str], hide: list[str]) -> None:
    """Steps 1-4 of ``run`` (see the module's docstring)."""
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    keep = [(os.path.realpath(p), True) for p in keep_ro] + [(os.path.realpath(p), False) for p in keep_rw]
    keep = [(p, ro) for p, ro in keep if os.path.exists(p)]
    handles = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p, _ in keep}
    hidden = {os.path.realpath(p) for p in hide if os.path.isdir(p)}
    for p, _ in keep:
        hidden.update(a for a in _ancestors(p) if not _enterable_by_others(a))
    hidden.discard("/")
    shared_tmp = {"/tmp", "/var/tmp", "/dev/shm", "/run/lock"}
    for path in sorted(hidden, key=_depth):
        if not os.path.isdir(path) or any(path.startswith(h + "/") for h in hidden if h != path
                                          and _depth(h) < _depth(path)):
            continue  # already under an empty tmpfs
        mode, size = ("1777", "512m") if path in shared_tmp else ("0755", "1m")
        _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},size={size}")
    for p, ro in sorted(keep, key=lambda k: _depth(k[0])):
        if os.path.isdir(f"/proc/self/fd/{handles[p]}"):
            os.makedirs(p, mode=0o755, exist_ok=True)
        elif not os.path.exists(p):
            os.makedirs(os.path.dirname(p), mode=0o755, exist_ok=True)
            open(p, "a").close()  # noqa: SIM115 - a mount point for a file
        _mount(f"/proc/{os.getpid()}/fd/{handles[p]}", p, None, MS_BIND)
        if ro:
            _mount(None, p, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for fd in handles.values():
        os.close(fd)


def drop_to(uid: int) -> None:
    """Become ``uid`` (its own group, no supplementary groups, no capabilities, no way back)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit("autograder sandbox: prctl(PR_SET_NO_NEW_PRIVS) failed")
    # unshare's --kill-child asked for SIGKILL when unshare ends, but a change of uid clears that
    # request: ask again, so that the kernel ends with its grading process whatever kills it
    die_with_parent()
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit("autograder sandbox: the uid did not change")


def run(args) -> None:
    cwd = os.getcwd()
    build_view(args.ro, args.rw, args.hide)
    drop_to(args.uid)
    os.chdir(cwd)  # the same path, now seen through the view
    os.execvp(args.command[0], args.command)


def check(args) -> int:
    """As the sandbox uid, in its view: what the kernel needs works, what is hidden is."""
    import importlib.util

    problems = []
    for name in ("ipykernel", "autograder"):
        if importlib.util.find_spec(name) is None:
            problems.append(f"cannot import {name}")
    spec = importlib.util.find_spec("autograder")
    if spec is not None and args.package and not os.path.realpath(spec.origin).startswith(
            os.path.realpath(args.package) + os.sep):
        problems.append(f"imports autograder from {spec.origin}, not from {args.package}")
    probe = os.path.join(args.home, ".probe")
    try:
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as exc:
        problems.append(f"cannot write its home folder ({exc.strerror})")
    for path in args.secret:
        if os.path.exists(path):
            problems.append(f"can still see {path}")
    if problems:
        print("; ".join(problems), file=sys.stderr)
        return 1
    return 0


def limits(args) -> None:
    import resource

    die_with_parent(args.parent)  # the grading process that started it
    # the grading process's own cap on data memory (a soft limit, for the judge) is not the kernel's
    resource.setrlimit(resource.RLIMIT_DATA, (resource.getrlimit(resource.RLIMIT_DATA)[1],) * 2)
    resource.setrlimit(resource.RLIMIT_CPU, (args.cpu, args.cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if args.nproc:
        resource.setrlimit(resource.RLIMIT_NPROC, (args.nproc, args.nproc))
    if args.memory:
        try:
            if not args.cgroup:
                raise OSError("no memory cgroup")
            with open(os.path.join(args.cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:  # never without a memory limit
            resource.setrlimit(resource.RLIMIT_DATA, (args.memory, args.memory))
    os.execvp(args.command[0], args.command)


def kill(uid: int) -> None:
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() == uid != 0:
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="launch.py")
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--uid", type=int, required=True)
    r.add_argument("--ro", action="append", default=[])
    r.add_argument("--rw", action="append", default=[])
    r.add_argument("--hide", action="append", default=[])
    r.add_argument("command", nargs=argparse.REMAINDER)
    c = sub.add_parser("check")
    c.add_argument("--home", required=True)
    c.add_argument("--package", default="")
    c.add_argument("--secret", action="append", default=[])
    lim = sub.add_parser("limits")
    lim.add_argument("--cpu", type=int, required=True, help="CPU seconds")
    lim.add_argument("--parent", type=int, default=0, help="the pid that must still be the parent")
    lim.add_argument("--nproc", type=int, default=0)
    lim.add_argument("--memory", type=int, default=0, help="bytes")
    lim.add_argument("--cgroup", default="")
    lim.add_argument("command", nargs=argparse.REMAINDER)
    k = sub.add_parser("kill")
    k.add_argument("uid", type=int)
    args = parser.parse_args(argv)
    if args.what in ("run", "limits"):
        if args.command and args.command[0] == "--":
            args.command = args.command[1:]
        if not args.command:
            parser.error("no command to run")
        (run if args.what == "run" else limits)(args)
        return 0  # not reached: the command is executed
    if args.what == "check":
        return check(args)
    kill(args.uid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
