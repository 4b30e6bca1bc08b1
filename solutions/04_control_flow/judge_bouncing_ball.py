"""The judge of 04_control_flow's ``bouncing_ball`` (trusted: runs in the grader, never in the kernel).

``jax.jit(bouncing_ball)`` with ``steps`` static is exported at two values of ``steps`` (``x0``,
``v0`` and ``dt`` float32 traced arguments); each exported program is run here on inputs drawn
from ``k.rng`` and compared with a float64 NumPy reference (atol 1e-3), on inputs for which no
bounce is decided within 1e-3 of the floor; the two programs, read as parsed modules
(:mod:`autograder.judge.mlir`), must have about the same number of operations (``effect.grows``: a few of slack), checked before
either is run (an unrolled answer is told that its program grows, never timed out). The compile count over
new values is a kernel-side claim: it can fail the test, never pass it.
"""
import jax
import numpy as np

from autograder.judge import ExerciseFailure, fail
from autograder.judge import effect, programs
from autograder.judge import AsJax, Fixture, Ref, Spec

G, DAMPING, MARGIN, ATOL = 9.81, 0.8, 1e-3, 1e-3


def _reference(x0, v0, dt, steps):
    """(heights, the smallest |x| at which a bounce was decided, the number of bounces) in float64."""
    x, v = float(x0), float(v0)
    heights, closest, bounces = np.empty(steps), np.inf, 0
    for i in range(steps):
        v = v - G * dt
        x = x + v * dt
        closest = min(closest, abs(x))
        if x < 0:
            x, v = -x, -DAMPING * v
            bounces += 1
        heights[i] = x
    return heights, closest, bounces


def _draw(rng, steps):
    """float32 inputs (2 to 3 simulated seconds: one bounce or more) whose bounces are all decided
    more than MARGIN from the floor."""
    while True:
        x0 = float(np.float32(rng.uniform(0.3, 3.0)))
        v0 = float(np.float32(rng.uniform(-3.0, 3.0)))
        dt = float(np.float32(rng.uniform(2.0, 3.0) / steps))
        heights, closest, bounces = _reference(x0, v0, dt, steps)
        if closest > MARGIN and bounces >= 1:
            return (x0, v0, dt), heights


def _translate(exc, label):
    if isinstance(exc, jax.errors.TracerBoolConversionError):
        return None  # a Python `if` on a traced value: the shared classifier says so
    if isinstance(exc, (jax.errors.ConcretizationTypeError, jax.errors.TracerIntegerConversionError)):
        return ExerciseFailure("control_flow", f"{label} needed the Python value of a traced height or "
                                                  "velocity: under jit they are data, without a value while "
                                                  "the program is traced.")
    return None


def _program(k, steps):
    return programs.trace(k, "bouncing_ball", Spec((), "float32"), Spec((), "float32"), Spec((), "float32"), steps,
                          static_argnums=(3,), translate=_translate, loops=True,
                          label=f"jax.export(jax.jit(bouncing_ball, static_argnames='steps')) at steps={steps}")


def _check_heights(got, want, args, steps, what):
    got = np.asarray(got)
    if got.shape != (steps,):
        fail("loops", f"{what} has shape {got.shape}; expected one height per step, ({steps},).")
    if got.dtype != np.float32:
        fail("numerics", f"{what} has dtype {got.dtype}; the heights are float32.")
    bad = np.flatnonzero(~(np.abs(got.astype(np.float64) - want) <= ATOL))
    if bad.size:
        i = int(bad[0])
        below = " It went below the floor there." if got[i] < 0 else ""
        fail("branches", f"{what}: the height after step {i + 1} is {float(got[i]):.4f}, expected "
                            f"{want[i]:.4f} (x0={args[0]:.4g}, v0={args[1]:.4g}, dt={args[2]:.4g}; each step: "
                            f"gravity on v, then v on x, then the bounce where x < 0).{below}")


