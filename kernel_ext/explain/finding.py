"""What every explanation rule shares: the Finding it returns, docs pages, JAX's message
fields (and the parameter they blame), and the names the user's code gives to ``jax``,
``jax.numpy`` and ``jax.lax``.

>>> traced(TypeError("The error occurred while tracing the function f at cell:1 for jit. "
...     "This concrete value was not available in Python because it depends on the value "
...     "of the argument n.")).arguments
('n',)
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from .source import ErrorSite

DOCS = "https://docs.jax.dev/en/latest"
ERRORS_PAGE = f"{DOCS}/errors.html"


@dataclass(frozen=True)
class Finding:
    """What a rule has to say: plain words, the fix, the docs page."""

    what: str
    fix: str
    docs_url: str
    rewritten: bool = False  # the fix is the user's own statement rewritten


# --------------------------------------------------------------------------- JAX's messages
_SEE = re.compile(r"(https://\S*(?:docs\.jax\.dev|jax\.readthedocs\.io)\S*)")
_TRACING = re.compile(r"tracing the function (\S+) at (.+):(\d+) for (\w+)")
_ARGUMENTS = re.compile(r"depends on the values? of the arguments? (.+?)\.?$", re.MULTILINE)


def docs_in_message(exc: BaseException, default: str) -> str:
    """The docs link JAX put in its own message (right for the installed release)."""
    found = _SEE.search(str(exc))
    return found.group(1).rstrip(".,)") if found else default


@dataclass(frozen=True)
class Traced:
    """What JAX's message says about the trace: function, where, which transformation."""

    function: str
    filename: str
    lineno: int
    transform: str
    arguments: tuple[str, ...]


def traced(exc: BaseException) -> Traced | None:
    message = str(exc)
    found = _TRACING.search(message)
    if found is None:
        return None
    args_found = _ARGUMENTS.search(message)
    arguments: tuple[str, ...] = ()
    if args_found:
        names = re.split(r",\s*|\s+and\s+", args_found.group(1))
        arguments = tuple(n.strip(" '\"`") for n in names if n.strip(" '\"`"))
    fn, filename, line, transform = found.groups()
    return Traced(fn, filename, int(line), transform, arguments)


def in_trace(exc: BaseException) -> str:
    """`` while JAX traces `f` for jit`` (or a plainer phrase when the message has none)."""
    t = traced(exc)
    return (
        f" while JAX traces `{t.function}` for {t.transform}"
        if t
        else " inside a JAX transformation"
    )


def blamed_parameter(fun: Callable[..., Any], error: BaseException) -> str | None:
    """The parameter of ``fun`` whose traced value JAX says it needed concretely (from
    "depends on the value of the argument neg"), or None when JAX names none of them."""
    found = traced(error)
    if found is None:
        return None
    try:
        params = set(inspect.signature(fun).parameters)
    except (TypeError, ValueError):
        return None
    # JAX names a pytree leaf "params['w']": the parameter is the part before the path.
    roots = [a.split("[", 1)[0].split(".", 1)[0] for a in found.arguments]
    named = [r for r in roots if r in params]
    return named[0] if named else None


# --------------------------------------------------------------------------- the user's names
def alias(site: ErrorSite, module: object) -> str | None:
    """The name the user's code gives ``module`` (``jnp`` for ``jax.numpy``), if any."""
    for name, value in site.global_ns.items():
        if value is module and not name.startswith("_"):
            return name
    return None


def jnp_name(site: ErrorSite) -> str:
    return alias(site, jnp) or "jnp"


def jax_name(site: ErrorSite) -> str:
    return alias(site, jax) or "jax"


def lax_name(site: ErrorSite) -> str:
    found = alias(site, jax.lax)
    if found:
        return found
    return f"{jax_name(site)}.lax"
