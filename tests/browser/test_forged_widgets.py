"""Forged saved state cannot hang, break or blank a page (issue 32).

A notebook's saved widget state is written by whatever ran it, and the docs site and
JupyterLab hand it to jaxlab's ES modules as it is. Each module is opened here in
Chromium with forged models, built from a good state of its class by changing one thing:
every synced value replaced by each wrong type, dimensions that are zero, negative, NaN
or huge, buffers of the wrong length, nesting thousands deep, lists far longer than the
kernel ever sends, a cluster that is its own parent. For each the page must stay
responsive (the render returns, then the page answers within a few seconds), no
exception may escape the module, and the output is never blank: either the view is
drawn (its twin hidden by the view itself), or the view says it could not draw the
saved state and the twin shows.

The cheap path first: a blank page that imports a module from its source and renders it
with a model of plain JavaScript; then the docs site's loader on a page of forged
``<script>`` state; then one notebook in JupyterLab.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from forged_states import (
    BAD_VALUES,
    CLASSES,
    TWIN,
    array_view_good,
    compile_monitor_cases,
    compile_monitor_good,
    deep,
    floats,
    graph_explorer_cases,
    graph_explorer_good,
    profile_timeline_good,
    to_json,
    with_sample,
)

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
RENDER_S = 60  # seconds a page has to render every case of one class (a hang never ends)

# Runs in the page: import a module from its source, then render each case into a fresh
# element beside a twin of its id, one after another. Each case says when it starts on
# the console (a page that hangs cannot answer, so the last start names the culprit) and
# leaves a record: whether render returned or threw, whether the twin shows, whether the
# view shows an error or a drawing. A case may then set one value (a forged change).
RENDER_CASES = """async ([source, cases, twin]) => {
  const revive = (k, v) => (v && typeof v === "object" && typeof v.__b64__ === "string")
    ? new DataView(Uint8Array.from(atob(v.__b64__), (c) => c.charCodeAt(0)).buffer) : v;
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const widget = (await import(url)).default;
  window.__results = [];
  window.__done = false;
  const run = async (i) => {
    if (i >= cases.length) { window.__done = true; return; }
    const [name, stateText, change] = cases[i];
    console.log(`case ${i} start: ${name}`);
    const record = { name, returned: false, thrown: null };
    try {
      const state = JSON.parse(stateText, revive);
      const handlers = new Map();
      const model = {
        get: (k) => state[k],
        set: (k, v) => {
          state[k] = v;
          for (const f of [...(handlers.get(`change:${k}`) || [])]) f();
        },
        on: (e, f) => { if (!handlers.has(e)) handlers.set(e, new Set()); handlers.get(e).add(f); },
        off: (e, f) => handlers.get(e)?.delete(f),
        save_changes() {},
        send() {},
      };
      const box = document.createElement("section");
      box.innerHTML = `<div class="view"></div>` +
        `<div class="jaxlab-twin" data-jaxlab-twin="${twin}">saved twin</div>`;
      document.body.replaceChildren(box);
      const el = box.querySelector(".view");
      await widget.render({ model, el });
      record.returned = true;
      if (change) model.set(change[0], JSON.parse(change[1], revive));
      const twinEl = box.querySelector(".jaxlab-twin");
      record.twin = getComputedStyle(twinEl).display !== "none";
      record.error = el.querySelector(".jaxlab-error")?.textContent ?? null;
      record.drawn = el.querySelector(":scope > :not(style):not(.jaxlab-error)") !== null;
    } catch (err) {
      record.thrown = String(err && err.stack || err);
    }
    window.__results.push(record);
    setTimeout(() => run(i + 1), 0);
  };
  setTimeout(() => run(0), 0);
}"""


def _render(page: Any, module: str, cases: list[tuple[str, Any, Any]]) -> list[dict[str, Any]]:
    """Render every case of ``module`` in one page; fails naming the case that hung."""
    started: list[str] = []
    errors: list[str] = []
    page.on("console", lambda m: started.append(m.text) if m.text.startswith("case ") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    from jaxlab.widgets._base import module_source

    source = module_source(module)  # as the page gets it: the shared _view.js first
    wire = [[name, to_json(state), change] for name, state, change in cases]
    page.evaluate(RENDER_CASES, [source, wire, TWIN])
    try:
        page.wait_for_function("() => window.__done === true", timeout=RENDER_S * 1000)
    except Exception as err:  # the page hung (or never got there): say where
        last = started[-1] if started else "no case started"
        raise AssertionError(f"{module}: the page stopped answering at {last!r}") from err
    results = page.evaluate("() => window.__results")
    # Still answering once every case is drawn, and nothing escaped to the page.
    assert page.evaluate("() => 1 + 1") == 2
    assert errors == [], errors
    return list(results)


def _check(results: list[dict[str, Any]]) -> None:
    for r in results:
        where = f"{r['name']}: {r}"
        assert r["thrown"] is None and r["returned"], where
        # Never blank: an error message with the twin showing, or a drawing without one
        # (the view hides its twin only when it drew).
        if r["error"] is not None:
            assert r["twin"], where
        else:
            assert r["drawn"] and not r["twin"], where


@pytest.fixture
def blank(page: Any) -> Any:
    page.goto("about:blank")
    return page


def test_an_array_view_of_zero_columns_keeps_the_page_responsive(blank: Any) -> None:
    # The saved drawing that hung 6 of 99 hostile docs pages: a sample of 12 values whose
    # dims say 0 columns.
    good = array_view_good()
    forged = with_sample(good, dims=[12, 0], values=floats([1.0] * 12))
    (result,) = _render(blank, "array_view", [("0 columns", forged, None)])
    _check([result])
    assert result["error"] is not None and "12" in result["error"]


@pytest.mark.parametrize("module", sorted(CLASSES))
def test_every_forgery_of_a_saved_state_leaves_the_page_responsive(blank: Any, module: str) -> None:
    cases = [(name, state, None) for name, state in CLASSES[module]()]
    results = _render(blank, module, cases)
    assert [r["name"] for r in results] == [name for name, _, _ in cases]
    _check(results)
    good = results[0]
    assert good["name"] == "good" and good["error"] is None and not good["twin"]
    # A forgery the module cannot draw says so (not only a quieter drawing).
    refused = [r["name"] for r in results if r["error"] is not None]
    assert len(refused) >= len(results) // 4, refused


@pytest.mark.parametrize("module", sorted(CLASSES))
def test_a_forged_change_after_a_good_render_leaves_the_page_responsive(
    blank: Any, module: str
) -> None:
    good = CLASSES[module]()[0][1]
    keys = [k for k in good if not k.startswith("_")]
    cases = []
    for key in keys:
        for label, bad in BAD_VALUES:
            bad = deep() if label == "deep" else bad
            cases.append((f"then {key} = {label}", good, [key, to_json(bad)]))
    results = _render(blank, module, cases)
    _check(results)
    # A view whose redraw failed says so and shows its twin again.
    assert any(r["error"] is not None and r["twin"] for r in results)


# The docs site's loader (docs/_static/jaxlab-widgets.js) on a page of forged saved state.

WIDGETS = {
    "array_view": ("ArrayView", array_view_good),
    "compile_monitor": ("CompileMonitor", compile_monitor_good),
    "graph_explorer": ("GraphExplorer", graph_explorer_good),
    "profile_timeline": ("ProfileTimeline", profile_timeline_good),
}


def _saved_entry(module: str, state: dict[str, Any], twin: str) -> dict[str, Any]:
    """A model as a notebook saves it: the class's own _esm and _css, binary values as
    base64 buffers at their paths (ipywidgets' format)."""
    import jaxlab.widgets as widgets

    cls = getattr(widgets, WIDGETS[module][0])
    buffers: list[dict[str, Any]] = []

    def split(value: Any, path: list[str]) -> Any:
        if isinstance(value, dict) and set(value) == {"__b64__"}:
            buffers.append({"path": path, "data": value["__b64__"], "encoding": "base64"})
            return None
        if isinstance(value, dict):
            return {k: split(v, [*path, k]) for k, v in value.items()}
        return value

    saved = split({**state, "_twin_id": twin}, [])
    saved.update(_esm=vars(cls)["_esm"], _css=vars(cls)["_css"])
    saved["_anywidget_id"] = f"jaxlab.widgets.{module}.{WIDGETS[module][0]}"
    return {
        "model_name": "AnyModel",
        "model_module": "anywidget",
        "state": saved,
        "buffers": buffers,
    }


def _loader_cases() -> list[tuple[str, str, Any, bool]]:
    """(name, module, saved entry or a function of one, drawn): what the page holds."""
    cases: list[tuple[str, str, Any, bool]] = []
    for module, (_, good) in WIDGETS.items():
        cases.append((f"{module} good", module, good(), True))
    av = array_view_good()
    cases += [
        (
            "array_view 0 columns",
            "array_view",
            with_sample(av, dims=[12, 0], values=floats([1.0] * 12)),
            False,
        ),
        ("array_view drawing deep", "array_view", {**av, "drawing": deep()}, False),
        (
            "compile_monitor compiles not a list",
            "compile_monitor",
            compile_monitor_cases()[1][1],
            False,
        ),
        ("graph_explorer a box not a list", "graph_explorer", graph_explorer_cases()[3][1], False),
        (
            "profile_timeline negative duration",
            "profile_timeline",
            {**profile_timeline_good(), "duration_s": -5},
            False,
        ),
    ]

    def entry(change: Any) -> Any:
        return lambda e: change(e) or e

    loader_forgeries = [
        ("buffers not a list", lambda e: e.update(buffers={"path": ["rows"]})),
        ("a buffer null", lambda e: e.update(buffers=[None])),
        ("a buffer's data a number", lambda e: e["buffers"][0].update(data=7)),
        ("a buffer's data not base64", lambda e: e["buffers"][0].update(data="%%%")),
        ("a buffer's path of 10,000 keys", lambda e: e["buffers"][0].update(path=["a"] * 10_000)),
        (
            "a buffer's path through __proto__",
            lambda e: e["buffers"][0].update(path=["__proto__", "x"]),
        ),
        ("a buffer's path nowhere", lambda e: e["buffers"][0].update(path=["no", "where"])),
        ("buffers by the ten thousand", lambda e: e.update(buffers=e["buffers"] * 5000)),
        (
            "the module's CSS not jaxlab's",
            lambda e: e["state"].update(_css="body{outline:7px solid red}"),
        ),
        (
            "the module not jaxlab's",
            lambda e: e["state"].update(_esm="export default {render(){while(1){}}}"),
        ),
    ]
    for name, change in loader_forgeries:
        cases.append((f"array_view {name}", "array_view", entry(change), False))
    return cases


def _loader_page(folder: Path) -> tuple[Path, dict[str, bool]]:
    """A page of every loader case, each with its twin; and which ids should draw."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "widget_trust", ROOT / "docs" / "_ext" / "widget_trust.py"
    )
    assert spec is not None and spec.loader is not None
    trust = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trust)
    loader = folder / "jaxlab-widgets.js"
    loader.write_text((ROOT / "docs" / "_static" / "jaxlab-widgets.js").read_text())
    trust.trust_loader(loader)  # as the docs build does: jaxlab's modules by hash

    models: dict[str, Any] = {}
    body = []
    expect: dict[str, bool] = {}
    for i, (name, module, state, drawn) in enumerate(_loader_cases()):
        model_id, twin = f"model-{i}", f"{i + 1:032x}"
        good = WIDGETS[module][1]()
        models[model_id] = (
            state(_saved_entry(module, good, twin))
            if callable(state)
            else _saved_entry(module, state, twin)
        )
        expect[model_id] = drawn
        view = json.dumps({"model_id": model_id})
        body.append(
            f'<h2>{name}</h2><script type="application/vnd.jupyter.widget-view+json">{view}'
            f'</script><div class="jaxlab-twin" data-jaxlab-twin="{twin}" '
            f'data-jaxlab-model="{model_id}">twin of {model_id}</div>'
        )
    # Views whose model is missing, not JSON, or not named by a string: nothing drawn.
    body.append('<script type="application/vnd.jupyter.widget-view+json">{"model_id": 7}</script>')
    body.append('<script type="application/vnd.jupyter.widget-view+json">{"mod</script>')
    body.append(
        '<script type="application/vnd.jupyter.widget-view+json">{"model_id": "gone"}</script>'
    )
    saved = {"version_major": 2, "version_minor": 0, "state": models}
    state = to_json(saved).replace("<", "\\u003c")
    # A second state script, unreadable, and a third whose state is not an object.
    page = folder / "forged.html"
    page.write_text(
        '<!doctype html><html><head><meta charset="utf-8">'
        '<script src="jaxlab-widgets.js"></script></head><body>'
        f'<script type="application/vnd.jupyter.widget-state+json">{state}</script>'
        '<script type="application/vnd.jupyter.widget-state+json">{"state": </script>'
        '<script type="application/vnd.jupyter.widget-state+json">{"state": [1, 2]}</script>'
        + "".join(body)
        + "</body></html>"
    )
    return page, expect


def test_the_docs_loader_on_a_page_of_forgeries_stays_responsive(page: Any, tmp_path: Path) -> None:
    html, expect = _loader_page(tmp_path)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(html.as_uri())
    page.evaluate(
        "() => { window.jaxlabWidgets.rendered.then((ids) => { window.__drawn = ids; }); }"
    )
    page.wait_for_function("() => window.__drawn !== undefined", timeout=RENDER_S * 1000)
    assert page.evaluate("() => 1 + 1") == 2
    assert errors == []
    drawn = page.evaluate("() => window.__drawn")
    # Drawn: exactly the good states (and those whose module said what it could not read).
    said = page.evaluate(
        "() => [...document.querySelectorAll('.jaxlab-site-widget')]"
        ".filter((h) => h.querySelector('.jaxlab-error')).map((h) => h.dataset.jaxlabModel)"
    )
    assert sorted(set(drawn) - set(said)) == sorted(k for k, ok in expect.items() if ok)
    shown = page.evaluate(
        "() => Object.fromEntries([...document.querySelectorAll('.jaxlab-twin')]"
        ".map((t) => [t.dataset.jaxlabModel, getComputedStyle(t).display !== 'none']))"
    )
    assert shown == {k: not ok for k, ok in expect.items()}
    assert page.evaluate("() => ({}).x === undefined && Object.prototype.x === undefined")
    assert page.evaluate("() => getComputedStyle(document.body).outlineWidth") != "7px"


ZOOM_IN = """(times) => {
  const svg = document.querySelector("svg.jaxlab-pt-svg");
  const r = svg.getBoundingClientRect();
  setTimeout(() => {
    for (let i = 0; i < times; i++) {
      svg.dispatchEvent(new WheelEvent("wheel", {
        deltaY: -100, clientX: r.left + r.width * 0.7, clientY: r.top + 10,
        bubbles: true, cancelable: true,
      }));
    }
    window.__zoomed = true;
  }, 0);
}"""


def test_a_timeline_zoomed_far_from_zero_keeps_the_page_responsive(blank: Any) -> None:
    # A saved trace of 10^9 s, zoomed in at 70% of its width: the axis step falls below
    # the spacing of floating-point numbers there, where `t += step` never moved (the
    # page hung on the code before issue 32).
    forged = {**profile_timeline_good(), "duration_s": 1e9}
    (result,) = _render(blank, "profile_timeline", [("a long trace", forged, None)])
    _check([result])
    blank.evaluate(ZOOM_IN, 250)
    blank.wait_for_function("() => window.__zoomed === true", timeout=RENDER_S * 1000)
    ticks = blank.locator("svg.jaxlab-pt-svg line.jaxlab-pt-tick").count()
    assert 0 < ticks <= 50
    assert blank.evaluate("() => 1 + 1") == 2


# One notebook in JupyterLab: saved state restored by the lab's own widget manager.


HAS_STYLE = """(rule) => [...document.querySelectorAll("style")]
  .some((s) => s.textContent.includes(rule))"""


def _saved_models(widget: Any) -> dict[str, Any]:
    """The models a notebook saves for ``widget``: its own and its Layout's."""
    import base64

    from ipywidgets.widgets.widget import _remove_buffers

    models = {}
    for w in (widget, widget.layout):
        state, paths, buffers = _remove_buffers(w.get_state())
        models[w.model_id] = {
            "model_name": state["_model_name"],
            "model_module": state["_model_module"],
            "model_module_version": state["_model_module_version"],
            "state": state,
            "buffers": [
                {"path": p, "data": base64.b64encode(bytes(b)).decode(), "encoding": "base64"}
                for p, b in zip(paths, buffers, strict=True)
            ],
        }
    return models


def _outputs(widget: Any, view: bool = True) -> list[dict[str, Any]]:
    """A displayed widget's outputs: its view (unless ``view`` is false) and its twin."""
    twin = {"output_type": "display_data", "data": widget.static_bundle(), "metadata": {}}
    if not view:
        return [twin]
    shown = {"model_id": widget.model_id, "version_major": 2, "version_minor": 0}
    data = {"application/vnd.jupyter.widget-view+json": shown, "text/plain": ""}
    return [{"output_type": "display_data", "data": data, "metadata": {}}, twin]


def test_a_forged_array_view_in_a_trusted_notebook_leaves_jupyterlab_responsive(
    lab: Any, open_notebook: Any, page: Any, tmp_path: Path
) -> None:
    import jax.numpy as jnp
    import nbformat
    from nbformat.sign import NotebookNotary

    from jaxlab.compile.log import CompileLog
    from jaxlab.widgets import ArrayView, CompileMonitor

    forged, good = ArrayView(jnp.ones((3, 4)), name="forged"), ArrayView(jnp.ones(5), name="g")
    log = CompileLog()
    log.record("f", compile_s=0.001)
    unseen = CompileMonitor(log)  # its model is restored; no output shows its view
    try:
        models = {**_saved_models(forged), **_saved_models(good), **_saved_models(unseen)}
        sample = models[forged.model_id]["state"]["drawing"]["sample"]
        assert sample["dims"] == [3, 4]
        sample["dims"] = [12, 0]  # the drawing of 0 columns that froze a tab for minutes
        nb = nbformat.v4.new_notebook()
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nb.metadata["widgets"] = {
            "application/vnd.jupyter.widget-state+json": {
                "version_major": 2, "version_minor": 0, "state": models,
            }
        }  # fmt: skip
        for widget, view in ((forged, True), (good, True), (unseen, False)):
            cell = nbformat.v4.new_code_cell("# saved")
            cell.outputs = [nbformat.from_dict(o) for o in _outputs(widget, view)]
            nb.cells.append(cell)
        path = tmp_path / "forged_array_view.ipynb"
        NotebookNotary().sign(nb)  # trusted: the lab restores its saved widgets
        nbformat.write(nb, str(path))
        notebook = open_notebook(path)

        notebook.wait_restored(".jaxlab-av", RENDER_S)  # the good view: a page that answers
        drawn = notebook.locator(".jaxlab-av")
        assert page.evaluate("() => 1 + 1") == 2
        said = notebook.locator(".jaxlab-error")
        said.wait_for(timeout=RENDER_S * 1000)
        assert "[12, 0]" in said.inner_text() and "12 values" in said.inner_text()
        assert drawn.count() == 1 and "g · update" in drawn.inner_text()
        twin = {
            name: notebook.locator(f'.jaxlab-twin[data-jaxlab-twin="{w._twin_id}"]')
            for name, w in (("forged", forged), ("good", good), ("unseen", unseen))
        }
        assert twin["forged"].is_visible()  # the view says it could not draw: the twin shows
        assert not twin["good"].is_visible()  # hidden by its drawn view
        # A model restored whose view never renders: its CSS is in the page, its twin shows.
        assert page.evaluate(HAS_STYLE, ".jaxlab-cm-session")
        assert twin["unseen"].is_visible()
    finally:
        for widget in (forged, good, unseen):
            widget.close()
