"""Graph → DOT → SVG with Graphviz's ``dot``, under layout and time limits.

Every piece of text that reaches DOT goes through :func:`_html` (labels are HTML-like,
so ``<``, ``>``, ``&`` and quotes are entities) or :func:`_quoted` (attribute strings),
both without control characters (``dot`` rejects them: they are written ``\\x01``).
Text is drawn at 14 px for titles and 12 px for every other row (Graphviz's points at
72 dpi are the SVG's user units); each node's tooltip holds its raw JAX form, type,
source line, value and adjoint, one per line. Arguments not differentiated and
equations that reach no output are greyed; a loop's carry is a dashed loop-back edge.
A node's ``tag`` is a badge in the tag's colour (:func:`tag_colour`, the same in every
graph) with a border to match: ``%grad --split`` links each residual to the primal node
that computed it that way.
The kernel never hangs on a drawing: ``dot`` runs with ``nslimit``/``mclimit`` under the
limits of :mod:`budgeted` (its own CPU time, a busy machine's wait not counted; given up
as hung when it computes nothing for the explorer's time limit; a wall-clock limit), and
the mimebundle falls back to the text view with a message.
"""

from __future__ import annotations

import hashlib
import html
import os
import re
import shutil
import subprocess
import unicodedata
from collections import Counter, defaultdict
from typing import Any

from . import model as m
from .budgeted import Overrun, run_budgeted

# dot's budget in CPU seconds of its own process, and the wall-clock time after which a
# dot that computes nothing is given up as hung: the explorer's limit too (budgeted.py).
DOT_TIMEOUT_S = float(os.environ.get("JAXLAB_DOT_TIMEOUT", "20"))
INSTALL_HINT = (
    "Graphviz's `dot` is not installed: `sudo apt-get install graphviz`, "
    "`brew install graphviz` or `conda install -c conda-forge graphviz`; showing the text view"
)

# Layout limits: network-simplex and mincross iterations bounded, straight-ish edges.
_LAYOUT_ARGS = ("-Gnslimit=2", "-Gnslimit1=2", "-Gmclimit=0.5", "-Gsearchsize=10")

_FILL = {
    m.INPUT: "#d9f2d9",
    m.CONST: "#eeeeee",
    m.OUTPUT: "#fde9b8",
    m.COLLAPSED: "#e8e1f5",
    m.SEGMENT: "#e8e1f5",
}
_PHASE_FILL = {m.FORWARD: "#dbe8fb", m.BACKWARD: "#fbdcdc", None: "#ffffff"}
_PHASE_BORDER = {m.FORWARD: "#3b6fb6", m.BACKWARD: "#b63b3b", None: "#7a7a7a"}
# Greyed nodes: fixed (not differentiated) arguments and unused equations. The grey text
# keeps 4.5:1 contrast on its fill.
_GREY_FILL, _GREY_TEXT, _GREY_BORDER = "#f2f2f2", "#5f5f5f", "#9a9a9a"
_CARRY = "#7b4fb0"
# Two programs compared (graph/diff.py, Node.diff): border colour and the word drawn.
DIFF_COLOURS = {"added": "#1a7f37", "removed": "#cf222e", "changed": "#b07800", "holds": "#b07800"}
DIFF_WORDS = {
    "added": "added",
    "removed": "removed",
    "changed": "changed",
    "holds": "holds a difference",
}
# Font sizes in points = px in the SVG: titles, other rows (issue 11: readable at 1280x720).
TITLE_PT, ROW_PT = 14, 12
_ROW = f'<font point-size="{ROW_PT}"'
# Badge colours, cycling: white bold text on each keeps at least 5:1 contrast, and each
# keeps 4:1 as a border on the light node fills, so they read in light and dark themes.
TAG_COLOURS = (
    "#0b62a4",
    "#b34700",
    "#1a7f37",
    "#a3367a",
    "#7b5c00",
    "#6a3d9a",
    "#00727f",
    "#8c2f39",
)


