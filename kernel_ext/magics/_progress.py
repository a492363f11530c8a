"""A magic's long step: a word to the user when it takes a while, and a clean interrupt.

JAX's tracing has no time limit: a program of fifty nested ``lax.cond`` takes minutes to
trace, and the cell would sit silent. Inside :func:`watching` the user hears after a few
seconds what is going on, and an interrupt (Ctrl-C, JupyterLab's ■) ends the magic with a
one-line ``UsageError`` instead of a traceback through JAX and jaxlab::

    with watching("%jaxpr", "tracing `f(x)`"):
        graph = jaxpr_graph(f, x)
    # after 5 s:  %jaxpr: still tracing `f(x)` after 5 s … (interrupt the kernel to stop)
    # interrupted: UsageError: %jaxpr: interrupted while tracing `f(x)` after 7.2 s;
    #              nothing in the notebook changed

Magics write to the user namespace only once everything has succeeded, so an interrupt
leaves it as it was; the message says so.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from IPython.core.error import UsageError

# Seconds of silence before the notice; JAXLAB_NOTICE_AFTER changes it (tests, slow CI).
NOTICE_AFTER_S = float(os.environ.get("JAXLAB_NOTICE_AFTER", "5"))


def _say(stream: TextIO, text: str) -> None:
    try:
        stream.write(text + "\n")
        stream.flush()
    except (OSError, ValueError):  # the stream closed meanwhile: nobody to tell
        pass


@contextmanager
def watching(
    magic: str, doing: str, *, after: float | None = None, notice: bool = True
) -> Iterator[None]:
    """Run the block; after ``after`` seconds (default :data:`NOTICE_AFTER_S`) print that
    ``magic`` is still ``doing`` (unless ``notice`` is False: a cell that runs a long
    computation on purpose); turn a ``KeyboardInterrupt`` into a ``UsageError``."""
    delay = NOTICE_AFTER_S if after is None else after
    timer = None
    if notice:
        # The stream of the cell that runs the magic: a kernel routes a thread's prints by it.
        text = f"{magic}: still {doing} after {delay:g} s … (interrupt the kernel to stop)"
        timer = threading.Timer(delay, _say, (sys.stdout, text))
        timer.daemon = True  # never keeps the process alive
        timer.start()
    start = time.perf_counter()
    try:
        yield
    except KeyboardInterrupt:
        elapsed = time.perf_counter() - start
        # `from None`: the interrupted frames (JAX's, jaxlab's) are not the user's concern
        raise UsageError(
            f"{magic}: interrupted while {doing} after {elapsed:.1f} s; "
            "nothing in the notebook changed"
        ) from None
    finally:
        if timer is not None:
            timer.cancel()
