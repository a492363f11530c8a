"""jaxviz, the anchor of issue 11, measured on the same program as the GraphExplorer.

jaxviz (PyPI, GPL-3.0, forward pass only) is not a jaxlab dependency: it is installed for
the run into a temporary folder (``pip install --no-deps --target``), never into the
environment, and nothing of it ships. For the forward program of the benchmark's MLP it
reports the bytes of one notebook output (its HTML inlines viz.js, d3 and jsoneditor) and,
in headless Chromium, the time from loading that output to the first painted graph.
benchmarks/graph_explorer.py prints these beside its own figures; alone::

    .venv/bin/python benchmarks/jaxviz_anchor.py
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

VERSION = "0.1.4"
# jaxviz draws its graph as an SVG of groups (edges, nodes) once viz.js has laid it out.
_PAINTED = "() => document.querySelectorAll('svg g[class^=edge-group_]').length > 0"


def load_jaxviz() -> Any | None:
    """jaxviz, installed for this run into a temporary folder; None if pip cannot get it."""
    try:
        return importlib.import_module("jaxviz")
    except ImportError:
        pass
    target = tempfile.mkdtemp(prefix="jaxviz-")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", target,
         f"jaxviz=={VERSION}"],
        capture_output=True,
        text=True,
    )  # fmt: skip
    if done.returncode != 0:
        return None
    sys.path.append(target)  # after the environment: it cannot shadow anything there
    return importlib.import_module("jaxviz")


def measure(fun: Callable[..., Any], *args: Any) -> dict[str, Any] | None:
    """jaxviz's output for ``fun(*args)``: its size in bytes, the Python time to make it,
    and the time Chromium takes from loading it to the first painted node."""
    jaxviz = load_jaxviz()
    if jaxviz is None:
        return None
    t0 = time.perf_counter()
    page_html = jaxviz.trace_model(fun, *args, return_html=True)
    python_s = time.perf_counter() - t0
    figures: dict[str, Any] = {"bytes": len(page_html.encode()), "python_s": python_s}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return figures
    # The browser tests' Chromium and flags (tests/browser/conftest.py).
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "browser"))
    from conftest import CHROMIUM, CHROMIUM_ARGS

    chromium = next((c for c in CHROMIUM if Path(c).exists()), CHROMIUM[-1])
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 720})
            outside: list[str] = []
            page.on(
                "request",
                lambda r: outside.append(r.url) if r.url.startswith("http") else None,
            )
            t1 = time.perf_counter()
            page.set_content(f"<html><body>{page_html}</body></html>")
            page.wait_for_function(_PAINTED, polling="raf", timeout=60_000)
            figures["first_view_s"] = time.perf_counter() - t1
            figures["requests_outside"] = len(outside)
        finally:
            browser.close()
    return figures


def main() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import jax.numpy as jnp
    from graph_explorer import deep, params_for

    figures = measure(lambda params, x: deep(params, x), params_for(14), jnp.ones((4, 8)))
    print(f"jaxviz {VERSION}: {figures}")


if __name__ == "__main__":
    main()
