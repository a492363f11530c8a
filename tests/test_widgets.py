"""Widgets in Python: traits, sync, throttled updates, static fallback, shipped assets."""

import re
import tomllib
from pathlib import Path

import pytest

from jaxlab.compile.log import CompileLog
from jaxlab.widgets import CompileMonitor
from jaxlab.widgets._base import STATIC, JaxlabWidget, Throttle

ROOT = Path(__file__).resolve().parents[1]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class NoTicker:
    """No ticker thread: the test calls ``Throttle.tick`` itself."""

    def add(self, throttle):
        pass

    def discard(self, throttle):
        pass


@pytest.fixture
def log():
    log = CompileLog()
    log.record("f", trace_s=0.001, lower_s=0.002, compile_s=0.003, signature=("f32[3]",))
    log.record(
        "f",
        trace_s=0.001,
        lower_s=0.001,
        compile_s=0.004,
        signature=("f32[4]",),
        explanation="x: f32[3] → f32[4]",
        where="In[3], line 1",
    )
    log.record("<script>alert(1)</script>", compile_s=0.001)
    return log


def test_state_groups_functions_with_their_compilations(log):
    monitor = CompileMonitor(log)
    try:
        rows = {r["name"]: r for r in monitor.functions}
        f = rows["f"]
        assert f["count"] == 2 and f["recompiles"] == 1
        assert f["total_s"] == pytest.approx(0.012) and f["last_s"] == pytest.approx(0.006)
        second, first = f["compiles"]  # newest first
        assert (first["trace_s"], first["lower_s"], first["compile_s"]) == (0.001, 0.002, 0.003)
        assert not first["recompile"] and second["recompile"]
        assert second["explanation"] == "x: f32[3] → f32[4]"
        assert second["where"] == "In[3], line 1" and second["signature"] == ["f32[4]"]
        assert monitor.session["count"] == 3 and monitor.session["functions"] == 2
        assert monitor.session["compile_s"] == pytest.approx(0.013)
    finally:
        monitor.close()


def test_state_puts_the_users_functions_first_and_counts_the_others(log):
    from jaxlab.compile.messages import CallSignature

    log.record("sin", call=CallSignature.of(len, defined_at="x.py:1", user_code=False))
    log.record("g", compile_s=0.001)
    monitor = CompileMonitor(log)
    try:
        names = [r["name"] for r in monitor.functions]
        assert names == ["g", "<script>alert(1)</script>", "f", "sin"]  # mine newest first
        assert [r["user_code"] for r in monitor.functions] == [True, True, True, False]
        assert monitor.mine_only is True and "mine_only" in monitor.keys
        assert monitor.session["mine"] == 3 and monitor.session["functions"] == 4
        assert monitor.session["phase_s"] == pytest.approx([0.002, 0.003, 0.009])
    finally:
        monitor.close()


def test_traits_sync_and_assets(log):
    monitor = CompileMonitor(log)
    try:
        synced = set(monitor.keys)
        assert {"functions", "session", "_esm", "_css"} <= synced
        state = monitor.get_state()
        assert state["functions"] == monitor.functions
        assert "export default" in state["_esm"] and ".jaxlab-cm" in state["_css"]
    finally:
        monitor.close()


def test_updates_follow_the_log_throttled(log):
    monitor = CompileMonitor(log)
    try:
        clock = [1000.0]  # a throttle this test ticks itself, on its own clock
        monitor._throttle.cancel()
        throttle = monitor._throttle = Throttle(monitor._push, 0.25, lambda: clock[0], NoTicker())
        log.record("f2", compile_s=0.5)
        log.add_cell_time(1.0, 0.0)  # after a cell that compiled: sent at once
        assert monitor.session["other_s"] == pytest.approx(1.0)
        assert "f2" in {r["name"] for r in monitor.functions}
        log.add_cell_time(1.0, 0.0)  # after one that only took time: through the throttle
        assert monitor.session["other_s"] == pytest.approx(1.0) and throttle.pending
        clock[0] += 0.3
        assert throttle.tick() and monitor.session["other_s"] == pytest.approx(2.0)
        clock[0] += 0.3
        log.record("g", compile_s=0.5)  # a compile: marked, pushed by the ticker ...
        assert "g" not in {r["name"] for r in monitor.functions} and throttle.pending
        assert throttle.tick() and "g" in {r["name"] for r in monitor.functions}
        log.record("h", compile_s=0.5)  # ... at most once per interval
        clock[0] += 0.1
        assert not throttle.tick() and "h" not in {r["name"] for r in monitor.functions}
        clock[0] += 0.2
        assert throttle.tick() and "h" in {r["name"] for r in monitor.functions}
    finally:
        monitor.close()
    log.record("after_close", compile_s=0.1)
    assert "after_close" not in {r["name"] for r in monitor.functions}


