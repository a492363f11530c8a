"""The documentation site draws jaxlab's widgets from their saved state, offline.

A tiny site is built with Sphinx from one small notebook, with ``docs/conf.py``'s settings
and the ``tutorials`` extension (which executes the notebook: nbclient saves the widgets'
state). Served on 127.0.0.1, the page draws the CompileMonitor through its own ES module
(the DOM asserted is the module's, not the static twin's), loads nothing from elsewhere,
keeps a function name with ``</SCRIPT>`` in it inside the saved state, and writes an
ipywidgets slider as its saved description and value. Without JavaScript, the twin shows.
These build a site and drive Chromium (marked ``browser``); the tests of how the site writes
a notebook's widgets (``site_view``) need neither.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import runpy
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
CELLS = [
    "%load_ext jaxlab\n"
    "import jax, jax.numpy as jnp\n"
    "def f(x):\n"
    "    return jnp.sin(x).sum()\n"
    "jax.jit(f)(jnp.ones(3))",
    "%compile_log",
    "jax.jit(f)(jnp.ones(4))",
    # A name that would end the state's <script> if written as it is.
    "def g(x):\n    return 2 * x\ng.__name__ = g.__qualname__ = '</SCRIPT><!--g'\njax.jit(g)(1.0)",
    "import ipywidgets as widgets\nwidgets.IntSlider(value=7, description='steps <n>')",
    # A GraphExplorer with a nested program: opening it asks the kernel for a new layout.
    "inner = jax.jit(lambda x: jnp.tanh(x) * 2)\ndef outer(x):\n    return inner(x).sum()",
    "%jaxpr outer(jnp.ones(3))",
]
LATEST = "x: f32[3] → f32[4]"  # the twin's reason for f's second compilation
CONF = """\
import runpy
from pathlib import Path

