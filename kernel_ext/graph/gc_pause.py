"""Python's cyclic garbage collector held off while a view is built, so a click is not
made to wait for it.

A traced 10,000-equation program keeps a few hundred thousand objects alive; one full
collection of them takes about 0.25 s. Building a view allocates enough to set one off
now and then, and whichever click did waited for it (an expansion took 0.31 s, 0.08 s
without it). Held off, the collection runs at the next allocation after the view was
sent: while the page draws it, or when the kernel next works, not on the reader's click.
Nothing is left uncollected; the window is one view's work (a few hundred thousand
objects at most)::

    with paused_gc():
        graph = explorer.graph(opened)
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["paused_gc"]


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The collector off inside (reentrant); back on after, unless it was off before."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
