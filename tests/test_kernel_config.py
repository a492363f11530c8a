"""The config `make lab` writes makes IPython load jaxlab at start (terminal and kernels),
and a notebook's own ``%load_ext jaxlab`` then says nothing."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "kernel_config.py"

PROBE = """
names = sorted(k for k in get_ipython().user_ns if not k.startswith('_'))
ip = get_ipython()
before = sorted(ip.magics_manager.magics['line'])
ip.run_line_magic('load_ext', 'jaxlab')
print('MAGICS', 'jaxpr' in before, 'jax_devices' in before)
print('NAMES', names)
print('LOADED', sorted(ip.extension_manager.loaded))
print('SAME', sorted(ip.magics_manager.magics['line']) == before)
"""


# This environment's own <prefix>/etc/ipython config may be an older one: the processes
# below read only the profile, as a fresh environment with the new config would.
ONLY_PROFILE = (
    "import IPython.core.application as a; a.ENV_CONFIG_DIRS.clear(); "
    "a.SYSTEM_CONFIG_DIRS.clear(); "
)


def _body() -> str:
    spec = importlib.util.spec_from_file_location("kernel_config", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BODY


def _profile(tmp_path: Path) -> dict[str, str]:
    # The same text in a profile folder: IPython reads it as it reads <prefix>/etc/ipython.
    profile = tmp_path / "profile_default"
    profile.mkdir(parents=True)
    for name in ("ipython_config.py", "ipython_kernel_config.py"):
        (profile / name).write_text(_body())
    return dict(os.environ, IPYTHONDIR=str(tmp_path), JAX_PLATFORMS="cpu")


def test_the_written_config_loads_jaxlab_and_load_ext_says_nothing(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            ONLY_PROFILE + "import IPython; IPython.start_ipython()",
            "--no-banner",
            "--HistoryManager.enabled=False",
        ],
        input=PROBE.replace("\n", "\n\n") + "\nexit\n",  # one statement per prompt
        env=_profile(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "Error" not in done.stderr, done.stderr
    out = done.stdout
    assert "MAGICS True True" in out  # loaded at start
    # the start-up line left no name behind: only IPython's own
    assert "NAMES ['In', 'Out', 'exit', 'get_ipython', 'open', 'quit']" in out
    assert "already loaded" not in out
    loaded = out.split("LOADED ")[1].splitlines()[0]
    assert "'jaxlab'" in loaded  # %load_ext registered it, so %unload_ext works
    assert "SAME True" in out  # loading again registered nothing twice


@pytest.mark.notebooks
def test_in_a_kernel_with_the_config_load_ext_prints_nothing(tmp_path, monkeypatch):
    """A real kernel, as the tutorials run: their first cell's output is empty."""
    import nbformat
    from kernel_polls import NotebookClient

    env = _profile(tmp_path / "ipython")
    spec = tmp_path / "jupyter" / "kernels" / "jaxlab-config"
    spec.mkdir(parents=True)
    start = ONLY_PROFILE + "from ipykernel.kernelapp import launch_new_instance as go; go()"
    argv = [sys.executable, "-c", start, "-f", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(json.dumps({"argv": argv, "language": "python"}))
    for name in ("IPYTHONDIR", "JAX_PLATFORMS"):
        monkeypatch.setenv(name, env[name])
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext jaxlab"),
        nbformat.v4.new_code_cell("print(sorted(get_ipython().extension_manager.loaded))"),
    ]
    NotebookClient(nb, timeout=120, kernel_name="jaxlab-config").execute()
    assert nb.cells[0].outputs == []
    (printed,) = nb.cells[1].outputs
    assert "'jaxlab'" in printed.text
