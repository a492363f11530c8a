"""ArrayView in JupyterLab: ``%show`` draws a pytree's rows and a 2-D array's heat map,
hovering reads a value, text is at least 12 px at 1280x720; saved and reopened without
its kernel, the notebook shows each view's static twin at its last state."""

from __future__ import annotations

import re
from typing import Any

import pytest
from conftest import PANEL_ID

pytestmark = pytest.mark.browser

NAME = "array_view.ipynb"
CELLS = [
    "%load_ext jaxlab\n"
    "import jax.numpy as jnp, jaxlab\n"
    "params = {'layers': [{'W': jnp.ones((3, 4)), 'b': jnp.zeros(4)}], 'act': 'relu'}\n"
    "field = jnp.outer(jnp.arange(40.0), jnp.ones(50))  # field[r, c] == r",
    "%show params",
    "%show field",
    "view = jaxlab.show(jnp.zeros(5), name='counter')\n"
    "for k in range(4):\n"
    "    view.update(jnp.full(5, float(k)))\n"
    "view.flush()",
]
LAST = "min 3, max 3"  # the counter's last state only

# Every element with its own text inside the views: the smallest computed font size.
SMALLEST_TEXT = """(roots) => {
  let smallest = Infinity, what = '';
  for (const el of roots.flatMap(root => [...root.querySelectorAll('*')])) {
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.offsetParent) continue;
    const px = parseFloat(getComputedStyle(el).fontSize);
    if (px < smallest) { smallest = px; what = el.className + ': ' + el.textContent; }
  }
  return [smallest, what];
}"""


def test_show_draws_tree_and_heat_map_with_hover_and_saved_twins_keep_the_last_state(
    lab: Any, open_notebook: Any, page: Any
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    notebook = open_notebook(NAME, CELLS)
    notebook.run_all()
    views = notebook.locator(".jaxlab-av")
    views.nth(2).wait_for()  # params, field, counter: the widgets rendered
    params, field = views.nth(0), views.nth(1)

    rows = params.locator(".jaxlab-av-row")
    keys = [rows.nth(i).locator("b").inner_text() for i in range(rows.count())]
    assert keys == ["params", "['act']", "['layers']", "[0]", "['W']", "['b']"]  # JAX's order
    assert "relu" in rows.nth(1).inner_text()
    assert params.locator(".jaxlab-av-selected").inner_text().strip().startswith("['W']")
    assert params.locator("canvas.jaxlab-av-map").count() == 1  # W drawn at once

    canvas = field.locator("canvas.jaxlab-av-map")
    assert field.locator(".jaxlab-av-path").inner_text() == "field"
    box = canvas.bounding_box()
    assert box is not None and box["width"] > 100
    canvas.hover(position={"x": box["width"] * 0.3, "y": box["height"] * 0.6})
    tip = field.locator(".jaxlab-av-tip")
    tip.filter(has_text="=").wait_for()
    r, c, value = re.fullmatch(r"\[(\d+), (\d+)\] = (\S+)", tip.inner_text()).groups()
    assert float(value) == int(r) and 0 < int(r) < 40 and 0 < int(c) < 50

    counter = views.nth(2)
    counter.locator(".jaxlab-av-head").filter(has_text="update").wait_for()
    assert LAST in counter.inner_text()

    smallest, what = views.evaluate_all(SMALLEST_TEXT)
    assert smallest >= 12, what
    twins = notebook.locator(".jaxlab-twin")
    assert twins.count() == 3 and not twins.first.is_visible()  # hidden while live

    # Saved, the kernel shut down, reopened: the twins show the last state.
    assert notebook.save()
    assert notebook.close()
    page.goto(lab.notebook_url(NAME))
    page.wait_for_function(PANEL_ID, arg=NAME)
    twins = notebook.locator(".jaxlab-twin")
    twins.nth(2).wait_for(state="visible")
    assert "['layers']" in twins.nth(0).inner_text() and "relu" in twins.nth(0).inner_text()
    assert twins.nth(1).locator("img.jaxlab-array-map").count() == 1
    assert LAST in twins.nth(2).inner_text()
    assert notebook.locator(".jaxlab-av").count() == 0  # no live view without a kernel
    assert page.requests.outside() == []


MARKS_NAME = "array_view_marks.ipynb"
MARKS_CELLS = [
    "%load_ext jaxlab\n"
    "import jax.numpy as jnp, jaxlab\n"
    "w = jnp.ones((512, 512))  # drawn every 4th value: the NaN's cell is stepped over\n"
    "params = {'layers': [{'W': w}, {'W': w.at[7, 42].set(jnp.nan)}]}",
    "%show params",
    "fade = jnp.outer(jnp.linspace(0, 1, 30), jnp.ones(30))\n"
    "view = jaxlab.show(fade, name='fade', range='first')\n"
    "view.update(fade * 0.1)\n"
    "view.flush()",
]

# WCAG contrast of an element's text against the background it is drawn on.
CONTRAST = """(els) => els.map((el) => {
  const rgb = (css) => css.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => {
    const [r, g, b] = c.map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  let back = el;  // the nearest element that paints a background
  const clear = (c) => c === 'transparent' || c.endsWith(', 0)');
  while (back.parentElement && clear(getComputedStyle(back).backgroundColor)) {
    back = back.parentElement;
  }
  const a = lum(rgb(getComputedStyle(el).color));
  const b = lum(rgb(getComputedStyle(back).backgroundColor));
  return [(Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05), el.className + ': ' + el.textContent];
})"""


def test_a_nan_leaf_opens_marked_and_named_and_the_selected_row_reads_in_the_dark_theme(
    open_notebook: Any, page: Any
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    notebook = open_notebook(MARKS_NAME, MARKS_CELLS)
    notebook.run_all()
    views = notebook.locator(".jaxlab-av")
    views.nth(1).wait_for()
    params, fade = views.nth(0), views.nth(1)
    # opened on the leaf with the NaN, its cell under a marker of at least 6 px, named
    assert params.locator(".jaxlab-av-path").inner_text() == "params['layers'][1]['W']"
    assert params.locator(".jaxlab-av-legend").inner_text() == "NaN at [7, 42]"
    mark = params.locator(".jaxlab-av-mark").bounding_box()
    assert mark is not None and mark["width"] >= 6 and mark["height"] >= 6
    # the live view's range fixed at its first frame: the faded frame drawn against 0..1
    fade.locator(".jaxlab-av-head").filter(has_text="update").wait_for()
    assert fade.locator(".jaxlab-av-bar-top").inner_text() == "1"
    assert "colours fixed at 0 to 1" in fade.locator(".jaxlab-av-range").inner_text()

    page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: 'JupyterLab Dark'})"
    )
    try:
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
        page.wait_for_timeout(500)  # the theme's stylesheet applied
        selected = params.locator(".jaxlab-av-selected")
        parts = selected.locator("*").filter(has_text=re.compile(r"\S"))
        ratios = parts.evaluate_all(CONTRAST) + selected.evaluate_all(CONTRAST)
        ratios += params.locator(".jaxlab-av-legend").evaluate_all(CONTRAST)
        assert len(ratios) >= 3
        for ratio, what in ratios:
            assert ratio >= 4.5, (ratio, what)
    finally:
        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme', "
            "{theme: 'JupyterLab Light'})"
        )
