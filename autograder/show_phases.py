"""``show_phases(f, *args)``: what JAX did for one call of ``f``, phase by phase.

JAX runs a jitted call in four phases: it *traces* the Python function to a jaxpr, *lowers* the
jaxpr to StableHLO, *compiles* that with XLA, and *executes* the compiled program. Each of the
first three is cached, keyed by the call's abstract signature (shapes, dtypes, weak types, the
static arguments' values, the pytree structure). :func:`show_phases` runs the phases with JAX's
own ahead-of-time stages, each timed::

    traced = jax.jit(f).trace(*args)     # the jaxpr
    lowered = traced.lower()             # StableHLO
    compiled = lowered.compile()         # cost_analysis(), memory_analysis()
    jax.jit(f)(*args)                    # the call, executed

and shows what came out of each: the jaxpr, the StableHLO (collapsed), the compiled module's cost
and memory analysis, and a timeline with a bar per phase. Which phases *ran* is JAX's own word:
the events JAX records when it traces, lowers or compiles (``jax.monitoring``); a stage that
records none was answered from JAX's cache. Called again for the same function, it says which
phases ran again and why: the argument whose shape or dtype changed, the static argument whose
value is new, compared with the previous call, and JAX's own explanation of the trace's miss,
whole (``jax_explain_cache_misses``, which compares with the closest signature in JAX's cache,
not necessarily the previous call). The trace, lower and compile times are JAX's own measures
of them (its ``jax.monitoring`` durations) where they ran, so the view's bookkeeping is not in
them.

In a notebook the result renders as an ipywidgets view (ipywidgets 7 and 8); elsewhere as text
(``print(view)``) or HTML (a static page).
"""
from __future__ import annotations

import html
import inspect
import re
import time
import weakref
from dataclasses import dataclass, field

PHASES = ("trace", "lower", "compile", "execute")
# the CompileCounter count that JAX's jax.monitoring events raise when a phase really runs; none: a cache hit
_COUNTS = {"trace": "traces", "lower": "lowerings", "compile": "compiles"}
_DOING = {"trace": "traced", "lower": "lowered", "compile": "compiled", "execute": "executed"}
_COLOUR = {"trace": "#0969da", "lower": "#8250df", "compile": "#bf3989", "execute": "#1a7f37", "hit": "#afb8c1"}
_WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_SHOWN_LINES = 400  # of a jaxpr or StableHLO shown in the view (the whole text is in .jaxpr, .stablehlo)
# the same, with JAX's own instruments (the view's last line)
_JAX_OWN = ("jax.jit(f).trace(*args).jaxpr; .lower() then .as_text(); .compile() then .cost_analysis(), "
             ".memory_analysis(); jax.config.update('jax_explain_cache_misses', True); "
             "jax.monitoring.register_event_duration_secs_listener")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")  # JAX colours a jaxpr printed in IPython


@dataclass
class _History:
    """What :func:`show_phases` remembers of one function: its jit and the calls' signatures."""
    jitted: object
    signatures: list = field(default_factory=list)


_HISTORY: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_STRONG: dict = {}  # functions that cannot be weakly referenced


def _history(f, static_argnums, static_argnames) -> _History:
    import jax

    key = (static_argnums, static_argnames)
    try:
        per_f = _HISTORY.setdefault(f, {})
    except TypeError:
        per_f = _STRONG.setdefault(f, {})
    if key not in per_f:
        jitted = f if hasattr(f, "trace") and hasattr(f, "lower") else \
            jax.jit(f, static_argnums=static_argnums, static_argnames=static_argnames)
        per_f[key] = _History(jitted)
    return per_f[key]