class RenderError(RuntimeError):
    """The graph could not be laid out; the message says why in one line."""


class DotMissing(RenderError):
    pass


class DotTimeout(RenderError):
    pass


def _printable(text: str) -> str:
    """``text`` without control characters, which ``dot`` rejects (a function named
    ``"f\\x01"``): whitespace becomes a space, the others their Python escape ``\\x01``."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch.isprintable():
            out.append(ch)
        elif ch in "\t\n\r":
            out.append(" ")
        elif unicodedata.category(ch) in ("Cc", "Cs", "Co", "Cn"):
            out.append(ascii(ch)[1:-1])  # '\\x01', '\\ud800'
        else:
            out.append(ch)  # other unprintables (spaces, format marks) are valid text
    return "".join(out)


def _html(text: str) -> str:
    return html.escape(_printable(text), quote=True)


def _quoted(text: str) -> str:
    """A DOT string attribute: HTML entities for markup (Graphviz passes them to SVG as
    they are), backslashes doubled so that no escape sequence is ours by accident."""
    text = html.escape(_printable(text), quote=True).replace("\\", "\\\\")
    return f'"{text}"'


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _summary(n: m.Node) -> str:
    """What a collapsed node holds; a segment's head already counts its equations."""
    prefix = f"{n.n_equations} eqns: "
    if n.kind == m.SEGMENT and n.summary.startswith(prefix):
        return n.summary[len(prefix) :]
    return n.summary


def tag_colour(tag: str) -> str:
    """The colour of a badge: ``r1``, ``r2``... take the palette in turn (cycling), so a
    badge has one colour in every graph; a tag without a number, a colour of its text."""
    digits = re.search(r"(\d+)$", tag)
    if digits:
        index = int(digits.group(1)) - 1
    else:
        index = int(hashlib.blake2b(tag.encode(), digest_size=2).hexdigest(), 16)
    return TAG_COLOURS[index % len(TAG_COLOURS)]


def _greyed(n: m.Node) -> bool:
    return n.role == m.FIXED or n.unused


def _node_label(n: m.Node) -> str:
    rows: list[str] = []
    head = _html(n.label)
    rows.append(f"<b>{head}</b>" if n.kind in (m.EQUATION, m.COLLAPSED, m.SEGMENT) else head)
    grey = _greyed(n)
    muted = _GREY_TEXT if grey else "#555555"
    if n.kind in (m.COLLAPSED, m.SEGMENT) and n.summary:
        rows.append(f"{_ROW}>{_html(_summary(n))}</font>")
    if n.params:
        rows.append(f'{_ROW} color="{muted}">{_html(n.params)}</font>')
    if n.types:
        rows.append(f'{_ROW} color="{muted}">{_html(" ".join(n.types))}</font>')
    if n.value is not None:
        rows.append(f"{_ROW}>= {_html(_value_text(n.value))}</font>")
    if n.adjoint is not None and n.role != m.FIXED:  # a fixed argument has no adjoint
        red = _GREY_TEXT if grey else "#b63b3b"  # an unused equation's adjoint, greyed
        rows.append(f'{_ROW} color="{red}">∂ {_html(_value_text(n.adjoint))}</font>')
    if n.role == m.FIXED:
        rows.append(f'{_ROW} color="{_GREY_TEXT}"><i>fixed: not differentiated</i></font>')
    if n.unused:
        rows.append(f'{_ROW} color="{_GREY_TEXT}"><i>unused: reaches no output</i></font>')
    if n.residual:
        rows.append(f'{_ROW} color="#c26a00">saved for backward</font>')
    if n.diff in DIFF_WORDS:
        rows.append(f'{_ROW} color="{DIFF_COLOURS[n.diff]}"><i>{DIFF_WORDS[n.diff]}</i></font>')
    if n.tag:
        return f"<{_with_badge(rows, n.tag)}>"
    return "<" + "<br/>".join(rows) + ">"


