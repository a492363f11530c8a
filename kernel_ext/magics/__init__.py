"""The extension's life: register every magic family and hook, and remove them again.

Each family module under ``jaxlab.magics`` provides

* ``MAGICS``: a tuple of ``IPython.core.magic.Magics`` subclasses, and optionally
* ``install(ip) -> Callable[[], None]``: adds a kernel hook (event callback, exception
  handler, monitoring listener, logging handler) and returns the function that removes
  exactly what it added.

``load`` is idempotent: loading twice registers once. ``unload`` removes every magic
name those classes registered and runs every undo in reverse order.
"""

from __future__ import annotations

import importlib
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FAMILIES = (
    "_interrupts",  # first: its cell-end mending runs before the others' cell-end hooks
    "jaxpr",
    "devices",
    "grad",
    "jit",
    "compile_log",
    "errors",
    "timing",
    "keys",
    "arrays",
    "explore",
    "_cell_widgets",
)


@dataclass
class _Loaded:
    magics: list[Any] = field(default_factory=list)  # registered Magics instances
    undo: list[Callable[[], None]] = field(default_factory=list)


_loaded: weakref.WeakKeyDictionary[Any, _Loaded] = weakref.WeakKeyDictionary()


def is_loaded(ip: Any) -> bool:
    return ip in _loaded


def load(ip: Any) -> None:
    if ip in _loaded:
        return
    state = _Loaded()
    _loaded[ip] = state
    try:
        for name in FAMILIES:
            module = importlib.import_module(f"{__name__}.{name}")
            for cls in getattr(module, "MAGICS", ()):
                instance = cls(shell=ip)
                ip.register_magics(instance)
                state.magics.append(instance)
            install = getattr(module, "install", None)
            if install is not None:
                undo = install(ip)
                if undo is not None:
                    state.undo.append(undo)
    except BaseException:
        unload(ip)
        raise


def unload(ip: Any) -> None:
    state = _loaded.pop(ip, None)
    if state is None:
        return
    manager = ip.magics_manager
    for instance in state.magics:
        for kind, table in manager.magics.items():
            for name in list(instance.magics.get(kind, {})):
                if getattr(table.get(name), "__self__", None) is instance:
                    del table[name]
        manager.registry.pop(type(instance).__name__, None)
    for undo in reversed(state.undo):
        undo()
