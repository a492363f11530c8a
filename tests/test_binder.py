"""Binder (binder/) builds what a student needs, and the tutorials run there.

The fast tests check the files: every requirement pinned with ``==`` as the 3.12 lock pins
it, generated from pyproject.toml and the lock (so it cannot drift), no dev tool in a
student's image, and the runtime, apt and postBuild files. The slow tests do what
repo2docker would do, without Docker (tests/binder_setup.py: a fresh virtual environment
from ``binder/requirements.txt``, pip from PyPI reusing its cache, then ``binder/postBuild``
run from a copy of the repository) and check what it built: exactly the pins, the lab's
widget settings and extensions, kernels that load jaxlab. Every notebook is executed in a
kernel of that environment by tests/test_notebooks.py (the same session fixture), so each
runs once, in what a student gets.
"""

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BINDER = ROOT / "binder"
# A student's image holds the runtime and the lab, not the tools that test or build jaxlab.
DEV_TOOLS = {
    "pytest",
    "pytest-timeout",
    "mypy",
    "ruff",
    "playwright",
    "hypothesis",
    "sphinx",
    "myst-nb",
    "myst-parser",
    "equinox",
    "diffrax",
    "optax",
    "optimistix",
    "flax",
    "uv",
}


def _tool():
    path = ROOT / "tools" / "binder_requirements.py"
    spec = importlib.util.spec_from_file_location("binder_requirements", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def binder_pins() -> dict[str, str]:
    """``{normalised name: version}`` of binder/requirements.txt (fails on any other line)."""
    tool = _tool()
    pins = {}
    for line in (BINDER / "requirements.txt").read_text().splitlines():
        if not line or line.startswith("#") or line == ".":
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;]+)", line)
        assert match, f"not pinned with ==: {line!r}"
        pins[tool.normalise(match.group(1))] = match.group(2)
    return pins


def test_requirements_are_generated_from_pyproject_and_the_lock():
    tool = _tool()
    expected = tool.render((ROOT / "pyproject.toml").read_text(), tool.LOCK.read_text())
    assert (BINDER / "requirements.txt").read_text() == expected, (
        "binder/requirements.txt is out of date: run python tools/binder_requirements.py"
    )


def test_every_requirement_is_pinned_as_the_lock_pins_it():
    tool = _tool()
    lock, _ = tool.parse_lock(tool.LOCK.read_text())
    pins = binder_pins()
    assert {name: lock[name].split("==")[1] for name in pins} == pins
    lines = (BINDER / "requirements.txt").read_text().splitlines()
    assert lines[-1] == "."  # jaxlab itself, installed with its pinned dependencies


def test_a_student_gets_the_runtime_and_the_lab_without_dev_tools_or_cuda():
    pins = binder_pins()
    wanted = _tool().requirement_names((ROOT / "pyproject.toml").read_text())
    assert {"jax", "jaxlib", "jupyterlab", "ipykernel", "ipywidgets", "anywidget"} <= wanted
    assert wanted <= pins.keys()
    assert DEV_TOOLS & pins.keys() == set()
    assert [n for n in pins if "cuda" in n or n.startswith("nvidia")] == []


def test_closure_follows_via_comments_from_the_roots_only():
    tool = _tool()
    lock = """\
# header
a==1.0
    # via -r requirements/deps.in
b==2.0
    # via a
c==3.0
    # via pytest
d==4.0
    # via
    #   b
    #   pytest
pytest==8.0
    # via -r requirements/deps.in
"""
    pins, needed_by = tool.parse_lock(lock)
    assert pins["d"] == "d==4.0"
    assert needed_by["d"] == {"b", "pytest"}
    assert tool.closure({"a"}, needed_by) == {"a", "b", "d"}
    with pytest.raises(ValueError, match="not in the lock: zed"):
        tool.closure({"a", "zed"}, needed_by)


