"""Implicit device-to-host transfers: the hidden syncs that serialise asynchronous dispatch.

``float(x)``, ``x.item()``, ``if x > 0:``, ``np.asarray(x)`` or ``print(x)`` on a
``jax.Array`` copies it to the host, so Python waits there until every queued
computation that makes ``x`` has finished. In a loop that turns a pipeline into a
stop-and-go::

    with SyncRecorder().recording() as syncs:
        for step in range(100):
            loss = float(train_step(x))    # a sync per step
    syncs.sites()[0].where, syncs.sites()[0].count     # ("In[4], line 3", 100)

The conversions are observed on ``jax.Array``'s concrete class while recording
(``_jax_compat.hook_array_conversions``): ``jax.transfer_guard("log")`` only reports
transfers that copy, and on a CPU the host already holds the data, so it is silent there.
An explicit ``jax.device_get`` is a transfer the user asked for, and is not counted.
On a CPU, NumPy reads an array through the buffer protocol, not ``__array__``, so
``np.asarray(x)`` is not seen there (it is on GPU and TPU).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from jax.profiler import TraceAnnotation

from .._jax_compat import hook_array_conversions
from ..compile.messages import short_type
from ..explain.source import is_user_file, user_line
from .trace import SYNC_PREFIX

MAX_SITES = 100  # distinct lines kept; further ones are counted
MAX_MARKS = 20_000  # syncs remembered for the timeline's marks; further ones are counted

# What each conversion is, in the words a user would recognise.
KINDS = {
    "__float__": "float(x)",
    "__int__": "int(x)",
    "__index__": "index with an array (x used as an int)",
    "__complex__": "complex(x)",
    "__bool__": "bool(x): an `if`, `while`, `and` or `assert` on an array",
    "__array__": "np.asarray(x) (a NumPy conversion)",
    "tolist": "x.tolist()",
    "item": "x.item()",
    "__format__": "formatting x (f-string, print)",
    "__repr__": "repr(x) (print, logging)",
    "__str__": "str(x) (print)",
}
_EXPLICIT = ("device_get",)  # JAX functions whose transfers the user asked for


@dataclass(frozen=True)
class SyncSite:
    """One line of user code that made implicit transfers, with how often and how long."""

    where: str  # "In[4], line 3" or "train.py, line 12"
    filename: str
    lineno: int
    code: str  # the line's text
    kind: str  # KINDS' wording
    array: str  # the array converted (the last one), e.g. "f32[]"
    count: int
    waited: int  # how many of them found the array still being computed
    seconds: float  # total time spent in the conversions (waiting included)


class _Depth(threading.local):
    value = 0


def _user_frame(frame: FrameType | None) -> FrameType | None:
    """The innermost user frame, or None when an explicit transfer (device_get) made it."""
    while frame is not None:
        code = frame.f_code
        if code.co_name in _EXPLICIT and "jax" in code.co_filename.split(os.sep)[-3:-1]:
            return None
        if is_user_file(code.co_filename):
            return frame
        frame = frame.f_back
    return None


class SyncRecorder:
    """Counts implicit transfers per user line while ``recording()`` is active.

    With ``annotate=True`` each conversion also runs inside a
    ``jax.profiler.TraceAnnotation`` named ``jaxlab-sync#<n>``, so a running trace holds
    when it began and how long it waited; ``mark_site(n)`` names its line.
    """

    def __init__(self, annotate: bool = False) -> None:
        self._sites: dict[tuple[str, int, str], list[Any]] = {}
        self.dropped = 0  # transfers at lines beyond MAX_SITES
        self.supported = True  # False when this JAX's arrays could not be observed
        self.annotate = annotate
        self._marks: dict[int, tuple[str, int, str]] = {}  # sync number → its site's key
        self._count = 0  # syncs seen, numbered from 0
        self._depth = _Depth()
        self._lock = threading.Lock()

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        recorder = self

        def hooked(array: Any, *args: Any, **kwargs: Any) -> Any:
            depth = recorder._depth
            if depth.value:  # a conversion inside another (str → __format__): counted once
                return method(array, *args, **kwargs)
            depth.value += 1
            try:
                try:
                    pending = not array.is_ready()
                except Exception:  # a deleted or donated array: the conversion will say so
                    pending = False
                with recorder._lock:
                    number = recorder._count
                    recorder._count += 1
                t0 = time.perf_counter()
                if recorder.annotate:
                    with TraceAnnotation(f"{SYNC_PREFIX}{number}"):
                        result = method(array, *args, **kwargs)
                else:
                    result = method(array, *args, **kwargs)
                elapsed = time.perf_counter() - t0
            finally:
                depth.value -= 1
            recorder._note(name, array, pending, elapsed, sys._getframe(1), number)
            return result

        hooked.__name__ = getattr(method, "__name__", name)
        hooked.__doc__ = getattr(method, "__doc__", None)
        return hooked

    def _note(
        self, name: str, array: Any, pending: bool, elapsed: float, frame: Any, number: int
    ) -> None:
        user = _user_frame(frame)
        if user is None:
            return
        line = user_line(user, user.f_lineno)
        key = (line.filename, line.lineno, name)
        with self._lock:
            entry = self._sites.get(key)
            if entry is None:
                if len(self._sites) >= MAX_SITES:
                    self.dropped += 1
                    return
                entry = self._sites[key] = [line, "", 0, 0, 0.0]
            if self.annotate and len(self._marks) < MAX_MARKS:
                self._marks[number] = key
            entry[1] = short_type(array)
            entry[2] += 1
            entry[3] += int(pending)
            entry[4] += elapsed

    @contextlib.contextmanager
    def recording(self) -> Iterator[SyncRecorder]:
        undo = hook_array_conversions(tuple(KINDS), self._wrap)
        self.supported = undo is not None
        try:
            yield self
        finally:
            if undo is not None:
                undo()

    def mark_site(self, number: int) -> SyncSite | None:
        """The site of the sync numbered ``number`` (from its trace annotation), or None
        for one not kept (an explicit ``device_get``, a line past the caps)."""
        with self._lock:
            key = self._marks.get(number)
            entry = self._sites.get(key) if key is not None else None
        return None if entry is None or key is None else _site(key[2], *entry)

    def sites(self) -> tuple[SyncSite, ...]:
        """The lines that synced, the most frequent first."""
        with self._lock:
            entries = list(self._sites.items())
        sites = [_site(name, *entry) for (_, _, name), entry in entries]
        return tuple(sorted(sites, key=lambda s: (-s.count, -s.seconds, s.lineno)))


def _site(name: str, line: Any, array: str, count: int, waited: int, seconds: float) -> SyncSite:
    return SyncSite(
        line.label,
        line.filename,
        line.lineno,
        line.text,
        KINDS[name],
        array,
        count,
        waited,
        seconds,
    )
