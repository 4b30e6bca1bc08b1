"""The judge of 06_async_dispatch's ``logged_losses`` (trusted: runs in the grader, never in the kernel).

The learner's function is handed a simulated jitted step that the judge answers itself (fixture
``judged_logged_on``, :class:`_Steps` here): each call of ``step`` is a prompt to the judge
(Jupyter's stdin, :meth:`autograder.judge.Channel.request`'s ``on_input``) carrying the params
and batch it got, answered with the new params (a number drawn here); each loss is worth a value
drawn here and held here, sent to the kernel only as the answer to the first wait for it (a
``float``, ``.item()``, a print or format, ``jnp.stack``...). So the judge itself counts the
calls, sees the params threaded from call to call and when each loss was first waited for, and
the losses that earn the point are values the kernel can know only by waiting for them: every
batch stepped once, in order, each call given the params the last one returned; no loss waited
for before every step was dispatched; the losses of steps ``0, every, 2 * every, ...`` returned
as Python floats, and the last params. Then the notebook's own ``sgd_step`` on real arrays,
against a NumPy reference of the same SGD (kernel values: it can only fail the test).
"""
import numpy as np

from autograder.judge import call, check_close, fail
from autograder.judge import AsJax, Ref


class _Steps:
    """The judge's side of the simulated step (the kernel's ``judged_logged_on``): answers each
    ``step <params> <batch>`` prompt with the new params and each first ``loss <i>`` with step
    i's loss, and records what it saw: the calls' params and batches, and how many calls had
    been made when each loss was first waited for."""

    def __init__(self, rng, n):
        self.tokens = [int(t) for t in 1000 + rng.choice(999_000, size=n + 1, replace=False)]
        # Distinct, and exact in float32 and in decimal: a loss converted through float32 stays itself.
        self.values = [float(v) / 16 for v in 16 + rng.choice(4096, size=n, replace=False)]
        self.calls, self.waited = [], {}

    def __call__(self, prompt):
        kind, _, rest = prompt.partition(" ")
        if kind == "step":
            params, _, batch = rest.partition(" ")
            self.calls.append((params, batch))
            return str(self.tokens[len(self.calls)]) if len(self.calls) < len(self.tokens) else ""
        if kind == "loss" and rest.isdigit() and int(rest) < len(self.calls):
            i = int(rest)
            self.waited.setdefault(i, len(self.calls))
            return repr(self.values[i])
        return ""


def _simulated(k, n, every):
    what = f"logged_losses(step, params, {n} batches, every={every})"
    steps = _Steps(k.rng, n)
    batches = [int(b) for b in 100 + k.rng.choice(9900, size=n, replace=False)]
    report = k.fixture("judged_logged_on")(Ref("logged_losses"), steps.tokens[0], batches, every, what=what,
                                           on_input=steps)
    got = [b for _, b in steps.calls]
    if got != [str(b) for b in batches]:
        fail("async", f"{what} called step on the batches {got!r:.120}; call it once on every batch, in order "
                         f"({batches!r:.120}).")
    for i, (params, _) in enumerate(steps.calls):
        if params != str(steps.tokens[i]):
            fail("async", f"{what} gave step {i} the params {params!r:.40}, not the params "
                             f"{'it was given' if i == 0 else 'the previous step returned'}: thread the params "
                             "from each step into the next.")
    early = sorted((i, w) for i, w in steps.waited.items() if w < n)
    if early:
        i, w = early[0]
        fail("async", f"{what} waited for the loss of step {i} after {w} of the {n} steps had been "
                         "dispatched: reading a result inside the loop (converting, printing or formatting it) stalls "
                         "the loop there until the device is done, before every step is dispatched.")
    losses = report.get("losses") if isinstance(report, dict) else None
    if not isinstance(losses, list) or any(type(v) is not float for v in losses):
        fail("async", f"{what} returned the losses {losses!r:.120}; return a Python list of floats.")
    want = list(range(0, n, every))
    step_of = {v: i for i, v in enumerate(steps.values)}
    if losses != [steps.values[i] for i in want]:
        shown = [step_of.get(v, "?") for v in losses]
        fail("async", f"{what} returned the losses of the steps {shown!r:.120}; expected those of steps "
                         f"{want!r:.120} (0, every, 2 * every, ...).")
    if report.get("params") != steps.tokens[n]:
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
    # ... and one long run: a print or a float every 10, 100 or 1000 steps (after the first) waits
    # inside the loop too, which a run shorter than its period never shows (a period beyond the
    # run's length still goes unseen: each step is a prompt to the judge, about 4 ms in a kernel).
    for n, every in ((int(rng.integers(7, 12)), int(rng.integers(2, 4))), (int(rng.integers(3, 6)), 1),
                     (int(rng.integers(1001, 1101)), int(rng.integers(20, 41)))):
        _simulated(k, n, every)
    # The notebook's own sgd_step on real arrays: values computed in the kernel (they can only fail).
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
        ('''
def logged_losses(step, params, batches, every):
    logged = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        if i % every == 0:
            logged.append(loss)
        if (i + 1) % 100 == 0:  # progress every 100 steps: a wait there, in a long run
            print(f"step {i + 1}: loss {loss:.4f}")
    return params, [float(v) for v in logged]
''', "waited for the loss of step 99 after 100", "async"),
        ('''
def logged_losses(step, params, batches, every):
    logged = []
    for i, batch in enumerate(batches):
        params, loss = step(params, batch)
        if i % every == 0:
            logged.append(loss)
        if i % 1000 == 999:  # progress every 1000 steps: a wait there, in a long run
            print(f"step {i + 1}: loss {loss:.4f}")
    return params, [float(v) for v in logged]
''', "waited for the loss of step 999 after 1000", "async"),
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
