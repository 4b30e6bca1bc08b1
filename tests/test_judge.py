"""The judge: its data codec (caps and malformed input), its calls into a real kernel, and a
corpus of scoring attacks on 03_purity (ported to a judge) that must earn nothing."""
from __future__ import annotations

import base64
import json
import os
import shutil
import time

import nbformat
import numpy as np
import pytest

from autograder import judge, wire
from autograder.feedback import ExerciseFailure
from attacks import ATTACKS, READ_SOLUTIONS  # the hostile corpus, shared with the old-grader control
from conftest import (ROOT, course_in_0700, fill_answers, grade_attack_table, released_notebook, run_grader,
                      solution_notebook, start_ipc_kernel)

A = "03_purity"


# --------------------------------------------------------------------------- the codec

SMALL = wire.Limits(max_bytes=4096, max_elements=64, max_total_elements=100, max_depth=8,
                    max_nodes=50, max_str=100)


def _nd(dtype="float32", shape=(2,), data=None):
    raw = np.zeros(shape, dtype).tobytes() if data is None else data
    return {"$": "nd", "dtype": dtype, "shape": list(shape), "data": base64.b64encode(raw).decode()}


@pytest.mark.parametrize("value", [
    None, True, 0, -3, 2**70, 1.5, float("inf"), "text", [1, [2]], (1, (2.5, "a")),
    {"a": {"b": [None]}}, np.float32(1.25), np.int8(-3), np.bool_(True), np.complex64(1 - 2j),
    np.arange(12, dtype=np.int16).reshape(3, 4), np.ones((2, 0, 3), np.uint64),
    np.array([1 + 1j], np.complex128), np.arange(6, dtype=np.float64).reshape(2, 3).T,
])
def test_values_round_trip_with_their_types(value):
    back = wire.decode(wire.encode(value))
    assert type(back) is type(value)
    if isinstance(value, (np.ndarray, np.generic)):
        assert back.dtype == value.dtype and np.shape(back) == np.shape(value)
        assert np.array_equal(back, value)
    else:
        assert back == value


def test_nan_bfloat16_and_jax_arrays_round_trip():
    import jax
    import jax.numpy as jnp
    import ml_dtypes

    assert np.isnan(wire.decode(wire.encode(float("nan"))))
    b = np.array([1.5, -2], ml_dtypes.bfloat16)
    back = wire.decode(wire.encode(b))
    assert back.dtype == b.dtype and np.array_equal(back, b)
    weak = wire.decode(wire.encode(jnp.asarray(2.0)))
    strong = wire.decode(wire.encode(jnp.float32(2.0) + 1))
    assert isinstance(weak, wire.KernelArray) and weak.weak_type is True and strong.weak_type is False
    assert weak.shape == () and weak.dtype == np.float32
    keys = wire.decode(wire.encode(jax.random.split(jax.random.key(3), 4)))
    assert isinstance(keys, wire.KernelKeys) and keys.shape == (4,)
    assert np.array_equal(keys.data, np.asarray(jax.random.key_data(jax.random.split(jax.random.key(3), 4))))


def test_what_the_channel_does_not_carry_comes_back_opaque():
    assert wire.decode(wire.encode(print)) == wire.Opaque("builtin_function_or_method")
    assert isinstance(wire.decode(wire.encode(np.array([object()]))), wire.Opaque)
    assert isinstance(wire.decode(wire.encode(np.array(["a"]))), wire.Opaque)
    assert isinstance(wire.decode(wire.encode({1: 2})), wire.Opaque)

    class Sneaky(list):
        def __iter__(self):
            return iter([42])
    assert wire.decode(wire.encode(Sneaky([1, 2]))) == [1, 2]  # read through list's own methods


def test_a_cycle_is_refused_when_encoding():
    a = []
    a.append(a)
    with pytest.raises(wire.WireError, match="deeper"):
        wire.encode(a)


BAD = {
    "not text": b"[]",
    "too big": "[" + "0," * 3000 + "0]",
    "too deep (within JSON's own limit)": "[" * 20 + "]" * 20,
    "too deep for JSON itself": "[" * 100_000 + "]" * 100_000,
    "too many nodes": json.dumps([0] * 60),
    "not JSON": "{'a': 1}",
    "NaN literal": "NaN",
    "untagged object": json.dumps({"a": 1}),
    "unknown tag": json.dumps({"$": "pickle", "data": "gASVAAAAAAAAAAA="}),
    "object dtype": json.dumps(_nd("object")),
    "structured dtype": json.dumps({**_nd(), "dtype": "[('a', '<i4')]"}),
    "bad base64": json.dumps({**_nd(shape=(3,)), "data": "!!!!!!!!!!!!!!!!"}),
    "bytes of the wrong length": json.dumps(_nd(shape=(4,), data=b"\0" * 8)),
    "negative shape": json.dumps({**_nd(), "shape": [-2]}),
    "float shape": json.dumps({**_nd(), "shape": [2.0]}),
    "too many elements, checked before the data": json.dumps({**_nd(), "shape": [10**6, 10**6]}),
    "over the total element count": json.dumps([_nd(shape=(60,)), _nd(shape=(60,))]),
    "non-str dict key": json.dumps({"$": "dict", "items": [[1, 2]]}),
    "dict entry not a pair": json.dumps({"$": "dict", "items": [["a"]]}),
    "a marker in a reply": json.dumps({"$": "ref", "name": "x"}),
    "too long a string": json.dumps("x" * 200),
    "bad special float": json.dumps({"$": "float", "v": "1e999"}),
}


