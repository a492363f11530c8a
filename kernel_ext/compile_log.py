"""The session's compile log (not written yet)."""

from __future__ import annotations


class CompileEvent:
    """One compilation."""


class CompileLog:
    """Every compilation of the session."""


def compile_log() -> CompileLog:
    raise NotImplementedError("compile_log is not written yet")
