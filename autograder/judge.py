"""The judge: trusted code, in the grader's process, that decides every test's points.

After the notebook's own cells have run in the learner's kernel, the judge reaches the
learner's functions through a narrow data channel (the kernel's Jupyter messaging,
:mod:`autograder.wire` data only). Where an answer can be traced, it takes the learner's
*program*: ``k.program(name, *specs)`` is one ``jax.export`` per function and input signature
(exported for the judge's platform, CPU, and checked against :mod:`autograder.allowlist`),
whose structure is read as a parsed module (:mod:`autograder.programs`) and whose values come
from running that same program on the judge's inputs in the contained program runner
(:mod:`autograder.runner`: no learner program runs in the grading process). Otherwise it calls
the functions in the kernel on inputs it draws afresh each run. Either way it compares what
comes back with references it computes itself. Kernel-side observations (globals touched,
compile counts, key reuse...) are *claims*: a failing claim fails a test, a passing one never
earns points alone.

One trusted file per assignment, ``solutions/<assignment>/judge.py``, holds one function
``test_<name>(k)`` per graded test cell; ``k`` is a :class:`Kernel`::

    import numpy as np
    import autograder as ag
    from autograder.wire import AsJax

    def test_double(k):
        double = k.fn("double")                      # a RemoteFunction
        x = k.rng.normal(size=(3, 4)).astype(np.float32)
        ag.check_close(double(AsJax(x)), 2 * x, what="double(x)")
        ag.check_matches_reference(double, lambda x: 2 * np.asarray(x), lambda rng: (AsJax(
            rng.normal(size=5).astype(np.float32)),), seed=k.seed(), jit=True)

:func:`run_judge` loads that file by path (never from a folder the kernel can write) and turns
each test's outcome into feedback; :class:`JudgeStep` plugs it into grading.
"""
from __future__ import annotations

import base64
import builtins
import importlib.util
import inspect
import queue
import re
import secrets
import threading
import time
from pathlib import Path

import numpy as np

from . import feedback, wire
from .channel import ChannelError, LearnerError
from .grader.course import CHECK_TAG
from .feedback import TAUGHT_IN, ExerciseFailure, explain_error
from .runner import DEVICES as RUNNER_DEVICES
from .runner import ProgramFailure, ProgramRunner

REQUEST_TIMEOUT = 120.0
JUDGE_CPU_DEVICES = RUNNER_DEVICES  # the CPU devices of the program runner and of every grading process
MAX_OUTPUT_BYTES = 256 * 2**20  # everything one request's messages may carry (prints included)


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


def _sync(f):
    if inspect.iscoroutinefunction(f):
        from jupyter_core.utils import run_sync

        return run_sync(f)
    return f


