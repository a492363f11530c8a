"""``%show`` in a real shell, ``jaxlab.show`` and its handle, the ArrayView widget, and
``%show on|off`` as the notebook's display."""

import json
import threading
import time

import jax.numpy as jnp
import numpy as np
import pytest
from IPython.core.error import UsageError

import jaxlab
from jaxlab.arrays.record import ShowRecord
from jaxlab.widgets import ArrayView

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def live_ip(ip, monkeypatch):
    """The shell as a notebook's kernel: %show shows the widget."""
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    return ip


def test_show_returns_the_record_of_the_named_value(ip):
    ip.run_cell("import jax.numpy as jnp\nparams = {'W': jnp.ones((3, 2)), 'b': jnp.zeros(2)}")
    r = ip.run_line_magic("show", "-o params")
    assert isinstance(r, ShowRecord)
    assert r.name == "params" and r.root.params == 8
    assert r.root.find("params['W']").array.shape == (3, 2)
    # expressions are the user's: an item of a pytree
    w = ip.run_line_magic("show", "-o params['W']")
    assert w.root.array.stats.mean == 1.0


def test_show_slice_option_draws_the_chosen_slice(ip):
    ip.run_cell("import jax.numpy as jnp\nv = jnp.arange(60.0).reshape(3, 4, 5)")
    r = ip.run_line_magic("show", "--slice 2 -o v")
    assert r.root.array.sample.slice_at == (2,)
    assert r.root.array.sample.values[0][0] == 40.0


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("nothing_here", "name 'nothing_here' is not defined"),
        ("x[", "is not an expression"),
        ("", "name what to show"),
        ("--slice a,b x", "--slice takes indices"),
        ("--range 3,1 x", "--range takes lo,hi"),
        ("--range=a x", "--range takes lo,hi"),
        ("x['missing']", "KeyError"),
    ],
)
def test_bad_input_is_a_usage_error_and_changes_nothing(ip, line, words):
    ip.run_cell("x = {'a': 1}")
    before = dict(ip.user_ns)
    with pytest.raises(UsageError, match=words.replace("[", r"\[")):
        ip.run_line_magic("show", line)
    assert ip.user_ns.keys() == before.keys() and ip.user_ns["x"] == {"a": 1}


def test_show_in_a_live_kernel_displays_the_widget_and_its_twin(live_ip, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append((obj, kw)))
    live_ip.run_cell("import jax.numpy as jnp\nfield = jnp.ones((50, 60)).at[3, 4].set(jnp.nan)")
    assert live_ip.run_line_magic("show", "field") is None
    widget = next(o for o, _ in shown if isinstance(o, ArrayView))
    assert widget.name == "field" and widget.rows[0]["flags"] == "NaN x1"
    assert widget.drawing["shape"] == [50, 60]
    widget.close()


def test_show_range_option_fixes_the_live_and_the_static_colours(live_ip, monkeypatch):
    import re

    shown = []
    monkeypatch.setattr("IPython.display.display", lambda obj, **kw: shown.append((obj, kw)))
    live_ip.run_cell("import jax.numpy as jnp\nfield = jnp.ones((50, 60)).at[3, 4].set(2.0)")
    live_ip.run_line_magic("show", "--range=-1,3 field")
    live_ip.run_line_magic("show", "--range first field")
    fixed, first = (o for o, _ in shown if isinstance(o, ArrayView))
    assert fixed.drawing["range"] == [-1.0, 3.0] and fixed.drawing["range_fixed"] is True
    assert first.drawing["range"] == [1.0, 2.0] and first.drawing["range_fixed"] is True
    fixed.close()
    first.close()

    static = []
    monkeypatch.setattr("jaxlab.magics.arrays.display", lambda obj, **kw: static.append(obj))
    monkeypatch.setattr(live_ip, "kernel", None)
    live_ip.run_line_magic("show", "--range 0,4 field")
    bar = re.search(r'<svg class="jaxlab-colour-bar".*?</svg>', static[0]["text/html"])
    assert bar is not None
    assert re.findall(r"<text[^>]*>([^<]*)</text>", bar.group(0))[:2] == ["4", "0"]


