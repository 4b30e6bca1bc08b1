"""Feedback points where the learner's own chapter teaches the case (issue 21, item 3): a
concretization error in 04's exercises is sent to 04, a Python `if` inside a loop body is told
apart from one at top level, and an eager key reuse is not said to be jit-compiled."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import autograder as ag
from autograder import feedback
from autograder.feedback import TAUGHT_IN, explain_error, where


def _error(f, *args):
    try:
        f(*args)
    except Exception as exc:  # noqa: BLE001
        return exc
    pytest.fail("no error")


def _explained(exc, what="`f`"):
    return explain_error([c.__name__ for c in type(exc).__mro__], str(exc), what)


def _if_body(c):
    return c + 1 if c > 3 else c + 2


@pytest.mark.parametrize("loop, construct", [
    (lambda x: jax.lax.while_loop(lambda c: c < 10, _if_body, x), "lax.while_loop"),
    (lambda x: jax.lax.fori_loop(0, 3, lambda i, c: _if_body(c), x), "lax.fori_loop"),
    (lambda x: jax.lax.scan(lambda c, _: (_if_body(c), None), x, None, length=3)[0], "lax.scan"),
])
def test_python_if_inside_a_loop_body_is_told_apart(loop, construct):
    err = _explained(_error(jax.jit(loop), 1.0))
    assert err.idea == "branches"
    assert f"inside the body of `{construct}`" in str(err)
    assert "jnp.where" not in err.detail and "lax.cond" not in err.detail
    assert str(err).endswith(f"({where('branches')}.)")


def test_python_if_at_top_level_keeps_its_message():
    err = _explained(_error(jax.jit(_if_body), 1.0))
    assert err.idea == "control_flow" and "inside the body" not in str(err)
    assert "used a traced value in a Python `if`/`while`" in str(err)


def _concretize(x):
    return jnp.zeros(3) * float(x)


def test_concretization_points_to_the_chapter_that_teaches_it():
    exc = _error(jax.jit(_concretize), 1.0)
    assert _explained(exc).idea == "static"  # no chapter known: chapter 02's static arguments
    with feedback.chapter("04_control_flow"):
        assert _explained(exc).idea == "control_flow"
        assert TAUGHT_IN["control_flow"][0] == "04_control_flow"
    with feedback.chapter("06_async_dispatch"):
        assert _explained(exc).idea == "async"
    with feedback.chapter("07_pytrees"):  # teaches no such case: the default
        assert _explained(exc).idea == "static"
    assert explain_error(["ConcretizationTypeError"], "x", "`f`", concrete_idea="async").idea == "async"


def test_a_judge_files_chapter_is_found_on_the_stack():
    exc = _error(jax.jit(_concretize), 1.0)
    namespace = {"__name__": "_autograder_judge_04_control_flow_judge_clip_by_norm", "ag": ag, "exc": exc}
    exec("def test(e):\n    return ag.feedback._explain(e, '`clip_by_norm`')", namespace)  # noqa: S102
    assert namespace["test"](exc).idea == "control_flow"
    assert feedback.current_chapter() is None or feedback.current_chapter() != "04_control_flow"


def test_notebook_session_names_the_chapter(monkeypatch):
    monkeypatch.setenv("JPY_SESSION_NAME", "/home/me/course/exercises/06_async_dispatch/06_async_dispatch.ipynb")
    assert feedback.current_chapter() == "06_async_dispatch"
    exc = _error(jax.jit(_concretize), 1.0)
    assert _explained(exc).idea == "async"


def test_eager_key_reuse_is_not_called_jit_compiled():
    def init(key):
        return jax.random.normal(key, (2,)), jax.random.normal(key, (2,))

    with pytest.raises(ag.ExerciseFailure) as info:
        ag.check_no_key_reuse(init, (jax.random.key(0),), jit=False, what="init_mlp(key, sizes)")
    assert info.value.idea == "key_reuse"
    assert "jit" not in str(info.value).split("(see")[0]
    assert "init_mlp(key, sizes) consumed the same key more than once" in str(info.value)


def test_key_reuse_keeps_jaxs_word_on_which_call_reused_it():
    def init(key):
        w = jax.random.normal(key, (2,))
        return w, jax.random.split(key)

    with pytest.raises(ag.ExerciseFailure) as info:
        ag.check_no_key_reuse(init, (jax.random.key(0),), jit=False, what="init_mlp(key, sizes)")
    assert "random_split" in str(info.value), str(info.value)
