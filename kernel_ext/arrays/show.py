"""``jaxlab.show(x)``: a live view of an array or pytree, and its handle.

::

    view = jaxlab.show(params, name="params")   # displayed now (in a notebook)
    for step in range(1000):
        params = train_step(params)
        view.update(params)                     # redraws in place, a few times a second
    view.flush()                                # the last state, drawn now

Outside IPython nothing is displayed; ``view.record`` still holds the walked tree.
"""

from __future__ import annotations

from typing import Any

from .record import ShowRecord


class ShowHandle:
    """What :func:`show` returns: ``update(new)`` redraws the displayed view in place."""

    def __init__(self, widget: Any) -> None:
        self.widget = widget

    def update(self, value: Any) -> None:
        """Show ``value`` in place of the last (throttled to the view's rate)."""
        self.widget.update(value)

    def flush(self) -> None:
        """Draw the latest value now."""
        self.widget.flush()

    @property
    def record(self) -> ShowRecord:
        """The latest ``ShowRecord`` drawn."""
        return self.widget.record

    def __repr__(self) -> str:
        name = self.widget.name or "value"
        return f"<jaxlab.show view of {name}: .update(new) redraws it>"


def show(
    x: Any,
    name: str = "",
    slice_at: tuple[int, ...] | None = None,
    rate: float = 4.0,
    range: tuple[float, float] | str | None = None,  # the word users write
) -> ShowHandle:
    """Display ``x`` (an array or any pytree) as a live view and return its handle.

    ``rate`` bounds redraws per second while ``update`` is called in a loop; ``slice_at``
    picks the leading indices of a 3-D+ array's drawn slice (negative from the end).
    ``range=(lo, hi)`` fixes the colours' range; ``range="first"`` fixes it at the first
    frame's (so a fade shows); by default each frame's array's min and max. A bad range
    is a ``ValueError`` saying what is taken.
    A value that cannot be walked raises ``UnshowablePytree`` and a slice that does not fit
    ``BadSlice`` (both ``ValueError``), naming the part and the reason; nothing is shown.
    """
    from jaxlab.widgets.array_view import checked_range

    fixed = checked_range(range)
    return live_view(x, name, checked_slice(x, name, slice_at), rate, fixed)


def checked_slice(x: Any, name: str, slice_at: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """Walk ``x`` as the view will (``UnshowablePytree`` where it cannot) and check
    ``slice_at`` against the array it draws (``BadSlice``): the indices, non-negative."""
    from .slicing import check_slice
    from .tree import pytree_arrays

    arrays = pytree_arrays(x, name)
    return check_slice(arrays, tuple(slice_at)) if slice_at else None


def live_view(
    x: Any,
    name: str,
    slice_at: tuple[int, ...] | None,
    rate: float,
    value_range: tuple[float, float] | str | None = None,
) -> ShowHandle:
    """The ArrayView of ``x``, displayed in IPython: ``x``, ``slice_at`` and
    ``value_range`` already checked."""
    from jaxlab.widgets.array_view import ArrayView

    widget = ArrayView(
        x, name=name, rate=rate, slice_at=list(slice_at or ()), value_range=value_range
    )
    if _in_ipython():
        from IPython.display import display

        display(widget)
    return ShowHandle(widget)


def _in_ipython() -> bool:
    import sys

    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    return get_ipython() is not None
