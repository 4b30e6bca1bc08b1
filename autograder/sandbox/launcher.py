"""The sandbox's launcher: the small steps a contained process starts with
(``python -s -P -m autograder.sandbox.launcher STEP``: the standard library only, no user site,
not the current folder, so a submission's files cannot stand in for a module). What each step
contains is described in docs/security.md ("Containment").

``limits``: started by the grading process (:func:`autograder.sandbox.launch.limited`), it
sets the limits on itself and executes the rest of its command line (bubblewrap, or the command
itself without a sandbox). It runs a second time inside bubblewrap's view
(:meth:`autograder.sandbox.containment.Sandbox.wrap`): there it sets the thread cap and, as
root, drops to the sandbox uid once bubblewrap has bound every path as root (so the uid needs no
way through a 0700 folder around the checkout), and checks that the uid can read each
``--readable`` path before it executes the kernel.

``check`` runs in the sandbox like a kernel: it exits non-zero, saying why, unless ipykernel
and the ``autograder`` package import, the home folder is writable, and the paths given cannot
be read.

``kill UID``: as root, drop to ``UID`` and kill every process of it (``kill(-1, SIGKILL)``, in
whatever session or namespace): :meth:`autograder.sandbox.containment.Sandbox.kill_all`.
"""
from __future__ import annotations

import argparse
import ctypes
import functools
import os
import signal
import stat
import sys

PR_SET_NO_NEW_PRIVS = 38
PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


@functools.cache
def libc():
    """The C library, for prctl(2) and mount(2) (``ctypes``)."""
    return ctypes.CDLL(None, use_errno=True)


def die_with_parent(parent: int = 0, prctl=None) -> None:
    """Ask for SIGKILL when the parent ends (``PR_SET_PDEATHSIG``: Linux only; kept across
    ``execve``, cleared by a change of uid), then exit at once if ``parent`` (a pid) is no
    longer the parent: it ended before the request took effect. ``prctl``: the C function,
    looked up beforehand by a caller that must not load anything here (a forked child)."""
    if sys.platform.startswith("linux"):
        (prctl or libc().prctl)(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent and os.getppid() != parent:
        os._exit(1)


def check_readable(paths: list[str]) -> None:
    """Exit naming what of ``paths`` this process (the sandbox uid, in its view) cannot read,
    each with its mode and owner: the real reason a kernel could not start there, not what the
    loader would say of it."""
    blocked = []
    for path in map(os.path.realpath, paths):
        if os.path.exists(path) and not os.access(path, os.R_OK | (os.X_OK if os.path.isdir(path) else 0)):
            st = os.stat(path)
            blocked.append(f"{path} (mode {stat.S_IMODE(st.st_mode):04o}, owner uid {st.st_uid})")
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
    # a change of uid clears the request for SIGKILL when the parent ends: ask again (the end of
    # bubblewrap's init, the parent here, ends its whole PID namespace anyway)
    die_with_parent()
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit("autograder sandbox: the uid did not change")


# seccomp: the system calls that make a user namespace, per architecture (audit arch, unshare,
# clone, clone3); clone3 passes its flags in memory a filter cannot read, so it answers ENOSYS and
# the C library falls back to clone, whose flags it can
_USERNS_CALLS = {"x86_64": (0xC000003E, 272, 56, 435), "aarch64": (0xC00000B7, 97, 220, 435)}
CLONE_NEWUSER = 0x10000000


def deny_user_namespaces() -> None:
    """A seccomp filter, kept across execve and by every child: no user namespace can be made
    (``unshare`` or ``clone`` with ``CLONE_NEWUSER`` fails with EPERM, ``clone3`` with ENOSYS),
    and no system call of another ABI (x32, i386) is made. As root, where bubblewrap makes no
    user namespace its ``--disable-userns`` could close, this is what keeps the sandbox uid from
    making one (whose capabilities would let it mount, or unshare again)."""
    import errno
    import platform

    arch = _USERNS_CALLS.get(platform.machine())
    if arch is None:
        raise SystemExit(f"autograder sandbox: no seccomp filter for {platform.machine()}: user namespaces "
                         "cannot be refused here")
    audit, unshare, clone, clone3 = arch
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    allow, deny, nosys = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x00050000 | errno.ENOSYS
    prog = [(ld, 0, 0, 4), (jeq, 1, 0, audit), (ret, 0, 0, deny),      # another ABI: nothing
            (ld, 0, 0, 0), (jge, 0, 1, 0x40000000), (ret, 0, 0, deny),  # x32: nothing
            (jeq, 0, 1, clone3), (ret, 0, 0, nosys),
            (jeq, 1, 0, unshare), (jeq, 0, 3, clone),
            (ld, 0, 0, 16), (jset, 0, 1, CLONE_NEWUSER),                 # its flags, the first argument
            (ret, 0, 0, deny), (ret, 0, 0, allow)]

    class Filter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]

    class Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(Filter))]

    filters = (Filter * len(prog))(*[Filter(*f) for f in prog])
    program = Program(len(prog), filters)
    if libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or libc().prctl(
            PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(program), 0, 0) != 0:
        raise SystemExit(f"autograder sandbox: the seccomp filter refusing user namespaces could not be set "
                         f"({os.strerror(ctypes.get_errno())})")


