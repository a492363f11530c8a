"""The records of a chain rule played step by step: :class:`Step` (one equation of the
gradient program, or of ``jax.jvp``'s, with its numbers and the rule in maths) and
:class:`GradSteps` (the walk, its adjoints or tangents, the drawing, the frame a player
widget renders).

At the bottom of ``steps/``: they import nothing of the package.

>>> s = grad_steps(lambda x: jnp.sin(x) * x, 0.5)         # doctest: +SKIP
>>> s.steps[-1].fanout                                     # doctest: +SKIP
'x̄ = 0.4388 + 0.4794 = 0.9182'
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["BACKWARD", "FORWARD", "TANGENT", "GradSteps", "Step", "short"]

FORWARD = "forward"  # a value computed (the primal program and the residuals it keeps)
BACKWARD = "backward"  # a cotangent computed (the transposed program)
TANGENT = "tangent"  # a tangent computed (forward mode, jax.jvp's program)


def short(value: Any) -> str:
    """A number as a step shows it: ``0.4207``, ``f32[3,4] μ 0.12 [-1.1, 0.93]``."""
    if value is None:
        return "?"
    try:
        arr = np.asarray(value)
    except Exception:
        return type(value).__name__
    if arr.dtype == object:
        return type(value).__name__
    if arr.dtype == np.bool_:
        return str(bool(arr)) if arr.size == 1 else f"bool{list(arr.shape)}"
    if not np.issubdtype(arr.dtype, np.number):
        return f"{arr.dtype}{list(arr.shape)}"
    if arr.size == 1:
        x = arr.reshape(-1)[0]
        if np.issubdtype(arr.dtype, np.integer):
            return str(int(x))
        return f"{float(np.real(x)):.4g}"
    kind = {"f": "f", "i": "i", "u": "u", "c": "c"}.get(arr.dtype.kind, "")
    typ = f"{kind}{arr.dtype.itemsize * 8}[{','.join(map(str, arr.shape))}]"
    if arr.size == 0:
        return typ
    real = np.real(arr).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        return f"{typ} μ {np.mean(real):.3g} [{np.min(real):.3g}, {np.max(real):.3g}]"


def passes_note(n_inputs: int, n_outputs: int) -> str:
    """The Jacobian's cost in passes, in the words a lecture uses: one forward pass per
    input number (a column), one reverse pass per output number (a row)."""
    s = "" if n_inputs == 1 else "es"
    t = "" if n_outputs == 1 else "es"
    return (
        f"{n_inputs} input{'s' if n_inputs != 1 else ''} → {n_inputs} forward pass{s}, "
        f"{n_outputs} output{'s' if n_outputs != 1 else ''} → {n_outputs} reverse pass{t}"
    )


@dataclass
class Step:
    """One step: one equation (or one closed box, one loop iteration's equation)."""

    index: int
    kind: str  # FORWARD, BACKWARD or TANGENT
    equation: str  # as the graph labels it: "sin", "x @ w", "adjoints summed"
    rule: str  # the maths with names: "x̄ = ȳ · cos(x)"
    text: str  # the rule with the numbers: "x̄ = 0.5 · 0.8253 = 0.4127"
    node: str  # the drawing's node (its <title>) or box (its element id) this step lights
    box: list[str] = field(default_factory=list)  # enclosing boxes, outermost first
    primitive: str = ""
    values_in: list[Any] = field(default_factory=list)  # values read (not cotangents)
    values_out: list[Any] = field(default_factory=list)  # values made (forward, tangent)
    cotangent_in: list[Any] = field(default_factory=list)  # backward: cotangents arriving
    cotangent_out: list[Any] = field(default_factory=list)  # backward: cotangents leaving
    names_in: list[str] = field(default_factory=list)  # each operand's name, in order
    names_out: list[str] = field(default_factory=list)
    operands: list[Any] = field(default_factory=list)  # every operand's value, in order
    fanout: str | None = None  # "x̄ = 0.27 + 0.13 = 0.40": a second contribution added
    of: str = ""  # backward: the forward equation this transposes ("sin(x)")
    iteration: int | None = None  # inside a scan: the iteration shown
    substeps: list[Step] = field(default_factory=list)  # a closed box's own steps
    source: str = ""  # the user's line ("cell.py:3 (f)")
    top: int = -1  # the top-level equation holding it (its index in the program)

    def frame(self) -> dict[str, Any]:
        """This step as the player reads it: numbers as short strings."""
        return {
            "index": self.index,
            "kind": self.kind,
            "equation": self.equation,
            "rule": self.rule,
            "text": self.text,
            "fanout": self.fanout,
            "node": self.node,
            "box": list(self.box),
            "of": self.of,
            "source": self.source,
            "iteration": self.iteration,
            "values_in": [short(v) for v in self.values_in],
            "values_out": [short(v) for v in self.values_out],
            "cotangent_in": [short(v) for v in self.cotangent_in],
            "cotangent_out": [short(v) for v in self.cotangent_out],
            "substeps": [s.text for s in self.substeps],
        }

    def line(self) -> str:
        """One readable line: ``12 backward  x̄ = 0.5 · 0.8253 = 0.4127``."""
        where = f"  [{' › '.join(self.box)}]" if self.box else ""
        it = f" (iteration {self.iteration})" if self.iteration is not None else ""
        fan = f"   fan-out: {self.fanout}" if self.fanout else ""
        return f"{self.index:>4} {self.kind:<8}  {self.text}{it}{where}{fan}"


def _run_key(step: Step) -> tuple[list[str], str, int | None]:
    return (step.box[:1], step.kind, step.iteration)


@dataclass
class GradSteps:
    """A chain rule walk: ``steps`` in JAX's order, and what it ends with."""

    function: str
    mode: str  # "reverse" or "forward"
    steps: list[Step]
    adjoints: dict[str, Any] = field(default_factory=dict)  # reverse: ∂f/∂arg by name
    tangents: dict[str, Any] = field(default_factory=dict)  # forward: the outputs' tangents
    passes_note: str = ""
    notes: list[str] = field(default_factory=list)
    svg: str = ""  # the program's drawing; each step's node findable in it
    targets: dict[str, int] = field(default_factory=dict)  # "∂f/∂w" -> step producing it
    n_equations: int = 0  # equations of the program stepped (nested ones included)
    graph: Any = field(default=None, repr=False, compare=False)  # the Graph drawn
    # scans past the iterations stepped one by one: {"name", "length", "shown"}
    loops: list[dict[str, Any]] = field(default_factory=list)
    # the same walk at another iteration of its long scans (None: nothing to choose)
    again: Callable[[int | None], GradSteps] | None = field(default=None, repr=False, compare=False)

    @property
    def boxes(self) -> list[tuple[str, int, int]]:
        """The boxes a player closes into one step each: (name, first step, last step) of
        every run of two or more consecutive steps of one pass inside one outermost box
        (``jit inner``, ``scope block``, ``cond branch 1``, a scan body's iteration)."""
        found: list[tuple[str, int, int]] = []
        k = 0
        while k < len(self.steps):
            first = self.steps[k]
            end = k + 1
            key = _run_key(first)
            if first.box:
                while end < len(self.steps) and _run_key(self.steps[end]) == key:
                    end += 1
            if end - k >= 2:
                it = f", iteration {first.iteration}" if first.iteration is not None else ""
                found.append((first.box[0] + it, k, end - 1))
            k = end
        return found

    def played(self) -> tuple[list[Step], list[tuple[str, int, int]], list[int], list[int]]:
        """What the player plays: ``steps``, where a program too large to step equation
        by equation has its boxes (``primitive == "box"``) opened into their equations,
        each box a run the player shows closed; with the boxes, and where each of
        ``steps`` begins and ends among the steps played."""
        if not any(s.primitive == "box" and s.substeps for s in self.steps):
            at = list(range(len(self.steps)))
            return self.steps, self.boxes, at, at
        played: list[Step] = []
        boxes: list[tuple[str, int, int]] = []
        starts: list[int] = []
        ends: list[int] = []
        for step in self.steps:
            inner = step.substeps if step.primitive == "box" and step.substeps else [step]
            starts.append(len(played))
            played.extend(inner)
            ends.append(len(played) - 1)
            if len(inner) >= 2:
                boxes.append((step.equation, starts[-1], ends[-1]))
        return played, boxes, starts, ends

    def frame(self, current: int = 0) -> dict[str, Any]:
        """Everything the player needs, JSON-able (see notes/steps_contract.md). Its step
        numbers count the steps played (``played()``): ``current`` (a step of ``steps``)
        and the targets are said in them."""
        played, boxes, starts, ends = self.played()
        frames = [dict(s.frame(), index=i) for i, s in enumerate(played)]
        at = starts[current] if 0 <= current < len(starts) else 0
        return {
            "function": self.function,
            "mode": self.mode,
            "svg": self.svg,
            "steps": frames,
            "boxes": [{"name": n, "first": a, "last": b} for n, a, b in boxes],
            "loops": [dict(loop) for loop in self.loops],
            "targets": {k: ends[v] for k, v in self.targets.items() if 0 <= v < len(ends)},
            "current": int(at),
            "passes_note": self.passes_note,
            "notes": list(self.notes),
        }

    def text(self) -> str:
        """The whole walk as text (a saved notebook reads it without a kernel)."""
        head = f"{self.mode} mode of {self.function}: {len(self.steps)} steps"
        lines = [head, self.passes_note] + [f"  note: {n}" for n in self.notes]
        lines += [s.line() for s in self.steps]
        ends = self.adjoints if self.mode == "reverse" else self.tangents
        lines += [f"{name} = {short(v)}" for name, v in ends.items()]
        return "\n".join(line for line in lines if line)

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return f"<GradSteps {self.mode} mode of {self.function}: {len(self.steps)} steps>"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        """Without the player: the drawing and the whole walk as text."""
        body = f"<pre style='font-size:14px'>{html.escape(self.text())}</pre>"
        return {"text/plain": self.text(), "text/html": f"<div>{self.svg}{body}</div>"}

    def __len__(self) -> int:
        return len(self.steps)

    def step(self, target: str) -> Step:
        """The step a target names (``"∂f/∂w"``)."""
        return self.steps[self.targets[target]]
