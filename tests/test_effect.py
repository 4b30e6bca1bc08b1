"""A requirement holds by its effect (issue 43, item 1; autograder.judge.effect): on every path,
the result depends on it (the required operation perturbed in the module the judge holds, both
programs run in the program runner), data movement in bytes, loops by the trip counts observed
and on sizes beyond any the program was written for. Each of the issue's known wrong answers is
told apart from a right one here, on programs exported in this process (running nothing)."""
from __future__ import annotations

import numpy as np
import pytest

from autograder import judge
from autograder.feedback import ExerciseFailure
from autograder.judge import effect, mlir
from autograder.judge.runner import ProgramRunner

judge.ensure_judge_devices()  # 8 CPU devices here too, to export a sharded program
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import export, lax  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402


@pytest.fixture(scope="module")
def runner():
    r = ProgramRunner(timeout=30)
    r.start()
    yield r
    r.close()


MESH = jax.make_mesh((8,), ("data",), axis_types=(jax.sharding.AxisType.Explicit,))


def _sharded_mean(x):
    return jax.shard_map(lambda s: lax.psum(jnp.sum(s), "data") / x.size, mesh=MESH, in_specs=P("data"),
                         out_specs=P())(x)


def _decoy(x):  # the first global_mean: a live shard_map that the result never needs
    return jnp.mean(x) + 0.0 * _sharded_mean(x)


def _dead_branch(x):  # the shard_map in a branch the judge's inputs never take
    return lax.cond(x[0, 0] > 1e6, _sharded_mean, jnp.mean, x)


def _both_branches(x):  # a collective on every path: right
    return lax.cond(x[0, 0] > 1e6, _sharded_mean, lambda v: _sharded_mean(v) + 0.0, x)


def _platform_dependent(x):  # CPU's branch computes without the shard_map
    return lax.platform_dependent(x, cpu=jnp.mean, default=_sharded_mean)


def _program(f, runner, platforms=("cpu",)):
    spec = jax.ShapeDtypeStruct((16, 4), jnp.float32, sharding=NamedSharding(MESH, P("data")))
    with jax.set_mesh(MESH):
        return judge.Exported(export.export(jax.jit(f), platforms=platforms)(spec), runner=runner, name="`f`")


X = np.random.default_rng(0).normal(size=(16, 4)).astype(np.float32)


@pytest.mark.parametrize("f, says", [
    (_sharded_mean, None),
    (_both_branches, None),
    (_decoy, "does not depend on the operations"),
    (_dead_branch, "on every path it can take"),
])
def test_a_collective_counts_only_on_every_path_and_when_the_result_depends_on_it(runner, f, says):
    prog = _program(f, runner)
    assert prog.structure.collectives  # present in every one: presence proves nothing
    if says is None:
        effect.require(prog, mlir.COLLECTIVES, (X,), what="f(x)", idea="shard_map", needs="combine the shards")
        return
    with pytest.raises(ExerciseFailure, match=says):
        effect.require(prog, mlir.COLLECTIVES, (X,), what="f(x)", idea="shard_map", needs="combine the shards")


def _ratio_of_sums(x):  # right: a mean from a summed total and a summed count, in a jit inside
    @jax.jit
    def inner(x):
        def body(s):
            total, count = lax.psum((jnp.sum(s), jnp.ones((), jnp.float32) * s.size), "data")
            return total / count
        return jax.shard_map(body, mesh=MESH, in_specs=P("data"), out_specs=P())(x)
    return inner(x)


def test_a_ratio_of_two_collectives_depends_on_them(runner):
    """Both sums perturbed by one factor would leave their ratio as it was (exactly, on these
    whole numbers): each operand takes its own factor, so a right mean of summed totals and
    summed counts is seen to depend on its collectives, and a decoy still is not."""
    whole = np.arange(64, dtype=np.float32).reshape(16, 4)  # every sum and product exact
    prog = _program(_ratio_of_sums, runner)
    assert effect.depends_on(prog, mlir.COLLECTIVES, (whole,)) is True
    effect.require(prog, mlir.COLLECTIVES, (whole,), what="f(x)", idea="shard_map", needs="combine the shards")
    assert effect.depends_on(_program(_decoy, runner), mlir.COLLECTIVES, (whole,)) is False