def test_handle_update_redraws_in_place():
    x = jnp.zeros((4, 4))
    view = jaxlab.show(x, name="state", rate=1000.0)
    try:
        assert view.record.root.array.stats.max == 0.0
        first = view.widget.updates
        view.update(jnp.full((4, 4), 7.0))
        view.flush()
        assert view.widget.updates > first
        assert view.record.root.array.stats.max == 7.0
        assert view.widget.drawing["sample"]["values"][0][0] == 7.0
        assert "state" in view.widget._static_html()
        assert repr(view).startswith("<jaxlab.show view of state")
    finally:
        view.widget.close()


def test_updates_in_a_fast_loop_are_throttled_and_end_on_the_latest():
    # the next redraw 20 s away: however slow the machine, the loop ends well before it
    view = jaxlab.show(jnp.zeros(3), name="s", rate=0.05)
    try:
        start = view.widget.updates
        for k in range(50):
            view.update(jnp.full(3, float(k)))
        assert view.widget.updates == start  # not one redraw per call: one armed for later
        view.flush()
        assert view.record.root.array.stats.max == 49.0
    finally:
        view.widget.close()


def _settled(view, want_max, wait_s=5.0):
    """Wait for the view's timer-thread redraw to reach the state whose max is want_max."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if view.record.root.array.stats.max == want_max:
            return True
        time.sleep(0.01)
    return False


def test_a_burst_of_updates_without_flush_ends_on_the_last_state():
    """No flush: the redraw armed by the burst (on a timer thread) draws the last value,
    and an update made while a redraw runs arms the next, so none is lost."""
    view = jaxlab.show(jnp.zeros((3, 3)), name="s", rate=40.0)
    try:
        states = [jnp.full((3, 3), float(k)) for k in range(300)]
        for k, state in enumerate(states):
            view.update(state)
            if k % 50 == 0:
                time.sleep(0.03)  # let timer redraws run beside the burst
        assert _settled(view, 299.0)
        with view.widget._redraws.drawing:  # the redraw that set the record has ended
            assert view.widget.drawing["sample"]["values"] == [[299.0] * 3] * 3
            drawn = view.widget.updates
        time.sleep(0.1)  # nothing armed any more: no further redraw
        assert view.widget.updates == drawn
    finally:
        view.widget.close()


def test_a_change_made_while_a_redraw_runs_arms_the_next():
    """The redraw of value 1 is running (on its timer thread) when value 2 arrives: a
    further redraw must follow, or the view would stay on 1."""
    from jaxlab.widgets._base import LatestRedraw

    value, seen = [0], []
    running, release = threading.Event(), threading.Event()

    def redraw():
        seen.append(value[0])
        if value[0] == 1:
            running.set()
            release.wait(5)

    redraws = LatestRedraw(redraw, interval=0.01)
    try:
        redraws.now()
        value[0] = 1
        redraws.changed()
        assert running.wait(5)
        value[0] = 2
        redraws.changed()
        release.set()
        deadline = time.monotonic() + 5
        while seen[-1] != 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert seen == [0, 1, 2]
    finally:
        release.set()
        redraws.close()


def test_update_between_redraws_leaves_the_redraw_to_the_timer():
    """Not a race with the machine's speed: the armed redraw is 20 s away, and the test
    reads its timer: after flush() the timer's thread ends at once, having drawn nothing
    (a timer left armed would still be waiting after the 5 s join)."""
    view = jaxlab.show(jnp.zeros(2), name="s", rate=0.05)  # the next redraw 20 s away
    try:
        start = view.widget.updates
        for k in range(100):
            view.update(jnp.full(2, float(k)))
        assert view.widget.updates == start  # no redraw on the caller's thread
        armed = view.widget._redraws._timer
        assert armed is not None and armed.is_alive()  # one redraw armed, for later
        view.flush()  # drops the armed redraw and draws the latest now
        assert view.widget.updates == start + 1 and view.record.root.array.stats.max == 99.0
        armed.join(5)
        assert not armed.is_alive()  # cancelled: its thread ended without waiting 20 s
        assert view.widget.updates == start + 1 and view.record.root.array.stats.max == 99.0
    finally:
        view.widget.close()


def test_a_float_sample_and_the_rows_travel_as_buffers_of_the_same_values():
    from ipywidgets.widgets.widget import _remove_buffers

    field = jnp.arange(12.0).reshape(3, 4).at[1, 2].set(jnp.nan).at[2, 3].set(-jnp.inf)
    view = ArrayView(field, name="f")
    try:
        state, paths, buffers = _remove_buffers(view.get_state(["drawing"]))
        assert paths == [["drawing", "sample", "values"]]
        sent = np.frombuffer(buffers[0], "<f8").reshape(state["drawing"]["sample"]["dims"])
        np.testing.assert_array_equal(sent, np.asarray(field))
        assert view.drawing["sample"]["values"][1][2] == "NaN"  # the trait keeps its lists
        _, paths, buffers = _remove_buffers(view.get_state(["rows"]))
        assert paths == [["rows"]] and json.loads(bytes(buffers[0])) == view.rows
    finally:
        view.close()


def test_the_page_chooses_the_leaf_and_the_slice():
    tree = {"a": jnp.arange(5.0), "v": jnp.arange(24.0).reshape(2, 3, 4)}
    view = ArrayView(tree, name="t")
    try:
        assert view.selected == "t['a']"
        view.set_state({"selected": "t['v']"})
        assert view.drawing["shape"] == [2, 3, 4]
        view.set_state({"slice_at": [1]})
        assert view.drawing["sample"]["slice_at"] == [1]
        assert view.drawing["sample"]["values"][0][0] == 12.0
        view.set_state({"rows": []})  # the kernel's trait: not the page's
        assert view.rows
    finally:
        view.close()


def test_the_static_twin_escapes_user_keys():
    view = ArrayView({"<img src=x onerror=alert(1)>": jnp.ones(2)}, name="<b>n</b>")
    try:
        page = view.static_bundle()["text/html"]
        assert "<img src=x" not in page and "<b>n</b>" not in page
        assert "&lt;img src=x onerror=alert(1)&gt;" in page
    finally:
        view.close()


def test_show_on_is_the_display_of_arrays_and_pytrees_and_off_restores_exactly(ip):
    formatter = ip.display_formatter.formatters["text/html"]
    before = dict(formatter.type_printers)
    ip.run_line_magic("show", "on")
    html, _ = ip.display_formatter.format(jnp.arange(3.0))
    assert "jaxlab-show" in html["text/html"]
    html, _ = ip.display_formatter.format({"w": jnp.ones(2)})
    assert "jaxlab-show" in html["text/html"]
    plain, _ = ip.display_formatter.format({"name": "no arrays"})
    assert "text/html" not in plain  # a dict without arrays displays as before
    assert "text/html" not in ip.display_formatter.format(np.ones(2))[0]
    ip.run_line_magic("show", "off")
    assert dict(formatter.type_printers) == before
    assert "text/html" not in ip.display_formatter.format(jnp.arange(3.0))[0]


def test_unloading_turns_show_on_off(ip):
    formatter = ip.display_formatter.formatters["text/html"]
    before = dict(formatter.type_printers)
    ip.run_line_magic("show", "on")
    ip.run_line_magic("unload_ext", "jaxlab")
    assert dict(formatter.type_printers) == before
    ip.run_line_magic("load_ext", "jaxlab")


def test_equinox_model_through_the_magic(ip):
    pytest.importorskip("equinox")
    ip.run_cell("import equinox as eqx, jax\nmodel = eqx.nn.MLP(2, 1, 4, 1, key=jax.random.key(0))")
    r = ip.run_line_magic("show", "-o model")
    assert r.root.label == "MLP (equinox)"
    assert r.root.params == 2 * 4 + 4 + 4 * 1 + 1
