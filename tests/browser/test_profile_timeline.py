"""ProfileTimeline in JupyterLab: a %%profile cell renders lanes, hover, zoom and the sync table."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser

CELLS = [
    "%load_ext jaxlab\n"
    "import jax, jax.numpy as jnp\n"
    "@jax.jit\n"
    "def step(x):\n"
    "    return jnp.tanh(x @ x)\n"
    "x = jnp.ones((64, 64))\n"
    "step(x).block_until_ready()",
    "%%profile\ntotal = 0.0\nfor i in range(3):\n    total += float(step(x).sum())",
]


def test_profile_timeline_renders_hovers_and_zooms(open_notebook: Any, page: Any) -> None:
    notebook = open_notebook("profile.ipynb", CELLS)
    notebook.run(0)
    notebook.wait_idle()
    notebook.run(1)
    widget = page.locator(".jaxlab-pt")
    widget.wait_for()  # the widget's own view (the static fallback has no .jaxlab-pt)
    assert "%%profile" in widget.locator(".jaxlab-pt-title").inner_text()
    calls = widget.locator("rect.jaxlab-pt-dispatch")
    names = calls.evaluate_all("rects => rects.map(r => r.textContent.split(':')[0])")
    assert names.count("step") == 3  # three calls of step on the host lane (and .sum()'s)
    assert widget.locator("rect.jaxlab-pt-module").count() >= 3

    calls.nth(names.index("step")).dispatch_event("mouseenter")  # (spans may overlap)
    assert widget.locator(".jaxlab-pt-tip").inner_text().startswith("step:")

    axis = widget.locator(".jaxlab-pt-svg text").last
    before = axis.text_content()
    widget.locator(".jaxlab-pt-svg").hover(position={"x": 300, "y": 70})
    page.mouse.wheel(0, -400)  # zoom in around the pointer
    page.wait_for_function(
        "(before) => [...document.querySelectorAll('.jaxlab-pt-svg text')].pop()"
        ".textContent !== before",
        arg=before,
    )

    syncs = widget.locator("table.jaxlab-pt-table").last.inner_text()
    assert "total += float(step(x).sum())" in syncs
    assert "line 4" in syncs and "float(x)" in syncs  # the line the user sees

    assert page.requests.outside() == []
