"""The only place that touches private JAX or papers over version differences.

Each entry is guarded: it checks that what it reaches for exists and falls back to
something public (or to "unknown") when a JAX release moves it. tests/test_jax_compat.py
exercises every entry on the installed JAX.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


# --------------------------------------------------------------------------- autodiff
# (jaxpr_eval: evaluating one equation outside JAX's own interpreter)


def bind_equation(eqn: Any, invals: Sequence[Any]) -> list[Any]:
    """Apply one jaxpr equation to concrete (or traced) inputs; always a list of results.

    ``Primitive.get_bind_params`` is public, but its result changed shape: JAX < 0.4.36
    returned ``(subfuns, params)``, later releases one dict with ``subfuns`` inside.
    """
    prim = eqn.primitive
    bind_params = prim.get_bind_params(eqn.params)
    if isinstance(bind_params, tuple):  # older JAX: (subfuns, params)
        subfuns, params = bind_params
        out = prim.bind(*subfuns, *invals, **params)
    else:
        out = prim.bind(*invals, **bind_params)
    return list(out) if prim.multiple_results else [out]