class Channel:
    """Requests to the agent over a jupyter_client kernel client (blocking or asynchronous).

    Only messages whose parent is the request are read; their total size and the time a
    request takes are capped; exactly one reply (with the request's nonce) is accepted.
    ``alive()`` (optional) tells a dead kernel from a slow one; ``interrupt()`` (optional)
    stops a request that ran past its time.
    """

    def __init__(self, client, *, timeout=REQUEST_TIMEOUT, deadline=None, alive=None, interrupt=None,
                 limits=wire.DEFAULT_LIMITS, max_output=MAX_OUTPUT_BYTES):
        self._lock = threading.Lock()  # one request at a time, whichever test's thread sends it
        self._local = threading.local()
        self.client = client
        self._iopub = _sync(client.get_iopub_msg)
        self.timeout = timeout
        self.deadline = deadline
        self.alive = alive
        self.interrupt = interrupt
        self.limits = limits
        self.max_output = max_output
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

    def request(self, payload: dict) -> dict:
        """Send one request and return its reply. Requests of tests judged side by side wait for
        each other: the kernel answers one at a time, and every message read is this request's
        (its time limit counts from when it is sent)."""
        with self._lock:
            return self._request(payload)

    def _request(self, payload: dict) -> dict:
        if self.broken:
            raise ChannelError(self.broken)
        nonce = secrets.token_hex(16)
        text = wire.encode({**payload, "nonce": nonce}, limits=self.limits)
        code = f"__import__('autograder.agent').agent.serve({text!r})"
        msg_id = self.client.execute(code, silent=False, store_history=False, allow_stdin=False,
                                     stop_on_error=False)
        self.requests += 1
        limit = self.timeout
        for end in (self.deadline, self.test_deadline):  # the notebook's, the current test's
            if end is not None:
                limit = max(1.0, min(limit, end - time.monotonic()))
        end = time.monotonic() + limit
        replies, total, failed = [], 0, None
        while True:
            left = end - time.monotonic()
            if left <= 0:
                self._stuck(msg_id)
                raise ChannelError(f"Did not finish within the time limit ({self.timeout:.0f} s per test, "
                                   "and the notebook's own): an infinite loop or a very slow answer?")
            try:
                msg = self._iopub(timeout=min(left, 1.0))
            except queue.Empty:
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
            reply = wire.decode(replies[0], limits=self.limits)
        except wire.WireError as exc:
            raise ChannelError(f"The value that came back cannot be graded: {exc}.") from None
        if not isinstance(reply, dict) or reply.get("nonce") != nonce:
            raise ChannelError("The kernel's reply does not answer the grader's request.")
        if "refused" in reply:
            raise ChannelError(f"The value could not be sent to or from the kernel: "
                               f"{str(reply['refused'])[:500]}")
        return reply

    def _stuck(self, msg_id):
        """A request ran past its time: interrupt it and wait a little for the kernel to be idle;
        if it stays busy, no later request can be answered."""
        if self.interrupt is not None:
            try:
                self.interrupt()
            except Exception:  # noqa: BLE001
                pass
            end = time.monotonic() + 5
            while time.monotonic() < end:
                try:
                    msg = self._iopub(timeout=0.5)
                except queue.Empty:
                    continue
                if (msg.get("parent_header", {}).get("msg_id") == msg_id and msg.get("msg_type") == "status"
                        and msg.get("content", {}).get("execution_state") == "idle"):
                    return
        self.broken = "Not run: the kernel was still busy with an earlier test that ran out of time."


# --------------------------------------------------------------------------- the judge's proxy

# Host callbacks (jax.pure_callback, io_callback, debug.print) in an exported module: learner
# Python would run in the process that runs the program. (Kept for judges that import it; the
# allow-list of :mod:`autograder.allowlist` refuses every custom_call but the vetted ones.)
_CALLBACK = re.compile(r"callback|python|host", re.IGNORECASE)


class RemoteFunction:
    """A learner function, called from the judge with judge-side values (markers of
    :mod:`autograder.wire` for arrays, keys...); the result is decoded data.

    A learner exception is raised as its judge-side copy (:class:`LearnerError`), so ``ag.call``
    and the checks turn it into feedback as they would in the kernel.
    """

    def __init__(self, kernel: "Kernel", name: str, *, jit=False, static_argnums=(), static_argnames=()):
        self.kernel, self.name, self.jit = kernel, name, bool(jit)
        self.static_argnums, self.static_argnames = tuple(static_argnums), tuple(static_argnames)
        self.__name__ = f"jax.jit({name})" if jit else name

    def __call__(self, *args, **kwargs):
        return self.kernel.call(self.name, *args, jit=self.jit, static_argnums=self.static_argnums,
                                static_argnames=self.static_argnames, **kwargs)

    def jitted(self, static_argnums=None, static_argnames=None) -> "RemoteFunction":
        """The same function under ``jax.jit`` (applied and cached by the agent)."""
        return RemoteFunction(self.kernel, self.name, jit=True,
                              static_argnums=self.static_argnums if static_argnums is None else static_argnums,
                              static_argnames=self.static_argnames if static_argnames is None else static_argnames)

    def __repr__(self):
        return f"<RemoteFunction {self.__name__}>"


