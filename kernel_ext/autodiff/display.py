"""How a :class:`~jaxlab.autodiff.record.GradReport` looks: a compact table, in text and HTML.

One row for the value, one per derivative leaf (shape, norm, min, max, first entries),
then how the derivative was taken, the finite-difference check, where a NaN was born,
and (with ``graph=True``) the annotated gradient graph below. Everything user-controlled
that reaches HTML is escaped.

>>> print(report_text(grad_report(lambda x: (x ** 2).sum(), jnp.ones(2))))  # doctest: +SKIP
∇ <lambda> w.r.t. x: gradient, reverse mode ...
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .record import GradReport, LeafSummary

_MAX_ROWS = 40  # leaves beyond this are counted, not listed
_MAX_MATRICES = 8  # small matrices drawn whole under the text table
_VALUE_COLUMN = "value or norm"  # a scalar's value, an array's L2 norm


def _num(x: float) -> str:
    # Six significant digits: a float32 shows what it holds, and a tutorial that
    # compares five digits reads them here.
    return f"{x:.6g}"


def _first(s: LeafSummary) -> str:
    if not s.first:
        return ""
    if _matrix(s) is not None:
        return f"{s.shape[0]}×{s.shape[1]}, below"
    more = ", …" if not s.whole else ""
    return "[" + ", ".join(_num(v) for v in s.first) + more + "]"


def _matrix(s: LeafSummary) -> list[list[str]] | None:
    """A small 2-D leaf's entries as rows of text (a 3×3 Jacobian shown whole), else None."""
    if len(s.shape) != 2 or not s.whole:
        return None
    n, m = s.shape
    return [[_num(v) for v in s.first[i * m : (i + 1) * m]] for i in range(n)]


def _inline_matrix(s: LeafSummary) -> str:
    rows = _matrix(s) or []
    return "[" + ", ".join("[" + ", ".join(r) + "]" for r in rows) + "]"


def _matrix_block(name: str, s: LeafSummary) -> list[str]:
    """A small matrix, rows under rows, columns aligned: the text view's picture of it."""
    rows = _matrix(s) or []
    widths = [max(len(r[j]) for r in rows) for j in range(len(rows[0]))] if rows else []
    body = ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines = [f"  {name} ="]
    for i, line in enumerate(body):
        opening = "[[" if i == 0 else " ["
        closing = "]]" if i == len(body) - 1 else "]"
        lines.append(f"    {opening}{line}{closing}")
    return lines


def _plain(line: str) -> str:
    """A line as plain text: code marks (backticks) dropped."""
    return line.replace("`", "")


def _html_line(line: str) -> str:
    """A line as HTML: escaped, with `code` in <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(line))


def _shape(s: LeafSummary) -> str:
    return f"{s.dtype}[{','.join(map(str, s.shape))}]"


_Row = tuple[str, str, str, str, str, str, bool]


def _symbol(report: GradReport) -> str:
    return {"gradient": "∇", "jacobian": "J", "hessian": "H", "hvp": "H·v"}.get(report.kind, "∂")


def _rows(report: GradReport) -> list[_Row]:
    # A derivative row carries the heading's symbol (∇ w, J x['a']) so that it does not
    # read as the argument's own value.
    named = [(s.path, s) for s in report.value_summary()]
    named += [(f"{_symbol(report)} {s.path}", s) for s in report.leaves()]
    rows: list[_Row] = []
    for name, s in named:
        if s.shape == ():  # a scalar has a value, not a range or entries
            rows.append((name, _shape(s), _num(s.first[0]), "", "", "", s.finite))
        else:
            rows.append(
                (name, _shape(s), _num(s.norm), _num(s.min), _num(s.max), _first(s), s.finite)
            )
    return rows


def _heading(report: GradReport) -> str:
    return f"{_symbol(report)} {report.fun_name} w.r.t. {', '.join(report.names)}: {report.kind}"


def _lines(report: GradReport) -> list[str]:
    """The sentences under the table, with code in backticks (see _plain, _html_line)."""
    lines = [f"how: {report.why}"] if report.why else []
    lines += [f"note: {n}" for n in report.notes]
    if report.check is not None:
        lines.append(report.check.text())
    if report.nonfinite is not None:
        lines.append(report.nonfinite.markdown())
    return lines


def _matrices(report: GradReport) -> list[tuple[str, LeafSummary]]:
    """The derivative leaves small enough to show whole as matrices."""
    return [(f"{_symbol(report)} {s.path}", s) for s in report.leaves() if _matrix(s) is not None]


def report_bundle(report: GradReport) -> dict[str, str]:
    """text/plain and text/html, from one pass over the report's leaves."""
    rows = _rows(report)
    return {"text/plain": _text(report, rows), "text/html": _html(report, rows)}