def test_mimebundle_has_widget_and_static_fallback(log):
    monitor = CompileMonitor(log)
    try:
        data, _ = monitor._repr_mimebundle_()
        assert data[WIDGET_MIME]["model_id"] == monitor.model_id
        html = data["text/html"]
        assert "<table" in html and "x: f32[3] → f32[4]" in html
        assert "&lt;script&gt;" in html and "<script>" not in html
        assert data["text/plain"].startswith("CompileLog: 3 compilations of 2 functions")
    finally:
        monitor.close()


def test_display_keeps_a_static_twin_of_the_latest_state(log, monkeypatch):
    shown, updated = [], []
    monkeypatch.setattr(
        "IPython.display.display",
        lambda obj, **kw: shown.append((obj, kw)),
    )
    monkeypatch.setattr(
        "IPython.display.update_display",
        lambda obj, **kw: updated.append((obj, kw)),
    )
    monkeypatch.setattr("jaxlab.widgets._base._front_end_updates_displays", lambda: True)
    monitor = CompileMonitor(log)
    try:
        monitor._ipython_display_()
        (view, _), (twin, twin_kw) = shown
        assert view[WIDGET_MIME]["model_id"] == monitor.model_id
        assert "text/html" not in view and view["text/plain"] == ""  # no duplicate
        assert "3 compilations of 2 functions" in twin["text/html"]
        assert 'class="jaxlab-twin jaxlab-twin-compile-monitor"' in twin["text/html"]
        display_id = twin_kw["display_id"]
        log.record("newest", compile_s=0.001)  # a change of the synced state ...
        monitor._throttle.flush()  # (pushed as the ticker pushes it)
        assert updated, "the twin was not updated"
        latest, kw = updated[-1]
        assert kw["display_id"] == display_id  # ... rewrites the saved twin in place
        assert "4 compilations of 3 functions" in latest["text/html"]
        assert "<code>newest</code>" in latest["text/html"]
        # No class CSS hides a twin (a restored model injects it, drawn or not): a view
        # that drew hides its twins by their id, from inside itself.
        assert "jaxlab-twin" not in monitor._css
        assert f'data-jaxlab-twin="{monitor._twin_id}"' in latest["text/html"]
        assert re.fullmatch(r"[0-9a-f]{32}", monitor._twin_id)
        assert "_twin_id" in monitor.get_state()  # the page's view reads it
    finally:
        monitor.close()


def test_every_widget_ships_its_assets_and_loads_nothing_from_the_network():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["jaxlab.widgets"]
    shipped = {p for g in globs for p in STATIC.parent.glob(g)}  # globs under the package
    widgets = [cls for cls in JaxlabWidget.__subclasses__() if "_esm" in cls.__dict__]
    assert CompileMonitor in widgets
    for path in STATIC.iterdir():
        if path.suffix in {".js", ".css"}:
            assert path in shipped
            # the SVG namespace is a name, not an address anything is fetched from
            text = path.read_text().replace('"http://www.w3.org/2000/svg"', "")
            # url(#id) points inside the same SVG (an arrow marker); any other url( fetches
            assert not re.search(r"https?://|//cdn|@import|url\((?!#)", text), path.name
            assert not re.search(r"^\s*import\s", text, re.M), path.name  # no bare imports
    for cls in widgets:
        assert cls._esm.strip() and cls._css.strip()


