"""Sphinx configuration: the jaxlab site, built with MyST-NB from docs/ and notebooks/.

``make docs`` builds it offline with warnings as errors
(``sphinx-build -W --keep-going -b html docs docs/_build/html``). Three extensions in
``docs/_ext`` write pages at build time: ``magic_pages`` (a page per magic from its own
help), ``api_page`` (the API from the docstrings of ``jaxlab``'s public names) and
``tutorials`` (``notebooks/*.ipynb`` copied to ``tutorials/``). The notebooks are executed
here, and a failing cell fails the build, unless ``$JAXLAB_EXECUTED_NOTEBOOKS`` names a
folder of copies that the notebook test already executed (``make test`` does that).
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "jaxlab"
author = "jaxlab contributors"
copyright = "jaxlab contributors"

extensions = ["myst_nb", "api_page", "magic_pages", "tutorials"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "_ext"]

# Docs execute (as JAX's and treescope's do): a cell error fails the build. With executed
# copies from the test run, nothing is executed twice.
nb_execution_mode = "off" if os.environ.get("JAXLAB_EXECUTED_NOTEBOOKS") else "cache"
nb_execution_raise_on_error = True
nb_execution_timeout = 300
nb_execution_cache_path = str(Path(__file__).parent / "_build" / ".jupyter_cache")

# Widgets show their static view: jaxlab's widgets carry text/html beside the widget view,
# and a static page has no kernel to drive the live one. So the widget view is never
# chosen, and no widget JavaScript is loaded (MyST-NB would take it from a CDN).
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_ipywidgets_js: dict[str, dict[str, str]] = {}

myst_enable_extensions = ["colon_fence"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "alabaster"
html_title = "jaxlab"
