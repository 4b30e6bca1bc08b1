"""`autograder.review`: each answer changes when the function changes in the way it asks about."""
from __future__ import annotations

import json
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from autograder.review import QUESTIONS, Review, review

from conftest import ROOT

X = jnp.arange(1.0, 4.0)


# -------------------------------------------------------------- Python decisions on traced values

def branch_if(x):
    if x.sum() > 0:
        return x
    return -x


def branch_where(x):
    return jnp.where(x.sum() > 0, x, -x)


def test_python_if_on_traced_value_vs_where():
    bad = review(branch_if, X)
    assert bad["decisions"].verdict == "fail"
    assert bad.trace_error["type"] == "TracerBoolConversionError"
    assert "x.sum() > 0" in bad.trace_error["line"]
    assert not bad.jitted and not bad.ok
    good = review(branch_where, X)
    assert good["decisions"].verdict == "ok"
    assert good.trace_error is None and good.jitted
    assert "select_n" in good.primitives


# -------------------------------------------------------------------------------- key reuse

def noise_reused(key, x):
    return x + jax.random.normal(key, x.shape) + jax.random.uniform(key, x.shape)


def noise_split(key, x):
    k1, k2 = jax.random.split(key)
    return x + jax.random.normal(k1, x.shape) + jax.random.uniform(k2, x.shape)


def test_key_reuse_vs_split():
    bad = review(noise_reused, jax.random.key(0), X, eager=False)
    assert bad["randomness"].verdict == "fail"
    assert bad.key_reuse
    good = review(noise_split, jax.random.key(0), X, eager=False)
    assert good["randomness"].verdict == "ok"
    assert good.key_reuse is None and good.keys_consumed


def test_review_never_consumes_the_callers_key():
    key = jax.random.key(1)
    review(noise_split, key, X)
    with jax.debug_key_reuse(True):
        noise_split(key, X)  # still usable: the review worked on copies


def test_hidden_numpy_randomness_is_not_explicit():
    def np_noise(x):
        return x + np.random.normal(size=x.shape).astype(np.float32)

    r = review(np_noise, X)
    assert r.deterministic is False
    assert r["randomness"].verdict == "fail"
    assert r.constants, "the NumPy draw is baked in as a constant at trace time"
    assert review(lambda x: x * 2, X).deterministic is True


def test_ignored_key_is_a_warning():
    r = review(lambda key, x: x * 2, jax.random.key(0), X)
    assert r.keys_consumed is False
    assert r["randomness"].verdict == "warn"


# ------------------------------------------------------------------ static vs dynamic, compiles

def power(x, n):
    y = x
    for _ in range(n - 1):
        y = y * x
    return y


def test_static_vs_dynamic_argument():
    dyn = review(power, X, 3)
    assert [a["kind"] for a in dyn.arguments] == ["dynamic", "dynamic"]
    assert dyn["static"].verdict == "fail"
    assert dyn.trace_error["type"] == "TracerIntegerConversionError"
    stat = review(power, X, 3, static_argnames="n")
    assert [a["kind"] for a in stat.arguments] == ["dynamic", "static"]
    assert stat["static"].verdict == "ok" and stat.jitted
    by_num = review(power, X, 3, static_argnums=1)
    assert by_num.arguments == stat.arguments and by_num.jitted


def test_compiles_counted_and_explained():
    calls = [(X, 2), (X, 3), (X, 3), (X + 1, 2)]
    r = review(power, X, 2, static_argnames="n", calls=calls, eager=False)
    assert (r.calls, r.traces, r.compiles) == (4, 2, 2)
    assert r["boundary"].verdict == "warn"
    assert any("3" in m and "2" in m for m in r.cache_misses), r.cache_misses
    same = review(power, X, 2, static_argnames="n", calls=[(X, 2), (X + 1, 2)], eager=False)
    assert (same.traces, same.compiles) == (1, 1) and same["boundary"].verdict == "ok"


