"""A view's pushes at most a few times a second, made by one thread for every view.

::

    throttle = Throttle(widget.refresh)              # registers with the one ticker
    store.subscribe(lambda *_: throttle.changed())   # a flag: pushed within the interval
    throttle.flush()                                 # the cell ended: push now, here

``changed`` only stores a flag on the caller's thread: no lock, no timer, no object
made. A loop that changes a store on every step (a tracked ``while True:
jax.random.normal(k)``) then runs nothing of the view's, so an interrupt always lands in
the user's code. A ``threading.Timer`` per change did not: each made a thread and the
objects the collector frees, and Python drops a ``KeyboardInterrupt`` raised inside a
garbage-collector callback (JAX registers one) as "Exception ignored"; two interrupts
of such a loop were lost that way (issue 32).

One daemon thread (the ticker) wakes every ``TICK`` seconds and pushes each registered
throttle that has a change and whose interval has passed since its last push; it ends
when no throttle is registered and starts again with the next. It holds throttles by
weak references without callbacks (a callback is Python code that a collection runs),
so a view dropped without ``close`` is not kept alive by it.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable

_logger = logging.getLogger("jaxlab.widgets")

TICK = 0.05  # seconds between the ticker's looks at its throttles


class Throttle:
    """Calls ``push`` at most once per ``interval`` seconds while changes stream in, on the
    ticker's thread, and once more after the last change, so the view ends on the latest
    state. ``flush`` pushes on the caller's thread (the end of a cell). ``clock`` and
    ``ticker`` (anything with ``add`` and ``discard``) are for tests, which call
    :meth:`tick` themselves."""

    def __init__(
        self,
        push: Callable[[], None],
        interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        ticker: _Ticker | None = None,
    ) -> None:
        self._push = push
        self._interval = interval
        self._clock = clock
        self._pending = False  # a change not pushed yet; the only thing changed() touches
        self._registered = False
        self._last = -float("inf")  # when the last push began (clock seconds)
        self._pushing = threading.Lock()  # one push at a time (ticker or flush)
        self._ticker = ticker if ticker is not None else _TICKER
        self._ticker.add(self)
        self._registered = True

    @property
    def pending(self) -> bool:
        """Whether a change waits for its push."""
        return self._pending

    def changed(self, now: bool = False) -> None:
        """A change: pushed by the ticker once the interval has passed, or here (``now``)."""
        if now:
            self.flush()
            return
        self._pending = True
        if not self._registered:  # only after cancel(): a view that follows again
            self._ticker.add(self)
            self._registered = True

    def flush(self) -> None:
        """Push now on this thread (after a push running on the ticker), dropping the
        pending one."""
        with self._pushing:
            self._pending = False
            self._run()

    def tick(self) -> bool:
        """The ticker's look: push if a change waits and the interval has passed (a push
        running elsewhere is not waited for). Whether it pushed."""
        if not self._pending or self._clock() - self._last < self._interval:
            return False
        if not self._pushing.acquire(blocking=False):
            return False  # a flush is pushing; it pushes the latest state
        try:
            if not self._pending:
                return False
            self._pending = False
            self._run()
        finally:
            self._pushing.release()
        return True

    def cancel(self) -> None:
        """Drop a pending push and leave the ticker (the view is closing or detached)."""
        self._pending = False
        self._registered = False
        self._ticker.discard(self)

    def _run(self) -> None:
        self._last = self._clock()
        self._push()


class _Ticker:
    """The one thread that pushes every throttle's pending change."""

    def __init__(self) -> None:
        # Reentrant: a collection can run inside add() (making the thread allocates) and
        # close a view that nothing holds any more (ipywidgets' Widget.__del__), whose
        # throttle then leaves here on the same thread. With a plain lock the kernel hung
        # for good (seen: a CompileMonitor collected while another one was made).
        self._lock = threading.RLock()
        self._throttles: dict[int, weakref.ref[Throttle]] = {}
        self._thread: threading.Thread | None = None

    @property
    def thread(self) -> threading.Thread | None:
        return self._thread

    def add(self, throttle: Throttle) -> None:
        with self._lock:
            self._throttles[id(throttle)] = weakref.ref(throttle)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="jaxlab-throttle", daemon=True
                )
                self._thread.start()

    def discard(self, throttle: Throttle) -> None:
        with self._lock:
            ref = self._throttles.get(id(throttle))
            held = ref() if ref is not None else throttle
            if held is throttle or held is None:
                self._throttles.pop(id(throttle), None)

    def _run(self) -> None:
        while True:
            time.sleep(TICK)
            with self._lock:
                # (a copy: a collection in this loop may discard a throttle from the dict)
                for key, ref in self._throttles.copy().items():
                    if ref() is None:
                        self._throttles.pop(key, None)
                if not self._throttles:
                    self._thread = None  # the next add starts another
                    return
                refs = list(self._throttles.values())
            for ref in refs:
                throttle = ref()
                if throttle is None:
                    continue
                try:
                    throttle.tick()
                except Exception:  # one view's failure must not stop the others' pushes
                    _logger.warning("a view's throttled update failed", exc_info=True)
                del throttle


_TICKER = _Ticker()
