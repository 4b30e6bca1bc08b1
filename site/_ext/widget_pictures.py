"""Sphinx extension: every ipywidgets view in an executed notebook becomes a static picture of
what the build's run left in it: each control's label and value, and what each Output widget
captured (text, plots, HTML). A reader sees the view without a kernel, and the page loads no
widget JavaScript (conf.py sets ``nb_ipywidgets_js = {}``; the saved state's script is dropped).

The state comes from the notebook's ``widgets`` metadata (nbclient saves it), which myst-nb keeps
per document as the ``ipywidgets_state`` script it would embed."""
from __future__ import annotations

import html
import json
import re

from docutils import nodes

VIEW = "application/vnd.jupyter.widget-view+json"
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MODEL_ID = re.compile(r'"model_id":\s*"([^"]+)"')
IMAGES = ("image/png", "image/jpeg", "image/svg+xml")


def _pre(text: str) -> str:
    return f'<pre class="widget-picture-text">{html.escape(ANSI.sub("", text))}</pre>'


def output_html(output: dict) -> str:
    """One output an Output widget captured, as HTML."""
    kind = output.get("output_type")
    if kind == "stream":
        return _pre(output.get("text", ""))
    if kind == "error":
        return _pre("\n".join(output.get("traceback", [])))
    data = output.get("data", {})
    for mime in IMAGES:
        if mime in data:
            if mime == "image/svg+xml":
                return data[mime] if isinstance(data[mime], str) else "".join(data[mime])
            return f'<img class="widget-picture-image" alt="plot" src="data:{mime};base64,{data[mime]}">'
    if "text/html" in data:
        return data["text/html"] if isinstance(data["text/html"], str) else "".join(data["text/html"])
    return _pre(data.get("text/plain", ""))


def control_value(state: dict) -> str:
    labels, index = state.get("_options_labels"), state.get("index")
    if labels and isinstance(index, int):
        return labels[index]
    if labels and isinstance(index, (list, tuple)):
        return ", ".join(labels[i] for i in index)
    return str(state.get("value", ""))


def widget_html(model_id: str, models: dict, seen: set) -> str:
    """A widget and its children, as HTML: containers in order, Output widgets with what they
    captured, controls as "description: value", anything else by its description."""
    if model_id in seen or model_id not in models:
        return ""
    seen.add(model_id)
    state = models[model_id]
    name = state.get("_model_name", "")
    if name == "OutputModel":
        return "".join(output_html(o) for o in state.get("outputs", []))
    children = state.get("children")
    if isinstance(children, list):
        inner = "".join(widget_html(str(c).removeprefix("IPY_MODEL_"), models, seen) for c in children)
        return f'<div class="widget-picture-box">{inner}</div>'
    if name in ("HTMLModel", "HTMLMathModel"):
        return f'<div>{state.get("value", "")}</div>'
    description = html.escape(str(state.get("description", "")))
    if name == "ButtonModel":
        return f'<div class="widget-picture-control">[{description}]</div>'
    if "value" in state or "index" in state:
        label = f"{description}: " if description else ""
        return f'<div class="widget-picture-control">{label}<b>{html.escape(control_value(state))}</b></div>'
    return ""


def picture(model_id: str, models: dict) -> str:
    body = widget_html(model_id, models, set())
    return ('<div class="widget-picture"><div class="widget-picture-note">Interactive view as the '
            "build's run left it: run the notebook to move it</div>" + body + "</div>")


def saved_models(env, docname: str) -> dict:
    """model_id -> state of every widget the notebook's run saved (empty when none)."""
    js_files = getattr(env, "nb_metadata", {}).get(docname, {}).get("js_files", {})
    _, script = js_files.pop("ipywidgets_state", (None, {}))  # the page embeds no state now
    if not script:
        return {}
    state = json.loads(script["body"].replace(r"<\/script>", "</script>"))
    return {mid: model.get("state", {}) for mid, model in state.get("state", {}).items()}


def replace_views(app, doctree) -> None:
    views = list(doctree.findall(lambda n: isinstance(n, nodes.container) and n.get("mime_type") == VIEW))
    if not views:
        return
    models = saved_models(app.env, app.env.docname)
    for view in views:
        found = MODEL_ID.search(view.astext())
        model_id = found[1] if found else ""
        view.children = [nodes.raw("", picture(model_id, models), format="html")]


def setup(app):
    app.connect("doctree-read", replace_views)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
