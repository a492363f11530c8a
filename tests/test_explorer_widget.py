"""The Explorer widget in a real shell (issue 35): the page's messages become core calls,
the core's frames reach the page, the static twin holds the latest frame, escaped.

The core (``kernel_ext/explore/``) is stood in for by ``FakeExploration``, which keeps a
hand-written frame of the contract's schema and records every call; the tests at the
end run the real core where it is present.
"""

from __future__ import annotations

import copy
import html
import logging
import re

import pytest

from jaxlab.widgets import Explorer
from jaxlab.widgets.explorer import frame_html, page_call

HOSTILE = '<img src=x onerror="alert(1)">'


def _frame(function: str = "period", arg: str = "g") -> dict:
    return {
        "function": function,
        "seq": 0,
        "controls": [
            {"name": arg, "kind": "float", "value": 9.81, "lo": 1.0, "hi": 20.0, "scale": "linear",
             "step": 0.019, "range_note": "range given", "flag": None, "path": arg},
            {"name": "length", "kind": "float", "value": 1.0, "lo": 0.1, "hi": 10.0, "scale": "log",
             "step": 0.01, "range_note": "range chosen around 1 (x/4 .. x*4)", "flag": None,
             "path": "length"},
            {"name": "damped", "kind": "bool", "value": False, "flag": None, "path": "damped"},
            {"name": "n", "kind": "static", "value": 1000, "flag": None, "path": "n"},
            {"name": "x", "kind": "fixed", "value": "f32[100]", "flag": None, "path": "x"},
        ],
        "moved": arg,
        "panels": [
            {"path": "", "kind": "scalar", "value": 2.0061, "history": [2.1, 2.05, 2.0061],
             "tangent": -0.1022, "sweep": None, "note": None},
        ],
        "bar": [{"name": arg, "value": -0.1022, "scaled": -1.0},
                {"name": "length", "value": 1.003, "scaled": 0.5}],
        "derivative_words": f"d {function} / d {arg} = -0.1022 per unit",
        "fit": None,
        "error": None,
        "notes": ["held fixed: x (f32[100])", "static: n (int) - changing it recompiles"],
        "compiles": 1,
    }  # fmt: skip


class FakeExploration:
    """The core's surface the widget uses; records calls, publishes frames on demand."""

    def __init__(self, frame: dict) -> None:
        self._frame = frame
        self.calls: list[tuple] = []
        self.subscribers: list = []

    def frame(self) -> dict:
        return copy.deepcopy(self._frame)

    def subscribe(self, callback):
        self.subscribers.append(callback)
        return lambda: self.subscribers.remove(callback)

    def publish(self, **changes) -> None:
        self._frame = {**self._frame, **changes}
        for callback in list(self.subscribers):
            callback(self.frame())

    def move(self, name, value, seq):
        self.calls.append(("move", name, value, seq))
        self.publish(seq=seq)

    def sweep(self, name):
        self.calls.append(("sweep", name))

    def fit(self):
        self.calls.append(("fit",))

    def stop(self):
        self.calls.append(("stop",))


@pytest.fixture
def view():
    core = FakeExploration(_frame())
    widget = Explorer(core)
    yield widget, core
    widget.close()


def test_page_messages_become_core_calls(view):
    widget, core = view
    widget._handle_custom_msg({"type": "move", "name": "g", "value": 5.0, "seq": 3}, [])
    widget._handle_custom_msg({"type": "move", "name": "damped", "value": True, "seq": 4}, [])
    widget._handle_custom_msg({"type": "move", "name": "n", "value": 200, "seq": 5}, [])
    widget._handle_custom_msg({"type": "sweep", "name": "length"}, [])
    widget._handle_custom_msg({"type": "fit"}, [])
    widget._handle_custom_msg({"type": "stop"}, [])
    assert core.calls == [
        ("move", "g", 5.0, 3),
        ("move", "damped", True, 4),
        ("move", "n", 200, 5),
        ("sweep", "length"),
        ("fit",),
        ("stop",),
    ]
    assert isinstance(core.calls[2][2], int)
    # the core's answer (a frame with the last applied seq) is what the page now holds
    assert widget.frame["seq"] == 5


