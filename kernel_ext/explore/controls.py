"""The controls of an exploration: what each argument of the user's function becomes.

A float scalar is a slider (a range given as ``(lo, hi)`` or ``(lo, hi, "log")``, else
one chosen around its value, said so); a bool a checkbox; an int or a string is static
(changing it compiles again); a non-scalar array is held fixed and named; with
``leaves=True`` the float scalar leaves of a pytree argument are sliders named by their
paths (``params['k']``). Arguments left out take the function's defaults, and a float
default is a slider too::

    layout = lay_out(sim, (), {"theta0": 0.3, "g": (1.0, 20.0)}, leaves=False)
    [c.name for c in layout.controls]   # ['theta0', 'g', 'length']

Nothing here traces: :class:`Layout` puts the call back together from the sliders'
values (traced inside the compiled call), the fixed arrays and the statics.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..program.leaves import is_array

STEPS = 1000  # a slider's step: its range over this many
_AROUND = 4.0  # a range chosen around a value v > 0: v / 4 .. v * 4


class ExploreError(ValueError):
    """What the user asked cannot be explored; the message says why and the fix."""


@dataclass
class Control:
    """One control: a slider (``float``), a checkbox (``bool``), a ``static`` value whose
    change compiles again, or an argument held ``fixed`` (named, not changed)."""

    name: str  # "g", or a leaf's path "params['k']"
    kind: str  # "float" | "bool" | "static" | "fixed"
    value: Any
    lo: float | None = None
    hi: float | None = None
    scale: str = "linear"  # "linear" | "log"
    range_note: str = ""
    flag: str | None = None  # "NaN here: ..." when the last move there failed
    path: str = ""  # the argument and the leaf's path, as Python indexes it
    described: str = ""  # a fixed argument's type: "f32[100]"

    @property
    def step(self) -> float | None:
        if self.lo is None or self.hi is None:
            return None
        if self.scale == "log":
            return (math.log10(self.hi) - math.log10(self.lo)) / STEPS
        return (self.hi - self.lo) / STEPS

    def to_dict(self) -> dict[str, Any]:
        value = self.value if self.kind in ("float", "bool", "static") else self.described
        if isinstance(value, (np.generic, np.ndarray)):
            value = value.item()
        return {
            "name": self.name,
            "kind": self.kind,
            "value": value if isinstance(value, (bool, int, float, str)) else str(value),
            "lo": self.lo,
            "hi": self.hi,
            "scale": self.scale,
            "step": self.step,
            "range_note": self.range_note,
            "flag": self.flag,
            "path": self.path,
        }


@dataclass(frozen=True)
class Slot:
    """Where one leaf of an argument comes from when the call is put together."""

    source: str  # "slider" (index into the float vector), "array" (fixed), "static", "const"
    index: int = 0
    name: str = ""  # a static's control name
    value: Any = None  # a constant leaf (a function, None): closed over


@dataclass
class Argument:
    name: str
    kind: Any  # inspect.Parameter kind
    treedef: Any
    slots: list[Slot]


@dataclass
class Layout:
    """The controls, and how the user's call is put back together from them."""

    fn: Callable[..., Any]
    signature: inspect.Signature | None
    arguments: list[Argument]
    controls: list[Control]
    fixed_arrays: list[Any] = field(default_factory=list)
    positional: bool = False  # the function takes *args: pass the ones before it by position

    @property
    def sliders(self) -> list[Control]:
        return [c for c in self.controls if c.kind == "float"]

    @property
    def statics(self) -> list[Control]:
        return [c for c in self.controls if c.kind in ("bool", "static")]

    def control(self, name: str) -> Control:
        for c in self.controls:
            if c.name == name:
                return c
        names = ", ".join(c.name for c in self.controls if c.kind != "fixed") or "none"
        raise ExploreError(f"no control named `{name}`: the controls are {names}")

    def static_key(self) -> tuple[Any, ...]:
        return tuple(c.value for c in self.statics)

    def call(self, floats: Any, arrays: Sequence[Any], statics: Sequence[Any]) -> Any:
        """The user's function applied to the sliders' values (``floats[i]``), the fixed
        arrays and the statics (in :attr:`statics` order)."""
        import jax

        static_values = {c.name: v for c, v in zip(self.statics, statics, strict=True)}
        args: list[Any] = []
        kwargs: dict[str, Any] = {}
        for arg in self.arguments:
            leaves = []
            for slot in arg.slots:
                if slot.source == "slider":
                    leaves.append(floats[slot.index])
                elif slot.source == "array":
                    leaves.append(arrays[slot.index])
                elif slot.source == "static":
                    leaves.append(static_values[slot.name])
                else:
                    leaves.append(slot.value)
            value = jax.tree_util.tree_unflatten(arg.treedef, leaves)
            if arg.kind == inspect.Parameter.VAR_POSITIONAL:
                args.extend(value)
            elif arg.kind == inspect.Parameter.POSITIONAL_ONLY or (
                self.positional and arg.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD
            ):
                args.append(value)
            else:
                kwargs[arg.name] = value
        return self.fn(*args, **kwargs)


