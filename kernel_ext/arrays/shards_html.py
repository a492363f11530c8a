"""A ``ShardLayout`` drawn: the array cut into its blocks (each labelled with the devices
that hold it) beside the mesh, one cell per device with its block, process and bytes.

A block and the mesh cells of the devices holding it share a colour, so a replicated
block reads as one colour repeated along the mesh axis it is replicated over. Every
block carries ``data-index`` (its slice of the whole array) and ``data-devices``; a
block another process holds is hatched and its cell says "elsewhere".
"""

from __future__ import annotations

import html

from .record import Shard, ShardLayout
from .words import format_bytes

BLOCKS_W = 360  # pixels along the drawn array's last axis
BLOCKS_H = 200  # at most, along its first (2-D and more)
BAR_H = 36  # a 1-D array's height
MAX_CELLS = 64  # mesh cells drawn; the rest counted
_PALETTE = (
    "#8dd3c7",
    "#ffffb3",
    "#bebada",
    "#fb8072",
    "#80b1d3",
    "#fdb462",
    "#b3de69",
    "#fccde5",
    "#d9d9d9",
    "#bc80bd",
    "#ccebc5",
    "#ffed6f",
)
_INK = "#222"


def drawn_axes(layout: ShardLayout) -> tuple[int, ...]:
    """The array axes drawn (at most two): split axes first, then the leading others."""
    rest = [i for i in range(len(layout.shape)) if i not in layout.partitioned_axes]
    return tuple(sorted([*layout.partitioned_axes, *rest][:2]))


def _block_colours(layout: ShardLayout) -> dict[tuple[tuple[int, int], ...], str]:
    order = list(dict.fromkeys(s.index for s in layout.shards))
    return {index: _PALETTE[i % len(_PALETTE)] for i, index in enumerate(order)}


def blocks_svg(layout: ShardLayout) -> str:
    """The array's blocks, scaled to its drawn axes, each labelled with its devices."""
    e = html.escape
    axes = drawn_axes(layout)
    colours = _block_colours(layout)
    if len(axes) == 2:
        rows, cols = (layout.shape[a] for a in axes)
        height = min(BLOCKS_H, max(BAR_H, round(BLOCKS_W * rows / max(cols, 1))))
    elif len(axes) == 1:
        rows, cols, height = 1, layout.shape[axes[0]], BAR_H
    else:
        rows, cols, height = 1, 1, BAR_H
    sx, sy = BLOCKS_W / max(cols, 1), height / max(rows, 1)
    holders: dict[tuple[tuple[int, int], ...], list[Shard]] = {}
    for s in layout.shards:
        holders.setdefault(s.index, []).append(s)
    rects = []
    for index, shards in holders.items():
        if len(axes) == 2:
            (r0, r1), (c0, c1) = index[axes[0]], index[axes[1]]
        elif len(axes) == 1:
            (r0, r1), (c0, c1) = (0, 1), index[axes[0]]
        else:
            (r0, r1), (c0, c1) = (0, 1), (0, 1)
        x, y, w, h = c0 * sx, r0 * sy, (c1 - c0) * sx, (r1 - r0) * sy
        ids = ",".join(str(s.device) for s in shards)
        away = all(not s.here for s in shards)
        label = "dev " + ids if len(ids) <= max(4, int(w / 7.5)) else f"{len(shards)} dev"
        tip = f"{shards[0].index_text()} on device(s) {ids}, {format_bytes(shards[0].bytes)} each"
        if away:
            tip += ", held by another process"
        rects.append(
            f'<g class="jaxlab-shard-block" data-index="{e(shards[0].index_text())}" '
            f'data-devices="{ids}" data-here="{int(not away)}">'
            f"<title>{e(tip)}</title>"
            f'<rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" '
            f'fill="{colours[index]}" stroke="{_INK}" stroke-width="1"'
            + (' fill-opacity="0.35" stroke-dasharray="3,2"' if away else "")
            + "/>"
            f'<text x="{x + w / 2:.2f}" y="{y + h / 2 + 4:.2f}" font-size="12" '
            f'text-anchor="middle" fill="{_INK}">{e(label)}</text></g>'
        )
    axis_words = " x ".join(f"axis {a}" for a in axes) or "a scalar"
    return (
        f'<svg class="jaxlab-shard-blocks" width="{BLOCKS_W + 2}" height="{height + 2}" '
        f'viewBox="-1 -1 {BLOCKS_W + 2} {height + 2}" xmlns="http://www.w3.org/2000/svg" '
        f'data-axes="{",".join(map(str, axes))}" aria-label="{e(axis_words)}">'
        f"{''.join(rects)}</svg>"
    )


