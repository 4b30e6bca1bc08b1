"""The sandbox's launcher: run as root inside the kernel's new namespaces, it builds the kernel's
view of the file system, drops to the sandbox uid and executes the kernel.

Started by :meth:`autograder.sandbox.containment.Sandbox.wrap` as ``unshare --mount --propagation private
--pid --net --fork --kill-child -- python -I .../launch.py run [options] -- KERNEL...``; this
file then runs as PID 1 of a new PID namespace, in a private mount namespace and a network
namespace with nothing but a loopback interface that is down (the kernel talks to the grader
over Unix sockets). It uses the standard library only (``-I``: no user site, no
``PYTHONPATH``, not the current folder).

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

``run --zygote=SOCKET`` ends differently: once the view is built, the kernel is not executed
but asked of the batch's kernel zygote, a fork of a Python with ipykernel imported, placed in
these namespaces, this view and these limits (see "the kernel zygote" below); ``run`` stays
PID 1 of the namespace, passes on the signals it receives and exits with the kernel's status.

``check`` runs as the sandbox uid inside that view (the same ``run``, with this module as the
"kernel"): it exits non-zero, saying why, unless ipykernel and the ``autograder`` package import,
the home folder is writable, and the paths given cannot be read.

``limits``: started by the grading process (see :func:`autograder.sandbox.containment.limited`), before
``unshare`` or, without a sandbox, the kernel itself: it asks to die with that process
(``PR_SET_PDEATHSIG``, kept across ``execve``), lifts the grading process's own soft limit on
data memory, sets the CPU-time limit and no core dumps (and, with ``--nice``, a lower
priority), in a sandbox a cap on processes and the memory limit (the cgroup joined, or
``RLIMIT_DATA``), and executes the rest of its command line.

``expose --path=P ... -- CMD``: as root, in a mount namespace of its own, make each ``P``
reachable by every uid (an empty tmpfs on each folder on the way that others cannot enter, ``P``
bound back), then execute ``CMD``: for a grader of older commits, whose sandbox had no view of
its own (the test suite's control, tests/test_attacks_old_grader.py).

Killing every process of a uid is not done here: ``sandbox.KILL_UID`` (a few lines run with
``python -I -S -c``, where this script would be compiled on every start).
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
    # hidepid=2: the uid sees its own processes only (not the launcher, PID 1 with a kernel of the
    # zygote, whose command line names the hidden folders)
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


def expose(paths: list[str]) -> None:
    """In a mount namespace of its own, as root: make each of ``paths`` reachable by every uid
    where a folder on the way is not (a 0700 home or temporary folder): that folder gets an
    empty tmpfs, the paths are bound back at their own places. For ``expose`` (see ``main``)."""
    os.umask(0o022)
    paths = [os.path.realpath(p) for p in paths if os.path.exists(p)]
    handles = {p: os.open(p, os.O_PATH | os.O_CLOEXEC) for p in paths}
    hidden = set()
    for p in paths:
        hidden.update(a for a in _ancestors(p) if not _enterable_by_others(a))
    for path in sorted(hidden, key=_depth):
        if not any(path.startswith(h + "/") for h in hidden):
            _mount("tmpfs", path, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m")
    for p in sorted(paths, key=_depth):
        if any(p.startswith(h + "/") for h in hidden):
            _bind(handles[p], "", p, ro=False, rec=True)
    for fd in handles.values():
        os.close(fd)


def drop_to(uid: int, with_parent: bool = True) -> None:
    """Become ``uid`` (its own group, no supplementary groups, no capabilities, no way back)."""
    os.setgroups([])
    os.setresgid(uid, uid, uid)
    os.setresuid(uid, uid, uid)
    if libc().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit("autograder sandbox: prctl(PR_SET_NO_NEW_PRIVS) failed")
    # unshare's --kill-child asked for SIGKILL when unshare ends, but a change of uid clears that
    # request: ask again, so that the kernel ends with its grading process whatever kills it
    # (a kernel of the zygote does not: it ends with its namespace, whose first process asked)
    if with_parent:
        die_with_parent()
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit("autograder sandbox: the uid did not change")


def run(args) -> None:
    cwd = os.getcwd()
    zygote = _connect(args.zygote) if args.zygote else None  # before the view: it is not in it
    build_view(args.ro, args.rw, args.hide)
    if zygote is not None:
        raise SystemExit(_kernel_of_zygote(zygote, args, cwd))
    drop_to(args.uid)
    check_readable(args.ro + args.rw)
    os.chdir(cwd)  # the same path, now seen through the view
    os.execvp(args.command[0], args.command)


# --------------------------------------------------------------------------- the kernel zygote
#
# A batch's grading processes start their kernels from one zygote: a Python started once, with
# the kernel's environment, that has imported ipykernel (about 0.5 s of CPU a kernel would pay
# at its start) and nothing of the grader. For each kernel, ``run --zygote=SOCKET`` (PID 1 of the
# kernel's new namespaces, its view built, still root) sends the zygote its request: the uid,
# the folder, the environment, the kernel's arguments, and its standard streams (SCM_RIGHTS).
# The zygote forks a helper, which checks the request against its sender (root, PID 1 of
# namespaces other than the zygote's, a sandbox uid), takes on the sender's limits (rlimits,
# nice value, cgroup), joins its namespaces (IPC, network, PID, mount: its root becomes the
# view), and forks the kernel: a process of the sandbox's PID namespace that drops to the uid
# exactly as ``run`` does, then runs ``ipykernel_launcher`` as ``python -c`` would. The helper
# passes on the signals ``run`` forwards (interrupts) and reports the kernel's exit status;
# ``run`` exits with it. When ``run`` ends (killed with the kernel's process group, or its
# grading process), so does every process of the namespace; the helper kills the kernel too.

_ZYGOTE_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
_PEER_LIMITS = ("RLIMIT_CPU", "RLIMIT_DATA", "RLIMIT_AS", "RLIMIT_CORE", "RLIMIT_NPROC", "RLIMIT_NOFILE",
                "RLIMIT_FSIZE", "RLIMIT_STACK", "RLIMIT_MEMLOCK")


def _connect(path: str):
    import socket

    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
    except OSError as exc:
        raise SystemExit(f"autograder sandbox: the kernel zygote cannot be reached: {exc.strerror}") from None
    return conn


def _kernel_of_zygote(conn, args, cwd: str) -> int:
    """``run``'s end with a zygote: the request sent, the signals passed on, the kernel's exit
    status returned (``run`` exits with it)."""
    import json
    import socket

    request = {"uid": args.uid, "cwd": cwd, "env": dict(os.environ), "argv": args.command[3:],
               "paths": args.ro + args.rw}
    socket.send_fds(conn, [json.dumps(request).encode()], [0, 1, 2])
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # as the namespace's first process, it reaps orphans

    def forward(signum, _frame):
        try:
            conn.send(bytes([signum]))
        except OSError:
            pass
    for name in _ZYGOTE_SIGNALS:
        signal.signal(getattr(signal, name), forward)
    while True:
        data = conn.recv(1 << 16)
        if not data:
            return "autograder sandbox: the kernel zygote ended before the kernel did"
        reply = json.loads(data)
        if "error" in reply:
            return f"autograder sandbox: {reply['error']}"
        if "exit" in reply:
            return int(reply["exit"])


def zygote(path: str, uids: range, ready_fd: int, modules=()) -> None:
    """Serve kernels from this process (see above) on the Unix socket ``path`` (made here, for
    root only); ``ready_fd``: written to and closed once it listens, after importing
    ``modules`` for its kernels (:func:`preload`)."""
    import socket

    global _PRELOADED
    if modules:
        _PRELOADED = preload(modules)

    def reap(_signum, _frame):  # its helpers: waited for, so that their CPU (and their kernels')
        while True:             # counts in this process's children, as a fresh kernel's would
            try:
                if os.waitpid(-1, os.WNOHANG)[0] == 0:
                    return
            except ChildProcessError:
                return
    signal.signal(signal.SIGCHLD, reap)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old = os.umask(0o077)
    server.bind(path)
    os.umask(old)
    server.listen(64)
    os.write(ready_fd, b"ready")
    os.close(ready_fd)
    while True:
        try:
            conn, _ = server.accept()
        except InterruptedError:
            continue
        if os.fork() == 0:
            code = 1
            try:
                server.close()
                code = _zygote_helper(conn, uids)
            except BaseException as exc:  # noqa: BLE001 - said to run, which says it
                try:
                    conn.send(_json({"error": f"the kernel zygote failed: {type(exc).__name__}: {exc}"}))
                except OSError:
                    pass
            finally:
                os._exit(code)
        conn.close()


def _json(obj) -> bytes:
    import json

    return json.dumps(obj).encode()


def _ns_inode(pid, name: str) -> int:
    return os.stat(f"/proc/{pid}/ns/{name}").st_ino


def _zygote_helper(conn, uids: range) -> int:
    import json
    import resource
    import select
    import socket
    import struct

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    peer, peer_uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                            struct.calcsize("3i")))
    msg, fds, _flags, _addr = socket.recv_fds(conn, 1 << 20, 3)
    try:
        request = json.loads(msg)
        uid = int(request["uid"])
    except (ValueError, KeyError, TypeError):
        return _refuse(conn, "a malformed request to the kernel zygote")
    nspid = ""
    with open(f"/proc/{peer}/status") as f:
        for line in f:
            if line.startswith("NSpid:"):
                nspid = line.split()[-1]
    if uid == 0 or uid not in uids:
        return _refuse(conn, f"a request to the kernel zygote for uid {uid}, not a sandbox uid")
    if peer_uid != 0 or len(fds) != 3 or nspid != "1":
        return _refuse(conn, "a request to the kernel zygote from outside a sandbox")
    spaces = ("ipc", "net", "pid", "mnt")
    if any(_ns_inode(peer, n) == _ns_inode("self", n) for n in spaces):
        return _refuse(conn, "a request to the kernel zygote from the zygote's own namespaces")
    # the sender's limits: those ``limits`` set (CPU time, memory, processes, no core) and its cgroup
    for name in _PEER_LIMITS:
        if hasattr(resource, name):
            limit = getattr(resource, name)
            resource.setrlimit(limit, resource.prlimit(peer, limit))
    os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, peer))
    mine = _cgroups("self")
    for (number, controllers), path in _cgroups(peer).items():  # the memory cgroup ``limits`` joined
        if mine.get((number, controllers)) != path:
            folder = "/sys/fs/cgroup" + (f"/{controllers}" if controllers else "") + path
            try:
                with open(os.path.join(folder, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            except OSError as exc:
                return _refuse(conn, f"joining the kernel's cgroup {folder} failed: {exc.strerror}")
    handles = [os.open(f"/proc/{peer}/ns/{n}", os.O_RDONLY | os.O_CLOEXEC) for n in spaces]
    for fd in handles:  # the mount namespace last: its root (the view) becomes this root
        if libc().setns(fd, 0) != 0:
            return _refuse(conn, f"joining the kernel's namespaces failed: {os.strerror(ctypes.get_errno())}")
        os.close(fd)
    kernel = os.fork()
    if kernel == 0:
        _kernel_in_zygote(request, fds)  # does not return
    for fd in fds:
        os.close(fd)
    pidfd = os.pidfd_open(kernel)
    while True:
        ready, _, _ = select.select([conn, pidfd], [], [])
        if pidfd in ready:
            _, status = os.waitpid(kernel, 0)
            conn.send(_json({"exit": os.waitstatus_to_exitcode(status) % 256}))
            return 0
        data = conn.recv(64)
        if not data:  # ``run`` ended: the kernel does too
            os.kill(kernel, signal.SIGKILL)
            os.waitpid(kernel, 0)
            return 0
        for signum in data:
            if signum in {getattr(signal, n) for n in _ZYGOTE_SIGNALS}:
                os.kill(kernel, signum)


def _cgroups(pid) -> dict:
    """``{(hierarchy, controllers): path}`` of a process (``/proc/PID/cgroup``: v1 and v2)."""
    out = {}
    with open(f"/proc/{pid}/cgroup") as f:
        for line in f:
            number, controllers, path = line.rstrip("\n").split(":", 2)
            out[(number, controllers)] = path
    return out


def _refuse(conn, why: str) -> int:
    conn.send(_json({"error": why}))
    return 1


# --------------------------------------------------------------------------- preloaded modules
#
# The zygote also imports, once, what its kernels each import first (JAX, with NumPy, ml_dtypes
# and jaxlib: about 0.6 s of CPU per kernel). A fresh kernel has imported none of them, and
# their modules read environment variables when they are imported: a notebook may set
# ``os.environ["JAX_ENABLE_X64"] = "1"`` before ``import jax``. So the zygote records every
# variable read while it imports them (and its value), then takes their modules out of
# ``sys.modules`` again and keeps them aside (the standard library's stay: they hold nothing of
# the environment a kernel could change). Each kernel finds them through a finder first on its
# ``sys.meta_path``: at its first import of one of a group (JAX's own modules; the other
# packages JAX imported), the group goes back into ``sys.modules`` as the zygote left it, as
# though imported then, if the kernel would import the same thing: every variable the group
# read is as it was (and those the libraries' C code reads, by prefix), and each package would
# be found at the same file on the kernel's ``sys.path`` (a submission's ``jax.py`` would be
# imported instead). Otherwise the kernel is not a fresh one's equal, and cannot become one (a
# second JAX in one process refuses to register its types again): it leaves the mark
# FRESH_KERNEL_MARK in its home and exits with FRESH_KERNEL_STATUS, and the notebook is graded
# again on a fresh kernel. Once every group is back, the finder leaves ``sys.meta_path``.

FRESH_KERNEL_MARK = ".autograder-fresh-kernel"  # in the kernel's home: grade the notebook again, fresh
FRESH_KERNEL_STATUS = 75  # EX_TEMPFAIL
_C_PREFIXES = ("OPENBLAS_", "GOTO_", "OMP_", "MKL_", "NPY_", "NUMPY_", "TF_CPP_")  # read by C code
_PRELOADED = None  # the zygote's Preloaded


_STDLIB: list = []  # the standard library's folders, found once


def _in_stdlib(filename: str) -> bool:
    """Whether ``filename`` is the standard library's (not a package's of site-packages)."""
    if not _STDLIB:
        import sysconfig

        _STDLIB.append(tuple({os.path.realpath(sysconfig.get_paths()["stdlib"]) + os.sep,
                              os.path.dirname(os.path.realpath(os.__file__)) + os.sep}))
    real = os.path.realpath(filename)
    parts = real.split(os.sep)
    return real.startswith(_STDLIB[0]) and "site-packages" not in parts and "dist-packages" not in parts


def preload(names) -> "Preloaded":
    """Import the modules ``names`` here, for this zygote's kernels (see above)."""
    import importlib

    own = os.path.realpath(__file__)
    _in_stdlib(own)  # its folders found now, before the environment is watched
    events, iterated = [], []  # (read or write, name, value or None, the packages on the stack), in order
    theirs: dict = {}  # file name -> whether it is a package's (not the standard library's, nor this file)

    def of_a_package(filename: str) -> bool:
        if filename not in theirs:
            theirs[filename] = (not filename.startswith("<") and not _in_stdlib(filename)
                                and os.path.realpath(filename) != own)
        return theirs[filename]
    real = os._Environ.__getitem__, os._Environ.__iter__, os._Environ.__setitem__, os._Environ.__delitem__

    def packages_on_stack() -> frozenset:
        tops, frame = set(), sys._getframe(2)
        while frame is not None:
            if of_a_package(frame.f_code.co_filename):
                tops.add(str(frame.f_globals.get("__name__", "")).partition(".")[0])
            frame = frame.f_back
        return frozenset(tops)

    def getitem(environ, key):
        try:
            value = real[0](environ, key)
        except KeyError:
            events.append(("read", key, None, packages_on_stack()))
            raise
        events.append(("read", key, value, packages_on_stack()))
        return value

    def iterate(environ):
        iterated.append(packages_on_stack())
        return real[1](environ)

    def setitem(environ, key, value):  # jax sets TF_CPP_MIN_LOG_LEVEL where it is unset
        events.append(("write", key, value, packages_on_stack()))
        real[2](environ, key, value)

    def delitem(environ, key):
        events.append(("write", key, None, packages_on_stack()))
        real[3](environ, key)

    before = set(sys.modules)
    env = dict(os.environ)
    os._Environ.__getitem__, os._Environ.__iter__, os._Environ.__setitem__, os._Environ.__delitem__ = (
        getitem, iterate, setitem, delitem)
    try:
        for name in names:
            importlib.import_module(name)
    finally:
        os._Environ.__getitem__, os._Environ.__iter__, os._Environ.__setitem__, os._Environ.__delitem__ = real
    if any(iterated):  # a package read the whole environment: no variable can be said unread
        raise SystemExit("autograder sandbox: a preloaded package reads the whole environment")
    mains = {n.partition(".")[0] for n in names}
    new = sorted(set(sys.modules) - before)
    origins = {n: getattr(sys.modules[n], "__file__", None) for n in new if "." not in n}
    groups: dict = {}
    for name in new:
        top = name.partition(".")[0]
        origin = origins.get(top)
        if not origin or _in_stdlib(origin):
            continue  # the standard library's, and modules of no file of their own (cython_runtime)
        groups.setdefault(top if top in mains else "", {})[name] = sys.modules.pop(name)
    return Preloaded(groups, events, env)


