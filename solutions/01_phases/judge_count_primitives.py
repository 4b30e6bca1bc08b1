"""The judge of 01_phases' ``count_primitives`` (trusted: runs in the grader, never in the kernel).

``count_primitives(f, *args)`` takes a function, so it cannot be exported: the learner's function
is called in the kernel with functions of :mod:`autograder.agent.fixtures` (``Fixture`` markers) that
nest ``jit``, ``cond``, ``while_loop``, ``fori_loop``, ``scan`` and ``custom_jvp`` up to three
levels deep, at arguments drawn from ``k.rng``. The reference is ``jax.make_jaxpr`` of the same
fixture, traced here (the same JAX as the kernel), counted here. A wrong count is compared with
the counts of the usual mistakes (top level only, one level only, tuples of jaxprs skipped, the
holding equation not counted, a jaxpr held in several places counted once), to say which.
"""
from collections import Counter

import jax
import numpy as np

from autograder.judge import call, fail, fixtures
from autograder.judge import AsJax, Fixture, values

try:
    from jax.extend import core as _core
    _JAXPR_TYPES = (_core.ClosedJaxpr, _core.Jaxpr)
except Exception:  # noqa: BLE001 - an older JAX
    _JAXPR_TYPES = (jax.core.ClosedJaxpr, jax.core.Jaxpr)


def _f32(x):
    return AsJax(np.asarray(x, np.float32))


def _held(value, tuples=True, open_jaxprs=True):
    if isinstance(value, _JAXPR_TYPES[0]) or (open_jaxprs and isinstance(value, _JAXPR_TYPES[1])):
        return [value]
    if tuples and isinstance(value, (tuple, list)):
        return [j for v in value for j in _held(v, True, open_jaxprs)]
    return []


def _count(jaxpr, *, depth=None, tuples=True, holders=True, dedupe=False, open_jaxprs=True):
    """The counts of ``jaxpr``; the keywords give the usual mistakes: ``depth`` levels of nesting
    only, jaxprs inside tuples skipped, holding equations not counted, shared jaxprs once, open
    jaxprs (a ``Jaxpr`` without its constants, as ``jax.checkpoint`` holds its body) skipped."""
    counts, seen = Counter(), set()

    def walk(j, level):
        for eqn in j.eqns:
            inner = [s for v in eqn.params.values() for s in _held(v, tuples, open_jaxprs)]
            if holders or not inner:
                counts[eqn.primitive.name] += 1
            if depth is not None and level >= depth:
                continue
            for s in inner:
                key = id(getattr(s, "jaxpr", s))
                if dedupe and key in seen:
                    continue
                seen.add(key)
                walk(s, level + 1)

    walk(jaxpr, 0)
    return dict(counts)


_MISTAKES = (
    (dict(depth=0), "it counts the top level only: the equations of the jaxprs held in an equation's "
                    "params (a jit's body, a cond's branches, a loop's condition and body) count too."),
    (dict(depth=1), "it counts one level of nesting only: a nested jaxpr may hold jaxprs of its own, and "
                    "theirs count too, at any depth."),
    (dict(tuples=False), "it misses the jaxprs held inside a tuple or list in the params (such as the "
                         "branches of a cond): those are nested jaxprs too."),
    (dict(holders=False), "it does not count the equation that holds a nested jaxpr (the `jit`, `cond`, "
                          "`while`... equation is a primitive of its jaxpr too)."),
    # Told apart only on a JAX whose open and closed jaxprs are two classes (0.7.2; one class on 0.12).
    (dict(open_jaxprs=False), "it opens the nested jaxprs held as a `ClosedJaxpr` and skips those held as an "
                              "open `Jaxpr` (a `jax.checkpoint` holds its body so): both are nested jaxprs, and "
                              "the equations of both count."),
    (dict(dedupe=True), "it counts a nested jaxpr once although it is held in several places (a jitted "
                        "function called twice has two equations, each with the body): count it once per "
                        "place."),
)