def _parameters(f) -> list[str]:
    """The names of ``f``'s positional parameters (empty where it has no signature)."""
    try:
        return [p.name for p in inspect.signature(f).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        return []


def _type_of(leaf) -> tuple:
    """A leaf's abstract type as jit keys its cache on it: ``(dtype, shape, weak type)``."""
    import jax

    try:
        aval = jax.typeof(leaf)
    except Exception:  # noqa: BLE001 - not an array: jit will say so when it traces
        return ("not an array", type(leaf).__name__)
    return (str(aval.dtype), tuple(aval.shape), bool(getattr(aval, "weak_type", False)))


def _describe(entry: tuple) -> str:
    """A signature entry in words: ``float32[4,3]``, ``float32[] (weak)``, ``static 3``."""
    if len(entry) == 2:
        return f"{entry[0]} {entry[1]}"
    dtype, shape, weak = entry
    return f"{dtype}[{','.join(map(str, shape))}]" + (" (weak)" if weak else "")


def _signature(f, args, kwargs, static_argnums, static_argnames) -> dict:
    """``{argument path: entry}`` of one call, as jit's cache key sees it: ``("static", repr)``
    for a static argument, else each array leaf's :func:`_type_of` (``x``, ``params['w']``)."""
    import jax

    params = _parameters(f)
    static = {params[i] for i in static_argnums if -len(params) <= i < len(params)} | set(static_argnames)
    static_positions = {i % len(args) for i in static_argnums if -len(args) <= i < len(args)}
    named = [(params[i] if i < len(params) else f"arg{i}", i in static_positions, value)
             for i, value in enumerate(args)]
    named += [(name, False, value) for name, value in kwargs.items()]
    sig = {}
    for name, is_static, value in named:
        if is_static or name in static:
            sig[name] = ("static", repr(value))
            continue
        leaves, tree = jax.tree_util.tree_flatten_with_path(value)
        if not leaves:
            sig[name] = ("empty", str(tree))
        for path, leaf in leaves:
            sig[name + jax.tree_util.keystr(path)] = _type_of(leaf)
    return sig


def _differences(now: dict, before: dict) -> list[str]:
    """What differs between two call signatures, in words."""
    out = []
    for name, new in now.items():
        old = before.get(name)
        if old is None:
            out.append(f"{name} is new ({_describe(new)}): the arguments' pytree structure changed")
        elif new == old:
            continue
        elif new[0] == old[0] == "static":
            out.append(f"static argument {name} changed: {old[1]} -> {new[1]} "
                       "(a static argument's value is part of the cache key)")
        else:
            changed = [what for what, a, b in zip(("dtype", "shape", "weak type"), old, new)
                       if len(old) == len(new) == 3 and a != b] or ["type"]
            note = " (a Python scalar is weakly typed, an array is not)" if "weak type" in changed else ""
            what = " and ".join([", ".join(changed[:-1]), changed[-1]] if len(changed) > 1 else changed)
            out.append(f"{name} changed {what}: {_describe(old)} -> {_describe(new)}{note}")
    out += [f"{name} is gone (was {_describe(old)}): the arguments' pytree structure changed"
            for name, old in before.items() if name not in now]
    return out


def _clipped(text: str) -> str:
    """``text``'s first _SHOWN_LINES lines, and how many more there are."""
    lines = text.splitlines()
    if len(lines) <= _SHOWN_LINES:
        return text
    return "\n".join(lines[:_SHOWN_LINES] + [f"... {len(lines) - _SHOWN_LINES} more lines"])


def _cost(compiled) -> dict:
    """``compiled.cost_analysis()`` as one dict (older JAX versions return a list of dicts, one
    per program; newer ones a dict; a backend may have none)."""
    try:
        cost = compiled.cost_analysis()
    except Exception:  # noqa: BLE001 - a backend without cost analysis
        return {}
    if isinstance(cost, (list, tuple)):
        cost = cost[0] if cost else {}
    return {k: float(v) for k, v in (cost or {}).items() if "{" not in k}


def _memory(compiled) -> dict:
    """``compiled.memory_analysis()``'s byte counts, by name (``argument_size_in_bytes``...)."""
    try:
        stats = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - a backend without memory analysis
        return {}
    if stats is None:
        return {}
    sizes = {name: int(getattr(stats, name)) for name in dir(stats)
             if name.endswith("_in_bytes") and not name.startswith("_")}
    return {k: v for k, v in sizes.items() if v or not k.startswith("host_")}


@dataclass
class Phases:
    """One :func:`show_phases` call: what each phase produced, took, and whether it ran."""
    function: str
    call: int                                    # this function's call number (1, 2, ...)
    ran: dict                                    # phase -> True (ran) / False (JAX's cache answered)
    seconds: dict                                # phase -> wall seconds of its stage
    why: list                                    # why the phases ran, or did not, in words
    jax_says: list                               # JAX's own cache-miss explanations
    signature: dict                              # argument -> its type, or static value, in words
    jaxpr: str
    stablehlo: str
    cost: dict
    memory: dict
    result: object = field(repr=False, default=None)

    # -- words
    def summary(self) -> str:
        """One line: which phases ran (and, on a later call, which were cache hits)."""
        ran = [_DOING[p] for p in PHASES[:3] if self.ran[p]]
        hits = [p for p in PHASES[:3] if not self.ran[p]]
        again = " again" if self.call > 1 else ""
        if not hits:
            head = ", ".join(f"{p}{again}" for p in ran) + ", executed"
        elif not ran:
            head = "cache hit for trace, lower and compile: only executed"
        else:
            head = ", ".join(f"{p}{again}" for p in ran) + "; cache hit: " + ", ".join(hits) + "; executed"
        return f"show_phases({self.function}), call {self.call}: {head}"

    def reasons(self) -> list[str]:
        """Why the phases ran (again), or did not, in words."""
        return list(self.why)

    def spans(self) -> list[tuple[str, float, float]]:
        """(phase, start, seconds) of each stage on one time axis: they ran one after another."""
        out, start = [], 0.0
        for p in PHASES:
            out.append((p, start, self.seconds[p]))
            start += self.seconds[p]
        return out

    def timeline_text(self, width: int = 40) -> list[str]:
        total = sum(self.seconds.values()) or 1.0
        lines = []
        for p, start, s in self.spans():
            left = min(width - 1, round(width * start / total))
            bar = " " * left + "#" * max(1, min(width - left, round(width * s / total)))
            state = "ran" if self.ran[p] else "cache hit"
            lines.append(f"  {p:<8} |{bar:<{width}}| {s * 1e3:9.2f} ms  {state}")
        lines.append(f"  {'total':<8}  {'':<{width}}  {total * 1e3:9.2f} ms")
        return lines

    def __str__(self) -> str:
        lines = [self.summary(), "why:"] + [f"  {r}" for r in self.reasons()]
        lines += [f"  JAX's own explanation of the trace: {m}" for m in self.jax_says]
        lines += ["timeline (each stage's wall time, one after another):"] + self.timeline_text()
        lines += ["jaxpr:"] + [f"  {ln}" for ln in _clipped(self.jaxpr).splitlines()]
        if self.cost:
            lines.append("cost analysis: " + ", ".join(f"{k} {v:g}" for k, v in sorted(self.cost.items())))
        if self.memory:
            lines.append("memory analysis: " + ", ".join(f"{k.removesuffix('_in_bytes')} {v} B"
                                                         for k, v in self.memory.items()))
        lines.append(f"StableHLO: {len(self.stablehlo.splitlines())} lines (.stablehlo)")
        lines.append(f"with JAX's own instruments: {_JAX_OWN}")
        return "\n".join(lines)

    __repr__ = __str__

    # -- HTML
    def timeline_html(self) -> str:
        total = sum(self.seconds.values()) or 1.0
        rows = []
        for p, start, s in self.spans():
            left, width = 100 * start / total, max(0.4, 100 * s / total)
            colour = _COLOUR[p] if self.ran[p] else _COLOUR["hit"]
            state = "ran" if self.ran[p] else "cache hit"
            rows.append(
                f'<div class="phase-row" style="display:flex;align-items:center;margin:2px 0">'
                f'<span style="width:5.5em">{p}</span>'
                f'<span style="flex:1;background:#f6f8fa"><span class="phase-bar" data-phase="{p}" '
                f'style="display:block;height:1em;margin-left:{min(left, 99.6):.1f}%;width:{width:.1f}%;'
                f'background:{colour}"></span></span>'
                f'<span style="width:11em;text-align:right">{s * 1e3:.2f} ms, {state}</span></div>')
        rows.append(f'<div style="text-align:right">total {total * 1e3:.2f} ms</div>')
        return '<div class="show-phases-timeline">' + "".join(rows) + "</div>"

    def header_html(self) -> str:
        why = "".join(f"<li>{html.escape(r)}</li>" for r in self.reasons())
        why += "".join(f"<li>JAX's own explanation of the trace: <code>{html.escape(m)}</code></li>"
                       for m in self.jax_says)
        return f"<b>{html.escape(self.summary())}</b><ul style='margin:2px 0'>{why}</ul>"

    def sections(self) -> list[tuple[str, str]]:
        """(title, HTML) of the collapsible parts: the jaxpr, StableHLO, cost, memory."""
        def pre(text):
            return f'<pre style="max-height:24em;overflow:auto;margin:0">{html.escape(_clipped(text))}</pre>'

        def table(d, unit=""):
            if not d:
                return "<i>not available on this backend</i>"
            rows = "".join(f"<tr><td>{html.escape(k)}</td><td style='text-align:right'>{v:g}{unit}</td></tr>"
                           for k, v in d.items())
            return f"<table>{rows}</table>"

        return [("jaxpr (traced)", pre(self.jaxpr)),
                (f"StableHLO (lowered, {len(self.stablehlo.splitlines())} lines)", pre(self.stablehlo)),
                ("cost analysis (compiled)", table(self.cost)),
                ("memory analysis (compiled)", table(self.memory, " B"))]

    def _repr_html_(self) -> str:
        parts = "".join(f"<details{' open' if i == 0 else ''}><summary>{html.escape(t)}</summary>{body}</details>"
                        for i, (t, body) in enumerate(self.sections()))
        return (f'<div class="show-phases">{self.header_html()}{self.timeline_html()}{parts}'
                f'{self.instruments_html()}</div>')

    def instruments_html(self) -> str:
        return f"<div style='color:#57606a'>with JAX's own instruments: <code>{html.escape(_JAX_OWN)}</code></div>"

    # -- widget
    def widget(self):
        """The ipywidgets view (ipywidgets 7 and 8): header, timeline, and an Accordion with the
        jaxpr open; None without ipywidgets."""
        try:
            import ipywidgets as w
        except ImportError:
            return None
        sections = self.sections()
        accordion = w.Accordion(children=[w.HTML(body) for _, body in sections])
        for i, (title, _) in enumerate(sections):
            accordion.set_title(i, title)   # ipywidgets 7 and 8 (8's titles= is not in 7)
        accordion.selected_index = 0
        view = w.VBox([w.HTML(self.header_html()), w.HTML(self.timeline_html()), accordion,
                       w.HTML(self.instruments_html())])
        view.add_class("show-phases")
        return view

    def _ipython_display_(self):
        from IPython import get_ipython
        from IPython.display import display

        data = {"text/plain": str(self), "text/html": self._repr_html_()}
        view = self.widget() if getattr(get_ipython(), "kernel", None) is not None else None
        if view is not None:
            # the widget where a widget manager renders it (JupyterLab, Colab), the HTML on a
            # static page, the text in a terminal
            data[_WIDGET_VIEW] = {"version_major": 2, "version_minor": 0, "model_id": view.model_id}
        display(data, raw=True)


def show_phases(f, *args, static_argnums=(), static_argnames=(), **kwargs) -> Phases:
    """Run ``jax.jit(f)(*args, **kwargs)`` phase by phase and show what each phase did.

    ``f``: a function, or an already jitted one (its own static arguments then apply).
    ``static_argnums``/``static_argnames``: as for ``jax.jit``. The view lists the jaxpr, the
    StableHLO, the compiled module's cost and memory analysis, and a timeline of the trace,
    lower, compile and execute stages; a phase that JAX answered from its cache is marked
    "cache hit". Called again for the same ``f``, it says which phases ran again and why.
    ``.result`` is the call's output.
    """
    import jax

    from .compilation import CompileCounter
    from .review import capture_cache_misses

    static_argnums = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    static_argnames = (static_argnames,) if isinstance(static_argnames, str) else tuple(static_argnames)
    history = _history(f, static_argnums, static_argnames)
    jitted, fun = history.jitted, f
    if jitted is f:  # already jitted: its own static arguments (JAX's PjitInfo, where it has one)
        info = getattr(f, "_jit_info", None)
        fun = getattr(f, "_fun", f)
        static_argnums += tuple(getattr(info, "static_argnums", ()))
        static_argnames += tuple(getattr(info, "static_argnames", ()))
    sig = _signature(fun, args, kwargs, static_argnums, static_argnames)

    seconds = {}
    with CompileCounter(fresh=False) as stages:
        with capture_cache_misses() as misses:   # the trace's own miss, explained by JAX
            start = time.perf_counter()
            traced = jitted.trace(*args, **kwargs)
            seconds["trace"] = time.perf_counter() - start
        start = time.perf_counter()
        lowered = traced.lower()
        seconds["lower"] = time.perf_counter() - start
        start = time.perf_counter()
        compiled = lowered.compile()
        seconds["compile"] = time.perf_counter() - start
    with CompileCounter(fresh=False) as execute:
        start = time.perf_counter()
        result = jax.block_until_ready(jitted(*args, **kwargs))
        seconds["execute"] = time.perf_counter() - start
    ran = {p: getattr(stages, _COUNTS[p]) > 0 for p in PHASES[:3]} | {"execute": True}
    for p in PHASES[:3]:  # a stage that ran: JAX's own duration of it, without this function's bookkeeping
        if ran[p] and stages.seconds[_COUNTS[p]] > 0:
            seconds[p] = stages.seconds[_COUNTS[p]]
    # the call did not find the stages' work
    again = [_DOING[p] for p in PHASES[:3] if getattr(execute, _COUNTS[p])]

    why = _why(sig, history.signatures, ran)
    if again:
        why.append(f"the call itself {' and '.join(again)} again: this JAX version keeps the jitted call's "
                   "cache apart from the stages' (execute's time includes it)")
    history.signatures.append(sig)
    return Phases(function=getattr(f, "__name__", None) or type(f).__name__, call=len(history.signatures),
                  ran=ran, seconds=seconds, why=why, signature={k: _describe(v) for k, v in sig.items()},
                  jax_says=[_explanation(m) for m in misses if m.strip()],
                  jaxpr=_ANSI.sub("", str(traced.jaxpr)), stablehlo=lowered.as_text(),
                  cost=_cost(compiled), memory=_memory(compiled), result=result)


def _explanation(message: str) -> str:
    """One ``jax_explain_cache_misses`` message, whole, on one line, without where it was logged
    from: "TRACING CACHE MISS at <file> (<function>): for f defined at ...: <why>"."""
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    kind = "trace cache miss" if "TRACING" in lines[0] else lines[0].split(" at ")[0].lower()
    why = " ".join(ln for ln in lines[1:] if not ln.startswith("for "))
    return re.sub(r" id=\d+", "", f"{kind}: {why}".replace(": * ", ": ").replace(" * ", "; "))


def _why(sig: dict, before: list, ran: dict) -> list[str]:
    """Why the phases ran (``ran``: phase -> ran), or did not, given the signatures of this
    function's earlier calls ``before``."""
    seen = [i + 1 for i, old in enumerate(before) if old == sig]
    redone = [p for p in PHASES[:3] if ran[p]]
    kept = [p for p in PHASES[:3] if not ran[p]]
    if not redone and seen:
        return [f"same abstract signature as call {seen[-1]}: JAX reused the traced, lowered and compiled "
                "program (no trace, no compile)"]
    if not redone:
        return (_differences(sig, before[-1]) if before else []) + [
            "JAX had this signature cached already, from an earlier call of the same function: nothing was "
            "traced, lowered or compiled"]
    if seen:
        why = [f"same abstract signature as call {seen[-1]}, yet JAX ran phases again: its caches were "
               "cleared (jax.clear_caches) or the entry was evicted"]
    elif not before:
        why = ["first call seen here: not in JAX's trace cache for this function and signature"]
    else:
        why = _differences(sig, before[-1])
    if kept:
        why.append(f"{' and '.join(kept)}: cache hit, the trace gave a program JAX had already "
                   f"{' and '.join(_DOING[p] for p in kept)} (the same computation, traced before)")
    return why
