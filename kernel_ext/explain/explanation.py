"""Teaching explanations for JAX's common errors.

``explain(exc)`` reads an exception JAX raised and says, in a few lines, what happened in
plain words, which line of the user's own code did it, the corrected code (the user's
line rewritten where that can be done) and the page of the JAX documentation about it::

    try:
        x[0] = 1.0
    except TypeError as e:
        print(jaxlab.explain(e))
    # JAX arrays are immutable: `x[0] = 1.0` cannot change `x` in place ... (TypeError)
    #   your line  In[3], line 2:  x[0] = 1.0
    #   fix        x = x.at[0].set(1.0)
    #   docs       https://docs.jax.dev/en/latest/_autosummary/jax.numpy.ndarray.at.html

It returns None for an exception it has nothing to add to (anything not JAX's). With the
extension loaded the same text appears above the traceback (``jaxlab.magics.errors``).
"""

from __future__ import annotations

import html
import io
import re
import textwrap
import tokenize
from dataclasses import asdict, dataclass
from typing import Any

from .rules import find_rule
from .source import UserLine, error_site

_LABEL_WIDTH = 11  # "your line  " — the fix's extra lines align under its first
# Columns for a fix line in the text view, after its label: 100 in all. A notebook wraps
# longer lines anywhere, mid-word (JupyterLab's outputs break-all).
FIX_WIDTH = 100 - 2 - _LABEL_WIDTH


@dataclass(frozen=True)
class Explanation:
    """What went wrong, where in the user's code, and the fix. JSON-serialisable.

    ``error_type`` and ``error_message`` are the real exception's, never replaced;
    ``rewritten`` says whether ``fix`` is the user's own line rewritten (rather than a
    general pattern to adapt).
    """

    kind: str
    error_type: str
    error_message: str
    what: str
    fix: str
    docs_url: str
    user_line: UserLine | None = None
    rewritten: bool = False

    def lines(self) -> list[str]:
        """The explanation as 2-4 plain text lines (the fix may span a few more)."""
        out = [f"{self.what} ({self.error_type})"]
        if self.user_line is not None:
            where = self.user_line.label
            if self.user_line.function not in ("<module>", ""):
                where += f", in {self.user_line.function}"
            out.append(f"  your line  {where}:  {self.user_line.text}")
        if self.fix:
            first, *rest = wrap_fix(self.fix)
            out.append(f"  fix        {first}")
            out.extend(" " * _LABEL_WIDTH + "  " + line for line in rest)
        if self.docs_url:
            out.append(f"  docs       {self.docs_url}")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _repr_html_(self) -> str:
        e = html.escape
        # label | content, one row each; the fix is code, shown as code
        rows = []
        if self.user_line is not None:
            rows.append(
                f"<b>your line</b><span>{e(self.user_line.label)}: "
                f"<code>{e(self.user_line.text)}</code></span>"
            )
        if self.fix:
            rows.append(
                "<b>fix</b><pre style='margin:0;padding:2px 6px;white-space:pre-wrap;"
                "word-break:normal;overflow-wrap:normal;overflow-x:auto;"
                f"background:var(--jp-layout-color2,#f3f3f3)'>{e(self.fix)}</pre>"
            )
        if self.docs_url:
            url = e(self.docs_url, quote=True)
            rows.append(f'<b>docs</b><a href="{url}" target="_blank">{e(self.docs_url)}</a>')
        grid = (
            "<div style='display:grid;grid-template-columns:max-content 1fr;gap:3px 10px;"
            "align-items:baseline;margin-top:4px'>" + "".join(rows) + "</div>"
        )
        return (
            "<div class='jaxlab-explanation' style='border-left:3px solid #d9534f;"
            "padding:4px 8px;margin:4px 0'>"
            f"<div>{_code_spans(e(self.what))} <code>({e(self.error_type)})</code></div>"
            + grid
            + "</div>"
        )

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": str(self), "text/html": self._repr_html_()}


def wrap_fix(fix: str, width: int = FIX_WIDTH) -> list[str]:
    """The fix's lines, each within ``width`` where it can be: comments wrapped at word
    boundaries (a trailing comment moves above its code), code never broken, so that what
    the user copies still runs.

    >>> wrap_fix("y = x @ w  # contract the last axis of x with the first of w", 30)
    ['# contract the last axis of x', '# with the first of w', 'y = x @ w']
    """
    out: list[str] = []
    for line in fix.splitlines():
        code, comment = _split_comment(line)
        if len(line) <= width or comment is None:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        words = comment.lstrip("#").strip()
        room = max(width - len(indent) - 2, 20)
        wrapped = textwrap.wrap(words, room, break_long_words=False, break_on_hyphens=False)
        out.extend(f"{indent}# {piece}" for piece in wrapped)
        if code.strip():
            out.append(code.rstrip())
    return out


def _split_comment(line: str) -> tuple[str, str | None]:
    """``line`` as (code, comment); the comment found by Python's tokenizer (not a ``#``
    inside a string), or None."""
    try:
        for token in tokenize.generate_tokens(io.StringIO(line + "\n").readline):
            if token.type == tokenize.COMMENT:
                return line[: token.start[1]], token.string
    except (tokenize.TokenError, SyntaxError):  # a piece of a longer statement
        pass
    return line, None


def _code_spans(escaped: str) -> str:
    """Escaped text with its `backticked` parts (code in the plain-text wording) as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped)


def explain(exc: BaseException) -> Explanation | None:
    """The teaching explanation for ``exc``, or None when there is nothing to add.

    >>> explain(ValueError("not JAX's")) is None
    True
    """
    rule = find_rule(exc)
    if rule is None:
        return None
    site = error_site(exc)
    finding = rule.build(exc, site)
    if finding is None:
        return None
    message = str(exc).strip().splitlines()
    return Explanation(
        kind=rule.kind,
        error_type=type(exc).__name__,
        error_message=message[0] if message else "",
        what=finding.what,
        fix=finding.fix,
        docs_url=finding.docs_url,
        user_line=site.line,
        rewritten=finding.rewritten,
    )
