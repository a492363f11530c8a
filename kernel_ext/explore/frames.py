"""An exploration's state as the page draws it: ``frame()``, plain JSON.

The schema is the contract between the core and the widget (``Explorer``): the controls,
one panel per output leaf (``panels``), the bar of every slider's sensitivity for a
scalar output (signed, and scaled by the slider's range: the change across the whole
range at this slope), the derivative in words, the fit, the last error and the notes::

    Frames(view).frame()["derivative_words"]   # "d period / d g = -0.032 per unit"

It works on the exploration through :class:`Explored` (what it reads), never importing it.
"""

from __future__ import annotations

import math
from typing import Any, Protocol

import numpy as np

from .controls import Control, Layout
from .panels import derivative_words, format_value, number, numbers, panel
from .record import FitState, Sweep


class Explored(Protocol):
    """What a frame is drawn from (``Exploration`` hands itself in)."""

    layout: Layout
    name: str
    x: Any
    seq: int
    moved: str | None
    error: dict[str, Any] | None
    notes: list[str]
    histories: dict[str, Any]
    sweeps: dict[str, Sweep]
    last_sweep: str | None
    fit_state: FitState | None
    _paths: list[str]
    _host: list[np.ndarray]
    _tangents: dict[int, np.ndarray]
    _jacobians: dict[int, np.ndarray]
    _tangent_of: str | None
    program: Any

    @property
    def compiles(self) -> int: ...


def scaled(control: Control, slope: float) -> float:
    """The change across the slider's whole range at this slope (per unit of ``ln x``
    times ``ln(hi/lo)`` for a log slider)."""
    assert control.lo is not None and control.hi is not None
    if control.scale == "log":
        return slope * float(control.value) * math.log(control.hi / control.lo)
    return slope * (control.hi - control.lo)


class Frames:
    def __init__(self, view: Explored) -> None:
        self.view = view

    def _output_name(self, path: str) -> str:
        return f"{self.view.name}{path}"

    def _sweep_for(self, k: int) -> dict[str, Any] | None:
        view = self.view
        if view.last_sweep is None:
            return None
        record = view.sweeps[view.last_sweep]
        import jax

        outs = jax.tree_util.tree_leaves(record.outputs)
        slopes = jax.tree_util.tree_leaves(record.slopes, is_leaf=lambda s: s is None)
        if k >= len(outs) or np.ndim(outs[k]) != 1:
            return None
        slope = slopes[k] if k < len(slopes) else None
        return {
            "param": record.param,
            "xs": numbers(record.values),
            "ys": numbers(outs[k]),
            "slopes": None if slope is None else numbers(slope),
            "current": number(view.layout.control(record.param).value),
        }

    def _bar(self) -> tuple[list[dict[str, Any]] | None, int | None]:
        view = self.view
        scalars = [k for k in sorted(view._jacobians) if view._host[k].ndim == 0]
        if not scalars:
            return None, None
        k = scalars[0]
        jac = view._jacobians[k]
        bar = []
        for i, control in enumerate(view.layout.sliders):
            slope = float(jac[i])
            bar.append(
                {
                    "name": control.name,
                    "value": number(slope),
                    "scaled": number(scaled(control, slope)),
                    "of": self._output_name(view._paths[k]),
                }
            )
        return bar, k

    def frame(self) -> dict[str, Any]:
        view = self.view
        sliders = view.layout.sliders
        step = None
        if view._tangent_of is not None:
            step = view.layout.control(view._tangent_of).step
        panels = []
        for k, (path, host) in enumerate(zip(view._paths, view._host, strict=True)):
            history = view.histories.get(path, ())
            panels.append(
                panel(
                    path,
                    host,
                    view._tangents.get(k),
                    x=view.x,
                    delta=step,
                    history=list(history),
                    sweep=self._sweep_for(k) if host.ndim == 0 else None,
                )
            )
        bar, scalar = self._bar()
        words = None
        if scalar is not None and view._tangent_of is not None and sliders:
            tangent = view._tangents.get(scalar)
            words = derivative_words(
                self._output_name(view._paths[scalar]),
                view._tangent_of,
                None if tangent is None else float(tangent),
            )
        return {
            "function": view.name,
            "seq": view.seq,
            "controls": [c.to_dict() for c in view.layout.controls],
            "moved": view._tangent_of,
            "panels": panels,
            "bar": bar,
            "derivative_words": words,
            "fit": None if view.fit_state is None else view.fit_state.to_dict(),
            "error": view.error,
            "notes": self.notes(),
            "compiles": view.compiles,
        }

    def notes(self) -> list[str]:
        view = self.view
        notes = []
        for c in view.layout.controls:
            if c.kind == "fixed":
                notes.append(f"held fixed: {c.name} ({c.described})")
            elif c.kind == "static":
                notes.append(
                    f"static: {c.name} ({type(c.value).__name__}) - changing it compiles again"
                )
            elif c.kind == "bool":
                notes.append(f"checkbox: {c.name} - static, each setting compiles once")
        for k, host in enumerate(view._host):
            if host.ndim == 0 and not np.issubdtype(host.dtype, np.floating):
                what = "boolean" if host.dtype == bool else "integer"
                notes.append(
                    f"no derivative for {self._output_name(view._paths[k]) or 'the output'}: "
                    f"{what} output"
                )
        notes += sorted(view.program.notes)
        return notes + list(view.notes[-5:])


__all__ = ["Frames", "format_value", "scaled"]
