"""jaxlab's own work (the peak measurement, cost analysis) kept out of the user's compile log.

::

    with own_work():
        jax.jit(matmul).lower(a, b).compile()   # not logged as the user's compilation

The compile log offers ``jaxlab.compile.capture.jaxlab_work()`` for this; where a build
does not have it yet, the work runs unmarked (and is logged like any compilation).
"""

from __future__ import annotations

import contextlib
from typing import Any


def own_work() -> contextlib.AbstractContextManager[Any]:
    """A context in which compilations are jaxlab's, not the user's."""
    from ..compile import capture

    marker = getattr(capture, "jaxlab_work", None)
    return marker() if callable(marker) else contextlib.nullcontext()
