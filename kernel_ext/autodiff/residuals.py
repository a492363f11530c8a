"""Which forward value each residual of a linearized program is, and which primal node made it.

``jax.linearize(f, *x)`` returns a linear function that keeps the forward values its
tangent equations need: the *residuals*, the constants of its program. To link each one
to the primal program, the linearization is traced as a program of its own,
``make_jaxpr(lambda *x: jax.linearize(f, *x))``, whose outputs are the primal results
followed by the residuals (the linear function is a ``jax.tree_util.Partial`` whose leaves
they are). jaxlab's interpreter runs that forward program and the primal one with one
signature table: a residual whose signature (same primitives and parameters from the same
inputs) is a primal value's was computed by that primal node, exactly; one with no such
signature was computed for the derivative only (``cos(x)`` for ``sin``). The linear
function is rebuilt from the interpreter's residual values, so the program drawn holds
those very arrays (matched by identity, never by a guess).

When the linearization cannot be traced that way (a JAX whose linear function is not a
``Partial``), each residual is matched by value instead: an array identical in shape,
dtype and values to exactly one primal value. Only then: an identical value can be a
coincidence (``sin(x)`` kept inside a scan for the derivative of ``cos`` equals a primal
``sin(x)`` computed elsewhere), which the traced forward program tells apart.

>>> f, x = lambda x: jnp.sin(x) * x, jnp.float32(1.0)                      # doctest: +SKIP
>>> lin = traced_linearize(f, [x])                                          # doctest: +SKIP
>>> linear = jax.make_jaxpr(lin.fun)(jnp.float32(0.0))                      # doctest: +SKIP
>>> [r.text() for r in find_residuals(jax.make_jaxpr(f)(x), [x], linear, lin, ["x"])]
['r1 = cos(x) f32[] ...: computed for the derivative, not by the primal program',
 'r2 = x f32[] ...: the primal's input x', 'r3 = sin(x) f32[] ...: computed by the
 primal's sin']                                                             # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..graph.interpret import Evaluation, Policy, evaluate, new_interner
from ..graph.labels import literal_text, type_text

COMPUTATION = "computation"  # same primitives and parameters from the same inputs
VALUE = "value"  # an identical array, and only one primal value is
_LOOPS = frozenset({"scan", "while"})
_SHORT = 24  # characters of an expression in a node's title
_MAX_COMPARED = 1_000_000  # elements: larger arrays are not compared by value
# Both runs bind a cond whole: the forward program's cond carries residual outputs, and
# only whole equations are keyed alike in the two programs (see graph/interpret.py).
_POLICY = Policy(custom=True, cond=False)


@dataclass(frozen=True)
class Residual:
    """One constant of the linearized program: a forward value its tangents need."""

    number: int  # r1, r2, ... in the order of the linearized program's constants
    type: str  # "f32[5,4]"
    expression: str = ""  # how the forward pass computed it: "cos(x)"; "" unknown
    short: str = ""  # the same, shorter, for its node: "tanh(add(…))"
    producer: str | None = None  # the primal node that computed it (graph model ids)
    producer_label: str = ""  # what that node is: "sin", "input x", "argument y"
    kept_input: bool = False  # the producer is an input or constant, kept as it is
    matched_by: str = ""  # COMPUTATION or VALUE; "" with no producer
    in_loop: str = ""  # "scan": stacked from inside a loop the primal runs whole
    printed: str = ""  # its variable in the linearized program's printout ("a")
    constant: bool = False  # from literals and unnamed constants alone (the 2.0 of 2 * x)

    @property
    def name(self) -> str:
        return f"r{self.number}"

    @property
    def label(self) -> str:
        """The node label in the linearized program: ``r2 = cos(x)``."""
        return f"{self.name} = {self.short}" if self.short else self.name

    def origin(self) -> str:
        """Where the value comes from, in words."""
        if self.producer is not None:
            same = " (an identical value)" if self.matched_by == VALUE else ""
            verb = "" if self.kept_input else "computed by "
            return f"{verb}the primal's {self.producer_label}{same}"
        if self.constant:
            return "a constant of the program, not computed from the inputs"
        if self.in_loop:
            return (
                f"one per iteration, from inside the {self.in_loop} (not matched: its "
                "insides run many times and are not looked into)"
            )
        return "computed for the derivative, not by the primal program"

    def text(self) -> str:
        printed = f" ({self.printed} in the printout)" if self.printed else ""
        return f"{self.label} {self.type}{printed}: {self.origin()}"


@dataclass(frozen=True)
class Linearization:
    """The linear function, and when traced, the forward program that made its residuals."""

    fun: Callable[..., Any]  # tangents -> output tangent
    forward: Any = None  # ClosedJaxpr: primal inputs -> (primal outputs, residuals)
    run: Evaluation | None = None  # the forward program evaluated at the primal point
    n_out: int = 0  # primal output leaves before the residuals
    residuals: tuple[Any, ...] = ()  # the arrays the linear function holds
    table: Any = None  # the signature table of ``run``, shared with the primal's run


def traced_linearize(function: Callable[..., Any], diff: Sequence[Any]) -> Linearization:
    """``jax.linearize(function, *diff)`` with the forward program that computed its
    residuals (see the module docstring); ``forward`` is None when it cannot be traced."""
    flat = jax.tree_util.tree_leaves(diff)
    try:
        forward, shape = jax.make_jaxpr(lambda *d: jax.linearize(function, *d), return_shape=True)(
            *diff
        )
        treedef = jax.tree_util.tree_structure(shape)
        n_out = len(jax.tree_util.tree_leaves(shape[0]))
        table = new_interner()
        run = evaluate(forward, flat, policy=_POLICY, interner=table)
        # Arrays, never Python scalars: make_jaxpr would fold a scalar into a literal.
        values = [jnp.asarray(run.values[s]) for s in run.outputs]
        _, fun = jax.tree_util.tree_unflatten(treedef, values)
        if not isinstance(fun, jax.tree_util.Partial):
            raise TypeError(f"jax.linearize returned a {type(fun).__name__}, not a Partial")
    except Exception:  # a JAX that builds it otherwise: residuals are matched by value
        _, fun = jax.linearize(function, *diff)
        return Linearization(fun)
    return Linearization(fun, forward, run, n_out, tuple(values[n_out:]), table)


def printed_names(first_line: str, n: int) -> list[str]:
    """The printed names of a program's ``n`` constants from its printout's first line,
    ``{ lambda a:f32[] b:f32[]; c:f32[]. let``; empty when it reads otherwise."""
    head = first_line.partition("lambda")[2].partition(";")
    names = [word.split(":", 1)[0] for word in head[0].split()]
    return names if head[1] and len(names) == n else []


def const_names(consts: Sequence[Any], named_leaves: Sequence[tuple[str, Any]]) -> list[str]:
    """The argument each captured constant is (``x``, ``batch['y']``), or "": the same
    object, else the one argument leaf with identical type and values."""
    names = []
    for c in consts:
        same = [name for name, leaf in named_leaves if leaf is c]
        if not same:
            same = [name for name, leaf in named_leaves if _identical(leaf, c)]
        names.append(same[0] if len(same) == 1 else "")
    return names


def _identical(a: Any, b: Any) -> bool:
    if not (hasattr(a, "dtype") and hasattr(b, "dtype")) or np.shape(a) != np.shape(b):
        return False
    if np.dtype(a.dtype) != np.dtype(b.dtype) or np.size(a) > _MAX_COMPARED:
        return False
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def find_residuals(
    primal: Any,
    flat_args: Sequence[Any],
    linear: Any,
    lin: Linearization,
    input_names: Sequence[str],
    primal_consts: Sequence[str] = (),
    printout: str = "",
) -> tuple[Residual, ...]:
    """Each constant of ``linear`` (the ClosedJaxpr of ``lin.fun``) as a Residual, linked
    to the node of ``primal`` that computed it (see the module docstring)."""
    fwd = lin.run
    try:
        base = evaluate(primal, flat_args, policy=_POLICY, interner=lin.table or new_interner())
    except Exception:  # an equation the interpreter cannot run: numbered, not linked
        return tuple(
            Residual(k + 1, type_text(v.aval)) for k, v in enumerate(linear.jaxpr.constvars)
        )
    by_signature: dict[int, int] = {}
    for made_at, sig in enumerate(base.signatures):
        if made_at not in base.literals:
            by_signature.setdefault(sig, made_at)  # the first primal value that is it
    names = _Names(base, input_names, primal_consts)
    fwd_names = _Names(fwd, input_names, _fwd_const_names(lin, primal, primal_consts))
    printed = printed_names(printout.partition("\n")[0], len(linear.consts))
    # The forward slot of each constant (the same array object), and its name rK, so
    # that one residual computed from another reads r2 = one_minus_square(r4).
    slots: list[int | None] = []
    for const in linear.consts:
        at = next((i for i, r in enumerate(lin.residuals) if r is const), None)
        slots.append(None if fwd is None or at is None else fwd.outputs[lin.n_out + at])
    for k, slot in enumerate(slots):
        if slot is not None and slot not in fwd_names.names:
            fwd_names.names[slot] = f"r{k + 1}"
    found = []
    for k, (const, var) in enumerate(zip(linear.consts, linear.jaxpr.constvars, strict=True)):
        slot = slots[k]
        fields: dict[str, Any] = {}
        if fwd is not None and slot is not None:
            fields["expression"] = fwd_names.expression(slot)
            fields["short"] = fwd_names.expression(slot, most=_SHORT)
            step = fwd.producer[slot]
            if step is not None and fwd.steps[step].eqn.primitive.name in _LOOPS:
                fields["in_loop"] = fwd.steps[step].eqn.primitive.name
            made = by_signature.get(fwd.signatures[slot])
            if made is not None:
                fields.update(_producer(names, made, COMPUTATION))
            elif _constant(fwd, slot, fwd_names):
                fields["constant"] = True
        if slot is None:  # not traced: an identical value is the best evidence left
            made = _only_equal(base, const)
            if made is not None:
                fields.update(_producer(names, made, VALUE))
        found.append(
            Residual(k + 1, type_text(var.aval), printed=printed[k] if printed else "", **fields)
        )
    return tuple(found)


def _constant(run: Evaluation, slot: int, names: _Names) -> bool:
    """Whether ``slot`` comes from literals and unnamed constants alone: no input and no
    argument reaches it (the ``2.0`` the tangent of ``2 * x`` is multiplied by)."""
    inputs = set(run.inputs)
    linked: dict[int, list[int]] = {}
    for source, target in run.links:
        linked.setdefault(target, []).append(source)
    seen: set[int] = set()
    todo = [slot]
    while todo:
        s = todo.pop()
        if s in seen or s in run.literals:
            continue
        seen.add(s)
        step = run.producer[s]
        if step is None:
            if s in inputs or s in linked or names.kinds.get(s) != "constant ":
                return False  # an input, a loop parameter or an argument held fixed
            continue
        todo += [i for i in run.steps[step].inputs if i is not None]
    return True


def _producer(names: _Names, slot: int, how: str) -> dict[str, Any]:
    node, label = names.node(slot)
    kept = names.run is not None and names.run.producer[slot] is None
    return {"producer": node, "producer_label": label, "matched_by": how, "kept_input": kept}


def _only_equal(run: Evaluation, const: Any) -> int | None:
    """The slot of the one primal value identical to ``const`` (None: none, or several)."""
    seen: dict[str, int] = {}
    for slot, value in enumerate(run.values):
        if slot not in run.literals and value is not None and _identical(value, const):
            seen.setdefault(_Names.node_id(run, slot), slot)
    return next(iter(seen.values())) if len(seen) == 1 else None


def _fwd_const_names(lin: Linearization, primal: Any, primal_consts: Sequence[str]) -> list[str]:
    """The forward program captures the primal's constants: the same arrays, same names."""
    if lin.forward is None:
        return []
    pairs = list(zip(primal_consts, primal.consts, strict=False))
    return const_names(lin.forward.consts, [(n, c) for n, c in pairs if n])


class _Names:
    """What a reader calls each value of one run: inputs and constants by name, the
    others by the equation that made them."""

    def __init__(self, run: Evaluation | None, inputs: Sequence[str], consts: Sequence[str]):
        self.run = run
        self.names: dict[int, str] = {}
        if run is None:
            return
        self.kinds: dict[int, str] = {}  # inputs and constants: "input", "argument"
        for k, slot in enumerate(run.inputs):
            self.names[slot] = inputs[k] if k < len(inputs) else f"in{k}"
            self.kinds[slot] = "input "
        for key, slot in run.node_slots.items():
            if key.startswith("c") and key[1:].isdigit():  # a top-level constant
                k = int(key[1:])
                named = k < len(consts) and bool(consts[k])
                self.names.setdefault(slot, consts[k] if named else self._const(k, slot))
                self.kinds.setdefault(slot, "argument " if named else "constant ")

    def _const(self, k: int, slot: int) -> str:
        """A constant no argument is: its value when it is one number (``0.797885``)."""
        value = self.run.values[slot] if self.run is not None else None
        if value is not None and np.size(value) == 1:
            return literal_text(np.asarray(value).reshape(()))
        return f"const {k}"

    @staticmethod
    def node_id(run: Evaluation, slot: int) -> str:
        """The graph node that shows ``slot``: the equation that made it, or the input
        or constant it is (the shortest id: the outermost place it appears)."""
        step = run.producer[slot]
        if step is not None:
            return run.steps[step].node_id
        ids = [key for key, s in run.node_slots.items() if s == slot and "out" not in key]
        return min(ids, key=lambda key: (key.count("/"), key)) if ids else f"slot{slot}"

    def node(self, slot: int) -> tuple[str, str]:
        assert self.run is not None
        node_id = self.node_id(self.run, slot)
        step = self.run.producer[slot]
        if step is not None:
            return node_id, self.run.steps[step].eqn.primitive.name
        return node_id, self.kinds.get(slot, "") + self.names.get(slot, node_id)

    def expression(self, slot: int, depth: int = 3, most: int = 60) -> str:
        """``cos(x)``, ``mul(sin(x), x)``: how the run computed ``slot``, a few levels deep
        (values named in ``names`` by their name: an input, a residual ``r4``)."""
        own = self.names.pop(slot, None)  # the residual itself is spelled out
        try:
            if own is not None and self.kinds.get(slot):
                return own  # an input or constant kept as it is
            for d in range(depth, -1, -1):  # the deepest spelling that fits
                text = self._expression(slot, d)
                if len(text) <= most:
                    break
            return text
        finally:
            if own is not None:
                self.names[slot] = own

    def _expression(self, slot: int, depth: int) -> str:
        if slot in self.names:
            return self.names[slot]
        assert self.run is not None
        step_index = self.run.producer[slot]
        if slot in self.run.literals:  # a number written in the program
            return literal_text(np.asarray(self.run.values[slot]))
        if step_index is None:
            return "…"
        step = self.run.steps[step_index]
        name = step.eqn.primitive.name
        if depth <= 0:
            return f"{name}(…)"
        args = [
            literal_text(atom) if s is None else self._expression(s, depth - 1)
            for atom, s in zip(step.eqn.invars, step.inputs, strict=True)
        ]
        index = f"[{step.outputs.index(slot)}]" if len(step.outputs) > 1 else ""
        return f"{name}({', '.join(args)}){index}"
