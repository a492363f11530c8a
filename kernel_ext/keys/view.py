"""Static views of key lineage and key flow: a nested HTML list and plain text.

::

    lineage_html(key_lineage())   # <div class="jaxlab-keys"> with <details> per key
    lineage_text(key_lineage())   # an indented tree

What exported notebooks, GitHub and the docs show; the live view is the ``KeyLineage``
widget. Every user-written text (source lines, names) is escaped.
"""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import TYPE_CHECKING

from .model import plural
from .tree import Forest, TreeItem, lineage_tree

SHOWN_REUSES = 20  # the newest reuses a static view lists (all are counted)

if TYPE_CHECKING:
    from .flow import KeyFlow
    from .record import KeyLineage

_STYLE = (
    "<style>.jaxlab-keys ul{list-style:none;padding-left:1.2em;margin:0}"
    ".jaxlab-keys .reused{color:var(--jp-error-color1,#c62828);font-weight:600}"
    ".jaxlab-keys .where{color:var(--jp-ui-font-color2,#666);font-size:90%}"
    ".jaxlab-keys code{font-size:90%}</style>"
)


def _summary(lineage: KeyLineage, forest: Forest) -> str:
    text = (
        # Counted, not listed: building every record cost a long session's redraw its
        # whole lineage (37 ms a cell after 2,000 cells).
        f"{plural(lineage.size, 'key')}, {plural(lineage.event_count, 'event')}, "
        f"{plural(lineage.reuse_count, 'reuse')}"
    )
    unseen = lineage.unseen
    if unseen:
        text += (
            f"; {plural(unseen, 'key')} of unknown origin (made before tracking began, or by a"
            " compiled function that ran unseen)"
        )
    if forest.by_site:
        text += "; drawn by call site"
    if forest.hidden:
        text += f"; {forest.hidden} more not drawn"
    if lineage.dropped:
        text += f"; {lineage.dropped} oldest keys forgotten"
    return text


def _row(item: TreeItem) -> str:
    cls = ' class="reused"' if item.reused else ""
    mark = "● " if item.kind == "key" else "▸ " if item.kind == "consume" else "… "
    code = f" <code>{escape(item.code)}</code>" if item.code else ""
    return (
        f"<span{cls}>{mark}{escape(item.label)}</span> "
        f'<span class="where">{escape(item.where)}</span>{code}'
    )


def forest_html(forest: Forest) -> str:
    """Nested lists of the forest's rows (parents come before their children). Built by
    a loop over the rows, not a recursive closure: a closure that calls itself is a
    reference cycle holding every row until the collector's next full pass."""
    kids: dict[str | None, list[TreeItem]] = defaultdict(list)
    for item in forest.items:
        kids[item.parent].append(item)
    if not kids.get(None):
        return ""
    parts = ["<ul>"]
    pending = [list(reversed(kids[None]))]  # the siblings still to write, per open list
    while pending:
        siblings = pending[-1]
        if not siblings:
            pending.pop()
            parts.append("</ul>")
            if pending:
                parts.append("</details></li>")
            continue
        item = siblings.pop()
        inner = kids.get(item.id)
        if inner:
            parts.append(f"<li><details open><summary>{_row(item)}</summary><ul>")
            pending.append(list(reversed(inner)))
        else:
            parts.append(f"<li>{_row(item)}</li>")
    return "".join(parts)


def _reuses_html(lineage: KeyLineage) -> str:
    shown = lineage.recent_reuses(SHOWN_REUSES)
    if not shown:
        return ""
    rows = "".join(f'<li class="reused">{escape(r.message())}</li>' for r in shown)
    more = lineage.reuse_count - len(shown)
    tail = f"<p>{plural(more, 'older reuse')} not listed.</p>" if more > 0 else ""
    return f"<p>Reused keys:</p><ul>{rows}</ul>{tail}"


def forest_lineage_html(lineage: KeyLineage, forest: Forest) -> str:
    """The static view of ``lineage`` drawn as ``forest`` (the live view's twin)."""
    return (
        f'{_STYLE}<div class="jaxlab-keys"><p>Key lineage: {escape(_summary(lineage, forest))}</p>'
        f"{_reuses_html(lineage)}{forest_html(forest)}</div>"
    )


def lineage_html(lineage: KeyLineage, max_items: int = 2000) -> str:
    return forest_lineage_html(lineage, lineage_tree(lineage, max_items))


def forest_text(forest: Forest) -> str:
    depth: dict[str, int] = {}
    lines = []
    for item in forest.items:
        d = depth[item.id] = depth.get(item.parent, -1) + 1 if item.parent else 0
        flag = "  REUSED" if item.reused else ""
        lines.append(f"{'  ' * d}{item.label}  ({item.where}){flag}")
    return "\n".join(lines)


def forest_lineage_text(lineage: KeyLineage, forest: Forest) -> str:
    """The text view of ``lineage`` drawn as ``forest``."""
    head = [f"KeyLineage: {_summary(lineage, forest)}"]
    shown = lineage.recent_reuses(SHOWN_REUSES)
    head += [f"  reuse: {r.message()}" for r in shown]
    if lineage.reuse_count > len(shown):
        head.append(f"  ({plural(lineage.reuse_count - len(shown), 'older reuse')} not listed)")
    body = forest_text(forest)
    return "\n".join(head + ([body] if body else []))


def lineage_text(lineage: KeyLineage, max_items: int = 2000) -> str:
    return forest_lineage_text(lineage, lineage_tree(lineage, max_items))


def flow_text(flow: KeyFlow) -> str:
    lines = [
        f"KeyFlow of {flow.name}: {plural(len(flow.keys), 'key')}, "
        f"{plural(len(flow.uses), 'use')}, {plural(len(flow.reuses), 'reuse')}"
    ]
    for r in flow.reuses:
        lines.append(f"  reuse: {r.message()}")
    return "\n".join(lines)


def flow_html(flow: KeyFlow) -> str:
    rows = "".join(
        f"<li>{escape(u.op)} of key {u.key} <span class='where'>{escape(u.site.where)}</span>"
        f"{' (in a loop)' if u.in_loop else ''}</li>"
        for u in flow.uses
    )
    reuses = "".join(f'<li class="reused">{escape(r.message())}</li>' for r in flow.reuses)
    verdict = f"<ul>{reuses}</ul>" if reuses else "<p>No key is reused.</p>"
    return (
        f'{_STYLE}<div class="jaxlab-keys"><p>Key flow of <code>{escape(flow.name)}</code>: '
        f"{plural(len(flow.keys), 'key')}, {plural(len(flow.uses), 'use')}</p>{verdict}"
        f"<ul>{rows}</ul></div>"
    )
