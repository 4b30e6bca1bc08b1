"""Sphinx extension: a rebuild with nothing changed does not say "The configuration has changed".

Sphinx compares conf.py's values with the configuration it saved with the environment. The
themes (pydata-sphinx-theme, sphinx-book-theme) and sphinx-codeautolink set values after that
comparison (templates_path, html_context, html_theme_options, html_permalinks_icon,
html_static_path), so the saved configuration always differed from the next build's conf.py.

So the environment is saved with the configuration as the comparison sees it: the values after
conf.py and the ``config-inited`` handlers, taken before anything else changes them. The build
itself uses the live configuration: it is back in place before the environment is checked or
any page written. And since Sphinx saves the environment only when it read a page, a change of
conf.py that makes no page read again (an HTML option) has the home page read again, so the
environment is saved with it: the next build is silent instead of reporting it every time."""
from __future__ import annotations

import pickle


def values(config) -> dict:
    return {item.name: item.value for item in config}


def remember(app, config) -> None:
    app.compared_config = pickle.loads(pickle.dumps(config))  # what the next build will compare


def saved_with_a_page(app, env, added, changed, removed) -> list[str]:
    saved = getattr(env, "compared_config", None)
    if saved is None or values(saved) != values(app.compared_config):
        return [app.config.root_doc]
    return []


def saved_as_compared(app, env) -> None:
    env.config = env.compared_config = app.compared_config  # Sphinx pickles the environment next


def live_again(app, *args) -> None:
    app.env.config = app.config


def setup(app):
    app.connect("config-inited", remember, priority=900)  # after the other handlers
    app.connect("env-get-outdated", saved_with_a_page)
    app.connect("env-updated", saved_as_compared, priority=900)
    app.connect("env-check-consistency", live_again, priority=100)
    app.connect("write-started", live_again, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