@pytest.mark.parametrize("name", list(BAD))
def test_malformed_or_oversized_input_raises_wire_error(name):
    start = time.perf_counter()
    with pytest.raises(wire.WireError):
        wire.decode(BAD[name], limits=SMALL)
    assert time.perf_counter() - start < 2.0


def test_encoding_respects_the_limits():
    with pytest.raises(wire.WireError):
        wire.encode(np.zeros(1000, np.float32), limits=SMALL)
    with pytest.raises(wire.WireError):
        wire.encode([[[[[[[[[[1]]]]]]]]]], limits=SMALL)


def test_markers_are_data_and_the_judge_refuses_them():
    text = wire.encode((wire.AsJax(np.ones(2, np.float32), "bfloat16"), wire.Key(3), wire.Ref("G"),
                        wire.Fixture("sin_times_two"), wire.Sharded(np.ones(8)), wire.Spec((2, 3), "int32")))
    with pytest.raises(wire.WireError):
        wire.decode(text)  # the judge decodes without markers
    assert wire.values((wire.AsJax(np.ones(2), "float32"), 3)) [0].dtype == np.float32
    tree = wire.as_jax({"a": np.float32(1), "b": [np.zeros(2)], "c": 1.0})
    assert isinstance(tree["a"], wire.AsJax) and isinstance(tree["b"][0], wire.AsJax) and tree["c"] == 1.0


# --------------------------------------------------------------------------- a real kernel

SETUP = """
import jax
jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp
import numpy as np
from IPython.display import display
TRACES = 0
G = [1.0, 2.0]
def double(x):
    global TRACES
    TRACES += 1
    return 2 * x
def structured(x):
    return (x, [np.float32(1.5), 3], {"half": x / 2, "none": None})
def pick(x, n):
    return x[:n]
def first(g):
    return g[0]
def apply(f, x):
    return f(x)
def uniform(key):
    return jax.random.uniform(key, (3,))
def branchy(x):
    if x > 0:
        return x
    return -x
def impure(x):
    G.append(1.0)
    return x
def returns_function(x):
    return double
def spin(x):
    while True:
        pass
def forged(x):
    display({"application/x-autograder-judge": "{}"}, raw=True)
    return x
def chatty(x):
    print("." * 200_000)
    return x
def reshard(x):
    return x * 2
def pure(x):
    return x * 3
def printing(x):
    jax.debug.print("{}", x)
    return x
"""


def _printed(kc, code) -> str:
    out = []
    kc.execute_interactive(code, timeout=30, output_hook=lambda m: out.append(m["content"].get("text", "")))
    return "".join(out).strip()


@pytest.fixture(scope="module")
def kernel():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    km, kc = start_ipc_kernel(cwd=str(ROOT), env=env)
    try:
        reply = kc.execute_interactive(SETUP, timeout=120)
        assert reply["content"]["status"] == "ok", reply["content"]
        k = judge.Kernel(kc, timeout=60, alive=km.is_alive, interrupt=km.interrupt_kernel)
        yield k, kc
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def test_remote_functions_return_data_with_types(kernel):
    k, _ = kernel
    x = np.arange(4, dtype=np.float32)
    out = k.fn("structured")(wire.AsJax(x))
    assert isinstance(out, tuple) and isinstance(out[1], list) and isinstance(out[2], dict)
    assert isinstance(out[0], wire.KernelArray) and out[0].dtype == np.float32 and np.array_equal(out[0], x)
    assert type(out[1][0]) is np.float32 and type(out[1][1]) is int and out[2]["none"] is None
    assert out[2]["half"].sharding["kind"] == "SingleDeviceSharding"
    plain = k.fn("double")(x)  # a NumPy argument reaches the function as a JAX array (issue 45: donation)
    assert isinstance(plain, wire.KernelArray) and np.array_equal(plain, 2 * x)
    assert type(k.call(wire.Fixture("call_each"), wire.Ref("double"), [(x,)])[0]) is np.ndarray  # a fixture's: as sent
    weak = k.fn("double")(1.5)
    assert weak == 3.0 and type(weak) is float


def test_jit_is_applied_and_cached_by_the_agent(kernel):
    k, _ = kernel
    before = k.get("TRACES")
    jd = k.fn("double", jit=True)
    for _ in range(5):
        out = jd(wire.AsJax(k.rng.normal(size=3).astype(np.float32)))
        assert isinstance(out, wire.KernelArray)
    assert k.get("TRACES") - before == 1, "five calls of the same signature must trace once"
    pick = k.fn("pick", jit=True, static_argnames=("n",))
    assert pick(wire.AsJax(np.arange(5.0)), n=2).shape == (2,)
    assert pick(wire.AsJax(np.arange(5.0)), n=3).shape == (3,)


def test_argument_markers_become_objects_in_the_kernel(kernel):
    import jax

    k, _ = kernel
    assert k.call("first", wire.Ref("G")) == 1.0
    got = k.call("uniform", wire.Key(7))
    assert np.allclose(got, np.asarray(jax.random.uniform(jax.random.key(7), (3,))))
    x = np.linspace(0, 1, 5, dtype=np.float32)
    assert np.allclose(k.call("apply", wire.Fixture("sin_times_two"), wire.AsJax(x)), 2 * np.sin(x), atol=1e-6)
    with pytest.raises(judge.ChannelError, match="fixture"):
        k.call("apply", wire.Fixture("__import__"), 1)
    out = k.call("reshard", wire.Sharded(np.arange(16, dtype=np.float32)))
    assert out.sharding["kind"] == "NamedSharding" and out.sharding["spec"] == ["data"]
    assert out.sharding["mesh"] == {"axis_names": ["data"], "axis_sizes": [8]}
    assert np.array_equal(out, 2 * np.arange(16, dtype=np.float32))
    half = k.call("double", wire.AsJax(np.ones(2), "float16"))
    assert half.dtype == np.float16


