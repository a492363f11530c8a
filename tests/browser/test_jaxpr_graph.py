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
