"""ProfileTimeline in JupyterLab: a %%profile cell renders lanes (JAX's compile steps named
for the function), sync marks, an axis in one unit, a key, hover, zoom and the sync table
naming the cell as it ran."""

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
    calls = widget.locator(".jaxlab-pt-svg rect.jaxlab-pt-dispatch")
    names = calls.evaluate_all("rects => rects.map(r => r.textContent.split(':')[0])")
    assert names.count("step") == 3  # three calls of step on the host lane (and .sum()'s)
    assert widget.locator(".jaxlab-pt-svg rect.jaxlab-pt-module").count() >= 3

    calls.nth(names.index("step")).dispatch_event("mouseenter")  # (spans may overlap)
    assert widget.locator(".jaxlab-pt-tip").inner_text().startswith("step:")

    # .sum() compiles its first time here: JAX's own steps, on their lane, named for it
    phases = widget.locator(".jaxlab-pt-svg rect.jaxlab-pt-compile").evaluate_all(
        "rects => rects.map(r => r.textContent)"
    )
    assert any(t.startswith("_reduce_sum (XLA compile):") for t in phases)
    assert widget.locator(".jaxlab-pt-svg rect.jaxlab-pt-trace").count() >= 1
    assert (
        widget.locator(".jaxlab-pt-svg rect.jaxlab-pt-sync").count() == 3
    )  # each float(...) marked
    ticks = widget.locator(".jaxlab-pt-axis").evaluate_all(
        "labels => labels.map(t => t.textContent)"
    )
    assert len(ticks) >= 3 and len({t.split(" ")[-1] for t in ticks}) == 1  # one unit
    key = widget.locator(".jaxlab-pt-key").inner_text()
    assert "XLA compile" in key and "implicit sync" in key and "jitted call" in key
    sizes = widget.locator(".jaxlab-pt-svg text").evaluate_all(
        "texts => texts.map(t => parseFloat(getComputedStyle(t).fontSize))"
    )
    assert min(sizes) >= 12

    before = ticks
    widget.locator(".jaxlab-pt-svg").hover(position={"x": 300, "y": 70})
    page.mouse.wheel(0, -400)  # zoom in around the pointer
    page.wait_for_function(
        "(before) => JSON.stringify([...document.querySelectorAll('.jaxlab-pt-axis')]"
        ".map(t => t.textContent)) !== JSON.stringify(before)",
        arg=before,
    )

    syncs = widget.locator("table.jaxlab-pt-table").last.inner_text()
    assert "total += float(step(x).sum())" in syncs
    assert "In[2], line 4" in syncs and "float(x)" in syncs  # the cell and line the user sees
    headers = widget.locator("table.jaxlab-pt-table th").evaluate_all(
        "cells => cells.map(c => c.textContent)"
    )
    assert "" not in headers  # no empty column

    assert page.requests.outside() == []
