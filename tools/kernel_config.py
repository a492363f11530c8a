"""Make every IPython kernel (and terminal IPython) of this environment load jaxlab.

IPython reads config from ``<sys.prefix>/etc/ipython`` besides the user's profile, so a
file there applies to this virtual environment alone. Run with the environment's python.
"""

import sys
from pathlib import Path

BODY = """# Written by jaxlab's `make lab` / `make test`: this environment's kernels load jaxlab.
c = get_config()  # noqa: F821
# Unset, `extensions` is a lazy value that supports append (loading twice is harmless).
c.InteractiveShellApp.extensions.append("jaxlab")
"""


def main() -> None:
    folder = Path(sys.prefix) / "etc" / "ipython"
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("ipython_kernel_config.py", "ipython_config.py"):
        (folder / name).write_text(BODY)


if __name__ == "__main__":
    main()
