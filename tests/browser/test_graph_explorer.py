"""GraphExplorer in JupyterLab: open a cluster, search, hover, readable sizes, fit, theme."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import PANEL_ID

pytestmark = pytest.mark.browser

CELLS = [
    "%load_ext jaxlab\nimport jax, jax.numpy as jnp\n"
    "def f(x, w):\n"
    "    h = jax.jit(lambda a: jnp.tanh(a @ w))(x)\n"
    "    return jnp.sum(jnp.sin(h) ** 2)\n"
    "x, w = jnp.ones((4, 3)), jnp.ones((3, 2))",
    "%jaxpr --grad f(x, w)",
]

FONT_SIZES = """() => Array.from(document.querySelectorAll('.jaxlab-ge-svg text')).map(t => {
  const k = t.getScreenCTM().a;  // drawn size: the font size times the SVG's scale
  return [t.classList.contains('jaxlab-ge-label') || t.classList.contains('jaxlab-ge-frame-title'),
          parseFloat(getComputedStyle(t).fontSize) * k];
})"""


COUNTED = """() => /^(\\d+ of|no match)/.test(
  document.querySelector('.jaxlab-ge-count').textContent)"""


def _open(open_notebook: Any, page: Any, name: str) -> Any:
    notebook = open_notebook(name, CELLS)
    for i in range(len(CELLS)):
        notebook.run(i)
        notebook.wait_idle()
    page.locator(".jaxlab-ge-svg").wait_for()
    return notebook


def test_explorer_opens_searches_hovers_and_reads_at_1280x720(
    open_notebook: Any, page: Any
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    _open(open_notebook, page, "explorer.ipynb")
    closed = page.locator(".jaxlab-ge-closed")
    assert closed.count() >= 1  # the inner jit (forward and backward) starts closed
    before = page.locator(".jaxlab-ge-svg g[data-id]").count()
    closed.first.click()
    page.wait_for_function(
        "n => document.querySelectorAll('.jaxlab-ge-svg g[data-id]').length > n", arg=before
    )
    assert page.locator(".jaxlab-ge-frame").count() == 1
    assert page.locator(".jaxlab-ge-svg text", has_text="tanh").count() >= 1

    # Search: counted over the whole program (by the kernel), stepped with Enter.
    search = page.locator(".jaxlab-ge-search")
    search.fill("sin")
    count = page.locator(".jaxlab-ge-count")
    page.wait_for_function(COUNTED)
    assert count.inner_text().startswith("1 of ")
    total = int(count.inner_text().split(" of ")[1])
    assert total >= 1 and page.locator(".jaxlab-ge-match").count() >= 1
    search.press("Enter")
    assert count.inner_text() == f"{2 if total > 1 else 1} of {total}"

    # Hover shows details with the raw equation; a click highlights dependencies.
    node = page.locator(".jaxlab-ge-svg g[data-id='e1']")
    node.hover()
    detail = page.locator(".jaxlab-ge-detail").inner_text()
    assert "type:" in detail
    node.click()
    assert page.locator(".jaxlab-ge-selected").count() == 1
    assert page.locator(".jaxlab-ge-upstream").count() >= 1

    # Readable: titles at least 14 px, other text at least 12 px, as drawn.
    sizes = page.evaluate(FONT_SIZES)
    assert sizes and all(size >= (14 if title else 12) - 0.05 for title, size in sizes), sizes
    # Fits the output's width: the pane showing the drawing is no wider than the output
    # (a wider drawing is dragged into view inside it).
    pane = page.locator(".jaxlab-ge-pane").bounding_box()
    area = page.locator(".jp-OutputArea-output:has(.jaxlab-ge)").first.bounding_box()
    assert pane["x"] + pane["width"] <= area["x"] + area["width"] + 1
    assert page.requests.outside() == []


def test_explorer_follows_the_dark_theme(open_notebook: Any, page: Any) -> None:
    _open(open_notebook, page, "explorer_dark.ipynb")
    light = page.evaluate(
        "() => getComputedStyle(document.querySelector('.jaxlab-ge-node rect')).fill"
    )
    page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: 'JupyterLab Dark'})"
    )
    page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    page.wait_for_function(
        "c => getComputedStyle(document.querySelector('.jaxlab-ge-node rect')).fill !== c",
        arg=light,
    )
    dark = page.evaluate(
        "() => [getComputedStyle(document.querySelector('.jaxlab-ge-node rect')).fill,"
        " getComputedStyle(document.querySelector('.jaxlab-ge-svg text')).fill]"
    )

    def luminance(css: str) -> float:
        r, g, b = (float(v) for v in css[css.index("(") + 1 : css.index(")")].split(",")[:3])
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    assert luminance(dark[0]) < 100 < luminance(dark[1])  # dark boxes, light text
    page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: 'JupyterLab Light'})"
    )


def test_saved_notebook_reopened_without_kernel_shows_the_last_view(
    lab: Any, open_notebook: Any, page: Any
) -> None:
    name = "explorer_saved.ipynb"
    notebook = _open(open_notebook, page, name)
    # Open the inner jit: the twin follows, so the saved view shows tanh inside it.
    before = page.locator(".jaxlab-ge-svg g[data-id]").count()
    page.locator(".jaxlab-ge-closed").first.dispatch_event("click")
    page.wait_for_function(
        "n => document.querySelectorAll('.jaxlab-ge-svg g[data-id]').length > n", arg=before
    )
    assert not page.locator(".jaxlab-twin").first.is_visible()  # hidden while live
    page.wait_for_timeout(500)  # the kernel rewrites the twin after the new view
    assert notebook.save()
    assert notebook.close()
    page.goto(lab.notebook_url(name))
    page.wait_for_function(PANEL_ID, arg=name)
    # In this notebook's panel only: JupyterLab restores earlier tests' tabs and twins.
    twin = notebook.locator(".jaxlab-twin").first
    twin.wait_for(state="visible")
    text = twin.inner_text()
    assert "grad(f)" in text and "tanh" in text  # the opened cluster's insides
    assert twin.locator("svg title").count() >= 1  # tooltips kept: inline SVG, not <img>
    assert twin.locator("img").count() == 0


BIG = [
    "%load_ext jaxlab\nimport jax, jax.numpy as jnp\n"
    "def layer(w, b, x):\n"
    "    return jnp.tanh(x @ w + b)\n"
    "def deep(params, x):\n"
    "    for w, b in params:\n"
    "        x = jax.jit(layer)(w, b, x)\n"
    "    return jnp.mean(x ** 2)\n"
    "params = [(jnp.full((8, 8), 0.1), jnp.zeros(8)) for _ in range(143)]\n"
    "x = jnp.ones((4, 8))",
    "%jaxpr --grad deep(params, x)",
]

DRAWN = (
    "() => Array.from(document.querySelectorAll('.jaxlab-ge-svg g[data-id]'), g => g.dataset.id)"
)


def test_explorer_opens_a_run_then_an_inner_jit_of_2000_equations_and_finds_inside(
    open_notebook: Any, page: Any
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    notebook = open_notebook("explorer_big.ipynb", BIG)
    for i in range(len(BIG)):
        notebook.run(i)
        notebook.wait_idle()
    page.locator(".jaxlab-ge-svg").wait_for()
    first = page.evaluate(DRAWN)
    assert len(first) <= 40  # 2,008 equations: a few runs, the inputs, the outputs
    runs = [d for d in first if d.startswith("cluster:run")]
    assert runs

    # The first view is the Python loop of jitted layers; open it, then its first range
    # of iterations: the inner jits appear as closed boxes, in a frame.
    assert page.locator(".jaxlab-ge-svg text", has_text="loop ×143").count() >= 1
    target, jits = runs[0], []
    for _ in range(3):
        page.locator(f".jaxlab-ge-svg g[data-id='{target}']").dispatch_event("click")
        page.wait_for_function(
            f"() => document.querySelector(\".jaxlab-ge-frame[data-cluster='{target[8:]}']\")"
        )
        drawn = page.evaluate(DRAWN)
        jits = [d for d in drawn if d.startswith("cluster:e")]
        if jits:
            break
        target = next(d for d in drawn if d.startswith("cluster:run"))
    assert jits
    # Hover a closed jit: its details; open it: its equations (tanh) are drawn.
    box = page.locator(f".jaxlab-ge-svg g[data-id='{jits[0]}']")
    box.hover()
    assert "equations" in page.locator(".jaxlab-ge-detail").inner_text()
    box.dispatch_event("click")
    page.wait_for_function(
        "id => Array.from(document.querySelectorAll('.jaxlab-ge-svg g[data-id]'))"
        ".some(g => g.dataset.id.startsWith(id + '/'))",
        arg=jits[0][len("cluster:") :],
    )
    assert page.locator(".jaxlab-ge-svg text", has_text="tanh").count() >= 1

    # Search the whole program: every layer's tanh is counted, most inside closed boxes.
    search = page.locator(".jaxlab-ge-search")
    search.fill("tanh")
    page.wait_for_function(COUNTED)
    count = page.locator(".jaxlab-ge-count")
    assert count.inner_text().startswith("1 of 143")
    assert page.locator(".jaxlab-ge-closed.jaxlab-ge-match").count() >= 1
    # Step far: the match is inside a closed run and jit; the kernel opens what holds it.
    for _ in range(100):
        search.press("Enter")
    page.wait_for_function(
        "() => { const c = document.querySelector('.jaxlab-ge-current');"
        " return c && !c.classList.contains('jaxlab-ge-closed'); }",
        timeout=20_000,
    )
    current = page.locator(".jaxlab-ge-current")
    assert current.count() == 1 and "tanh" in (current.text_content() or "")
    assert count.inner_text().startswith("101 of 143")
    # A click highlights what it depends on, along the visible edges.
    current.dispatch_event("click")
    assert page.locator(".jaxlab-ge-selected").count() == 1
    assert page.locator(".jaxlab-ge-upstream").count() >= 1
    assert page.requests.outside() == []


def test_a_cell_run_again_draws_a_new_explorer_that_works(open_notebook: Any, page: Any) -> None:
    """Running the %jaxpr cell again releases its old explorer (issue 22): the page shows
    one explorer, drawn by the new model, and a click still asks the kernel for a view."""
    probe = (
        "from jaxlab.magics import _cell_widgets\n"
        "from jaxlab.widgets import GraphExplorer\nimport gc\n"
        "print('held', _cell_widgets._session.live(), 'open', sum(isinstance(o, GraphExplorer)"
        " and o.comm is not None for o in gc.get_objects()))"
    )
    notebook = open_notebook("explorer_rerun.ipynb", [*CELLS, probe])
    for i in range(len(CELLS)):
        notebook.run(i)
        notebook.wait_idle()
    notebook.locator(".jaxlab-ge-svg").first.wait_for()
    assert notebook.locator(".jaxlab-ge-svg").count() == 1
    for _ in range(3):
        notebook.run(1)
        notebook.wait_idle()
    notebook.locator(".jaxlab-ge-svg").first.wait_for()
    assert notebook.locator(".jaxlab-ge-svg").count() == 1
    notebook.run(len(CELLS))
    notebook.wait_idle()
    # JupyterLab names the cell it runs: the kernel closed the three explorers it replaced.
    printed = notebook.locator('[data-mime-type="application/vnd.jupyter.stdout"]')
    assert printed.inner_text().split() == ["held", "1", "open", "1"]
    assert notebook.locator(".jaxlab-ge-error").count() == 0
    # The released explorers' twins were rewritten into outputs that are gone: no stray
    # static drawing shows beside the live one.
    assert notebook.locator(".jaxlab-twin-released").count() == 0
    before = notebook.locator(".jaxlab-ge-svg g[data-id]").count()
    notebook.locator(".jaxlab-ge-closed").first.click()
    page.wait_for_function(
        "n => document.querySelectorAll('.jaxlab-ge-svg g[data-id]').length > n", arg=before
    )
    assert notebook.locator(".jaxlab-ge-frame").count() == 1


MLP = [
    "%load_ext jaxlab\nimport jax.numpy as jnp\n"
    "def layer(h, w):\n    return jnp.tanh(h @ w)\n"
    "def mlp(params, x):\n    h = x\n    for w in params:\n        h = layer(h, w)\n"
    "    return jnp.sum(h ** 2)\n"
    "params = [jnp.full((4, 4), 0.1) for _ in range(20)]\nx = jnp.ones((2, 4))",
    "%jaxpr --grad mlp(params, x)",
    "%grad --split mlp(params, x)",
]

# Every text of the outputs as drawn: [font size in px times the SVG's scale, its text].
ALL_TEXT = """() => Array.from(document.querySelectorAll(
    '.jp-OutputArea-output .jaxlab-ge text, .jp-OutputArea-output .jaxlab-ge-legend span,'
    + '.jp-OutputArea-output .jaxlab-grad-split text'))
  .filter(t => t.getBoundingClientRect().width > 0)
  .map(t => [parseFloat(getComputedStyle(t).fontSize) * (t.getScreenCTM ? t.getScreenCTM().a : 1),
             t.textContent])"""


def test_a_20_layer_mlp_reads_at_1280x720_and_what_is_wider_says_it_scrolls(
    open_notebook: Any, page: Any
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    notebook = open_notebook("explorer_mlp.ipynb", MLP)
    for i in range(len(MLP)):
        notebook.run(i)
        notebook.wait_idle()
    notebook.locator(".jaxlab-ge-svg").first.wait_for()
    notebook.locator(".jaxlab-grad-split").first.wait_for()
    # The gradient's first view is the user's structure: the layer calls and their mirror.
    labels = notebook.locator(".jaxlab-ge-svg .jaxlab-ge-label").all_text_contents()
    assert any("layer ×20" in t for t in labels) and any("∂ layer ×20" in t for t in labels)
    # No text under 12 px anywhere in the two outputs, the legend's included.
    sizes = page.evaluate(ALL_TEXT)
    assert sizes and all(size >= 12 - 0.05 for size, _ in sizes), [s for s in sizes if s[0] < 12]
    # The explorer's whole first view fits its pane at full size (no fit needed).
    fits = page.evaluate(
        """() => { const pane = document.querySelector('.jaxlab-ge-pane').getBoundingClientRect();
          const drawn = document.querySelector('.jaxlab-ge-svg > g').getBoundingClientRect();
          return [drawn.width, pane.width]; }"""
    )
    assert fits[0] <= fits[1] + 1, fits
    assert notebook.locator(".jaxlab-ge-cue").first.inner_text() == ""  # no pan to promise
    # Each split program wider than its output says so where it can be seen, above it.
    wide = page.evaluate(
        """() => Array.from(document.querySelectorAll('.jaxlab-split-program')).map(p => {
          const svg = p.querySelector('svg'), box = svg.parentElement;
          const cue = p.querySelector('.jaxlab-split-scroll');
          return [svg.getBoundingClientRect().width > box.clientWidth + 1,
                  !!cue && cue.getBoundingClientRect().height > 0,
                  !!cue && cue.getBoundingClientRect().top < svg.getBoundingClientRect().top]; })"""
    )
    assert len(wide) == 3
    for wider, shown, above in wide:
        assert not wider or (shown and above), wide
    assert page.requests.outside() == []
