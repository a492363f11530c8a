// KeyLineage: the session's PRNG key forest, live. No imports, no network.
// State (from Python, see widgets/key_lineage.py):
//   state:   {rev, items, reuses, summary}: the state the widget was made with; patches
//            bring this view's copy up to date (set here, never sent back)
//     items:   [{id, parent, kind: "key"|"consume"|"group", label, where, code, cell,
//                reused, count, traced}]   (parents come before their children)
//     reuses:  [{key, kind, message, first, second}]
//     summary: {keys, events, reuses, unseen, hidden, by_site, dropped, cells: ["In[3]"]}
//   custom message {kind: "patch", base, rev, rows, gone, order?, summary, reuses?}: what
//     changed since revision `base` (null: the whole state); asked with {kind: "sync"}
//   {kind: "expand", id} (sent from here): the call-site row whose keys to send; detail
//   _twin_id: names this widget's static twin (widgets/_base.py), hidden while drawn
// Every reader below is total and bounded: a saved or sent state of any shape draws what
// it can (wrong types are dropped, numbers clamped, lists and text cut) and never throws.

const MAX_ROWS = 5000; // rows kept at most (the kernel sends max_items, 2,000 by default)
const MAX_TEXT = 2000; // characters of one text field
const MAX_DEPTH = 64; // nesting drawn at most; deeper rows hang from the 64th level
const MAX_LIST = 200; // reuses, cells and detail rows read at most
const KINDS = new Set(["key", "consume", "group"]);


/** A string of at most MAX_TEXT characters ("" for anything else). */
function str(value, limit = MAX_TEXT) {
  return typeof value === "string" ? value.slice(0, limit) : "";
}

/** A whole number in [0, 1e15] (0 for anything else: NaN, negative, huge, strings). */
function count(value) {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0) return 0;
  return Math.min(Math.floor(value), 1e15);
}

/** An array cut to `limit` entries ([] for anything else). */
function list(value, limit) {
  return Array.isArray(value) ? value.slice(0, limit) : [];
}

/** An object ({} for anything else, arrays included). */
function obj(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? value : {};
}

/** One row, or null when it has no usable id. */
function readRow(value) {
  const raw = obj(value);
  const id = str(raw.id, 64);
  if (!id) return null;
  return {
    id,
    parent: typeof raw.parent === "string" ? raw.parent.slice(0, 64) : null,
    kind: KINDS.has(raw.kind) ? raw.kind : "key",
    label: str(raw.label),
    where: str(raw.where),
    code: str(raw.code),
    cell: typeof raw.cell === "string" ? raw.cell.slice(0, 64) : null,
    reused: raw.reused === true,
    count: count(raw.count),
    traced: raw.traced === true,
  };
}

/** Rows in order, each id once, a parent always an earlier row (else a root). */
function readRows(values) {
  const rows = [];
  const seen = new Set();
  for (const value of list(values, MAX_ROWS)) {
    const row = readRow(value);
    if (!row || seen.has(row.id)) continue;
    if (row.parent !== null && !seen.has(row.parent)) row.parent = null;
    seen.add(row.id);
    rows.push(row);
  }
  return rows;
}

function readSummary(value) {
  const raw = obj(value);
  return {
    keys: count(raw.keys),
    events: count(raw.events),
    reuses: count(raw.reuses),
    unseen: count(raw.unseen),
    hidden: count(raw.hidden),
    dropped: count(raw.dropped),
    by_site: raw.by_site === true,
    cells: list(raw.cells, MAX_LIST).map((c) => str(c, 64)).filter((c) => c),
  };
}

function readReuses(value) {
  return list(value, MAX_LIST).map((r) => ({ message: str(obj(r).message) })).filter((r) => r.message);
}

/** The whole state from the `state` trait (or a full patch). */
function readState(value) {
  const raw = obj(value);
  return {
    rev: count(raw.rev),
    items: readRows(raw.items),
    reuses: readReuses(raw.reuses),
    summary: readSummary(raw.summary),
  };
}

/**
 * A patch applied to `state`: the new state, or null when the patch does not follow it
 * (the view asks for the whole state then).
 */
