"""A learner's kernel stood in for in this process, for tests that run judges without starting
one: :class:`InProcess` (the judge's channel answered by the agent's own handler on an IPython
shell's namespace) and the fixtures ``runner`` (a program runner, as a grading has) and
``ipython`` (that shell, cleared away afterwards), which tests/conftest.py offers every test module."""
from __future__ import annotations

import builtins
import sys
from unittest import mock

import pytest

from autograder import judge, wire
from autograder.judge.runner import ProgramRunner


class InProcess:
    """The judge's channel to a stand-in kernel in this process: each request is encoded as for a
    kernel, answered by the agent's own handler (``autograder.agent.handle``, in the IPython
    shell whose namespace holds the notebook), and its reply decoded as a kernel's is. A fixture's
    prompts to the judge (its ``input()``) are answered by ``on_input``."""

    timeout = 120

    def request(self, payload, *, on_input=None):
        from autograder import agent

        with mock.patch.object(builtins, "input", on_input or builtins.input):
            reply = agent.handle(wire.encode({**payload, "nonce": "in-process"}))
        reply = wire.decode(wire.encode(reply))
        if "refused" in reply:
            raise judge.ChannelError(f"refused: {str(reply['refused'])[:500]}")
        return reply


@pytest.fixture(scope="module")
def runner():
    r = ProgramRunner(timeout=120)
    r.start()
    yield r
    r.close()


@pytest.fixture(scope="module")
def ipython():
    """An IPython shell in this process (the agent's namespace), cleared away afterwards, with the
    interpreter's hooks it replaced put back."""
    from IPython.core.interactiveshell import InteractiveShell

    hooks = sys.displayhook, sys.excepthook
    yield InteractiveShell.instance()
    InteractiveShell.clear_instance()
    sys.displayhook, sys.excepthook = hooks