def test_static_float_is_flagged():
    r = review(lambda x, s: x * s, X, 0.5, static_argnums=1, eager=False)
    assert r["static"].verdict == "warn"
    assert review(lambda x, s: x * s, X, 0.5, eager=False)["static"].verdict == "ok"


def test_a_jit_made_every_call_recompiles():
    def jit_inside(x):
        return jax.jit(lambda y: y * 2)(x).sum().item()

    r = review(jit_inside, X)
    assert not r.jitted
    assert r.eager_compiles and r.eager_compiles >= 1
    assert any("seen another function" in m for m in r.cache_misses), r.cache_misses


# ------------------------------------------------------------------------- host transfers

def with_float(x):
    return x * float(x.sum())


def without_float(x):
    return x * x.sum()


def test_float_inside_vs_not():
    bad = review(with_float, X)
    assert bad["transfers"].verdict == "fail"
    assert bad.trace_error["question"] == "transfers"
    assert bad.host_reads and bad.host_reads >= 1
    good = review(without_float, X)
    assert good["transfers"].verdict == "ok"
    assert good.host_reads == 0


def test_host_callback_is_reported():
    def with_callback(x):
        jax.debug.callback(lambda v: None, x)
        return x * 2

    r = review(with_callback, X, eager=False)
    assert r.callbacks and r["transfers"].verdict == "warn"


# ---------------------------------------------------- fewer, larger regions; the jaxpr itself

def three_jits(x):
    a = jax.jit(jnp.sin)(x)
    b = jax.jit(jnp.cos)(a)
    return jax.jit(jnp.exp)(b)


def test_dispatches_and_regions():
    r = review(three_jits, X)
    assert (r.dispatches, r.jitted_regions) == (3, 3)
    assert r["regions"].verdict == "warn"
    one = review(jax.jit(three_jits), X)
    assert one.dispatches == 1 and one["regions"].verdict == "ok"


def unrolled(x):
    for _ in range(8):
        x = jnp.sin(x) * 2 + 1
    return x


def rolled(x):
    return jax.lax.fori_loop(0, 8, lambda i, x: jnp.sin(x) * 2 + 1, x)


def test_unrolled_loop_vs_fori_loop():
    bad = review(unrolled, X, eager=False)
    assert bad.repeated_block and bad.repeated_block[1] == 8
    assert bad["regions"].verdict == "warn"
    good = review(rolled, X, eager=False)
    assert good.repeated_block is None
    assert {"while", "scan"} & set(good.primitives)
    assert good.jaxpr_size < bad.jaxpr_size


# ------------------------------------------------------------------------------ rendering

def test_report_renders_and_serialises():
    r = review(branch_where, X)
    assert isinstance(r, Review)
    assert [f.question for f in r.findings] == list(QUESTIONS.values())
    text = str(r)
    assert all(q in text for q in QUESTIONS.values())
    assert "<table" in r._repr_html_()
    json.dumps(r.to_dict(), default=str)


def test_command_line(tmp_path):
    mod = tmp_path / "reviewed_mod.py"
    mod.write_text("import jax.numpy as jnp\n\ndef f(x):\n    if x.sum() > 0:\n        return x\n    return -x\n")
    proc = subprocess.run([sys.executable, "-m", "autograder", "review", "reviewed_mod:f",
                           "--args", "jnp.ones(3)", "--json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["trace_error"]["type"] == "TracerBoolConversionError"
    text = subprocess.run([sys.executable, "-m", "autograder", "review", "reviewed_mod:f",
                           "--args", "jnp.ones(3)"], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, env={**__import__("os").environ, "PYTHONPATH": str(tmp_path)})
    assert "Are Python decisions made on traced values?" in text.stdout


@pytest.mark.parametrize("bad", ["nomodule_xyz:f", "json:nothing_here"])
def test_command_line_bad_target(bad):
    proc = subprocess.run([sys.executable, "-m", "autograder", "review", bad, "--args", "1.0"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode != 0 and proc.stderr.strip()