function applyPatch(state, message) {
  const raw = obj(message);
  const rev = count(raw.rev);
  if (raw.base === null) {
    return readState({ rev, items: raw.rows, reuses: raw.reuses, summary: raw.summary });
  }
  if (typeof raw.base !== "number" || raw.base !== state.rev) return null;
  const byId = new Map(state.items.map((r) => [r.id, r]));
  for (const id of list(raw.gone, MAX_ROWS * 2)) byId.delete(str(id, 64));
  for (const value of list(raw.rows, MAX_ROWS)) {
    const row = readRow(value);
    if (row) byId.set(row.id, row);
  }
  let order = state.items.map((r) => r.id);
  if (Array.isArray(raw.order)) order = list(raw.order, MAX_ROWS).map((id) => str(id, 64));
  const items = readRows(order.map((id) => byId.get(id)).filter((r) => r));
  return {
    rev,
    items,
    reuses: "reuses" in raw ? readReuses(raw.reuses) : state.reuses,
    summary: readSummary(raw.summary),
  };
}

/** "1 reuse", "2 reuses". */
function plural(n, word) {
  return `${n} ${word}${n === 1 ? "" : "s"}`;
}

/** Items shown for a cell: those of the cell and every ancestor they hang from. */
function visible(items, cell) {
  if (!cell) return new Set(items.map((i) => i.id));
  const byId = new Map(items.map((i) => [i.id, i]));
  const keep = new Set();
  for (const item of items) {
    if (item.cell !== cell) continue;
    for (let at = item; at && !keep.has(at.id); at = byId.get(at.parent)) keep.add(at.id);
  }
  return keep;
}

function detail(box, item, items) {
  box.replaceChildren();
  const made = item.kind === "consume" ? "Drawn" : "Made";
  box.append(h("div", item.reused ? "jaxlab-kl-reused" : "", item.label));
  box.append(h("div", "", `${made} at ${item.where}`));
  if (item.code) box.append(h("code", "jaxlab-kl-code", item.code));
  const uses = items.filter((i) => i.parent === item.id && i.kind === "consume");
  for (const use of uses.slice(0, MAX_LIST)) {
    box.append(h("div", "", `Consumed by ${use.label} at ${use.where}`));
    if (use.code) box.append(h("code", "jaxlab-kl-code", use.code));
  }
}

/** The keys of one call site, sent by the kernel on demand (model "detail"). */
function siteDetail(box, model) {
  const rows = list(model.get("detail"), MAX_LIST).map(readRow).filter((r) => r);
  if (!rows.length) return;
  const ul = h("ul", "jaxlab-kl-site-detail");
  for (const row of rows) {
    const li = h("li", row.reused ? "jaxlab-kl-reused" : "", `${row.kind === "consume" ? "  ▸ " : "● "}${row.label}`);
    li.append(h("span", "jaxlab-kl-where", ` ${row.where}`));
    ul.append(li);
  }
  box.append(h("div", "", `Newest ${rows.filter((r) => r.kind === "key").length} keys made here:`), ul);
}

