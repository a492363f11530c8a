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
that was there. Unloading puts that hook back and ends the thread::

    undo = install(ip)   # magics/__init__ calls this at %load_ext, undo at %unload_ext
"""

from __future__ import annotations

import _thread
import sys
import threading
from collections.abc import Callable
from typing import Any

MAGICS: tuple[Any, ...] = ()  # a family with no magics: install() only


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

    threading.Thread(target=deliver, name="jaxlab-interrupts", daemon=True).start()
    sys.unraisablehook = hook

    def undo() -> None:
        if sys.unraisablehook is hook:
            sys.unraisablehook = previous
        stopped.append(True)
        if wake.locked():
            wake.release()

    return undo
