"""jaxpr → Graph (being written).

API (stable): ``jaxpr_graph(fun, *args, grad=False, depth=None, values=False,
budget=DEFAULT_BUDGET, **kwargs) -> Graph`` and ``graph_from_jaxpr(closed_jaxpr, *,
title, grad=False, depth=None, budget=DEFAULT_BUDGET) -> Graph``.
"""

from typing import Any

from .model import Graph

DEFAULT_BUDGET = 400


def jaxpr_graph(
    fun: Any,
    *args: Any,
    grad: bool = False,
    depth: int | None = None,
    values: bool = False,
    budget: int = DEFAULT_BUDGET,
    **kwargs: Any,
) -> Graph:
    raise NotImplementedError


def graph_from_jaxpr(
    closed_jaxpr: Any,
    *,
    title: str,
    grad: bool = False,
    depth: int | None = None,
    budget: int = DEFAULT_BUDGET,
) -> Graph:
    raise NotImplementedError