function draw(model, el, view) {
  const { items, reuses, summary } = view.data;
  el.replaceChildren();
  const root = h("div", "jaxlab-kl");
  const bar = h("div", "jaxlab-kl-bar");
  let text = `${plural(summary.keys, "key")} · ${plural(summary.events, "event")} · ${plural(summary.reuses, "reuse")}`;
  if (summary.by_site) text += " · drawn by call site";
  if (summary.hidden) text += ` · ${summary.hidden} more not drawn`;
  if (summary.dropped) text += ` · ${summary.dropped} oldest forgotten`;
  if (summary.unseen) text += ` · ${plural(summary.unseen, "key")} of unknown origin (made before tracking, or by compiled code that ran unseen)`;
  bar.append(h("span", "jaxlab-kl-summary", text));
  const filter = h("select", "jaxlab-kl-cell");
  filter.append(new Option("all cells", ""));
  for (const cell of summary.cells) filter.append(new Option(cell, cell));
  filter.value = view.cell;
  filter.addEventListener("change", () => {
    view.cell = filter.value;
    draw(model, el, view);
  });
  bar.append(filter);
  root.append(bar);
  if (reuses.length) {
    const ul = h("ul", "jaxlab-kl-reuses");
    for (const r of reuses.slice(0, 20)) ul.append(h("li", "", r.message));
    root.append(ul);
  }
  const body = h("div", "jaxlab-kl-body");
  const tree = h("div", "jaxlab-kl-tree");
  const box = h("div", "jaxlab-kl-detail", "Choose a key to see where it was made and consumed.");
  const keep = visible(items, view.cell);
  const lists = new Map([[null, h("ul")]]);
  const depth = new Map();
  const kids = new Map();
  for (const item of items) kids.set(item.parent, (kids.get(item.parent) || 0) + 1);
  for (const item of items) {
    if (!keep.has(item.id)) continue;
    const parentList = lists.get(item.parent) || lists.get(null);
    const level = (depth.get(item.parent) || 0) + 1;
    depth.set(item.id, level);
    const li = h("li");
    const row = h("div", `jaxlab-kl-row jaxlab-kl-${item.kind}`);
    row.dataset.id = item.id;
    const open = !view.closed.has(item.id);
    const toggle = h("span", "jaxlab-kl-toggle", kids.get(item.id) ? (open ? "▾" : "▸") : "");
    const label = h("span", item.reused ? "jaxlab-kl-label jaxlab-kl-reused" : "jaxlab-kl-label", item.label);
    row.append(toggle, label, h("span", "jaxlab-kl-where", item.where));
    toggle.addEventListener("click", (event) => {
      event.stopPropagation();
      if (view.closed.has(item.id)) view.closed.delete(item.id);
      else view.closed.add(item.id);
      draw(model, el, view);
    });
    row.addEventListener("click", () => {
      for (const r of tree.querySelectorAll(".jaxlab-kl-selected")) r.classList.remove("jaxlab-kl-selected");
      row.classList.add("jaxlab-kl-selected");
      view.selected = item.id;
      detail(box, item, items);
      if (summary.by_site && item.kind === "key") {
        // detail on demand: the kernel sends this call site's keys (newest first)
        ask(model, { kind: "expand", id: item.id });
      }
    });
    li.append(row);
    if (kids.get(item.id)) {
      // deeper than MAX_DEPTH, children hang in their parent's list (no deeper nesting)
      const sub = level < MAX_DEPTH ? h("ul") : parentList;
      if (sub !== parentList) {
        if (!open) sub.hidden = true;
        li.append(sub);
      }
      lists.set(item.id, sub);
    }
    parentList.append(li);
    if (view.selected === item.id) {
      row.classList.add("jaxlab-kl-selected");
      detail(box, item, items);
      if (summary.by_site && model.get("expanded") === item.id) siteDetail(box, model);
    }
  }
  tree.append(lists.get(null));
  body.append(tree, box);
  root.append(body);
  el.append(root);
}



/** Send `message` to the kernel; a view without one (a saved notebook) stays as it is. */
function ask(model, message) {
  try {
    model.send(message);
  } catch (error) {
    console.warn("jaxlab: a KeyLineage could not reach its kernel:", error);
  }
}

export default {
  render({ model, el }) {
    const view = { cell: "", closed: new Set(), selected: null, data: readState(null) };
    const redraw = () =>
      guarded(
        model,
        el,
        () => {
          view.data = readState(model.get("state"));
          draw(model, el, view);
        },
        "KeyLineage",
      );
    const onMessage = (message) => {
      // A patch is read like saved state (total, bounded); one that does not follow the
      // state held here asks the kernel for the whole state.
      const raw = obj(message);
      if (raw.kind !== "patch") return;
      const current = readState(model.get("state"));
      if (raw.base !== null && count(raw.rev) <= current.rev) return; // applied by a sibling view
      const next = applyPatch(current, raw);
      if (next === null) ask(model, { kind: "sync" });
      else model.set("state", next); // kept here (and in a saved notebook), never sent back
    };
    redraw();
    model.on("change:state", redraw);
    model.on("change:detail", redraw);
    model.on("msg:custom", onMessage);
    ask(model, { kind: "sync" }); // the kernel's latest (this view may be drawn late)
    return () => {
      model.off("change:state", redraw);
      model.off("change:detail", redraw);
      model.off("msg:custom", onMessage);
    };
  },
};
