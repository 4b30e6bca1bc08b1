"""The judge's proxy to the learner's kernel: :class:`Kernel` (``k`` in a judge file),
:class:`RemoteFunction` (a learner function called in the kernel) and :class:`Exported` (a
learner's program moved into the judge: read by :mod:`.mlir`, checked by :mod:`.allowlist`,
run by :mod:`.runner`). Every request goes through one :class:`~.channel.Channel`.
"""
from __future__ import annotations

import base64
import secrets
import threading

import numpy as np

from .. import wire
from ..feedback import TAUGHT_IN, ExerciseFailure, where
from .channel import Channel, ChannelError, LearnerError, learner_exception
from .donation import DirectCall, deleted_arrays, direct_args, judge_arrays


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
    ``jax.export.Exported``), read here as a parsed module (:attr:`structure`, :meth:`ops`,
    :attr:`has_loops`) and run, on the judge's inputs, in the contained program runner
    (:meth:`call`, or calling the object itself): every fact and every value from the same
    artifact, ``exported`` made what the runner executes
    (:func:`autograder.judge.mlir.executable`: composites and calls inlined, constants
    folded, dead code removed). ``blob``: its serialized bytes (``exported.serialize()`` when
    not given); ``runner``: the :class:`autograder.judge.runner.ProgramRunner` to run it in
    (default: :func:`autograder.judge.runner.current`)."""

    def __init__(self, exported, *, blob=None, runner=None, name="the function"):
        from . import mlir

        try:  # the module the runner compiles and runs is the one whose facts are read
            runnable = mlir.executable(exported)
        except mlir.ProgramError:  # refused by check(), which says why
            runnable = exported
        if runnable is not exported:
            blob = None
        self.written = exported  # as exported: its entry function's calls are how it dispatches
        self.exported = runnable
        self._blob = blob
        self.runner = runner
        self.name = name
        self._structure = None
        self._refusal = None
        self.ran_in: dict = {}  # pid and uid of the process that computed the last call
        self.direct = None  # a _DirectCall: Kernel.program's, made once its program has run

    @property
    def blob(self) -> bytes:
        if self._blob is None:
            self._blob = bytes(self.exported.serialize())
        return self._blob

    @property
    def structure(self):
        """The parsed program (:class:`autograder.judge.mlir.Program`: ``op_counts``,
        ``has_loops``, ``collectives``, ``custom_call_targets``, ``top_level``, ``ops``)."""
        if self._structure is None:
            from . import mlir

            self._structure = mlir.read(self.written)  # normalized as self.exported was
        return self._structure

    def ops(self):
        """``Counter`` of operation names (``stablehlo.add``...), nested bodies and called
        functions included (:attr:`autograder.judge.mlir.Facts.op_counts`)."""
        return self.structure.op_counts

    @property
    def has_loops(self) -> bool:
        """Whether the program has a loop (a ``stablehlo.while`` operation, wherever it is)."""
        return self.structure.has_loops

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
        past its time or out of memory raises :class:`autograder.judge.runner.ProgramFailure`
        (learner-facing). ``loops`` is ignored (a loop that never ends runs out of time)."""
        return self.run(args, kwargs, timeout=timeout)[0]

    def run(self, args=(), kwargs=None, *, timeout=None, placements=None, compiled_facts=False):
        """``(outputs, facts)``: :meth:`call` with the runner's options: ``placements`` (a
        partition spec per input, as lists: the inputs placed so on the program's mesh) and
        ``compiled_facts`` (``facts`` is then what XLA's compiled program holds, e.g.
        ``facts["collectives"]``; else None). See :meth:`autograder.judge.runner.ProgramRunner.run`."""
        import jax

        from . import runner as runner_mod

        self.check()
        exp = self.exported
        leaves, tree = jax.tree_util.tree_flatten((tuple(args), dict(kwargs or {})))
        if tree != exp.in_tree or len(leaves) != len(exp.in_avals):
            raise runner_mod.ProgramFailure(
                f"The program of {self.name} takes other inputs than the exercise's function ({exp.in_tree}, "
                f"not {tree}): was jax.export or the function's signature changed?")
        flat = [np.asarray(leaf) if hasattr(leaf, "__array__") else np.asarray(leaf, dtype=aval.dtype)
                for leaf, aval in zip(leaves, exp.in_avals)]  # a Python number: the program's dtype
        run = self.runner or runner_mod.current()
        reply = run.run(self.blob, flat, timeout=timeout, placements=placements, compiled_facts=compiled_facts)
        outs, types = reply["outputs"], reply.get("types")
        if len(outs) != exp.out_tree.num_leaves or not all(isinstance(o, wire.KernelArray) and (
                any(type(d) is not int for d in aval.shape)  # a symbolic dimension: not checked here
                or (tuple(o.shape) == tuple(aval.shape) and o.dtype == aval.dtype))
                for o, aval in zip(outs, exp.out_avals)):
            # a module whose declared outputs are not what it computes (a forged export) lands here too
            raise runner_mod.ProgramFailure("The grader's program runner answered with outputs that are not "
                                            "the program's; please tell the course staff.")
        for i, o in enumerate(outs):
            if isinstance(types, list) and i < len(types) and isinstance(types[i], dict):
                o.sharding = {**(o.sharding or {}), **{k: types[i].get(k) for k in ("type", "type_spec")}}
        self.ran_in = {"pid": reply.get("pid"), "uid": reply.get("uid"), "host_pid": getattr(run.proc, "pid", None),
                       "containment": run.mode}
        facts = reply.get("facts") if isinstance(reply.get("facts"), dict) else None
        if compiled_facts and facts is None:
            raise runner_mod.RunnerFault("The grader's program runner did not say what the compiled program "
                                            "holds; please tell the course staff.")
        if self.direct is not None:
            self.direct.once(args, kwargs or {})
        return exp.out_tree.unflatten(outs), facts

    __call__ = call