class Preloaded:
    """Modules a zygote imported for its kernels, by group (``""``: the packages the others
    imported), with the variables read and written while importing them, in order (``("read"
    or "write", name, value or None, the packages on the stack)``) and the environment before."""

    def __init__(self, groups: dict, events: list, env: dict):
        self.groups, self.events, self.env = groups, events, env
        self.tops = {g: {n.partition(".")[0] for n in mods} for g, mods in groups.items()}
        self.home = ""
        self.back: set = set()

    # a meta path finder, first on a kernel's sys.meta_path (arm)
    def arm(self, home: str) -> None:
        self.home = home
        sys.meta_path.insert(0, self)

    def find_spec(self, fullname, path=None, target=None):
        import importlib.machinery

        group = next((g for g, mods in self.groups.items() if fullname in mods), None)
        if group is None:
            return None
        for g in ([""] if group else []) + [group]:
            if g in self.groups and g not in self.back:
                changed, env = self._changed(g)
                if changed:
                    self._fresh_kernel(changed)
                self.back.add(g)
                for key in {e[1] for e in self.events if e[0] == "write" and e[3] & self.tops[g]}:
                    if env.get(key) is None:  # what the import did to the environment, done
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = env[key]
                sys.modules.update(self.groups[g])
        if self.back >= set(self.groups):
            sys.meta_path[:] = [f for f in sys.meta_path if f is not self]
        module = sys.modules.pop(fullname)  # handed back by importlib, through this loader
        return importlib.machinery.ModuleSpec(fullname, _Restore(module), is_package=hasattr(module, "__path__"))

    def _changed(self, group: str) -> tuple:
        """What differs from the zygote's import of ``group`` ('' when nothing does), and the
        environment as that import leaves it: its reads and writes replayed on this one."""
        import importlib.machinery

        env = dict(os.environ)
        for kind, key, value, tops in self.events:
            if not tops & self.tops[group]:
                continue
            if kind == "write":
                env.pop(key, None) if value is None else env.__setitem__(key, value)
            elif env.get(key) != value:
                return f"{key} changed before the import of {', '.join(sorted(tops & self.tops[group]))}", env
        if group == "":
            for key in sorted(set(os.environ) | set(self.env)):
                if key.startswith(_C_PREFIXES) and os.environ.get(key) != self.env.get(key):
                    return f"{key} changed before the import of {', '.join(sorted(self.tops[group]))}", env
        for top in sorted(self.tops[group]):
            module = self.groups[group].get(top)
            origin = getattr(getattr(module, "__spec__", None), "origin", None)
            if module is None or origin is None:
                continue
            found = importlib.machinery.PathFinder.find_spec(top, sys.path)
            if found is None or found.origin is None or \
                    os.path.realpath(found.origin) != os.path.realpath(origin):
                return f"{top} would be imported from {getattr(found, 'origin', None)}, not {origin}", env
        return "", env

    def _fresh_kernel(self, why: str) -> None:
        try:
            with open(os.path.join(self.home, FRESH_KERNEL_MARK), "w") as f:
                f.write(why + "\n")
        except OSError:
            pass
        os._exit(FRESH_KERNEL_STATUS)


