"""`%grad --split` in JupyterLab at 1280x720: three programs stacked at full width, text
readable as drawn, each residual's badge on the linearized program and on its producer."""

from __future__ import annotations

import itertools
from typing import Any

import jax.numpy as jnp
import pytest

from jaxlab.autodiff.split import grad_split
from jaxlab.graph.render import tag_colour

pytestmark = pytest.mark.browser

SOURCE = (
    "def mlp_loss(params, x, y):\n"
    "    h = jnp.tanh(x @ params[0]['W'] + params[0]['b'])\n"
    "    return jnp.mean((h @ params[1]['W'] - y) ** 2)\n"
)
CELLS = [
    "%load_ext jaxlab\nimport jax, jax.numpy as jnp\n"
    + SOURCE
    + "params = [{'W': jnp.full((3, 4), 0.3), 'b': jnp.linspace(-0.5, 0.5, 4)},\n"
    "          {'W': jnp.full((4, 1), 0.2)}]\n"
    "x, y = jnp.linspace(-1.0, 1.0, 15).reshape(5, 3), jnp.ones((5, 1))",
    "%grad --split mlp_loss(params, x, y)",
]

# Per program: its box, and every SVG text as drawn (font size times the SVG's scale),
# with Graphviz's own size (14 for titles, 12 for rows) and its content.
SECTIONS = """() => Array.from(document.querySelectorAll('.jaxlab-split-program')).map(s => {
  const box = s.getBoundingClientRect();
  const texts = Array.from(s.querySelectorAll('svg text')).map(t => [
    parseFloat(t.getAttribute('font-size')),
    parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a,
    t.textContent]);
  const fills = Array.from(s.querySelectorAll('svg polygon, svg path'))
    .map(p => p.getAttribute('fill'));
  return {x: box.x, y: box.y, width: box.width, bottom: box.bottom, texts, fills};
})"""


def _model():
    namespace: dict[str, Any] = {"jnp": jnp}
    exec(SOURCE, namespace)
    params = [
        {"W": jnp.full((3, 4), 0.3), "b": jnp.linspace(-0.5, 0.5, 4)},
        {"W": jnp.full((4, 1), 0.2)},
    ]
    x, y = jnp.linspace(-1.0, 1.0, 15).reshape(5, 3), jnp.ones((5, 1))
    return grad_split(namespace["mlp_loss"], params, x, y)


def test_split_stacks_three_readable_programs_with_linked_badges(
    open_notebook: Any, page: Any
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    notebook = open_notebook("split.ipynb", CELLS)
    for i in range(len(CELLS)):
        notebook.run(i)
        notebook.wait_idle()
    notebook.locator(".jaxlab-split-program svg").nth(2).wait_for()
    sections = page.evaluate(SECTIONS)
    assert len(sections) == 3
    # Stacked: one under the other, each as wide as the output.
    area = notebook.locator(".jp-OutputArea-output:has(.jaxlab-grad-split)").bounding_box()
    for above, below in itertools.pairwise(sections):
        assert below["y"] >= above["bottom"] - 1
    for s in sections:
        assert abs(s["x"] - sections[0]["x"]) <= 1
        assert s["width"] >= area["width"] - 30
    # Readable as drawn: Graphviz's 14 pt titles at 14 px or more, the rest at 12 px.
    for s in sections:
        assert s["texts"]
        for size, drawn, text in s["texts"]:
            assert drawn >= (14 if size >= 14 else 12) - 0.05, (size, drawn, text)
    # HTML titles and legend: 14 px and 12 px at least.
    title = notebook.locator(".jaxlab-split-program > div").first
    assert float(title.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")) >= 14
    legend = notebook.locator(".jaxlab-split-residuals li").first
    assert float(legend.evaluate("e => parseFloat(getComputedStyle(e).fontSize)")) >= 12

    # The badges are the model's: every residual on the linearized program, each linked
    # one on the primal program too, in its colour.
    split = _model()
    primal_texts = {t for _, _, t in sections[0]["texts"]}
    linear_texts = {t for _, _, t in sections[1]["texts"]}
    linked = [r for r in split.residuals if r.producer]
    assert linked and len(linked) < len(split.residuals)
    for r in split.residuals:
        assert r.name in linear_texts
        assert tag_colour(r.name) in sections[1]["fills"]
    for r in linked:
        assert r.name in primal_texts and tag_colour(r.name) in sections[0]["fills"]
    assert notebook.locator(".jaxlab-split-residuals li").count() == len(split.residuals)
    assert page.requests.outside() == []