def _value_text(v: m.ValueSummary) -> str:
    """A value or adjoint row; one stacked over a scan's iterations says how many."""
    return f"{v.text()} ×{v.iterations} iterations" if v.iterations else v.text()


def _with_badge(rows: list[str], tag: str) -> str:
    """The node's rows under its title, with the tag as a badge beside the title."""
    # The badge's cell has a fixed size: a wider row below would otherwise stretch its
    # background. Spacer cells either side take that extra width instead.
    width = round(len(_printable(tag)) * _TITLE_EM * ROW_PT + 8)
    badge = (
        f'<td bgcolor="{tag_colour(tag)}" fixedsize="true" width="{width}" '
        f'height="{ROW_PT + 6}">{_ROW} color="#ffffff"><b>{_html(tag)}</b></font></td>'
    )
    table = [
        '<table border="0" cellborder="0" cellspacing="0" cellpadding="0">',
        f'<tr><td></td><td align="right">{rows[0]} </td>{badge}<td></td></tr>',
    ]
    if rows[1:]:
        table.append(f'<tr><td colspan="4">{"<br/>".join(rows[1:])}</td></tr>')
    return "".join(table) + "</table>"


# Average glyph widths (em) of a browser's sans-serif, a little generous: dot measures with
# Helvetica's metrics, narrower than what the browser draws, so each box is sized by these.
_TITLE_EM, _ROW_EM, _PAD_PX = 0.68, 0.62, 24


def _min_width(n: m.Node) -> float:
    """The box width (inches) that holds the node's widest row as a browser draws it."""
    title = len(_printable(n.label)) * _TITLE_EM * TITLE_PT
    if n.tag:  # the badge beside the title, with its padding
        title += (len(_printable(n.tag)) + 2) * _ROW_EM * ROW_PT
    texts = [" ".join(n.types), n.params, _summary(n) if n.summary else ""]
    texts += [f"= {_value_text(n.value)}"] if n.value is not None else []
    texts += [f"∂ {_value_text(n.adjoint)}"] if n.adjoint is not None else []
    texts += ["fixed: not differentiated"] if n.role == m.FIXED else []
    texts += ["unused: reaches no output"] if n.unused else []
    texts += ["saved for backward"] if n.residual else []
    texts += [DIFF_WORDS.get(n.diff, "")]
    widest = max([title, *(len(_printable(t)) * _ROW_EM * ROW_PT for t in texts)])
    # dot centres each row by its own narrower measure, so the row's far end reaches
    # further right than half the browser's width: 1.2x leaves room for that shift.
    scale = 1.45 if n.kind == m.PORT else 1.0  # an ellipse's text spans ~1/√2 of it
    return (widest * 1.2 + _PAD_PX) * scale / 72


def _tooltip(n: m.Node) -> str:
    """The node's hover text, one fact a line: label, raw JAX form, type, source, value,
    adjoint, and why it is greyed. Each line is escaped; ``&#10;`` breaks the lines."""
    lines = [n.label]
    if n.raw and n.raw != n.label:
        lines.append(f"jax: {n.raw}")
    if n.types:
        lines.append(" ".join(n.types))
    if n.source:
        lines.append(n.source)
    if n.value is not None:
        lines.append(f"value = {_value_text(n.value)}")
    if n.adjoint is not None and n.role != m.FIXED:
        lines.append(f"adjoint ∂ = {_value_text(n.adjoint)}")
    if n.role == m.FIXED:
        lines.append("fixed: not differentiated, so it has no ∂ row")
    if n.unused:
        lines.append("unused: its result reaches no output")
    if n.tag:
        lines.append(f"{n.tag}: the same badge marks the same value in the other graphs")
    if n.diff in DIFF_WORDS:
        lines.append(f"{DIFF_WORDS[n.diff]} (compared with the other program)")
    return '"' + "&#10;".join(_quoted(line)[1:-1] for line in lines) + '"'


