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

import base64
import json
import math
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "widgets" / "static"
TWIN = "0123456789abcdef0123456789abcdef"  # the twin id of every forged model
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

BAD_VALUES: list[tuple[str, Any]] = [
    ("null", None),
    ("zero", 0),
    ("negative", -1),
    ("huge", 1e308),
    ("string", "<b>x</b>"),
    ("true", True),
    ("empty list", []),
    ("empty object", {}),
    ("list of nulls", [None, None]),
    ("deep", None),  # filled in by _deep()
]


DEEP = "__jaxlab_deep__"  # written as a list nested DEPTH deep when sent
DEPTH = 3000


def _deep() -> str:
    return DEEP


def _buffer(data: bytes) -> dict[str, str]:
    return {"__b64__": base64.b64encode(data).decode()}


def _floats(values: list[float]) -> dict[str, str]:
    import struct

    return _buffer(struct.pack(f"<{len(values)}d", *values))


def _json(value: Any) -> str:
    deep = "[" * DEPTH + "1" + "]" * DEPTH
    return json.dumps(value, allow_nan=False).replace(json.dumps(DEEP), deep)


def _every_value_forged(good: dict[str, Any], keys: list[str]) -> list[tuple[str, Any]]:
    """Each of ``keys`` replaced, alone, by each wrong value."""
    cases = []
    for key in keys:
        for label, bad in BAD_VALUES:
            bad = _deep() if label == "deep" else bad
            cases.append((f"{key} = {label}", {**good, key: bad}))
    return cases


# Good states, as the kernel sends them (see each module's header).


def _array_view_good() -> dict[str, Any]:
    rows = [
        {
            "path": "p",
            "key": "p",
            "label": "dict",
            "depth": 0,
            "leaf": False,
            "array": False,
            "line": "",
            "params": 12,
            "bytes": 48,
            "flags": "",
            "more": 0,
        },
        {
            "path": "p['a']",
            "key": "['a']",
            "label": "",
            "depth": 1,
            "leaf": True,
            "array": True,
            "line": "float32 (3, 4)",
            "params": 12,
            "bytes": 48,
            "flags": "",
            "more": 0,
        },
    ]
    sample = {
        "values": _floats([float(i) for i in range(12)]),
        "dims": [3, 4],
        "kind": "float",
        "steps": [1, 1],
        "slice_at": [],
        "bytes": 96,
    }
    drawing = {
        "path": "p['a']",
        "shape": [3, 4],
        "line": "float32 (3, 4)",
        "kind": "float",
        "sample": sample,
        "caption": "all 12 values",
        "shards": None,
    }
    return {
        "name": "p",
        "rows": _buffer(json.dumps(rows).encode()),
        "drawing": drawing,
        "footer": "",
        "updates": 1,
        "selected": "p['a']",
        "slice_at": [],
        "_twin_id": TWIN,
    }


def _with_sample(good: dict[str, Any], **sample: Any) -> dict[str, Any]:
    drawing = good["drawing"]
    return {**good, "drawing": {**drawing, "sample": {**drawing["sample"], **sample}}}


def _with_drawing(good: dict[str, Any], **drawing: Any) -> dict[str, Any]:
    return {**good, "drawing": {**good["drawing"], **drawing}}


