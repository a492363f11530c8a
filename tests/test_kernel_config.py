"""The config `make lab` writes makes IPython load jaxlab at start (terminal and kernels)."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "kernel_config.py"


def _body() -> str:
    spec = importlib.util.spec_from_file_location("kernel_config", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.BODY


def test_the_written_config_loads_jaxlab_once(tmp_path):
    # The same text in a profile folder: IPython reads it as it reads <prefix>/etc/ipython.
    profile = tmp_path / "profile_default"
    profile.mkdir()
    (profile / "ipython_config.py").write_text(_body())
    env = dict(os.environ, IPYTHONDIR=str(tmp_path))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "IPython",
            "--no-banner",
            "--HistoryManager.enabled=False",
            "-c",
            "ip = get_ipython(); print(sorted(ip.extension_manager.loaded)); "
            "print(sorted(ip.magics_manager.magics['line']))",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "Error" not in done.stderr, done.stderr
    loaded, magics = done.stdout.strip().splitlines()[-2:]
    assert "'jaxlab'" in loaded
    assert "'jaxpr'" in magics and "'jax_devices'" in magics
