"""What JAX recorded: primitives in a jaxpr (nested ones too) and the jaxpr's size."""
from __future__ import annotations

from .feedback import call, fail


def _sub_jaxprs(value):
    """Yield the jaxprs found in an equation parameter (cond branches, scan bodies, ...)."""
    if hasattr(value, "jaxpr") and hasattr(value, "consts"):  # ClosedJaxpr
        yield value.jaxpr
    elif hasattr(value, "eqns") and hasattr(value, "invars"):  # Jaxpr
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _sub_jaxprs(v)


def _as_jaxpr(jaxpr):
    return jaxpr.jaxpr if hasattr(jaxpr, "consts") and hasattr(jaxpr, "jaxpr") else jaxpr


def iter_eqns(jaxpr, nested: bool = True):
    """Every equation of ``jaxpr``, depth first; with ``nested``, also those inside
    ``cond``, ``while``, ``scan``, ``pjit``/``jit``, custom derivatives and the like."""
    for eqn in _as_jaxpr(jaxpr).eqns:
        yield eqn
        if nested:
            for param in eqn.params.values():
                for sub in _sub_jaxprs(param):
                    yield from iter_eqns(sub, nested=True)


def primitives_in(jaxpr, nested: bool = True) -> list[str]:
    """Names of the primitives of ``jaxpr`` in order of appearance."""
    return [eqn.primitive.name for eqn in iter_eqns(jaxpr, nested=nested)]


def jaxpr_size(jaxpr, nested: bool = True) -> int:
    """Number of equations in ``jaxpr`` (nested ones counted too): ``len(jaxpr.eqns)`` of
    ``jax.make_jaxpr(f)(*args).jaxpr``, plus the equations of the jaxprs inside it (the bodies of
    ``jit``, ``scan``, ``cond``, ``while``)."""
    return sum(1 for _ in iter_eqns(jaxpr, nested=nested))


def make_jaxpr(f, *args, what=None, static_argnums=(), **kwargs):
    """``jax.make_jaxpr(f)(*args)``, with learner errors turned into feedback."""
    import jax

    label = what or f"tracing `{getattr(f, '__name__', 'f')}`"
    return call(jax.make_jaxpr(f, static_argnums=static_argnums), *args, what=label, **kwargs)


def check_primitive_present(f, args, names, *, what=None, why="", idea="control_flow", static_argnums=()):
    """Check that at least one of ``names`` appears anywhere in the jaxpr of ``f(*args)``
    (nested jaxprs of cond, scan, while, jit... included).

    The learner sees which primitives were missing and ``why``, under ``idea``.
    """
    names = {names} if isinstance(names, str) else set(names)
    label = what or f"`{getattr(f, '__name__', 'f')}`"
    found = set(primitives_in(make_jaxpr(f, *args, what=label, static_argnums=static_argnums)))
    if not names & found:
        fail(idea, f"the jaxpr of {label} has none of {sorted(names)}. {why}".strip())


def check_primitive_absent(f, args, names, *, what=None, why="", idea="control_flow", static_argnums=()):
    """Check that none of ``names`` appears anywhere in the jaxpr of ``f(*args)``
    (nested jaxprs included).

    The learner sees which of them were found and ``why``, under ``idea``.
    """
    names = {names} if isinstance(names, str) else set(names)
    label = what or f"`{getattr(f, '__name__', 'f')}`"
    found = set(primitives_in(make_jaxpr(f, *args, what=label, static_argnums=static_argnums)))
    bad = sorted(names & found)
    if bad:
        fail(idea, f"the jaxpr of {label} contains {bad}. {why}".strip())


def check_jaxpr_size_constant(f, make_args, lengths, *, what=None, why="", idea="loops",
                              static_argnums=()):
    """Check that the jaxpr of ``f(*make_args(n))`` has the same size for every ``n`` in ``lengths``.

    A Python loop over a length unrolls into the jaxpr, so its size grows
    with the length; ``lax.scan``/``fori_loop`` keep it constant. Nested
    jaxprs count too. ``static_argnums`` names arguments traced as static
    (a length passed as a Python int). The learner sees the sizes per length.
    """
    label = what or f"`{getattr(f, '__name__', 'f')}`"
    sizes = {n: jaxpr_size(make_jaxpr(f, *make_args(n), what=label, static_argnums=static_argnums))
             for n in lengths}
    if len(set(sizes.values())) > 1:
        shown = ", ".join(f"length {n}: {s} equations" for n, s in sizes.items())
        fail(idea, f"the jaxpr of {label} grows with the length ({shown}): a Python loop is "
                   f"being unrolled. {why}".strip())


def check_jaxpr_not_in_proportion(f, make_args, length, *, what=None, why="", idea="loops", static_argnums=()):
    """Check that the jaxpr of ``f(*make_args(n))`` does not grow in proportion to ``n``, at
    ``n`` = ``length``, 4 ``length`` and 16 ``length``.

    A Python loop over the elements unrolls one copy of its body per element: from the second
    length to the third it grows about 4 times as much as from the first to the second. A loop
    in the program does not grow at all, and a tree of fixed-size steps, such as
    ``lax.associative_scan``'s, by the same amount for every 4x (one level per doubling): both
    pass. The learner sees the sizes per length.
    """
    label = what or f"`{getattr(f, '__name__', 'f')}`"
    lengths = (length, 4 * length, 16 * length)
    sizes = {n: jaxpr_size(make_jaxpr(f, *make_args(n), what=label, static_argnums=static_argnums))
             for n in lengths}
    (n1, s1), (n2, s2), (n3, s3) = sizes.items()
    if s3 - s2 > 2 * max(s2 - s1, 0):
        shown = ", ".join(f"length {n}: {s} equations" for n, s in sizes.items())
        fail(idea, f"the jaxpr of {label} grows in proportion to the length ({shown}): a Python loop is "
                   f"being unrolled. {why}".strip())
