"""The wheel holds the whole package: built from a copy of the tracked sources, installed
into a fresh virtual environment (no editable install), every public name imports, the
extension loads in a real shell, and the widgets' JavaScript and CSS are inside."""

import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow

# Runs inside the fresh environment: prints one JSON line of what it found.
CHECK = r"""
import importlib, json, pkgutil, sys
import jaxlab, jaxlab.widgets
from test_public_api import PUBLIC_NAMES
modules = sorted(m.name for m in pkgutil.walk_packages(jaxlab.__path__, "jaxlab."))
for name in modules:
    importlib.import_module(name)
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_line_magic("load_ext", "jaxlab")
shell.run_cell("import jax.numpy as jnp\ndef f(x): return jnp.sin(x) * 2.0\nx = jnp.ones(3)")
graph = shell.run_line_magic("jaxpr", "-o f(x)")
from importlib.resources import files
static = files("jaxlab.widgets") / "static"
print(json.dumps({
    "file": jaxlab.__file__,
    "missing": sorted(n for n in PUBLIC_NAMES if not hasattr(jaxlab, n)),
    "modules": modules,
    "primitives": sorted(graph.primitives()),
    "magics": sorted(shell.magics_manager.magics["line"]),
    "static": sorted(p.name for p in static.iterdir()),
    "compiled": importlib.import_module("jaxlab.keys.hot").compiled(),
}))
"""


def tracked_sources(dest: pathlib.Path) -> None:
    """Copy the files git tracks (and untracked, not ignored ones) to ``dest``."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    src = tmp_path_factory.mktemp("src")
    tracked_sources(src)
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(src),
        ],
        check=True,
        capture_output=True,
    )
    (built,) = out.glob("jaxlab-*.whl")
    return built


def expected_members() -> set[str]:
    """Every module and asset of the source folders, as the wheel should name it."""
    want = set()
    folders = (("kernel_ext", "jaxlab"), ("widgets", "jaxlab/widgets"), ("jaxlab_server",) * 2)
    for folder, package in folders:
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in {".py", ".js", ".css"} and "__pycache__" not in path.parts:
                want.add(f"{package}/{path.relative_to(ROOT / folder).as_posix()}")
    return want


def test_wheel_contains_every_module_and_widget_asset(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(expected_members() - names)
    assert missing == []
    assert any(n.startswith("jaxlab/widgets/static/") and n.endswith(".js") for n in names)
    assert any(n.startswith("jaxlab/widgets/static/") and n.endswith(".css") for n in names)


def test_wheel_installs_imports_and_loads_in_a_fresh_environment(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    # The dependencies (JAX, IPython, ...) come from this environment's site-packages, put
    # after the fresh one's; a .pth path line does not run the editable install's finder.
    fresh_site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    pathlib.Path(fresh_site, "jaxlab_test_deps.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n"
    )
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "PYTHONPATH": str(ROOT / "tests"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
    }
    done = subprocess.run(
        [str(python), "-c", CHECK],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["file"].startswith(str(venv)), found["file"]
    assert found["missing"] == []
    source_modules = {
        "jaxlab." + ".".join(p.relative_to(ROOT / "kernel_ext").with_suffix("").parts)
        for p in (ROOT / "kernel_ext").rglob("*.py")
        if p.name != "__init__.py"
    }
    assert source_modules <= set(found["modules"]) | {"jaxlab.widgets"}
    assert {"sin", "mul"} <= set(found["primitives"])
    assert {"jaxpr", "grad", "jit", "compile_log", "jax_devices"} <= set(found["magics"])
    assert {"compile_monitor.js", "compile_monitor.css"} <= set(found["static"])
    # key tracking's compiled hot path, built with the wheel (a compiler is here)
    assert found["compiled"] and "jaxlab.keys._hot" in found["modules"]
