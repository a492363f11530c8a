"""The jaxpr as text (placeholder until the colour HTML view lands)."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class JaxprText:
    text: str

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, str]:
        return {"text/plain": self.text, "text/html": f"<pre>{html.escape(self.text)}</pre>"}


def jaxpr_text(closed_jaxpr: Any) -> JaxprText:
    return JaxprText(str(closed_jaxpr))
