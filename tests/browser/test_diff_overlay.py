"""Two programs compared and a profile drawn on a program, in JupyterLab at 1280x720.

``%jaxpr --diff f(x) g(x)``: the changed equations are marked on the drawing, the box
that holds a change is marked on its outside, the legend names the marks, and every text
reads at 12 px or more. ``%%profile --graph``: the costliest function's program drawn
with each equation's time as a fill, its scale in the legend, the time on hover, and the
ranked equations named in the notes.
"""

from __future__ import annotations

from typing import Any

import pytest
from test_graph_explorer import FONT_SIZES

pytestmark = pytest.mark.browser

CELLS = [
    "%load_ext jaxlab\nimport jax, jax.numpy as jnp\n"
    "def block(h):\n    return jnp.tanh(h) * 2.0\n"
    "def before(x):\n    return jnp.sum(jax.jit(block)(x))\n"
    "def block3(h):\n    return jnp.sin(h) * 2.0\n"
    "def after(x):\n    return jnp.sum(jax.jit(block3)(x))\n"
    "x = jnp.ones((4, 4))",
    "%jaxpr --diff before(x) after(x)",
    "def slow_step(x, w):\n    h = jnp.tanh(x @ w)\n    return jnp.sum(h * h)\n"
    "step = jax.jit(slow_step)\nxs, ws = jnp.ones((256, 256)), jnp.ones((256, 256))\n"
    "step(xs, ws).block_until_ready()",
    "%%profile --graph\nfor _ in range(5):\n    step(xs, ws).block_until_ready()",
]


# FONT_SIZES, inside one explorer: JupyterLab restores earlier tests' tabs into the page.
SIZES_IN = FONT_SIZES.replace("() =>", "(e) =>").replace(
    "document.querySelectorAll", "e.querySelectorAll"
)


def _wait_until(page: Any, done: Any, seconds: float = 60.0) -> None:
    """Poll ``done()`` (a locator's count: the explorer redraws its root as a box opens)."""
    for _ in range(int(seconds * 10)):
        if done():
            return
        page.wait_for_timeout(100)
    raise AssertionError("the view did not change")


def test_diff_and_profile_overlay_draw_their_marks_and_read_at_1280x720(
    open_notebook: Any, page: Any
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    notebook = open_notebook("diff_overlay.ipynb", CELLS)
    for i in range(len(CELLS)):
        notebook.run(i)
        notebook.wait_idle()
    explorers = notebook.locator(".jaxlab-ge")
    explorers.nth(1).wait_for()
    diff, profiled = explorers.nth(0), explorers.nth(1)

    # The diff: tanh became sin inside the jit. The closed boxes holding it are marked on
    # their outside; opened, the removed tanh and the added sin are marked themselves.
    # (the jit itself changed too: it calls block3, not block)
    marked = ".jaxlab-ge-closed:is(.jaxlab-ge-diff-holds, .jaxlab-ge-diff-changed)"
    assert diff.locator(marked).count() == 2  # block in `before`, block3 in `after`
    legend = diff.locator(".jaxlab-ge-legend").inner_text()
    assert "changed" in legend, legend
    for _ in range(2):
        before = diff.locator(".jaxlab-ge-svg g[data-id]").count()
        diff.locator(marked).first.click()
        _wait_until(page, lambda n=before: diff.locator(".jaxlab-ge-svg g[data-id]").count() > n)
    removed = diff.locator(".jaxlab-ge-svg .jaxlab-ge-diff-removed", has_text="tanh")
    added = diff.locator(".jaxlab-ge-svg .jaxlab-ge-diff-added", has_text="sin")
    assert removed.count() == 1 and added.count() == 1
    legend = diff.locator(".jaxlab-ge-legend").inner_text()
    assert "added" in legend and "removed" in legend, legend
    plain = diff.locator(".jaxlab-ge-svg g[data-id]:not([class*='jaxlab-ge-diff-'])")
    assert plain.count() >= 4  # what did not change is drawn plain (x, mul, sum, ...)
    diff.scroll_into_view_if_needed()
    sizes = diff.evaluate(SIZES_IN)
    assert sizes and all(s >= (14 if title else 12) - 0.05 for title, s in sizes), sizes

    # The profile's overlay: the matmul costs most; filled by its time, named first.
    profiled.scroll_into_view_if_needed()
    filled = profiled.evaluate(
        "e => Array.from(e.querySelectorAll('.jaxlab-ge-svg g[data-id] rect'))"
        ".filter(r => r.style.fill).length"
    )
    assert filled >= 2, filled
    assert profiled.locator(".jaxlab-ge-legend-overlay").count() == 1
    notes = " ".join(profiled.locator(".jaxlab-ge-note").all_inner_texts())
    assert "x @ w at In[" in notes, notes  # named by its code and line, not its id
    dot = profiled.locator(".jaxlab-ge-svg g[data-id]", has_text="dot_general").first
    dot.hover()
    detail = profiled.locator(".jaxlab-ge-detail").inner_text()
    assert "time" in detail and "%" in detail, detail
    area = notebook.locator(".jp-OutputArea-output:has(.jaxlab-ge)").last.bounding_box()
    pane = profiled.locator(".jaxlab-ge-pane").bounding_box()
    assert pane["x"] + pane["width"] <= area["x"] + area["width"] + 1
    assert page.requests.outside() == []