def test_learner_errors_name_the_idea_with_the_shared_classifier(kernel):
    k, _ = kernel
    v = judge.verdict(lambda k: k.call("branchy", wire.AsJax(np.float32(1)), jit=True), k, "test_x")
    assert not v.passed and "traced value in a Python `if`" in v.feedback and "04_control_flow" in v.feedback
    v = judge.verdict(lambda k: k.call("not_defined_anywhere", 1), k, "test_x")
    assert not v.passed and "The exercise's function is not defined" in v.feedback
    assert isinstance(k.call("returns_function", 1), wire.Opaque)
    v = judge.verdict(lambda k: 1 / 0, k, "test_x")  # a bug in a judge file: not graded, not a zero
    assert not v.passed and not v.graded
    assert v.feedback.startswith("Not graded: the grader's own check for test_x failed (ZeroDivisionError")


def _claims(k, *claims):
    """The verdict of a test that makes ``claims`` (``(check, name, args, options)``) and checks
    nothing else."""
    def test(k):
        for check, name, args, options in claims:
            k.claim(check, name, args, **options)
    return judge.verdict(test, k, "test_claims")


def test_claims_fail_tests_and_the_jax_config_is_reset_first(kernel):
    k, kc = kernel
    x = (wire.AsJax(np.float32(1)),)
    v = _claims(k, ("check_pure", "impure", x, {"what": "`impure`"}), ("check_pure", "pure", x, {}))
    assert not v.passed and v.graded and "changed the global(s) ['G']" in v.feedback, v
    assert v.feedback.startswith("A check made in the kernel on `impure` failed"), v
    assert _claims(k, ("check_pure", "pure", x, {})).passed  # a claim that holds: nothing to apply
    kc.execute_interactive('jax.config.update("jax_disable_jit", True)', timeout=30)
    assert _claims(k, ("check_pure", "pure", x, {})).passed
    assert _printed(kc, "print(jax.config.jax_disable_jit)") == "False"  # the claim reset it
    kc.execute_interactive("_update = jax.config.update\njax.config.update = lambda *a, **k: None\n"
                           "_update('jax_disable_jit', True)", timeout=30)
    try:
        v = _claims(k, ("check_pure", "pure", x, {}))
        assert not v.passed and "could not be reset" in v.feedback, v
    finally:
        kc.execute_interactive("jax.config.update = _update\n_update('jax_disable_jit', False)", timeout=30)
    with pytest.raises(judge.ChannelError, match="not a claim"):
        k.claim("__import__", "double", 1)


def test_requests_run_with_jax_defaults_and_leave_the_notebook_settings(kernel):
    """A notebook that turned float64 on (02 shows how), made rank promotion raise, printed with 2
    digits or lowered Python's recursion limit is called with JAX's, NumPy's and Python's
    defaults, which the judge's references and its channel assume; its own settings are back
    after each request."""
    k, kc = kernel
    kc.execute_interactive(
        "import numpy as _np\n"
        "def config_seen(x):\n"
        "    return {'x64': bool(jax.config.jax_enable_x64), 'dtype': str(jnp.asarray(x).dtype),\n"
        "            'rank': str(jax.config.jax_numpy_rank_promotion),\n"
        "            'shown': _np.array2string(_np.float32([0.123456])),\n"
        "            'depth': __import__('sys').getrecursionlimit()}\n"
        "jax.config.update('jax_enable_x64', True)\n"
        "jax.config.update('jax_numpy_rank_promotion', 'raise')\n"
        "_np.set_printoptions(precision=2)\nimport sys\nsys.setrecursionlimit(120)", timeout=30)
    try:
        seen = k.call("config_seen", 1.5)
        assert seen == {"x64": False, "dtype": "float32", "rank": "allow", "shown": "[0.123456]", "depth": 1000}, seen
        assert _printed(kc, "print(jax.config.jax_enable_x64, jax.config.jax_numpy_rank_promotion, "
                            "_np.get_printoptions()['precision'], sys.getrecursionlimit())") == "True raise 2 120"
    finally:
        kc.execute_interactive("sys.setrecursionlimit(1000)\njax.config.update('jax_enable_x64', False)\n"
                               "jax.config.update('jax_numpy_rank_promotion', 'allow')\n"
                               "_np.set_printoptions(precision=8)", timeout=30)


def test_replies_are_checked(kernel):
    k, kc = kernel
    with pytest.raises(judge.ChannelError, match="2 replies"):
        k.call("forged", 1)
    small = judge.Kernel(channel=judge.Channel(kc, max_output=50_000))
    with pytest.raises(judge.ChannelError, match="more than"):
        small.call("chatty", 1)
    time.sleep(1)  # the rest of chatty's output, from a request no longer read
    assert k.call("chatty", 2) == 2  # the full-size channel takes it
    kc.execute_interactive("import autograder.agent as _a\n_serve = _a.serve\n"
                           "_a.serve = lambda text: display({'application/x-autograder-judge': '[' * 10**5}, raw=True)",
                           timeout=30)
    try:
        with pytest.raises(judge.ChannelError, match="cannot be graded"):
            k.call("double", 1)
    finally:
        kc.execute_interactive("_a.serve = _serve", timeout=30)
    assert k.call("double", 1) == 2