def test_bouncing_ball(k):
    rng = k.rng
    short = int(rng.integers(40, 80))
    lengths = (short, short + int(rng.integers(40, 120)))
    # Both programs read first: one that grows with `steps` is told so before any is run (an
    # unrolled program of a few hundred steps would be slow to compile and run).
    programs_at = {steps: _program(k, steps) for steps in lengths}
    sizes = {steps: program.total for steps, program in programs_at.items()}
    if effect.grows(sizes[lengths[0]], sizes[lengths[1]]):
        shown = ", ".join(f"{s} operations at steps={n}" for n, s in sizes.items())
        fail("loops", f"the program of bouncing_ball grows with `steps` ({shown}): a Python loop over "
                         "the steps is being unrolled into it.")
    for steps, program in programs_at.items():
        for trial in range(3):
            args, want = _draw(rng, steps)
            got = program(*(np.float32(a) for a in args))
            _check_heights(got, want, args, steps,
                           f"the program of jax.jit(bouncing_ball) at steps={steps} on random input #{trial + 1}")
    # ... and at a number of steps beyond every size written in those programs (a count padded
    # to, a bound): a loop unrolled over a fixed number of steps is flat below it.
    far, written = effect.beyond(programs_at.values(), lengths, rng)
    beyond = (f"at steps={far}, beyond every size written in its programs at steps={lengths[0]} and "
              f"{lengths[1]} (up to {written})")
    try:
        program = _program(k, far)
        args, want = _draw(rng, far)
        _check_heights(program(*(np.float32(a) for a in args)), want, args, far,
                       f"the program of jax.jit(bouncing_ball) at steps={far}")
    except ExerciseFailure as exc:
        fail("loops", f"jax.jit(bouncing_ball) fails {beyond}: it is written for the step counts it was tried at "
                         f"(a loop unrolled over a fixed number of steps?): {exc.detail}")
    if effect.grows(sizes[lengths[0]], program.total):
        fail("loops", f"the program of bouncing_ball grows with `steps` ({sizes[lengths[0]]} operations at "
                         f"steps={lengths[0]}, {program.total} {beyond}): a Python loop over the steps is unrolled.")
    # Kernel-side claim: one compile for new x0, v0 and dt at one `steps`.
    steps = lengths[0]
    calls = []
    for _ in range(4):
        args, _ = _draw(rng, steps)
        calls.append(((Ref("bouncing_ball"), *(AsJax(np.float32(a)) for a in args)), {"steps": steps}))
    k.claim("check_compiles", Fixture("jit_call"), calls, 1,  # keyword arguments static: steps
            what=f"jax.jit(bouncing_ball, static_argnames='steps') at steps={steps} on four inputs",
            why="x0, v0 and dt are data: new values must reuse the compiled program.")


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "bouncing_ball": [
        ('''
def bouncing_ball(x0, v0, dt, steps):
    def one_step(carry, _):
        x, v = carry
        v = v - 9.81 * dt
        x = x + v * dt
        if x < 0:  # a loop that runs on the device, but a bounce still decided in Python
            x, v = -x, -0.8 * v
        return (x, v), x
    return lax.scan(one_step, (jnp.float32(x0), jnp.float32(v0)), None, length=steps)[1]
''', "traced value in a Python", "branches"),
        ('''
def bouncing_ball(x0, v0, dt, steps):
    x, v = jnp.float32(x0), jnp.float32(v0)
    heights = []
    for _ in range(steps):  # the bounce is traceable now, but the loop still unrolls
        v = v - 9.81 * dt
        x = x + v * dt
        x, v = jnp.where(x < 0, -x, x), jnp.where(x < 0, -0.8 * v, v)
        heights.append(x)
    return jnp.stack(heights)
''', "the program of bouncing_ball grows with `steps`", "loops"),
        ('''
def bouncing_ball(x0, v0, dt, steps):
    def one_step(carry, _):
        x, v = carry
        x = x + v * dt  # moves with the old velocity: the steps in the wrong order
        v = v - 9.81 * dt
        through = x < 0
        return (jnp.where(through, -x, x), jnp.where(through, -0.8 * v, v)), jnp.where(through, -x, x)
    return lax.scan(one_step, (jnp.float32(x0), jnp.float32(v0)), None, length=steps)[1]
''', "the height after step 1 is", "branches"),
        ('''
def bouncing_ball(x0, v0, dt, steps):
    def one_step(carry, _):
        x, v = carry
        v = v - 9.81 * dt
        x = x + v * dt
        through = x < 0
        x = jnp.where(through, -x, x)
        v = lax.cond(jnp.any(through), lambda u: -u, lambda u: u, v)  # bounces without losing speed
        return (x, v), x
    return lax.scan(one_step, (jnp.float32(x0), jnp.float32(v0)), None, length=steps)[1]
''', "then the bounce where x < 0", "branches"),
        ('''
def bouncing_ball(x0, v0, dt, steps):
    # 256 steps whatever `steps` is, cut to `steps`: right at every count it was tried at
    def step(carry, _):
        x, v = carry
        v = v - 9.81 * dt
        x = x + v * dt
        v = jnp.where(x < 0, -0.8 * v, v)
        x = jnp.abs(x)
        return (x, v), x
    return jax.lax.scan(step, (x0, v0), None, length=256)[1][:steps]
''', "beyond every size written in its programs", "loops"),
    ],
}

RIGHT = {
    "bouncing_ball": [
        '''
def bouncing_ball(x0, v0, dt, steps):
    def one_step(i, state):  # a fori_loop writing each height into a buffer
        x, v, heights = state
        v = v - 9.81 * dt
        x = x + v * dt
        x, v = jnp.where(x < 0, -x, x), jnp.where(x < 0, -0.8 * v, v)
        return x, v, heights.at[i].set(x)

    start = (jnp.asarray(x0, jnp.float32), jnp.asarray(v0, jnp.float32), jnp.zeros(steps, jnp.float32))
    return jax.lax.fori_loop(0, steps, one_step, start)[2]
''',
    ],
}