# --------------------------------------------------------------------------- classifying


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)


def _float_scalar(v: Any) -> bool:
    """A Python float or a 0-d floating array: a slider."""
    if isinstance(v, float):
        return True
    if is_array(v) or isinstance(v, np.generic):
        import jax

        # its own dtype (a PRNG key array has no NumPy one): JAX's test takes both kinds
        dtype = v.dtype if hasattr(v, "dtype") else np.asarray(v).dtype
        return np.ndim(v) == 0 and jax.dtypes.issubdtype(dtype, np.floating)
    return False


def _range_spec(value: Any, default: Any) -> bool:
    """Whether ``value`` is a slider's range: ``(lo, hi)`` of numbers (one of them a float,
    or the parameter's default a float) or ``(lo, hi, "log"|"linear")``."""
    if not isinstance(value, tuple) or len(value) not in (2, 3):
        return False
    if not (_is_number(value[0]) and _is_number(value[1])):
        return False
    if len(value) == 3:
        return isinstance(value[2], str)
    return any(isinstance(v, (float, np.floating)) for v in value) or isinstance(default, float)


def checked_range(name: str, spec: tuple[Any, ...]) -> tuple[float, float, str]:
    lo, hi = float(spec[0]), float(spec[1])
    scale = spec[2] if len(spec) == 3 else "linear"
    if scale not in ("linear", "log"):
        raise ExploreError(
            f"`{name}={spec!r}`: the third item of a range is 'log' or 'linear', not {scale!r}"
        )
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise ExploreError(
            f"`{name}={spec!r}` is not a range: write (lo, hi) with finite lo < hi, "
            f"e.g. {name}=(1.0, 20.0)"
        )
    if scale == "log" and lo <= 0:
        raise ExploreError(
            f"`{name}={spec!r}`: a log range needs lo > 0, e.g. {name}=(0.01, 10.0, 'log')"
        )
    return lo, hi, scale


def range_around(value: float) -> tuple[float, float, str]:
    """A slider's range when none is given: ``v/4 .. v*4`` (``4v .. v/4`` below zero,
    ``-1 .. 1`` at zero), and the words saying so."""
    v = float(value)
    if v > 0:
        lo, hi = v / _AROUND, v * _AROUND
    elif v < 0:
        lo, hi = v * _AROUND, v / _AROUND
    else:
        lo, hi = -1.0, 1.0
    words = (
        f"range chosen around {v:g} ({lo:g} .. {hi:g}); give (lo, hi) to choose"
        if v
        else "range chosen around 0 (-1 .. 1); give (lo, hi) to choose"
    )
    return lo, hi, words


def _described(v: Any) -> str:
    if is_array(v):
        import jax

        a = np.asarray(v) if not hasattr(v, "dtype") else v
        if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):  # key<fry>[]: no NumPy dtype
            return f"{a.dtype}[{','.join(str(d) for d in np.shape(a))}]"
        dtype = np.dtype(a.dtype)
        short = {"f": "f", "i": "i", "u": "u", "b": "bool", "c": "c"}.get(dtype.kind, dtype.kind)
        bits = "" if dtype.kind == "b" else str(dtype.itemsize * 8)
        return f"{short}{bits}[{','.join(str(d) for d in np.shape(a))}]"
    return type(v).__name__


def _slider(name: str, value: Any, default: Any) -> Control:
    if _range_spec(value, default):
        lo, hi, scale = checked_range(name, value)
        start = default if _is_number(default) and lo <= float(default) <= hi else None
        if start is None:
            start = math.sqrt(lo * hi) if scale == "log" else (lo + hi) / 2
            where = "the middle"
        else:
            where = "the function's default"
        note = (
            f"range given ({lo:g} .. {hi:g}{', log' if scale == 'log' else ''}); starts at {where}"
        )
        return Control(name, "float", float(start), lo, hi, scale, note, path=name)
    lo, hi, note = range_around(float(value))
    return Control(name, "float", float(value), lo, hi, "linear", note, path=name)


