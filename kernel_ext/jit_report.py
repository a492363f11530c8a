"""Compile-phase reports (not written yet)."""

from __future__ import annotations

from typing import Any


class CompileReport:
    """Trace, lower, compile and run times with XLA's cost analysis."""


def compile_report(fun: Any, *args: Any, **kwargs: Any) -> CompileReport:
    raise NotImplementedError("compile_report is not written yet")
