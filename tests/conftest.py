"""Shared fixtures: every test sees 2 CPU devices and may use a real IPython shell."""

import os

# Before JAX is imported anywhere: two simulated CPU devices (shard_map, pmap tests).
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import pytest

# A pytest plugin (jaxtyping's) may have imported JAX before this file ran, so the
# environment variable alone can come too late; the backend is not started yet here.
jax.config.update("jax_num_cpu_devices", 2)

# Extension state leaks between tests if a test forgets to unload; the fixture unloads.


@pytest.fixture(scope="session")
def _shell():
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    config = Config()
    config.HistoryManager.enabled = False
    shell = InteractiveShell.instance(config=config)
    # The plain shell formats text only; notebooks ask for HTML, SVG and PNG too.
    shell.display_formatter.active_types = [
        "text/plain",
        "text/html",
        "image/svg+xml",
        "image/png",
        "application/vnd.jupyter.widget-view+json",
    ]
    yield shell
    InteractiveShell.clear_instance()


@pytest.fixture
def ip(_shell):
    """A real IPython shell with jaxlab loaded and a clean user namespace."""
    _shell.reset(new_session=False)
    _shell.run_line_magic("load_ext", "jaxlab")
    yield _shell
    _shell.run_line_magic("unload_ext", "jaxlab")
    _shell.reset(new_session=False)
