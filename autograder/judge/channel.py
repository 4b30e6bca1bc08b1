"""The judge's channel to the learner's kernel: requests and replies as data, one at a time.

:class:`Channel` sends each request as one ``execute_request`` of a fixed expression
(``__import__('autograder.agent').agent.serve(<JSON string literal>)``: the kernel-side agent,
:mod:`autograder.agent`) and accepts exactly one reply, of :mod:`autograder.wire` data, with the
request's nonce, within its time and size limits. The two ways a request can fail are this
module's exceptions: :class:`ChannelError` (no usable reply) and :class:`LearnerError` (learner
code raised; :func:`learner_exception` builds the judge-side copy). The program reader
(:mod:`.programs`) raises them too.
"""
from __future__ import annotations

import builtins
import queue
import secrets
import threading
import time

from .starvation import Starved, Watch

REQUEST_TIMEOUT = 120.0
MAX_OUTPUT_BYTES = 256 * 2**20  # everything one request's messages may carry (prints included)


class ChannelError(Exception):
    """The kernel's reply cannot be used (none, several, malformed, too big, too late, or the
    kernel died). ``str(err)`` is learner-facing."""


class KernelStarved(ChannelError, Starved):
    """A request ran out of time while the kernel was starved by the machine's other work
    (:mod:`.starvation`): its test is not graded."""


class LearnerError(Exception):
    """Mixed into the judge-side copy of an exception raised by learner code in the kernel.

    The copy is an instance of a class named as the original, derived from the trusted class of
    that name (a built-in exception or one of ``jax.errors``), so :func:`autograder.feedback`'s
    classifier (the one ``ag.call`` uses) names the idea. ``label``: the call that raised.
    """

    label = "the function"
    kernel_mro: list = []

_CLASSES: dict = {}


def _trusted_bases() -> dict:
    bases = {n: c for n, c in vars(builtins).items()
             if isinstance(c, type) and issubclass(c, Exception)}
    try:
        import jax

        bases.update({n: c for n, c in vars(jax.errors).items()
                      if isinstance(c, type) and issubclass(c, Exception)})
    except Exception:  # noqa: BLE001
        pass
    return bases


def learner_exception(err: dict, label: str) -> Exception:
    """The judge-side copy of a learner exception described by ``err`` (``type``, ``mro``,
    ``message``): no learner class is rebuilt, only trusted ones."""
    name = str(err.get("type") or "Exception")[:100]
    name = name if name.isidentifier() else "Exception"
    mro = err.get("mro") if isinstance(err.get("mro"), list) else []
    trusted = _trusted_bases()
    base = next((trusted[n] for n in mro if isinstance(n, str) and n in trusted), Exception)
    key = (name, base)
    if key not in _CLASSES:
        _CLASSES[key] = type(name, (LearnerError, base), {"__module__": "learner_kernel"})
    exc = BaseException.__new__(_CLASSES[key])
    BaseException.__init__(exc, str(err.get("message") or "")[:2000])
    exc.label = label
    exc.kernel_mro = [str(n)[:100] for n in mro if isinstance(n, str)][:12] or [name]
    return exc


