"""The judge of 06_async_dispatch's ``logged_losses`` (trusted: runs in the grader, never in the kernel).

The learner's function is handed a simulated jitted step (fixture ``logged_on``): each call
returns at once, its loss a :class:`autograder.timing.SimulatedResult` worth the call's index,
and the kernel records which batch each call got and, for each loss, how many calls had been
made when it was first waited for. Judged here from that data: every batch stepped once, in
order; the losses of steps ``0, every, 2 * every, ...`` returned as Python floats; no loss waited
for before every step was dispatched. Then the notebook's own ``sgd_step`` on real arrays,
against a NumPy reference of the same SGD.
"""
import numpy as np

from autograder.judge import call, check_close, fail
from autograder.judge import AsJax, Ref


def _simulated(k, n, every):
    what = f"logged_losses(step, params, {n} batches, every={every})"
    report = k.fixture("logged_on")(Ref("logged_losses"), n, every, what=what)
    calls, waited, losses = report.get("calls"), report.get("waited"), report.get("losses")
    if calls != list(range(100, 100 + n)):
        fail("async", f"{what} called step on the batches {calls!r:.120}; call it once on every batch, in order.")
    early = [i for i, w in enumerate(waited) if w is not None and w < n]
    if early:
        i = early[0]
        fail("async", f"{what} waited for the loss of step {i} after {waited[i]} of the {n} steps had been "
                         "dispatched: reading a result inside the loop (converting, printing or formatting it) stalls "
                         "the loop there until the device is done, before every step is dispatched.")
    want = [float(i) for i in range(0, n, every)]
    if not isinstance(losses, list) or any(type(v) is not float for v in losses):
        fail("async", f"{what} returned the losses {losses!r:.120}; return a Python list of floats.")
    if losses != want:
        fail("async", f"{what} returned the losses of the steps {[int(v) for v in losses]!r:.120}; expected "
                         f"those of steps {[int(v) for v in want]!r:.120} (0, every, 2 * every, ...).")
    if report.get("params") != n:
        fail("async", f"{what} did not return the params of the last step.")


def _reference(params, batches, every):
    w, b = np.asarray(params["w"], np.float64), float(params["b"])
    losses = []
    for i, (x, y) in enumerate(batches):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        r = x @ w + b - y
        if i % every == 0:
            losses.append(np.mean(r ** 2))
        w, b = w - 0.1 * 2 * x.T @ r / len(y), b - 0.1 * 2 * np.mean(r)
    return np.array(losses)


def test_logged_losses(k):
    rng = k.rng
    for n, every in ((int(rng.integers(7, 12)), int(rng.integers(2, 4))), (int(rng.integers(3, 6)), 1)):
        _simulated(k, n, every)
    # The notebook's own sgd_step on real arrays: values.
    d, n, every = 3, int(rng.integers(5, 9)), int(rng.integers(2, 4))
    params = {"w": (rng.normal(size=d) * 0.1).astype(np.float32), "b": np.float32(0.0)}
    batches = [(rng.normal(size=(8, d)).astype(np.float32), rng.normal(size=8).astype(np.float32)) for _ in range(n)]
    what = f"logged_losses(sgd_step, params, {n} batches, every={every})"
    out = call(k.fn("logged_losses"), Ref("sgd_step"), {"w": AsJax(params["w"]), "b": AsJax(params["b"])},
                  [{"x": AsJax(x), "y": AsJax(y)} for x, y in batches], every, what=what)
    losses = out[1] if isinstance(out, (list, tuple)) and len(out) == 2 else None
    if not isinstance(losses, (list, tuple)):
        fail("async", f"{what} did not return a pair (params, losses).")
    check_close(np.asarray(losses, np.float64), _reference(params, batches, every),
                   what=f"{what}, the losses of steps 0, every, 2 * every, ...", idea="async", rtol=1e-4, atol=1e-5)


# Known answers: data, read (never run) by `make release` and the course's tests, and never by
# the judge. WRONG[exercise] = [(an answer cell's source, a phrase of the feedback specific to the
# mistake, the idea whose section the feedback must point to), ...]: each must fail so. RIGHT[exercise]
# = [an answer cell's source, ...]: other right answers the prompt allows, each earning full marks.

WRONG = {
    "logged_losses": [
        ('''
def logged_losses(step, params, batches, every):
    losses = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        if i % every == 0:
            losses.append(loss.item())  # waits for this step, inside the loop
    return params, losses
''', "before every step is dispatched", "async"),
        ('''
def logged_losses(step, params, batches, every):
    logged = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        logged.append(loss)  # every step's loss kept, not every `every`-th
    return params, [float(v) for v in logged]
''', "(0, every, 2 * every, ...)", "async"),
        ('''
def logged_losses(step, params, batches, every):
    logged = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        if i % every == 0:
            logged.append(loss)
    return params, logged  # device results, never turned into floats
''', "return a Python list of floats", "async"),
        ('''
def logged_losses(step, params, batches, every):
    logged = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        if i % every == 0:
            print(f"step {i}: loss {loss}")  # "just logging": printing a result reads its value
            logged.append(loss)
    return params, [float(v) for v in logged]
''', "before every step is dispatched", "async"),
        ('''
def logged_losses(step, params, batches, every):
    logged, lines = [], []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        if i % every == 0:
            lines.append(f"{loss:.4f}")  # a format is a read too: it waits for this step
            logged.append(loss)
    return params, [float(v) for v in logged]
''', "before every step is dispatched", "async"),
    ],
}


RIGHT = {
    "logged_losses": [
        '''
def logged_losses(step, params, batches, every):
    logged = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        if i % every == 0:
            loss.copy_to_host_async()  # starts the copy, waits for nothing
            logged.append(loss)
    return params, [float(v) for v in logged]
''',
        '''
def logged_losses(step, params, batches, every):
    logged = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        if i % every == 0:
            logged.append(loss)
    return params, jnp.stack(logged).tolist()  # one wait, after the loop
''',
    ],
}