def mesh_table(layout: ShardLayout) -> str:
    """The mesh as a grid (first axis down, the rest across), one cell per device: its id,
    process, block and bytes, coloured as its block."""
    e = html.escape
    colours = _block_colours(layout)
    ids = list(layout.mesh_devices) or [s.device for s in layout.shards]
    sizes = [k for _, k in layout.mesh_shape] or [len(ids)]
    across = int(len(ids) // sizes[0]) if len(sizes) > 1 else len(ids)
    names = [n for n, _ in layout.mesh_shape]
    many = layout.processes > 1
    cells = []
    for i, device in enumerate(ids[:MAX_CELLS]):
        s = layout.shard_on(device)
        if s is None:
            continue
        where = f"process {s.process}" + ("" if s.here else ", elsewhere") if many else ""
        body = (
            f"<b>device {s.device}</b><br><code>{e(s.index_text())}</code><br>"
            f"{e(format_bytes(s.bytes))}" + (f"<br>{e(where)}" if where else "")
        )
        style = f"background:{colours[s.index]};color:{_INK}"
        if not s.here:
            style += ";opacity:0.55"
        cell = f'<td style="{style}" data-device="{s.device}">{body}</td>'
        cells.append(("<tr>" if i % across == 0 else "") + cell)
    more = len(ids) - MAX_CELLS
    head = ""
    if names:
        down = e(names[0])
        side = e(" x ".join(names[1:])) if len(names) > 1 else ""
        # a 1-D mesh is drawn as one row of cells: its axis runs across
        head = (
            f"<caption>mesh: {down} down, {side} across</caption>"
            if side
            else f"<caption>mesh: {down} across</caption>"
        )
    tail = f'<div class="dim">… {more} more device(s)</div>' if more > 0 else ""
    return f'<table class="jaxlab-shard-mesh">{head}{"".join(cells)}</table>{tail}'


def layout_html(layout: ShardLayout | None) -> str:
    """The layout drawn, or ``''`` for an array on one device (its line says so)."""
    if layout is None:
        return ""
    words = html.escape(layout.words())
    return (
        f'<div class="jaxlab-shards">{_STYLE}<div>{words}</div>'
        f'<div style="display:flex;gap:12px;align-items:flex-start;flex-wrap:wrap">'
        f"{blocks_svg(layout)}{mesh_table(layout)}</div></div>"
    )


def layout_text(layout: ShardLayout) -> list[str]:
    """The layout as lines: its words, then one line per device."""
    lines = [layout.words()]
    for s in layout.shards[:MAX_CELLS]:
        where = (
            ""
            if layout.processes == 1
            else f" (process {s.process}" + (")" if s.here else ", elsewhere)")
        )
        lines.append(f"  device {s.device}{where}: {s.index_text()}, {format_bytes(s.bytes)}")
    if len(layout.shards) > MAX_CELLS:
        lines.append(f"  … {len(layout.shards) - MAX_CELLS} more device(s)")
    return lines


_STYLE = (
    "<style>.jaxlab-shard-mesh{border-collapse:collapse;font-size:12px}"
    ".jaxlab-shard-mesh td{border:1px solid #888;padding:2px 6px;text-align:center}"
    ".jaxlab-shard-mesh code{font-size:12px}"  # a page's own code style may shrink it
    ".jaxlab-shard-mesh caption{caption-side:top;text-align:left;font-size:12px}</style>"
)
