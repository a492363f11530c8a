"""Forged saved states of each jaxlab widget class, for tests/browser/test_forged_widgets.py.

Each class has a good state, as the kernel sends it (see each module's header), and a list
of ``(name, state)`` forgeries made from it by changing one thing: every synced value
replaced by each wrong value in ``BAD_VALUES``, and forgeries of its own (dims that are
zero, negative, NaN or huge, buffers of the wrong length, nesting ``DEPTH`` deep, lists
past the module's caps, a cluster its own parent). Binary values are written
``{"__b64__": ...}``; ``to_json`` writes ``deep()`` as a list nested ``DEPTH`` deep::

    name, state = array_view_cases()[1]   # ("0 columns", {... "dims": [12, 0] ...})
"""

from __future__ import annotations

import base64
import json
import math
import struct
from typing import Any

TWIN = "0123456789abcdef0123456789abcdef"  # the twin id of every forged model

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
    ("deep", None),  # filled in by deep()
]


DEEP = "__jaxlab_deep__"  # written as a list nested DEPTH deep when sent
DEPTH = 3000


def deep() -> str:
    return DEEP


def buffer(data: bytes) -> dict[str, str]:
    return {"__b64__": base64.b64encode(data).decode()}


def floats(values: list[float]) -> dict[str, str]:
    return buffer(struct.pack(f"<{len(values)}d", *values))


def to_json(value: Any) -> str:
    deep = "[" * DEPTH + "1" + "]" * DEPTH
    return json.dumps(value, allow_nan=False).replace(json.dumps(DEEP), deep)


def every_value_forged(good: dict[str, Any], keys: list[str]) -> list[tuple[str, Any]]:
    """Each of ``keys`` replaced, alone, by each wrong value."""
    cases = []
    for key in keys:
        for label, bad in BAD_VALUES:
            bad = deep() if label == "deep" else bad
            cases.append((f"{key} = {label}", {**good, key: bad}))
    return cases


# Good states, as the kernel sends them (see each module's header).


def array_view_good() -> dict[str, Any]:
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
        "values": floats([float(i) for i in range(12)]),
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
        "rows": buffer(json.dumps(rows).encode()),
        "drawing": drawing,
        "footer": "",
        "updates": 1,
        "selected": "p['a']",
        "slice_at": [],
        "_twin_id": TWIN,
    }


def with_sample(good: dict[str, Any], **sample: Any) -> dict[str, Any]:
    drawing = good["drawing"]
    return {**good, "drawing": {**drawing, "sample": {**drawing["sample"], **sample}}}


def with_drawing(good: dict[str, Any], **drawing: Any) -> dict[str, Any]:
    return {**good, "drawing": {**good["drawing"], **drawing}}


