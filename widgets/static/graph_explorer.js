// GraphExplorer: a jaxpr graph to open, search and read. No imports, no network.
// State (synced from Python, see widgets/graph_explorer.py):
//   model:  {title, nodes: [{id, kind, label, cluster, primitive, types, source, params,
//            raw, phase, value, adjoint, residual, role, unused, summary}], edges: [{src,
//            dst, kind}], clusters: [{id, primitive, label, parent, n_equations}], notes}
//   opened: [cluster id]          view: {width, height, nodes: {id: [x, y, w, h]},
//                                        edges: [{src, dst, points, kind}], frames: [id]}
// A click on a closed cluster box (or an open cluster's header) sends {type: "toggle"};
// the kernel lays out what is then visible and sends a new view.

const SVG = "http://www.w3.org/2000/svg";
const PAD = 16;

/** @returns {SVGElement} */
function s(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text; // never innerHTML: labels are user text
  return node;
}

/** @returns {HTMLElement} */
function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** Text cut to what fits a box ``width`` px wide at ``px`` per character (the rest is
 * in the tooltip), so nothing crosses a border. */
function clip(text, width, px) {
  const most = Math.max(4, Math.floor((width - 14) / px));
  return text.length <= most ? text : text.slice(0, most - 1) + "…";
}

function rows(n) {
  const out = [];
  if (n.types && n.types.length) out.push(["jaxlab-ge-type", n.types.join(" ")]);
  if (n.value !== null && n.value !== undefined) out.push(["jaxlab-ge-value", "= " + n.value]);
  if (n.adjoint !== null && n.adjoint !== undefined)
    out.push(["jaxlab-ge-adjoint", "∂ " + n.adjoint]);
  return out;
}

function classes(n) {
  const c = ["jaxlab-ge-node", "jaxlab-ge-" + n.kind];
  if (n.phase) c.push("jaxlab-ge-" + n.phase);
  if (n.role) c.push("jaxlab-ge-role-" + n.role);
  if (n.unused) c.push("jaxlab-ge-unused");
  if (n.residual) c.push("jaxlab-ge-residual");
  return c.join(" ");
}

function tooltip(n) {
  const lines = [n.label];
  if (n.raw && n.raw !== n.label) lines.push(n.raw);
  if (n.types && n.types.length) lines.push(n.types.join(" "));
  if (n.source) lines.push(n.source);
  if (n.unused) lines.push("unused: reaches no output");
  if (n.role === "fixed") lines.push("not differentiated: held fixed");
  return lines.join("\n");
}

/** Every node and cluster a query matches: primitive, label, variable id, source line. */
function matches(model, query) {
  const q = query.trim().toLowerCase();
  if (!q) return [];
  const hit = (t) => typeof t === "string" && t.toLowerCase().includes(q);
  return model.nodes
    .filter((n) => hit(n.label) || hit(n.primitive) || hit(n.raw) || hit(n.source) || hit(n.id))
    .map((n) => n.id);
}