def check(args) -> int:
    """In the sandbox, as a kernel would be: what the kernel needs works, what is hidden is."""
    import importlib.util

    problems = [f"cannot import {name}" for name in ("ipykernel", "autograder") if not importlib.util.find_spec(name)]
    spec = importlib.util.find_spec("autograder")
    if spec and not os.path.realpath(spec.origin).startswith(os.path.realpath(args.package) + os.sep):
        problems.append(f"imports autograder from {spec.origin}, not from {args.package}")
    probe = os.path.join(args.home, ".probe")
    try:
        with open(probe, "w"):
            pass
        os.remove(probe)
    except OSError as exc:
        problems.append(f"cannot write its home folder ({exc.strerror})")
    problems += [f"can still see {path}" for path in args.secret if os.path.exists(path)]
    if problems:
        print("; ".join(problems), file=sys.stderr)
        return 1
    return 0


def kill_uid(uid: int) -> int:
    """Kill every process of ``uid``, from a process started as root: dropped to that uid for
    good first, so that only that uid's processes can be signalled."""
    if uid <= 0:
        return 2
    drop_to(uid)
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return 0


def limits(args) -> None:
    import resource

    die_with_parent(args.parent)  # the grading process that started it (or bubblewrap)
    # the grading process's own cap on data memory (a soft limit, for the judge) is not the kernel's
    resource.setrlimit(resource.RLIMIT_DATA, (resource.getrlimit(resource.RLIMIT_DATA)[1],) * 2)
    if args.cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (args.cpu, args.cpu + 5))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if args.nice:
        os.nice(args.nice)  # kept across execve; raised back by root only (see the runner's start)
    if args.nproc:
        resource.setrlimit(resource.RLIMIT_NPROC, (args.nproc, args.nproc))
    if args.fsize:  # a larger write fails with EFBIG (Python ignores SIGXFSZ)
        resource.setrlimit(resource.RLIMIT_FSIZE, (args.fsize, args.fsize))
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
    if args.uid:
        drop_to(args.uid)
        check_readable(args.readable)
    if args.no_userns:
        deny_user_namespaces()
    os.execvp(args.command[0], args.command)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.sandbox.launcher")
    sub = parser.add_subparsers(dest="what", required=True)
    c = sub.add_parser("check")
    c.add_argument("--home", required=True)
    c.add_argument("--package", required=True, help="where autograder must be imported from")
    c.add_argument("--secret", action="append", default=[])
    lim = sub.add_parser("limits")
    lim.add_argument("--cpu", type=int, default=0, help="CPU seconds (unchanged when 0)")
    lim.add_argument("--parent", type=int, default=0, help="the pid that must still be the parent")
    lim.add_argument("--nproc", type=int, default=0)
    lim.add_argument("--nice", type=int, default=0, help="added to the nice value (a lower priority)")
    lim.add_argument("--fsize", type=int, default=0, help="bytes: the largest file it may write")
    lim.add_argument("--memory", type=int, default=0, help="bytes")
    lim.add_argument("--cgroup", default="")
    lim.add_argument("--join", action="append", default=[], help="more cgroups to join (CPU share, threads)")
    lim.add_argument("--uid", type=int, default=0, help="as root: the sandbox uid to drop to, last")
    lim.add_argument("--no-userns", action="store_true", help="refuse user namespaces (a seccomp filter), last")
    lim.add_argument("--readable", action="append", default=[], help="a path that uid must be able to read")
    lim.add_argument("command", nargs=argparse.REMAINDER)
    k = sub.add_parser("kill", help="as root: kill every process of a sandbox uid")
    k.add_argument("uid", type=int)
    args = parser.parse_args(argv)
    if args.what == "kill":
        return kill_uid(args.uid)
    if args.what == "limits":
        if args.command and args.command[0] == "--":
            args.command = args.command[1:]
        if not args.command:
            parser.error("no command to run")
        limits(args)
        return 0  # not reached: the command is executed
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
