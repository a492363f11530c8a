"""What a drawing marks for its reader beyond the dataflow: loop carries and unused work.

* A ``scan`` or ``while`` body hands its carry back to itself for the next iteration; the
  jaxpr says so only by position (body result ``k`` is parameter ``num_consts + k``).
  :func:`carry_edges` draws that as a loop-back edge (``Edge.kind == CARRY``).
* An equation whose results reach no output of the program (a forward value a gradient
  program computes and never reads) is marked ``unused`` by :func:`mark_unused`.

>>> g = jaxpr_graph(lambda x: jax.lax.scan(lambda c, _: (c * 2, None), x, None, 3)[0], 1.0)
>>> [e for e in g.edges if e.kind == "carry"]           # doctest: +SKIP
[Edge(src='e0/e0', dst='e0/in0', kind='carry')]
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

import jax.extend.core as jcore

from . import model as m
from .walk import Block, Item, name_stack


def scan_counts(params: dict[str, Any]) -> tuple[int, int] | None:
    """(consts, carry) of a scan; None where this JAX's scan is not understood."""
    if "num_consts" in params:  # JAX <= 0.10
        return int(params["num_consts"]), int(params["num_carry"])
    try:  # 0.12 groups them in a private flat tree: read through the compat module
        from .._jax_compat import scan_counts as compat_counts
    except ImportError:
        return None
    try:
        return compat_counts(params)
    except NotImplementedError:
        return None


def _bodies(item: Item) -> list[tuple[Block, int, int]]:
    """(body block, its first carry parameter, number of carries) of a scan or while."""
    p = item.eqn.params
    if item.primitive == "scan" and len(item.blocks) == 1:
        counts = scan_counts(p)
        return [(item.blocks[0], *counts)] if counts else []
    if item.primitive == "while":
        bodies = [b for b in item.blocks if b.role == "body_jaxpr"]
        n = len(item.eqn.outvars)
        return [(b, int(p.get("body_nconsts", 0)), n) for b in bodies]
    return []


def carry_edges(
    tree: Block, drawn_nodes: set[str], var_node: Mapping[Any, str]
) -> tuple[m.Edge, ...]:
    """A loop-back edge from each drawn body's carry result to its carry parameter."""
    found: list[m.Edge] = []

    for item in tree.loops:  # every scan and while at any depth, in program order
        for body, first, n in _bodies(item):
            for k, v in enumerate(body.jaxpr.outvars[:n]):
                dst = f"{body.prefix}in{first + k}"
                if isinstance(v, jcore.Literal) or dst not in drawn_nodes:
                    continue
                src = var_node.get(v)
                if src is not None and src != dst and src in drawn_nodes:
                    found.append(m.Edge(src, dst, m.CARRY))
    return tuple(dict.fromkeys(found))


def mark_unused(
    nodes: tuple[m.Node, ...], edges: tuple[m.Edge, ...], live: tuple[str, ...] = ()
) -> tuple[m.Node, ...]:
    """Top-level equations from which no path reaches an output, marked ``unused``.

    Anything inside a cluster counts as used (a while's condition reads values that reach
    no output, yet decides the loop), and so does all that feeds it; so do the ``live``
    nodes (a gradient program's forward value, which the report prints).
    """
    producers: dict[str, list[str]] = defaultdict(list)
    for e in edges:
        producers[e.dst].append(e.src)
    # Walk back from every output and every node inside a cluster: what is reached is used.
    stack = [n.id for n in nodes if n.kind == m.OUTPUT or n.cluster is not None]
    stack += [node_id for node_id in live if node_id not in stack]
    used = set(stack)
    while stack:
        for src in producers.get(stack.pop(), ()):
            if src not in used:
                used.add(src)
                stack.append(src)
    return tuple(
        dataclasses.replace(n, unused=True)
        if n.kind == m.EQUATION and n.cluster is None and n.id not in used
        else n
        for n in nodes
    )


def primal_and_seed(tree: Block, closed_jaxpr: Any) -> tuple[Any, Any]:
    """In a gradient program (``jax.vjp`` applied to a seed of 1): the variable holding
    the function's value, and the constant seed ``∂f/∂f = 1`` that differentiates it.

    The value is the last forward equation's scalar result that nothing reads, of the
    seed's dtype; the seed is the scalar constant 1 of that dtype. ``(None, None)`` when
    either cannot be told.
    """
    j = tree.jaxpr
    seed = None
    for var, value in zip(j.constvars, getattr(closed_jaxpr, "consts", ()), strict=False):
        if getattr(value, "shape", None) == () and _is_one(value):
            seed = var
    if seed is None:
        return None, None
    read: set[Any] = {v for v in j.outvars if not isinstance(v, jcore.Literal)}
    for item in tree.items:
        read.update(v for v in item.eqn.invars if not isinstance(v, jcore.Literal))
    dtype = getattr(seed.aval, "dtype", None)
    for item in reversed(tree.items):
        if "transpose" in name_stack(item.eqn):
            continue
        for v in item.eqn.outvars:
            aval = getattr(v, "aval", None)
            if (
                not isinstance(v, jcore.DropVar)
                and v not in read
                and getattr(aval, "shape", None) == ()
                and getattr(aval, "dtype", None) == dtype
            ):
                return v, seed
    return None, None


def _is_one(value: Any) -> bool:
    try:
        return bool(value == 1)
    except (TypeError, ValueError):
        return False
