"""The sandbox of one submission: how its kernel (and the judge's program runner) is contained,
by bubblewrap, as root or not. docs/security.md ("Containment") says what a contained kernel sees
and may do.

:meth:`Sandbox.wrap` runs a command in bubblewrap's view (:mod:`.view`) with the launcher's
``limits`` inside. Its box is a tmpfs (:meth:`Sandbox.mount_box`, in the grading process's own
mount namespace: :mod:`.mounts`; without root inside a user namespace of that process's own). As
root (``NAMESPACE``) the kernel also gets an unprivileged uid locked for it
(``AUTOGRADER_SANDBOX_UIDS``), cgroups of its own (:mod:`.cgroups`) and a seccomp filter against
user namespaces (bubblewrap makes none there to close). Without root (``USER_NAMESPACE``)
bubblewrap adds a user namespace, closed to nested ones, and the kernel keeps the grader's uid.

:func:`open_sandbox` returns the :class:`Sandbox` of one submission. It **fails closed**: a
sandbox that cannot be set up (bubblewrap missing, or unable to create namespaces here:
:func:`~autograder.sandbox.view.bwrap_problem`) is a refusal (mode ``REFUSED``, ``reason``
naming the cause and the fix), unless the operator asked for no sandbox (``--no-sandbox`` or
``AUTOGRADER_SANDBOX=off``: mode ``NONE``).
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..common.course import GradingError
from ..common.settings import Settings
from . import mounts
from .cgroups import memory_cgroup, share_cgroups, thread_cap
from .launch import LAUNCHER, with_package
from .view import (bwrap_command, bwrap_problem, find_bwrap, hidden_paths, kernel_paths, kill_bwrap,
                   nested_userns_refused)

NAMESPACE = "namespaces+uid"    # ``containment``: bubblewrap as root: own namespaces, uid and cgroups


PROCESS_GROUP = "process-group"  # ... the grader's uid, the kernel in its own process group (no longer made)


USER_NAMESPACE = "user-namespace"  # ... bubblewrap: unprivileged user, mount, PID and network namespaces


NONE = "none"                    # ... no sandbox, as the operator asked


REFUSED = "refused"              # (never in a result: the notebook is not run)


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
        if self.box_mb:  # no file larger than the box (RLIMIT_FSIZE): on disk where the box is, without root
            inside.append(f"--fsize={self.box_mb << 20}")
        if self.as_root:
            inside += [f"--uid={self.uid}", *[f"--readable={p}" for p in [*kernel_paths(), *self.keep_rw]]]
        if self.as_root or not nested_userns_refused(self.bwrap):  # as root bubblewrap makes no user namespace to close
            inside.append("--no-userns")
        return [*bwrap_command(self.bwrap, self.token, self.keep_rw, self.hide, self.as_root, self.box_mb), "--",
                *inside, "--", *cmd]

    def kill_all(self) -> None:
        """Kill every process of the sandbox: as root, every process of its uid (whatever session
        or namespace it is in: ``kill(-1, SIGKILL)`` as that uid, ``launcher kill``); without
        root, its bwrap processes (everything inside dies with them)."""
        if self.uid is None:
            return
        if not self.as_root:
            kill_bwrap(self.token)
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
        """In a grading process with its own mount namespace (:func:`~.mounts.private_mounts`: as
        root, or an ordinary user's inside a user namespace of its own), put an empty tmpfs of
        ``box_mb`` MiB on ``box_dir``, the one folder a contained kernel may write: what it
        writes is memory (as root, counted by its memory cgroup), never the machine's disk. The
        limit's words for the result."""
        if not self.contained or not self.box_mb:
            return ""
        mb = self.box_mb
        box_dir.mkdir(parents=True, exist_ok=True)
        if not mounts.PRIVATE_MOUNTS:
            if self.as_root:
                return ""
            why = mounts.NO_PRIVATE_MOUNTS[0] if mounts.NO_PRIVATE_MOUNTS else "no mount namespace of its own"
            return (f"the box is a folder on disk ({why}): each file at most {mb} MiB (RLIMIT_FSIZE), "
                    "not the box in all")
        try:
            mounts.mount("tmpfs", str(box_dir), "tmpfs", mounts.MS_NOSUID | mounts.MS_NODEV, f"mode=0700,size={mb}m")
        except OSError as exc:
            raise GradingError(f"the sandbox's box cannot be set up: {exc.strerror}") from None
        self.box_mount = str(box_dir)
        return f"files limited to {mb} MiB (a tmpfs)"

    def close(self) -> None:
        """Kill what is left of the sandbox, unmount its box; as root, remove its cgroups and
        unlock its uid."""
        if not self.ended:
            self.kill_all()
        if self.box_mount:
            from .launcher import libc

            libc().umount2(self.box_mount.encode(), mounts.MNT_DETACH)
            self.box_mount = None
        if not self.as_root or self.lock_fd is None:
            return
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


def refusal(cause: str, fix: str) -> str:
    return (f"the sandbox cannot be set up: {cause}. Fix: {fix}; or, to grade without containment "
            "(only for code you trust), pass --no-sandbox or set AUTOGRADER_SANDBOX=off.")


def own_exercises_uncontained(notebooks, root: Path | None) -> str | None:
    """For a learner checking their own work (``make check``: ``grade --mine``): the one line
    saying their notebooks run uncontained, when no kernel can be contained here (bubblewrap
    missing or unable: a laptop, macOS) and every notebook is theirs, a file they own in the
    course's ``exercises/``. None otherwise: containment works, or a notebook is someone else's
    (grading it still refuses)."""
    from ..common.course import find_course_root

    cause, _ = bwrap_problem(find_bwrap(), os.geteuid() == 0)
    if not cause:
        return None
    try:
        exercises = (Path(root) if root else find_course_root()).resolve() / "exercises"
    except GradingError:
        return None
    for nb in notebooks:
        path = Path(nb)
        try:
            mine = path.stat().st_uid == os.getuid() and not path.is_symlink()
        except OSError:
            return None
        if not mine or exercises not in path.resolve().parents:
            return None
    return (f"{cause}: your own exercises in {exercises} run uncontained, as you (grading anyone "
            "else's notebook needs containment and refuses here)")


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
        return Sandbox(REFUSED, refusal(cause, fix))
    token, hidden = f"autograder-{random_names.token_hex(8)}", hidden_paths(settings, root, submission, hide)
    if not as_root:
        nested = ("no user namespace of its own" if nested_userns_refused(bwrap)
                  else "no user namespace of its own (a seccomp filter: bubblewrap older than 0.8)")
        return Sandbox(USER_NAMESPACE, f"bubblewrap: user, mount, PID and network namespaces of its own, "
                                       f"the grader's uid; memory limit {settings.memory_mb} MiB per process "
                                       f"(RLIMIT_DATA); temporary folders {settings.box_mb} MiB in all, files "
                                       f"{settings.box_mb} MiB at most (RLIMIT_FSIZE); {nested}; "
                                       f"{limits['threads']} threads at most (RLIMIT_NPROC in its user "
                                       f"namespace); no CPU share without root",
                       os.getuid(), bwrap=bwrap, token=token, hide=hidden, **limits)
    locks = _lock_dir()
    if locks is None:
        return Sandbox(REFUSED, refusal("there is no private folder for the sandbox uid locks (/run/lock "
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
                          f"own; no user namespace of its own (a seccomp filter); {memory}; {share}")
            return box
        if time.monotonic() > deadline:
            raise GradingError("every sandbox uid stayed busy until the notebook's time limit")
        time.sleep(0.2)


def chown_tree(path: Path, uid: int) -> None:
    if uid == os.geteuid():
        return  # already its (bubblewrap's sandbox runs with the grader's uid)
    os.chown(path, uid, uid, follow_symlinks=False)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)