@pytest.mark.parametrize(
    "message",
    [
        {"type": "move", "name": "nowhere", "value": 1.0, "seq": 1},  # no such control
        {"type": "move", "name": "g", "value": "9.81", "seq": 1},  # a string for a slider
        {"type": "move", "name": "g", "value": float("nan"), "seq": 1},
        {"type": "move", "name": "g", "value": True, "seq": 1},  # a bool is no number here
        {"type": "move", "name": "g", "value": 1.0, "seq": "1"},
        {"type": "move", "name": "damped", "value": 1, "seq": 1},  # a checkbox takes a bool
        {"type": "move", "name": "n", "value": 2.5, "seq": 1},  # a static int stays whole
        {"type": "move", "name": "x", "value": 1.0, "seq": 1},  # held fixed
        {"type": "sweep", "name": "damped"},  # only a float slider is swept
        {"type": "launch"},
        ["move"],
    ],
)
def test_malformed_messages_are_logged_and_dropped(view, message, caplog):
    widget, core = view
    with caplog.at_level(logging.WARNING, logger="jaxlab.widgets"):
        widget._handle_custom_msg(message, [])
    assert core.calls == []
    assert any("dropped a message" in r.getMessage() for r in caplog.records)


def test_page_call_reads_the_frame_it_is_given():
    frame = _frame(arg="theta0")
    assert page_call({"type": "move", "name": "theta0", "value": 1, "seq": 2}, frame) == (
        "move",
        ("theta0", 1.0, 2),
    )
    with pytest.raises(ValueError, match="names no control"):
        page_call({"type": "move", "name": "g", "value": 1, "seq": 2}, frame)


def test_a_core_failure_is_logged_not_raised(view, caplog):
    widget, core = view

    def broken(name):
        raise RuntimeError("boom")

    core.sweep = broken
    with caplog.at_level(logging.WARNING, logger="jaxlab.widgets"):
        widget._handle_custom_msg({"type": "sweep", "name": "g"}, [])
    assert any("sweep" in r.getMessage() for r in caplog.records)


def test_core_updates_reach_the_page_and_close_unsubscribes(view):
    widget, core = view
    core.publish(seq=7, derivative_words="d period / d g = -0.2 per unit")
    assert widget.frame["seq"] == 7
    assert widget.frame["derivative_words"] == "d period / d g = -0.2 per unit"
    widget.close()
    assert core.subscribers == []


def test_twin_holds_the_latest_state_and_says_a_kernel_is_needed(view):
    widget, core = view
    core.publish(
        seq=9,
        panels=[{"path": "", "kind": "scalar", "value": 1.234, "history": [1.0, 1.1, 1.234]}],
    )
    bundle = widget.static_bundle()
    page, text = bundle["text/html"], bundle["text/plain"]
    assert "the sliders need a running kernel" in page
    assert "1.234" in page and "explore period" in page
    assert "d period / d g = -0.1022 per unit" in page
    assert page.count("<svg") >= 1 and "<script" not in page.lower()
    for name in ("g", "length", "damped", "n", "x"):
        assert f"<b>{name}</b>" in page
    assert "range chosen around 1 (x/4 .. x*4)" in page
    assert "held fixed: x (f32[100])" in page
    assert "g = 9.81" in text and ": 1.234" in text


def test_twin_draws_each_panel_kind():
    frame = _frame()
    frame["panels"] = [
        {"path": "[0]", "kind": "line", "x": [0.0, 1.0, 2.0], "y": [0.0, 1.0, 0.5],
         "tangent": [0.0, 0.1, 0.2], "delta": 0.019},
        {"path": "[1]", "kind": "path", "xy": [[0, 0], [1, 1], [2, 0]], "tangent": None},
        {"path": "[2]", "kind": "heatmap", "png": "iVBORw0KGgo=", "sens_png": "AAAA",
         "lo": 0, "hi": 1},
        {"path": "[3]", "kind": "text", "text": "3 (no derivative: integer output)"},
    ]  # fmt: skip
    page = frame_html(frame)
    assert page.count("<polyline") >= 3  # line, its tangent, the path
    assert page.count('src="data:image/png;base64,') == 2
    assert "no derivative: integer output" in page
    frame["panels"][2]["png"] = 'x" onerror="alert(1)'
    assert "onerror" not in frame_html(frame)  # not base64: not drawn at all


def test_a_hostile_function_and_argument_name_is_escaped():
    core = FakeExploration(_frame(function=HOSTILE, arg=HOSTILE))
    widget = Explorer(core)
    try:
        page = widget.static_bundle()["text/html"]
        assert HOSTILE not in page and "<img src=x" not in page
        assert html.escape(HOSTILE) in page
        # the only tags are the twin's own
        tags = set(re.findall(r"<([a-zA-Z]+)", page))
        assert tags <= {"div", "style", "b", "i", "table", "tr", "td", "span", "svg", "polyline",
                        "circle", "img", "pre"}, tags  # fmt: skip
        # a message naming the hostile control is still a move of that control
        widget._handle_custom_msg({"type": "move", "name": HOSTILE, "value": 2.0, "seq": 1}, [])
        assert core.calls == [("move", HOSTILE, 2.0, 1)]
    finally:
        widget.close()


