"""One ``jax.profiler`` trace, started and stopped, its events read back as spans.

Where JAX has ``jax.profiler.ProfileSession`` (0.11 and later), the trace is kept in
memory and read from there: nothing is written to disk (writing the ``.xplane.pb`` file
was the largest part of ``%%profile``'s own cost). With JAX 0.10 the trace goes to a
temporary folder, is read from its file and the folder is removed::

    session = TraceSession.start()      # TraceError when no trace can start
    ...                                 # the traced code
    spans = session.stop()              # list[Span]; the folder (if any) is gone
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from typing import Any

import jax

from .trace import Span, read_spans, spans_from_profile


class TraceError(RuntimeError):
    """No trace could start (another is running, no writable temporary folder)."""


def trace_options() -> jax.profiler.ProfileOptions:
    """What the trace captures: host events (calls, JAX's compile steps, XLA ops) and the
    device's, without JAX's Python tracer (an event per Python call, which no view reads)
    or the HLO of each module (not read either)."""
    options = jax.profiler.ProfileOptions()
    options.python_tracer_level = 0
    options.enable_hlo_proto = False
    return options


def _make_folder() -> str:
    try:
        return tempfile.mkdtemp(prefix="jaxlab-profile-")
    except OSError as e:
        raise TraceError(
            f"no folder for the trace could be made in the temporary directory "
            f"{tempfile.gettempdir()!r} ({e.strerror or e}); set TMPDIR to a writable "
            "folder before starting the kernel, or set tempfile.tempdir = '/a/writable/folder'"
        ) from e


class TraceSession:
    """A running trace; ``stop()`` ends it and returns its spans."""

    def __init__(self, session: Any, folder: str) -> None:
        self._session = session  # a jax.profiler.ProfileSession, or None (0.10: a folder)
        self.folder = folder

    @classmethod
    def start(cls, options: jax.profiler.ProfileOptions | None = None) -> TraceSession:
        options = options if options is not None else trace_options()
        in_memory = getattr(jax.profiler, "ProfileSession", None)
        try:
            if in_memory is not None:
                return cls(in_memory(profiler_options=options).start(), "")
            folder = _make_folder()
            try:
                jax.profiler.start_trace(folder, profiler_options=options)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            return cls(None, folder)
        except RuntimeError as e:  # one trace at a time, per process
            if isinstance(e, TraceError):
                raise
            raise TraceError(
                f"jax.profiler could not start a trace ({e}); stop the other trace first "
                "(jax.profiler.stop_trace())"
            ) from e

    def stop(self, read: bool = True) -> list[Span]:
        """End the trace; its spans (none when ``read`` is False, after an error)."""
        try:
            return self._stop(read)
        except RuntimeError as e:  # the traced code stopped it (jax.profiler.stop_trace())
            raise TraceError(
                f"the trace was stopped by the code it traced ({e}); leave "
                "jax.profiler.stop_trace() out of the profiled code"
            ) from e

    def _stop(self, read: bool) -> list[Span]:
        if self._session is not None:
            data = self._session.stop()
            return spans_from_profile(data) if read and data is not None else []
        try:
            jax.profiler.stop_trace()
            if not read:
                return []
            files = glob.glob(os.path.join(self.folder, "**", "*.xplane.pb"), recursive=True)
            return read_spans(files[0]) if files else []
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