def _array_view_cases() -> list[tuple[str, Any]]:
    good = _array_view_good()
    twelve = _floats([1.0] * 12)
    cases: list[tuple[str, Any]] = [("good", good)]
    cases += [
        ("0 columns", _with_sample(good, dims=[12, 0], values=twelve)),
        ("0 columns, 3-D", _with_sample(good, dims=[2, 6, 0], values=twelve)),
        ("negative columns", _with_sample(good, dims=[-3, -4], values=twelve)),
        ("negative rows", _with_sample(good, dims=[-3, 4], values=twelve)),
        ("NaN dims", _with_sample(good, dims=["NaN", 4], values=twelve)),
        ("fractional dims", _with_sample(good, dims=[2.5, 4.8], values=twelve)),
        ("huge dims", _with_sample(good, dims=[2**31, 2**31], values=twelve)),
        ("dims beyond the buffer", _with_sample(good, dims=[30, 40], values=twelve)),
        ("dims short of the buffer", _with_sample(good, dims=[2, 2], values=twelve)),
        ("no dims, 2-D shape", _with_sample(good, dims=None)),
        ("dims a string", _with_sample(good, dims="3,4")),
        ("buffer not whole floats", _with_sample(good, values=_buffer(b"\x00" * 13))),
        ("empty buffer", _with_sample(good, values=_buffer(b""), dims=[3, 4])),
        ("NaN and Inf values", _with_sample(good, values=_floats([math.inf, -math.inf] * 6))),
        ("values a string", _with_sample(good, values="NaN")),
        ("values ragged rows", _with_sample(good, values=[[1, 2, 3], [1], "x"], dims=None)),
        ("values rows of objects", _with_sample(good, values=[[{}, {}], [{}, {}]], dims=None)),
        ("values deep", _with_sample(good, values=_deep(), dims=None)),
        ("values a huge list", _with_sample(good, values=[0.5] * 400_000, dims=None)),
        ("values a huge grid", _with_sample(good, values=[[1] * 1000] * 1000, dims=None)),
        ("complex not pairs", _with_sample(good, kind="complex", values=[[1, 2, 3]], dims=None)),
        ("complex deep", _with_sample(good, kind="complex", values=_deep(), dims=None)),
        ("steps missing", _with_sample(good, steps=None)),
        ("steps strings", _with_sample(good, steps=["a", "b"])),
        ("slice_at an object", _with_sample(good, slice_at={"length": 1e9})),
        ("slice_at huge", _with_sample(good, slice_at=list(range(100_000)))),
        ("shape a string", _with_drawing(good, shape="(3, 4)")),
        ("shape 3-D, sample 2-D", _with_drawing(good, shape=[5, 3, 4])),
        ("shape huge", _with_drawing(good, shape=[1] * 100_000)),
        ("shape negative", _with_drawing(good, shape=[-1, 2**60, "x"])),
        ("scalar shape, list values", _with_drawing(good, shape=[])),
        ("path an object", _with_drawing(good, path={"x": 1})),
        ("shards not an object", _with_drawing(good, shards="everywhere")),
        ("shards devices not a list", _with_drawing(good, shards={"devices": 5, "words": 1})),
        (
            "shards of a hundred thousand devices",
            _with_drawing(good, shards={"words": "w", "devices": [{}] * 100_000}),
        ),
        ("rows not JSON", {**good, "rows": _buffer(b"\xff{not json")}),
        ("rows JSON of a number", {**good, "rows": _buffer(b"7")}),
        ("rows JSON deep", {**good, "rows": _buffer(b"[" * 5000 + b"]" * 5000)}),
        ("rows of nulls", {**good, "rows": [None, 3, "x"]}),
        (
            "rows depth NaN and huge",
            {**good, "rows": [{"path": "a", "depth": "NaN"}, {"path": "b", "depth": 1e300}]},
        ),
        ("rows by the hundred thousand", {**good, "rows": [{"path": "a", "depth": 0}] * 100_000}),
    ]
    keys = ["name", "rows", "drawing", "footer", "updates", "selected", "slice_at"]
    cases += _every_value_forged(good, keys)
    sample_keys = ["values", "dims", "kind", "steps", "slice_at"]
    for key in sample_keys:
        for label, bad in BAD_VALUES:
            bad = _deep() if label == "deep" else bad
            cases.append((f"sample.{key} = {label}", _with_sample(good, **{key: bad})))
    return cases