class Kernel:
    """The judge's proxy to the learner's kernel (see the module's docstring).

    ``rng``: a NumPy Generator for the hidden inputs; ``seed()``: an integer seed from it (for
    ``ag.check_matches_reference(seed=...)``). With ``key`` (a submission's key,
    :func:`autograder.judge.seeding.submission_key`) each test's view (:meth:`for_test`) draws
    from a seed fixed by the key and the test: a regrade draws the same inputs. Without one
    (a judge run outside a grading), from :mod:`secrets`.
    """

    def __init__(self, client=None, *, channel: Channel | None = None, seed: int | None = None, runner=None,
                 key: bytes | None = None, **channel_kw):
        self.channel = channel or Channel(client, **channel_kw)
        self.key = key
        self.rng = np.random.default_rng(secrets.randbits(128) if seed is None else seed)
        self.runner = runner  # the ProgramRunner of this grading (None: autograder.judge.runner.current())
        self._programs: dict = {}
        self._programs_lock = threading.Lock()
        self._called: set = set()  # the notebook functions the judge has called directly (shared by the views)
        self._called_lock = threading.Lock()
        self.failed_claims: list = []  # the current test's failed claims (Verdicts), see claim
        self.asked = 0  # requests this test made to the kernel: after one, what the judge holds is the learner's

    def for_test(self, grade_id: str | None = None) -> "Kernel":
        """A view of this kernel for one test: the same channel, runner and programs (one export
        per signature still), and a generator of its own: seeded from :attr:`key` and
        ``grade_id`` where both are known (the same on every regrade, whatever other tests
        drew), else from this one's (drawn in test order)."""
        from .seeding import seed_for

        view = object.__new__(Kernel)
        view.__dict__.update(self.__dict__)
        seed = (seed_for(self.key, grade_id) if self.key is not None and grade_id is not None
                else int(self.rng.integers(0, 2**63 - 1)))
        view.rng = np.random.default_rng(seed)
        view.failed_claims = []
        view.asked = 0
        return view

    def cases(self, draw, n: int, *, always=()) -> list:
        """The inputs of a hidden test: ``always`` first (the visible test's inputs and the edges
        the exercise's contract names, never drawn: they are in every learner's hidden set), then
        ``n`` drawn by ``draw(rng)`` from this test's generator."""
        return [*always, *(draw(self.rng) for _ in range(n))]

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
        """``run(*args, what=..., on_input=None)``: the fixture ``name`` of
        :mod:`autograder.agent.fixtures` called in the kernel; a learner error becomes feedback
        that names its idea (a missing notebook name stays a NameError, "not defined").
        ``on_input``: answers the fixture's prompts to the judge while it runs (see
        :meth:`autograder.judge.Channel.request`)."""
        from ..feedback import explain_error
        from ..wire import Fixture

        def run(*args, what, on_input=None):
            try:
                if on_input is None:
                    return self.call(Fixture(name), *args)
                sent, _ = direct_args(Fixture(name), args, {})  # as call sends a fixture's: AsNumPy unwrapped
                return self._reply({"op": "call", "name": Fixture(name), "args": sent, "kwargs": {},
                                    "jit": False, "static_argnums": [], "static_argnames": []},
                                   _label(Fixture(name), False), on_input=on_input).get("value")
            except LearnerError as exc:
                if isinstance(exc, NameError):
                    raise
                raise explain_error(exc.kernel_mro or [type(exc).__name__], str(exc), what) from None
        return run

    def fn(self, name: str, jit=False, static_argnums=(), static_argnames=()) -> RemoteFunction:
        return RemoteFunction(self, name, jit=jit, static_argnums=static_argnums,
                              static_argnames=static_argnames)

    def _reply(self, payload, label, on_input=None):
        """Send one request; a learner error is raised as :class:`LearnerError`. For a request
        that runs learner code on the judge's arrays (``call``, ``claim``), what became of each
        array is checked first (:func:`.donation.deleted_arrays`): one the call deleted fails the test
        (a claim's fails it as a failed claim)."""
        self.asked += 1
        op = payload.get("op")
        sites = judge_arrays(payload.get("args") or (), payload.get("kwargs") or {}) if op in ("call", "claim") else []
        reply = self.channel.request(payload) if on_input is None else self.channel.request(payload, on_input=on_input)
        if op in ("call", "claim"):
            gone = deleted_arrays(reply, sites, payload, label)
            if gone and op == "call":
                raise ExerciseFailure("purity", gone)
            if gone:  # a claim: applied after the evidence, as its other failures are
                from .outcome import failed

                self.failed_claims.append(failed(f"A check made in the kernel on {label} failed ({where('purity')})",
                                                 gone))
                reply = {**reply, "claim": {"ok": True}}  # its own outcome is not read again
        if "error" in reply:
            err = reply["error"] if isinstance(reply["error"], dict) else {}
            raise learner_exception(err, label)
        return reply

    def call(self, name, *args, jit=False, static_argnums=(), static_argnames=(), **kwargs):
        """``name(*args, **kwargs)`` in the kernel (under ``jax.jit`` with ``jit=True``). NumPy
        arrays among the arguments of a notebook function are sent as JAX arrays
        (:func:`autograder.wire.as_jax`): every array the call gets is the judge's own
        ``jax.Array``, and one it deletes (donates) fails the test, naming it (purity)."""
        label = _label(name, jit)
        args, kwargs = direct_args(name, args, kwargs, static_argnums, static_argnames)
        if not jit and isinstance(name, str):
            self.called_directly(name)
        reply = self._reply({"op": "call", "name": name, "args": tuple(args), "kwargs": dict(kwargs),
                             "jit": bool(jit), "static_argnums": list(static_argnums),
                             "static_argnames": list(static_argnames)}, label)
        return reply.get("value")

    def call_keep_args(self, name, *args, jit=False, **kwargs):
        """``(result, args)``: the call's result and its positional arguments as the call left
        them in the kernel (to see writes into an argument, such as ``state["count"] += 1``).
        Arguments as :meth:`call` sends them."""
        label = _label(name, jit)
        args, kwargs = direct_args(name, args, kwargs)
        if not jit and isinstance(name, str):
            self.called_directly(name)
        reply = self._reply({"op": "call", "name": name, "args": tuple(args), "kwargs": dict(kwargs),
                             "jit": bool(jit), "return_args": True}, label)
        after = reply.get("args")
        if not isinstance(after, (list, tuple)) or len(after) != len(args):
            raise ChannelError("The kernel's reply does not answer the grader's request (no arguments "
                               "came back); was the kernel's machinery changed by a cell?")
        return reply.get("value"), tuple(after)

    def called_directly(self, name: str) -> bool:
        """Note that the judge calls the notebook's ``name`` directly (not under ``jax.jit``);
        whether it had before, in this grading."""
        with self._called_lock:
            before = name in self._called
            self._called.add(name)
        return before

    def get(self, name):
        """The value of the notebook's global ``name`` (as data)."""
        return self._reply({"op": "get", "name": name}, f"`{name}`").get("value")

    def export(self, name, *specs, static_argnums=(), static_argnames=(), **kwargs) -> Exported:
        """``jax.export`` of ``jax.jit(name)`` at ``specs`` (:class:`~autograder.wire.Spec`;
        static arguments given as values, named in ``static_argnums``/``static_argnames``),
        exported for the judge's platform (CPU), deserialized judge-side and checked against the
        allow-list (:mod:`autograder.judge.allowlist`): a program with host callbacks or effects, an
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
        program = Exported(exp, blob=blob, runner=self.runner, name=f"`{name}`").check()
        if isinstance(name, str):  # its first run also calls it directly, once per grading
            program.direct = DirectCall(self, name, specs, static_argnums, static_argnames, kwargs)
        return program

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
        """Run ``ag.<check>(name, *args, **options)`` in the kernel. A failing claim is applied
        after the evidence: it is kept in :attr:`failed_claims` and fails the test once its
        judge has returned (:func:`autograder.judge.step.verdict`); a passing one earns nothing.
        Its message is the judge's, the kernel's detail after it (made safe)."""
        from .outcome import failed

        reply = self._reply({"op": "claim", "check": check, "name": name, "args": tuple(args),
                             "kwargs": dict(options)}, _label(name, False))
        claim = reply.get("claim")
        if not isinstance(claim, dict):
            raise ChannelError("The kernel's claim is malformed.")
        if claim.get("ok") is not True:
            idea = claim.get("idea") if claim.get("idea") in TAUGHT_IN else "numerics"
            pointer = where(idea) if idea != "numerics" else ""
            what = options.get("what") if isinstance(options.get("what"), str) else str(name)
            self.failed_claims.append(failed(f"A check made in the kernel on {what[:200]} failed"
                                             f"{f' ({pointer})' if pointer else ''}", str(claim.get("detail") or "")))


def _label(name, jit) -> str:
    if isinstance(name, wire.Fixture):
        return f"the grader's check `{name.name}`"
    return f"`jax.jit({name})`" if jit else f"`{name}`"
