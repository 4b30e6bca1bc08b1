"""The frames both ends of the program runner's pipe read and write: :mod:`.runner` (the
grader's end) and :mod:`.runner_child` (the contained child's). A frame is one
:mod:`autograder.wire` text (UTF-8) after its length (:data:`HEADER`: 8 bytes, big-endian),
within :func:`limits`: nothing is pickled.

Imports nothing heavy: :mod:`autograder.wire` (NumPy) is imported by :func:`wire`, when a frame
is first made or read.
"""
from __future__ import annotations

import struct

HEADER = struct.Struct(">Q")  # a frame's length, before it


def wire():
    """:mod:`autograder.wire`, imported on first use (NumPy: not with this module)."""
    from .. import wire as codec

    return codec


def limits():
    """The codec's limits for a frame: a program's serialized bytes travel as one string."""
    return wire().Limits(max_bytes=128 * 2**20, max_str=96 * 2**20)


def frame(payload) -> bytes:
    """``payload`` (wire data) as one frame: its length, then its text."""
    data = wire().encode(payload, limits=limits()).encode("utf-8")
    return HEADER.pack(len(data)) + data