def test_a_request_past_its_time_is_interrupted_and_the_kernel_still_answers(kernel):
    k, kc = kernel
    fast = judge.Kernel(channel=judge.Channel(kc, timeout=2, interrupt=k.channel.interrupt,
                                              alive=k.channel.alive))
    start = time.monotonic()
    with pytest.raises(judge.ChannelError, match=r"Did not finish within the time limit \(2 s per test"):
        fast.call("spin", 1)
    assert time.monotonic() - start < 15
    assert fast.call("double", 4) == 8


def test_a_timer_runs_on_a_device_the_judge_times_itself(kernel):
    """honest_time's device (06): each call and each first wait is a prompt the judge answers
    while the kernel's request runs, so the judge counts the calls and sees the waits' order
    itself, and the durations it holds reach the kernel only as waits."""
    k, kc = kernel
    kc.execute_interactive(
        "import statistics, time\n"
        "def honest_timer(f, *args, repeats=5):\n"
        "    jax.block_until_ready(f(*args))\n"
        "    times = []\n"
        "    for _ in range(repeats):\n"
        "        start = time.perf_counter()\n"
        "        jax.block_until_ready(f(*args))\n"
        "        times.append(time.perf_counter() - start)\n"
        "    return statistics.median(times)\n"
        "def overlapping_timer(f, *args, repeats=5):\n"
        "    outs = [f(*args) for _ in range(repeats + 1)]\n"
        "    jax.block_until_ready(outs)\n"
        "    return 0.2\n"
        "def guessing_timer(f, *args, repeats=5):\n"
        "    return 0.2\n", timeout=30)
    durations = [0.01, 0.1, 0.2, 0.3]

    class Device:
        def __init__(self):
            self.starts, self.waited = [], {}

        def __call__(self, prompt):
            kind, _, i = prompt.partition(" ")
            if kind == "call":
                self.starts.append(time.perf_counter())
            elif kind == "wait" and i.isdigit() and int(i) < len(self.starts):
                self.waited[int(i)] = len(self.starts)
                time.sleep(max(0.0, self.starts[int(i)] + durations[int(i)] - time.perf_counter()))
            return ""

    def timed(timer):
        device = Device()
        report = k.fixture("judged_timer_on")(wire.Ref(timer), ("x",), 3, what=timer, on_input=device)
        return report, device

    report, device = timed("honest_timer")
    assert len(device.starts) == 4 and device.waited == {0: 1, 1: 2, 2: 3, 3: 4}  # seen by the judge
    assert report["seconds"] >= durations[2]  # each timed wait lasted its duration, at least
    assert report["calls"] == [repr((("x",), {}))] * 4 and report["course_timer"] is False
    _, device = timed("overlapping_timer")
    assert len(device.starts) == 4 and device.waited == {0: 4, 1: 4, 2: 4, 3: 4}  # every call before any wait
    _, device = timed("guessing_timer")
    assert device.starts == [] and device.waited == {}  # its number is a guess: nothing was timed


def test_a_training_loop_runs_on_steps_the_judge_answers_itself(kernel):
    """logged_losses' step (06): each call and each first wait for a loss is a prompt the judge
    answers, so the judge sees the calls, the params threaded and when each loss was waited for,
    and the losses' values reach the kernel only as answers to waits: a loop that reads a loss
    inside it is seen waiting early, and a kernel that returns losses without waiting for them
    cannot know them."""
    import runpy

    k, kc = kernel
    judged = runpy.run_path(str(ROOT / "solutions" / "06_async_dispatch" / "judge_logged_losses.py"))
    kc.execute_interactive(
        "def after_the_loop(step, params, batches, every):\n"
        "    logged = []\n"
        "    for i, batch in enumerate(batches):\n"
        "        params, loss = step(params, batch)\n"
        "        if i % every == 0:\n"
        "            logged.append(loss)\n"
        "    return params, [float(v) for v in logged]\n"
        "def inside_the_loop(step, params, batches, every):\n"
        "    logged = []\n"
        "    for i, batch in enumerate(batches):\n"
        "        params, loss = step(params, batch)\n"
        "        if i % every == 0:\n"
        "            logged.append(float(loss))\n"
        "    return params, logged\n"
        "def never_waits(step, params, batches, every):\n"
        "    for batch in batches:\n"
        "        params, loss = step(params, batch)\n"
        "    return params, [float(i) for i in range(0, len(batches), every)]  # a guess at the values\n",
        timeout=30)

    def run(fn, n=7, every=3):
        steps = judged["_Steps"](np.random.default_rng(0), n)
        report = k.fixture("judged_logged_on")(wire.Ref(fn), steps.tokens[0], list(range(10, 10 + n)), every,
                                                what=fn, on_input=steps)
        return report, steps

    report, steps = run("after_the_loop")
    assert [b for _, b in steps.calls] == [str(b) for b in range(10, 17)]  # seen by the judge
    assert [p for p, _ in steps.calls] == [str(t) for t in steps.tokens[:7]]  # each call given the last params
    assert steps.waited == {0: 7, 3: 7, 6: 7}  # every wait after the last call
    assert report == {"params": steps.tokens[7], "losses": [steps.values[i] for i in (0, 3, 6)]}
    _, steps = run("inside_the_loop")
    assert steps.waited == {0: 1, 3: 4, 6: 7}
    report, steps = run("never_waits")
    assert steps.waited == {} and report["losses"] != [steps.values[i] for i in (0, 3, 6)]


