"""What ``%show`` and ``jaxlab.show`` refuse, each naming the part of the value and why.

::

    d = {}; d["self"] = d
    jaxlab.show(d, name="d")
    # UnshowablePytree: d['self'] is d itself: the pytree contains itself (a cycle), ...

The magic turns each into one ``UsageError`` with the same words.
"""

from __future__ import annotations

from typing import Any

MAX_PATH_CHARS = 120  # a path 500 levels deep is named by its two ends


class UnshowablePytree(ValueError):
    """The value cannot be walked as a pytree: ``path`` names the leaf or container (as
    Python indexes it, from the name given), ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{short_path(path)}: {reason}")


class BadSlice(ValueError):
    """``--slice`` / ``slice_at`` does not fit the array it would draw."""


def short_path(path: str) -> str:
    """``path`` for a message: the value's own when empty, both ends when very long."""
    if not path:
        return "the value"
    if len(path) <= MAX_PATH_CHARS:
        return path
    half = MAX_PATH_CHARS // 2
    return f"{path[:half]}…{path[-half:]}"


def error_words(e: BaseException) -> str:
    """``TypeName: message`` of an exception raised by the user's code, even when its own
    ``__str__`` raises too."""
    try:
        text = str(e)
    except Exception:
        text = "(its message could not be read either)"
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def safe_repr(x: Any, limit: int = 40) -> str:
    """``repr(x)`` bounded, or the type's name when ``__repr__`` raises."""
    try:
        text = repr(x)
    except Exception:
        return f"<{type(x).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"
