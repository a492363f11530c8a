"""The record of a derivative: :class:`GradReport` and its per-leaf :class:`LeafSummary`.

A report holds the value, the derivative per chosen argument, how it was taken (kind,
mode, a sentence of why), fallbacks and warnings, and optionally the finite-difference
check, where a NaN was born and the annotated gradient graph. It is JSON-ready
(:meth:`GradReport.to_dict`) and renders without a kernel (:mod:`jaxlab.autodiff.display`).

>>> r = grad_report(lambda x: jnp.sum(x ** 2), jnp.arange(3.0))  # doctest: +SKIP
>>> [(s.path, s.norm) for s in r.leaves()]                       # doctest: +SKIP
[('x', 4.47...)]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import jax
import numpy as np

from .check import GradCheck
from .nans import NonFinite

__all__ = ["GradReport", "LeafSummary"]


@dataclass(frozen=True)
class LeafSummary:
    """One derivative leaf, small enough to print."""

    path: str  # e.g. "w", "params['b']"; a Jacobian leaf adds the output's path
    shape: tuple[int, ...]
    dtype: str
    norm: float
    min: float
    max: float
    first: tuple[float, ...]  # the first few entries (all of a small leaf), flattened
    finite: bool

    @property
    def whole(self) -> bool:
        """Every entry is in ``first`` (a small leaf, shown whole: a 3×3 Jacobian)."""
        return len(self.first) == math.prod(self.shape)

    @classmethod
    def of(cls, path: str, value: Any, n_first: int = 4) -> LeafSummary:
        arr = np.asarray(value)
        if _small(arr.shape):
            n_first = max(n_first, arr.size)
        flat = arr.reshape(-1)
        real = np.real(flat).astype(np.float64)
        finite = bool(np.all(np.isfinite(flat)))
        with np.errstate(invalid="ignore", over="ignore"):
            return cls(
                path=path,
                shape=tuple(arr.shape),
                dtype=arr.dtype.name,
                norm=float(np.sqrt(np.sum(np.abs(flat.astype(np.complex128)) ** 2)))
                if flat.size
                else 0.0,
                min=float(np.min(real)) if flat.size else math.nan,
                max=float(np.max(real)) if flat.size else math.nan,
                first=tuple(float(v) for v in real[:n_first]),
                finite=finite,
            )


# Leaves shown whole: a vector of up to 8 entries, a matrix of up to 6×6.
SMALL_VECTOR, SMALL_MATRIX = 8, 6


def _small(shape: tuple[int, ...]) -> bool:
    if len(shape) == 1:
        return shape[0] <= SMALL_VECTOR
    return len(shape) == 2 and max(shape) <= SMALL_MATRIX


@dataclass(frozen=True)
class GradReport:
    """Value and derivative of a function, how they were computed, and their check.

    ``grad`` has the structure of the arguments chosen: one argument's structure, or a
    tuple of them when several were chosen (float leaves replaced by their derivative,
    other leaves by None). ``grads`` maps each argument's name to its part.
    """

    fun_name: str
    names: tuple[str, ...]  # the arguments differentiated
    kind: str  # "gradient", "jacobian", "hessian" or "hvp"
    mode: str  # "reverse", "forward", "forward-over-reverse"
    value: Any
    grads: Mapping[str, Any]
    single: bool = True
    aux: Any = None
    why: str = ""  # how the derivative was taken, in a sentence
    notes: tuple[str, ...] = ()  # fallbacks and warnings
    check: GradCheck | None = None
    nonfinite: NonFinite | None = None
    graph: Any = field(default=None, compare=False, repr=False)
    fixed: tuple[str, ...] = ()  # Python floats held fixed beside float arrays ("m.init")

    @property
    def grad(self) -> Any:
        if self.single:
            return self.grads[self.names[0]]
        return tuple(self.grads[n] for n in self.names)

    def leaves(self) -> list[LeafSummary]:
        """Every derivative leaf with its path (``w['b']``), shape and statistics."""
        out: list[LeafSummary] = []
        for name in self.names:
            flat, _ = jax.tree_util.tree_flatten_with_path(self.grads[name])
            for path, leaf in flat:
                out.append(LeafSummary.of(name + jax.tree_util.keystr(path), leaf))
        return out

    def value_summary(self) -> list[LeafSummary]:
        flat, _ = jax.tree_util.tree_flatten_with_path(self.value)
        return [LeafSummary.of("value" + jax.tree_util.keystr(p), v) for p, v in flat]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the summaries of the value and derivative, not the arrays."""
        return {
            "fun": self.fun_name,
            "names": list(self.names),
            "kind": self.kind,
            "mode": self.mode,
            "why": self.why,
            "value": [asdict(s) for s in self.value_summary()],
            "grad": [asdict(s) for s in self.leaves()],
            "notes": list(self.notes),
            "fixed": list(self.fixed),
            "check": self.check.to_dict() if self.check else None,
            "nonfinite": self.nonfinite.to_dict() if self.nonfinite else None,
        }

    def text(self) -> str:
        return _above.text(self)

    def __repr__(self) -> str:
        return self.text()

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return _above.bundle(self)


class Above(NamedTuple):
    """What a :class:`GradReport` takes from the module above it, which imports it:
    ``display``'s text and HTML."""

    text: Callable[[GradReport], str]  # display.report_text
    bundle: Callable[[GradReport], dict[str, str]]  # display.report_bundle


_above: Above  # set by served_by when autodiff/__init__ runs, before any record is made


def served_by(above: Above) -> None:
    """Called once by ``autodiff/__init__`` (which any import of the package runs
    first): the drawings every GradReport uses."""
    global _above
    _above = above