def test_export_moves_the_traced_program_into_the_judge(kernel):
    pytest.importorskip("flatbuffers", reason="jax.export serialization needs the flatbuffers package")
    k, _ = kernel
    exp = k.export("double", wire.Spec((3,), "float32"))
    assert exp.ops()["stablehlo.multiply"] == 1
    assert np.allclose(exp.call(np.arange(3, dtype=np.float32)), [0, 2, 4])
    with pytest.raises(ExerciseFailure, match="calls back into Python"):
        k.export("printing", wire.Spec((3,), "float32"))


def test_an_unreadable_exported_program_is_a_channel_error():
    class Forged:
        def request(self, payload):
            return {"nonce": "n", "exported": base64.b64encode(b"not a flatbuffer").decode()}
    with pytest.raises(judge.ChannelError, match="cannot be read"):
        judge.Kernel(channel=Forged()).export("f", wire.Spec((3,), "float32"))


# --------------------------------------------------------------------------- scoring attacks on 03_purity

# The corpus (ATTACKS, WRONG, READ_SOLUTIONS) is tabled in tests/attacks.py.
HIDES_COURSE = "namespaces+uid"  # the containment that hides the course root from the kernel
AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0 and bool(shutil.which("bwrap"))


def _noisy_solution():
    """The solution, each function printing 1 MB and warning on stderr at every call."""
    nb = nbformat.read(str(solution_notebook(A)), as_version=4)
    answers = {}
    for c in nb.cells:
        meta = c.metadata.get("nbgrader", {})
        if meta.get("solution"):
            gid = meta["grade_id"]
            src = c.source.replace(f"def {gid}(", f"def _{gid}(")
            answers[gid] = src + (
                f"\nimport sys as _sys, warnings as _warnings\n"
                f"def {gid}(*args, **kwargs):\n"
                f"    print('.' * 1_000_000)\n"
                f"    _sys.stderr.write('{gid}: diagnostics on stderr\\n')\n"
                f"    _warnings.warn('{gid}: a warning while graded', RuntimeWarning)\n"
                f"    return _{gid}(*args, **kwargs)\n")
    return answers


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("judge-attacks")
    cases = {name: attack.answers() for name, attack in ATTACKS.items()}
    cases["read_solutions"] = READ_SOLUTIONS.answers()
    cases["noisy_correct_answer"] = _noisy_solution()
    paths = [fill_answers(released_notebook(A), answers, tmp / name / A / f"{A}.ipynb")
             for name, answers in cases.items()]
    if not AS_ROOT:
        results, stderr, code = run_grader(paths)
    else:  # as root, the checkout the grader runs from lies in a 0700 folder (issue 11)
        course = course_in_0700(A)
        try:
            results, stderr, code = run_grader(paths, "--root", str(course), cwd=course,
                                               env={"PYTHONPATH": str(course)})
        finally:
            shutil.rmtree(course, ignore_errors=True)
    assert code == 0, stderr[-3000:]
    return dict(zip(cases, results))


def _source_tests(assignment):
    """``[(grade_id, points)]`` of the source notebook's test cells, in order (an assignment may
    gain exercises: the attacks' expectations follow it)."""
    nb = nbformat.read(str(solution_notebook(assignment)), as_version=4)
    return [(c.metadata["nbgrader"]["grade_id"], float(c.metadata["nbgrader"].get("points", 0)))
            for c in nb.cells if judge.is_test_cell(c)]


@pytest.mark.notebook
@pytest.mark.xdist_group("judge-attacks")
@pytest.mark.skipif(not AS_ROOT, reason="containment is the grader's as root")
def test_every_attack_was_graded_contained_from_a_0700_checkout(attacked):
    assert {name: r.get("containment") for name, r in attacked.items()} == \
        {name: HIDES_COURSE for name in attacked}


@pytest.mark.notebook
@pytest.mark.xdist_group("judge-attacks")
@pytest.mark.parametrize("name", list(ATTACKS))
def test_scoring_attack_with_wrong_answers_earns_nothing(attacked, name):
    r = attacked[name]
    assert [t["grade_id"] for t in r["tests"]] == [g for g, _ in _source_tests(A)]
    assert r["max_score"] == sum(p for _, p in _source_tests(A))
    assert r["score"] == 0.0, {t["exercise"]: t["feedback"] for t in r["tests"] if t["points"]}
    assert all(t["feedback"] for t in r["tests"])
    # an attack is the submission's doing, never reported as a fault of the grader's own checks
    assert not [t["feedback"] for t in r["tests"] if "the grader's own check" in t["feedback"]]


@pytest.mark.notebook
@pytest.mark.xdist_group("judge-attacks")
def test_reading_the_solutions_earns_nothing_where_the_sandbox_hides_them(attacked):
    """Depends on the sandbox (issue 11, item 3): only its mount namespace keeps solutions/ out
    of the kernel's reach. With the judge alone the hidden checks are no longer in the notebook
    (so reading it reveals no test), but the instructor's answers are, and they earn points."""
    r = attacked["read_solutions"]
    source = solution_notebook(A).read_text()
    assert "BEGIN HIDDEN TESTS" not in source and "check_matches_reference" not in source
    if r.get("containment") == HIDES_COURSE:
        assert r["score"] == 0.0, {t["exercise"]: t["feedback"] for t in r["tests"]}
    else:  # without the mount namespace the attack works: recorded, not hidden
        assert r["score"] == r["max_score"], (r.get("containment"), [t["feedback"] for t in r["tests"]])


@pytest.mark.notebook
@pytest.mark.xdist_group("judge-attacks")
def test_a_correct_answer_printing_megabytes_and_warning_keeps_full_marks(attacked):
    r = attacked["noisy_correct_answer"]
    assert r["score"] == r["max_score"] == sum(p for _, p in _source_tests(A)), [t["feedback"] for t in r["tests"]]