def _node_attrs(n: m.Node) -> str:
    if n.kind == m.PORT:
        fill, shape = "#f7f7f7", "ellipse"
    else:
        fill = _FILL.get(n.kind, _PHASE_FILL.get(n.phase, "#ffffff"))
        # Outputs are boxes too: a cds arrow's point cut into long labels.
        shape = {m.COLLAPSED: "box3d", m.SEGMENT: "box3d"}.get(n.kind, "box")
    color = "#c26a00" if n.residual else _PHASE_BORDER.get(n.phase, "#7a7a7a")
    attrs = [f"label={_node_label(n)}", f"shape={shape}", f"width={_min_width(n):.2f}"]
    if _greyed(n):
        fill, color = _GREY_FILL, _GREY_BORDER
        style = "filled,dashed" if shape == "ellipse" else "rounded,filled,dashed"
        attrs += [f'style="{style}"', f'fontcolor="{_GREY_TEXT}"']
    if n.tag:
        color = tag_colour(n.tag)
    if n.diff in DIFF_COLOURS:
        color = DIFF_COLOURS[n.diff]
        if n.diff == "removed":
            attrs.append('style="rounded,filled,dashed"')
    attrs += [f'fillcolor="{fill}"', f'color="{color}"']
    if n.tag or n.diff in DIFF_COLOURS:
        attrs.append("penwidth=2.5")
    elif n.residual:
        attrs.append("penwidth=2")
    elif n.kind == m.OUTPUT:
        attrs.append("penwidth=2")  # outputs stand out by a heavier border
    attrs.append(f"tooltip={_tooltip(n)}")
    attrs.append(f"id={_quoted('node_' + n.id)}")
    return " ".join(attrs)


def _legend(graph: m.Graph) -> list[str]:
    """Heading rows that say what the colours and the value rows mean (only those drawn)."""
    nodes = graph.nodes
    rows: list[str] = []
    phases = {n.phase for n in nodes}
    if m.FORWARD in phases or m.BACKWARD in phases:
        row = (
            f'<font color="{_PHASE_BORDER[m.FORWARD]}">■</font> forward pass   '
            f'<font color="{_PHASE_BORDER[m.BACKWARD]}">■</font> backward pass'
        )
        if any(n.residual for n in nodes):
            row += '   <font color="#c26a00">▢</font> orange border: kept for the backward pass'
        rows.append(row)
    values = []
    if any(n.value is not None for n in nodes):
        values.append("= value")
    if any(n.adjoint is not None for n in nodes):
        values.append('<font color="#b63b3b">∂ adjoint</font> (∂output/∂node)')
    if values:
        rows.append(", ".join(values) + ": a number, or μ mean [min, max] of an array")
    greyed = []
    if any(n.role == m.FIXED for n in nodes):
        greyed.append("arguments held fixed (not differentiated)")
    if any(n.unused for n in nodes):
        greyed.append("equations whose results reach no output")
    if greyed:
        rows.append(f'<font color="{_GREY_TEXT}">grey, dashed: {" and ".join(greyed)}</font>')
    drawn = {n.diff for n in nodes} | {c.diff for c in graph.clusters}
    marks = [
        f'<font color="{DIFF_COLOURS[k]}">■</font> {word}' + (" (dashed)" if k == "removed" else "")
        for k, word in DIFF_WORDS.items()
        if k in drawn
    ]
    if marks:
        rows.append("compared: " + "   ".join(marks))
    if any(e.kind == m.CARRY for e in graph.edges):
        rows.append(
            f'<font color="{_CARRY}">dashed arrow "carry"</font>: '
            "a loop body's result fed back to it for the next iteration"
        )
    return [f"{_ROW}>{row}</font>" for row in rows]


