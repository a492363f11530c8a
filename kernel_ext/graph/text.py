"""The jaxpr as text: JAX's own pretty-print, coloured for HTML.

The text is exactly ``str(closed_jaxpr)``; the HTML wraps its tokens in ``<span>``s
with a CSS class per role (keywords, primitives, types, literals, variables, parameter
names) and escapes everything, so a function named ``<script>`` prints as text::

    t = jaxpr_text(jax.make_jaxpr(jnp.sin)(1.0))
    t.text            # '{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) }'
    t.html()          # '<div class="jaxlab-jaxpr">...<span class="jx-prim">sin</span>...'

In a Jupyter kernel JAX colours its printout with ANSI escape codes; they are removed
(:func:`plain_text`), so both views carry the plain text.

Colouring reads the printed text (JAX's printer is the authority on layout) with one
regular expression; a token it misreads is merely coloured wrongly, never lost: the
HTML with its tags removed and entities unescaped is the text again.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..highlight import code_html

# One alternative per role, tried left to right at each position; a group `kw` is the
# CSS class `jx-kw`.
_TOKEN = re.compile(
    r"""
    (?P<type>(?<=:)[A-Za-z_][\w<>]*\[[^\]\n]*\])             # f32[3,4] after a binder's colon
  | (?P<lit>(?<![\w.])-?(?:\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|inf|nan|True|False)(?=:[A-Za-z_]))
  | (?P<kw>\b(?:lambda|let|in)\b(?!=))                        # { lambda ; a. let ... in (b,) }
  | (?P<def>(?<=let\ )[A-Za-z_]\w*(?=\ =\ \{))               # let _uniform = { lambda ... }
  | (?P<prim>(?<=\s=\s)[A-Za-z_][\w.]*)                       # c:f32[] = sin a
  | (?P<param>\b[A-Za-z_]\w*(?==))                            # axes=(0,)
  | (?P<var>(?<![\w.=<])[a-z_]+(?![\w=\[(<]))                 # a, b, ba, _
    """,
    re.VERBOSE,
)

# An ANSI escape sequence (JAX's printer emits colours when it runs in a Jupyter kernel).
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")

# JupyterLab's editor colours where they exist (light and dark themes), fixed ones elsewhere;
# a long line wraps between tokens, not inside one.
_STYLE = """<style>
.jaxlab-jaxpr pre{margin:0;line-height:1.35;font-size:12px;
white-space:pre-wrap;word-break:normal;overflow-wrap:break-word}
.jaxlab-jaxpr .jx-kw{color:var(--jp-mirror-editor-keyword-color,#7928a1);font-weight:bold}
.jaxlab-jaxpr .jx-prim{color:var(--jp-mirror-editor-def-color,#0550ae);font-weight:bold}
.jaxlab-jaxpr .jx-type{color:var(--jp-mirror-editor-builtin-color,#0a7d5a)}
.jaxlab-jaxpr .jx-lit{color:var(--jp-mirror-editor-number-color,#b35900)}
.jaxlab-jaxpr .jx-var{color:var(--jp-mirror-editor-variable-color,#24292f)}
.jaxlab-jaxpr .jx-param{color:var(--jp-mirror-editor-attribute-color,#6e7781)}
.jaxlab-jaxpr .jx-def{color:var(--jp-mirror-editor-variable-2-color,#953800)}
</style>"""


def plain_text(printed: Any) -> str:
    r"""``str(printed)`` without ANSI colour codes: JAX colours a jaxpr's printout in a
    Jupyter kernel, and HTML would show the codes as ``[34;1m`` litter.

    >>> plain_text("\x1b[34;1mlambda\x1b[39;22m ; a")
    'lambda ; a'
    """
    return _ANSI.sub("", str(printed))


def highlight(text: str) -> str:
    """The jaxpr text as escaped HTML with ``<span class="jx-...">`` around each token."""
    return code_html.highlight(text, _TOKEN, prefix="jx-")


@dataclass(frozen=True)
class JaxprText:
    """A pretty-printed jaxpr; shows as coloured HTML in a notebook, plain text elsewhere."""

    text: str
    title: str = ""

    def html(self) -> str:
        caption = (
            f'<div class="jx-title"><b>{html.escape(self.title)}</b></div>' if self.title else ""
        )
        return f'<div class="jaxlab-jaxpr">{_STYLE}{caption}<pre>{highlight(self.text)}</pre></div>'

    def __str__(self) -> str:
        return self.text

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": self.html()}


def jaxpr_text(closed_jaxpr: Any, title: str = "", names: Sequence[str] | None = None) -> JaxprText:
    """The pretty-printed ``closed_jaxpr`` (anything ``jax.make_jaxpr`` returns), its
    arguments called by the names the graph gives them (``names``, by default those JAX
    kept on the program: ``x``, ``params['w']``) rather than JAX's ``a, b``.

    >>> jaxpr_text(jax.make_jaxpr(jnp.sin)(1.0)).text   # doctest: +SKIP
    '{ lambda ; x:f32[]. let a:f32[] = sin x in (a,) }'
    """
    text = plain_text(closed_jaxpr)
    if names is None:
        names = _kept_names(closed_jaxpr)
    return JaxprText(with_names(text, names) if names else text, title)


def _kept_names(closed_jaxpr: Any) -> tuple[str, ...] | None:
    jaxpr = getattr(closed_jaxpr, "jaxpr", None)
    if jaxpr is None or not hasattr(jaxpr, "invars"):
        return None
    from .names import program_names

    return program_names(jaxpr).args


# A variable as JAX prints it: letters (and a dropped result's "_"), not a parameter's
# name (followed by "="), a type ("f32[") or a primitive (after " = ").
_VAR = re.compile(r"(?<![\w.'\"=<\[])([a-z_]+)(?![\w'\"(\[=<])")
# The program's own header is the last one that starts a line (shared sub-programs such as
# "let _uniform = { lambda ..." are printed before it).
_HEADER = re.compile(r"^\{ lambda ([^;]*); (.*?)\. let", re.MULTILINE | re.DOTALL)
_SAFE_NAME = re.compile(r"[^\s:=,(){}]+")


def with_names(text: str, names: Sequence[str]) -> str:
    """``text`` (a printed jaxpr) with its top-level arguments renamed to ``names``; a
    variable of JAX's that a name would shadow gets a ``_`` (``x`` -> ``x_``). ``text``
    as it is when its arguments cannot be read or a name cannot be printed as one."""
    header = next(reversed(list(_HEADER.finditer(text))), None)
    if header is None:
        return text
    binders = [b.split(":", 1)[0] for b in header.group(2).split()]
    if len(binders) != len(names) or not all(n and _SAFE_NAME.fullmatch(n) for n in names):
        return text
    rename = dict(zip(binders, names, strict=True))
    taken = set(names)
    used = {m.group(1) for m in _VAR.finditer(text)} - {"lambda", "let", "in"}

    def fresh(token: str) -> str:
        while token in taken or token in used:
            token += "_"
        return token

    clash = {t: fresh(t) for t in used if t in taken and t not in rename}

    def swap(match: re.Match[str]) -> str:
        token = match.group(1)
        if text[max(0, match.start() - 3) : match.start()] == " = ":  # a primitive
            return token
        return rename.get(token) or clash.get(token) or token

    return _VAR.sub(swap, text)