class Exported:
    """A learner function's traced program, moved into the judge: ``exported`` (a
    ``jax.export.Exported``), read here as a parsed module (:attr:`structure`: every operation,
    nested bodies included, read by :mod:`autograder.programs`; :meth:`ops`, :attr:`has_loops`,
    :meth:`collectives`, :meth:`custom_calls`) and run, on the judge's inputs, in the contained program runner
    (:meth:`call`, or calling the object itself): every fact and every value from the same
    artifact. ``blob``: its serialized bytes (``exported.serialize()`` when not given);
    ``runner``: the :class:`autograder.runner.ProgramRunner` to run it in (default: the
    current one, :func:`autograder.runner.current`). ``text`` (its StableHLO, printed) is kept
    for judges that still read it; never search it: names and locations in it are the
    learner's."""

    def __init__(self, exported, text=None, *, blob=None, runner=None, name="the function"):
        self.exported = exported
        self._text = text
        self._blob = blob
        self.runner = runner
        self.name = name
        self._structure = None
        self._refusal = None
        self.ran_in: dict = {}  # pid and uid of the process that computed the last call

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = self.exported.mlir_module()
        return self._text

    @property
    def blob(self) -> bytes:
        if self._blob is None:
            self._blob = bytes(self.exported.serialize())
        return self._blob

    contained = True  # its calls run in the contained program runner (autograder.programs.Traced)

    @property
    def structure(self):
        """The parsed program (:class:`autograder.programs.Program`: ``op_counts``,
        ``has_loops``, ``collectives``, ``custom_call_targets``, ``top_level``, ``ops``)."""
        if self._structure is None:
            from . import programs

            self._structure = programs.read(self.exported)
        return self._structure

    def ops(self):
        """``Counter`` of operation names (``stablehlo.add``...), nested bodies and called
        functions included (:attr:`autograder.programs.Facts.op_counts`)."""
        return self.structure.op_counts

    @property
    def has_loops(self) -> bool:
        """Whether the program has a loop (a ``stablehlo.while`` operation, wherever it is)."""
        return self.structure.has_loops

    def collectives(self) -> dict:
        return self.structure.collectives

    def custom_calls(self) -> list[str]:
        return sorted(self.structure.custom_call_targets)

    def refusal(self) -> str:
        """'' when the runner may run the program, else why not (learner-facing)."""
        if self._refusal is None:
            from . import allowlist

            try:
                structure = self.structure
            except Exception:  # noqa: BLE001 - allowlist.refusal says the module cannot be parsed
                structure = None
            self._refusal = allowlist.refusal(self.exported, structure)
        return self._refusal

    def check(self) -> "Exported":
        """Raise the learner-facing :class:`ExerciseFailure` when the program is refused."""
        why = self.refusal()
        if why:
            idea = "purity" if "into Python" in why or "side effects" in why else "tampering"
            text = ("calls back into Python from the compiled program" if idea == "purity"
                    else "cannot be graded")
            raise ExerciseFailure(idea, f"The program of {self.name} {text}: {why}; the grader only runs "
                                        "pure JAX programs, exported for its own platform.")
        return self

    def call(self, *args, loops=None, timeout=None, **kwargs):
        """Run the program on ``args``/``kwargs`` (its dynamic arguments, as the export took
        them: static arguments are part of the program) in the contained program runner, and
        return its outputs in the program's output structure, as :class:`autograder.wire.
        KernelArray` leaves (values; ``.sharding``, a description with ``type_spec`` and
        ``type``, the sharding in the output's type). A program that crashes the runner, runs
        past its time or out of memory raises :class:`autograder.runner.ProgramFailure`
        (learner-facing). ``loops`` is ignored (a loop that never ends is a timeout)."""
        return self.run(args, kwargs, timeout=timeout)[0]

    def run(self, args=(), kwargs=None, *, timeout=None, placements=None, compiled_facts=False):
        """``(outputs, facts)``: :meth:`call` with the runner's options: ``placements`` (a
        partition spec per input, as lists: the inputs placed so on the program's mesh) and
        ``compiled_facts`` (``facts`` is then what XLA's compiled program holds, e.g.
        ``facts["collectives"]``; else None). See :meth:`autograder.runner.ProgramRunner.run`."""
        import jax

        from . import runner as runner_mod

        self.check()
        exp = self.exported
        leaves, tree = jax.tree_util.tree_flatten((tuple(args), dict(kwargs or {})))
        if tree != exp.in_tree:
            raise TypeError(f"the program of {self.name} takes {exp.in_tree}, not {tree}")
        flat = []
        for leaf, aval in zip(leaves, exp.in_avals):
            if isinstance(leaf, (np.ndarray, np.generic)) or hasattr(leaf, "__array__"):
                a = np.asarray(leaf)
            else:  # a Python number: the program's dtype
                a = np.asarray(leaf, dtype=aval.dtype)
            flat.append(a)
        run = self.runner or runner_mod.current()
        reply = run.run(self.blob, flat, timeout=timeout, placements=placements, compiled_facts=compiled_facts)
        outs, types = reply["outputs"], reply.get("types")
        if len(outs) != exp.out_tree.num_leaves or not all(
                isinstance(o, wire.KernelArray) for o in outs):
            raise runner_mod.ProgramFailure("The grader's program runner answered with outputs that are not "
                                            "the program's; please tell the course staff.")
        for i, (o, aval) in enumerate(zip(outs, exp.out_avals)):
            shape = tuple(aval.shape)
            if all(type(d) is int for d in shape) and (tuple(o.shape) != shape or o.dtype != aval.dtype):
                raise runner_mod.ProgramFailure("The grader's program runner answered with outputs that are "
                                                "not the program's; please tell the course staff.")
            if isinstance(types, list) and i < len(types) and isinstance(types[i], dict):
                o.sharding = {**(o.sharding or {}), **{k: types[i].get(k) for k in ("type", "type_spec")}}
        self.ran_in = {"pid": reply.get("pid"), "uid": reply.get("uid"), "host_pid": getattr(run.proc, "pid", None),
                       "containment": run.mode}
        facts = reply.get("facts") if isinstance(reply.get("facts"), dict) else None
        if compiled_facts and facts is None:
            raise runner_mod.ProgramFailure("The grader's program runner did not say what the compiled program "
                                            "holds; please tell the course staff.")
        return exp.out_tree.unflatten(outs), facts

    __call__ = call