def array_view_cases() -> list[tuple[str, Any]]:
    good = array_view_good()
    twelve = floats([1.0] * 12)
    cases: list[tuple[str, Any]] = [("good", good)]
    cases += [
        ("0 columns", with_sample(good, dims=[12, 0], values=twelve)),
        ("0 columns, 3-D", with_sample(good, dims=[2, 6, 0], values=twelve)),
        ("negative columns", with_sample(good, dims=[-3, -4], values=twelve)),
        ("negative rows", with_sample(good, dims=[-3, 4], values=twelve)),
        ("NaN dims", with_sample(good, dims=["NaN", 4], values=twelve)),
        ("fractional dims", with_sample(good, dims=[2.5, 4.8], values=twelve)),
        ("huge dims", with_sample(good, dims=[2**31, 2**31], values=twelve)),
        ("dims beyond the buffer", with_sample(good, dims=[30, 40], values=twelve)),
        ("dims short of the buffer", with_sample(good, dims=[2, 2], values=twelve)),
        ("no dims, 2-D shape", with_sample(good, dims=None)),
        ("dims a string", with_sample(good, dims="3,4")),
        ("buffer not whole floats", with_sample(good, values=buffer(b"\x00" * 13))),
        ("empty buffer", with_sample(good, values=buffer(b""), dims=[3, 4])),
        ("NaN and Inf values", with_sample(good, values=floats([math.inf, -math.inf] * 6))),
        ("values a string", with_sample(good, values="NaN")),
        ("values ragged rows", with_sample(good, values=[[1, 2, 3], [1], "x"], dims=None)),
        ("values rows of objects", with_sample(good, values=[[{}, {}], [{}, {}]], dims=None)),
        ("values deep", with_sample(good, values=deep(), dims=None)),
        ("values a huge list", with_sample(good, values=[0.5] * 400_000, dims=None)),
        ("values a huge grid", with_sample(good, values=[[1] * 1000] * 1000, dims=None)),
        ("complex not pairs", with_sample(good, kind="complex", values=[[1, 2, 3]], dims=None)),
        ("complex deep", with_sample(good, kind="complex", values=deep(), dims=None)),
        ("steps missing", with_sample(good, steps=None)),
        ("steps strings", with_sample(good, steps=["a", "b"])),
        ("slice_at an object", with_sample(good, slice_at={"length": 1e9})),
        ("slice_at huge", with_sample(good, slice_at=list(range(100_000)))),
        ("shape a string", with_drawing(good, shape="(3, 4)")),
        ("shape 3-D, sample 2-D", with_drawing(good, shape=[5, 3, 4])),
        ("shape huge", with_drawing(good, shape=[1] * 100_000)),
        ("shape negative", with_drawing(good, shape=[-1, 2**60, "x"])),
        ("scalar shape, list values", with_drawing(good, shape=[])),
        ("path an object", with_drawing(good, path={"x": 1})),
        ("shards not an object", with_drawing(good, shards="everywhere")),
        ("shards devices not a list", with_drawing(good, shards={"devices": 5, "words": 1})),
        (
            "shards of a hundred thousand devices",
            with_drawing(good, shards={"words": "w", "devices": [{}] * 100_000}),
        ),
        ("rows not JSON", {**good, "rows": buffer(b"\xff{not json")}),
        ("rows JSON of a number", {**good, "rows": buffer(b"7")}),
        ("rows JSON deep", {**good, "rows": buffer(b"[" * 5000 + b"]" * 5000)}),
        ("rows of nulls", {**good, "rows": [None, 3, "x"]}),
        (
            "rows depth NaN and huge",
            {**good, "rows": [{"path": "a", "depth": "NaN"}, {"path": "b", "depth": 1e300}]},
        ),
        ("rows by the hundred thousand", {**good, "rows": [{"path": "a", "depth": 0}] * 100_000}),
    ]
    keys = ["name", "rows", "drawing", "footer", "updates", "selected", "slice_at"]
    cases += every_value_forged(good, keys)
    sample_keys = ["values", "dims", "kind", "steps", "slice_at"]
    for key in sample_keys:
        for label, bad in BAD_VALUES:
            bad = deep() if label == "deep" else bad
            cases.append((f"sample.{key} = {label}", with_sample(good, **{key: bad})))
    return cases


def compile_monitor_good() -> dict[str, Any]:
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


def compile_monitor_cases() -> list[tuple[str, Any]]:
    good = compile_monitor_good()
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
        ("shapes deep", {**good, "functions": [{**f, "eager": True, "shapes": deep()}]}),
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
    cases += every_value_forged(good, ["functions", "session", "mine_only"])
    return cases


def graph_explorer_good() -> dict[str, Any]:
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


