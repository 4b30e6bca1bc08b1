"""The judges' programs: a learner function exported once per input signature and read
(:func:`trace`, a :class:`Traced`: its facts from :mod:`.mlir`, its values from the program
runner), run (:func:`run`) or compared with a reference on fresh inputs
(:func:`check_matches_reference`); the judge's inputs as the program's (:func:`spec_of`,
:func:`as_inputs`, :func:`raw_key`)."""
from __future__ import annotations

from .mlir import ProgramError, read


def spec_of(value):
    """The :class:`~autograder.wire.Spec` tree of a judge-side value tree (NumPy arrays and
    scalars, Python floats as float32 and ints as int32, in dicts, lists and tuples)."""
    import numpy as np

    from ..wire import MARKERS, AsJax, Spec

    if value is None or (isinstance(value, MARKERS) and not isinstance(value, AsJax)):
        return value  # an empty subtree; a Spec already, or a key, a sharded array...: the kernel builds it
    if isinstance(value, dict):
        return {k: spec_of(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(spec_of(v) for v in value)
    arr = np.asarray(as_inputs(value))
    return Spec(tuple(int(d) for d in arr.shape), arr.dtype.name)


def as_inputs(value):
    """A judge-side value tree as the program's inputs: :class:`~autograder.wire.AsJax`
    unwrapped, Python floats as float32 and ints as int32 (as :func:`spec_of` exports them)."""
    import numpy as np

    from ..wire import AsJax, Key

    if isinstance(value, AsJax):
        return np.asarray(value.value, dtype=value.dtype) if value.dtype else np.asarray(value.value)
    if isinstance(value, Key):
        import jax

        return jax.random.key(value.seed, impl=value.impl) if value.impl else jax.random.key(value.seed)
    if isinstance(value, dict):
        return {k: as_inputs(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(as_inputs(v) for v in value)
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        return np.int32(value)
    if isinstance(value, float):
        return np.float32(value)
    return value


def raw_key(seed: int):
    """The judge's key ``seed`` as raw data (``uint32[2]``, threefry: the values of
    ``jax.random.key(seed)``), for a program exported with ``Spec((2,), "uint32")`` as its
    key: the program runner takes arrays of numbers, not typed keys."""
    import jax
    import numpy as np

    return np.asarray(jax.random.key_data(jax.random.key(int(seed))), np.uint32)


class Traced:
    """One exported program of a learner function at one input signature, in the judge: its
    facts (:class:`Program`'s, read from the parsed module) and its values (``traced(*args)``:
    the same program run by the program runner on the judge's inputs). Made by :func:`trace`."""

    def __init__(self, exported, label: str):
        self.exported = exported
        self.label = label
        self.facts = read(exported)

    def __getattr__(self, name):
        if name in ("facts", "exported"):
            raise AttributeError(name)
        return getattr(self.facts, name)

    def __call__(self, *args, **kwargs):
        """The program's outputs on ``args`` and ``kwargs`` (judge-side values; a
        :class:`~autograder.wire.Key` becomes the judge's own key), run by the judge's runner."""
        import jax
        import numpy as np

        from ..feedback import ExerciseFailure
        from .channel import ChannelError
        from .runner import RunnerFault
        from .starvation import Starved

        inputs = tuple(as_inputs(a) for a in args)
        named = {n: as_inputs(v) for n, v in kwargs.items()}
        try:
            out = self.exported.call(*inputs, **named)
        except (ExerciseFailure, ChannelError, Starved, RunnerFault):  # the machine's fault: not graded
            raise
        except Exception as exc:  # noqa: BLE001 - the learner's program, or inputs it does not take
            raise ExerciseFailure("numerics", f"the program of {self.label} failed when the grader ran "
                                              f"it ({type(exc).__name__}: {str(exc).strip()[:200]}).") from None
        return jax.tree_util.tree_map(np.asarray, out)


def trace(k, name: str, /, *args, static_argnums=(), static_argnames=(), translate=None, loops=False,
          label=None, raw_errors=False, **static_kwargs) -> Traced:
    """The exported program of the notebook's ``name`` at the signature of ``args`` (judge-side
    values or :class:`~autograder.wire.Spec`; those at ``static_argnums``
    and in ``static_argnames`` are fixed, as Python values; other keyword arguments are traced),
    one per signature and judge run (cached on ``k``), taken with ``k.program``.

    A learner error while tracing becomes feedback that names its idea (``translate(exc,
    label)`` first, then the shared classifier); with ``raw_errors`` it is raised as it is (for
    a caller that translates it, such as ``ag.call``). ``loops`` (the exercise needs a loop) is
    accepted and changes nothing: every program runs in the program runner, whose time limit
    stops a loop that never ends.
    """
    from ..feedback import call as ag_call
    from .channel import ChannelError, LearnerError

    label = label or f"jax.export(jax.jit({name}))"
    nums = tuple(static_argnums)
    specs = tuple(a if i in nums else spec_of(a) for i, a in enumerate(args))
    static_kwargs = {n: v if n in static_argnames else spec_of(v) for n, v in static_kwargs.items()}
    key = (name, repr(specs), nums, tuple(static_argnames), repr(sorted(static_kwargs.items())))
    cache = k.__dict__.setdefault("_traced_programs", {})
    if key in cache:
        return cache[key]
    try:
        exported = k.program(name, *specs, static_argnums=nums, static_argnames=tuple(static_argnames),
                             **static_kwargs)
        traced = Traced(exported, f"`{name}`")
    except LearnerError as exc:
        err = exc
        specific = translate(err, label) if translate is not None else None
        if specific is not None:
            raise specific from None
        if raw_errors:  # the caller's ag.call translates it
            raise

        def again():
            raise err
        ag_call(again, what=label)
        raise
    except ProgramError as exc:
        raise ChannelError(str(exc)) from None
    cache[key] = traced
    return traced


def run(k, name: str, /, *args, static_argnums=(), static_argnames=(), **options):
    """``name(*args, **kwargs)`` computed by its exported program (see :func:`trace`): the value
    a judge compares. Arguments at ``static_argnums`` and in ``static_argnames`` are fixed in
    the program and not passed to it; other keyword arguments are its traced inputs."""
    traced = trace(k, name, *args, static_argnums=static_argnums, static_argnames=static_argnames, **options)
    kwargs = {n: v for n, v in options.items()
              if n not in ("translate", "loops", "label", "raw_errors") and n not in tuple(static_argnames)}
    return traced(*(a for i, a in enumerate(args) if i not in tuple(static_argnums)), **kwargs)


def check_matches_reference(k, name: str, reference, make_args, *, trials=3, seed=0, what=None,
                            idea="numerics", dtype=None, rtol=None, atol=None, static_argnums=(),
                            **options):
    """``name`` against ``reference`` on ``trials`` fresh inputs (``make_args(rng)``, a seeded
    NumPy Generator), every value computed by the learner's exported program at the inputs'
    signature (:func:`run`), compared at the exercise's ``dtype``. ``options`` go to
    :func:`trace` (``translate``, ``loops``, static arguments)."""
    import numpy as np

    from ..numerics import check_close

    label = what or f"jax.jit({name})"
    rng = np.random.default_rng(seed)
    for trial in range(trials):
        args = make_args(rng)
        expected = reference(*args)
        got = run(k, name, *args, static_argnums=static_argnums, label=label, **options)
        check_close(got, expected, what=f"{label}'s result on random input #{trial + 1}", idea=idea,
                    dtype=dtype, rtol=rtol, atol=atol)