def test_runtime_apt_and_postbuild():
    assert (BINDER / "runtime.txt").read_text().strip() == "python-3.12"
    assert _tool().LOCK.name == "py3.12.txt"  # the lock of the runtime's Python
    assert "graphviz" in (BINDER / "apt.txt").read_text().split()
    post = BINDER / "postBuild"
    assert os.access(post, os.X_OK)
    text = post.read_text()
    assert re.search(r"^set -e", text, re.MULTILINE)
    assert "python tools/kernel_config.py" in text  # called, not copied
    assert '"saveState"' in text


def test_readme_badge_opens_the_first_notebook():
    readme = (ROOT / "README.md").read_text()
    url = re.search(r"\(https://mybinder\.org/v2/gh/([^)\s]+)\)", readme)
    assert url, "README.md has no Binder badge"
    path = url.group(1).split("urlpath=lab/tree/")[1]
    assert path == "notebooks/00_welcome.ipynb"
    assert (ROOT / path).exists()


def _run(cmd, **kwargs):
    from binder_setup import run

    return run(cmd, **kwargs)


# What repo2docker built (the `binder_env` and `binder_kernel` fixtures: tests/conftest.py).


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_binder_environment_is_exactly_the_pinned_one(binder_env):
    listed = json.loads(_run([binder_env / "python", "-m", "pip", "list", "--format=json"]))
    tool = _tool()
    installed = {tool.normalise(d["name"]): d["version"] for d in listed}
    version = re.search(r'^version = "(.+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert installed.pop("jaxlab") == version.group(1)
    installed.pop("pip")
    assert installed == binder_pins()  # nothing unpinned slipped in, nothing missing
    _run([binder_env / "python", "-m", "pip", "check"])


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_binder_lab_saves_widget_state_and_has_the_widget_extensions(binder_env):
    paths = _run([binder_env / "jupyter", "lab", "path"])
    app_dir = Path(re.search(r"Application directory:\s*(\S+)", paths).group(1))
    overrides = json.loads((app_dir / "settings" / "overrides.json").read_text())
    assert overrides["@jupyter-widgets/jupyterlab-manager:plugin"]["saveState"] is True
    extensions = _run([binder_env / "jupyter", "labextension", "list"])
    assert "@jupyter-widgets/jupyterlab-manager" in extensions
    assert "anywidget" in extensions


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_binder_kernels_load_jaxlab(binder_env, binder_kernel, tmp_path):
    import ast

    import nbformat
    from test_notebooks import execute

    nb = nbformat.v4.new_notebook()
    # Before any %load_ext: the kernel of Binder's environment has jaxlab's magics already.
    probe = "import sys; (sys.prefix, sorted(get_ipython().magics_manager.magics['line']))"
    nb.cells = [nbformat.v4.new_code_cell(probe), nbformat.v4.new_code_cell("%load_ext jaxlab")]
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    ran, errors = execute(path, binder_kernel)
    assert errors == []
    prefix, magics = ast.literal_eval(ran.cells[0].outputs[0]["data"]["text/plain"])
    assert Path(prefix) == binder_env.parent
    assert {"jaxpr", "grad", "jit", "compile_log", "jax_devices"} <= set(magics)
    assert ran.cells[1].outputs == []  # a notebook's own %load_ext says nothing


def notebook_imports(path: Path) -> set[str]:
    """The top-level modules a notebook's code cells import (magics turned into Python
    first, as IPython runs them)."""
    import ast

    import nbformat
    from IPython.core.inputtransformer2 import TransformerManager

    found: set[str] = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        tree = ast.parse(TransformerManager().transform_cell(cell.source))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found


def test_notebook_imports_are_found_by_the_scan():
    assert {"jax"} <= notebook_imports(ROOT / "notebooks" / "00_welcome.ipynb")


# Every notebook runs whole in Binder's environment in tests/test_notebooks.py. Its imports
# are checked here too, so that a dev-only import fails by name rather than as a cell error.
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_every_notebook_import_is_in_binder(binder_env):
    modules = sorted(
        set().union(*(notebook_imports(p) for p in (ROOT / "notebooks").glob("*.ipynb")))
    )
    assert "jax" in modules
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module(m)"
    _run([binder_env / "python", "-c", code, *modules])
