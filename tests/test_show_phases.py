"""``ag.show_phases``: what JAX did for one call, phase by phase, and why phases ran again.

The unit tests read what the view says (its jaxpr, StableHLO, analyses, which phases ran and
why) after real calls; the browser test renders the widget in JupyterLab with Chromium."""
from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import nbformat
import pytest

import autograder as ag
from autograder.show_phases import PHASES, Phases

# The browser test reuses test_browser's JupyterLab and Chromium (module fixtures, imported).
from test_browser import NB, _open, _run_all, _saved_after_run, browser_page, lab, page  # noqa: F401

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def compiled_again(view: Phases) -> bool:
    return all(view.ran[p] for p in ("trace", "lower", "compile"))


def cache_hit(view: Phases) -> bool:
    return not any(view.ran[p] for p in ("trace", "lower", "compile"))


def test_the_view_holds_the_functions_jaxpr_stablehlo_and_analyses():
    def f(x):
        return jnp.cumsum(jnp.sin(x) * 2.0)

    x = jnp.arange(8, dtype=jnp.float32)
    view = ag.show_phases(f, x)
    assert "sin" in view.jaxpr and "cumsum" in view.jaxpr and "mul" in view.jaxpr
    assert "stablehlo.sine" in view.stablehlo and "func.func" in view.stablehlo
    assert view.memory.get("argument_size_in_bytes") == x.nbytes          # 8 float32
    assert view.memory.get("output_size_in_bytes") == x.nbytes
    assert view.cost.get("flops", 0) > 0
    assert jnp.allclose(view.result, f(x))
    assert not any("the call itself" in r for r in view.reasons()), "the call compiled again after the stages"
    assert set(view.seconds) == set(PHASES) and all(s >= 0 for s in view.seconds.values())


def test_first_call_runs_every_phase_and_a_repeated_call_hits_the_caches():
    def f(x):
        return x * 3 + 1

    first = ag.show_phases(f, jnp.ones(4))
    assert compiled_again(first) and first.call == 1
    again = ag.show_phases(f, jnp.zeros(4))           # other values, same shape and dtype
    assert cache_hit(again) and again.ran["execute"] and again.call == 2
    assert "cache hit" in again.summary()
    assert any("no trace, no compile" in r for r in again.reasons())
    assert not again.jax_says, "JAX explained a miss on a cache hit"


def test_a_seen_signature_after_clear_caches_says_the_caches_were_cleared():
    def f(x):
        return x - 1

    ag.show_phases(f, jnp.ones(2))
    jax.clear_caches()
    view = ag.show_phases(f, jnp.ones(2))
    assert compiled_again(view)
    assert "caches were cleared" in " ".join(view.reasons()), view.reasons()


def test_calls_made_before_show_phases_are_cache_hits_and_said_so():
    jitted = jax.jit(lambda x: x + 1)
    jitted(jnp.ones(2))
    jitted(jnp.ones(5))
    first = ag.show_phases(jitted, jnp.ones(2))
    assert cache_hit(first) and "cached already" in " ".join(first.reasons()), first.reasons()
    other = ag.show_phases(jitted, jnp.ones(5))
    assert cache_hit(other)
    assert "x changed shape: float32[2] -> float32[5]" in other.reasons()[0]
    assert "cached already" in other.reasons()[-1]


def test_a_program_compiled_before_is_not_compiled_again():
    def f(x):
        return jnp.cos(x) * 2

    jax.jit(f)(jnp.ones(3))            # another jit of the same function, called outside show_phases
    view = ag.show_phases(f, jnp.ones(3))
    assert not view.ran["compile"], view.summary()
    if view.ran["trace"]:              # JAX 0.12 traces again for a new jit wrapper, 0.7.2 does not
        assert "cache hit: lower, compile" in view.summary() and "traced;" in view.summary()
        assert "the trace gave a program JAX had already" in view.reasons()[-1]


def test_a_changed_shape_retraces_and_recompiles_and_says_which_argument():
    def g(x, y):
        return x @ y

    ag.show_phases(g, jnp.ones((2, 3)), jnp.ones(3))
    view = ag.show_phases(g, jnp.ones((2, 5)), jnp.ones(5))
    assert compiled_again(view)
    reasons = " ".join(view.reasons())
    assert "x changed shape: float32[2,3] -> float32[2,5]" in reasons
    assert "y changed shape: float32[3] -> float32[5]" in reasons
    assert view.jax_says and "trace cache miss" in view.jax_says[0]   # JAX's own words too
    assert "traced again" in view.summary() and "compiled again" in view.summary()


def test_a_changed_dtype_and_weak_type_are_named():
    def h(x):
        return x + 1

    ag.show_phases(h, jnp.float32(2.0))
    weak = ag.show_phases(h, 2.0)                     # a Python scalar: weakly typed
    assert compiled_again(weak)
    assert any("weak type" in r for r in weak.reasons()), weak.reasons()
    ints = ag.show_phases(h, jnp.int32(2))
    assert compiled_again(ints)
    assert any("dtype" in r and "int32[]" in r for r in ints.reasons()), ints.reasons()


def test_a_changed_pytree_structure_is_named():
    def loss(p):
        return sum(jnp.sum(v) for v in jax.tree.leaves(p))

    ag.show_phases(loss, {"w": jnp.ones(2)})
    view = ag.show_phases(loss, {"w": jnp.ones(2), "b": jnp.ones(1)})
    assert compiled_again(view)
    assert any("p['b'] is new" in r for r in view.reasons()), view.reasons()