def _argument(name: str, kind: Any, value: Any, default: Any, leaves: bool, layout: Layout) -> None:
    import jax

    controls = layout.controls
    floats = len(layout.sliders)
    if _range_spec(value, default) or _float_scalar(value):
        controls.append(_slider(name, value, default))
        treedef = jax.tree_util.tree_structure(0.0)
        layout.arguments.append(Argument(name, kind, treedef, [Slot("slider", floats)]))
        return
    if isinstance(value, bool):
        controls.append(Control(name, "bool", value, path=name, range_note="checkbox (static)"))
        treedef = jax.tree_util.tree_structure(0)
        layout.arguments.append(Argument(name, kind, treedef, [Slot("static", name=name)]))
        return
    if isinstance(value, (int, str, np.integer)):
        controls.append(
            Control(name, "static", value, path=name, range_note="static: a change compiles again")
        )
        treedef = jax.tree_util.tree_structure(0)
        layout.arguments.append(Argument(name, kind, treedef, [Slot("static", name=name)]))
        return
    flat, treedef = jax.tree_util.tree_flatten_with_path(value)
    slots: list[Slot] = []
    arrays = 0
    held: list[Control] = []  # with leaves=True: each array leaf beside the sliders, named
    for path, leaf in flat:
        leaf_name = f"{name}{jax.tree_util.keystr(path)}"
        if leaves and _float_scalar(leaf):
            controls.append(_slider(leaf_name, leaf, None))
            slots.append(Slot("slider", len(layout.sliders) - 1))
        elif is_array(leaf) or (leaves and isinstance(leaf, float)):
            slots.append(Slot("array", len(layout.fixed_arrays)))
            layout.fixed_arrays.append(leaf)
            arrays += 1
            held.append(
                Control(leaf_name, "fixed", None, path=leaf_name, described=_described(leaf))
            )
        else:
            slots.append(Slot("const", value=leaf))
    layout.arguments.append(Argument(name, kind, treedef, slots))
    if leaves and any(s.source == "slider" for s in slots):
        controls.extend(held)
    else:
        described = _described(value) if is_array(value) else f"{type(value).__name__}"
        if not is_array(value) and arrays:
            described += f" of {arrays} array{'s' if arrays > 1 else ''}"
        controls.append(Control(name, "fixed", None, path=name, described=described))


def lay_out(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], leaves: bool
) -> Layout:
    """The controls of ``fn(*args, **kwargs)``; :class:`ExploreError` for what cannot be."""
    if not callable(fn):
        raise ExploreError(
            f"explore takes a function, not a {type(fn).__name__}: e.g. explore(sim, g=9.81)"
        )
    fn_name = getattr(fn, "__name__", type(fn).__name__)
    try:
        signature: inspect.Signature | None = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    layout = Layout(fn, signature, [], [])
    if signature is None:  # no signature to read: keywords only, in order given
        if args:
            raise ExploreError(f"`{fn_name}` has no signature to read: give its arguments by name")
        for name, value in kwargs.items():
            _argument(name, inspect.Parameter.KEYWORD_ONLY, value, None, leaves, layout)
        return layout
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as e:
        params = ", ".join(signature.parameters) or "none"
        unknown = [k for k in kwargs if k not in signature.parameters]
        has_var_kw = any(
            p.kind == inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values()
        )
        if unknown and not has_var_kw:
            raise ExploreError(
                f"`{fn_name}` has no argument `{unknown[0]}`: its arguments are {params}"
            ) from e
        raise ExploreError(f"`{fn_name}{signature}` cannot take these values: {e}") from e
    bound.apply_defaults()
    layout.positional = any(
        p.kind == inspect.Parameter.VAR_POSITIONAL for p in signature.parameters.values()
    )
    for name, param in signature.parameters.items():
        if name not in bound.arguments:
            continue
        value = bound.arguments[name]
        default = None if param.default is inspect.Parameter.empty else param.default
        if param.kind == inspect.Parameter.VAR_KEYWORD:
            for key, item in value.items():
                _argument(key, inspect.Parameter.KEYWORD_ONLY, item, None, leaves, layout)
        else:
            _argument(name, param.kind, value, default, leaves, layout)
    return layout