def _compile_monitor_good() -> dict[str, Any]:
    compile_ = {
        "index": 1,
        "trace_s": 0.001,
        "lower_s": 0.002,
        "compile_s": 0.003,
        "recompile": True,
        "explanation": "x: f32[3] → f32[4]",
        "where": "In[3]",
        "signature": ["f32[4]"],
        "cache": "miss",
        "defined_at": "",
        "eager": False,
    }
    function = {
        "name": "f",
        "count": 1,
        "total_s": 0.006,
        "last_s": 0.006,
        "recompiles": 1,
        "user_code": True,
        "last_index": 1,
        "eager": False,
        "shapes": [],
        "compiles": [compile_],
    }
    session = {
        "count": 1,
        "dropped": 0,
        "compile_s": 0.006,
        "other_s": 0.1,
        "cell_s": 0.2,
        "jaxlab_work_s": 0,
        "functions": 1,
        "mine": 1,
        "phase_s": [0.001, 0.002, 0.003],
        "jaxlab_count": 0,
        "eager_count": 0,
        "eager_text": "",
        "eager_hint": "",
        "weak_note": "",
    }
    return {"functions": [function], "session": session, "mine_only": True, "_twin_id": TWIN}


def _compile_monitor_cases() -> list[tuple[str, Any]]:
    good = _compile_monitor_good()
    (f,) = good["functions"]
    (c,) = f["compiles"]
    cases: list[tuple[str, Any]] = [("good", good)]
    cases += [
        ("compiles not a list", {**good, "functions": [{**f, "compiles": 5}]}),
        ("compiles of nulls", {**good, "functions": [{**f, "compiles": [None, "x"]}]}),
        ("times as strings", {**good, "functions": [{**f, "compiles": [{**c, "trace_s": "1"}]}]}),
        (
            "signature an object",
            {**good, "functions": [{**f, "compiles": [{**c, "signature": {}}]}]},
        ),
        ("name an object", {**good, "functions": [{**f, "name": {"toString": 1}}]}),
        ("shapes deep", {**good, "functions": [{**f, "eager": True, "shapes": _deep()}]}),
        ("a function of nulls", {**good, "functions": [None, 7, "f"]}),
        ("functions by the hundred thousand", {**good, "functions": [{"name": "f"}] * 100_000}),
        (
            "compiles by the hundred thousand",
            {**good, "functions": [{**f, "compiles": [{}] * 100_000}]},
        ),
        ("phase_s a string", {**good, "session": {**good["session"], "phase_s": "abc"}}),
        ("phase_s huge", {**good, "session": {**good["session"], "phase_s": [1e308] * 4}}),
        ("session counts strings", {**good, "session": {k: "x" for k in good["session"]}}),
    ]
    cases += _every_value_forged(good, ["functions", "session", "mine_only"])
    return cases


def _graph_explorer_good() -> dict[str, Any]:
    model = {
        "title": "f",
        "notes": [],
        "clusters": [
            {
                "id": "c1",
                "primitive": "pjit",
                "label": "inner",
                "parent": None,
                "n_equations": 2,
                "summary": "",
            }
        ],
        "nodes": [
            {"id": "n1", "kind": "port", "label": "x", "cluster": None, "types": ["f32[3]"]},
            {"id": "n2", "kind": "eqn", "label": "sin", "cluster": "c1", "types": ["f32[3]"]},
        ],
    }
    view = {
        "width": 200,
        "height": 150,
        "frames": ["c1"],
        "nodes": {"n1": [10, 10, 60, 30], "n2": [10, 90, 60, 40], "cluster:c2": [100, 10, 80, 40]},
        "edges": [
            {
                "src": "n1",
                "dst": "n2",
                "kind": "",
                "points": [[40, 40], [40, 60], [40, 70], [40, 90]],
            }
        ],
    }
    legend = [{"mark": "closed", "text": "a nested program"}]
    return {
        "model": model,
        "view": view,
        "opened": [],
        "found": {},
        "legend": legend,
        "error": "",
        "_twin_id": TWIN,
    }


