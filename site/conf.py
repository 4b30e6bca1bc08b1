"""Sphinx configuration of the course's website (`make site`, scripts/site.py; docs/site.md).

The stack JAX's own documentation uses: Sphinx, myst-nb (notebooks executed by the build, their
outputs cached by jupyter-cache) and sphinx-book-theme. scripts/site.py lays the pages out in
_site/src with the repository's paths (course/NN_slug.ipynb, exercises/NN_slug/NN_slug.ipynb), so
a page's Colab link is its notebook's path in the repository.
"""
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))

_course = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["course"]
GITHUB, BRANCH = _course["github"], _course.get("branch", "main")  # as scripts/colab.py reads them

project = "How JAX really runs your program"
author = "the course's authors"
copyright = "the course's authors"

extensions = ["myst_nb", "sphinx.ext.intersphinx", "sphinx_codeautolink", "claims_hold", "widget_pictures",
              "guide_links", "notebook_links", "api_links", "api_reference", "colab_badge", "steady_config"]
root_doc = "index"
exclude_patterns = ["**.ipynb_checkpoints"]

# Notebooks: executed by the build, their runs cached in _site/.jupyter_cache so an unchanged
# chapter is not executed again. scripts/site.py executes each chapter the cache lacks with the
# suite's notebook runner (no widget stall, nbclient issue 312) before Sphinx starts; myst-nb then
# finds every run in the cache, and would execute (with these limits) only a notebook missing
# from it. An error fails the build unless its cell is tagged raises-exception. Exercise pages
# show the released notebook as a learner opens it: not executed.
nb_execution_mode = "cache"
nb_execution_timeout = 300  # seconds a cell may run, as the chapters' tests allow
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_excludepatterns = ["exercises/*/*.ipynb"]
nb_merge_streams = True
nb_render_error_lexer = "myst-ansi"  # tracebacks of %xmode Minimal are not ipythontb's format
# Widgets get a static picture (widget_pictures), so no widget JavaScript is fetched from a CDN.
nb_ipywidgets_js = {}
myst_heading_anchors = 6  # every heading has an anchor a link can name

# JAX's names link to JAX's reference (docs.jax.dev), as the JAX docs link them, in the prose
# (api_links) and in the code cells (sphinx-codeautolink). Its inventory is kept in the repository
# (scripts/jax_inventory.py made it) so the build never downloads one.
JAX_INVENTORY = Path(__file__).resolve().parent / "jax-objects.inv"
if JAX_INVENTORY.is_file():
    intersphinx_mapping = {"jax": ("https://docs.jax.dev/en/latest/", str(JAX_INVENTORY))}
else:
    intersphinx_mapping = {}
    print(f"{JAX_INVENTORY} is missing: JAX's names are not linked to docs.jax.dev "
          "(python scripts/jax_inventory.py makes it: docs/site.md)", file=sys.stderr)
intersphinx_timeout = 5
codeautolink_concat_default = True  # a notebook's cells are one program: its imports hold below them
# the exercises' pages are not executed, so their cells are "python" blocks: they hold magics too
codeautolink_custom_blocks = {"python": "sphinx_codeautolink.clean_ipython"}
# The reference page (api_reference): docstrings are reStructuredText; `name` is a cross-reference.
default_role = "py:obj"
autodoc_member_order = "bysource"
add_module_names = True

html_theme = "sphinx_book_theme"
html_title = project
html_static_path = ["_static"]
html_css_files = ["site.css"]
html_sourcelink_suffix = ""  # the download button gives the notebook itself, not a .txt copy
html_theme_options = {
    "repository_url": f"https://github.com/{GITHUB}",
    "repository_branch": BRANCH,
    "path_to_docs": "",
    "use_repository_button": True,
    "use_download_button": True,
    "launch_buttons": {"colab_url": "https://colab.research.google.com"},
    "show_toc_level": 2,
    "navbar_persistent": [],  # one search box: the sidebar's (the header's would be a second)
}
