"""Sphinx configuration: the jaxlab site, built with MyST-NB from docs/ and notebooks/.

Build with ``sphinx-build -b html docs docs/_build/html`` (needs sphinx and myst-nb, which
the locks do not pin). ``docs/notebooks`` links to ``../notebooks``; every notebook is
executed during the build and a failing cell fails it.
"""

project = "jaxlab"
author = "jaxlab contributors"
copyright = "jaxlab contributors"

extensions = ["myst_nb"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "**/.ipynb_checkpoints"]

# Docs execute (as JAX's and treescope's do): a cell error fails the build.
nb_execution_mode = "force"
nb_execution_raise_on_error = True
nb_execution_timeout = 300

myst_enable_extensions = ["colon_fence"]
html_theme = "alabaster"
html_title = "jaxlab"
