"""Mounts made by a grading process as root: a mount namespace of its own
(:func:`private_mounts`), where the sandboxes' boxes are tmpfs mounts (:func:`mount`)."""
from __future__ import annotations

import os

MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE, MNT_DETACH = 2, 4, 16384, 1 << 18, 2


PRIVATE_MOUNTS = []  # [True] once this process has a mount namespace of its own


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


def private_mounts() -> None:
    """Give this process (a grading process, as root) a mount namespace of its own, whose mounts
    propagate nowhere: the boxes' tmpfs mounts are made there, seen by this process and the
    kernels it starts, and they vanish with it, however it ends. Must run while the process has
    a single thread (``unshare(CLONE_NEWNS)`` refuses otherwise)."""
    if PRIVATE_MOUNTS or not hasattr(os, "unshare") or os.geteuid() != 0:
        return
    try:
        os.unshare(os.CLONE_NEWNS)
        mount(None, "/", None, MS_REC | MS_PRIVATE)
    except OSError:
        return  # its mounts could reach the machine's: none is made (boxes stay on disk)
    PRIVATE_MOUNTS.append(True)
