"""Known-wrong answers for 04_control_flow: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase of the feedback specific to the mistake,
                    the idea whose course section the feedback must point to), ...]
"""

WRONG = {
    "clip_by_norm": [
        ('''
def clip_by_norm(x, max_norm):
    norm = jnp.sqrt(jnp.sum(x ** 2))
    return x * (max_norm / norm) if norm > max_norm else x  # still a Python decision
''', "used a traced value in a Python `if`/`while`", "control_flow"),
        ('''
def clip_by_norm(x, max_norm):
    norm = jnp.linalg.norm(x)
    return x * (max_norm / norm)  # also scales small vectors up
''', "It also scales vectors whose norm is already within max_norm", "branches"),
        ('''
def clip_by_norm(x, max_norm):
    return jnp.clip(x, -max_norm, max_norm)  # clips each entry, not the norm
''', "It clips each entry; clip the vector's norm", "branches"),
        ('''
def clip_by_norm(x, max_norm):
    norm = jnp.linalg.norm(x)
    return lax.cond(norm > max_norm, lambda: x / norm, lambda: x)  # forgets max_norm
''', "It scales x to norm 1; scale it to norm max_norm", "branches"),
    ],
    "collatz_steps": [
        ('''
def collatz_steps(n):
    steps = 0
    while n > 1:  # the Python loop is still deciding on a traced value
        n = jnp.where(n % 2 == 0, n // 2, 3 * n + 1)
        steps += 1
    return steps
''', "jax.jit(collatz_steps)(1) used a traced value in a Python `if`/`while`", "control_flow"),
        ('''
def collatz_steps(n):
    def body(i, state):
        value, steps = state
        done = value == 1
        value = jnp.where(done, value, jnp.where(value % 2 == 0, value // 2, 3 * value + 1))
        return value, steps + jnp.where(done, 0, 1)
    return lax.fori_loop(0, 100, body, (n, 0))[1]  # a fixed trip count: too few for some n
''', "jax.jit(collatz_steps)(27) (steps to reach 1) is wrong", "loops"),
        ('''
def collatz_steps(n):
    n, steps = int(n), 0  # needs the concrete value
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps
''', "needed the Python value of the traced `n`", "control_flow"),
        ('''
def collatz_steps(n):
    def step(state):
        value, steps = state
        return jnp.where(value % 2 == 0, value // 2, 3 * value + 1), steps + 1
    return lax.while_loop(lambda s: s[0] != 1, step, (n, 1))[1]  # counts from 1
''', "jax.jit(collatz_steps)(1) (steps to reach 1) is wrong", "loops"),
        ('''
def collatz_steps(n):
    n = jnp.asarray(n)

    def body(i, state):
        value, steps = state
        done = value == 1
        value = jnp.where(done, value, jnp.where(value % 2 == 0, value // 2, 3 * value + 1))
        return value, steps + jnp.where(done, 0, 1)

    # a fixed trip count with a done flag: right for every sequence shorter than 300 steps
    return lax.fori_loop(0, 300, body, (n, jnp.zeros_like(n)))[1]
''', "a loop with a fixed trip count falls short", "loops"),
    ],
    "ema": [
        ('''
def ema(xs, alpha):
    ys = jnp.zeros_like(xs).at[0].set(xs[0])
    for t in range(1, xs.shape[0]):  # .at[] is fine, but the Python loop still unrolls
        ys = ys.at[t].set(alpha * xs[t] + (1 - alpha) * ys[t - 1])
    return ys
''', "the program of ema grows with the length of xs", "loops"),
        ('''
def ema(xs, alpha):
    def step(prev, x):
        y = alpha * x + (1 - alpha) * prev
        return y, y
    return lax.scan(step, jnp.zeros_like(xs[0]), xs)[1]  # y[0] becomes alpha * xs[0]
''', "which must start the average at xs[0]", "loops"),
        ('''
def ema(xs, alpha):
    def step(prev, x):
        y = (1 - alpha) * x + alpha * prev  # alpha on the wrong term
        return y, y
    _, rest = lax.scan(step, xs[0], xs[1:])
    return jnp.concatenate([xs[:1], rest])
''', "y[t] = alpha * xs[t] + (1 - alpha) * y[t-1]) is wrong", "loops"),
    ],
    "piecewise": [
        ('''
def piecewise(x, k):
    return BRANCHES[k](x)
''', "used the traced `k` as a Python index", "branches"),
        ('''
def piecewise(x, k):
    return lax.cond(k == 0, BRANCHES[0], BRANCHES[1], x)  # the third branch is never taken
''', "which must apply BRANCHES[2], is wrong", "branches"),
        ('''
def piecewise(x, k):
    return lax.switch(k - 1, BRANCHES, x)  # off by one (lax.switch clamps the index)
''', "jax.jit(piecewise)(x, 1), which must apply BRANCHES[1], is wrong", "branches"),
    ],
    "bouncing_ball": [
        ("""
def bouncing_ball(x0, v0, dt, steps):
    def one_step(carry, _):
        x, v = carry
        v = v - 9.81 * dt
        x = x + v * dt
        if x < 0:  # a loop that runs on the device, but a bounce still decided in Python
            x, v = -x, -0.8 * v
        return (x, v), x
    return lax.scan(one_step, (jnp.float32(x0), jnp.float32(v0)), None, length=steps)[1]
""", "traced value in a Python", "branches"),
        ("""
def bouncing_ball(x0, v0, dt, steps):
    x, v = jnp.float32(x0), jnp.float32(v0)
    heights = []
    for _ in range(steps):  # the bounce is traceable now, but the loop still unrolls
        v = v - 9.81 * dt
        x = x + v * dt
        x, v = jnp.where(x < 0, -x, x), jnp.where(x < 0, -0.8 * v, v)
        heights.append(x)
    return jnp.stack(heights)
""", "the program of bouncing_ball grows with `steps`", "loops"),
        ("""
def bouncing_ball(x0, v0, dt, steps):
    def one_step(carry, _):
        x, v = carry
        x = x + v * dt  # moves with the old velocity: the steps in the wrong order
        v = v - 9.81 * dt
        through = x < 0
        return (jnp.where(through, -x, x), jnp.where(through, -0.8 * v, v)), jnp.where(through, -x, x)
    return lax.scan(one_step, (jnp.float32(x0), jnp.float32(v0)), None, length=steps)[1]
""", "the height after step 1 is", "branches"),
        ("""
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
""", "then the bounce where x < 0", "branches"),
    ],
}
