"""Work without pauses of Python's cyclic garbage collector: %bench's timed rounds (as
``timeit`` pauses it), the profile join, ``arrays/``'s views (%show) and the
GraphExplorer's views (a traced 10,000-equation program keeps a few hundred thousand
objects alive: one full collection, 0.25 s, fell on whichever click set it off).

A 714-layer tree's view makes some 20,000 records, rows and strings, none of them in a
reference cycle. Each 700 allocations start a collection, and in a kernel whose heap is
large (a model, JAX's caches, a library's leftovers) the older generations' collections
walk all of it: after treescope had drawn the same tree, 47 ms of a 190 ms view were
collections that freed nothing the view made. Paused while the view is built, the
allocations it made count toward one collection after it instead.

::

    with collector_paused():
        record = show_record(params)
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause automatic collection for the block; resumed after it if it ran before (a
    pause already in force, the user's or an outer block's, is left as it was)."""
    running = gc.isenabled()
    if running:
        gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()