def test_platform_dependent_code_is_cpus_branch_alone(runner):
    """Exported for CPU alone, lax.platform_dependent holds only CPU's branch: no facts come
    from a branch no run enters; exported for more platforms, the program is refused."""
    prog = _program(_platform_dependent, runner)
    assert not prog.structure.collectives and not prog.structure.manual
    with pytest.raises(ExerciseFailure, match="does not combine the shards on every path"):
        effect.require(prog, mlir.COLLECTIVES, (X,), what="f(x)", idea="shard_map", needs="combine the shards")
    both = _program(_platform_dependent, runner, platforms=("cpu", "cuda"))
    with pytest.raises(ExerciseFailure, match=r"exported for cpu, cuda, not for the grader's platform alone"):
        both.check()


def _mlp_partial_sums(x, w1, w2):  # right: only the partial products cross the mesh
    return lax.psum(jax.nn.relu(x @ w1) @ w2, "model")


def _mlp_gathers_by_psum(x, w1, w2):  # the tp_mlp: whole weights through one psum of padded shards
    i, n = lax.axis_index("model"), 4
    full1 = lax.psum(lax.dynamic_update_slice_in_dim(jnp.zeros((w1.shape[0], w1.shape[1] * n)), w1,
                                                     i * w1.shape[1], axis=1), "model")
    full2 = lax.psum(lax.dynamic_update_slice_in_dim(jnp.zeros((w2.shape[0] * n, w2.shape[1])), w2,
                                                     i * w2.shape[0], axis=0), "model")
    return jax.nn.relu(x @ full1) @ full2 / n