# What the page may write (issue 22): the kernel's state is the kernel's.


def _from_page(widget, state):
    """A state update as the front end sends it: through the comm, not a Python setattr."""
    msg = {"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}}
    widget._handle_msg({**msg, "buffers": []})


def _small_explorer():
    import jax
    import jax.numpy as jnp

    import jaxlab
    from jaxlab.widgets import GraphExplorer

    def f(x):
        return jnp.sin(jax.jit(lambda a: a * 2)(x)).sum()

    return GraphExplorer(jaxlab.jaxpr_graph(f, jnp.ones(3), explore=True))


def test_a_view_forged_by_the_page_leaves_the_twin_and_the_view_unchanged(monkeypatch):
    w = _small_explorer()
    try:
        sent = []
        monkeypatch.setattr(w, "_send", lambda msg, buffers=None: sent.append(msg))
        view, model, twin = dict(w.view), dict(w.model), w.static_bundle()["text/html"]
        node = next(iter(w.view["nodes"]))
        forged = {
            **w.view,
            "width": '1"><script>alert(1)</script>',
            "nodes": {
                node: ['0)"><script>alert(2)</script><g x="', 0, 10, 10],
                "e999": [0, 0, 1, 1],
            },
            "edges": [{"points": [["<script>", 1]] * 4, "kind": ""}],
        }
        _from_page(w, {"view": forged, "model": {"nodes": []}, "found": {"query": "<x>"}})
        assert w.view == view and w.model == model and w.found == {}
        assert w.static_bundle()["text/html"] == twin and "<script>" not in twin
        # The page is sent the kernel's values back, so it shows what the kernel computed.
        (back,) = sent
        assert back["method"] == "update"
        assert set(back["state"]) == {"view", "model", "found"}
        assert back["state"]["view"] == view
        # A click still works after the forgery: the page asks, the kernel lays out.
        w._message(None, {"type": "toggle", "cluster": "e999"})
        w._message(None, {"type": "reveal", "id": "e999"})
        assert w.view == view and w.error == ""
    finally:
        w.close()


def test_the_page_sets_only_the_controls_it_owns(log):
    monitor = CompileMonitor(log)
    try:
        functions = list(monitor.functions)
        _from_page(monitor, {"mine_only": False, "functions": [{"name": "<script>"}]})
        assert monitor.mine_only is False  # the "my functions only" box is the page's
        assert monitor.functions == functions
    finally:
        monitor.close()
    from jaxlab import widgets

    assert widgets.CompileMonitor.class_trait_names(front_end=True) == ["mine_only"]
    assert widgets.GraphExplorer.class_trait_names(front_end=True) == []  # all the kernel's
    # No widget lets the page write what the kernel computes for it to draw.
    computed = {"view", "model", "found", "functions", "session", "items", "spans", "_esm"}
    for name in widgets.__all__ if hasattr(widgets, "__all__") else dir(widgets):
        cls = getattr(widgets, name)
        if isinstance(cls, type) and issubclass(cls, JaxlabWidget):
            assert not computed & set(cls.class_trait_names(front_end=True)), name


def test_static_svg_writes_numbers_only():
    from jaxlab.widgets.graph_explorer import static_svg

    w = _small_explorer()
    try:
        bad = {**w.view, "width": "1e3<script>"}
        with pytest.raises(ValueError):
            static_svg(w.drawn, bad)
        odd = {**w.view, "nodes": {**w.view["nodes"], "nowhere": [1, 2, 3, 4]}}
        assert static_svg(w.drawn, odd) == static_svg(w.drawn, w.view)  # unknown: skipped
    finally:
        w.close()


# Long sessions (issue 22): a cell's widgets are released when it runs again.


@pytest.fixture
def live_ip(ip, monkeypatch):
    """The shell as a notebook's kernel: %jaxpr shows the GraphExplorer."""
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    ip.run_cell("import jax, jax.numpy as jnp\ndef f(x):\n    return jnp.sin(x).sum()")
    ip.run_cell("x = jnp.ones(3)")
    return ip


def _live_explorers():
    import gc

    from jaxlab.widgets import GraphExplorer

    gc.collect()
    return [o for o in gc.get_objects() if isinstance(o, GraphExplorer) and o.comm is not None]


@pytest.mark.slow
def test_a_thousand_jaxpr_cells_leave_a_bounded_number_of_live_explorers(live_ip, capsys):
    from jaxlab.magics import _cell_widgets

    before = len(_live_explorers())
    for k in range(1000):
        # A notebook of 7 cells run over and over, as one is while a model is worked on.
        result = live_ip.run_cell("%jaxpr f(x)", cell_id=f"cell-{k % 7}")
        assert result.success, result.error_in_exec
        if k % 100 == 0:
            capsys.readouterr()  # the terminal prints every display; keep it short
    assert _cell_widgets._session.live() == 7
    assert len(_live_explorers()) - before == 7  # the others closed and freed


def test_a_cell_run_again_releases_its_widgets_but_not_the_users(live_ip, capsys):
    from jaxlab.magics import _cell_widgets
    from jaxlab.widgets import GraphExplorer

    live_ip.run_cell("%jaxpr f(x)", cell_id="a")
    (first,) = _cell_widgets._session._shown["a"]
    live_ip.user_ns.update(GraphExplorer=GraphExplorer, jaxlab=__import__("jaxlab"))
    live_ip.run_cell("kept = GraphExplorer(jaxlab.jaxpr_graph(f, x))\nkept", cell_id="b")
    kept = live_ip.user_ns["kept"]
    assert _cell_widgets._session._shown["b"] == [kept] and kept.comm is not None
    live_ip.run_cell("%jaxpr f(x)", cell_id="a")  # cell a again: its explorer goes
    assert first.comm is None and _cell_widgets._session._shown["a"][0] is not first
    live_ip.run_cell("1", cell_id="b")  # cell b again: the user's explorer stays
    assert kept.comm is not None
    kept.close()
    capsys.readouterr()


def test_cells_without_an_id_keep_the_newest_widgets_live(live_ip, monkeypatch, capsys):
    from jaxlab.magics import _cell_widgets

    monkeypatch.setattr(_cell_widgets, "MAX_UNNAMED", 3)
    shown = []
    for _ in range(6):
        live_ip.run_cell("%jaxpr f(x)")
        shown.append(list(_cell_widgets._session._unnamed.values())[-1])
    assert len({id(w) for w in shown}) == 6
    assert [w.comm is not None for w in shown] == [False] * 3 + [True] * 3
    assert _cell_widgets._session.live() == 3
    live_ip.run_line_magic("unload_ext", "jaxlab")  # unloading forgets, closes nothing
    assert _cell_widgets._session is None
    assert [w.comm is not None for w in shown][3:] == [True] * 3
    live_ip.run_line_magic("load_ext", "jaxlab")
    for w in shown:
        w.close()
    capsys.readouterr()


def test_a_released_widget_leaves_its_twin_showing(monkeypatch):
    updated = []
    monkeypatch.setattr(
        "IPython.display.update_display", lambda obj, **kw: updated.append((obj, kw))
    )
    w = _small_explorer()
    w._twin_ids = ["d1"]
    w.release()
    ((bundle, kw),) = updated
    assert kw["display_id"] == "d1" and w.comm is None
    assert 'class="jaxlab-twin jaxlab-twin-released"' in bundle["text/html"]
    assert "jaxlab-twin-graph-explorer" not in bundle["text/html"]  # not hidden by the CSS
    assert "<svg" in bundle["text/html"]


def test_a_released_twin_has_no_id_a_view_could_hide_it_by(monkeypatch):
    updated = []
    monkeypatch.setattr(
        "IPython.display.update_display", lambda obj, **kw: updated.append((obj, kw))
    )
    monitor = CompileMonitor(CompileLog())
    monitor._twin_ids = ["d1"]
    assert "data-jaxlab-twin=" in monitor.static_bundle()["text/html"]
    monitor.release()
    ((bundle, _),) = updated
    assert "data-jaxlab-twin" not in bundle["text/html"]