class Kernel:
    """The judge's proxy to the learner's kernel (see the module's docstring).

    ``rng``: a NumPy Generator seeded from :mod:`secrets` per grading run, for fresh inputs;
    ``seed()``: a fresh integer seed from it (for ``ag.check_matches_reference(seed=...)``).
    """

    def __init__(self, client=None, *, channel: Channel | None = None, seed: int | None = None, runner=None,
                 **channel_kw):
        self.channel = channel or Channel(client, **channel_kw)
        self.rng = np.random.default_rng(secrets.randbits(128) if seed is None else seed)
        self.runner = runner  # the ProgramRunner of this grading (None: autograder.runner.current())
        self._programs: dict = {}
        self._programs_lock = threading.Lock()

    def for_test(self) -> "Kernel":
        """A view of this kernel for one test judged beside others: the same channel, runner and
        programs (one export per signature still), and a generator of its own, seeded from this
        one's (drawn in test order)."""
        view = object.__new__(Kernel)
        view.__dict__.update(self.__dict__)
        view.rng = np.random.default_rng(int(self.rng.integers(0, 2**63 - 1)))
        return view

    def seed(self) -> int:
        return int(self.rng.integers(0, 2**63 - 1))

    def distinct_seeds(self, n: int) -> list[int]:
        """``n`` distinct fresh seeds for ``jax.random.key`` (below 2**31: it keeps 32 bits)."""
        seeds: list[int] = []
        while len(seeds) < n:
            s = int(self.rng.integers(0, 2**31 - 1))
            if s not in seeds:
                seeds.append(s)
        return seeds

    def fixture(self, name: str):
        """``run(*args, what=...)``: the fixture ``name`` of :mod:`autograder.fixtures` called in
        the kernel; a learner error becomes feedback that names its idea (a missing notebook
        name stays a NameError, "not defined")."""
        from .feedback import explain_error
        from .wire import Fixture

        def run(*args, what):
            try:
                return self.call(Fixture(name), *args)
            except LearnerError as exc:
                if isinstance(exc, NameError):
                    raise
                raise explain_error(exc.kernel_mro or [type(exc).__name__], str(exc), what) from None
        return run

    def fn(self, name: str, jit=False, static_argnums=(), static_argnames=()) -> RemoteFunction:
        return RemoteFunction(self, name, jit=jit, static_argnums=static_argnums,
                              static_argnames=static_argnames)

    def _reply(self, payload, label):
        reply = self.channel.request(payload)
        if "error" in reply:
            err = reply["error"] if isinstance(reply["error"], dict) else {}
            raise learner_exception(err, label)
        return reply

    def call(self, name, *args, jit=False, static_argnums=(), static_argnames=(), **kwargs):
        """``name(*args, **kwargs)`` in the kernel (under ``jax.jit`` with ``jit=True``)."""
        label = f"`jax.jit({name})`" if jit else f"`{name}`"
        reply = self._reply({"op": "call", "name": name, "args": tuple(args), "kwargs": dict(kwargs),
                             "jit": bool(jit), "static_argnums": list(static_argnums),
                             "static_argnames": list(static_argnames)}, label)
        return reply.get("value")

    def call_keep_args(self, name, *args, jit=False, **kwargs):
        """``(result, args)``: the call's result and its positional arguments as the call left
        them in the kernel (to see writes into an argument, such as ``state["count"] += 1``)."""
        label = f"`jax.jit({name})`" if jit else f"`{name}`"
        reply = self._reply({"op": "call", "name": name, "args": tuple(args), "kwargs": dict(kwargs),
                             "jit": bool(jit), "return_args": True}, label)
        after = reply.get("args")
        if not isinstance(after, (list, tuple)) or len(after) != len(args):
            raise ChannelError("The kernel's reply does not answer the grader's request (no arguments "
                               "came back); was the kernel's machinery changed by a cell?")
        return reply.get("value"), tuple(after)

    def get(self, name):
        """The value of the notebook's global ``name`` (as data)."""
        return self._reply({"op": "get", "name": name}, f"`{name}`").get("value")

    def export(self, name, *specs, static_argnums=(), static_argnames=(), **kwargs) -> Exported:
        """``jax.export`` of ``jax.jit(name)`` at ``specs`` (:class:`~autograder.wire.Spec`;
        static arguments given as values, named in ``static_argnums``/``static_argnames``),
        exported for the judge's platform (CPU), deserialized judge-side and checked against the
        allow-list (:mod:`autograder.allowlist`): a program with host callbacks or effects, an
        operation the grader does not run, or exported for another platform is refused here,
        with feedback that says what, whether or not the judge then runs it."""
        from jax import export

        reply = self._reply({"op": "export", "name": name, "args": tuple(specs), "kwargs": dict(kwargs),
                             "static_argnums": list(static_argnums),
                             "static_argnames": list(static_argnames)}, f"`jax.jit({name})`")
        if "callback" in reply:
            raise ExerciseFailure("purity", f"`{name}` calls back into Python from the compiled program "
                                            "(a host callback such as jax.debug.print or pure_callback); "
                                            "the grader only runs pure JAX programs.")
        data = reply.get("exported")
        if not isinstance(data, str):
            raise ChannelError("The kernel's exported program is missing.")
        try:
            blob = base64.b64decode(data, validate=True)
            exp = export.deserialize(bytearray(blob))
        except Exception as exc:  # noqa: BLE001 - a forged or broken module
            raise ChannelError(f"The exported program cannot be read ({type(exc).__name__}).") from None
        return Exported(exp, blob=blob, runner=self.runner, name=f"`{name}`").check()

    def program(self, name, *specs, static_argnums=(), static_argnames=(), **kwargs) -> Exported:
        """The ONE exported program of ``name`` at this input signature (``specs`` and the static
        arguments), exported once per notebook grading and cached: its values
        (``prog(*dynamic_args)``, run in the program runner) and its structure
        (``prog.ops()``, ``prog.has_loops``...) come from the same artifact. E.g.::

            prog = k.program("ema", Spec((8, 2), "float32"), Spec((), "float32"))
            ys = prog(xs, np.float32(0.3))
        """
        key = wire.encode((name, tuple(specs), list(static_argnums), list(static_argnames), dict(kwargs)))
        with self._programs_lock:  # held while exporting: another test asking for it waits, then shares it
            if key not in self._programs:
                self._programs[key] = self.export(name, *specs, static_argnums=static_argnums,
                                                  static_argnames=static_argnames, **kwargs)
            return self._programs[key]

    def claim(self, check: str, name: str, *args, **options) -> None:
        """Run ``ag.<check>(name, *args, **options)`` in the kernel; a failing claim raises its
        :class:`ExerciseFailure` (a passing one earns nothing by itself)."""
        reply = self._reply({"op": "claim", "check": check, "name": name, "args": tuple(args),
                             "kwargs": dict(options)}, f"`{name}`")
        claim = reply.get("claim")
        if not isinstance(claim, dict):
            raise ChannelError("The kernel's claim is malformed.")
        if claim.get("ok") is not True:
            idea = claim.get("idea") if claim.get("idea") in TAUGHT_IN else "numerics"
            raise ExerciseFailure(idea, str(claim.get("detail") or "a kernel-side check failed")[:2000])


