// KeyLineage: the session's PRNG key forest, live. No imports, no network.
// State (synced from Python, see widgets/key_lineage.py):
//   items:   [{id, parent, kind: "key"|"consume"|"group", label, where, code, cell,
//              reused, count, traced}]   (parents come before their children)
//   reuses:  [{key, kind, message, first, second}]
//   summary: {keys, events, reuses, unseen, hidden, by_site, dropped, cells: ["In[3]", ...]}
//   expanded (written here): the call-site row whose keys to send; detail: those keys

/**
 * @param {string} tag
 * @param {string} [cls]
 * @param {string} [text]
 * @returns {HTMLElement}
 */
function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text; // never innerHTML: code is user text
  return node;
}

/** "1 reuse", "2 reuses". */
function plural(count, word) {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
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
  for (const use of uses) {
    box.append(h("div", "", `Consumed by ${use.label} at ${use.where}`));
    if (use.code) box.append(h("code", "jaxlab-kl-code", use.code));
  }
}

/** The keys of one call site, sent by the kernel on demand (model "detail"). */
function siteDetail(box, model) {
  const rows = model.get("detail") || [];
  if (!rows.length) return;
  const list = h("ul", "jaxlab-kl-site-detail");
  for (const row of rows) {
    const li = h("li", row.reused ? "jaxlab-kl-reused" : "", `${row.kind === "consume" ? "  ▸ " : "● "}${row.label}`);
    li.append(h("span", "jaxlab-kl-where", ` ${row.where}`));
    list.append(li);
  }
  box.append(h("div", "", `Newest ${rows.filter((r) => r.kind === "key").length} keys made here:`), list);
}

function draw(model, el, state) {
  const items = model.get("items") || [];
  const reuses = model.get("reuses") || [];
  const summary = model.get("summary") || {};
  el.replaceChildren();
  const root = h("div", "jaxlab-kl");
  const bar = h("div", "jaxlab-kl-bar");
  let text = `${plural(summary.keys || 0, "key")} · ${plural(summary.events || 0, "event")} · ${plural(summary.reuses || 0, "reuse")}`;
  if (summary.by_site) text += " · drawn by call site";
  if (summary.hidden) text += ` · ${summary.hidden} more not drawn`;
  if (summary.dropped) text += ` · ${summary.dropped} oldest forgotten`;
  if (summary.unseen) text += ` · ${plural(summary.unseen, "key")} of unknown origin (made before tracking, or by compiled code that ran unseen)`;
  bar.append(h("span", "jaxlab-kl-summary", text));
  const filter = h("select", "jaxlab-kl-cell");
  filter.append(new Option("all cells", ""));
  for (const cell of summary.cells || []) filter.append(new Option(cell, cell));
  filter.value = state.cell;
  filter.addEventListener("change", () => {
    state.cell = filter.value;
    draw(model, el, state);
  });
  bar.append(filter);
  root.append(bar);
  if (reuses.length) {
    const list = h("ul", "jaxlab-kl-reuses");
    for (const r of reuses.slice(0, 20)) list.append(h("li", "", r.message));
    root.append(list);
  }
  const body = h("div", "jaxlab-kl-body");
  const tree = h("div", "jaxlab-kl-tree");
  const box = h("div", "jaxlab-kl-detail", "Choose a key to see where it was made and consumed.");
  const keep = visible(items, state.cell);
  const lists = new Map([[null, h("ul")]]);
  const kids = new Map();
  for (const item of items) kids.set(item.parent, (kids.get(item.parent) || 0) + 1);
  for (const item of items) {
    if (!keep.has(item.id)) continue;
    const parentList = lists.get(item.parent) || lists.get(null);
    const li = h("li");
    const row = h("div", `jaxlab-kl-row jaxlab-kl-${item.kind}`);
    row.dataset.id = item.id;
    const open = !state.closed.has(item.id);
    const toggle = h("span", "jaxlab-kl-toggle", kids.get(item.id) ? (open ? "▾" : "▸") : "");
    const label = h("span", item.reused ? "jaxlab-kl-label jaxlab-kl-reused" : "jaxlab-kl-label", item.label);
    row.append(toggle, label, h("span", "jaxlab-kl-where", item.where));
    toggle.addEventListener("click", (event) => {
      event.stopPropagation();
      if (state.closed.has(item.id)) state.closed.delete(item.id);
      else state.closed.add(item.id);
      draw(model, el, state);
    });
    row.addEventListener("click", () => {
      for (const r of tree.querySelectorAll(".jaxlab-kl-selected")) r.classList.remove("jaxlab-kl-selected");
      row.classList.add("jaxlab-kl-selected");
      state.selected = item.id;
      detail(box, item, items);
      if (summary.by_site && item.kind === "key") {
        // detail on demand: the kernel sends this call site's keys (newest first)
        model.set("expanded", item.id);
        model.save_changes();
      }
    });
    li.append(row);
    if (kids.get(item.id)) {
      const sub = h("ul");
      if (!open) sub.hidden = true;
      li.append(sub);
      lists.set(item.id, sub);
    }
    parentList.append(li);
    if (state.selected === item.id) {
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

export default {
  render({ model, el }) {
    const state = { cell: "", closed: new Set(), selected: null };
    const redraw = () => draw(model, el, state);
    redraw();
    model.on("change:items", redraw);
    model.on("change:reuses", redraw);
    model.on("change:summary", redraw);
    model.on("change:detail", redraw);
    return () => {
      model.off("change:detail", redraw);
      model.off("change:items", redraw);
      model.off("change:reuses", redraw);
      model.off("change:summary", redraw);
    };
  },
};
