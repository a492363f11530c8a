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
