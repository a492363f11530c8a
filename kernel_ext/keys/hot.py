"""The compiled hot path of eager key tracking (``_hot.c``), where it was built.

An eager loop's every call goes through two wrappers and one unpacking watch; in Python
they cost most of what tracking adds to such a loop. ``_hot.c`` does their common case (a
key unpacked from a noted split) in C, with the same checks and the same notes as the
Python wrapper (``track._wrap``) and ``KeyRecorder.note_kid`` / ``unpacked``, and hands
every other case to them. The Python path stays the reference: it runs where the
extension was not built (no compiler at install), and ``JAXLAB_KEYS_PYTHON=1`` (read when
tracking is switched on) asks for it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from . import events
from .events import KeyRecorder

try:
    from . import _hot  # type: ignore[attr-defined]
except ImportError:  # not built: the Python wrappers do it all
    _hot = None

PYTHON_ONLY = "JAXLAB_KEYS_PYTHON"


def compiled() -> bool:
    """Whether the compiled hot path is built and not switched off (``JAXLAB_KEYS_PYTHON``)."""
    return _hot is not None and os.environ.get(PYTHON_ONLY, "") in ("", "0")


def configure(recorder: KeyRecorder, **objects: Any) -> None:
    """Hand the session's objects to the compiled path (see ``_hot.c``'s ``configure``),
    with the bounds as the Python path reads them now (a test may set them)."""
    if compiled():
        _hot.configure(
            recorder=recorder, kids=recorder.kids, drop_dead=recorder.drop_dead_kids,
            noted_limit=events._NOTED_LIMIT, eager_keys=events.EAGER_KEYS,
            unread_splits=events.UNREAD_SPLITS, max_kids=events.MAX_KIDS, **objects,
        )  # fmt: skip


def hook(
    name: str, original: Callable[..., Any], slow: Callable[..., Any], note: Any, split: bool
) -> Callable[..., Any]:
    """``slow`` (the Python wrapper) with its common case compiled, where built: a
    callable with ``slow``'s attributes (``functools.wraps``'s, ``__jaxlab_original__``),
    bound as a method where ``slow`` would be. ``note``, the lineage's ``note_kid`` as the
    wrappers found it: the compiled one stands for it unless it was replaced (a test
    counting notes), then it is asked."""
    if not compiled():
        return slow
    own = getattr(note, "__func__", None) is KeyRecorder.note_kid
    made = _hot.Hook(name, original, slow, None if own else note, split)
    made.__dict__.update(slow.__dict__)
    for attr in ("__module__", "__name__", "__qualname__", "__doc__"):
        made.__dict__[attr] = getattr(slow, attr)
    return made


def watch(recorder: KeyRecorder) -> Callable[[Any], Any] | None:
    """What makes the key array class's ``__iter__`` from JAX's own while tracking: the
    compiled watch (JAX's ``__iter__``, then ``KeyRecorder.unpacked``'s common case in C,
    bound as a method, as a function is); None for the Python one (not built, or the
    lineage's ``unpacked`` replaced)."""
    own = getattr(recorder.unpacked, "__func__", None) is KeyRecorder.unpacked
    return _hot.Watch if own and compiled() else None
