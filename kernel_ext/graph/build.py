"""jaxpr → Graph (being written)."""

from typing import Any

from .model import Graph


def jaxpr_graph(fun: Any, *args: Any, grad: bool = False, depth: int | None = None, **kwargs: Any) -> Graph:
    raise NotImplementedError