def report_text(report: GradReport) -> str:
    return _text(report, _rows(report))


_HEADER = ("", "shape", _VALUE_COLUMN, "min", "max", "first entries")


def _columns(rows: list[_Row]) -> list[int]:
    """The table's columns that say something: min, max and first entries only where a
    row has them (a table of scalars has a value column, no empty ones)."""
    return [i for i in range(6) if i < 3 or any(r[i] for r in rows)]


def _text(report: GradReport, rows: list[_Row]) -> str:
    shown = rows[:_MAX_ROWS]
    header: _Row = (*_HEADER, True)
    table = [header, *shown]
    keep = _columns(shown)
    widths = {i: max(len(str(r[i])) for r in table) for i in keep}
    out = [_heading(report)]
    for r in table:
        cells = [str(r[i]).ljust(widths[i]) for i in keep]
        flag = "" if r[6] else "  ← non-finite"
        out.append("  " + "  ".join(cells).rstrip() + flag)
    if len(rows) > _MAX_ROWS:
        out.append(f"  … {len(rows) - _MAX_ROWS} more leaves")
    for name, s in _matrices(report)[:_MAX_MATRICES]:
        out += _matrix_block(name, s)
    out += [_plain(line) for line in _lines(report)]
    return "\n".join(out)


# JupyterLab's colours where they exist (light and dark themes), fixed ones elsewhere.
# JupyterLab right-aligns every table cell: names and entries are put back on the left.
_STYLE = (
    "<style>.jaxlab-grad table{border-collapse:collapse;font-family:monospace;font-size:12px;"
    "margin:4px 0}"
    ".jaxlab-grad td,.jaxlab-grad th{padding:2px 8px;text-align:right;white-space:nowrap;"
    "border-bottom:1px solid var(--jp-border-color2,#ddd)}"
    ".jaxlab-grad td:first-child,.jaxlab-grad th:first-child,.jaxlab-grad td:last-child,"
    ".jaxlab-grad th:last-child{text-align:left}"
    ".jaxlab-grad .bad{color:var(--jp-error-color1,#b00020);font-weight:bold}"
    ".jaxlab-grad .ok{color:var(--jp-success-color1,#1b5e20)}"
    ".jaxlab-grad .note{font-size:12px;margin:2px 0}"
    ".jaxlab-grad table.matrix{margin:0;border-left:1px solid;border-right:1px solid}"
    ".jaxlab-grad table.matrix td{border:none;padding:0 4px;text-align:right}</style>"
)


def _html(report: GradReport, rows: list[_Row]) -> str:
    esc = html.escape
    parts = [_STYLE, '<div class="jaxlab-grad">', f"<b>{esc(_heading(report))}</b>", "<table>"]
    matrices = dict(_matrices(report))
    shown = rows[:_MAX_ROWS]
    keep = _columns(shown)
    if any(r[0] in matrices for r in shown) and 5 not in keep:
        keep.append(5)
    parts.append("<tr>" + "".join(f"<th>{esc(_HEADER[i])}</th>" for i in keep) + "</tr>")
    for r in shown:
        cls = "" if r[6] else ' class="bad"'
        cells = [f"<td>{esc(str(r[i]))}</td>" for i in keep if i < 5]
        if 5 in keep:
            small = matrices.get(r[0])
            cells.append(f"<td>{_html_matrix(small) if small else esc(r[5])}</td>")
        parts.append(f"<tr{cls}>" + "".join(cells) + "</tr>")
    parts.append("</table>")
    if len(rows) > _MAX_ROWS:
        parts.append(f'<p class="note">… {len(rows) - _MAX_ROWS} more leaves</p>')
    for line in _lines(report):
        cls = "note"
        if report.check is not None and line == report.check.text():
            cls += " ok" if report.check.passed else " bad" if report.check.failed else ""
        if report.nonfinite is not None and line == report.nonfinite.markdown():
            cls += " bad"
        parts.append(f'<p class="{cls}">{_html_line(line)}</p>')
    if report.graph is not None:
        parts.append(graph_html(report.graph))
    parts.append("</div>")
    return "".join(parts)


def _html_matrix(s: LeafSummary) -> str:
    rows = _matrix(s) or []
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows
    )
    return f'<table class="matrix">{body}</table>'


def graph_html(graph: Any) -> str:
    """A Graph's own rendering (SVG), or its text when Graphviz cannot lay it out (the
    Graph's mimebundle already falls back, with the reason, when ``dot`` is missing or slow)."""
    bundle = graph._repr_mimebundle_()
    if "text/html" in bundle:  # the SVG inline, following the theme (or the text view)
        return f"<div>{bundle['text/html']}</div>"
    return f"<pre>{html.escape(bundle.get('text/plain', ''))}</pre>"
