"""The user's function compiled once, with the sliders as traced arguments.

Every float slider is one entry of a vector ``p`` traced by ``jax.jit``; the fixed arrays
are traced too; bools, ints and strings are static (a change compiles again). One
compiled call answers a move: the output, its ``jax.jvp`` tangent along the moved
slider (a traced one-hot direction, so moving another slider compiles nothing) and, for
each scalar float output, every slider's derivative at once (``jax.jacfwd``)::

    program = Compiled(layout)
    out, tangents, jacobians = program.evaluate(p, direction, arrays, statics)
    program.compiles            # {'evaluate': 1}: traces of our own jitted functions

The counts are this exploration's own: each trace of a jitted function here is one
compilation of the user's function (JAX traces once per compile). The calls run under
``session.jaxlab_work()`` so the compile log never takes them for the user's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from .controls import Layout


def is_float(x: Any) -> bool:
    return jnp.issubdtype(jnp.result_type(x), jnp.floating)


_NO_FORWARD = "forward-mode"  # JAX: "can't apply forward-mode autodiff (jvp) to a custom_vjp"


def refuses_forward(error: BaseException) -> bool:
    return isinstance(error, TypeError) and _NO_FORWARD in str(error)


def directional(
    fun: Callable[[Any], list[Any]], p: Any, direction: Any, notes: set[str], reverse: bool
) -> list[Any]:
    """``fun``'s derivative along ``direction`` by ``jax.jvp``; by reverse mode
    (``jax.jacrev``) when the program refuses forward mode (a ``custom_vjp``, as
    diffrax's default adjoint), said in ``notes``."""
    if not reverse:
        try:
            return list(jax.jvp(fun, (p,), (direction,))[1])
        except TypeError as e:
            if not refuses_forward(e):
                raise
    notes.add(REVERSE_NOTE)
    return [j @ direction for j in jax.jacrev(fun)(p)]


def jacobian(fun: Callable[[Any], list[Any]], p: Any, notes: set[str], reverse: bool) -> list[Any]:
    """Every slider's derivative (the last axis): ``jax.jacfwd``, else ``jax.jacrev``."""
    if not reverse:
        try:
            return list(jax.jacfwd(fun)(p))
        except TypeError as e:
            if not refuses_forward(e):
                raise
    notes.add(REVERSE_NOTE)
    return list(jax.jacrev(fun)(p))


REVERSE_NOTE = (
    "derivatives by reverse mode: the function has a custom_vjp rule (e.g. diffrax's "
    "adjoint), which forward mode (jax.jvp) cannot differentiate"
)


def float_dtype() -> Any:
    """The sliders' dtype: float64 when x64 is on, else float32."""
    return jnp.result_type(float)


class Compiled:
    """The jitted evaluators of one layout, and how many times each was traced."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.compiles: Counter[str] = Counter()
        self.notes: set[str] = set()  # said while tracing: how derivatives were taken
        self.reverse = False  # forward mode refused when lowered: reverse mode throughout
        self._jit()
        self._fit_step: Callable[..., Any] | None = None

    def _jit(self) -> None:
        self._evaluate = jax.jit(self._evaluate_traced, static_argnums=(3,))
        self._sweep = jax.jit(self._sweep_traced, static_argnums=(5,))
        self._jacobian = jax.jit(self._jacobian_traced, static_argnums=(2,))

    def _call(self, kind: str, *args: Any) -> Any:
        """A jitted call; when forward mode is refused only as the program is lowered (an
        equinox loop's checkpointed adjoint raises there, not while tracing), the
        derivatives are traced again in reverse mode and the failed try is not counted."""
        try:
            return getattr(self, f"_{kind}")(*args)
        except TypeError as e:
            if not refuses_forward(e) or self.reverse:
                raise
        self.notes.add(REVERSE_NOTE)
        self.reverse = True
        self.compiles[{"jacobian": "sensitivity"}.get(kind, kind)] -= 1  # never compiled
        self._jit()
        return getattr(self, f"_{kind}")(*args)

    # ---------------------------------------------------------------- traced bodies
    def _user(self, p: Any, arrays: Sequence[Any], statics: tuple[Any, ...]) -> Any:
        return self.layout.call(p, arrays, statics)

    def _split(self, out: Any) -> tuple[list[Any], list[int]]:
        leaves = jax.tree_util.tree_leaves(out)
        return leaves, [i for i, leaf in enumerate(leaves) if is_float(leaf)]

    def _evaluate_traced(
        self, p: Any, direction: Any, arrays: Sequence[Any], statics: tuple[Any, ...]
    ) -> tuple[Any, dict[int, Any], dict[int, Any]]:
        self.compiles["evaluate"] += 1  # runs once per trace: one compilation
        out = self._user(p, arrays, statics)
        leaves, floats = self._split(out)

        def float_leaves(q: Any) -> list[Any]:
            inner = jax.tree_util.tree_leaves(self._user(q, arrays, statics))
            return [inner[i] for i in floats]

        tangents: dict[int, Any] = {}
        jacobians: dict[int, Any] = {}
        if floats and p.shape[0]:
            dots = directional(float_leaves, p, direction, self.notes, self.reverse)
            tangents = dict(zip(floats, dots, strict=True))
            scalars = [i for i in floats if jnp.ndim(leaves[i]) == 0]
            if scalars:

                def scalar_leaves(q: Any) -> list[Any]:
                    inner = jax.tree_util.tree_leaves(self._user(q, arrays, statics))
                    return [inner[i] for i in scalars]

                jacs = jacobian(scalar_leaves, p, self.notes, self.reverse)
                jacobians = dict(zip(scalars, jacs, strict=True))
        return out, tangents, jacobians

    def _sweep_traced(
        self,
        p: Any,
        index: Any,
        xs: Any,
        arrays: Sequence[Any],
        direction: Any,
        statics: tuple[Any, ...],
    ) -> tuple[Any, dict[int, Any]]:
        self.compiles["sweep"] += 1

        def one(x: Any) -> tuple[Any, dict[int, Any]]:
            q = p.at[index].set(x)
            out = self._user(q, arrays, statics)
            _, floats = self._split(out)

            def float_leaves(r: Any) -> list[Any]:
                inner = jax.tree_util.tree_leaves(self._user(r, arrays, statics))
                return [inner[i] for i in floats]

            dots = directional(float_leaves, q, direction, self.notes, self.reverse)
            return out, dict(zip(floats, dots, strict=True))

        return jax.vmap(one)(xs)

    def _jacobian_traced(
        self, p: Any, arrays: Sequence[Any], statics: tuple[Any, ...]
    ) -> dict[int, Any]:
        self.compiles["sensitivity"] += 1
        out = self._user(p, arrays, statics)
        _, floats = self._split(out)

        def float_leaves(q: Any) -> list[Any]:
            inner = jax.tree_util.tree_leaves(self._user(q, arrays, statics))
            return [inner[i] for i in floats]

        return dict(zip(floats, jacobian(float_leaves, p, self.notes, self.reverse), strict=True))

    # ---------------------------------------------------------------- calls
    def evaluate(
        self, p: Any, direction: Any, arrays: Sequence[Any], statics: tuple[Any, ...]
    ) -> tuple[Any, dict[int, Any], dict[int, Any]]:
        return self._call("evaluate", p, direction, list(arrays), statics)

    def sweep(
        self,
        p: Any,
        index: int,
        xs: Any,
        arrays: Sequence[Any],
        statics: tuple[Any, ...],
    ) -> tuple[Any, dict[int, Any]]:
        direction = jnp.zeros_like(p).at[index].set(1.0)
        return self._call("sweep", p, jnp.asarray(index), xs, list(arrays), direction, statics)

    def jacobian(self, p: Any, arrays: Sequence[Any], statics: tuple[Any, ...]) -> dict[int, Any]:
        return self._call("jacobian", p, list(arrays), statics)

    def fit_step(self, make: Callable[[Compiled], Callable[..., Any]]) -> Callable[..., Any]:
        """The fit's step, made once by ``make`` (which counts its own traces as "fit")."""
        if self._fit_step is None:
            self._fit_step = make(self)
        return self._fit_step

    def user(self, p: Any, arrays: Sequence[Any], statics: tuple[Any, ...]) -> Any:
        """The user's function at ``p`` (traced by the caller: a fit's loss, the NaN hunt)."""
        return self._user(p, arrays, statics)