def test_data_movement_is_counted_in_bytes_not_by_opcode():
    mesh = jax.make_mesh((2, 4), ("data", "model"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in ((2, 16), (16, 32), (32, 2))]
    moved = {}
    for f in (_mlp_partial_sums, _mlp_gathers_by_psum):
        g = jax.shard_map(f, mesh=mesh, in_specs=(P("data", None), P(None, "model"), P("model", None)),
                          out_specs=P("data", None), check_vma=False)
        with jax.set_mesh(mesh):
            prog = judge.Exported(export.export(jax.jit(g), platforms=("cpu",))(*specs))
        assert set(prog.structure.collectives) == {"stablehlo.all_reduce"}  # the same opcode
        moved[f.__name__] = effect.collective_bytes(prog)
    assert moved["_mlp_partial_sums"] == 1 * 2 * 4  # one row of the output per device, float32
    assert moved["_mlp_gathers_by_psum"] >= 16 * 32 * 4  # the whole of w1, at least


def _collatz(n):
    def body(s):
        v, k = s
        return jnp.where(v % 2 == 0, v // 2, 3 * v + 1), k + 1
    return lax.while_loop(lambda s: s[0] != 1, body, (n, jnp.int32(0)))[1]


def _collatz_bounded(n):  # the issue's: 1000 steps and a done flag, the bound written to read n
    def body(s):
        v, k, i = s
        done = v == 1
        return jnp.where(done, v, jnp.where(v % 2 == 0, v // 2, 3 * v + 1)), jnp.where(done, k, k + 1), i + 1
    return lax.while_loop(lambda s: s[2] < 1000 + (n < 0), body, (n, jnp.int32(0), jnp.int32(0)))[1]


def test_a_loop_is_judged_by_the_trips_it_runs_not_by_its_condition(runner):
    progs = {f: judge.Exported(export.export(jax.jit(f), platforms=("cpu",))(jax.ShapeDtypeStruct((), jnp.int32)),
                               runner=runner) for f in (_collatz, _collatz_bounded)}
    for p in progs.values():
        assert int(p(np.int32(27))) == 111  # right values, both
        assert p.structure.fixed_loops == 0  # and both conditions read n
    assert not effect.runs_a_loop(progs[_collatz], (np.int32(1),))  # n = 1 takes no step: no trip
    assert effect.runs_a_loop(progs[_collatz_bounded], (np.int32(1),))  # ... but 1000 trips here


def _ema_padded(xs, a):  # the issue's: a Python loop unrolled 48 times over xs zero-padded to 48
    p = jnp.pad(xs, ((0, 48 - xs.shape[0]), (0, 0)))
    ys = [p[0]]
    for t in range(1, 48):
        ys.append(a * p[t] + (1 - a) * ys[-1])
    return jnp.stack(ys)[:xs.shape[0]]


def _ema_scan(xs, a):
    def step(y, x):
        y = a * x + (1 - a) * y
        return y, y
    return jnp.concatenate([xs[:1], lax.scan(step, xs[0], xs[1:])[1]])


def test_a_size_beyond_any_the_program_was_written_for():
    def prog(f, n):
        return judge.Exported(export.export(jax.jit(f), platforms=("cpu",))(
            jax.ShapeDtypeStruct((n, 2), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32)))

    assert prog(_ema_padded, 5).structure.total == prog(_ema_padded, 30).structure.total  # flat where published
    assert effect.largest_size(prog(_ema_padded, 5)) >= 48  # ... but padded: 48 is written in it
    assert effect.largest_size(prog(_ema_scan, 5)) < 48
    far, written = effect.beyond([prog(_ema_padded, 5), prog(_ema_padded, 30)], (5, 30), np.random.default_rng(0))
    assert written == 48 and 2 * 48 < far <= 2 * 48 + 8
    beyond = 2 * effect.largest_size(prog(_ema_padded, 30)) + 1
    with pytest.raises(ValueError):  # the padded one cannot even be made there
        prog(_ema_padded, beyond)
    assert prog(_ema_scan, beyond).structure.total == prog(_ema_scan, 5).structure.total


def test_growth_is_a_copy_per_step_and_a_size_past_every_operation():
    def prog(f, n):
        return judge.Exported(export.export(jax.jit(f), platforms=("cpu",))(
            jax.ShapeDtypeStruct((n, 2), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32)))

    def ema_unrolled(xs, a):
        ys = [xs[0]]
        for t in range(1, xs.shape[0]):
            ys.append(a * xs[t] + (1 - a) * ys[-1])
        return jnp.stack(ys)

    scan = {n: prog(_ema_scan, n).structure.total for n in (3, 24)}
    assert not effect.grows(scan[3], scan[24]) and not effect.grows(scan[3], scan[3] + 1)
    unrolled = {n: prog(ema_unrolled, n).structure.total for n in (3, 4)}
    assert effect.grows(unrolled[3], unrolled[4])  # one step more: one copy of the body more
    # A loop unrolled over a padded count is flat below it; at a size past its operations it cannot be.
    padded = [prog(_ema_padded, 5).structure, prog(_ema_padded, 30).structure]
    mid = effect.past_operations(padded, (5, 30), np.random.default_rng(0))
    assert mid > max(p.total for p in padded) and mid > 30
    with pytest.raises(ValueError):
        prog(_ema_padded, mid)


def test_the_trips_a_loop_runs_are_observed_whatever_its_condition(runner):
    progs = {f: judge.Exported(export.export(jax.jit(f), platforms=("cpu",))(jax.ShapeDtypeStruct((), jnp.int32)),
                               runner=runner) for f in (_collatz, _collatz_bounded)}
    assert effect.trip_counts(progs[_collatz], (np.int32(27),)) == [111]  # as long as n's sequence says
    assert effect.trip_counts(progs[_collatz_bounded], (np.int32(27),)) == [1000]  # a bound, whatever n is
    assert int(progs[_collatz_bounded](np.int32(27))) == 111  # ... the program itself unchanged

    def two_loops(x, n):
        y = lax.fori_loop(0, n, lambda i, c: c * 0.5 + x, jnp.zeros_like(x))
        return y, lax.scan(lambda c, _: (c + 1.0, None), 0.0, None, length=5)[0]

    p = judge.Exported(export.export(jax.jit(two_loops), platforms=("cpu",))(
        jax.ShapeDtypeStruct((3,), jnp.float32), jax.ShapeDtypeStruct((), jnp.int32)), runner=runner)
    assert effect.trip_counts(p, (np.ones(3, np.float32), np.int32(7))) == [7, 5]
    unrolled = judge.Exported(export.export(jax.jit(_ema_padded), platforms=("cpu",))(
        jax.ShapeDtypeStruct((5, 2), jnp.float32), jax.ShapeDtypeStruct((), jnp.float32)), runner=runner)
    assert effect.trip_counts(unrolled, (np.ones((5, 2), np.float32), np.float32(0.5))) == []  # no loop runs


def _walk(n):
    def step(s):
        v, k = s
        return jnp.where(v % 2 == 0, v // 2, 3 * v + 1), k + 1
    return lax.while_loop(lambda s: s[0] != 1, step, (n, jnp.int32(0)))[1]


def test_the_trips_of_loops_in_branches_and_in_loops_are_observed(runner):
    """Loops nested in a lax.cond/lax.switch branch count as the branch taken ran them (0 where
    it has none); loops nested in a loop's body count summed over its trips: a fixed bound in a
    branch that n = 1 does not take runs 1000 trips for every other n."""
    def prog(f):
        return judge.Exported(export.export(jax.jit(f), platforms=("cpu",))(jax.ShapeDtypeStruct((), jnp.int32)),
                              runner=runner)

    def in_branch(n):
        return lax.cond(n == 1, lambda n: jnp.int32(0), _walk, n)

    def bounded_in_branch(n):
        return lax.cond(n == 1, lambda n: jnp.int32(0), _collatz_bounded, n)

    def switch(n):
        return lax.switch(n % 3, [_walk, _collatz_bounded, lambda n: jnp.int32(0)], n)

    def nested(n):  # a fixed outer loop of 3 trips; the inner loop walks the sequence on the first
        return lax.fori_loop(0, 3, lambda i, s: (jnp.int32(1), s[1] + _walk(s[0])), (n, jnp.int32(0)))[1]

    def trips(f, ns):
        p = prog(f)
        return [effect.trip_counts(p, (np.int32(n),)) for n in ns]

    assert trips(in_branch, (1, 6, 27)) == [[0], [8], [111]]
    assert trips(bounded_in_branch, (1, 6, 27)) == [[0], [1000], [1000]]
    assert trips(switch, (6, 1, 27, 5)) == [[8], [1000], [111], [0]]  # n % 3: 0, 1, 0, 2
    assert trips(nested, (1, 27)) == [[3, 0], [3, 111]]  # the outer loop's, then the inner one's in all
    assert int(prog(nested)(np.int32(27))) == 111  # the program itself unchanged


def test_trips_that_do_no_work_keep_the_nudges_they_carry(runner):
    """effect.nudges_kept: each trip's changed float values nudged; a loop that recomputes its
    state from the data on every trip keeps the last nudge only, one whose trips past a count
    only carry the state on keeps one a trip (the data it reads, carried unchanged, is not
    nudged)."""
    def every_trip(x):
        return lax.fori_loop(0, 20, lambda i, c: jnp.sort(x)[:3] * 0.5 + c * 0.0, jnp.zeros(3, x.dtype))

    def first_few(x):
        return lax.fori_loop(0, 20, lambda i, c: jnp.where(i < 4, jnp.sort(x)[:3] * 0.5, c), jnp.zeros(3, x.dtype))

    x = np.linspace(-1.0, 1.0, 8).astype(np.float32)
    progs = {f: judge.Exported(export.export(jax.jit(f), platforms=("cpu",))(jax.ShapeDtypeStruct((8,), jnp.float32)),
                               runner=runner) for f in (every_trip, first_few)}
    assert np.array_equal(progs[every_trip](x), progs[first_few](x))  # the same values
    assert effect.nudges_kept(progs[every_trip], (x,), epsilon=2.0 ** -17) == 1.0
    assert effect.nudges_kept(progs[first_few], (x,), epsilon=2.0 ** -17) == 17.0  # the 4th trip's, and 16 idle
    unrolled = judge.Exported(export.export(jax.jit(lambda x: x * 2), platforms=("cpu",))(
        jax.ShapeDtypeStruct((8,), jnp.float32)), runner=runner)
    assert effect.nudges_kept(unrolled, (x,), epsilon=2.0 ** -17) is None  # no loop


def test_what_a_program_promises_about_its_indices_is_observed_with_the_indices(runner):
    """effect.index_promises: a scatter that promises sorted or unique indices is returned with the
    indices it got at run time (a CPU ignores the promise, so only those indices tell a broken
    promise from a kept one: 05's segment_mean judges with it); a program that promises nothing
    gives nothing."""
    def export_(f):
        return judge.Exported(export.export(jax.jit(f), platforms=("cpu",))(
            jax.ShapeDtypeStruct((6,), jnp.float32), jax.ShapeDtypeStruct((6,), jnp.int32)), runner=runner)

    def promised(values, ids):
        return jax.ops.segment_sum(values, ids, 4, indices_are_sorted=True)

    def unique(values, ids):
        return jnp.zeros(4).at[ids].add(values, unique_indices=True)

    def plain(values, ids):
        return jax.ops.segment_sum(values, ids, 4)

    values, ids = np.arange(6, dtype=np.float32), np.array([3, 0, 2, 0, 1, 3], np.int32)
    [(op, is_sorted, is_unique, rows)] = effect.index_promises(export_(promised), (values, ids))
    assert (op, is_sorted, is_unique) == ("scatter", True, False)
    assert [r[0] for r in rows] == ids.tolist() and rows != sorted(rows)  # the promise is broken
    [(op, is_sorted, is_unique, rows)] = effect.index_promises(export_(unique), (values, ids))
    assert (is_sorted, is_unique) == (False, True) and len(set(rows)) < len(rows)
    assert effect.index_promises(export_(plain), (values, ids)) == []