def _graph_explorer_cases() -> list[tuple[str, Any]]:
    good = _graph_explorer_good()
    model, view = good["model"], good["view"]
    ring = [{"id": "c1", "label": "a", "parent": "c2"}, {"id": "c2", "label": "b", "parent": "c1"}]
    many = {f"n{i}": [i, i, 10, 10] for i in range(100_000)}
    cases: list[tuple[str, Any]] = [("good", good)]
    cases += [
        (
            "a cluster its own parent",
            {**good, "model": {**model, "clusters": [{"id": "c1", "parent": "c1"}]}},
        ),
        ("clusters in a ring", {**good, "model": {**model, "clusters": ring}}),
        ("a node's box not a list", {**good, "view": {**view, "nodes": {"n1": "box"}}}),
        ("a box of strings", {**good, "view": {**view, "nodes": {"n1": ["a", "b", "c", "d"]}}}),
        ("a node the model lacks", {**good, "view": {**view, "nodes": {"n9": [0, 0, 1, 1]}}}),
        ("nodes a list", {**good, "view": {**view, "nodes": [[0, 0, 1, 1]]}}),
        ("nodes by the hundred thousand", {**good, "view": {**view, "nodes": many}}),
        ("edge points not lists", {**good, "view": {**view, "edges": [{"points": "M0,0"}]}}),
        (
            "edge points an object",
            {**good, "view": {**view, "edges": [{"points": {"length": 1e12}}]}},
        ),
        (
            "edge points by the hundred thousand",
            {
                **good,
                "view": {
                    **view,
                    "edges": [{"src": "n1", "dst": "n2", "points": [[1, 2]] * 100_000}],
                },
            },
        ),
        ("edges by the hundred thousand", {**good, "view": {**view, "edges": [{}] * 100_000}}),
        ("width NaN and huge", {**good, "view": {**view, "width": "NaN", "height": 1e308}}),
        ("frames of unknown clusters", {**good, "view": {**view, "frames": ["nope", None, 3]}}),
        ("frame_boxes wrong", {**good, "view": {**view, "frame_boxes": {"c1": "x"}}}),
        (
            "labels objects",
            {
                **good,
                "model": {
                    **model,
                    "nodes": [{**n, "label": {}, "types": 3} for n in model["nodes"]],
                },
            },
        ),
        ("nodes not a list", {**good, "model": {**model, "nodes": {"n1": 1}}}),
        ("found matches wrong", {**good, "found": {"query": "", "total": 1e9, "matches": "x"}}),
        ("legend of nulls", {**good, "legend": [None, 3]}),
    ]
    cases += _every_value_forged(good, ["model", "view", "found", "legend", "error"])
    return cases


def _profile_timeline_good() -> dict[str, Any]:
    spans = [
        {
            "lane": "host",
            "kind": "dispatch",
            "name": "f",
            "start_s": 0.0,
            "duration_s": 0.001,
            "module": "",
            "words": "f: 1 ms",
        },
        {
            "lane": "device",
            "kind": "op",
            "name": "sin",
            "start_s": 0.0005,
            "duration_s": 0.0002,
            "module": "jit_f",
            "words": "sin",
        },
    ]
    modules = [{"name": "jit_f", "module": "jit_f", "calls": 1, "total_s": 0.001, "share": 0.5}]
    return {
        "title": "profile",
        "duration_s": 0.002,
        "kept": "",
        "spans": spans,
        "compilations": [
            {
                "function": "f",
                "start_s": 0,
                "total_s": 0.01,
                "trace_s": 0.001,
                "lower_s": 0.002,
                "compile_s": 0.007,
            }
        ],
        "modules": modules,
        "ops": [],
        "module_columns": ["name", "runs", "total"],
        "op_columns": ["name"],
        "syncs": [],
        "_twin_id": TWIN,
    }


