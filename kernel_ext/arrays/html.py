"""A ``ShowRecord`` as static HTML (an expandable tree, each array leaf's line and
drawing) and as text. Everything from the user (keys, reprs, dtypes, names) is escaped."""

from __future__ import annotations

import functools
import html
from collections.abc import Callable

from .draw import ValueRange, draw_info
from .record import ArrayInfo, ShowRecord, TreeNode
from .shards_html import layout_html, layout_text
from .words import count_words, dtype_words, format_bytes, shape_words

MAX_HTML_NODES = 2000  # rows in the static tree; the rest counted
MAX_TEXT_LINES = 200
OPEN_DEPTH = 2  # levels of the static tree drawn open

_STYLE = (
    "<style>.jaxlab-show{font-family:var(--jp-code-font-family,monospace);"
    "font-size:12px;color:var(--jp-ui-font-color1,inherit)}"
    ".jaxlab-show details{margin-left:1em}.jaxlab-show summary{cursor:pointer}"
    ".jaxlab-show .flag{color:var(--jp-error-color1,#d32f2f);font-weight:bold}"
    ".jaxlab-show .dim{opacity:0.7}"
    ".jaxlab-array-legend{color:var(--jp-error-color1,#d32f2f);font-weight:bold}"
    ".jaxlab-array-table td{padding:0 6px;text-align:right;"
    "border:1px solid var(--jp-border-color2,#ddd)}"
    # the dark theme's red 500 reads 4.4:1 on its grey 900: red 300 there (5.4:1)
    'body[data-jp-theme-light="false"] .jaxlab-show .flag,'
    'body[data-jp-theme-light="false"] .jaxlab-array-legend'
    "{color:var(--jp-error-color2,#e57373)}</style>"
)


def flags(node: TreeNode) -> str:
    """``'NaN x3, Inf x1'`` over the subtree, or ``''``."""
    parts = [f"{w} x{n}" for w, n in (("NaN", node.nan), ("Inf", node.inf)) if n]
    return ", ".join(parts)


def array_line(info: ArrayInfo) -> str:
    """``float32 (3, 4) on one device (cpu:0), 48 B; min .., max ..`` in one line."""
    blocks = info.layout.blocks if info.layout is not None else None
    head = _array_head(info.dtype, info.weak, info.shape, info.devices, blocks, info.nbytes)
    if info.note:
        return f"{head}; {info.note}"
    if info.stats is not None:
        return f"{head}; {info.stats.words()}"
    return head


@functools.lru_cache(maxsize=1024)  # a model's leaves share a few heads: 714 layers, two
def _array_head(
    dtype: str,
    weak: bool,
    shape: tuple[int, ...],
    devices: tuple[str, ...],
    blocks: int | None,
    nbytes: int,
) -> str:
    """What an array is and where it lives: ``float32 (3, 4) on one device (cpu:0), 48 B``."""
    if len(devices) == 1:
        where = f"one device ({devices[0]})"
    elif blocks is not None:
        where = f"{len(devices)} devices, {blocks} block(s)"
    else:
        where = ", ".join(devices) if len(devices) <= 2 else f"{len(devices)} devices"
    head = f"{dtype_words(dtype, weak)} {shape_words(shape)}"
    if where:
        head += f" on {where}"
    return head + f", {format_bytes(nbytes)}"


def _summary(node: TreeNode) -> str:
    e = html.escape
    key = e(node.key or node.path or "value")
    label = f' <span class="dim">{e(node.label)}</span>'
    flag = flags(node)
    flag_html = f' <span class="flag">{e(flag)}</span>' if flag else ""
    if node.array is not None:
        return f"<b>{key}</b>{label} {e(node.array.line)}{flag_html}"
    if node.is_leaf and not node.hidden:
        return f"<b>{key}</b>{label} <code>{e(node.value)}</code>"
    size = f"{count_words(node.params)} values, {format_bytes(node.bytes)}"
    return f'<b>{key}</b>{label} <span class="dim">{e(size)}</span>{flag_html}'


RangeOf = Callable[[str], "ValueRange | None"]  # a leaf's path -> its fixed colour range


def first_flagged(root: TreeNode) -> TreeNode | None:
    """The first array leaf holding a NaN or Inf, depth first (the one a view opens on)."""
    if not (root.nan or root.inf):
        return None
    return next((n for n in root.nodes() if n.array is not None and (n.nan or n.inf)), None)


def _node_html(node: TreeNode, depth: int, budget: list[int], range_of: RangeOf | None) -> str:
    budget[0] -= 1
    flagged = bool(node.nan or node.inf)  # a NaN's path is drawn open, however deep
    if node.array is not None:
        fixed = range_of(node.path) if range_of is not None else None
        drawing = draw_info(node.array, fixed) + layout_html(node.array.layout)
        if drawing:
            is_open = " open" if depth <= OPEN_DEPTH or flagged else ""
            return f"<details{is_open}><summary>{_summary(node)}</summary>{drawing}</details>"
        return f'<div style="margin-left:1em">{_summary(node)}</div>'
    if node.is_leaf and not node.hidden:
        return f'<div style="margin-left:1em">{_summary(node)}</div>'
    kids = []
    for child in node.children:
        if budget[0] <= 0:
            break
        kids.append(_node_html(child, depth + 1, budget, range_of))
    more = len(node.children) - len(kids) + node.hidden
    if more:
        kids.append(f'<div class="dim" style="margin-left:1em">… {more} more</div>')
    is_open = " open" if depth < OPEN_DEPTH or flagged else ""
    return f"<details{is_open}><summary>{_summary(node)}</summary>{''.join(kids)}</details>"


def tree_html(record: ShowRecord, range_of: RangeOf | None = None) -> str:
    """The tree as HTML; ``range_of(path)`` fixes a leaf's colour range (a live view's)."""
    e = html.escape
    root = record.root
    body = _node_html(root, 0, [MAX_HTML_NODES], range_of)
    foot = [f"{record.leaves} array leaves" if record.leaves != 1 else ""]
    if record.copied_bytes:
        foot.append(f"{record.copied_bytes:,} bytes copied to the host for this view")
    foot += list(record.notes)
    foot_html = e("; ".join(f for f in foot if f))
    return f'<div class="jaxlab-show">{_STYLE}{body}<div class="dim">{foot_html}</div></div>'


def tree_text(record: ShowRecord) -> str:
    lines: list[str] = []

    def add(node: TreeNode, depth: int) -> None:
        if len(lines) >= MAX_TEXT_LINES:
            return
        pad = "  " * depth
        key = node.key or node.path or "value"
        flag = flags(node)
        if node.array is not None:
            text = f"{pad}{key}: {node.array.line}"
            if node.array.layout is not None:
                text += "".join(f"\n{pad}  {line}" for line in layout_text(node.array.layout))
        elif node.is_leaf and not node.hidden:
            text = f"{pad}{key}: {node.label} {node.value}"
        else:
            text = (
                f"{pad}{key}: {node.label}, {count_words(node.params)} values, "
                f"{format_bytes(node.bytes)}"
            )
            if flag:
                text += f" [{flag}]"
        lines.append(text)
        for child in node.children:
            add(child, depth + 1)

    add(record.root, 0)
    total = record.root.count() if len(lines) >= MAX_TEXT_LINES else len(lines)
    if total > len(lines):
        lines.append(f"… {total - len(lines)} more node(s)")
    lines += list(record.notes)
    return "\n".join(lines)
