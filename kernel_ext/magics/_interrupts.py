"""Interrupts always win: a ``KeyboardInterrupt`` Python would drop is raised again.

Python runs the handler of an interrupt at the next instruction of the main thread. When
that instruction is inside a garbage-collector callback or a finalizer (JAX registers a
collector callback, ``_xla_gc_callback``, run twice per collection), the
``KeyboardInterrupt`` it raises cannot leave the callback: Python reports it as
"Exception ignored in ..." and drops it, and the loop the user meant to stop runs on. A
tracked ``while True: jax.random.normal(k)`` collects many times a second, so about one
interrupt in a hundred was lost (issue 32; one in ten with the old per-change timers).

While the extension is loaded, ``sys.unraisablehook`` is chained: a dropped
``KeyboardInterrupt`` wakes a small thread that delivers it again with
``_thread.interrupt_main()``, raised at the main thread's next instruction outside the
callback (or dropped and delivered again if that is another callback). The hook itself
only releases a lock: an interrupt delivered from inside it would be handled, and
dropped, inside it. It prints nothing about the interrupt; anything else goes to the hook
that was there.

An interrupt can also land where JAX 0.12 leaves its own state broken: between the two
lines of ``Primitive.bind`` that empty its trace context and enter the ``try`` that puts
it back. Every later JAX call of the session would then fail (``'NoneType' object has no
attribute 'process_primitive'``), so when a cell ends with JAX's trace context empty it
is put back at the top level, and the user is told once in that cell's output.

Unloading puts the hook back, ends the thread and stops the mending::

    undo = install(ip)   # magics/__init__ calls this at %load_ext, undo at %unload_ext
"""

from __future__ import annotations

import _thread
import contextlib
import sys
import threading
from collections.abc import Callable
from typing import Any

from .._jax_compat import mend_trace_state

MAGICS: tuple[Any, ...] = ()  # a family with no magics: install() only
MENDED = (
    "jaxlab: the interrupt landed inside JAX's Primitive.bind and left JAX's trace state "
    "empty (every later JAX call would fail); it has been put back at the top level."
)


def install(ip: Any) -> Callable[[], None]:
    """Chain ``sys.unraisablehook``; the undo puts the previous hook back (if still ours)."""
    previous = sys.unraisablehook
    main = _thread.get_ident()  # extensions load on the main thread
    wake = _thread.allocate_lock()
    wake.acquire()
    stopped: list[bool] = []

    def deliver() -> None:
        while True:
            wake.acquire()
            if stopped:
                return
            _thread.interrupt_main()

    def hook(unraisable: Any) -> None:
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and _thread.get_ident() == main:
            if wake.locked():
                wake.release()  # nothing else here: see the module's docstring
            return
        previous(unraisable)

    def mend(result: Any = None) -> None:
        if mend_trace_state():
            print(MENDED, file=sys.stderr)

    threading.Thread(target=deliver, name="jaxlab-interrupts", daemon=True).start()
    sys.unraisablehook = hook
    ip.events.register("post_run_cell", mend)

    def undo() -> None:
        with contextlib.suppress(ValueError):  # (unregistered already)
            ip.events.unregister("post_run_cell", mend)
        if sys.unraisablehook is hook:
            sys.unraisablehook = previous
        stopped.append(True)
        if wake.locked():
            wake.release()

    return undo
