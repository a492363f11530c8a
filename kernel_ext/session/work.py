"""The own-work marker: jaxlab's own compilations and time, told apart from the user's.

Compilations jaxlab makes for its own checks, drawings and reports run inside
:func:`jaxlab_work`; the compile log (``compile/capture``) asks :func:`in_jaxlab_work`
when JAX reports one, counts it as jaxlab's and never logs it as the user's, and
subscribes with :func:`on_jaxlab_time` to the time of each outermost block. Key tracking
(``keys/track``) records no draw made inside one: a check's or a timing loop's calls of
the user's function draw jaxlab's numbers, not the user's; nor does it inside
:func:`results_unseen` (the user's call that a measuring magic makes). It reads
``WORK_DEPTH.draws`` on every ``jax.random`` call (an attribute, no function call), and
its callbacks compiled into the user's programs read ``WORK_ANYWHERE.draws`` (on an
accelerator they run on the runtime's thread, not the caller's)::

    with jaxlab_work():
        finite_difference_check(f, x)   # compiles, but not the user's compilation
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

__all__ = [
    "WORK_ANYWHERE",
    "WORK_DEPTH",
    "in_jaxlab_work",
    "jaxlab_work",
    "on_jaxlab_time",
    "results_unseen",
]


class _Depth(threading.local):
    depth = 0  # jaxlab_work blocks open on this thread
    draws = 0  # blocks whose random draws are not the user's: these and results_unseen


class _Anywhere:
    draws = 0  # the same blocks, open on any thread


_DEPTH = _Depth()
WORK_DEPTH = _DEPTH  # read only: ``.depth`` > 0 inside jaxlab_work, ``.draws`` > 0 also
# inside results_unseen, on this thread
# read only: ``.draws`` > 0 while any thread is in such a block. A callback compiled into
# the user's program runs on an accelerator runtime's own thread (a TPU's, a GPU's),
# which sees none of the thread's blocks: it asks this instead.
WORK_ANYWHERE = _Anywhere()
_lock = threading.Lock()


def _draws(step: int) -> None:
    _DEPTH.draws += step
    with _lock:
        WORK_ANYWHERE.draws += step


_listeners: tuple[Callable[[float], None], ...] = ()


@contextlib.contextmanager
def jaxlab_work() -> Iterator[None]:
    """Compilations in this block are jaxlab's own (a check, a drawing, a report's extra
    runs): counted in ``CompileLog.jaxlab_count``, never logged as the user's.

    >>> with jaxlab_work():
    ...     jax.jit(jnp.sin)(x)   # not in jaxlab.compile_log().events
    """
    _DEPTH.depth += 1
    _draws(1)
    started = time.perf_counter() if _DEPTH.depth == 1 else None
    try:
        yield
    finally:
        _DEPTH.depth -= 1
        _draws(-1)
        if started is not None:  # the outermost block: its whole time is jaxlab's
            elapsed = time.perf_counter() - started
            for listener in _listeners:
                listener(elapsed)


@contextlib.contextmanager
def results_unseen() -> Iterator[None]:
    """The user's call, run by a magic that measures or reports it (``%bench``'s and
    ``%jit``'s first call): its compilation is the user's, logged as theirs; its random
    draws are not, and key tracking records none of them."""
    _draws(1)
    try:
        yield
    finally:
        _draws(-1)


def in_jaxlab_work() -> bool:
    """Whether this thread is inside a :func:`jaxlab_work` block."""
    return _DEPTH.depth > 0


def on_jaxlab_time(listener: Callable[[float], None]) -> Callable[[], None]:
    """Call ``listener(seconds)`` after each outermost :func:`jaxlab_work` block, on the
    thread that ran it; returns the undo (idempotent)."""
    global _listeners
    with _lock:
        _listeners = (*_listeners, listener)

    def undo() -> None:
        global _listeners
        with _lock:
            _listeners = tuple(other for other in _listeners if other is not listener)

    return undo