def test_frames_rewrite_the_twin_through_the_throttle(view, monkeypatch):
    widget, core = view
    from jaxlab.widgets._throttle import Throttle

    rewrites = []
    monkeypatch.setattr(widget, "update_static", lambda: rewrites.append(widget.frame["seq"]))
    widget._twins.cancel()  # ticked by the test, not the ticker's thread (no race with it)
    widget._twins = Throttle(widget.update_static, ticker=set())
    widget._twin_ids = ["display-1"]
    for seq in range(1, 50):
        core.publish(seq=seq)
    assert rewrites == []  # 49 frames: no twin written on the kernel's thread
    assert widget._twins.pending
    widget._twins.flush()
    assert rewrites == [49]  # the latest


# ------------------------------------------------------------- with the real core


def _period(g=9.81, length=1.0):
    import jax.numpy as jnp

    return 2 * jnp.pi * jnp.sqrt(length / g)


def test_the_page_moves_the_real_core():
    import jaxlab

    core = jaxlab.explore(_period, g=(1.0, 20.0), length=1.0)
    widget = Explorer(core)
    try:
        widget._handle_custom_msg({"type": "move", "name": "g", "value": 4.0, "seq": 12}, [])
        assert core.values["g"] == 4.0
        assert widget.frame["seq"] == 12
        (panel,) = widget.frame["panels"]
        # the page's number is the core's: 2π√(L/g) and dT/dg = -T/(2g), at g = 4
        assert panel["value"] == pytest.approx(float(2 * 3.141592653589793 * 0.5), rel=1e-5)
        assert panel["tangent"] == pytest.approx(-panel["value"] / 8.0, rel=1e-4)
        widget._handle_custom_msg({"type": "sweep", "name": "length"}, [])
        sweep = widget.frame["panels"][0]["sweep"]
        assert sweep["param"] == "length" and len(sweep["xs"]) == 64
        assert "4" in widget.static_bundle()["text/html"]
        assert core.compiles_by.get("evaluate") == 1  # the page's moves compiled nothing new
    finally:
        widget.close()


def test_a_hostile_leaf_path_of_the_real_core_is_escaped():
    import jaxlab

    def energy(params):
        return sum(v**2 for v in params.values())

    energy.__name__ = HOSTILE
    core = jaxlab.explore(energy, {HOSTILE: 1.5, "b": 0.5}, leaves=True)
    widget = Explorer(core)
    try:
        names = [c["name"] for c in widget.frame["controls"]]
        assert any(HOSTILE in n for n in names), names
        page = widget.static_bundle()["text/html"]
        assert "<img src=x" not in page and html.escape(HOSTILE) in page
        hostile = next(n for n in names if HOSTILE in n)
        widget._handle_custom_msg({"type": "move", "name": hostile, "value": 2.0, "seq": 1}, [])
        assert widget.frame["seq"] == 1
    finally:
        widget.close()


def test_fit_runs_off_the_kernel_thread_and_moves_the_sliders():
    import jax.numpy as jnp

    import jaxlab

    def line(a=1.0):
        return a * jnp.linspace(0.0, 1.0, 20)

    core = jaxlab.explore(line, a=(0.0, 5.0), target=3.0 * jnp.linspace(0.0, 1.0, 20))
    widget = Explorer(core)
    try:
        assert widget.fittable
        widget._handle_custom_msg({"type": "fit"}, [])
        widget._fitting.join(timeout=120)
        fit = widget.frame["fit"]
        assert fit is not None and not fit["running"] and fit["step"] > 0
        assert fit["loss"][-1] < fit["loss"][0]
        assert abs(core.values["a"] - 3.0) < abs(1.0 - 3.0)  # moved toward the target
    finally:
        widget.close()


def test_a_view_at_the_end_of_a_cell_shows_the_live_explorer(ip):
    """``view = jaxlab.explore(...)`` then ``view``: the Explorer, as ``%explore`` shows it,
    with the static twin beside it (what a saved notebook and the docs show)."""
    from IPython.utils.capture import capture_output

    ip.user_ns["_period"] = _period
    with capture_output() as captured:
        ip.run_cell("import jaxlab\nview = jaxlab.explore(_period, g=(1.0, 20.0))\nview")
    shown = [o.data for o in captured.outputs]
    widgets = [d for d in shown if "application/vnd.jupyter.widget-view+json" in d]
    assert len(widgets) == 1, shown
    twins = [d["text/html"] for d in shown if "text/html" in d]
    assert any("the sliders need a running kernel" in t for t in twins), shown
    assert not any("<Exploration of" in str(d.get("text/plain", "")) for d in shown)
