"""`%jaxpr` in JupyterLab: the welcome notebook draws the graph the model describes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax.numpy as jnp
import pytest

import jaxlab

pytestmark = pytest.mark.browser

WELCOME = Path(__file__).resolve().parents[2] / "notebooks" / "00_welcome.ipynb"

# In a live notebook %jaxpr shows the GraphExplorer: one <g data-id> per drawn node (a
# closed cluster is "cluster:<id>"), in each explorer's SVG, in document order.
DRAWN_IDS = """() => Array.from(document.querySelectorAll('.jaxlab-ge-svg')).map(svg =>
  Array.from(svg.querySelectorAll('g[data-id]')).map(g => g.dataset.id))"""


def test_welcome_notebook_draws_the_jaxpr_graph(open_notebook: Any, page: Any) -> None:
    open_notebook(WELCOME).run_all()
    page.wait_for_function("() => document.querySelectorAll('.jaxlab-ge-svg').length >= 2")
    assert (
        page.locator(
            ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']"
        ).count()
        == 0
    )

    # The first explorer is `%jaxpr f(x, w)`, the second `%jaxpr --grad f(x, w)`: the same
    # node ids as the models built here from the same function and shapes (no clusters).
    def f(x, w):
        return jnp.tanh(x @ w).sum()

    x, w = jnp.ones((4, 3)), jnp.ones((3, 2))
    plain = jaxlab.jaxpr_graph(f, x, w)
    grad = jaxlab.jaxpr_graph(f, x, w, grad=True)
    drawn = page.evaluate(DRAWN_IDS)
    assert sorted(drawn[0]) == sorted(n.id for n in plain.nodes)
    assert sorted(drawn[1]) == sorted(n.id for n in grad.nodes)
    assert {"dot_general", "tanh", "reduce_sum"} <= set(plain.primitives())

    text = page.locator(".jaxlab-jaxpr").first.inner_text()  # the --text cell, coloured
    assert "dot_general" in text and "tanh" in text
    assert page.requests.outside() == []


STATIC_CELLS = [
    "%load_ext jaxlab\nimport jax.numpy as jnp\n"
    "def f(x, w):\n    return jnp.tanh(x @ w).sum()\n"
    "x, w = jnp.ones((4, 3)), jnp.ones((3, 2))",
    "%jaxpr --static f(x, w)",
    "%grad --graph --static f(x, w)",
    # Thirty operations side by side: wider than the output area at its natural size.
    "ops = [jnp.sin, jnp.cos, jnp.tanh, jnp.exp, jnp.log1p, jnp.sqrt] * 5\n"
    "def wide(x):\n    return sum(op(x * k) for k, op in enumerate(ops))\n"
    "%jaxpr --static wide(1.0)",
]

# Per static graph: inline (not an <img>), its tooltips, and the filter the theme gives it.
STATIC_GRAPHS = """() => Array.from(document.querySelectorAll('.jaxlab-graph-svg > svg')).map(
  svg => [svg.querySelectorAll('g.node > title').length, getComputedStyle(svg).filter])"""


def _mean_luminance(png: bytes) -> float:
    import io

    from PIL import Image, ImageStat

    return ImageStat.Stat(Image.open(io.BytesIO(png)).convert("L")).mean[0]


def test_static_graphs_are_inline_with_tooltips_and_follow_the_dark_theme(
    open_notebook: Any, page: Any
) -> None:
    notebook = open_notebook("static_dark.ipynb", STATIC_CELLS)
    for i in range(len(STATIC_CELLS)):
        notebook.run(i)
        notebook.wait_idle()
    page.wait_for_function("() => document.querySelectorAll('.jaxlab-graph-svg > svg').length >= 2")
    graphs = page.evaluate(STATIC_GRAPHS)
    assert len(graphs) == 3 and all(tips >= 3 for tips, _ in graphs)  # a tooltip per node
    assert all(f == "none" for _, f in graphs)  # the light theme draws the SVG as it is
    # Never an <img> (in this notebook: an earlier test's restored tab may draw one).
    assert notebook.locator(".jp-OutputArea-output img").count() == 0
    # Every graph fits its output's width (the wide one scaled down to it).
    fits = page.evaluate(
        """() => Array.from(document.querySelectorAll('.jaxlab-graph-svg > svg')).map(svg => {
          const area = svg.closest('.jp-OutputArea-output').getBoundingClientRect();
          const box = svg.getBoundingClientRect();
          return [box.width, area.width, svg.viewBox.baseVal.width];
        })"""
    )
    assert all(w <= area + 1 for w, area, _ in fits), fits
    assert fits[2][2] > fits[2][1]  # the wide graph really is wider than the output
    graph = page.locator(".jaxlab-graph-svg > svg").first
    graph.scroll_into_view_if_needed()
    light = _mean_luminance(graph.screenshot())
    page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: 'JupyterLab Dark'})"
    )
    try:
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
        page.wait_for_timeout(500)  # the theme's stylesheet applied
        assert all("invert" in f for _, f in page.evaluate(STATIC_GRAPHS))
        dark = _mean_luminance(graph.screenshot())
    finally:
        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme', "
            "{theme: 'JupyterLab Light'})"
        )
    # Mostly background: white-ish in the light theme, dark in the dark one.
    assert light > 180 and dark < 90, (light, dark)