class _Restore:
    """The loader of a preloaded module: hands it back as the zygote imported it."""

    def __init__(self, module):
        self.module, self.spec, self.loader = module, module.__spec__, getattr(module, "__loader__", None)

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        module.__spec__ = self.spec  # importlib set this loader's; the module keeps its own
        if self.loader is not None:
            module.__loader__ = self.loader


def _kernel_in_zygote(request: dict, fds: list) -> None:
    """In the kernel's namespaces and view: become the kernel (``run``'s checks, then
    ``python -c`` running ipykernel_launcher with the kernel's arguments)."""
    code = 1
    try:
        os.setsid()
        for i, fd in enumerate(fds):
            os.dup2(fd, i)
        os.closerange(3, 1 << 16)
        os.umask(0o022)  # as build_view leaves it
        drop_to(int(request["uid"]), with_parent=False)
        check_readable(list(request["paths"]))
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in request["env"].items()})
        import tempfile
        tempfile.tempdir = None  # from TMPDIR, the kernel's
        sys.argv = ["-c", *map(str, request["argv"])]
        if _PRELOADED is not None:
            _PRELOADED.arm(os.environ.get("HOME", ""))
        for name in [n for n, m in sys.modules.items() if getattr(m, "__file__", None) == __file__]:
            del sys.modules[name]  # the zygote's machinery is not the kernel's
        import runpy
        try:
            runpy.run_module("ipykernel_launcher", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            if exc.code is not None and not isinstance(exc.code, int):
                print(exc.code, file=sys.stderr)
        import atexit
        atexit._run_exitfuncs()
    except SystemExit as exc:  # run's own checks: said as run says them
        print(exc, file=sys.stderr)
    except BaseException:  # noqa: BLE001
        import traceback
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        os._exit(code)


def expose_and_run(args) -> None:
    expose(args.path)
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
    if args.nice:
        os.nice(args.nice)  # kept across execve; raised back by root only (see the runner's start)
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="launch.py")
    sub = parser.add_subparsers(dest="what", required=True)
    r = sub.add_parser("run")
    r.add_argument("--uid", type=int, required=True)
    r.add_argument("--ro", action="append", default=[])
    r.add_argument("--rw", action="append", default=[])
    r.add_argument("--hide", action="append", default=[])
    r.add_argument("--zygote", default="", help="the kernel zygote's socket: the kernel is its fork")
    r.add_argument("command", nargs=argparse.REMAINDER)
    c = sub.add_parser("check")
    c.add_argument("--home", required=True)
    c.add_argument("--package", default="")
    c.add_argument("--secret", action="append", default=[])
    lim = sub.add_parser("limits")
    lim.add_argument("--cpu", type=int, required=True, help="CPU seconds")
    lim.add_argument("--parent", type=int, default=0, help="the pid that must still be the parent")
    lim.add_argument("--nproc", type=int, default=0)
    lim.add_argument("--nice", type=int, default=0, help="added to the nice value (a lower priority)")
    lim.add_argument("--memory", type=int, default=0, help="bytes")
    lim.add_argument("--cgroup", default="")
    lim.add_argument("command", nargs=argparse.REMAINDER)
    e = sub.add_parser("expose")
    e.add_argument("--path", action="append", default=[])
    e.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.what in ("run", "limits", "expose"):
        if args.command and args.command[0] == "--":
            args.command = args.command[1:]
        if not args.command:
            parser.error("no command to run")
        {"run": run, "limits": limits, "expose": expose_and_run}[args.what](args)
        return 0  # not reached: the command is executed
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