def graph_to_dot(
    graph: m.Graph, rankdir: str = "TB", *, heading: bool = True, compact: bool = False
) -> str:
    """The DOT text of ``graph``: deterministic, every user string escaped. ``rankdir``
    ``"LR"`` lays it out left to right; without ``heading`` the drawing has no title,
    notes or legend (a page that says them once, ``%grad --split``); ``compact`` packs
    boxes closer (a program that must fit a projector's screen)."""
    if rankdir not in ("TB", "LR"):
        raise ValueError(f"rankdir must be TB or LR, not {rankdir!r}")
    by_cluster: dict[str | None, list[m.Node]] = defaultdict(list)
    for n in graph.nodes:
        by_cluster[n.cluster].append(n)
    children: dict[str | None, list[m.Cluster]] = defaultdict(list)
    for c in graph.clusters:
        children[c.parent].append(c)

    title = [f"<b>{_html(graph.title)}</b>", _count(graph.n_equations, "equation")]
    title += [f'<font color="#a05a00">{_html(note)}</font>' for note in graph.notes]
    title += _legend(graph)
    label = "".join(f'{row}<br align="left"/>' for row in title) if heading else ""
    spacing = "nodesep=0.12 ranksep=0.22" if compact else "ranksep=0.4"
    lines = [
        "digraph jaxpr {",
        # A transparent background: the page's shows through (light or dark theme).
        f"  graph [rankdir={rankdir} fontname=Helvetica fontsize={TITLE_PT} newrank=true "
        f'{spacing} labelloc=t labeljust=l bgcolor="transparent" label=<{label}>];',
        # A wide margin: browsers' sans-serif runs wider than dot's Helvetica metrics,
        # and the text must stay inside its box.
        '  node [shape=box style="rounded,filled" fontname=Helvetica '
        f'fontsize={TITLE_PT} height=0.3 margin="{"0.12,0.04" if compact else "0.2,0.06"}"];',
        f'  edge [arrowsize=0.6 color="#666666" fontname=Helvetica fontsize={ROW_PT}];',
    ]

    def emit(cluster: str | None, indent: str) -> None:
        for n in by_cluster.get(cluster, []):
            lines.append(f"{indent}{_quoted(n.id)} [{_node_attrs(n)}];")
        for c in children.get(cluster, []):
            lines.append(f"{indent}subgraph {_quoted('cluster_' + c.id)} {{")
            eqns = _count(c.n_equations, "eqn")
            label = f"<b>{_html(c.label)}</b> {_ROW}>{eqns}</font>"
            colour, width = "#8a8a8a", ""
            if c.diff in DIFF_COLOURS:  # a box that holds a difference, marked outside
                colour, width = DIFF_COLOURS[c.diff], " penwidth=2.5;"
                label += f' {_ROW} color="{colour}"><i>{DIFF_WORDS[c.diff]}</i></font>'
            lines.append(
                f'{indent}  label=<{label}>; style="rounded,dashed"; color="{colour}";{width} '
                f"id={_quoted('clusterbox_' + c.id)}; tooltip={_quoted(c.label)};"
            )
            emit(c.id, indent + "  ")
            lines.append(f"{indent}}}")

    emit(None, "  ")
    # Many arrays between the same two boxes (a closed program's residuals into another):
    # one edge saying how many, never a dark band of parallel curves (issue 34).
    many = Counter((e.src, e.dst) for e in graph.edges if not e.kind)
    done: set[tuple[str, str]] = set()
    for e in graph.edges:
        if not e.kind and many[(e.src, e.dst)] > 1:
            if (e.src, e.dst) not in done:
                done.add((e.src, e.dst))
                lines.append(
                    f"  {_quoted(e.src)} -> {_quoted(e.dst)} [penwidth=2 "
                    f'label="{many[(e.src, e.dst)]} arrays" class=bundle];'
                )
            continue
        if e.kind == m.CARRY:
            # Loop-back: drawn against the flow, so it must not constrain the ranks.
            lines.append(
                f"  {_quoted(e.src)} -> {_quoted(e.dst)} [style=dashed constraint=false "
                f'color="{_CARRY}" fontcolor="{_CARRY}" label="carry" '
                'tooltip="loop carry: the next iteration\'s input" class=carry];'
            )
        elif e.kind == m.SEEDS:
            lines.append(
                f"  {_quoted(e.src)} -> {_quoted(e.dst)} [style=dotted "
                'tooltip="the seed ∂f/∂f = 1 differentiates this value" class=seeds];'
            )
        else:
            lines.append(f"  {_quoted(e.src)} -> {_quoted(e.dst)};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def dot_executable() -> str | None:
    return shutil.which("dot")


def graph_to_svg(
    graph: m.Graph, timeout: float | None = None, *, rankdir: str = "TB", **options: bool
) -> str:
    """Lay ``graph`` out with ``dot``; :class:`RenderError` if it is missing or too slow."""
    dot = dot_executable()
    if dot is None:
        raise DotMissing(INSTALL_HINT)
    limit = DOT_TIMEOUT_S if timeout is None else timeout
    try:
        done = run_budgeted(
            [dot, "-Tsvg", *_LAYOUT_ARGS], graph_to_dot(graph, rankdir, **options).encode(), limit
        )
    except Overrun as e:
        raise DotTimeout(_overrun_words(e, limit, len(graph.nodes))) from e
    if done.returncode != 0:
        raise RenderError(
            f"Graphviz could not draw this graph; showing the text view. {_said(done)}"
        )
    svg = done.stdout.decode()
    start = svg.find("<svg")  # drop the XML prolog and doctype: the SVG embeds in HTML
    return svg[start:] if start >= 0 else svg


def _overrun_words(e: Overrun, limit: float, nodes: int) -> str:
    if e.limit == "hung":
        return (
            f"Graphviz's dot made no progress for {e.spent_s:.0f} s (it used "
            f"{e.cpu_used_s or 0:.1f} s of CPU) and was stopped; showing the text view "
            "(check the Graphviz installation: `dot -V`)"
        )
    took = "CPU time" if e.limit == "cpu" else "wall-clock time"
    return (
        f"Graphviz took longer than {limit:g} s of {took} to lay out {nodes} nodes; "
        "showing the text view (try --depth 1 or a smaller --budget)"
    )


def _said(done: subprocess.CompletedProcess[bytes], most: int = 400) -> str:
    """What ``dot`` said on failing, on one line (its messages span several)."""
    words = " ".join(done.stderr.decode(errors="replace").split())
    if not words:
        return f"dot exited with status {done.returncode} and said nothing."
    words = words if len(words) <= most else words[: most - 1] + "…"
    return f"dot said: {words}"


# JupyterLab shows image/svg+xml as an <img>: no tooltips, and the page's theme cannot
# reach it. The same SVG inline in text/html (which JupyterLab and nbconvert prefer) keeps
# each node's <title> tooltip, and in a dark theme is inverted in lightness with its hues
# kept (black text and light fills turn light text and dark fills; the background is
# transparent). image/svg+xml stays in the bundle for frontends without HTML.
THEME_STYLE = (
    "<style>body[data-jp-theme-light='false'] .jaxlab-graph-svg>svg"
    "{filter:invert(0.9) hue-rotate(180deg)}</style>"
)


def svg_html(svg: str) -> str:
    """A Graphviz SVG inline in HTML that follows JupyterLab's light and dark themes."""
    return f'{THEME_STYLE}<div class="jaxlab-graph-svg">{svg}</div>'


def graph_mimebundle(
    graph: m.Graph, timeout: float | None = None, compact: bool = False
) -> dict[str, Any]:
    """SVG (inline in HTML, and as an image) with a text/plain summary; the text view with
    the reason when dot cannot draw. ``compact``: :func:`graph_to_dot`'s."""
    try:
        svg = graph_to_svg(graph, timeout, compact=compact)
        return {"text/html": svg_html(svg), "image/svg+xml": svg, "text/plain": graph.describe()}
    except RenderError as e:
        from .text import jaxpr_text

        view = jaxpr_text(graph.jaxpr, names=graph.input_names())._repr_mimebundle_()
        note = str(e)
        return {
            "text/plain": f"{note}\n{view.get('text/plain', '')}",
            "text/html": f'<p class="jaxlab-note">{_html(note)}</p>' + view.get("text/html", ""),
        }
