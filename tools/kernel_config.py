"""Make every IPython kernel (and terminal IPython) of this environment load jaxlab.

IPython reads config from ``<sys.prefix>/etc/ipython`` besides the user's profile, so a
file there applies to this virtual environment alone. Run with the environment's python.

The config calls ``jaxlab.load_ipython_extension`` at start rather than listing jaxlab in
``InteractiveShellApp.extensions``: listed, jaxlab would be in the extension manager's
``loaded`` set and every notebook's own ``%load_ext jaxlab`` (kept so that notebooks run in
any kernel) would print "The jaxlab extension is already loaded". Loading is idempotent,
so that ``%load_ext`` registers nothing twice and says nothing.
"""

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


def main() -> None:
    folder = Path(sys.prefix) / "etc" / "ipython"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("ipython_kernel_config.py", "ipython_config.py"):
        (folder / name).write_text(BODY)


if __name__ == "__main__":
    main()
