"""Widgets in Python: traits, sync, throttled updates, static fallback, shipped assets."""

import re
import tomllib
from pathlib import Path

import pytest

from jaxlab.compile.log import CompileLog
from jaxlab.widgets import CompileMonitor
from jaxlab.widgets._base import STATIC, JaxlabWidget

ROOT = Path(__file__).resolve().parents[1]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


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


def test_updates_follow_the_log_throttled(log, monkeypatch):
    monitor = CompileMonitor(log)
    try:
        log.add_cell_time(1.0, 0.0)  # after a cell: always sent at once
        assert monitor.session["running_s"] == pytest.approx(1.0)
        throttle = monitor._throttle
        monkeypatch.setattr(throttle, "_interval", 60.0)
        throttle._last = 0.0  # long ago: the next event goes out at once
        log.record("g", compile_s=0.5)
        assert "g" in {r["name"] for r in monitor.functions}
        log.record("h", compile_s=0.5)  # within the interval: held back ...
        assert "h" not in {r["name"] for r in monitor.functions}
        timer = throttle._timer
        assert timer is not None
        timer.cancel()
        throttle._trailing()  # ... and sent by the trailing timer
        assert "h" in {r["name"] for r in monitor.functions}
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
        monitor._throttle._last = 0.0  # not throttled: the update goes out at once
        log.record("newest", compile_s=0.001)  # a change of the synced state ...
        assert updated, "the twin was not updated"
        latest, kw = updated[-1]
        assert kw["display_id"] == display_id  # ... rewrites the saved twin in place
        assert "4 compilations of 3 functions" in latest["text/html"]
        assert "<code>newest</code>" in latest["text/html"]
        # a live view's CSS hides the twins of its class
        assert ".jaxlab-twin-compile-monitor { display: none; }" in monitor._css
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