def _profile_timeline_cases() -> list[tuple[str, Any]]:
    good = _profile_timeline_good()
    span = good["spans"][0]
    cases: list[tuple[str, Any]] = [("good", good)]
    cases += [
        ("duration huge", {**good, "duration_s": 1e300}),
        ("duration negative", {**good, "duration_s": -5}),
        ("duration a string", {**good, "duration_s": "NaN"}),
        ("a span far out", {**good, "spans": [{**span, "start_s": 1e300, "duration_s": 1e-9}]}),
        ("span times strings", {**good, "spans": [{**span, "start_s": "0", "duration_s": "x"}]}),
        ("spans of nulls", {**good, "spans": [None, 3, "x"]}),
        ("spans by the hundred thousand", {**good, "spans": [{"kind": "op"}] * 100_000}),
        ("columns unknown", {**good, "module_columns": ["__proto__", "constructor", 3]}),
        ("modules of nulls", {**good, "modules": [None, {"calls": "x"}]}),
        ("compilations of strings", {**good, "compilations": ["x", {"function": {}}]}),
        ("syncs wrong", {**good, "syncs": [{"count": "x", "seconds": None}, None]}),
    ]
    keys = [
        "title",
        "duration_s",
        "spans",
        "kept",
        "compilations",
        "modules",
        "ops",
        "module_columns",
        "op_columns",
        "syncs",
    ]
    cases += _every_value_forged(good, keys)
    return cases


CLASSES = {
    "array_view": _array_view_cases,
    "compile_monitor": _compile_monitor_cases,
    "graph_explorer": _graph_explorer_cases,
    "profile_timeline": _profile_timeline_cases,
}


def _render(page: Any, module: str, cases: list[tuple[str, Any, Any]]) -> list[dict[str, Any]]:
    """Render every case of ``module`` in one page; fails naming the case that hung."""
    started: list[str] = []
    errors: list[str] = []
    page.on("console", lambda m: started.append(m.text) if m.text.startswith("case ") else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    source = (STATIC / f"{module}.js").read_text()
    wire = [[name, _json(state), change] for name, state, change in cases]
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
    good = _array_view_good()
    forged = _with_sample(good, dims=[12, 0], values=_floats([1.0] * 12))
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
            bad = _deep() if label == "deep" else bad
            cases.append((f"then {key} = {label}", good, [key, _json(bad)]))
    results = _render(blank, module, cases)
    _check(results)
    # A view whose redraw failed says so and shows its twin again.
    assert any(r["error"] is not None and r["twin"] for r in results)


# The docs site's loader (docs/_static/jaxlab-widgets.js) on a page of forged saved state.

WIDGETS = {
    "array_view": ("ArrayView", _array_view_good),
    "compile_monitor": ("CompileMonitor", _compile_monitor_good),
    "graph_explorer": ("GraphExplorer", _graph_explorer_good),
    "profile_timeline": ("ProfileTimeline", _profile_timeline_good),
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
    av = _array_view_good()
    cases += [
        (
            "array_view 0 columns",
            "array_view",
            _with_sample(av, dims=[12, 0], values=_floats([1.0] * 12)),
            False,
        ),
        ("array_view drawing deep", "array_view", {**av, "drawing": _deep()}, False),
        (
            "compile_monitor compiles not a list",
            "compile_monitor",
            _compile_monitor_cases()[1][1],
            False,
        ),
        ("graph_explorer a box not a list", "graph_explorer", _graph_explorer_cases()[3][1], False),
        (
            "profile_timeline negative duration",
            "profile_timeline",
            {**_profile_timeline_good(), "duration_s": -5},
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
    state = _json({"version_major": 2, "version_minor": 0, "state": models}).replace("<", "\\u003c")
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
    forged = {**_profile_timeline_good(), "duration_s": 1e9}
    (result,) = _render(blank, "profile_timeline", [("a long trace", forged, None)])
    _check([result])
    blank.evaluate(ZOOM_IN, 250)
    blank.wait_for_function("() => window.__zoomed === true", timeout=RENDER_S * 1000)
    ticks = blank.locator("svg.jaxlab-pt-svg line.jaxlab-pt-tick").count()
    assert 0 < ticks <= 50
    assert blank.evaluate("() => 1 + 1") == 2
