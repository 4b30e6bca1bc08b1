"""The arrays a fixture places itself and passes to learner code (09's ``*_on`` fixtures put the
judge's values on a mesh first): a fixture names each with :func:`watch`, and after the request the
agent reads each one back (``autograder.agent._receipts``): one the learner's function deleted
(donated) fails the test, as one of the judge's own arrays does (:meth:`autograder.judge.Kernel.call`).
A list for one request at a time (the agent answers one at a time)."""
from __future__ import annotations

_WATCHED: list = []


def watch(name: str, array):
    """Watch ``array`` (what the learner's function gets as its argument ``name``); returns it."""
    _WATCHED.append((str(name)[:40], array))
    return array


def take() -> list:
    """The ``(name, array)`` pairs watched since the last call, and forget them."""
    out = list(_WATCHED)
    _WATCHED.clear()
    return out
