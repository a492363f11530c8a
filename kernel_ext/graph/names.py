"""The names a drawing gives values: the user's, carried into nested programs.

JAX keeps, on each traced program, the names of its parameters and the pytree paths of
its results (``Jaxpr.debug_info``: a scan body traced from ``step(h, x)`` has
``arg_names=('', '', 'h', 'x')``, an inner ``jit`` returning a dict ``result['s']``).
A nested program's parameter takes its own name there, or else the name of the outer
value that feeds it (a closed-over ``params['Wh']``); its results take the function's
name (``inner``, ``inner['s']``); a scan's carries keep the carry's name and its stacked
outputs say what they stack (``stacked h``).

Names longer than :data:`WHOLE` characters are shortened keeping their distinguishing
end (:func:`shorten`); shorter ones are drawn whole.

>>> shorten("∂loss/∂params['encoder']['layers'][11]['attention']['W_query']")
"∂loss/∂params…1]['attention']['W_query']"
"""

from __future__ import annotations

from typing import Any, NamedTuple

WHOLE = 40  # names up to this many characters are drawn whole
_HEAD = 14  # of a longer name, the first characters kept (the rest is its end)


def shorten(name: str, most: int = WHOLE) -> str:
    """``name`` whole when it has at most ``most`` characters; else its start and its
    distinguishing end around an ellipsis, ``most`` characters in all."""
    if len(name) <= most:
        return name
    head = min(_HEAD, most // 3)
    tail = most - head - 1
    return name[:head] + "…" + name[len(name) - tail :]


class ProgramNames(NamedTuple):
    """What JAX recorded of a traced program: its function and parameter names and the
    pytree paths of its results (``None`` where it recorded nothing usable)."""

    function: str | None  # "step", "inner"; None for a lambda or when unknown
    args: tuple[str, ...] | None  # one per parameter ("" for a closed-over value)
    results: tuple[str, ...] | None  # one per result: "result", "result['s']", "result[0]"


def program_names(jaxpr: Any) -> ProgramNames:
    """The names JAX kept on ``jaxpr`` (a ``Jaxpr``), checked against its arity."""
    info = getattr(jaxpr, "debug_info", None)
    if info is None:
        return ProgramNames(None, None, None)
    src = getattr(info, "func_src_info", None) or ""
    head = src.split(" at ", 1)[0].strip() if isinstance(src, str) else ""
    function = head if head.isidentifier() else None  # not "<lambda>", "<unknown>"
    args = _strings(getattr(info, "arg_names", None), len(jaxpr.invars))
    results = _strings(getattr(info, "result_paths", None), len(jaxpr.outvars))
    return ProgramNames(function, args, results)


def _strings(values: Any, n: int) -> tuple[str, ...] | None:
    try:
        found = tuple(values)
    except TypeError:
        return None
    if len(found) != n or not all(isinstance(v, str) for v in found):
        return None
    return found


def result_name(function: str | None, path: str | None, *, single: bool) -> str | None:
    """A result's name from its function and pytree path: ``inner`` for a single result,
    ``inner['s']`` or ``inner[1]`` for one of several; None when neither is known."""
    if path is not None and path.startswith("result"):
        rest = path[len("result") :]
        if function:
            return function + rest if rest or single else function
        return "result" + rest if rest or single else None
    return function if single else None