def _counts_of(k, fixture, args, what):
    """``(got, traced jaxpr)``: the learner's counts for one fixture, and the fixture traced here."""
    got = call(k.fn("count_primitives"), Fixture(fixture), *args, what=what)
    if not isinstance(got, dict) or not all(isinstance(n, str) and isinstance(c, (int, np.integer))
                                            and not isinstance(c, bool) for n, c in got.items()):
        fail("phases", f"{what} returned {str(got)[:200]}; return a dict from primitive names (strings) "
                          "to counts (ints).")
    others = sorted({f"{type(c).__module__}.{type(c).__name__}" for c in got.values() if not isinstance(c, int)})
    if others:  # the prompt's dict[str, int], as the visible test checks: a NumPy integer is not an int
        fail("phases", f"{what} holds counts of type {', '.join(others)}: the contract is a dict from names to "
                          "Python ints, and a NumPy integer is not one.")
    return {str(n): int(c) for n, c in got.items()}, jax.make_jaxpr(getattr(fixtures, fixture))(*values(args))


def _check_all(results):
    """``results``: ``[(what, got, closed)]``. The first wrong count fails; the message names the
    usual mistake that explains the counts of every fixture, if one does (whatever their order)."""
    wrong = [(what, got, closed) for what, got, closed in results if got != _count(closed)]
    if not wrong:
        return
    what, got, closed = wrong[0]
    want = _count(closed)
    zeros = sorted(n for n, c in got.items() if c == 0)
    if zeros:
        fail("phases", f"{what} has zero entries {zeros}: a primitive that does not occur is absent.")
    for options, why in _MISTAKES:
        if all(g == _count(c, **options) for _, g, c in results):
            fail("phases", f"{what} is {got}, expected {want}: {why}")
    fail("phases", f"{what} is {got}, expected {want} (every equation of the jaxpr and of every jaxpr "
                      "nested in it, once per place that holds it).")


