"""Names for a loop's ports where JAX kept none: from the loop's ``def`` and, in a
gradient, from the forward loop a transposed one reverses.

A gradient program's scans are traced by JAX's transforms, which drop the body's
parameter names (``arg_names=None``) but keep where its function was defined
(``func_src_info='cell at In[4]:3'``). The ``def`` there names the carry and the row
(``def cell(h, x)``: the carry ``h``, the row ``x``; a carry of several arrays ``h[0]``,
``h[1]``, its leaves in JAX's flattening order).

The transposed scan of the backward pass carries cotangents: for each constant the forward
body reads (a closed-over ``W``) an accumulator ``∂W``, for each forward carry ``h`` its
cotangent ``∂h``; its rows are the cotangents of the forward scan's stacked outputs (``∂y``)
and the residuals it kept (named after the forward values they keep, ``h``):

>>> transposed_scan_names(...)  # doctest: +SKIP
["params['W']", "∂params['W']", "∂params['U']", "∂params['b']", '∂h', '∂ys', 'h', 'xs', …]
"""

from __future__ import annotations

import ast
import functools
import linecache
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax.extend.core as jcore

from .marks import scan_counts

STACKED = "stacked "  # how a scan's stacked output is named ("stacked h")
_SOURCE = re.compile(r"^(?P<name>\S+) at (?P<file>.*):(?P<line>\d+)$")


def row_name(name: str | None) -> str | None:
    """What a scan's body calls one row of a stacked value: ``stacked h`` -> ``h``."""
    if name is None:
        return None
    return name[len(STACKED) :] if name.startswith(STACKED) else name


def _leaves(name: str, n: int) -> list[str]:
    return [name] if n == 1 else [f"{name}[{k}]" for k in range(n)]


def def_scan_names(jaxpr: Any, consts: int, carries: int) -> list[str | None] | None:
    """A scan body's parameters named by its ``def`` (consts None: closed-over values are
    named by what feeds them), or None where the definition cannot be read."""
    params = _def_parameters(getattr(getattr(jaxpr, "debug_info", None), "func_src_info", None))
    if params is None or len(params) != 2:
        return None
    rows = len(jaxpr.invars) - consts - carries
    found: list[str | None] = [None] * consts
    found += _leaves(params[0], carries) if carries else []
    found += _leaves(params[1], rows) if rows else []
    return found


def _def_parameters(src: Any) -> list[str] | None:
    """The positional parameters of the function defined at ``src`` (``cell at f.py:45``)."""
    where = _SOURCE.match(src) if isinstance(src, str) else None
    if where is None:
        return None
    source = "".join(linecache.getlines(where["file"]))
    if not source:
        return None
    found = _definitions(source).get((int(where["line"]), where["name"].strip("<>")))
    return list(found) if found is not None else None


