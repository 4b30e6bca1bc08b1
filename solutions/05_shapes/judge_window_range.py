"""The judge of 05_shapes's ``window_range`` (trusted: runs in the grader, never in the kernel).

``jax.jit(window_range, static_argnames="width")`` is exported at two lengths for one width and
the two programs, read as parsed modules, must have about the same number of operations
(checked before either is run: a Python loop over the positions is told it grows); then its
programs at fresh lengths and widths (``width`` 1, ``n`` and both parities always included) are run here on fresh data
and compared with NumPy's ranges of ``x[i:i + width]``. Windows one entry short are told so. The compile count over new data of one shape is a kernel-side claim.
"""
import numpy as np

from autograder.judge import check_close, ExerciseFailure, fail
from autograder.judge import effect, programs
from autograder.judge import AsJax, Fixture, Ref, Spec


def _reference(x, width):
    x = np.asarray(x, np.float64)
    return np.array([x[i:i + width].max() - x[i:i + width].min() for i in range(len(x) - width + 1)])


def _program(k, n, width):
    return programs.trace(k, "window_range", Spec((n,), "float32"), width, static_argnums=(1,), loops=True,
                          label=f"jax.jit(window_range, static_argnames='width') at n={n}, width={width}")


def _check(got, x, width, what):
    want = _reference(x, width)
    got = np.asarray(got)
    if got.shape != want.shape:
        fail("shapes", f"{what} has shape {got.shape}, expected one range per window start, {want.shape}.")
    try:
        check_close(got, want, what=what, idea="shapes", dtype=np.float32)
    except ExerciseFailure as exc:
        if width >= 2 and np.allclose(got, _reference(x, width - 1)[:len(want)], rtol=1e-5, atol=1e-6):
            fail("shapes", f"{exc.detail} Its windows are one entry short: window i is x[i:i + width], "
                              "`width` entries.")
        raise


def test_window_range(k):
    rng = k.rng
    width = int(rng.integers(3, 7))
    sizes = {n: _program(k, n, width).total for n in (16, 48)}
    if sizes[48] > 1.1 * sizes[16]:
        fail("loops", f"the program of window_range grows with the length of x ({sizes[16]} operations at "
                         f"n=16, {sizes[48]} at n=48): a Python loop over the positions is unrolled into it, one "
                         "slice per position.")
    # Both parities of the width, always (a window centred by width // 2 is right only for odd
    # widths), width 1 and width n.
    cases = [(16, width), (48, width), (int(rng.integers(9, 30)), 1), (12, 12), (int(rng.integers(20, 40)), width + 1)]
    for trial, (n, w) in enumerate(cases):
        x = rng.normal(size=n).astype(np.float32)
        got = _program(k, n, w)(x)
        _check(got, x, w, f"jax.jit(window_range)(x, {w}) on random input #{trial + 1} of length {n}")
    # ... and at a length beyond every size written in those programs (a length padded to, a
    # bound): a loop unrolled over a padded x is flat at every length below its padding.
    written = max(effect.largest_size(_program(k, n, width).exported) for n in (16, 48))
    far = 2 * max(written, 48) + int(rng.integers(1, 9))
    beyond = f"at n={far}, beyond every size written in its programs at n=16 and n=48 (up to {written})"
    try:
        program = _program(k, far, width)
        x = rng.normal(size=far).astype(np.float32)
        _check(program(x), x, width, f"jax.jit(window_range)(x, {width}) on random input of length {far}")
    except ExerciseFailure as exc:
        fail("loops", f"jax.jit(window_range) fails {beyond}: it is written for the lengths it was tried at (a "
                         f"loop unrolled over x padded to a fixed length?): {exc.detail}")
    if program.total > 1.1 * sizes[16]:
        fail("loops", f"the program of window_range grows with the length of x ({sizes[16]} operations at n=16, "
                         f"{program.total} {beyond}): a loop is unrolled over the positions of a padded x.")
    calls = [((Ref("window_range"), AsJax(rng.normal(size=16).astype(np.float32))), {"width": width})
             for _ in range(4)]
    k.claim("check_compiles", Fixture("jit_call"), calls, 1,  # keyword arguments static: width
            what=f"jax.jit(window_range, static_argnames='width') at width={width} on four inputs",
            why="x is data: new values of one shape must reuse the compiled program.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "window_range": [
        ('''
def window_range(x, width):
    # right values, but a Python loop over the positions: one slice per position in the program
    return jnp.stack([jnp.max(x[i:i + width]) - jnp.min(x[i:i + width]) for i in range(x.shape[0] - width + 1)])
''', "the program of window_range grows with the length of x", "loops"),
        ('''
def window_range(x, width):
    def one(_, start):
        window = jax.lax.dynamic_slice(x, (start,), (width - 1,))  # one entry short
        return None, jnp.max(window) - jnp.min(window)

    return jax.lax.scan(one, None, jnp.arange(x.shape[0] - width + 1))[1]
''', "Its windows are one entry short", "shapes"),
        ('''
def window_range(x, width):
    def one(_, start):
        window = jax.lax.dynamic_slice(x, (start,), (width,))
        return None, jnp.max(window) - jnp.mean(window)  # max - mean: not the range

    return jax.lax.scan(one, None, jnp.arange(x.shape[0] - width + 1))[1]
''', "on random input #1 of length 16", "shapes"),
        ('''
def window_range(x, width):
    # a Python loop over the positions of x padded to 64: the same program at every length tried
    padded = jnp.pad(x, (0, 64 - x.shape[0]))
    ranges = [jnp.max(padded[i:i + width]) - jnp.min(padded[i:i + width]) for i in range(64 - width + 1)]
    return jnp.stack(ranges)[:x.shape[0] - width + 1]
''', "beyond every size written in its programs", "loops"),
    ],
}

RIGHT = {
    "window_range": [
        '''
def window_range(x, width):
    # doubling spans (a sparse table): about log2(width) steps, none per position; two spans cover a window
    m = x.shape[0] - width + 1
    hi, lo, span = x, x, 1
    while span * 2 <= width:
        hi, lo = jnp.maximum(hi[:-span], hi[span:]), jnp.minimum(lo[:-span], lo[span:])
        span *= 2
    rest = width - span
    return jnp.maximum(hi[:m], hi[rest:rest + m]) - jnp.minimum(lo[:m], lo[rest:rest + m])
''',
    ],
}