function draw(model, el, state) {
  const data = model.get("model") || { nodes: [], edges: [], clusters: [], notes: [] };
  const view = model.get("view") || { nodes: {}, edges: [], frames: [], width: 0, height: 0 };
  const error = model.get("error");
  const byId = new Map(data.nodes.map((n) => [n.id, n]));
  const clusters = new Map(data.clusters.map((c) => [c.id, c]));

  const root = h("div", "jaxlab-ge");
  const bar = h("div", "jaxlab-ge-bar");
  bar.append(h("b", "jaxlab-ge-title", data.title));
  const search = /** @type {HTMLInputElement} */ (h("input", "jaxlab-ge-search"));
  search.type = "search";
  search.placeholder = "search: primitive, name, line";
  search.value = state.query;
  const count = h("span", "jaxlab-ge-count");
  const fit = h("button", "jaxlab-ge-fit", "fit");
  bar.append(search, count, fit);
  root.append(bar);
  for (const note of data.notes || []) root.append(h("div", "jaxlab-ge-note", note));
  if (error) root.append(h("div", "jaxlab-ge-error", error));

  const width = view.width + 2 * PAD;
  const height = view.height + 2 * PAD;
  const svg = s("svg", { class: "jaxlab-ge-svg", role: "img" });
  svg.setAttribute("aria-label", data.title);
  const g = s("g", { transform: `translate(${PAD},${PAD})` });
  svg.append(g);

  // Open clusters: a frame around the visible members, with a header to close it.
  const inside = (cid, nid) => {
    for (let c = byId.get(nid)?.cluster; c; c = clusters.get(c)?.parent) if (c === cid) return true;
    return false;
  };
  for (const cid of view.frames || []) {
    const boxes = Object.entries(view.nodes).filter(([id]) =>
      id.startsWith("cluster:") ? isDescendant(clusters, id.slice(8), cid) : inside(cid, id),
    );
    if (!boxes.length) continue;
    const x0 = Math.min(...boxes.map(([, b]) => b[0])) - 8;
    const y0 = Math.min(...boxes.map(([, b]) => b[1])) - 24;
    const x1 = Math.max(...boxes.map(([, b]) => b[0] + b[2])) + 8;
    const y1 = Math.max(...boxes.map(([, b]) => b[1] + b[3])) + 8;
    const frame = s("g", { class: "jaxlab-ge-frame", "data-cluster": cid });
    frame.append(s("rect", { x: x0, y: y0, width: x1 - x0, height: y1 - y0, rx: 6 }));
    const c = clusters.get(cid);
    const head = s("text", { x: x0 + 6, y: y0 + 16, class: "jaxlab-ge-frame-title" }, `▾ ${c.label}`);
    frame.append(head, s("title", {}, `${c.label}: ${c.n_equations} equations (click to close)`));
    head.addEventListener("click", () => model.send({ type: "toggle", cluster: cid }));
    g.append(frame);
  }

  const edgeEls = [];
  for (const e of view.edges) {
    const p = e.points;
    let d = `M${p[0][0]},${p[0][1]}`;
    for (let i = 1; i + 2 < p.length; i += 3)
      d += ` C${p[i][0]},${p[i][1]} ${p[i + 1][0]},${p[i + 1][1]} ${p[i + 2][0]},${p[i + 2][1]}`;
    const path = s("path", { d, class: "jaxlab-ge-edge" + (e.kind ? " jaxlab-ge-" + e.kind : "") });
    path.setAttribute("marker-end", "url(#jaxlab-ge-arrow)");
    edgeEls.push([e, path]);
    g.append(path);
  }
  const defs = s("defs");
  const marker = s("marker", {
    id: "jaxlab-ge-arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 6, markerHeight: 6, orient: "auto-start-reverse",
  });
  marker.append(s("path", { d: "M0,0 L10,5 L0,10 z", class: "jaxlab-ge-arrowhead" }));
  defs.append(marker);
  svg.prepend(defs);

  const nodeEls = new Map();
  const detail = h("div", "jaxlab-ge-detail");
  for (const [id, [x, y, w, hh]] of Object.entries(view.nodes)) {
    const item = s("g", { transform: `translate(${x},${y})`, "data-id": id });
    if (id.startsWith("cluster:")) {
      const c = clusters.get(id.slice(8));
      item.setAttribute("class", "jaxlab-ge-node jaxlab-ge-closed");
      item.append(s("rect", { width: w, height: hh, rx: 6 }));
      item.append(s("text", { x: 8, y: 19, class: "jaxlab-ge-label" }, clip(`▸ ${c.label}`, w, 8.5)));
      item.append(s("text", { x: 8, y: 36, class: "jaxlab-ge-row" }, `${c.n_equations} equations · click to open`));
      item.append(s("title", {}, `${c.label}: ${c.n_equations} equations`));
      item.addEventListener("click", () => model.send({ type: "toggle", cluster: c.id }));
    } else {
      const n = byId.get(id);
      item.setAttribute("class", classes(n));
      item.append(s("rect", { width: w, height: hh, rx: n.kind === "port" ? hh / 2 : 4 }));
      item.append(s("text", { x: 8, y: 19, class: "jaxlab-ge-label" }, clip(n.label, w, 8.5)));
      rows(n).forEach(([cls, text], k) =>
        item.append(
          s("text", { x: 8, y: 36 + 17 * k, class: "jaxlab-ge-row " + cls }, clip(text, w, 7)),
        ),
      );
      item.append(s("title", {}, tooltip(n)));
      item.addEventListener("click", () => select(id));
      item.addEventListener("mouseenter", () => show(n));
    }
    nodeEls.set(id, item);
    g.append(item);
  }

  function show(n) {
    detail.replaceChildren();
    detail.append(h("b", "", n.label));
    const facts = [
      ["type", (n.types || []).join(" ")],
      ["equation", n.raw],
      ["source", n.source],
      ["value", n.value],
      ["adjoint", n.adjoint],
      ["note", n.unused ? "unused: reaches no output" : n.role === "fixed" ? "not differentiated" : ""],
    ];
    for (const [k, v] of facts) if (v) detail.append(h("div", "", `${k}: ${v}`));
  }

  // Dependency highlight: what the selected node depends on and what depends on it.
  function select(id) {
    state.selected = state.selected === id ? null : id;
    const up = new Set(), down = new Set();
    if (state.selected) {
      const walk = (start, forward, seen) => {
        const stack = [start];
        while (stack.length) {
          const at = stack.pop();
          for (const [e] of edgeEls) {
            const next = forward ? (e.src === at ? e.dst : null) : e.dst === at ? e.src : null;
            if (next && !seen.has(next)) { seen.add(next); stack.push(next); }
          }
        }
      };
      walk(state.selected, false, up);
      walk(state.selected, true, down);
    }
    for (const [nid, el2] of nodeEls) {
      el2.classList.toggle("jaxlab-ge-selected", nid === state.selected);
      el2.classList.toggle("jaxlab-ge-upstream", up.has(nid));
      el2.classList.toggle("jaxlab-ge-downstream", down.has(nid));
      el2.classList.toggle("jaxlab-ge-faded", !!state.selected && nid !== state.selected && !up.has(nid) && !down.has(nid));
    }
  }

  // Search: matches counted over the whole program, stepped through with Enter.
  function find(step) {
    state.query = search.value;
    const found = matches(data, state.query);
    if (step && found.length) state.at = (state.at + step + found.length) % found.length;
    if (state.at >= found.length) state.at = 0;
    count.textContent = state.query ? (found.length ? `${state.at + 1} of ${found.length}` : "no match") : "";
    const shown = new Set(found.map((id) => (view.nodes[id] ? id : boxOf(id))));
    for (const [nid, el2] of nodeEls) {
      el2.classList.toggle("jaxlab-ge-match", shown.has(nid));
      el2.classList.toggle("jaxlab-ge-current", found.length > 0 && (nid === found[state.at] || nid === boxOf(found[state.at])));
    }
  }
  function boxOf(id) {
    const n = byId.get(id);
    let outer = null;
    for (let c = n?.cluster; c; c = clusters.get(c)?.parent) if (!(model.get("opened") || []).includes(c)) outer = c;
    return outer ? "cluster:" + outer : id;
  }
  search.addEventListener("input", () => { state.at = 0; find(0); });
  search.addEventListener("keydown", (ev) => { if (ev.key === "Enter") find(ev.shiftKey ? -1 : 1); });

  // Pan (drag), zoom (wheel), fit to the output's width (button, and on first draw).
  const pane = h("div", "jaxlab-ge-pane");
  pane.append(svg);
  const body = h("div", "jaxlab-ge-body");
  body.append(detail, pane);
  root.append(body);
  el.replaceChildren(root);

  const apply = () => svg.setAttribute("viewBox", state.box.join(" "));
  // By default the drawing takes the output's width at full size (14 px titles, 12 px
  // text), and what is wider is dragged into view; "fit" shows all of it, scaled down.
  const readable = () => {
    const shown = Math.min(Math.max(pane.clientWidth, 200), width);
    state.box = [0, 0, shown, height];
    svg.setAttribute("width", String(Math.round(shown)));
    svg.setAttribute("height", String(Math.round(height)));
    apply();
  };
  const fitBox = () => {
    const avail = Math.max(pane.clientWidth, 200);
    const scale = Math.min(1, avail / width);
    state.box = [0, 0, width, height];
    svg.setAttribute("width", String(Math.round(width * scale)));
    svg.setAttribute("height", String(Math.round(height * scale)));
    apply();
  };
  readable();
  // The output may not be laid out yet (its width 0): redo the view when its width is
  // known or changes, until the user pans, zooms or fits.
  state.moved = false;
  if (state.observer) state.observer.disconnect();
  state.observer = new ResizeObserver(() => { if (!state.moved) readable(); });
  state.observer.observe(pane);
  fit.addEventListener("click", () => { state.moved = true; fitBox(); });
  svg.addEventListener("wheel", (ev) => {
    if (!ev.ctrlKey && !ev.metaKey) return; // plain wheel scrolls the notebook
    ev.preventDefault();
    const k = ev.deltaY > 0 ? 1.2 : 1 / 1.2;
    const [bx, by, bw, bh] = state.box;
    const r = svg.getBoundingClientRect();
    const fx = (ev.clientX - r.left) / r.width, fy = (ev.clientY - r.top) / r.height;
    state.box = [bx + fx * bw * (1 - k), by + fy * bh * (1 - k), bw * k, bh * k];
    state.moved = true;
    apply();
  }, { passive: false });
  let drag = null;
  svg.addEventListener("pointerdown", (ev) => {
    if (ev.target.closest && ev.target.closest(".jaxlab-ge-node")) return;
    drag = [ev.clientX, ev.clientY, ...state.box];
  });
  window.addEventListener("pointerup", () => { drag = null; });
  svg.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    const r = svg.getBoundingClientRect();
    const k = drag[4] / r.width;
    state.box = [drag[2] - (ev.clientX - drag[0]) * k, drag[3] - (ev.clientY - drag[1]) * k, drag[4], drag[5]];
    state.moved = true;
    apply();
  });
  find(0);
  if (state.selected && nodeEls.has(state.selected)) { const sel = state.selected; state.selected = null; select(sel); }
}

function isDescendant(clusters, cid, ancestor) {
  for (let c = clusters.get(cid)?.parent; c; c = clusters.get(c)?.parent) if (c === ancestor) return true;
  return false;
}

export default {
  render({ model, el }) {
    const state = { query: "", at: 0, selected: null, box: null, fitted: null };
    const redraw = () => draw(model, el, state);
    redraw();
    model.on("change:view", redraw);
    model.on("change:error", redraw);
    return () => {
      if (state.observer) state.observer.disconnect();
      model.off("change:view", redraw);
      model.off("change:error", redraw);
    };
  },
};