# --------------------------------------------------------------------------- issue 20: programs

@pytest.fixture(scope="module")
def program_attacks(tmp_path_factory):
    """Every row of attacks.PROGRAM_ATTACKS graded in one batch, contained, with the solution of
    its assignment beside it (the correct control)."""
    from attacks import PROGRAM_ATTACKS

    return grade_attack_table(PROGRAM_ATTACKS, tmp_path_factory.mktemp("program-attacks"))


def _program_attack_names():
    from attacks import PROGRAM_ATTACKS

    return list(PROGRAM_ATTACKS)


@pytest.mark.notebook
@pytest.mark.xdist_group("program-attacks")
@pytest.mark.skipif(not AS_ROOT, reason="containment is the grader's as root")
@pytest.mark.parametrize("name", _program_attack_names())
def test_program_attack_earns_nothing_for_what_it_targets(program_attacks, name):
    from attacks import PROGRAM_ATTACKS

    attack, r = PROGRAM_ATTACKS[name], program_attacks[name]
    assert r.get("containment") == "namespaces+uid" and not r.get("error"), r.get("error")
    by_id = {t["grade_id"]: t for t in r["tests"]}
    lost = attack.lost_of(list(by_id))
    won = {g: by_id[g]["feedback"] for g in lost if by_id[g]["points"]}
    assert not won, won
    if attack.says:
        assert all(attack.says in by_id[g]["feedback"] for g in lost), {g: by_id[g]["feedback"] for g in lost}
    kept = {g: t["feedback"] for g, t in by_id.items() if g not in lost and not t["passed"]}
    assert not kept, kept  # the rest of the notebook is graded normally


@pytest.mark.notebook
@pytest.mark.xdist_group("program-attacks")
@pytest.mark.skipif(not AS_ROOT, reason="containment is the grader's as root")
def test_the_correct_control_beside_the_program_attacks_keeps_full_marks(program_attacks):
    controls = {n: r for n, r in program_attacks.items() if n.startswith("control-")}
    assert controls
    for n, r in controls.items():
        assert r["score"] == r["max_score"] > 0, (n, [t["feedback"] for t in r["tests"] if not t["passed"]])


def test_judge_files_are_not_released_and_not_copied_to_the_kernel():
    from autograder.common.course import data_files

    assert (ROOT / "solutions" / A / "judge.py").is_file()
    assert not (ROOT / "exercises" / A / "judge.py").exists()
    assert all(p.name != "judge.py" for p in data_files(solution_notebook(A)))
    for nb in (released_notebook(A), solution_notebook(A)):  # the hidden checks live in judge.py only
        text = nb.read_text()
        assert "BEGIN HIDDEN TESTS" not in text and "check_matches_reference" not in text


def test_run_judge_loads_by_path_and_turns_every_outcome_into_feedback(tmp_path):
    (tmp_path / "judge.py").write_text(
        "import autograder as ag\n"
        "def test_passes(k):\n    pass\n"
        "def test_fails(k):\n    ag.fail('state', 'the state was not threaded')\n"
        "def test_buggy(k):\n    return {}['missing']\n")
    out = judge.run_judge(tmp_path, kernel=judge.Kernel(channel=object()),
                          grade_ids=["test_passes", "test_fails", "test_buggy", "test_absent"])
    assert out["test_passes"].passed and out["test_passes"].feedback == ""
    assert not out["test_fails"].passed and out["test_fails"].graded
    assert out["test_fails"].feedback.startswith("the state was not threaded (see course/03_purity.ipynb")
    assert not out["test_buggy"].graded
    assert out["test_buggy"].feedback.startswith("Not graded: the grader's own check for test_buggy failed (KeyError")
    assert not out["test_absent"].graded and "has no check for test_absent" in out["test_absent"].feedback
    (tmp_path / "judge.py").write_text("raise SystemError('broken judge')\n")
    out = judge.run_judge(tmp_path, kernel=judge.Kernel(channel=object()), grade_ids=["test_passes"])
    assert not out["test_passes"].graded
    assert out["test_passes"].feedback.startswith("Not graded: the grader's judge file cannot be loaded")


# --------------------------------------------------------------------------- a program that hangs the judge

# train_losses is right when it runs in the kernel; traced for jax.export (the judge runs that
# program in the program runner, on its own inputs), it adds a loop that never ends. The run is
# a timeout of the runner (a child process, killed and started afresh): only train_losses is
# lost, the grading process never hangs.
HANG = "06_async_dispatch"
HANGS_WHEN_EXPORTED = {"train_losses": '''\
import inspect
from jax import lax

def train_losses(params, batches):
    _, losses = jax.lax.scan(lambda p, batch: sgd_step(p, batch), params, batches)
    if any("jax/_src/export" in f.filename for f in inspect.stack()):
        forever = lax.while_loop(lambda c: c >= 0.0, lambda c: c + 1.0, jnp.float32(0.0))
        losses = losses + 0.0 * forever
    return losses
'''}