DOCS = Path({docs!r})
conf = runpy.run_path(str(DOCS / "conf.py"))
globals().update({{k: v for k, v in conf.items() if not k.startswith("__")}})
# The site's own settings; only the pages written at build time are the tutorials'.
extensions = ["myst_nb", "tutorials", "math_svg"]
html_static_path = [str(DOCS / "_static")]
"""


def _check_site() -> Any:
    saved = list(sys.path)
    try:
        return runpy.run_path(str(DOCS / "check_site.py"))
    finally:
        sys.path[:] = saved


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The built site of one tutorial, ``tutorials/01_tiny.html``."""
    import nbformat

    root = tmp_path_factory.mktemp("site")
    (root / "docs").mkdir()
    (root / "notebooks").mkdir()
    (root / "docs" / "conf.py").write_text(CONF.format(docs=str(DOCS)))
    (root / "docs" / "index.md").write_text("# Tiny\n\n```{toctree}\ntutorials/01_tiny\n```\n")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# A tiny tutorial")]
    nb.cells += [nbformat.v4.new_code_cell(source) for source in CELLS]
    nbformat.write(nb, str(root / "notebooks" / "01_tiny.ipynb"))
    out = root / "html"
    build = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    env = {"JAXLAB_EXECUTED_NOTEBOOKS": ""}  # the tutorials extension executes it
    result = subprocess.run(
        [*build, str(root / "docs"), str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def server(site: Path) -> Iterator[str]:
    """The site served on 127.0.0.1, as a reader's web server would."""
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def _elsewhere(urls: list[str], base: str) -> list[str]:
    here = urlsplit(base).netloc
    return [
        u
        for u in urls
        if urlsplit(u).scheme not in ("blob", "data", "about") and urlsplit(u).netloc != here
    ]


@pytest.mark.browser
def test_site_check_passes_on_the_built_page(site: Path) -> None:
    check = _check_site()
    page = site / "tutorials" / "01_tiny.html"
    html = page.read_text()
    assert check["widget_problems"](html, "tutorials/01_tiny.html", site) == []
    assert check["remote_fetches"](html) == []
    # The same page without its saved state, or without the loader, is reported.
    bare = html.replace('type="application/vnd.jupyter.widget-state+json"', 'type="text/x-gone"')
    assert any(
        "without its saved state" in p for p in check["widget_problems"](bare, "t.html", site)
    )
    unloaded = html.replace("jaxlab-widgets.js", "elsewhere.js")
    assert any(
        "does not load" in p
        for p in check["widget_problems"](unloaded, "tutorials/01_tiny.html", site)
    )


def _saved_state(site: Path) -> dict[str, Any]:
    html = (site / "tutorials" / "01_tiny.html").read_text()
    start = html.index('<script type="application/vnd.jupyter.widget-state+json">')
    body = html[html.index(">", start) + 1 : html.index("</script>", start)]
    return dict(json.loads(body)["state"])


def _monitor_functions(site: Path) -> list[dict[str, Any]]:
    (monitor,) = [
        m
        for m in _saved_state(site).values()
        if m["state"].get("_anywidget_id", "").endswith(".CompileMonitor")
    ]
    return list(monitor["state"]["functions"])


@pytest.mark.browser
def test_saved_state_survives_a_script_end_tag_in_a_name(site: Path) -> None:
    names = [fn["name"] for fn in _monitor_functions(site)]
    assert "</SCRIPT><!--g" in names and "f" in names
    # Only the models the page draws (and those they name) are kept: not the slider's.
    kinds = sorted(m["model_name"] for m in _saved_state(site).values())
    assert kinds == ["AnyModel", "AnyModel", "LayoutModel", "LayoutModel"]


@pytest.mark.browser
def test_widget_is_drawn_by_its_own_module_from_the_site_alone(
    site: Path, server: str, page: Any
) -> None:
    page.goto(f"{server}/tutorials/01_tiny.html")
    drawn = page.evaluate("() => window.jaxlabWidgets.rendered")
    assert len(drawn) == 2
    widget = ".jaxlab-site-widget .jaxlab-cm"
    live = page.locator(f'{widget} tr[data-function="f"] .jaxlab-cm-count')
    assert live.inner_text() == "2"  # the module's table: f compiled for f32[3] and f32[4]
    assert page.locator(f'{widget} tr[data-function="</SCRIPT><!--g"]').count() == 1
    twins = page.locator(".jaxlab-twin")
    assert twins.count() == 2
    assert not twins.nth(0).is_visible() and not twins.nth(1).is_visible()
    # The page's colours reach the widget: alabaster's text colour, not JupyterLab's.
    colour = page.evaluate(
        "() => getComputedStyle(document.querySelector('.jaxlab-site-widget'))"
        ".getPropertyValue('--jp-ui-font-color1').trim()"
    )
    assert colour == "#3e4349"
    # A control works on the saved state, without a kernel: "my functions only" off shows
    # the functions of JAX and libraries the session compiled too.
    functions = _monitor_functions(site)
    mine = [f for f in functions if f["user_code"]]
    assert 0 < len(mine) < len(functions)
    rows = page.locator(f"{widget} tr[data-function]")
    assert rows.count() == len(mine)
    page.locator(f"{widget} input[type=checkbox]").uncheck()
    assert rows.count() == len(functions)
    # The slider, not an anywidget, is its saved description and value as text.
    assert page.locator(".jaxlab-saved-widget").inner_text().split() == ["steps", "<n>", "7"]
    assert _elsewhere(page.requests.urls, server) == []
    loader = [u for u in page.requests.urls if urlsplit(u).path == "/_static/jaxlab-widgets.js"]
    assert loader


@pytest.mark.browser
def test_a_control_that_needs_the_kernel_says_there_is_none(server: str, page: Any) -> None:
    page.goto(f"{server}/tutorials/01_tiny.html")
    page.evaluate("() => window.jaxlabWidgets.rendered")
    explorer = page.locator(".jaxlab-site-widget", has=page.locator(".jaxlab-ge-node"))
    nodes = explorer.locator(".jaxlab-ge-node[data-id]")
    assert nodes.count() >= 3  # drawn by the module: ports x and out, the nested program
    note = explorer.locator(".jaxlab-site-widget-note")
    assert not note.is_visible()
    # The saved view promises nothing that needs a kernel: no "click to open", no search.
    assert "click to open" not in explorer.inner_text()  # a click still highlights, here
    assert "click" not in explorer.inner_text().lower()  # nor "click a node" in the legend
    # A drawing that fits its pane says nothing of panning (a wider one does: the docs'
    # reading check finds any that does not).
    assert explorer.locator(".jaxlab-ge-cue").inner_text() == ""
    assert explorer.locator(".jaxlab-ge-search").count() == 0
    assert explorer.locator(".jaxlab-ge-fit").count() == 1  # fitting happens in the page
    explorer.locator(".jaxlab-ge-closed, .jaxlab-ge-frame-title").first.click()
    assert note.inner_text().startswith("This page has no kernel")


@pytest.mark.browser
def test_without_javascript_the_twin_shows(server: str, browser: Any) -> None:
    context = browser.new_context(java_script_enabled=False)
    try:
        page = context.new_page()
        urls: list[str] = []
        page.on("request", lambda r: urls.append(r.url))
        page.goto(f"{server}/tutorials/01_tiny.html")
        monitor, explorer = page.locator(".jaxlab-twin").all()
        assert monitor.is_visible() and explorer.is_visible()
        assert LATEST in monitor.inner_text()
        assert explorer.locator("svg").count() == 1  # the explorer's saved drawing
        assert page.locator(".jaxlab-site-widget").count() == 0
        assert page.locator(".jaxlab-saved-widget output").inner_text() == "7"
        assert _elsewhere(urls, server) == []
    finally:
        context.close()


# Content that arrives from elsewhere (issue 22): the page runs only jaxlab's own modules.

FOREIGN_ESM = (
    "export default { render({ el }) { window.foreignRan = true; el.textContent = 'x'; } }"
)


def _hostile_page(site: Path, name: str, change: Any) -> str:
    """A copy of the tutorial page whose saved state ``change(state)`` rewrote."""
    page = site / "tutorials" / "01_tiny.html"
    html = page.read_text()
    start = html.index('<script type="application/vnd.jupyter.widget-state+json">')
    body_start = html.index(">", start) + 1
    body_end = html.index("</script>", start)
    saved = json.loads(html[body_start:body_end])
    change(saved["state"])
    body = json.dumps(saved).replace("<", "\\u003c")
    (site / "tutorials" / f"{name}.html").write_text(html[:body_start] + body + html[body_end:])
    return f"tutorials/{name}.html"


def _model_of(state: dict[str, Any], widget: str) -> tuple[str, dict[str, Any]]:
    (found,) = [
        (k, m) for k, m in state.items() if m["state"].get("_anywidget_id", "").endswith(widget)
    ]
    return found


def _twin_shown(page: Any, model_id: str) -> bool:
    return bool(page.locator(f'.jaxlab-twin[data-jaxlab-model="{model_id}"]').is_visible())


@pytest.mark.browser
def test_a_module_jaxlab_does_not_ship_is_not_run_and_its_twin_shows(
    site: Path, server: str, page: Any
) -> None:
    ids = {}

    def foreign(state: dict[str, Any]) -> None:
        ids["monitor"], monitor = _model_of(state, ".CompileMonitor")
        ids["explorer"], _ = _model_of(state, ".GraphExplorer")
        monitor["state"]["_esm"] = FOREIGN_ESM
        monitor["state"]["_css"] = "body { outline: 7px solid rgb(255, 0, 0); }"

    page.goto(f"{server}/{_hostile_page(site, 'foreign', foreign)}")
    drawn = page.evaluate("() => window.jaxlabWidgets.rendered")
    assert drawn == [ids["explorer"]]  # jaxlab's own module, by hash, still draws
    assert page.evaluate("() => window.foreignRan") is None
    assert page.evaluate("() => getComputedStyle(document.body).outlineWidth") != "7px"
    assert _twin_shown(page, ids["monitor"]) and not _twin_shown(page, ids["explorer"])

    # jaxlab's module with a CSS it does not ship is not drawn either.
    def foreign_css(state: dict[str, Any]) -> None:
        _, monitor = _model_of(state, ".CompileMonitor")
        monitor["state"]["_css"] += "\nbody { outline: 7px solid red; }"

    page.goto(f"{server}/{_hostile_page(site, 'foreign_css', foreign_css)}")
    assert page.evaluate("() => window.jaxlabWidgets.rendered") == [ids["explorer"]]


@pytest.mark.browser
@pytest.mark.parametrize("bad", ["proto", "malformed", "nowhere"])
def test_a_bad_buffer_spoils_only_its_own_widget(
    site: Path, server: str, page: Any, bad: str
) -> None:
    ids = {}

    def spoil(state: dict[str, Any]) -> None:
        ids["monitor"], monitor = _model_of(state, ".CompileMonitor")
        ids["explorer"], explorer = _model_of(state, ".GraphExplorer")
        buffer = {
            "proto": {"path": ["__proto__", "polluted"], "data": "AQ==", "encoding": "base64"},
            "malformed": {"path": ["view"], "data": "%%% not base64", "encoding": "base64"},
            "nowhere": {"path": ["missing", "deep"], "data": "AQ==", "encoding": "base64"},
        }[bad]
        spoiled = monitor if bad == "proto" else explorer
        spoiled["buffers"] = [buffer]

    page.goto(f"{server}/{_hostile_page(site, f'buffer_{bad}', spoil)}")
    drawn = page.evaluate("() => window.jaxlabWidgets.rendered")
    spoiled, fine = ("monitor", "explorer") if bad == "proto" else ("explorer", "monitor")
    assert drawn == [ids[fine]]
    assert page.evaluate(
        "() => ({}).polluted === undefined && Object.prototype.polluted === undefined"
    )
    assert _twin_shown(page, ids[spoiled]) and not _twin_shown(page, ids[fine])
    assert page.locator(f'.jaxlab-site-widget[data-jaxlab-model="{ids[spoiled]}"]').count() == 0


def test_the_built_loader_trusts_exactly_the_modules_jaxlab_ships():
    import hashlib
    import importlib.util

    spec = importlib.util.spec_from_file_location("widget_trust", DOCS / "_ext" / "widget_trust.py")
    assert spec is not None and spec.loader is not None
    trust = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trust)
    shipped = {m["widget"]: m for m in trust.shipped_modules()}
    assert sorted(shipped) == [
        "ArrayView",
        "CompileMonitor",
        "Explorer",
        "GraphExplorer",
        "KeyLineage",
        "ProfileTimeline",
        "StepsPlayer",
    ]
    from jaxlab.widgets._base import module_source

    js = module_source("graph_explorer").encode()  # the shared _view.js, then its own
    assert shipped["GraphExplorer"]["esm"] == hashlib.sha256(js).hexdigest()
    # The source loader trusts nothing; its built copy names the shipped hashes.
    source = (DOCS / "_static" / "jaxlab-widgets.js").read_text()
    assert trust.PLACEHOLDER in source


# How the tutorials extension writes a notebook's widgets, without a build or a browser.

VIEW = "application/vnd.jupyter.widget-view+json"
STATE = "application/vnd.jupyter.widget-state+json"
PNG = "iVBORw0KGgo="


def _tutorials() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("tutorials", DOCS / "_ext" / "tutorials.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _model(name: str, module: str = "@jupyter-widgets/controls", **state: Any) -> dict[str, Any]:
    return {"model_name": name, "model_module": module, "state": {"_model_name": name, **state}}


def _view(model_id: str, text: str = "") -> dict[str, Any]:
    data = {VIEW: {"model_id": model_id}, "text/plain": text}
    return {"output_type": "display_data", "data": data, "metadata": {}}


def test_site_view_writes_controls_as_their_saved_state_and_keeps_anywidgets():
    models = {
        "layout": _model("LayoutModel", "@jupyter-widgets/base"),
        "mine": _model(
            "AnyModel",
            "anywidget",
            _esm="// a module\nexport default {}",
            layout="IPY_MODEL_layout",
        ),
        "url": _model("AnyModel", "anywidget", _esm="https://cdn.example.org/widget.js"),
        "omega": _model(
            "FloatSliderModel", value=6.0, readout_format=".2f", description="ω <rad/s>"
        ),
        "plot": _model(
            "OutputModel",
            "@jupyter-widgets/output",
            outputs=[
                {
                    "output_type": "display_data",
                    "data": {"image/png": PNG, "text/plain": "<Figure>"},
                },
                {"output_type": "stream", "name": "stdout", "text": "</pre><script>x</script>"},
            ],
        ),
        "box": _model("VBoxModel", children=["IPY_MODEL_omega", "IPY_MODEL_plot"]),
        "label": _model("HTMLModel", value="ω chunks: 100%"),
        "bar": _model("FloatProgressModel", value=8.0, max=8.0),
        "tqdm": _model("HBoxModel", children=["IPY_MODEL_label", "IPY_MODEL_bar"]),
        # tqdm(leave=False) hides its bar when done: JupyterLab shows nothing, nor does the site
        "hidden": _model("LayoutModel", "@jupyter-widgets/base", visibility="hidden"),
        "gone_bar": _model("HBoxModel", children=["IPY_MODEL_bar"], layout="IPY_MODEL_hidden"),
    }
    nb = {
        "metadata": {"widgets": {STATE: {"version_major": 2, "version_minor": 0, "state": models}}},
        "cells": [
            {"cell_type": "code", "source": "", "outputs": [_view("mine")]},
            {"cell_type": "code", "source": "", "outputs": [_view("box", "interactive(...)")]},
            {"cell_type": "code", "source": "", "outputs": [_view("tqdm")]},
            {"cell_type": "code", "source": "", "outputs": [_view("gone"), _view("url")]},
            {"cell_type": "code", "source": "", "outputs": [_view("gone_bar")]},
        ],
    }
    shown = _tutorials().site_view(nb)
    cells = [c["outputs"] for c in shown["cells"]]
    assert cells[0] == [_view("mine")]  # drawn in the page from its state
    assert cells[3] == []  # no state saved, or a module the site would have to fetch
    assert cells[4] == []
    (interact,) = cells[1]
    assert VIEW not in interact["data"] and interact["data"]["text/plain"] == "interactive(...)"
    html = interact["data"]["text/html"]
    assert "<output>6.00</output>" in html and "ω &lt;rad/s&gt;" in html  # readout, escaped
    assert f'src="data:image/png;base64,{PNG}"' in html  # the figure the Output captured
    assert "&lt;/pre&gt;&lt;script&gt;" in html and "<script>" not in html
    assert "jaxlab-saved-vertical" in html
    (bar,) = cells[2]
    assert '<progress value="8.0" max="8.0"></progress>' in bar["data"]["text/html"]
    assert "ω chunks: 100%" in bar["data"]["text/html"]
    # The page keeps the state of what it draws, and the models that state names.
    kept = shown["metadata"]["widgets"][STATE]
    assert sorted(kept["state"]) == ["layout", "mine"] and kept["version_major"] == 2


def test_site_view_leaves_no_state_when_nothing_is_drawn_from_it():
    models = {"n": _model("IntSliderModel", value=3, description="n")}
    nb = {
        "metadata": {"widgets": {STATE: {"state": models}}},
        "cells": [
            {"cell_type": "code", "source": "", "outputs": [_view("n", "IntSlider(value=3)")]}
        ],
    }
    shown = _tutorials().site_view(nb)
    assert "widgets" not in shown["metadata"]
    (out,) = shown["cells"][0]["outputs"]
    assert "<output>3</output>" in out["data"]["text/html"]


def test_state_json_cannot_end_its_script_element():
    tutorials = _tutorials()
    text = json.dumps({"name": "</SCRIPT><!--g", "esm": "a < b"})
    safe = tutorials.safe_script_json(text)
    assert "<" not in safe
    assert json.loads(safe) == json.loads(text)