def _size(value) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(_size(k) + _size(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(_size(v) for v in value)
    return 8


class Channel:
    """Requests to the agent over a blocking jupyter_client kernel client.

    Only messages whose parent is the request are read; their total size and the time a
    request takes are capped; exactly one reply (with the request's nonce) is accepted.
    ``alive()`` (optional) tells a dead kernel from a slow one; ``interrupt()`` (optional)
    stops a request that ran past its time; ``pid()`` (optional) is the kernel's process, whose
    CPU a request that ran out of time is checked for (starved: not graded).
    """

    def __init__(self, client, *, timeout=REQUEST_TIMEOUT, deadline=None, alive=None, interrupt=None,
                 max_output=MAX_OUTPUT_BYTES, pid=None):
        self._lock = threading.Lock()  # one request at a time, whichever test's thread sends it
        self._local = threading.local()
        self.client = client
        self._iopub = client.get_iopub_msg
        self.timeout = timeout
        self.deadline = deadline
        self.alive = alive
        self.interrupt = interrupt
        self.max_output = max_output
        self.pid = pid
        self.broken = ""  # once set, every later request fails with it
        self.test_deadline = None  # set by run_judge: one test's requests share its time limit
        self.requests = 0

    @property
    def test_deadline(self):
        """The current test's deadline (``time.monotonic()``), per thread: tests judged side by
        side each have their own."""
        return getattr(self._local, "test_deadline", None)

    @test_deadline.setter
    def test_deadline(self, value):
        self._local.test_deadline = value

    @property
    def on_wait(self):
        """Called (per thread) with the seconds this test's request waited for another's: the
        judge passes them on to the test's program runner, whose time limit moves as well."""
        return getattr(self._local, "on_wait", None)

    @on_wait.setter
    def on_wait(self, value):
        self._local.on_wait = value

    def extend(self, seconds: float) -> None:
        """Move the current test's deadline ``seconds`` later (time that was not its own)."""
        if seconds > 0 and self.test_deadline is not None:
            self.test_deadline += seconds

    def request(self, payload: dict, *, on_input=None) -> dict:
        """Send one request and return its reply. Requests of tests judged side by side wait for
        each other: the kernel answers one at a time, and every message read is this request's
        (its time limit counts from when it is sent). The time a request waits for another
        test's is not its test's: that test's deadline moves by as much (a test whose learner
        code hangs costs the tests beside it no time of their own).

        ``on_input`` (optional): the request may ask the judge for input while it runs (the
        kernel's ``input()``, Jupyter's stdin channel); each prompt (a string, at most 100
        characters) is answered with ``on_input(prompt)``, called in this thread when the prompt
        arrives and blocking the kernel until it returns: what the judge measures and decides
        itself while learner code runs (when a simulated call is made, when its result is ready)."""
        asked = time.monotonic()
        with self._lock:
            waited = time.monotonic() - asked
            if waited > 0:
                self.extend(waited)
                if self.on_wait is not None:
                    self.on_wait(waited)
            return self._request(payload, on_input)

    def _stdin(self, msg_id, on_input) -> bool:
        """Answer one of the request's input prompts, if one is waiting; whether one was."""
        try:
            msg = self.client.get_stdin_msg(timeout=0)
        except queue.Empty:
            return False
        if not isinstance(msg, dict) or msg.get("parent_header", {}).get("msg_id") != msg_id:
            return True
        if msg.get("msg_type") == "input_request":
            prompt = str((msg.get("content") or {}).get("prompt", ""))[:100]
            self.client.input(str(on_input(prompt))[:100])
        return True

    def _request(self, payload: dict, on_input=None) -> dict:
        from .. import wire  # NumPy: imported when a judge first talks to a kernel, not with this module

        if self.broken:
            raise ChannelError(self.broken)
        nonce = secrets.token_hex(16)
        text = wire.encode({**payload, "nonce": nonce})
        code = f"__import__('autograder.agent').agent.serve({text!r})"
        msg_id = self.client.execute(code, silent=False, store_history=False, allow_stdin=on_input is not None,
                                     stop_on_error=False)
        self.requests += 1
        limit = self.timeout
        for end in (self.deadline, self.test_deadline):  # the notebook's, the current test's
            if end is not None:
                limit = max(1.0, min(limit, end - time.monotonic()))
        end = time.monotonic() + limit
        watch = Watch(self._kernel_pid())
        replies, total, failed = [], 0, None
        checked = time.monotonic()  # when the kernel was last seen alive
        while True:
            left = end - time.monotonic()
            if left <= 0:
                starved = watch.starved()
                self._stuck(msg_id)
                if starved:
                    raise KernelStarved(watch.message("the code under test"))
                raise ChannelError(f"Did not finish within the time limit ({self.timeout:.0f} s per test, "
                                   "and the notebook's own): an infinite loop or a very slow answer?")
            if on_input is not None and self._stdin(msg_id, on_input):
                continue
            try:  # with prompts to answer, read both channels in turn, a millisecond each
                msg = self._iopub(timeout=min(left, 1.0 if on_input is None else 0.001))
            except queue.Empty:
                if on_input is not None and time.monotonic() < checked + 1.0:
                    continue
                checked = time.monotonic()
                if self.alive is not None and not self.alive():
                    self.broken = ("Not run to completion: the kernel died (an exit, a crash, or too "
                                   "much memory) while the grader called your code.")
                    raise ChannelError(self.broken) from None
                continue
            if not isinstance(msg, dict) or msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            content = msg.get("content") or {}
            total += _size(content)
            if total > self.max_output:
                self._stuck(msg_id)
                raise ChannelError(f"The code under test wrote more than {self.max_output // 2**20} MB "
                                   "of output while the grader called it.")
            kind = msg.get("msg_type")
            if kind == "display_data" and wire.MIME in (content.get("data") or {}):
                replies.append(content["data"][wire.MIME])
            elif kind == "error":
                failed = str(content.get("ename", "Error"))[:100]
            elif kind == "status" and content.get("execution_state") == "idle":
                break
        if len(replies) != 1:
            why = f"the call raised {failed}" if failed else (
                "no reply" if not replies else f"{len(replies)} replies")
            raise ChannelError(f"The grader could not call into the notebook's kernel ({why}); "
                               "was the kernel's machinery changed by a cell?")
        try:
            reply = wire.decode(replies[0])
        except wire.WireError as exc:
            raise ChannelError(f"The value that came back cannot be graded: {exc}.") from None
        if not isinstance(reply, dict) or reply.get("nonce") != nonce:
            raise ChannelError("The kernel's reply does not answer the grader's request.")
        if "refused" in reply:
            raise ChannelError(f"The value could not be sent to or from the kernel: "
                               f"{str(reply['refused'])[:500]}")
        return reply

    def _kernel_pid(self):
        try:
            return self.pid() if callable(self.pid) else self.pid
        except Exception:  # noqa: BLE001 - no kernel process known
            return None

    def _stuck(self, msg_id):
        """A request ran past its time: interrupt it and wait a little for the kernel to be idle;
        if it stays busy, no later request can be answered."""
        if self.interrupt is not None:
            try:
                self.interrupt()
            except Exception:  # noqa: BLE001
                pass
            if answered(self._iopub, msg_id, time.monotonic() + 5, idle=True):
                return
        self.broken = "Not run: the kernel was still busy with an earlier test that ran out of time."


def answered(get_iopub, msg_id, until: float, idle: bool = False) -> bool:
    """Read IOPub messages (``get_iopub(timeout=...)``) until one answers ``msg_id`` (its idle
    status, with ``idle``), or until ``until`` (``time.monotonic()``); whether one came."""
    while time.monotonic() < until:
        try:
            msg = get_iopub(timeout=0.05)
        except queue.Empty:
            continue
        if msg.get("parent_header", {}).get("msg_id") == msg_id and (not idle or (
                msg.get("msg_type") == "status" and msg.get("content", {}).get("execution_state") == "idle")):
            return True
    return False