# --------------------------------------------------------------------------- running a judge file

def ensure_judge_devices() -> None:
    """Ask JAX for :data:`JUDGE_CPU_DEVICES` virtual CPU devices in this process (the config
    only: kernels do not inherit it). JAX fixes the count when it starts its backends, on the
    first judge's first operation, and one grading process judges notebooks of any chapter:
    asked later (09's judge asks on import), a process that judged another chapter first would
    stay at 1 device. Too late once JAX has started: then the count stays what it is."""
    import jax

    try:
        jax.config.update("jax_num_cpu_devices", JUDGE_CPU_DEVICES)
    except Exception:  # noqa: BLE001 - the backends already exist, or an older JAX
        pass


def judge_path(assignment_dir: Path) -> Path:
    return Path(assignment_dir) / "judge.py"


def judge_paths(assignment_dir: Path) -> list[Path]:
    """The assignment's judge files: ``judge.py``, then any ``judge_<exercise>.py`` beside it
    (an exercise may keep its judge in a file of its own), in name order."""
    main = judge_path(assignment_dir)
    extra = sorted(p for p in Path(assignment_dir).glob("judge_*.py") if p.is_file())
    return ([main] if main.is_file() else []) + extra


def judge_tests(assignment_dir: Path) -> dict:
    """``{test_<name>: function}`` over every judge file of the assignment; a test defined in two
    files is an error of the course, not of the learner."""
    tests: dict = {}
    for path in judge_paths(assignment_dir):
        module = load_judge(path)
        for name, f in vars(module).items():
            if name.startswith("test_") and callable(f) and getattr(f, "__module__", None) == module.__name__:
                if name in tests:
                    raise ValueError(f"{name} is defined in two judge files of {Path(assignment_dir).name}")
                tests[name] = f
    return tests


