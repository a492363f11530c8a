"""Widgets that leave nothing behind and refuse the page quietly (issue 32).

A released (or closed) widget closes the ``Layout`` it made, so a notebook whose cells are
re-run for days keeps no model or comm per run; a value of the wrong type sent by the page
for a trait it may write is refused, logged to ``jaxlab.widgets`` and never printed into
the output, and the kernel's value is kept.
"""

import pytest

from jaxlab.compile.log import CompileLog
from jaxlab.widgets import CompileMonitor


def _from_page(widget, state):
    """A state update as the front end sends it: through the comm, not a Python setattr."""
    msg = {"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}}
    widget._handle_msg({**msg, "buffers": []})


@pytest.fixture
def live_ip(ip, monkeypatch):
    """The shell as a notebook's kernel: %jaxpr shows the GraphExplorer."""
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    ip.run_cell("import jax, jax.numpy as jnp\ndef f(x):\n    return jnp.sin(x).sum()")
    ip.run_cell("x = jnp.ones(3)")
    return ip


# Releasing and closing (issue 32): nothing a widget made stays behind.


def _widgets_and_comms() -> tuple[int, int]:
    import comm
    from ipywidgets.widgets.widget import _instances

    return len(_instances), len(comm.get_comm_manager().comms)


def test_a_hundred_displays_and_releases_leave_no_widget_or_comm(monkeypatch):
    import ipywidgets
    import jax.numpy as jnp

    from jaxlab.widgets import ArrayView

    monkeypatch.setattr("IPython.display.display", lambda *a, **kw: None)
    monkeypatch.setattr("IPython.display.update_display", lambda *a, **kw: None)
    monkeypatch.setattr("jaxlab.widgets._base._front_end_updates_displays", lambda: True)
    log = CompileLog()
    log.record("f", compile_s=0.001)
    value = jnp.ones((3, 4))
    before = _widgets_and_comms()
    for _ in range(100):
        for widget in (CompileMonitor(log), ArrayView(value, name="x")):
            widget._ipython_display_()
            assert isinstance(widget.layout, ipywidgets.Layout)
            widget.release()
            assert widget.comm is None and widget.layout.comm is None
    assert _widgets_and_comms() == before


def test_a_layout_passed_in_is_not_closed_with_the_widget():
    import ipywidgets

    shared = ipywidgets.Layout(width="50%")
    try:
        monitor = CompileMonitor(CompileLog(), layout=shared)
        monitor.close()
        assert monitor.comm is None and shared.comm is not None  # the caller's to close
    finally:
        shared.close()


# Wrong types from the page (issue 32): refused quietly, the kernel's value kept.


def test_a_wrong_type_from_the_page_is_logged_not_printed(ip, capsys, caplog, monkeypatch):
    import logging

    import jax.numpy as jnp

    from jaxlab.widgets import ArrayView

    shown = []
    monkeypatch.setattr(ip, "showtraceback", lambda *a, **kw: shown.append(a))
    monkeypatch.setattr("IPython.display.display", lambda *a, **kw: shown.append(a))
    monitor = CompileMonitor(CompileLog())
    view = ArrayView(jnp.ones((2, 3, 4)), name="x")
    sent = []
    monkeypatch.setattr(monitor, "_send", lambda msg, buffers=None: sent.append(msg))
    try:
        selected = view.selected
        with caplog.at_level(logging.WARNING, logger="jaxlab.widgets"):
            _from_page(monitor, {"mine_only": "yes please"})
            _from_page(view, {"slice_at": ["0", {"x": 1}], "selected": 7})
            _from_page(view, {"slice_at": [1.5]})
        assert monitor.mine_only is True  # the kernel's value kept
        assert view.slice_at == [] and view.selected == selected
        assert shown == []  # no traceback shown, nothing displayed
        out, err = capsys.readouterr()
        assert out == "" and err == ""
        refused = [r for r in caplog.records if r.name.startswith("jaxlab.widgets")]
        assert len(refused) == 4 and "mine_only" in refused[0].getMessage()
        # The page is sent the kernel's value back (after ipywidgets' echo of what came),
        # as for a trait it may not write.
        assert [m["method"] for m in sent] == ["echo_update", "update"]
        assert sent[-1]["state"] == {"mine_only": True}
        # A right type is still taken.
        _from_page(monitor, {"mine_only": False})
        assert monitor.mine_only is False
    finally:
        monitor.close()
        view.close()


def test_a_refusal_reaches_no_output_without_logging_configured(tmp_path):
    # A kernel shows stderr in the cell: Python's "last resort" handler would print a
    # warning there if jaxlab's logger had no handler of its own.
    import subprocess
    import sys

    code = (
        "from jaxlab.compile.log import CompileLog\n"
        "from jaxlab.widgets import CompileMonitor\n"
        "m = CompileMonitor(CompileLog())\n"
        "m.set_state({'mine_only': 'yes'})\n"
        "assert m.mine_only is True\n"
        "m.close()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    printed = done.stdout + done.stderr  # (anything else a library prints is not ours)
    assert "mine_only" not in printed and "refused" not in printed, printed


def test_a_choice_from_the_page_that_cannot_be_drawn_is_logged_not_printed(
    ip, capsys, caplog, monkeypatch
):
    import logging

    import jax.numpy as jnp

    from jaxlab.widgets import ArrayView

    shown = []
    monkeypatch.setattr(ip, "showtraceback", lambda *a, **kw: shown.append(a))
    view = ArrayView({"a": jnp.ones((2, 3, 4)), "b": jnp.zeros(3)}, name="x")
    try:
        drawing = view.drawing

        def cannot(path):
            raise ValueError(f"no drawing of {path}")

        monkeypatch.setattr(view, "_drawing", cannot)
        with caplog.at_level(logging.WARNING, logger="jaxlab.widgets"):
            _from_page(view, {"selected": "x['b']"})
        assert view.drawing == drawing and shown == []
        assert capsys.readouterr() == ("", "")
        (record,) = [r for r in caplog.records if r.name == "jaxlab.widgets.array_view"]
        assert "x['b']" in record.getMessage() and record.exc_info is not None
    finally:
        view.close()


def test_a_cell_run_again_and_again_leaves_no_layout_or_comm_behind(live_ip, capsys):
    # As users saw it: each re-run released its explorer but left its Layout and comm
    # (1,800 after 1,800 re-runs).
    live_ip.run_cell("%jaxpr f(x)", cell_id="again")
    capsys.readouterr()
    once = _widgets_and_comms()
    for _ in range(20):
        result = live_ip.run_cell("%jaxpr f(x)", cell_id="again")
        assert result.success, result.error_in_exec
    capsys.readouterr()
    assert _widgets_and_comms() == once  # one explorer and its Layout, as after one run