def test_count_primitives(k):
    rng = k.rng
    n = int(rng.integers(2, 6))
    vec = lambda size=n: _f32(rng.normal(size=size))  # noqa: E731
    sign = lambda: _f32(rng.choice([-1.0, 1.0]) * rng.uniform(0.5, 2.0))  # noqa: E731
    rows = lambda: _f32(rng.normal(size=(int(rng.integers(2, 6)), n)))  # noqa: E731
    # No nesting first, then every kind of nesting, in a fresh order; judged together.
    results = [("count_primitives(f, x) for f(x) = sin(sin(x)) + cos(x)",
                *_counts_of(k, "sin_sin_plus_cos", (vec(),), "count_primitives(f, x) for f(x) = sin(sin(x)) + cos(x)"))]
    cases = [
        ("identity", (vec(),), "f(x) = x (no primitive at all)"),
        ("nested_jit", (vec(),), "an f that calls a jitted function twice"),
        ("cp_jit_cond", (vec(), sign()), "a jitted function holding a lax.cond"),
        ("cp_scan_while_cond", (rows(),), "a lax.scan holding a while_loop holding a lax.cond"),
        ("cp_jit_fori_custom_jvp", (vec(),), "a jit holding a fori_loop holding a custom_jvp function"),
        ("cp_while_fori_traced", (vec(), AsJax(np.int32(rng.integers(1, 4)))),
         "a while_loop holding a fori_loop (traced bound) holding a jit"),
        ("cp_shared_branches", (vec(), sign()), "one jitted function called in both branches of a cond and once outside"),
        ("cp_custom_jvp_in_cond_in_scan", (rows(), sign()), "a lax.scan holding a cond holding a jit and a custom_jvp"),
        ("cp_jit_checkpoint_cond", (vec(),), "a jit holding a jax.checkpoint (an open jaxpr) holding a cond"),
        ("with_constants", (vec(3),), "an f with a captured NumPy constant"),
    ]
    for i in rng.permutation(len(cases)):
        fixture, args, desc = cases[int(i)]
        what = f"count_primitives(f, ...) for {desc}"
        results.append((what, *_counts_of(k, fixture, args, what)))
    _check_all(results)


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "count_primitives": [
        ('''
from jax.extend import core as jax_core


def count_primitives(f, *args):
    counts = {}
    for eqn in jax.make_jaxpr(f)(*args).eqns:  # the top level only
        counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
    return counts
''', "it counts the top level only", "phases"),
        ('''
from jax.extend import core as jax_core


def count_primitives(f, *args):
    counts = {}

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
            for value in eqn.params.values():
                if isinstance(value, (jax_core.ClosedJaxpr, jax_core.Jaxpr)):  # a cond's tuple of branches is missed
                    walk(value)

    walk(jax.make_jaxpr(f)(*args))
    return counts
''', "inside a tuple or list in the params", "phases"),
        ('''
from jax.extend import core as jax_core


def count_primitives(f, *args):
    counts, seen = {}, set()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
            for value in eqn.params.values():
                for inner in value if isinstance(value, (tuple, list)) else [value]:
                    if isinstance(inner, (jax_core.ClosedJaxpr, jax_core.Jaxpr)) and id(inner) not in seen:
                        seen.add(id(inner))  # a jaxpr shared by two equations is walked once
                        walk(inner)

    walk(jax.make_jaxpr(f)(*args))
    return counts
''', "once per place", "phases"),
        ('''
from collections import Counter
from jax.extend import core as jax_core


def count_primitives(f, *args):
    counts = Counter()

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            inner = [v for value in eqn.params.values()
                     for v in (value if isinstance(value, (tuple, list)) else [value])
                     if isinstance(v, (jax_core.ClosedJaxpr, jax_core.Jaxpr))]
            if inner:
                for j in inner:  # the holding equation itself is not counted
                    walk(j)
            else:
                counts[eqn.primitive.name] += 1

    walk(jax.make_jaxpr(f)(*args))
    return dict(counts)
''', "does not count the equation that holds a nested jaxpr", "phases"),
        ('''
from jax.extend import core as jax_core


def count_primitives(f, *args):
    counts = {}

    def add(jaxpr, deeper):
        for eqn in jaxpr.eqns:
            counts[eqn.primitive.name] = counts.get(eqn.primitive.name, 0) + 1
            if not deeper:
                continue
            for value in eqn.params.values():
                for inner in value if isinstance(value, (tuple, list)) else [value]:
                    if isinstance(inner, (jax_core.ClosedJaxpr, jax_core.Jaxpr)):
                        add(inner, False)  # one level of nesting only

    add(jax.make_jaxpr(f)(*args), True)
    return counts
''', "one level of nesting only", "phases"),
        ('''
import numpy as np
from jax.extend import core as jax_core


def count_primitives(f, *args):
    names = []

    def walk(jaxpr):
        for eqn in jaxpr.eqns:
            names.append(eqn.primitive.name)
            for value in eqn.params.values():
                for inner in value if isinstance(value, (tuple, list)) else [value]:
                    if isinstance(inner, (jax_core.ClosedJaxpr, jax_core.Jaxpr)):
                        walk(inner)

    walk(jax.make_jaxpr(f)(*args))
    keys, counts = np.unique(np.array(names), return_counts=True)
    return dict(zip(keys.tolist(), counts))  # the counts stay NumPy integers
''', "a NumPy integer is not one", "phases"),
    ],
}

RIGHT = {
    "count_primitives": [
        # A stack instead of recursion, a Counter (a dict) as the result, a jaxpr found by its equations.
        '''
from collections import Counter


def count_primitives(f, *args):
    counts, stack = Counter(), [jax.make_jaxpr(f)(*args).jaxpr]
    while stack:
        for eqn in stack.pop().eqns:
            counts[eqn.primitive.name] += 1
            values = list(eqn.params.values())
            while values:
                value = values.pop()
                if isinstance(value, (tuple, list)):
                    values.extend(value)
                elif hasattr(value, "eqns"):
                    stack.append(getattr(value, "jaxpr", value))
    return counts
''',
    ],
}
