"""What XLA receives and what it makes: a program's StableHLO and its compiled HLO.

::

    t = stablehlo_text(f, x)   # jax.jit(f).lower(x).as_text()
    h = hlo_text(f, x)         # ... .compile().as_text(): after XLA's passes
    t.text, h.text             # plain strings; in a notebook they show coloured

A function that is already jitted is lowered as it is (its static arguments kept); for
any other, non-array leaves of the arguments are held static. Tracing and compile errors
propagate unchanged.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..highlight.code_html import highlight

STABLEHLO = "stablehlo"
HLO = "hlo"

# One alternative per role; a group `op` is the CSS class `hx-op`.
_TOKEN = re.compile(
    r"""
    (?P<comment>//[^\n]*)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<type>tensor<[^>\n]*>|\b(?:pred|[fsuc]\d+|bf16|f8\w*)\[[\d,]*\](?:\{[\d,]*\})?)
  | (?P<op>\b(?:stablehlo|mhlo|chlo|func|sdy|shardy)\.[\w.]+|(?<=\ )[a-z][\w-]*(?=\())
  | (?P<var>%[\w.#-]+)
    """,
    re.VERBOSE,
)

# A long line (StableHLO has many) wraps between tokens, not inside `tensor<...>`.
_STYLE = """<style>
.jaxlab-lowered pre{margin:0;line-height:1.35;font-size:12px;
white-space:pre-wrap;word-break:normal;overflow-wrap:break-word}
.jaxlab-lowered .hx-op{color:var(--jp-mirror-editor-def-color,#0550ae);font-weight:bold}
.jaxlab-lowered .hx-type{color:var(--jp-mirror-editor-builtin-color,#0a7d5a)}
.jaxlab-lowered .hx-var{color:var(--jp-mirror-editor-variable-color,#24292f)}
.jaxlab-lowered .hx-str{color:var(--jp-mirror-editor-string-color,#0a3069)}
.jaxlab-lowered .hx-comment{color:var(--jp-mirror-editor-comment-color,#6e7781)}
</style>"""


@dataclass(frozen=True)
class LoweredText:
    """A lowered (``stage="stablehlo"``) or compiled (``stage="hlo"``) program as text."""

    stage: str
    title: str
    text: str

    def html(self) -> str:
        what = "StableHLO" if self.stage == STABLEHLO else "compiled HLO"
        caption = f"<div><b>{html.escape(self.title)}</b> ({what})</div>"
        body = highlight(self.text, _TOKEN, prefix="hx-")
        return f'<div class="jaxlab-lowered">{_STYLE}{caption}<pre>{body}</pre></div>'

    def __str__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": self.html()}


def _lower(fun: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    # A jitted function keeps its own static_argnums/donation when lowered directly.
    lower = getattr(fun, "lower", None)
    if callable(lower):
        return lower(*args, **kwargs)
    import jax

    from ..program.static_leaves import split_static

    # Non-array leaves (a module's activation function) are held static, as in %jaxpr.
    split = split_static(fun, args, kwargs)
    return jax.jit(split.fun).lower(*split.args, **split.kwargs)


def _name(fun: Callable[..., Any]) -> str:
    return str(getattr(fun, "__name__", None) or type(fun).__name__)


def stablehlo_text(fun: Callable[..., Any], /, *args: Any, **kwargs: Any) -> LoweredText:
    """The StableHLO module ``jax.jit(fun)`` lowers to for these arguments.

    >>> "stablehlo.sine" in stablehlo_text(jnp.sin, 1.0).text   # doctest: +SKIP
    True
    """
    text = _lower(fun, args, kwargs).as_text()
    return LoweredText(STABLEHLO, _name(fun), text)


def hlo_text(fun: Callable[..., Any], /, *args: Any, **kwargs: Any) -> LoweredText:
    """The HLO module XLA compiled for these arguments (after fusion and its other passes).

    >>> "HloModule" in hlo_text(jnp.sin, 1.0).text   # doctest: +SKIP
    True
    """
    text = _lower(fun, args, kwargs).compile().as_text()
    # Some PJRT plugins keep their executables opaque: say so rather than show nothing.
    return LoweredText(
        HLO, _name(fun), text or "(this backend shows no text for its compiled program)"
    )