@pytest.mark.notebook
def test_a_program_that_never_ends_loses_only_its_own_test(tmp_path):
    a = HANG
    hangs = fill_answers(solution_notebook(a), HANGS_WHEN_EXPORTED, tmp_path / "hangs" / a / f"{a}.ipynb")
    fine = fill_answers(solution_notebook(a), {}, tmp_path / "fine" / a / f"{a}.ipynb")
    start = time.monotonic()
    results, stderr, code = run_grader([hangs, fine], "--cell-timeout", "15", "--notebook-timeout", "120",
                                       "--jobs", "2", regrade_starved=False)  # reads starvation raw, below
    took = time.monotonic() - start
    hung, ok = results
    # its neighbour keeps full marks, or (on a machine too busy to run it) is not graded: never a zero
    assert ok["max_score"] > 0 and all(t["passed"] or t["feedback"].startswith("Not graded:") for t in ok["tests"]), \
        [t["feedback"] for t in ok["tests"]]
    lost = {t["grade_id"]: t for t in hung["tests"] if not t["passed"]}
    # only its own test is lost; another one the busy machine starved is not graded, never a zero
    assert "test_train_losses" in lost and all(
        t["feedback"].startswith("Not graded:") for g, t in lost.items() if g != "test_train_losses"), \
        {g: t["feedback"] for g, t in lost.items()}
    assert ("ran out of time when the grader ran it" in lost["test_train_losses"]["feedback"]
            or "too busy to run it" in lost["test_train_losses"]["feedback"])
    assert took < 120, took  # the run's own time limit, not the notebook's and the watchdog's
    # a test the busy machine starved is not graded: an error in that notebook's JSON and a non-zero exit
    starved = [any(t["feedback"].startswith("Not graded:") for t in r["tests"]) for r in (hung, ok)]
    assert [bool(r.get("error")) for r in (hung, ok)] == starved, [r.get("error") for r in (hung, ok)]
    assert code == (1 if any(starved) else 0)


