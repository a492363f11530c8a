"""Program text as escaped HTML, each token wrapped in a ``<span>`` of its role's class.

The tokenizer is one regular expression whose alternatives are named groups, one per
role; a token of group ``kw`` gets the CSS class ``prefix + "kw"``. Text between tokens
is escaped and kept as it is, so the HTML with its tags removed and entities unescaped
is the text again::

    highlight("let b = sin a", re.compile(r"(?P<kw>\\blet\\b)"), prefix="jx-")
    # '<span class="jx-kw">let</span> b = sin a'
"""

from __future__ import annotations

import html
import re


def highlight(text: str, token: re.Pattern[str], prefix: str) -> str:
    """``text`` as HTML: every match of ``token`` in a span of class ``prefix + group``."""
    out: list[str] = []
    pos = 0
    for m in token.finditer(text):
        out.append(html.escape(text[pos : m.start()]))
        # every alternative of `token` is a named group, so lastgroup names the role
        out.append(f'<span class="{prefix}{m.lastgroup}">{html.escape(m.group())}</span>')
        pos = m.end()
    out.append(html.escape(text[pos:]))
    return "".join(out)
