"""The program runner: learner programs run in a contained child process, never in the grader.

Each test exports a small program here (exporting runs nothing) and runs it through
:class:`autograder.judge.runner.ProgramRunner`, or through the judge's :class:`Exported` (which checks
the allow-list first). A crash, a hang and a memory hog lose only their own call; the runner
comes back for the next one.
"""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from autograder import judge
from autograder.common.settings import Settings
from autograder.sandbox import containment as sandbox
from autograder.feedback import ExerciseFailure
from autograder.judge.runner import ProgramFailure, ProgramRunner

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0 and bool(shutil.which("bwrap"))

judge.ensure_judge_devices()  # 8 CPU devices here too, to export a sharded program
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402


def _export(f, *shapes, dtype=jnp.float32, **kw):
    return export.export(jax.jit(f, **kw), platforms=("cpu",))(
        *[jax.ShapeDtypeStruct(s, dtype) for s in shapes])


def _crashing():
    """A LAPACK call whose declared result (1 x 1) is far smaller than what LAPACK writes (the
    issue's attack of class 5: it overflowed the grading process's heap)."""
    def f(a):
        out = jax.ffi.ffi_call("lapack_sgetrf_ffi", (jax.ShapeDtypeStruct((1, 1), jnp.float32),
                                                      jax.ShapeDtypeStruct((512,), jnp.int32),
                                                      jax.ShapeDtypeStruct((), jnp.int32)))(a)
        return out[0]
    return _export(f, (512, 512))


@pytest.fixture(scope="module")
def runner():
    r = ProgramRunner(timeout=5)
    r.start()
    yield r
    r.close()


def test_a_program_runs_in_another_process_and_returns_right_values(runner):
    exp = _export(lambda x, y: {"s": x * 2 + y, "m": jnp.max(x)}, (3,), (3,))
    x, y = np.arange(3, dtype=np.float32), np.ones(3, np.float32)
    prog = judge.Exported(exp, runner=runner)
    out = prog.call(x, y)
    assert np.allclose(out["s"], x * 2 + y) and float(out["m"]) == 2.0
    assert out["s"].dtype == np.float32 and out["s"].sharding["kind"] == "SingleDeviceSharding"
    assert prog.ran_in["pid"] != os.getpid() and prog.ran_in["host_pid"] != os.getpid()
    assert runner.info["devices"] == 8  # 09's judge meshes 8 CPU devices


def test_static_arguments_stay_in_the_program(runner):
    exp = export.export(jax.jit(lambda x, n: x[:n] * n, static_argnums=(1,)), platforms=("cpu",))(
        jax.ShapeDtypeStruct((5,), jnp.float32), 2)
    prog = judge.Exported(exp, runner=runner)
    assert np.allclose(prog(np.arange(5, dtype=np.float32)), [0, 2])
    with pytest.raises(ProgramFailure, match="takes other inputs than the exercise's function"):
        prog(np.arange(5, dtype=np.float32), 2)  # the static argument is not an input


def test_a_sharded_program_runs_on_its_mesh_of_eight_devices(runner):
    from jax.sharding import NamedSharding, PartitionSpec as P

    if len(jax.devices("cpu")) < 8:
        pytest.skip("JAX started with fewer than 8 CPU devices in this process")
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    with jax.set_mesh(mesh):
        x = jax.device_put(np.ones((4, 8), np.float32), NamedSharding(mesh, P("data", "model")))
        w = jax.device_put(np.ones((8, 3), np.float32), NamedSharding(mesh, P("model", None)))
        exp = export.export(jax.jit(lambda a, b: jnp.matmul(a, b, out_sharding=P("data", None))),
                            platforms=("cpu",))(x, w)
    xs = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    ws = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)
    out = judge.Exported(exp, runner=runner)(xs, ws)
    assert np.allclose(out, xs @ ws, rtol=1e-5, atol=1e-5)
    assert out.sharding["spec"] == ["data", None] and out.sharding["type_spec"] == ["data", None]
    assert out.sharding["mesh"] == {"axis_names": ["data", "model"], "axis_sizes": [2, 4]}


