"""The sandbox's launcher: run as root inside the kernel's new namespaces, it builds the kernel's
view of the file system, drops to the sandbox uid and executes the kernel.

Started by :meth:`autograder.sandbox.containment.Sandbox.wrap` as ``unshare --mount --propagation private
--pid --net --fork --kill-child -- python -s -P -m autograder.sandbox.launcher run [options] --
KERNEL...``; this module then runs as PID 1 of a new PID namespace, in a private mount namespace
and a network namespace with nothing but a loopback interface that is down (the kernel talks to
the grader over Unix sockets). It imports the standard library only (``-s -P``: no user site,
not the current folder, so a submission's files cannot stand in for a module).

``run`` builds the kernel's root from nothing (an allow-list, never a deny-list):

1. a handle on every path to keep (``--ro``: the venv, the Python it was made from, the
   ``autograder`` package; ``--rw``: the submission's box) and on the system's (:data:`SYSTEM`,
   the files :data:`ETC` of ``/etc``, the devices :data:`DEV` and an accelerator's), taken
   *before* anything is mounted;
2. an empty tmpfs (on ``/tmp``, of this namespace only) becomes the new root: the system's
   folders, ``/etc``'s few files and each kept path are bind-mounted there at their own
   absolute paths, read-only (the box read-write), the links on the way to them (``/bin ->
   usr/bin``, a venv's ``python -> /root/.pyenv/...``) made again, the folders leading to them
   created traversable (so a 0700 home or temporary folder above them does not matter); a
   ``/dev`` of the few devices, private ``/tmp``, ``/var/tmp`` and ``/dev/shm``, a fresh
   ``/proc`` (the namespace's own processes); a path of ``--hide`` that lies inside a kept
   folder gets an empty tmpfs;
3. ``pivot_root`` to it, the machine's root detached (a ``chroot`` where that call is refused):
   the checkout, ``solutions/``, the gradebooks, other submissions, ``/home``, ``/run``, every
   file nobody named, do not exist there;
4. ``setgroups([])``, ``setresgid``, ``setresuid`` to the sandbox uid, ``no_new_privs``; every
   kept path is checked readable by that uid (else the launcher exits naming the path, its mode
   and owner: the real cause, not what the loader would say); then ``execve`` of the kernel
   in the current folder (the submission's).

``check`` runs as the sandbox uid inside that view (the same ``run``, with this module as the
"kernel"): it exits non-zero, saying why, unless ipykernel and the ``autograder`` package import,
the home folder is writable, and the paths given cannot be read.

``limits``: started by the grading process (see :func:`autograder.sandbox.containment.limited`), before
``unshare`` or, without a sandbox, the kernel itself: it asks to die with that process
(``PR_SET_PDEATHSIG``, kept across ``execve``), lifts the grading process's own soft limit on
data memory, sets the CPU-time limit and no core dumps (and, with ``--nice``, a lower
priority), in a sandbox a cap on processes and the memory limit (the cgroup joined, or
``RLIMIT_DATA``), and executes the rest of its command line. Without root it runs a second time
inside bubblewrap's sandbox, with ``--nproc`` alone: there ``RLIMIT_NPROC`` counts the sandbox's
own processes, not all of the grader's uid (:meth:`autograder.sandbox.containment.Sandbox.wrap`).

``kill UID``: as root, drop to ``UID`` and kill every process of it (``kill(-1, SIGKILL)``, in
whatever session or namespace): :meth:`autograder.sandbox.containment.Sandbox.kill_all`.
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
MNT_DETACH = 2


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


def _depth(path: str) -> int:
    return path.rstrip("/").count("/")


# The kernel's view is an allow-list: a root built empty, then only these, read-only.
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "passwd", "group", "nsswitch.conf", "hosts",
       "host.conf", "localtime", "timezone", "alternatives", "fonts", "mime.types", "os-release",
       "debian_version", "locale.alias", "ssl", "ca-certificates", "matplotlibrc")
DEV = ("null", "zero", "full", "random", "urandom")
ACCELERATORS = ("nvidia", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "nvidia-caps",
                "dri", "kfd", "accel", "vfio")  # /dev entries a GPU or TPU runtime opens, when present
_NEW_ROOT = "/tmp"  # where the empty root is mounted before it becomes "/" (any folder would do)
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "ppc64": 203,
                   "s390x": 217}


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


def _place_link(new: str, link: str, text: str) -> None:
    where = new + link
    if os.path.lexists(where):
        return
    os.makedirs(os.path.dirname(where), mode=0o755, exist_ok=True)
    os.symlink(text, where)


def _bind(source_fd: int | str, new: str, path: str, ro: bool, rec: bool = False) -> None:
    """``path`` of the machine (``source_fd``: a handle on it) at ``path`` of the new root."""
    src = source_fd if isinstance(source_fd, str) else f"/proc/self/fd/{source_fd}"
    where = new + path
    if os.path.isdir(src):
        os.makedirs(where, mode=0o755, exist_ok=True)
    elif not os.path.lexists(where):
        os.makedirs(os.path.dirname(where), mode=0o755, exist_ok=True)
        open(where, "a").close()  # a mount point for a file
    _mount(src, where, None, MS_BIND | (MS_REC if rec else 0))
    if ro:
        _mount(None, where, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _pivot(new: str) -> None:
    """Make ``new`` the root of this mount namespace, the machine's root detached below it
    (``pivot_root(".", ".")``); a ``chroot`` where the call is unknown or refused."""
    import platform

    os.chdir(new)
    number = _SYS_PIVOT_ROOT.get(platform.machine())
    if number is not None and libc().syscall(number, b".", b".") == 0:
        if libc().umount2(b".", MNT_DETACH) != 0:
            raise SystemExit(f"autograder sandbox: detaching the machine's root failed: "
                             f"{os.strerror(ctypes.get_errno())}")
    else:
        os.chroot(".")
    os.chdir("/")



def build_view(keep_ro: list[str], keep_rw: list[str], hide: list[str] = ()) -> None:
    """Steps 1-3 of ``run`` (see the module's docstring): the kernel's root, built empty, with
    ``keep_ro`` (read-only) and ``keep_rw`` at their paths; ``hide``: folders inside them to empty."""
    os.umask(0o022)
    keep = [(p, True) for p in keep_ro] + [(p, False) for p in keep_rw]
    keep = [(p, ro, *_resolve(p)) for p, ro in keep if os.path.exists(p)]
    system = [p for p in SYSTEM if os.path.lexists(p)]
    etc = [f"/etc/{n}" for n in ETC if os.path.lexists(f"/etc/{n}")]
    dev = [f"/dev/{n}" for n in DEV + ACCELERATORS if os.path.exists(f"/dev/{n}")]
    dev += [f"/dev/{n}" for n in _listdir("/dev") if n.startswith(("nvidia", "accel"))
            and f"/dev/{n}" not in dev]
    # handles on everything first: the empty root is mounted where a kept path may lie (/tmp)
    handles = {}
    for path in [*(real for *_, real in keep), *system, *etc, *dev]:
        if not os.path.islink(path) and path not in handles:
            handles[path] = os.open(path, os.O_PATH | os.O_CLOEXEC)
    new = _NEW_ROOT if os.path.isdir(_NEW_ROOT) and not os.path.islink(_NEW_ROOT) else "/mnt"
    _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for path in system + etc:  # /bin -> usr/bin stays a link
        if os.path.islink(path):
            _place_link(new, path, os.readlink(path))
        else:
            _bind(handles[path], new, path, ro=True)
    os.makedirs(new + "/dev", mode=0o755)
    _mount("tmpfs", new + "/dev", "tmpfs", MS_NOSUID, "mode=0755,size=64k")
    for path in dev:
        _bind(handles[path], new, path, ro=False, rec=os.path.isdir(path))
    for name, text in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"),
                       ("stdout", "/proc/self/fd/1"), ("stderr", "/proc/self/fd/2")):
        os.symlink(text, f"{new}/dev/{name}")
    for shared in ("/dev/shm", "/tmp", "/var/tmp"):
        os.makedirs(new + shared, mode=0o755, exist_ok=True)
        _mount("tmpfs", new + shared, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=512m")
    if len(dev) > len([n for n in DEV if os.path.exists(f"/dev/{n}")]) and os.path.isdir("/sys"):
        _bind("/sys", new, "/sys", ro=True, rec=True)  # a GPU or TPU runtime reads its devices there
    os.makedirs(new + "/proc", mode=0o755)
    # hidepid=2: the uid sees its own processes only (not the launcher, PID 1, whose command line
    # names the hidden folders)
    _mount("proc", new + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=2")
    for given, ro, links, real in sorted(keep, key=lambda k: _depth(k[3])):
        for link, text in links:
            _place_link(new, link, text)
        _bind(handles[real], new, real, ro)
    kept = [real for *_, real in keep]
    for path in {os.path.realpath(p) for p in hide}:  # inside a kept folder: emptied
        if os.path.isdir(path) and any(path.startswith(k + "/") for k in kept):
            _mount("tmpfs", new + path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=64k")
    for fd in handles.values():
        os.close(fd)
    _pivot(new)


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def unreadable(paths: list[str]) -> list[str]:
    """Which of ``paths`` this process (the sandbox uid, in its view) cannot read, each with its
    mode and owner: the real reason a kernel could not start there."""
    out = []
    for path in paths:
        real = os.path.realpath(path)
        if os.path.exists(real) and not os.access(real, os.R_OK | (os.X_OK if os.path.isdir(real) else 0)):
            st = os.stat(real)
            out.append(f"{real} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid})")
    return out


def check_readable(paths: list[str]) -> None:
    """Exit naming what of ``paths`` the sandbox uid cannot read: the kernel could not start,
    and this says why, not what the loader would say of it."""
    blocked = unreadable(paths)
    if blocked:
        raise SystemExit(f"autograder sandbox: the sandbox uid cannot read {'; '.join(blocked)}: make it "
                         f"readable by other users (chmod -R o+rX), or install the course's Python "
                         f"where other users can read it")


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
    check_readable(args.ro + args.rw)
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


def kill_uid(uid: int) -> int:
    """Kill every process of ``uid``, from a process started as root: its groups dropped, then
    its gid and uid set for good, so that only that uid's processes can be signalled."""
    if uid <= 0:
        return 2
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if os.getuid() != uid:
        return 2
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return 0


def limits(args) -> None:
    import resource

    die_with_parent(args.parent)  # the grading process that started it
    # the grading process's own cap on data memory (a soft limit, for the judge) is not the kernel's
    resource.setrlimit(resource.RLIMIT_DATA, (resource.getrlimit(resource.RLIMIT_DATA)[1],) * 2)
    if args.cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (args.cpu, args.cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if args.nice:
        os.nice(args.nice)  # kept across execve; raised back by root only (see the runner's start)
    if args.nproc:
        resource.setrlimit(resource.RLIMIT_NPROC, (args.nproc, args.nproc))
    for folder in args.join:  # a CPU share and a thread cap (best effort: RLIMIT_NPROC stays)
        try:
            with open(os.path.join(folder, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:
            pass
    if args.memory:
        try:
            if not args.cgroup:
                raise OSError("no memory cgroup")
            with open(os.path.join(args.cgroup, "cgroup.procs"), "w") as f:
                f.write(str(os.getpid()))
        except OSError:  # never without a memory limit
            resource.setrlimit(resource.RLIMIT_DATA, (args.memory, args.memory))
    os.execvp(args.command[0], args.command)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.sandbox.launcher")
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
    lim.add_argument("--cpu", type=int, default=0, help="CPU seconds (unchanged when 0)")
    lim.add_argument("--parent", type=int, default=0, help="the pid that must still be the parent")
    lim.add_argument("--nproc", type=int, default=0)
    lim.add_argument("--nice", type=int, default=0, help="added to the nice value (a lower priority)")
    lim.add_argument("--memory", type=int, default=0, help="bytes")
    lim.add_argument("--cgroup", default="")
    lim.add_argument("--join", action="append", default=[], help="more cgroups to join (CPU share, threads)")
    lim.add_argument("command", nargs=argparse.REMAINDER)
    k = sub.add_parser("kill", help="as root: kill every process of a sandbox uid")
    k.add_argument("uid", type=int)
    args = parser.parse_args(argv)
    if args.what == "kill":
        return kill_uid(args.uid)
    if args.what in ("run", "limits"):
        if args.command and args.command[0] == "--":
            args.command = args.command[1:]
        if not args.command:
            parser.error("no command to run")
        {"run": run, "limits": limits}[args.what](args)
        return 0  # not reached: the command is executed
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
