"""A live view updated with a value it cannot draw keeps its last drawing and says why
(issue 32): the redraw runs on a timer thread, where an error would reach nobody."""

import jax.numpy as jnp

import jaxlab


def test_an_update_that_cannot_be_drawn_keeps_the_last_drawing_and_says_why():
    view = jaxlab.show({"w": jnp.arange(4.0)}, name="state")
    try:
        assert view.record.root.array is None and view.widget.last_error == ""
        bad: dict = {"w": jnp.ones(3)}
        bad["self"] = bad  # a pytree that holds itself
        view.update(bad)
        view.flush()  # no exception: the view says it
        assert "not drawn" in view.widget.last_error and "itself" in view.widget.footer
        assert view.record.root.find("state['w']").array.stats.max == 3.0  # the last one kept
        view.update({"w": jnp.full(2, 7.0)})
        view.flush()
        assert view.widget.last_error == "" and "not drawn" not in view.widget.footer
        assert view.record.root.find("state['w']").array.stats.max == 7.0
    finally:
        view.widget.close()


def test_a_redraw_rebuilds_the_twin_once_not_once_per_trait(monkeypatch):
    from jaxlab.widgets import CompileMonitor
    from jaxlab.widgets._base import JaxlabWidget

    built = []
    real = JaxlabWidget.static_bundle
    monkeypatch.setattr(
        JaxlabWidget, "static_bundle", lambda self, **kw: built.append(1) or real(self, **kw)
    )
    monkeypatch.setattr("IPython.display.update_display", lambda *a, **k: None)
    view = jaxlab.show(jnp.zeros(3), name="x")
    monitor = CompileMonitor()
    try:
        for widget in (view.widget, monitor):
            widget._twin_ids = ["shown"]  # as a displayed widget has
        built.clear()
        view.update(jnp.ones(3))
        view.flush()  # five traits change (rows, footer, selected, drawing, updates)
        assert len(built) == 1
        built.clear()
        jaxlab.compile_log().record("f", compile_s=0.01, signature=("f32[3]",))
        monitor.refresh()  # two traits change (functions, session)
        assert len(built) == 1
    finally:
        view.widget.close()
        monitor.close()