def test_the_runner_compiles_with_the_judge_s_placements_and_counts_the_collectives(runner):
    """What XLA made of a program (its collectives) comes from the runner, which compiles it on
    inputs placed as asked: no learner program is compiled in the grading process. The same
    program placed two ways: as it was exported (the contraction over "model": one all-reduce
    and nothing else), and with x's rows split over "model" instead of its columns (XLA must move
    x to where the program wants it: a collective besides the all-reduce)."""
    from jax.sharding import NamedSharding, PartitionSpec as P

    if len(jax.devices("cpu")) < 8:
        pytest.skip("JAX started with fewer than 8 CPU devices in this process")
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    x = jax.device_put(np.ones((4, 8), np.float32), NamedSharding(mesh, P("data", "model")))
    w = jax.device_put(np.ones((8, 3), np.float32), NamedSharding(mesh, P("model", None)))
    exp = export.export(jax.jit(lambda a, b: a @ b, out_shardings=NamedSharding(mesh, P("data", None))),
                        platforms=("cpu",))(x, w)
    xs = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    ws = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)
    prog = judge.Exported(exp, runner=runner)
    out, facts = prog.run((xs, ws), placements=[["data", "model"], ["model", None]], compiled_facts=True)
    assert np.allclose(out, xs @ ws, rtol=1e-5, atol=1e-5)
    counts = facts["collectives"]
    assert counts["all-reduce"] == 1 and sum(counts.values()) == 1, counts
    out, facts = prog.run((xs, ws), placements=[["model", None], ["model", None]], compiled_facts=True)
    assert np.allclose(out, xs @ ws, rtol=1e-5, atol=1e-5)
    moved = {name: n for name, n in facts["collectives"].items() if name != "all-reduce" and n}
    assert moved, facts
    assert prog.run((xs, ws))[1] is None  # facts only when asked
    with pytest.raises(ProgramFailure, match="partition spec"):
        prog.run((xs, ws), placements=[["data", 3], [None, None]], compiled_facts=True)


def test_a_crash_loses_only_its_own_call(runner):
    double = _export(lambda x: x * 2, (3,))
    before = runner.starts
    start = time.monotonic()
    # a corrupted heap ends the runner with a crash or, now and then under load, a hang in
    # the allocator: either way that call alone fails and the runner is replaced
    with pytest.raises(ProgramFailure, match="crashed|ran out of time"):
        runner.run(_crashing().serialize(), [np.ones((512, 512), np.float32)])  # the allow-list bypassed
    assert time.monotonic() - start < 30
    out = judge.Exported(double, runner=runner)(np.ones(3, np.float32))
    assert np.allclose(out, 2) and runner.starts == before + 1  # a fresh runner


def test_a_hang_loses_only_its_own_call(runner):
    forever = _export(lambda x: lax.while_loop(lambda c: c >= 0.0, lambda c: c + 1.0, x), ())
    start = time.monotonic()
    # a loop that never ends: its time limit, or (on a machine too busy to run it) not graded
    with pytest.raises(ProgramFailure, match=r"ran out of time .*(more than 5 s|too busy)"):
        judge.Exported(forever, runner=runner)(np.float32(1.0))
    assert time.monotonic() - start < 25
    assert float(judge.Exported(_export(lambda x: x + 1, ()), runner=runner)(np.float32(1.0))) == 2.0