_LOADED: dict = {}  # (path, mtime, size) -> module: a grading process loads each judge once


def load_judge(path: Path):
    """The judge module at ``path``, loaded by file path (not through ``sys.path``), once per
    process and version of the file: a grading process that grades many notebooks keeps the
    module, and what its functions have compiled (judge files hold no state between
    notebooks: every draw comes from the ``Kernel`` of each grading)."""
    path = Path(path).resolve()
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _LOADED:
        spec = importlib.util.spec_from_file_location(f"_autograder_judge_{path.parent.name}_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _LOADED[key] = module
    return _LOADED[key]


NOT_DEFINED = ("{ename}: {evalue}. The exercise's function is not defined: run its answer cell, "
               "and keep the function's name as given.")


def verdict(test, k: Kernel, grade_id: str) -> str:
    """Run one judge test; '' when it passes, else the learner-facing feedback."""
    try:
        test(k)
        return ""
    except ExerciseFailure as exc:
        return str(exc)
    except ChannelError as exc:
        return str(exc)
    except ProgramFailure as exc:
        return str(exc)
    except LearnerError as exc:
        if isinstance(exc, NameError):
            return NOT_DEFINED.format(ename=type(exc).__name__, evalue=str(exc))
        return str(explain_error(exc.kernel_mro or [type(exc).__name__], str(exc), exc.label))
    except wire.WireError as exc:
        return f"The value could not be sent to the kernel: {exc}."
    except Exception as exc:  # noqa: BLE001 - a bug in the judge: zero, said plainly
        return (f"Not graded: the grader's own check for {grade_id} failed ({type(exc).__name__}: "
                f"{str(exc)[:300]}); please tell the course staff.")


JUDGE_THREADS = 2  # tests judged side by side (see run_judge)


def run_judge(assignment_dir, kernel_client=None, *, grade_ids=None, kernel: Kernel | None = None,
              runner: ProgramRunner | None = None, threads: int | None = None, **channel_kw) -> dict:
    """``{grade_id: feedback or ""}`` for the judge file of ``assignment_dir`` (the trusted
    ``solutions/<assignment>/``), run against a live kernel.

    ``grade_ids`` (default: the file's ``test_*`` functions) are the test cells to judge; one
    the file has no function for scores zero with a message. ``runner``: the program runner of
    this grading (default: :func:`autograder.runner.current`).

    Tests are judged ``threads`` at a time (default :data:`JUDGE_THREADS`; 1 where a judge file
    of the assignment sets ``SERIAL_TESTS = True``, as one that times the kernel's work must):
    while one test's program runs in the program runner (another process) or its reference is
    computed here, another test's requests keep the kernel busy. Each test has its own time
    limit and its own random draws (:meth:`Kernel.for_test`); the kernel answers one request
    at a time, whichever test sent it, so a request sees the kernel as a lone test would.
    """
    try:
        tests = judge_tests(assignment_dir)
        serial = any(getattr(load_judge(p), "SERIAL_TESTS", False) for p in judge_paths(assignment_dir))
    except Exception as exc:  # noqa: BLE001
        msg = f"Not graded: the grader's judge file cannot be loaded ({type(exc).__name__}: {exc})."
        return {g: msg for g in (grade_ids or [])}
    k = kernel or Kernel(kernel_client, runner=runner, **channel_kw)
    ids = list(grade_ids if grade_ids is not None else tests)
    width = 1 if serial or not hasattr(k, "for_test") else max(1, min(threads or JUDGE_THREADS, len(ids)))

    def judge_one(gid, kk):
        test = tests.get(gid)
        channel = getattr(kk, "channel", None)
        if isinstance(channel, Channel):  # a test cell's time limit, as when tests ran in the kernel
            channel.test_deadline = time.monotonic() + channel.timeout
            if runner is not None:  # its programs' runs share it
                runner.deadline = min(d for d in (channel.test_deadline, channel.deadline) if d is not None)
        return (verdict(test, kk, gid) if test is not None else
                f"Not graded: the grader's judge has no check for {gid}; please tell the course staff.")

    # learner errors are explained for this assignment's chapter, wherever they surface
    with feedback.chapter(Path(assignment_dir).name):
        if width == 1:
            return {gid: judge_one(gid, k) for gid in ids}
        import contextvars
        from concurrent.futures import ThreadPoolExecutor

        views = [k.for_test() for _ in ids]  # drawn here, in test order
        with ThreadPoolExecutor(width, thread_name_prefix="judge") as pool:
            futures = [pool.submit(contextvars.copy_context().run, judge_one, gid, view)
                       for gid, view in zip(ids, views)]
            return {gid: f.result() for gid, f in zip(ids, futures)}


# --------------------------------------------------------------------------- the grading step

def _iopub_ready(kc, end: float) -> None:
    """Wait until a new client's IOPub subscription receives messages (a kernel_info request's
    busy/idle arrives): quicker than ``wait_for_ready``, which polls at fixed intervals."""
    while time.monotonic() < end:
        msg_id = kc.kernel_info()
        stop = time.monotonic() + 0.25
        while time.monotonic() < stop:
            try:
                msg = kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                continue
            if msg.get("parent_header", {}).get("msg_id") == msg_id:
                return
    raise ChannelError("The grader could not connect to the kernel.")


def is_test_cell(cell) -> bool:
    meta = cell.get("metadata", {}).get("nbgrader", {}) or {}
    return cell.get("cell_type") == "code" and bool(meta.get("grade")) and not meta.get("solution")


class JudgeStep:
    """Grading with a judge: the notebook's test cells and its "Check my answers" cell are not
    run (:meth:`prepare` makes them raw cells while the kernel runs the others, :meth:`restore`
    puts them back); after the other cells, as an ``after_cells`` callback of
    :mod:`autograder.execution`, :func:`run_judge` decides each test on the live kernel;
    :meth:`write_verdicts` writes them into the test cells (an error output when failing,
    nothing when passing) for nbgrader's ``SaveAutoGrades`` and the gradebook."""

    def __init__(self, assignment_dir: Path, cell_timeout: float = REQUEST_TIMEOUT):
        self.assignment_dir = Path(assignment_dir)
        self.cell_timeout = cell_timeout
        self.verdicts: dict | None = None  # None: the judge did not run
        self.grade_ids: list = []
        self._hidden: list = []
        self.runner: ProgramRunner | None = None  # this notebook's program runner (see prepare)

    @classmethod
    def for_source(cls, source_notebook: Path, cell_timeout: float = REQUEST_TIMEOUT):
        """The step for an assignment that has a judge file, else ``None`` (the legacy path)."""
        folder = Path(source_notebook).parent
        return cls(folder, cell_timeout) if judge_path(folder).is_file() else None

    @staticmethod
    def skips(cell) -> bool:
        """Cells the kernel does not run when a judge decides."""
        return is_test_cell(cell) or CHECK_TAG in (cell.get("metadata", {}).get("tags") or [])

    def prepare(self, nb) -> None:
        """Hide the cells the kernel does not run, and start this notebook's program runner
        (contained, warm while the kernel runs the notebook; its start never fails the
        notebook: a runner that cannot start fails the tests that run a program, saying so)."""
        self.grade_ids = [c.metadata["nbgrader"]["grade_id"] for c in nb.cells if is_test_cell(c)]
        self._hidden = [c for c in nb.cells if self.skips(c)]
        for cell in self._hidden:
            cell.cell_type = "raw"
        if self.runner is None:
            from . import runner as runner_mod

            self.runner = runner_mod.process_runner()  # warm across this process's notebooks
            self.runner.timeout = min(float(self.cell_timeout), runner_mod.RUN_TIMEOUT)
            try:
                self.runner.start()
            except Exception:  # noqa: BLE001 - said by the first run that needs it
                pass

    def close(self) -> None:
        """This notebook is done with the program runner (idempotent): the process's runner
        stays warm for the next notebook; one given to this step alone is stopped."""
        if self.runner is not None:
            from . import runner as runner_mod

            runner_mod.use(None)
            self.runner.deadline = None
            if self.runner is not runner_mod.process_runner():
                self.runner.close()
            self.runner = None

    def restore(self, nb) -> None:
        for cell in self._hidden:
            cell.cell_type = "code"
            cell.outputs = []
            cell.execution_count = None
        self._hidden = []

    async def __call__(self, live) -> None:
        """Judge the live kernel (:class:`autograder.execution.LiveKernel`), in a thread of its
        own with a blocking client, so the manager's coroutines (alive, interrupt) still run."""
        import asyncio
        import contextvars

        loop = asyncio.get_running_loop()
        manager = live.manager

        def on_loop(coro_fn):
            def run():
                return asyncio.run_coroutine_threadsafe(coro_fn(), loop).result(10)
            return run

        def judge():
            kc = live.blocking_client()
            try:
                _iopub_ready(kc, time.monotonic() + 30)
                from . import runner as runner_mod
                from .grader.warm import judge_side_ready

                judge_side_ready()  # JAX, imported while the kernel ran the notebook (one grading process)
                ensure_judge_devices()  # before JAX starts (a no-op where it has)
                runner_mod.use(self.runner)  # judges' own Exported objects run in it too
                return run_judge(self.assignment_dir, kc, grade_ids=self.grade_ids, runner=self.runner,
                                 timeout=self.cell_timeout, deadline=live.deadline,
                                 alive=on_loop(manager.is_alive), interrupt=on_loop(manager.interrupt_kernel))
            finally:
                kc.stop_channels()

        try:
            # a fresh context: jupyter_core keeps the running loop in a context variable, which
            # the blocking client's thread must not inherit
            self.verdicts = await loop.run_in_executor(None, contextvars.Context().run, judge)
        except Exception as exc:  # noqa: BLE001 - the grader's fault: zero, said plainly
            msg = f"Not graded: the grader could not reach the kernel ({type(exc).__name__}: {exc})."
            self.verdicts = {g: msg for g in self.grade_ids}

    def write_verdicts(self, nb, not_judged: str) -> dict:
        """Write each test cell's verdict as its outputs; ``{grade_id: feedback}``. Tests the
        judge did not decide (the kernel died, the time ran out) get ``not_judged``."""
        from nbformat.v4 import new_output

        self.close()  # the judge is done: no more programs to run
        feedback = {}
        for cell in nb.cells:
            if not is_test_cell(cell):
                continue
            gid = cell.metadata["nbgrader"]["grade_id"]
            fb = (self.verdicts or {}).get(gid, not_judged) if self.verdicts is not None else not_judged
            feedback[gid] = fb
            cell.outputs = [] if not fb else [new_output("error", ename="Failed", evalue=fb, traceback=[])]
            cell.execution_count = None
        return feedback
