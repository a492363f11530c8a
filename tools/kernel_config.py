"""Configure this environment's Jupyter for jaxlab: kernels load it, the lab keeps an
untrusted notebook's widgets from running.

Both files go under ``sys.prefix``, so they apply to this virtual environment (or
Binder's image) alone. Run with the environment's python (`make lab`, `make test` and
Binder's postBuild do).

IPython reads config from ``<sys.prefix>/etc/ipython`` besides the user's profile. The
config calls ``jaxlab.load_ipython_extension`` at start rather than listing jaxlab in
``InteractiveShellApp.extensions``: listed, jaxlab would be in the extension manager's
``loaded`` set and every notebook's own ``%load_ext jaxlab`` (kept so that notebooks run in
any kernel) would print "The jaxlab extension is already loaded". Loading is idempotent,
so that ``%load_ext`` registers nothing twice and says nothing.

The Jupyter server reads ``<sys.prefix>/etc/jupyter/jupyter_server_config.d/*.json`` for
the extensions to enable (as ``jupyter server extension enable --sys-prefix`` writes):
``jaxlab_server`` sends an untrusted notebook to the page without its saved widget state,
which JupyterLab's widget manager would otherwise restore and run.
"""

import json
import sys
from pathlib import Path

BODY = """# Written by jaxlab's `make lab` / `make test`: this environment's kernels load jaxlab.
c = get_config()  # noqa: F821
# Loaded by a start-up line, not listed in `extensions`: a notebook's own `%load_ext jaxlab`
# then loads it silently (loading is idempotent) instead of saying it is already loaded.
# An expression statement: it leaves no name in the user namespace.
c.InteractiveShellApp.exec_lines.append(
    "__import__('jaxlab').load_ipython_extension(get_ipython())"
)
"""

SERVER_CONFIG = {"ServerApp": {"jpserver_extensions": {"jaxlab_server": True}}}


def server_config_path(prefix: str | None = None) -> Path:
    """Where the server of the environment at ``prefix`` (this one by default) finds the
    file that enables jaxlab's server extension."""
    base = Path(sys.prefix if prefix is None else prefix)
    return base / "etc" / "jupyter" / "jupyter_server_config.d" / "jaxlab.json"


def main() -> None:
    folder = Path(sys.prefix) / "etc" / "ipython"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("ipython_kernel_config.py", "ipython_config.py"):
        (folder / name).write_text(BODY)
    server = server_config_path()
    server.parent.mkdir(parents=True, exist_ok=True)
    server.write_text(json.dumps(SERVER_CONFIG, indent=2) + "\n")


if __name__ == "__main__":
    main()
