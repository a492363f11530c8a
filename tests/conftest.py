"""Shared fixtures: every test sees 2 CPU devices and may use a real IPython shell."""

import gc
import os

# Before JAX is imported anywhere: two simulated CPU devices (shard_map, pmap tests).
os.environ.setdefault("JAX_NUM_CPU_DEVICES", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import pytest

# A pytest plugin (jaxtyping's) may have imported JAX before this file ran, so the
# environment variable alone can come too late; the backend is not started yet here.
jax.config.update("jax_num_cpu_devices", 2)


def pytest_configure(config: pytest.Config) -> None:
    # `make test`'s two 3.12 runs share the test files as they go (tests/claims.py).
    from claims import register

    register(config)


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
    # IPython's reset runs a full gc.collect(), whose cost grows with everything the
    # session keeps (JAX's caches): about 1 s a test late in the suite. What survives a
    # reset is long-lived, so it is moved out of the collector's way (freed objects are
    # still freed by reference counting; only cycles among the survivors stay).
    gc.freeze()


@pytest.fixture
def fresh_lineage():
    """Key tracking off and the session's key lineage empty, before and after the test."""
    from jaxlab import key_lineage, track_keys

    key_lineage().clear()
    yield key_lineage()
    track_keys(False)
    key_lineage().clear()


# Kernels of other environments for nbclient: one folder on JUPYTER_PATH for the session.


@pytest.fixture(scope="session")
def jupyter_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("jupyter")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("JUPYTER_PATH", str(root))
        yield root


@pytest.fixture(scope="session")
def binder_env(tmp_path_factory):
    """Binder's environment (tests/binder_setup.py), built once per session; its ``bin``."""
    import sys

    from binder_setup import RUNTIME, build_env

    if sys.version_info[:2] != RUNTIME:
        pytest.skip("binder/runtime.txt asks for Python 3.12")
    base = tmp_path_factory.mktemp("binder")
    return build_env(base / "repo", base / "env")


@pytest.fixture(scope="session")
def binder_kernel(binder_env, jupyter_path):
    """The name of a kernel that runs Binder's environment's python."""
    from binder_setup import write_kernelspec

    write_kernelspec(jupyter_path, "jaxlab-binder", binder_env / "python")
    return "jaxlab-binder"


@pytest.fixture(scope="session")
def notebook_kernel(request, jupyter_path):
    """The kernel the tutorials run in: Binder's environment where this is Binder's
    Python (3.12), so that each notebook runs once and in what a student gets; elsewhere
    a kernel of this interpreter."""
    import sys

    from binder_setup import RUNTIME, write_kernelspec

    if sys.version_info[:2] == RUNTIME:
        return request.getfixturevalue("binder_kernel")
    write_kernelspec(jupyter_path, "jaxlab-test", sys.executable)
    return "jaxlab-test"


# The tutorials run first in the session: under `make test` the browser lane's
# test_tutorials_in_lab.py waits for the executed copies test_notebook_runs saves. (Stable:
# every other test keeps its place; the Binder environment stays this session's fixture.)
# The 3.11 run takes one case of each parametrized test (tests/one_case.py).


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        if item.get_closest_marker("notebooks") is None:
            return 2
        return 0 if getattr(item, "originalname", "") == "test_notebook_runs" else 1

    items.sort(key=rank)
    from one_case import deselect_other_cases

    deselect_other_cases(config, items)
