"""Sphinx configuration: the jaxlab site, built with MyST-NB from docs/ and notebooks/.

``make docs`` builds it offline with warnings as errors
(``sphinx-build -W --keep-going -b html docs docs/_build/html``). Three extensions in
``docs/_ext`` write pages at build time: ``magic_pages`` (a page per magic from its own
help), ``api_page`` (the API from the docstrings of ``jaxlab``'s public names) and
``tutorials`` (``notebooks/*.ipynb`` executed into ``tutorials/``). The notebooks are
executed during the build, and a failing cell fails it, unless ``$JAXLAB_EXECUTED_NOTEBOOKS``
names a folder of copies that the notebook test already executed (``make test`` does that).
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "jaxlab"
author = "jaxlab contributors"
copyright = "jaxlab contributors"

extensions = ["myst_nb", "api_page", "magic_pages", "tutorials", "math_svg"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints", "_ext"]

# Docs execute (as JAX's and treescope's do), but in the `tutorials` extension: it takes
# the notebook test's executed copies or executes the notebooks itself (a cell error fails
# the build), and keeps the widget views the page can draw (see below). MyST-NB renders it.
nb_execution_mode = "off"

# Widgets are drawn from the state the notebook saved, by the site's own loader
# (_static/jaxlab-widgets.js: each anywidget's saved ES module, a model without a kernel),
# never by the CDN html-manager MyST-NB would load, so nb_ipywidgets_js names nothing. A
# widget view is chosen only over plain text: an output with HTML or an image beside it
# shows that. jaxlab's widgets display their static twin as an output of its own, which
# the loader hides once the widget is drawn and which a page without JavaScript shows.
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", 95)]
nb_ipywidgets_js: dict[str, dict[str, str]] = {}
html_static_path = ["_static"]
html_js_files = [("jaxlab-widgets.js", {"defer": "defer"})]
html_css_files = ["jaxlab-widgets.css"]

myst_enable_extensions = ["colon_fence", "dollarmath"]
# Math as SVG from matplotlib's mathtext (docs/_ext/math_svg.py), not MathJax from a CDN.
html_math_renderer = "mathtext"
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"

html_theme = "alabaster"
html_title = "jaxlab"
# Graphs, reports and code lines of 100 characters need more than alabaster's 940 px.
html_theme_options = {"page_width": "1240px", "sidebar_width": "220px", "body_max_width": "none"}