def graph_explorer_cases() -> list[tuple[str, Any]]:
    good = graph_explorer_good()
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
        (
            "edges of too many points in all",
            {**good, "view": {**view, "edges": [{"points": [[1, 2]] * 6000}] * 200}},
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
    cases += every_value_forged(good, ["model", "view", "found", "legend", "error"])
    return cases


def profile_timeline_good() -> dict[str, Any]:
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


def profile_timeline_cases() -> list[tuple[str, Any]]:
    good = profile_timeline_good()
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
    cases += every_value_forged(good, keys)
    return cases


def steps_player_good() -> dict[str, Any]:
    """A StepsPlayer's state (widgets/steps_player.py): a frame as GradSteps.frame() makes
    it, with a box and a long scan's loop, and the step shown."""
    svg = (
        '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 60 40" width="60pt" height="40pt">'
        '<g id="graph0" class="graph"><title>f</title>'
        '<g id="node1" class="node"><title>e0</title><ellipse cx="10" cy="10" rx="8" ry="5"/>'
        '<text x="10" y="12">sin</text></g>'
        '<g id="node2" class="node"><title>e1</title><ellipse cx="40" cy="30" rx="8" ry="5"/>'
        '<text x="40" y="32">mul</text></g>'
        '<g id="edge1" class="edge"><title>e0&#45;&gt;e1</title><path d="M10,15L40,25"/></g>'
        "</g></svg>"
    )
    step = {
        "index": 0,
        "kind": "forward",
        "equation": "sin",
        "rule": "y = sin(x)",
        "text": "y = sin(0.5) = 0.4794",
        "fanout": None,
        "node": "e0",
        "box": ["jit inner"],
        "of": "",
        "source": "cell.py:2 (f)",
        "iteration": None,
        "values_in": ["0.5"],
        "values_out": ["0.4794"],
        "cotangent_in": [],
        "cotangent_out": [],
        "substeps": [],
    }
    back = {**step, "index": 2, "kind": "backward", "node": "e1", "box": [],
            "text": "x̄ = 1 · 0.8776 = 0.8776", "cotangent_in": ["1"],
            "cotangent_out": ["0.8776"]}  # fmt: skip
    return {
        "frame": {
            "function": "f",
            "mode": "reverse",
            "svg": svg,
            "steps": [step, {**step, "index": 1, "node": "e1"}, back],
            "boxes": [{"name": "jit inner", "first": 0, "last": 1}],
            "loops": [{"name": "scan ×12", "length": 12, "shown": [0, 1, 2, 3, 4]}],
            "targets": {"∂f/∂x": 2},
            "current": 0,
            "passes_note": "1 input → 1 forward pass, 1 output → 1 reverse pass",
            "notes": [],
        },
        "current": 1,
        "iteration": -1,
        "_twin_id": TWIN,
    }


def steps_player_cases() -> list[tuple[str, Any]]:
    good = steps_player_good()
    frame = good["frame"]
    step = frame["steps"][0]

    def with_frame(**changed: Any) -> dict[str, Any]:
        return {**good, "frame": {**frame, **changed}}

    cases: list[tuple[str, Any]] = [("good", good)]
    cases += [
        ("boxes overlapping, backwards, past the end", with_frame(boxes=[
            {"first": 0, "last": 2}, {"first": 1, "last": 0}, {"first": 2, "last": 99},
            {"first": "0", "last": 1.5}, None, "box"])),
        ("boxes by the hundred thousand", with_frame(boxes=[{"first": 0, "last": 1}] * 100_000)),
        ("loops forged", with_frame(loops=[{"length": 1e300}, {"length": -3, "shown": "x"},
                                           {"length": 12, "shown": [99, "1", None]}, None])),
        ("a step's box a string", with_frame(steps=[{**step, "box": "<b>x</b>"}])),
        ("steps by the hundred thousand", with_frame(steps=[step] * 100_000)),
        ("iteration forged", {**good, "iteration": 1e300}),
        ("current past the end", {**good, "current": 10**12}),
    ]  # fmt: skip
    cases += every_value_forged(good, ["frame", "current"])
    cases += [
        (f"frame {k} {name}", with_frame(**{k: deep() if name == "deep" else value}))
        for k in ("steps", "boxes", "loops")
        for name, value in BAD_VALUES
    ]
    return cases


# A 2x2 grey PNG, as arrays/png.py writes a heat map (base64, with its data: prefix).
PNG_2X2 = (
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAIAAAACCAAAAABX3VL4AAAADklEQVR4nGNsYGBi"
    "YAAAApIAhPd8o1gAAAAASUVORK5CYII="
)


def explorer_good() -> dict[str, Any]:
    """An Explorer's state (widgets/explorer.py): the core's frame() of a function with a
    slider, a log slider, a checkbox, a static and a fixed argument, answering one panel of
    each kind, a sweep, the bar and a fit under way."""
    controls = [
        {
            "name": "g",
            "kind": "float",
            "value": 9.81,
            "lo": 1.0,
            "hi": 20.0,
            "scale": "linear",
            "step": 0.019,
            "range_note": "range given (1 .. 20)",
            "flag": None,
            "path": "g",
        },
        {
            "name": "k",
            "kind": "float",
            "value": 0.5,
            "lo": 0.01,
            "hi": 10.0,
            "scale": "log",
            "step": None,
            "range_note": "range given (log)",
            "flag": None,
            "path": "k",
        },
        {
            "name": "damped",
            "kind": "bool",
            "value": False,
            "lo": None,
            "hi": None,
            "scale": "linear",
            "step": None,
            "range_note": "checkbox (static)",
            "flag": None,
            "path": "damped",
        },
        {
            "name": "n",
            "kind": "static",
            "value": 3,
            "lo": None,
            "hi": None,
            "scale": "linear",
            "step": None,
            "range_note": "static: a change compiles again",
            "flag": None,
            "path": "n",
        },
        {
            "name": "x",
            "kind": "fixed",
            "value": "f32[4]",
            "lo": None,
            "hi": None,
            "scale": "linear",
            "step": None,
            "range_note": "held fixed",
            "flag": None,
            "path": "x",
        },
    ]
    panels = [
        {
            "path": "['period']",
            "kind": "scalar",
            "value": 2.006,
            "text": "2.006",
            "history": [2.1, 2.05, 2.006],
            "tangent": -0.1022,
            "sweep": {
                "param": "g",
                "xs": [1.0, 7.3, 13.7, 20.0],
                "ys": [6.28, 2.32, 1.70, 1.40],
                "slopes": [-3.14, -0.16, -0.06, -0.035],
                "current": 9.81,
            },
            "note": None,
        },
        {
            "path": "['theta']",
            "kind": "line",
            "x": [0.0, 0.25, 0.5, 0.75],
            "y": [0.0, 0.9, -0.7, -0.4],
            "tangent": [0.0, -0.08, -0.28, 0.55],
            "delta": 0.019,
            "note": None,
        },
        {
            "path": "['path']",
            "kind": "path",
            "xy": [[0.0, 0.0], [0.2, 1.9], [0.4, 3.9]],
            "tangent": [[0.0, 0.0], [0.0, 0.2], [0.0, 0.4]],
            "delta": 0.019,
            "note": None,
        },
        {
            "path": "['map']",
            "kind": "heatmap",
            "shape": [2, 2],
            "png": PNG_2X2,
            "lo": 0.0,
            "hi": 1.5,
            "sens_png": PNG_2X2,
            "sens_lo": -0.2,
            "sens_hi": 0.2,
            "note": None,
        },
        {"path": "['count']", "kind": "text", "text": "3", "note": "an integer: no derivative"},
    ]
    frame = {
        "function": "sim",
        "seq": 4,
        "controls": controls,
        "moved": "g",
        "panels": panels,
        "bar": [
            {"name": "g", "value": -0.1022, "scaled": -1.94, "of": "sim['period']"},
            {"name": "k", "value": 1.003, "scaled": 3.76, "of": "sim['period']"},
        ],
        "derivative_words": "d sim['period'] / d g = -0.1022 per unit",
        "fit": {"running": True, "loss": [1.0, 0.5, 0.25], "step": 3, "ended": ""},
        "error": None,
        "notes": ["checkbox: damped - static", "held fixed: x (f32[4])"],
        "compiles": 2,
    }
    return {"frame": frame, "fittable": True, "_twin_id": TWIN}


def with_frame(good: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {**good, "frame": {**good["frame"], **changes}}


def with_panel(good: dict[str, Any], index: int, **changes: Any) -> dict[str, Any]:
    panels = list(good["frame"]["panels"])
    panels[index] = {**panels[index], **changes}
    return with_frame(good, panels=panels)


def explorer_cases() -> list[tuple[str, Any]]:
    good = explorer_good()
    frame = good["frame"]
    control = frame["controls"][0]
    sweep = frame["panels"][0]["sweep"]
    many = [0.5] * 200_001  # past the page's 200,000 values of one curve
    cases: list[tuple[str, Any]] = [("good", good)]
    cases += [
        (
            "a slider's range upside down",
            with_frame(good, controls=[{**control, "lo": 20.0, "hi": 1.0}]),
        ),
        (
            "a slider's range one point",
            with_frame(good, controls=[{**control, "lo": 5.0, "hi": 5.0}]),
        ),
        (
            "a slider's range huge",
            with_frame(good, controls=[{**control, "lo": -1e308, "hi": 1e308}]),
        ),
        (
            "a log slider through zero",
            with_frame(good, controls=[{**control, "scale": "log", "lo": -1.0, "hi": 1.0}]),
        ),
        (
            "a control's value an object",
            with_frame(good, controls=[{**control, "value": {"a": 1}}]),
        ),
        ("a control's kind unknown", with_frame(good, controls=[{**control, "kind": "<b>"}])),
        ("controls by the thousand", with_frame(good, controls=[control] * 1000)),
        ("controls of nulls", with_frame(good, controls=[None, 3])),
        ("a panel's kind unknown", with_panel(good, 0, kind="__proto__")),
        ("a line of 200,001 values", with_panel(good, 1, y=many, x=None, tangent=None)),
        ("a line's x shorter than y", with_panel(good, 1, x=[0.0])),
        ("a line's values strings", with_panel(good, 1, y=["a", "b"], tangent=["c"])),
        ("a line's delta huge", with_panel(good, 1, delta=1e308)),
        ("a path of nulls", with_panel(good, 2, xy=[None, [1], "x"], tangent=[None])),
        ("a heat map not base64", with_panel(good, 3, png="%%%<script>", sens_png=7)),
        (
            "a heat map's SVG a script",
            with_panel(good, 3, png=None, svg="<svg onload='alert(1)'></svg>"),
        ),
        ("a sweep of strings", with_panel(good, 0, sweep={**sweep, "xs": "1,2", "ys": ["a"]})),
        (
            "a sweep far out",
            with_panel(good, 0, sweep={**sweep, "current": 1e308, "slopes": [1e308] * 4}),
        ),
        ("a history of 200,001 values", with_panel(good, 0, history=many)),
        ("panels by the hundred", with_frame(good, panels=[frame["panels"][0]] * 100)),
        ("bar of nulls and strings", with_frame(good, bar=[None, {"name": 3, "scaled": "x"}])),
        ("bar all zero", with_frame(good, bar=[{"name": "g", "value": 0.0, "scaled": 0.0}])),
        ("fit loss strings", with_frame(good, fit={"running": "yes", "loss": "x", "step": {}})),
        ("error of objects", with_frame(good, error={"message": {}, "where": [], "param": 3})),
        ("notes of objects", with_frame(good, notes=[{}, None, 7])),
        ("seq a string", with_frame(good, seq="4")),
    ]
    cases += every_value_forged(good, ["frame", "fittable"])
    keys = [
        "function",
        "seq",
        "controls",
        "moved",
        "panels",
        "bar",
        "derivative_words",
        "fit",
        "error",
        "notes",
        "compiles",
    ]
    for name, state in every_value_forged(frame, keys):
        cases.append((f"frame's {name}", {**good, "frame": state}))
    return cases


CLASSES = {
    "array_view": array_view_cases,
    "compile_monitor": compile_monitor_cases,
    "explorer": explorer_cases,
    "graph_explorer": graph_explorer_cases,
    "profile_timeline": profile_timeline_cases,
    "steps_player": steps_player_cases,
}
