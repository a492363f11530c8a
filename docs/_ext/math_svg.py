"""Math without MathJax: ``$...$`` and ``$$...$$`` drawn as SVG by matplotlib's mathtext.

Sphinx draws math with MathJax from a CDN, and the site loads nothing from the network.
matplotlib (a runtime dependency) typesets the TeX subset the tutorials use (fractions,
Greek, sub- and superscripts, ``\\partial``, ``\\sqrt``) into an SVG that the page embeds
as a ``data:`` image, so the formula works offline and its text stays in ``alt``. A
formula mathtext cannot typeset is shown as its TeX source in code type::

    svg_image(r"\\frac{v^2 \\sin 2\\theta}{g}", display=False)   # '<img class="math" ...>'
"""

from __future__ import annotations

import base64
import functools
import html
import io
import re
from typing import Any

from docutils import nodes

# Body text is about 13 pt; display math a little larger, as in print.
INLINE_PT, DISPLAY_PT = 13, 15
# TeX that mathtext lacks, rewritten to what it has: sized delimiters (\big(, \Bigl|) lose
# their size, \tfrac and \dfrac become \frac, \lVert and \rVert become \Vert.
_SIZED = re.compile(r"\\[Bb]igg?[lrm]?(?![A-Za-z])")
_REWRITES = {r"\lVert": r"\Vert", r"\rVert": r"\Vert", r"\tfrac": r"\frac", r"\dfrac": r"\frac"}


@functools.cache
def _typeset(latex: str, size: int) -> tuple[str, float] | None:
    """``(svg, depth_pt)``, or None when mathtext cannot parse ``latex``."""
    import matplotlib

    matplotlib.use("Agg")  # no display; a docs build is headless
    from matplotlib import mathtext
    from matplotlib.font_manager import FontProperties

    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": "jaxlab", "svg.fonttype": "path"}):
        try:
            depth = mathtext.math_to_image(
                f"${latex}$", buffer, prop=FontProperties(size=size), format="svg"
            )
        except ValueError:  # mathtext's ParseFatalException is a ValueError
            return None
    return buffer.getvalue().decode(), float(depth)


def svg_image(latex: str, display: bool) -> str:
    """An ``<img>`` of the typeset formula, or its TeX source as ``<code>``."""
    latex = " ".join(latex.split())  # mathtext reads one line
    alt = html.escape(latex, quote=True)
    latex = _SIZED.sub("", latex)
    for tex, plain in _REWRITES.items():
        latex = latex.replace(tex, plain)
    typeset = _typeset(latex, DISPLAY_PT if display else INLINE_PT)
    if typeset is None:
        return f'<code class="math">{alt}</code>'
    svg, depth = typeset
    data = base64.b64encode(svg.encode()).decode()
    style = "" if display else f' style="vertical-align: -{depth:.1f}pt"'
    return f'<img class="math" alt="{alt}" src="data:image/svg+xml;base64,{data}"{style}>'


def _visit_inline(self: Any, node: nodes.Element) -> None:
    self.body.append(svg_image(node.astext(), display=False))
    raise nodes.SkipNode


def _visit_block(self: Any, node: nodes.Element) -> None:
    self.body.append(f'<div class="math">{svg_image(node.astext(), display=True)}</div>')
    raise nodes.SkipNode


def setup(app: Any) -> dict[str, Any]:
    app.add_html_math_renderer(
        "mathtext", inline_renderers=(_visit_inline, None), block_renderers=(_visit_block, None)
    )
    return {"parallel_read_safe": True, "parallel_write_safe": True}