def test_a_memory_hog_loses_only_its_own_call(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_MEMORY_MB", "1024")
    r = ProgramRunner(timeout=60)
    try:
        # 4 GiB held at once (the barrier keeps XLA from fusing it away) under a 1 GiB cap
        hog = _export(lambda x: lax.optimization_barrier(jnp.zeros((2**30,), jnp.float32) + x)[-1], ())
        with pytest.raises(ProgramFailure, match="memory"):
            judge.Exported(hog, runner=r)(np.float32(1.0))
        assert float(judge.Exported(_export(lambda x: x * 3, ()), runner=r)(np.float32(2.0))) == 6.0
    finally:
        r.close()


def test_the_allow_list_refuses_before_anything_runs():
    r = ProgramRunner()
    try:
        with pytest.raises(ExerciseFailure, match=r"custom_call @lapack_sgetrf_ffi \(a native call\)"):
            judge.Exported(_crashing(), runner=r, name="`f`")(np.ones((512, 512), np.float32))
        cuda = export.export(jax.jit(lambda x: x * 2), platforms=("cuda",))(jax.ShapeDtypeStruct((3,), jnp.float32))
        with pytest.raises(ExerciseFailure, match=r"exported for cuda, not for the grader's platform alone \(cpu\)"):
            judge.Exported(cuda, runner=r)(np.ones(3, np.float32))
        assert r.starts == 0  # nothing was sent to a runner
    finally:
        r.close()


def test_a_named_scope_or_an_odd_name_changes_nothing_the_allow_list_sees(runner):
    def odd(x):
        with jax.named_scope("stablehlo.custom_call @lapack_sgetrf_ffi"):
            return jax.named_call(lambda y: jnp.sin(y) * 2, name="f{ }")(x)
    prog = judge.Exported(_export(odd, (3,)), runner=runner)
    assert prog.refusal() == "" and not prog.structure.custom_call_targets
    assert np.allclose(prog(np.zeros(3, np.float32)), 0)


@pytest.mark.skipif(not AS_ROOT, reason="containment (namespaces and a uid of its own) is root's")
def test_as_root_the_runner_runs_contained_under_a_uid_of_its_own(runner):
    assert runner.mode == sandbox.NAMESPACE
    prog = judge.Exported(_export(lambda x: x - 1, ()), runner=runner)
    assert float(prog(np.float32(1.0))) == 0.0
    assert prog.ran_in["uid"] in Settings.load().sandbox_uids and prog.ran_in["uid"] != os.getuid()
    assert prog.ran_in["pid"] == 2  # a PID namespace of its own, after bubblewrap's init


def test_without_containment_it_is_a_process_of_its_own_with_a_memory_cap(monkeypatch):
    monkeypatch.setenv("AUTOGRADER_SANDBOX", "off")
    monkeypatch.setenv("AUTOGRADER_MEMORY_MB", "3000")
    r = ProgramRunner()
    try:
        prog = judge.Exported(_export(lambda x: x * 5, ()), runner=r)
        assert float(prog(np.float32(2.0))) == 10.0
        assert r.mode == sandbox.NONE and prog.ran_in["pid"] not in (os.getpid(), 1)
        limits = Path(f"/proc/{prog.ran_in['pid']}/limits").read_text()
        data = next(line for line in limits.splitlines() if line.startswith("Max data size"))
        assert data.split()[3] == str(3000 << 20), data
    finally:
        r.close()


def test_each_notebook_has_a_runner_of_its_own_stopped_when_it_is_judged(tmp_path):
    """The judge of each notebook starts its own runner while the kernel runs the notebook, and
    stops it when its tests are judged: no program of one submission runs in a process that ran
    another's."""
    import nbformat

    from autograder.judge import runner as runner_mod

    nb = nbformat.v4.new_notebook()
    first, second = judge.JudgeStep(tmp_path), judge.JudgeStep(tmp_path)
    first.prepare(nb)
    r = first.runner
    assert r is not runner_mod.process_runner() and r.proc is not None
    runner_mod.use(r)
    prog = judge.Exported(_export(lambda x: x * 7, ()))  # no runner given: the current one
    assert float(prog(np.float32(1.0))) == 7.0 and prog.ran_in["host_pid"] == r.proc.pid
    child = r.proc
    first.close()
    assert child.poll() is not None and first.runner is None  # stopped
    second.prepare(nb)
    try:
        assert second.runner is not r and second.runner.proc.pid != child.pid
    finally:
        second.close()