@functools.lru_cache(maxsize=32)
def _definitions(source: str) -> dict[tuple[int, str], tuple[str, ...]]:
    """Every function of ``source`` by (first line, name): its positional parameters. A
    decorated function is found by its decorator's line too (where JAX says it starts);
    two lambdas on one line by neither (which one is meant cannot be told)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    found: dict[tuple[int, str], tuple[str, ...]] = {}
    lambdas: dict[int, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names = tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args))
            for line in {node.lineno, *(d.lineno for d in node.decorator_list)}:
                found[(line, node.name)] = names
        elif isinstance(node, ast.Lambda):
            lambdas[node.lineno] = lambdas.get(node.lineno, 0) + 1
            names = tuple(a.arg for a in (*node.args.posonlyargs, *node.args.args))
            found[(node.lineno, "lambda")] = names
    for line, n in lambdas.items():
        if n > 1:
            del found[(line, "lambda")]
    return found


def transposed_scan_names(
    eqn: Any,
    forward: Any,
    forward_ports: Sequence[str | None],
    forward_results: Sequence[str | None],
    name_of: Callable[[Any], str | None],
) -> list[str | None]:
    """The parameters of a backward pass's scan ``eqn``, named from the forward scan
    ``forward`` it reverses (``forward_ports``: that body's parameter names;
    ``forward_results``: its results' names; ``name_of``: an outer value's name)."""
    counts, fcounts = scan_counts(eqn.params), scan_counts(forward.params)
    if counts is None or fcounts is None:
        return [name_of(v) for v in eqn.invars]
    nc, nk = counts
    fnc, fnk = fcounts
    found: list[str | None] = [name_of(v) for v in eqn.invars]
    for k in range(nc + nk, len(found)):  # a row of a stacked value
        found[k] = row_name(found[k])
    # Carries: an accumulator per forward constant with a cotangent, then ∂ of each carry.
    accumulators = nk - fnk
    if accumulators >= 0 and len(forward_ports) >= fnc + fnk:
        for k in range(fnk):
            carry = forward_ports[fnc + k]
            if carry and found[nc + accumulators + k] is None:
                found[nc + accumulators + k] = f"∂{carry}"
        matched = _match_by_type(
            [v.aval for v in eqn.invars[nc : nc + accumulators]],
            [(v.aval, n) for v, n in zip(forward.invars[:fnc], forward_ports[:fnc], strict=False)],
        )
        for k, name in enumerate(matched):
            if name and found[nc + k] is None:
                found[nc + k] = f"∂{name}"
    # Rows fed by the backward pass: cotangents of the forward scan's stacked outputs
    # that are not residuals (those the transposed scan reads).
    read = {id(v) for v in eqn.invars}
    ys = [
        row_name(forward_results[k])
        for k in range(fnk, len(forward.outvars))
        if k < len(forward_results) and id(forward.outvars[k]) not in read
    ]
    unnamed = [k for k in range(nc + nk, len(found)) if found[k] is None]
    if ys and len(unnamed) >= len(ys):
        for k, y in zip(unnamed, ys, strict=False):
            found[k] = f"∂{y}" if y else None
    return found


def _match_by_type(wanted: list[Any], candidates: list[tuple[Any, str | None]]) -> list[str | None]:
    """Each of ``wanted`` (avals, in order) paired with the next candidate of the same
    shape and dtype (in order); all None unless every one is paired."""
    found: list[str | None] = []
    at = 0
    for aval in wanted:
        while at < len(candidates) and not _same_type(candidates[at][0], aval):
            at += 1
        if at == len(candidates):
            return [None] * len(wanted)
        found.append(candidates[at][1])
        at += 1
    return found


def _same_type(a: Any, b: Any) -> bool:
    return getattr(a, "shape", None) == getattr(b, "shape", None) and str(
        getattr(a, "dtype", "")
    ) == str(getattr(b, "dtype", ""))


def forward_scan(eqn: Any, producer: Callable[[Any], Any]) -> Any:
    """The forward scan a backward pass's scan ``eqn`` reverses: the scan whose outputs it
    reads (its residuals), or None."""
    for v in eqn.invars:
        made = None if isinstance(v, jcore.Literal) else producer(v)
        if made is not None and made is not eqn and made.primitive.name == "scan":
            return made
    return None


def assigned_names(eqn: Any, carries: int, stacked: int | None) -> list[str | None] | None:
    """A scan's results named by the assignment that receives them: ``h, ys =
    jax.lax.scan(...)`` names the final carry ``h`` and the stacked output ``ys``; a
    carry written as a tuple ``(q, p), es = ...`` names each leaf. ``stacked``: how many
    stacked outputs the program has (None in a gradient's forward scan, whose residuals
    follow its own: then only a single name is given, to the first). None where the line
    cannot be read or its targets do not match the results."""
    target = _target(eqn)
    if not isinstance(target, ast.Tuple) or len(target.elts) != 2:
        return None
    carry, ys = (_names(t) for t in target.elts)
    found: list[str | None] = [None] * (len(eqn.outvars))
    if carry is not None and len(carry) == carries:
        found[:carries] = carry
    fits = ys is not None and carries + len(ys) <= len(found)
    if fits and ys is not None and (len(ys) == stacked or (stacked is None and len(ys) == 1)):
        found[carries : carries + len(ys)] = [f"{STACKED}{y}" for y in ys]
    return found if any(found) else None


def _names(target: ast.expr) -> list[str] | None:
    if isinstance(target, ast.Name):
        return [target.id] if target.id != "_" else None
    if isinstance(target, ast.Tuple) and all(isinstance(e, ast.Name) for e in target.elts):
        return [e.id for e in target.elts]  # type: ignore[attr-defined]
    return None


def _target(eqn: Any) -> ast.expr | None:
    """The single target of the assignment whose value is the call that made ``eqn``."""
    found = _assignment(eqn)
    return found[0] if found is not None else None


def position(eqn: Any) -> tuple[str, int, int] | None:
    """Where ``eqn`` was written: file, line and column (None where JAX kept none)."""
    from jax.extend import source_info_util

    try:
        summary = source_info_util.summarize(eqn.source_info)
    except Exception:  # a JAX release without a traceback for this equation
        return None
    where = re.match(r"^(?P<file>.*):(?P<line>\d+):(?P<column>\d+)(?: \(.*\))?$", summary or "")
    if where is None:
        return None
    return where["file"], int(where["line"]), int(where["column"])


def _assignment(eqn: Any) -> tuple[ast.expr, ast.expr] | None:
    where = position(eqn)
    source = "".join(linecache.getlines(where[0])) if where is not None else ""
    if where is None or not source:
        return None
    return _assignments(source).get(where[1:])


def assigned_value(eqn: Any) -> str | None:
    """The name an assignment gives ``eqn``'s result: ``h = jnp.tanh(x @ W + b)`` names
    the ``tanh`` ``h`` (not the sum inside it, nor a derivative JAX computes at the same
    place, ``1 - h²``); None unless ``eqn`` is the operation the assigned expression
    writes (its operator, or a call of the primitive's name) and the target one name."""
    found = _assignment(eqn)
    if found is None or len(eqn.outvars) != 1:
        return None
    target, value = found
    if not isinstance(target, ast.Name) or target.id == "_":
        return None
    return target.id if _writes(value, str(eqn.primitive.name)) else None


# The primitive each operator writes, and the words a call of a primitive goes by.
_OPERATORS: dict[type[ast.AST], str] = {
    ast.MatMult: "dot_general",
    ast.Add: "add",
    ast.Sub: "sub",
    ast.Mult: "mul",
    ast.Div: "div",
    ast.Pow: "integer_pow",
    ast.USub: "neg",
}
_CALLS = {"matmul": "dot_general", "dot": "dot_general", "einsum": "dot_general"}


def _writes(value: ast.expr, primitive: str) -> bool:
    op = getattr(value, "op", None)
    if isinstance(value, ast.BinOp | ast.UnaryOp) and op is not None:
        wanted = _OPERATORS.get(type(op))
        return wanted == primitive or (wanted == "integer_pow" and primitive == "pow")
    if isinstance(value, ast.Call):
        func = value.func
        word = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return primitive in (word, f"reduce_{word}", _CALLS.get(word))
    return False


@functools.lru_cache(maxsize=32)
def _assignments(source: str) -> dict[tuple[int, int], tuple[ast.expr, ast.expr]]:
    """Single-target assignments of ``source`` (target, value) by where the value starts."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return {}
    return {
        (node.value.lineno, node.value.col_offset): (node.targets[0], node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and len(node.targets) == 1
    }


def paired_cond(eqn: Any, earlier: Sequence[Any]) -> Any:
    """The forward cond a backward pass's cond ``eqn`` transposes: the last of the
    ``earlier`` equations that is a cond on the same branch index, or None."""
    index = eqn.invars[0] if eqn.invars else None
    if index is None or isinstance(index, jcore.Literal):
        return None
    for other in reversed(earlier):
        if other is not eqn and other.primitive.name == "cond" and other.invars[:1] == [index]:
            return other
    return None


def cond_cotangent_names(
    eqn: Any, forward: Any, n_params: int, primal_name: Callable[[Any], str | None]
) -> list[str | None]:
    """Names of a backward cond's parameters that are cotangents: JAX passes the
    residuals first and then one cotangent per primal result of the ``forward`` cond
    (the results the backward cond does not read as residuals), so the last ones are
    ``∂`` of those results' names (``∂y``; ``∂f`` for what the function returns). The
    other parameters are None (named as their operands are)."""
    reads = {id(v) for v in eqn.invars if not isinstance(v, jcore.Literal)}
    primals = [v for v in forward.outvars if id(v) not in reads]
    found: list[str | None] = [None] * n_params
    if not primals or len(primals) > n_params:
        return found
    for j, v in enumerate(primals):
        name = primal_name(v)
        found[n_params - len(primals) + j] = f"∂{name}" if name else None
    return found


def cond_assigned(eqn: Any, primals: int) -> list[str] | None:
    """What the assignment receiving a cond names its ``primals`` results: ``y =
    lax.cond(...)``, ``a, b = lax.cond(...)``; None where it names another count."""
    target = _target(eqn)
    names = _names(target) if target is not None else None
    return names if names is not None and len(names) == primals else None