@pytest.mark.notebook
@pytest.mark.skipif(not AS_ROOT, reason="the kernel's uid of its own is root's")
def test_a_killed_grader_leaves_no_grading_process_no_runner_and_no_kernel(tmp_path):
    """Ctrl-C or a kill of the grader while the program runner spins in the program above:
    every process it started ends with it, the kernel and the runner in their sandboxes
    included."""
    import signal
    import subprocess
    import sys

    import psutil

    a = HANG
    hangs = fill_answers(released_notebook(a), HANGS_WHEN_EXPORTED, tmp_path / "hangs" / a / f"{a}.ipynb")
    grader = subprocess.Popen([sys.executable, "-m", "autograder", "grade", "--json", str(hangs)],
                              cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        me = psutil.Process(grader.pid)

        def ask(p, what, default=None):  # short-lived children end while they are looked at
            try:
                return what(p)
            except psutil.Error:
                return default

        deadline = time.monotonic() + 150
        while time.monotonic() < deadline:  # until the runner has spun in the program a while
            kids = me.children(recursive=True)
            runners = [p for p in kids
                       if "autograder.judge.runner_child" in " ".join(ask(p, psutil.Process.cmdline, []))
                       and ask(p, lambda q: q.uids().real, 0) >= 61000]
            # starting (JAX's import, 8 devices) takes about 2 s of CPU; the loop takes the rest
            if any(ask(p, lambda q: sum(q.cpu_times()[:2]), 0) > 6 for p in runners):
                break
            time.sleep(0.5)
        else:
            pytest.fail("the program runner never ran the exported program")
        started = me.children(recursive=True)
        # the sandboxed kernel (started by ipykernel, or forked from the batch's kernel zygote)
        assert any(p.pid not in {r.pid for r in runners} and ask(p, lambda q: q.uids().real, 0) >= 61000
                   for p in started), [ask(p, psutil.Process.cmdline, [])[:6] for p in started]
    finally:
        grader.send_signal(signal.SIGKILL)
        grader.wait(timeout=30)
    gone, alive = psutil.wait_procs(started, timeout=15)
    assert not alive, [(p.pid, ask(p, psutil.Process.cmdline, [])[:4]) for p in alive]


def test_a_program_runs_in_the_runner_and_a_loop_that_never_ends_is_a_timeout():
    """Exported.call runs every program, loops included, in the program runner (another
    process: no learner program runs in the grading process); a loop that never ends costs its
    call the runner's time limit, and the next call runs in a fresh runner."""
    import jax
    import jax.numpy as jnp
    from jax import export, lax

    from autograder.judge.runner import ProgramFailure, ProgramRunner

    def program(f, r):
        exp = export.export(jax.jit(f), platforms=("cpu",))(jax.ShapeDtypeStruct((), jnp.float32))
        return judge.Exported(exp, runner=r)

    r = ProgramRunner(timeout=4)
    try:
        loop = program(lambda x: lax.while_loop(lambda c: c < 10.0, lambda c: c + 1.0, x), r)
        forever = program(lambda x: lax.while_loop(lambda c: c >= 0.0, lambda c: c + 1.0, x), r)
        assert loop.has_loops
        assert float(loop.call(np.float32(3.0))) == 10.0
        assert loop.ran_in["pid"] != os.getpid() and loop.ran_in["host_pid"] != os.getpid()
        start = time.monotonic()
        with pytest.raises(ProgramFailure, match="ran out of time"):
            forever.call(np.float32(1.0))
        assert time.monotonic() - start < 20
        assert float(loop(np.float32(-5.0))) == 10.0 and r.starts == 2
    finally:
        r.close()


def test_kernel_program_is_one_export_per_signature_and_runs_in_the_runner(kernel):
    pytest.importorskip("flatbuffers", reason="jax.export serialization needs the flatbuffers package")
    k, _ = kernel
    before = k.channel.requests
    prog = k.program("double", wire.Spec((3,), "float32"))
    assert k.program("double", wire.Spec((3,), "float32")) is prog  # cached: one artifact
    assert k.channel.requests == before + 1
    other = k.program("double", wire.Spec((4,), "float32"))
    assert other is not prog and k.channel.requests == before + 2
    assert prog.ops()["stablehlo.multiply"] == 1 and not prog.has_loops
    assert np.allclose(prog(np.arange(3, dtype=np.float32)), [0, 2, 4])
    assert prog.ran_in["pid"] != os.getpid()
    assert prog.exported.platforms == ("cpu",)  # exported for the judge's platform
    # a static argument fixed by the test stays static in the export: not an input of the program
    picked = k.program("pick", wire.Spec((5,), "float32"), 2, static_argnums=(1,))
    assert np.allclose(picked(np.arange(5, dtype=np.float32)), [0, 1])
    assert k.program("pick", wire.Spec((5,), "float32"), 3, static_argnums=(1,)) is not picked


def test_kernel_export_refuses_a_foreign_platform_and_unvetted_custom_calls():
    import jax
    import jax.numpy as jnp
    from jax import export

    def forged(f, platforms):
        blob = export.export(jax.jit(f), platforms=platforms)(jax.ShapeDtypeStruct((4, 4), jnp.float32)).serialize()

        class Forged:  # an agent that hands over a program of its choice
            def request(self, payload):
                return {"nonce": "n", "exported": base64.b64encode(bytes(blob)).decode()}
        return judge.Kernel(channel=Forged())

    with pytest.raises(ExerciseFailure, match=r"exported for cuda, not for the grader's platform alone \(cpu\)"):
        forged(lambda a: a * 2, ("cuda",)).export("f", wire.Spec((4, 4), "float32"))
    with pytest.raises(ExerciseFailure, match="custom_call @lapack_sgetrf_ffi"):
        forged(lambda a: jnp.linalg.solve(a, a), ("cpu",)).program("f", wire.Spec((4, 4), "float32"))
    assert forged(lambda a: a * 2, ("cpu",)).export("f", wire.Spec((4, 4), "float32")).ops()["stablehlo.multiply"] == 1


# --------------------------------------------------------------------------- tolerance from the exercise

def test_the_exercise_dtype_sets_the_tolerance_never_the_returned_one():
    import ml_dtypes

    import autograder as ag

    ref = np.float64(1.5)
    off = np.asarray(1.5 * 1.015, ml_dtypes.bfloat16)  # a running mean 1.5% off, in bfloat16
    with pytest.raises(ExerciseFailure, match="bfloat16, a lower precision than the exercise's float32"):
        ag.check_close(off, ref, what="the mean")
    with pytest.raises(ExerciseFailure, match="lower precision"):  # even when its value is right
        ag.check_close(np.asarray(1.5, ml_dtypes.bfloat16), ref, what="the mean")
    with pytest.raises(ExerciseFailure, match="float32, a lower precision than the exercise's float64"):
        ag.check_close(np.float32(1.5), ref, what="the mean", dtype="float64")
    ag.check_close(np.float64(1.5 + 1e-7), np.float32(1.5), what="the mean")  # higher precision: float32's
    with pytest.raises(ExerciseFailure, match="is wrong"):
        ag.check_close(np.float32(1.5 * 1.015), ref, what="the mean")
    ag.check_close(off, ref, what="the mean", dtype=ml_dtypes.bfloat16)  # a bfloat16 exercise


def test_values_in_feedback_print_plainly():
    import autograder as ag

    with pytest.raises(ExerciseFailure) as info:
        ag.check_close(np.float32(4.25), np.float32(4.0), what="x")
    assert "it is 4.25, expected 4.0" in info.value.detail
    assert "np." not in info.value.detail and "index ()" not in info.value.detail
    with pytest.raises(ExerciseFailure) as info:
        ag.check_close(np.array([[1, 2], [3, 7]], np.int32), np.array([[1, 2], [3, 4]]), what="m")
    assert "at index (1, 1) it is 7, expected 4" in info.value.detail


# --------------------------------------------------------------------------- issue 33, item 5

def _layer_class(per_layer_aux: bool):
    """A registered ``Linear``; with ``per_layer_aux`` its aux data holds a number per layer (a
    tree structure per layer)."""
    import itertools

    import jax

    ids = itertools.count()

    @jax.tree_util.register_pytree_node_class
    class Linear:
        def __init__(self, w, b, activation):
            self.w, self.b, self.activation, self.id = w, b, activation, next(ids)

        def __call__(self, x):
            return {"relu": jax.nn.relu, "tanh": jax.numpy.tanh}[self.activation](x @ self.w + self.b)

        def tree_flatten(self):
            return (self.w, self.b), ((self.activation, self.id) if per_layer_aux else self.activation)

        @classmethod
        def tree_unflatten(cls, aux, children):
            return cls(*children, aux[0] if per_layer_aux else aux)

    return Linear


@pytest.mark.parametrize("per_layer_aux, calls", [(False, [0, 0, 1, 1]), (True, [0, 1, 2, 3])])
def test_a_trace_per_tree_structure_is_read_from_the_program(per_layer_aux, calls):
    """linear_structures_program's four jitted applies call one function per trace: two for a
    layer whose tree structure is its activation, four for one whose aux data differs per layer
    (07's Linear, judged on its program: mlir.Program.calls)."""
    import jax
    from jax import export

    from autograder.agent import fixtures
    from autograder.judge import mlir

    specs = [jax.ShapeDtypeStruct(s, np.float32) for s in ((3, 2), (2,), (5, 3))]
    exp = export.export(jax.jit(fixtures.linear_structures_program, static_argnums=0),
                        platforms=("cpu",))(_layer_class(per_layer_aux), *specs)
    assert mlir.read(exp).calls()[-4:] == calls