def test_static_arguments_by_number_and_by_name():
    def power(x, n):
        return x ** n

    x = jnp.ones(3)
    ag.show_phases(power, x, 2, static_argnums=1)
    new_n = ag.show_phases(power, x, 3, static_argnums=1)
    assert compiled_again(new_n)
    assert any("static argument n changed: 2 -> 3" in r for r in new_n.reasons()), new_n.reasons()
    assert "integer_pow[y=3]" in new_n.jaxpr            # the static value is baked into the program
    assert cache_hit(ag.show_phases(power, x, 3, static_argnums=1))

    # an already jitted function keeps its own static arguments
    jitted = jax.jit(power, static_argnames="n")
    ag.show_phases(jitted, x, n=2)
    view = ag.show_phases(jitted, x, n=5)
    assert compiled_again(view) and "integer_pow[y=5]" in view.jaxpr
    assert any("static argument n changed: 2 -> 5" in r for r in view.reasons()), view.reasons()
    assert cache_hit(ag.show_phases(jitted, x, n=5))


def test_text_fallback_without_ipywidgets(monkeypatch):
    def f(x):
        return jnp.tanh(x)

    view = ag.show_phases(f, jnp.ones(2))
    text = str(view)
    assert text == repr(view)
    assert "tanh" in text and "timeline" in text
    assert all(f"  {p} " in text for p in PHASES), text
    monkeypatch.setitem(sys.modules, "ipywidgets", None)    # import ipywidgets now fails
    assert view.widget() is None
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda data, raw=False: shown.append(data))
    view._ipython_display_()                                 # no kernel, no ipywidgets
    assert len(shown) == 1 and WIDGET_VIEW not in shown[0]
    assert "tanh" in shown[0]["text/plain"] and "show-phases-timeline" in shown[0]["text/html"]


def test_html_for_a_static_page():
    def f(x):
        return jnp.exp(x)

    page_html = ag.show_phases(f, jnp.ones(2))._repr_html_()
    assert page_html.count('class="phase-bar"') == len(PHASES)
    assert "exp" in page_html and "<details" in page_html and "StableHLO" in page_html


def test_widget_has_the_timeline_and_the_jaxpr_open():
    import ipywidgets as widgets

    def f(x):
        return jnp.log1p(x)

    view = ag.show_phases(f, jnp.ones(2))
    box = view.widget()
    assert isinstance(box, widgets.VBox)
    html_parts = [c.value for c in box.children if isinstance(c, widgets.HTML)]
    assert any("show-phases-timeline" in h for h in html_parts)
    accordion = next(c for c in box.children if isinstance(c, widgets.Accordion))
    assert accordion.selected_index == 0 and "log1p" in accordion.children[0].value
    titles = [accordion.get_title(i) for i in range(len(accordion.children))]
    assert titles[0].startswith("jaxpr") and titles[1].startswith("StableHLO")


# -- in a real browser


def _demo_notebook(folder):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell("import jax.numpy as jnp\nimport autograder as ag\n\n"
                                          "def f(x):\n    return jnp.sin(x).sum()\n\n"
                                          "ag.show_phases(f, jnp.ones(3))"),
                nbformat.v4.new_code_cell("ag.show_phases(f, jnp.ones(4))")]
    path = folder / "show_phases_demo.ipynb"
    nbformat.write(nb, str(path))
    return path.name


@pytest.mark.notebook
@pytest.mark.slow
@pytest.mark.slow_env
@pytest.mark.xdist_group("browser")
def test_widget_renders_in_jupyterlab(page, lab):  # noqa: F811 - test_browser's fixtures
    """In JupyterLab (Chromium), each call's widget shows the jaxpr and a timeline of four
    bars; the second call's says why it traced again."""
    path = _demo_notebook(lab[2])
    _open(page, lab, path)
    _run_all(page)
    views = page.locator(f"{NB} .show-phases.widget-vbox")
    views.nth(1).wait_for(state="attached")
    assert views.count() == 2
    first, second = views.nth(0), views.nth(1)
    assert "= sin " in first.inner_text(), "the first view does not show the jaxpr open"
    assert "\x1b" not in first.inner_text(), "the jaxpr is shown with the terminal's colour codes"
    assert first.locator(".phase-bar").count() == len(PHASES)
    assert second.locator(".phase-bar").count() == len(PHASES)
    text = second.inner_text()
    assert "x changed shape: float32[3] -> float32[4]" in text and "traced again" in text
    saved = _saved_after_run(page, lab, path)
    assert all(WIDGET_VIEW in o.get("data", {}) for c in saved.cells for o in c.outputs
               if o.output_type == "display_data")


def test_jaxs_explanation_is_the_traces_own_and_whole():
    def k(x):
        return jnp.tanh(x @ x).sum()

    for n in (16, 8):
        ag.show_phases(k, jnp.ones((n, n)))
    view = ag.show_phases(k, jnp.ones((12, 12)))
    assert "x changed shape: float32[8,8] -> float32[12,12]" in " ".join(view.reasons())
    # one explanation (the trace's), whole: JAX compares with the closest key it holds, and says so
    [said] = view.jax_says
    assert "closest previous key" in said and "now f32[12,12] and before f32[16,16]" in said
    assert "TRACING CACHE MISS at" not in said


def test_stage_times_are_jaxs_own_durations():
    # the view's bookkeeping (signatures, cache-miss capture) is not in a stage's time: a stage that
    # ran takes the duration JAX itself reported for it
    import jax.monitoring

    reported, x = [], jnp.ones(3)

    def listener(event, duration, **kwargs):
        if event == "/jax/core/compile/jaxpr_trace_duration":
            reported.append(duration)

    jax.monitoring.register_event_duration_secs_listener(listener)

    def m(x):
        return x + 1

    view = ag.show_phases(m, x)
    assert compiled_again(view) and reported
    assert view.seconds["trace"] == reported[0]   # the stage's trace; the call itself may trace again
