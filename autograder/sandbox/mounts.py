"""Mounts made by a grading process: a mount namespace of its own (:func:`private_mounts`), where
the sandboxes' boxes are tmpfs mounts of a fixed size (:func:`mount`). As root it is a mount
namespace; an ordinary user (a hub instructor) gets one inside a user namespace of its own, where
its uid and gid are themselves (files it writes are its own, and it reaches what it reached
before), so that its boxes are sized tmpfs too, never a folder on the machine's disk."""
from __future__ import annotations

import os

MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE, MNT_DETACH = 2, 4, 16384, 1 << 18, 2


PRIVATE_MOUNTS = []  # [True] once this process has a mount namespace of its own


NO_PRIVATE_MOUNTS = []  # why an ordinary user's process has none (the box then stays on disk)


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str = "") -> None:
    """mount(2) itself (``ctypes``), an OSError naming what failed."""
    import ctypes

    from .launcher import libc

    def c(text):
        return text.encode() if text else None
    if libc().mount(c(source), c(target), c(fstype), ctypes.c_ulong(flags), c(data)) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"mounting {fstype or 'private propagation'} on {target} failed: "
                             f"{os.strerror(error)}")


def _own_user_namespace() -> None:
    """Enter a user and mount namespace of this process's own, its uid and gid mapped to
    themselves (an ordinary user may map only those): it keeps every access it had, and gains
    the capability to mount in its new mount namespace (lost by any program it executes)."""
    uid, gid = os.geteuid(), os.getegid()
    os.unshare(os.CLONE_NEWUSER | os.CLONE_NEWNS)
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _user_namespace_mounts() -> str:
    """'' when an ordinary user's process can have mounts of its own here (tried in a child
    first: a process left in a user namespace it cannot use would lose its files), else why not."""
    import threading

    if threading.active_count() > 1:
        return "the grading process had started threads"
    from .launcher import libc

    libc()  # loaded here: the child loads nothing
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: only system calls, nothing loaded
        os.close(r)
        why = b""
        try:
            _own_user_namespace()
            mount(None, "/", None, MS_REC | MS_PRIVATE)
            mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")
        except OSError as exc:
            why = str(exc).encode(errors="replace")[:500] or b"failed"
        os.write(w, why)
        os._exit(0)
    os.close(w)
    why = b""
    while chunk := os.read(r, 1024):
        why += chunk
    os.close(r)
    os.waitpid(pid, 0)
    return why.decode(errors="replace")


def private_mounts() -> None:
    """Give this process (a grading process) a mount namespace of its own, whose mounts
    propagate nowhere: the boxes' tmpfs mounts are made there, seen by this process and the
    kernels it starts, and they vanish with it, however it ends. Without root, in a user
    namespace of its own (:func:`_own_user_namespace`; where that cannot mount, the reason is
    kept in :data:`NO_PRIVATE_MOUNTS` and the boxes stay folders on disk). Must run while the
    process has a single thread (``unshare`` refuses otherwise)."""
    if PRIVATE_MOUNTS or NO_PRIVATE_MOUNTS or not hasattr(os, "unshare"):
        return
    if os.geteuid() != 0:
        why = _user_namespace_mounts()
        if why:
            NO_PRIVATE_MOUNTS.append(why)
            return
        try:
            _own_user_namespace()
        except OSError as exc:
            NO_PRIVATE_MOUNTS.append(str(exc))
            return
    else:
        try:
            os.unshare(os.CLONE_NEWNS)
        except OSError:
            return  # its mounts could reach the machine's: none is made (boxes stay on disk)
    try:
        mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError as exc:
        NO_PRIVATE_MOUNTS.append(str(exc))
        return
    PRIVATE_MOUNTS.append(True)
