"""Saved notebooks keep every jaxlab widget's latest state: reopened, exported, offline.

A widget's display is its live view plus a static twin (``widgets/_base.py``) that the
kernel rewrites after every change. Saved while live, the notebook holds the latest state
as HTML: reopened where the widget's model is gone it shows that state (never ipywidgets'
"model not found"), and its HTML export shows it with the network blocked.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import PANEL_ID

pytestmark = pytest.mark.browser

NAME = "saved_monitor.ipynb"
CELLS = [
    "%load_ext jaxlab\n"
    "import jax, jax.numpy as jnp\n"
    "def f(x):\n"
    "    return jnp.sin(x).sum()\n"
    "jax.jit(f)(jnp.ones(3))",
    "%compile_log",
    "jax.jit(f)(jnp.ones(4))",
]
LATEST = "x: f32[3] → f32[4]"  # only the last cell's recompilation says this


def _twin_html(path: Path) -> list[str]:
    nb = json.loads(path.read_text())
    return [
        "".join(out["data"]["text/html"])
        for cell in nb["cells"]
        for out in cell.get("outputs", [])
        if "jaxlab-twin" in "".join(out.get("data", {}).get("text/html", ""))
    ]


def test_saved_widget_shows_its_latest_state_reopened_and_exported_offline(
    lab: Any, open_notebook: Any, page: Any, tmp_path: Path
) -> None:
    notebook = open_notebook(NAME, CELLS)
    notebook.run_all()
    live = notebook.locator('.jaxlab-cm tr[data-function="f"] .jaxlab-cm-count')
    live.filter(has_text=re.compile(r"^2$")).wait_for()
    assert live.inner_text() == "2"
    twin = notebook.locator(".jaxlab-twin")
    assert twin.count() == 1 and not twin.is_visible()  # hidden while the widget is live
    # ... by the drawn view itself: a rule in its own element names the twin's id (no
    # class CSS, which a restored model injects whether or not a view draws).
    hide = notebook.locator("style.jaxlab-hide-twin")
    assert hide.count() == 1
    assert twin.get_attribute("data-jaxlab-twin") in hide.text_content()

    assert notebook.save()
    (saved,) = _twin_html(lab.root / NAME)
    assert LATEST in saved  # the twin was rewritten after the display, not frozen at it

    # Reopen with the old kernel gone: the widget's model no longer exists anywhere.
    assert notebook.close()
    page.goto(lab.notebook_url(NAME))
    page.wait_for_function(PANEL_ID, arg=NAME)
    notebook.locator(".jaxlab-twin").first.wait_for(state="visible")
    shown = notebook.locator(".jaxlab-twin").inner_text()
    assert LATEST in shown and "compilations of" in shown
    missing = notebook.locator(".jp-OutputArea").get_by_text(
        "Error displaying widget: model not found"
    )
    missing.wait_for(state="attached")  # ipywidgets did not find the model ...
    assert not missing.is_visible()  # ... and the twin's rule hid its note

    # Exported to HTML and opened with everything beyond 127.0.0.1 blocked.
    html = tmp_path / "saved_monitor.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter",
            "nbconvert",
            "--to",
            "html",
            "--output",
            str(html.with_suffix("")),
            str(lab.root / NAME),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    blocked: list[str] = []

    def offline(route: Any) -> None:
        url = route.request.url
        if url.startswith(("file:", "data:", "http://127.0.0.1")):
            route.continue_()
        else:
            blocked.append(url)
            route.abort()

    page.route("**/*", offline)
    page.goto(html.as_uri())
    exported = page.locator(".jaxlab-twin")
    exported.first.wait_for(state="visible")
    assert LATEST in exported.inner_text()
    assert not page.get_by_text("model not found").is_visible()
