"""Binder's environment, built as repo2docker builds it, without Docker.

repo2docker copies the repository, installs ``binder/requirements.txt`` into the image's
Python 3.12 (its last line ``.`` installs jaxlab itself, not editable) and runs
``binder/postBuild``. :func:`build_env` does the same into a fresh venv;
:func:`write_kernelspec` makes a kernel of it that nbclient can start. tests/conftest.py
holds the session fixtures, so that the Binder tests and the notebook tests share one
environment and every notebook runs once, in Binder's environment::

    bin_ = build_env(tmp / "repo", tmp / "env")
    write_kernelspec(tmp / "jupyter", "jaxlab-binder", bin_ / "python")
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RUNTIME = (3, 12)  # binder/runtime.txt: python-3.12


def run(cmd: list, **kwargs) -> str:
    """Run ``cmd``; its output, or an assertion error with the tail of both streams."""
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{cmd}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout + done.stderr


def build_env(repo: Path, venv: Path) -> Path:
    """A fresh venv at ``venv`` built from a copy of the repository at ``repo``; its
    ``bin`` folder. pip installs from PyPI, reusing pip's cache."""
    from test_wheel import tracked_sources

    repo.mkdir(parents=True, exist_ok=True)
    tracked_sources(repo)  # repo2docker copies the repository; pip may build inside it
    run([sys.executable, "-m", "venv", str(venv)])
    bin_ = venv / "bin"
    env = {**os.environ, "PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"}
    env["VIRTUAL_ENV"] = str(venv)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.pop("PYTHONPATH", None)
    # repo2docker: pip install -r binder/requirements.txt from the repository root. Where
    # Python may write bytecode (`make test` lets it), pip compiles none: the kernels compile
    # the modules they import, a fraction of the 100 packages (the build took 44 s of CPU
    # instead of 67; the first kernel's imports 1 s longer). Where it may not, pip's own
    # compilation is the only bytecode the kernels get.
    lazy = [] if os.environ.get("PYTHONDONTWRITEBYTECODE") else ["--no-compile"]
    run(
        ["python", "-m", "pip", "install", "-q", *lazy, "-r", "binder/requirements.txt"],
        cwd=repo,
        env=env,
    )
    run([str(repo / "binder" / "postBuild")], cwd=repo, env=env)
    return bin_


def write_kernelspec(root: Path, name: str, python: Path | str) -> None:
    """A kernelspec ``name`` under ``root/kernels`` that runs ``python`` (put ``root`` on
    ``JUPYTER_PATH``; an installed spec's bare ``python`` would be this interpreter)."""
    spec = root / "kernels" / name
    spec.mkdir(parents=True, exist_ok=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": name, "language": "python"})
    )
