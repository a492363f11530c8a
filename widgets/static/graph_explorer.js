// GraphExplorer: a jaxpr graph to open, search and read. No imports, no network.
// State (synced from Python, see widgets/graph_explorer.py):
//   model:  the visible part only: {title, notes, nodes: [{id, kind, label, cluster,
//           primitive, types, source, params, raw, phase, value, adjoint, residual, role,
//           unused, summary}], clusters: [{id, primitive, label, parent, n_equations,
//           summary}] (frames and closed boxes: nested programs, runs, scopes)}
//   opened: [cluster id]          view: {width, height, nodes: {id: [x, y, w, h]},
//                                        edges: [{src, dst, points, kind}], frames: [id]}
//   found:  {query, total, matches: [{id, box}]}: the kernel's search of the whole program
//   legend: [{mark, text}]: the marks this view draws, computed in the kernel
// A click on a closed box (or an open cluster's header) sends {type: "toggle"}; the kernel
// builds and lays out what is then visible and sends a new view. Typing in the search box
// sends {type: "search"}; stepping to a match hidden in a closed box sends {type: "reveal"}.
//   _twin_id: names this widget's static twin (widgets/_base.py)
// Saved state is anyone's (a shared notebook, a docs page): it is read by a total, bounded
// parser (``readState``: types checked, lists capped well above what the kernel sends, a
// view's boxes kept in a Map, cluster parents followed at most once round); what cannot be
// read is refused, and the view says so while its twin shows.

const SVG = "http://www.w3.org/2000/svg";
const PAD = 16;
const CULL_ABOVE = 400; // drawn nodes above which only those near the pane are in the page
const PANE_H = 700; // the tallest a pane need be for a first view (graph_layout.PANE_H)
const MIN_SCALE = 1; // "fit" never shrinks the drawing: its 12 px rows stay 12 px

// Bounds of what the page reads, well above the kernel's (a view of a few thousand boxes).
const MOST_NODES = 50000; // nodes, clusters or boxes of one view
const MOST_EDGES = 50000;
const MOST_POINTS = 10000; // points of one edge
const MOST_ALL_POINTS = 1000000; // points of every edge of a view
const MOST_ITEMS = 10000; // matches, legend entries, notes, a node's types
const MOST_TEXT = 100000; // characters of one text




/** Text of a saved value: a string (cut to MOST_TEXT), a finite number; else "". */
function text(v) {
  if (typeof v === "string") return v.length > MOST_TEXT ? v.slice(0, MOST_TEXT) + "…" : v;
  return typeof v === "number" && Number.isFinite(v) ? String(v) : "";
}

/** Text, or null where the kernel sends none (a node's value, its cluster). */
function maybeText(v) {
  return v === null || v === undefined ? null : text(v);
}

/** A finite number, else 0. */
function number(v) {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** An object (absent: {}); anything else refused. */
function record(v, what) {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) throw new Refused(`${what} is not an object`);
  return v;
}

/** A list of at most ``most`` items (absent: empty), each read by ``item``; else refused. */
function list(v, what, most, item) {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new Refused(`${what} is not a list`);
  if (v.length > most) throw new Refused(`${what} has ${v.length} items, more than ${most}`);
  return v.map(item);
}

/** A list of objects, each read by ``item``. */
function objects(v, what, most, item) {
  return list(v, what, most, (x) => item(record(x === null ? 0 : x, `an item of ${what}`)));
}

/** [x, y, w, h] of finite numbers, or refused. */
function box(v, what) {
  if (!Array.isArray(v) || v.length !== 4 || !v.every((x) => typeof x === "number" && Number.isFinite(x))) {
    throw new Refused(`${what} is not four numbers`);
  }
  return v;
}

/** An object's entries as a Map (never a prototype's), each value read by ``item``. */
function entries(v, what, item) {
  const keys = Object.keys(record(v, what));
  if (keys.length > MOST_NODES) throw new Refused(`${what} has ${keys.length} entries, more than ${MOST_NODES}`);
  return new Map(keys.map((k) => [k, item(v[k], `${what}'s ${k.slice(0, 40)}`)]));
}

/** The smallest and largest of numbers (no spread: a long list is no argument list). */
function extent(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) { if (v < lo) lo = v; if (v > hi) hi = v; }
  return [lo, hi];
}

function nodeOf(n) {
  return {
    id: text(n.id), kind: text(n.kind), label: text(n.label), cluster: maybeText(n.cluster),
    types: list(n.types, "a node's types", MOST_ITEMS, text), source: text(n.source),
    params: text(n.params), raw: text(n.raw), phase: text(n.phase), role: text(n.role),
    value: maybeText(n.value), adjoint: maybeText(n.adjoint), residual: n.residual === true,
    unused: n.unused === true, diff: text(n.diff), overlay_text: text(n.overlay_text),
    overlay_colour: text(n.overlay_colour), summary: text(n.summary),
  };
}

function clusterOf(c) {
  return {
    id: text(c.id), primitive: text(c.primitive), label: text(c.label), parent: maybeText(c.parent),
    n_equations: number(c.n_equations), summary: text(c.summary), diff: text(c.diff),
    overlay_text: text(c.overlay_text), overlay_colour: text(c.overlay_colour),
  };
}

function edgeOf(e) {
  const points = list(e.points, "an edge's points", MOST_POINTS, (p) => {
    if (!Array.isArray(p) || p.length < 2 || !Number.isFinite(p[0]) || !Number.isFinite(p[1])) {
      throw new Refused("an edge's point is not two numbers");
    }
    return [p[0], p[1]];
  });
  if (!points.length) throw new Refused("an edge has no points");
  // A bundle (many arrays from one box into an open box): its label and the drawn ends
  // it stands for, which the dependency highlight follows.
  const pairs = list(e.pairs, "a bundle's ends", MOST_EDGES, (q) => {
    if (!Array.isArray(q) || q.length !== 2) throw new Refused("a bundle's end is not two ids");
    return [text(q[0]), text(q[1])];
  });
  return { src: text(e.src), dst: text(e.dst), kind: text(e.kind), points, label: text(e.label), pairs };
}

/** The search's answer, checked. */
function foundOf(v) {
  const f = record(v, "the search's answer");
  return {
    query: text(f.query), total: number(f.total),
    matches: objects(f.matches, "the matches", MOST_ITEMS, (m) => ({ id: text(m.id), box: text(m.box) })),
  };
}

/** The saved state, checked: {data, view, legend, error}. */
function readState(model) {
  const m = record(model.get("model"), "the model");
  const data = {
    title: text(m.title),
    notes: list(m.notes, "the notes", MOST_ITEMS, text),
    nodes: objects(m.nodes, "the nodes", MOST_NODES, nodeOf),
    clusters: objects(m.clusters, "the clusters", MOST_NODES, clusterOf),
  };
  const v = record(model.get("view"), "the view");
  const view = {
    width: Math.max(0, number(v.width)), height: Math.max(0, number(v.height)),
    nodes: entries(v.nodes, "the view's boxes", box),
    edges: objects(v.edges, "the edges", MOST_EDGES, edgeOf),
    frames: list(v.frames, "the frames", MOST_NODES, text),
    frame_boxes: v.frame_boxes === undefined || v.frame_boxes === null ? null : entries(v.frame_boxes, "the frames' boxes", box),
  };
  const points = view.edges.reduce((n, e) => n + e.points.length, 0);
  if (points > MOST_ALL_POINTS) throw new Refused(`the edges have ${points} points, more than ${MOST_ALL_POINTS}`);
  const legend = objects(model.get("legend"), "the legend", MOST_ITEMS, (x) => ({ mark: text(x.mark), text: text(x.text) }));
  return { data, view, legend, error: text(model.get("error")) };
}

/** @returns {SVGElement} */
function s(tag, attrs, text) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  if (text !== undefined) node.textContent = text; // never innerHTML: labels are user text
  return node;
}


/** Text cut to what fits a box ``width`` px wide at ``px`` per character (the rest is
 * in the tooltip), so nothing crosses a border. */
function clip(text, width, px) {
  const most = Math.max(4, Math.floor((width - 14) / px));
  return text.length <= most ? text : text.slice(0, most - 1) + "…";
}

/** A name whole up to WHOLE characters; a longer one keeps its start and its
 * distinguishing end around "…" (jaxlab.graph.names.shorten, the same rule). */
const WHOLE = 40;
function shorten(text, most = WHOLE) {
  const chars = Array.from(text);
  if (chars.length <= most) return text;
  const head = Math.min(14, Math.floor(most / 3));
  return chars.slice(0, head).join("") + "…" + chars.slice(chars.length - (most - head - 1)).join("");
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
  if (n.diff) c.push("jaxlab-ge-diff-" + n.diff); // two programs compared (jaxlab.diff)
  return c.join(" ");
}

function tooltip(n) {
  const lines = [n.label];
  if (n.raw && n.raw !== n.label) lines.push(n.raw);
  if (n.types && n.types.length) lines.push(n.types.join(" "));
  if (n.source) lines.push(n.source);
  // An argument drawn as one node: the arrays it holds.
  if ((n.kind === "input" || n.kind === "output") && n.params) lines.push(n.params);
  if (n.unused) lines.push("unused: reaches no output");
  if (n.role === "fixed") lines.push("not differentiated: held fixed");
  if (n.diff) lines.push(n.diff === "holds" ? "holds a difference" : n.diff);
  if (n.overlay_text) lines.push(n.overlay_text); // an overlay: value and share
  return lines.join("\n");
}

function draw(model, el, state) {
  const { data, view, legend: entries, error } = readState(model);
  const byId = new Map(data.nodes.map((n) => [n.id, n]));
  const clusters = new Map(data.clusters.map((c) => [c.id, c]));

  // A saved view drawn where no kernel runs (the docs site's loader says so): what it
  // shows is what the notebook opened; nothing promises a click or a search it cannot do.
  const live = model.has_kernel !== false;
  // A click's time is stamped: the next view says how long it waited for the kernel.
  const toggle = (id) => {
    state.sent = performance.now();
    model.send({ type: "toggle", cluster: id });
  };
  const root = h("div", "jaxlab-ge");
  const bar = h("div", "jaxlab-ge-bar");
  bar.append(h("b", "jaxlab-ge-title", data.title));
  const search = /** @type {HTMLInputElement} */ (h("input", "jaxlab-ge-search"));
  search.type = "search";
  search.placeholder = "search: primitive, name, line";
  search.value = state.query;
  const count = h("span", "jaxlab-ge-count");
  const fit = h("button", "jaxlab-ge-fit", "fit");
  // Said when the drawing (at full size, from its top left) is wider than the pane: the
  // rest is dragged into view, and nothing else shows that it is there.
  const cue = h("span", "jaxlab-ge-cue");
  bar.append(...(live ? [search, count] : []), fit, cue);
  root.append(bar);
  for (const note of data.notes) root.append(h("div", "jaxlab-ge-note", note));
  // The legend: the kernel lists the marks this view draws; each swatch wears the class
  // of what it explains.
  if (entries.length) {
    const key = h("div", "jaxlab-ge-legend");
    for (const { mark, text } of entries) {
      const item = h("span", "jaxlab-ge-legend-item");
      item.dataset.mark = mark;
      const how = { closed: " (click to open)", upstream: " (click a node)", downstream: " (click a node)" };
      const words = live && Object.hasOwn(how, mark) ? text + how[mark] : text;
      item.append(h("span", "jaxlab-ge-swatch jaxlab-ge-legend-" + mark), h("span", "", words));
      key.append(item);
    }
    root.append(key);
  }
  if (error) root.append(h("div", "jaxlab-ge-error", error));

  const width = view.width + 2 * PAD;
  const height = view.height + 2 * PAD;
  const svg = s("svg", { class: "jaxlab-ge-svg", role: "img", width: "100%" });
  svg.setAttribute("aria-label", data.title);
  const camera = s("g"); // pan and zoom: one transform, applied once per frame
  const g = s("g", { transform: `translate(${PAD},${PAD})` });
  camera.append(g);
  svg.append(camera);
  // A big view keeps in the page only what is near the pane (the rest is added back as
  // it comes into view): a frame then paints a few dozen boxes, not thousands.
  const culling = view.nodes.size > CULL_ABOVE;
  const layers = [s("g"), s("g"), s("g")]; // frames, edges, nodes
  g.append(...layers);
  const parts = []; // [element, layer, x0, y0, x1, y1, attached]
  const add = (el, layer, x0, y0, x1, y1) => {
    if (culling) parts.push([el, layers[layer], x0, y0, x1, y1, false]);
    else layers[layer].append(el);
  };
  svg.dataset.drawn = String(view.nodes.size);

  // Open clusters: a frame around the visible members, with a header to close it.
  const parentOf = (id) => (id.startsWith("cluster:") ? clusters.get(id.slice(8))?.parent : byId.get(id)?.cluster);
  const members = new Map(); // open cluster -> the boxes of its visible members
  // Parents followed at most once round the clusters: a forged ring ends.
  if (!view.frame_boxes) for (const [id, box] of view.nodes) {
    let c = parentOf(id);
    for (let n = 0; c && n <= clusters.size; n++, c = clusters.get(c)?.parent) {
      if (!members.has(c)) members.set(c, []);
      members.get(c).push(box);
    }
  }
  for (const cid of view.frames || []) {
    const boxes = members.get(cid) || [];
    const c = clusters.get(cid);
    if (!c) continue;
    // The kernel lays each open box out by itself and sends its frame; else its members'.
    const given = view.frame_boxes && view.frame_boxes.get(cid);
    if (!given && !boxes.length) continue;
    const x0 = given ? given[0] : extent(boxes.map((b) => b[0]))[0] - 8;
    const y0 = given ? given[1] : extent(boxes.map((b) => b[1]))[0] - 24;
    const x1 = given ? given[0] + given[2] : extent(boxes.map((b) => b[0] + b[2]))[1] + 8;
    const y1 = given ? given[1] + given[3] : extent(boxes.map((b) => b[1] + b[3]))[1] + 8;
    const marked = c.diff ? " jaxlab-ge-diff-" + c.diff : "";
    const frame = s("g", { class: "jaxlab-ge-frame" + marked, "data-cluster": cid });
    frame.append(s("rect", { x: x0, y: y0, width: x1 - x0, height: y1 - y0, rx: 6 }));
    const head = s("text", { x: x0 + 6, y: y0 + 16, class: "jaxlab-ge-frame-title" }, `▾ ${c.label}`);
    frame.append(head, s("title", {}, `${c.label}: ${c.n_equations} equations (click to close)`));
    head.addEventListener("click", () => toggle(cid));
    add(frame, 0, x0, y0, x1, y1);
  }

  // Edges, and who feeds whom among what is drawn (for the dependency highlight).
  const into = new Map(), from = new Map();
  for (const e of view.edges) {
    const p = e.points;
    let d = `M${p[0][0]},${p[0][1]}`;
    for (let i = 1; i + 2 < p.length; i += 3)
      d += ` C${p[i][0]},${p[i][1]} ${p[i + 1][0]},${p[i + 1][1]} ${p[i + 2][0]},${p[i + 2][1]}`;
    const path = s("path", { d, class: "jaxlab-ge-edge" + (e.kind ? " jaxlab-ge-" + e.kind : "") });
    path.setAttribute("marker-end", "url(#jaxlab-ge-arrow)");
    const [xlo, xhi] = extent(p.map((q) => q[0])), [ylo, yhi] = extent(p.map((q) => q[1]));
    if (e.label) {
      // A bundle: one edge for many arrays, labelled with how many (never a dark band).
      const mid = p[Math.floor(p.length / 2)];
      const group = s("g", { class: "jaxlab-ge-bundle-edge" });
      group.append(path, s("text", { x: mid[0] + 6, y: mid[1] - 4, class: "jaxlab-ge-bundle-label" }, e.label));
      add(group, 1, xlo, ylo, xhi + 80, yhi);
    } else add(path, 1, xlo, ylo, xhi, yhi);
    for (const [src, dst] of e.pairs.length ? e.pairs : [[e.src, e.dst]]) {
      if (!into.has(dst)) into.set(dst, []);
      into.get(dst).push(src);
      if (!from.has(src)) from.set(src, []);
      from.get(src).push(dst);
    }
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
  for (const [id, [x, y, w, hh]] of view.nodes) {
    // A box the model does not know is not drawn (as the static view skips it).
    if (!id.startsWith("cluster:") && !byId.has(id)) continue;
    const item = s("g", { transform: `translate(${x},${y})`, "data-id": id });
    if (id.startsWith("cluster:")) {
      const c = clusters.get(id.slice(8)) || { id: id.slice(8), label: id.slice(8), n_equations: 0 };
      item.setAttribute("class", "jaxlab-ge-node jaxlab-ge-closed");
      item.append(s("rect", { width: w, height: hh, rx: 6 }));
      item.append(s("text", { x: 8, y: 19, class: "jaxlab-ge-label" }, clip(`▸ ${shorten(c.label)}`, w, 8.5)));
      const repeat = (c.summary || "").startsWith("repeat:") ? " · repeat" : "";
      item.append(s("text", { x: 8, y: 36, class: "jaxlab-ge-row" }, clip(`${c.n_equations} equations${repeat}${live ? " · click to open" : ""}`, w, 7)));
      const held = c.overlay_text ? "\n" + c.overlay_text : "";
      item.append(s("title", {}, `${c.label}: ${c.n_equations} equations${c.summary ? "\n" + c.summary : ""}${held}`));
      item.addEventListener("click", () => toggle(c.id));
      item.addEventListener("mouseenter", () => showBox(c));
    } else {
      const n = byId.get(id);
      item.setAttribute("class", classes(n));
      item.append(s("rect", { width: w, height: hh, rx: n.kind === "port" ? hh / 2 : 4 }));
      item.append(s("text", { x: 8, y: 19, class: "jaxlab-ge-label" }, clip(shorten(n.label), w, 8.5)));
      rows(n).forEach(([cls, text], k) =>
        item.append(
          s("text", { x: 8, y: 36 + 17 * k, class: "jaxlab-ge-row " + cls }, clip(text, w, 7)),
        ),
      );
      item.append(s("title", {}, tooltip(n)));
      item.addEventListener("click", () => select(id));
      item.addEventListener("mouseenter", () => show(n));
    }
    const boxMark = id.startsWith("cluster:") ? (clusters.get(id.slice(8)) || {}).diff : "";
    if (boxMark) item.classList.add("jaxlab-ge-diff-" + boxMark);
    // An overlay's colour (computed in the kernel from its scale): the box's fill.
    const shade = (id.startsWith("cluster:") ? clusters.get(id.slice(8)) : byId.get(id)) || {};
    if (shade.overlay_colour) {
      item.classList.add("jaxlab-ge-overlaid");
      item.querySelector("rect").style.fill = shade.overlay_colour;
    }
    nodeEls.set(id, item);
    add(item, 2, x, y, x + w, y + hh);
  }

  function show(n) {
    detail.replaceChildren();
    detail.append(h("b", "", n.label));
    const facts = [
      ["type", (n.types || []).join(" ")],
      ["equation", n.raw],
      ["source", n.source],
      ["arrays", n.kind === "input" || n.kind === "output" ? n.params : ""],
      ["value", n.value],
      ["adjoint", n.adjoint],
      ["overlay", n.overlay_text],
      ["note", n.unused ? "unused: reaches no output" : n.role === "fixed" ? "not differentiated" : ""],
    ];
    for (const [k, v] of facts) if (v) detail.append(h("div", "", `${k}: ${v}`));
  }
  function showBox(c) {
    detail.replaceChildren();
    detail.append(h("b", "", c.label));
    detail.append(h("div", "", `${c.n_equations} equations`));
    if (c.summary) detail.append(h("div", "", c.summary));
    if (c.overlay_text) detail.append(h("div", "", c.overlay_text));
  }

  // Dependency highlight, along the visible edges: what the selected node depends on and
  // what depends on it (a closed box stands for everything it holds).
  function select(id) {
    state.selected = state.selected === id ? null : id;
    const up = new Set(), down = new Set();
    const reach = (start, next, seen) => {
      const stack = [start];
      while (stack.length) {
        for (const to of next.get(stack.pop()) || []) if (!seen.has(to)) { seen.add(to); stack.push(to); }
      }
    };
    if (state.selected) { reach(state.selected, into, up); reach(state.selected, from, down); }
    for (const [nid, el2] of nodeEls) {
      el2.classList.toggle("jaxlab-ge-selected", nid === state.selected);
      el2.classList.toggle("jaxlab-ge-upstream", up.has(nid));
      el2.classList.toggle("jaxlab-ge-downstream", down.has(nid));
      el2.classList.toggle("jaxlab-ge-faded", !!state.selected && nid !== state.selected && !up.has(nid) && !down.has(nid));
    }
  }

  // Search: the kernel searches the whole program and answers in `found`; matches inside
  // closed boxes light their box. Enter steps (Shift+Enter back); a step to a match inside
  // a closed box asks the kernel to open what holds it.
  function paintFound() {
    const found = foundOf(model.get("found"));
    const listed = found.matches;
    if (found.query !== state.query) { count.textContent = state.query ? "…" : ""; return; }
    if (state.at >= listed.length) state.at = 0;
    const more = found.total > listed.length ? ` (first ${listed.length} listed)` : "";
    count.textContent = state.query ? (found.total ? `${state.at + 1} of ${found.total}${more}` : "no match") : "";
    const lit = new Set(listed.map((m) => m.box));
    const current = listed.length ? listed[state.at] : null;
    for (const [nid, el2] of nodeEls) {
      el2.classList.toggle("jaxlab-ge-match", lit.has(nid));
      el2.classList.toggle("jaxlab-ge-current", !!current && nid === current.box);
    }
    if (current && state.follow) {
      // Drawn: the node itself, or a closed box that is the match (a nested program).
      const target = view.nodes.has(current.id) ? current.id : current.box;
      if (target === current.id || target === "cluster:" + current.id || state.revealed === current.id) {
        state.follow = false;
        const shown = view.nodes.has(target) ? target : view.nodes.has(current.box) ? current.box : null;
        if (shown) keepInView(shown);
      } else {
        // Once, and only for the match stepped to last (Enter held down steps through
        // many): the kernel opens what holds it, and the new view and matches come back.
        clearTimeout(state.revealing);
        state.revealing = setTimeout(() => {
          state.revealed = current.id;
          model.send({ type: "reveal", id: current.id });
        }, 150);
      }
    }
  }
  let typing = null;
  search.addEventListener("input", () => {
    state.query = search.value;
    state.at = 0;
    clearTimeout(typing);
    typing = setTimeout(() => model.send({ type: "search", query: state.query }), 120);
    paintFound();
  });
  search.addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter") return;
    let listed = [];
    try { listed = foundOf(model.get("found")).matches; } catch { /* unreadable: no steps */ }
    if (!listed.length) return;
    state.at = (state.at + (ev.shiftKey ? -1 : 1) + listed.length) % listed.length;
    state.follow = true;
    state.revealed = null;
    paintFound();
  });
  state.paintFound = paintFound;

  // Pan (drag), zoom (ctrl+wheel), fit to the output's width.
  const pane = h("div", "jaxlab-ge-pane");
  pane.append(svg);
  const body = h("div", "jaxlab-ge-body");
  body.append(detail, pane);
  root.append(body);
  // A new view replaces the search box: keep typing and stepping where they were (a
  // reveal's redraw arrives between two presses of Enter, and none may be lost).
  const typingHere = document.activeElement?.classList?.contains("jaxlab-ge-search") && el.contains(document.activeElement);
  const caret = typingHere ? document.activeElement.selectionStart : null;
  el.replaceChildren(root);
  if (typingHere) {
    search.focus();
    if (caret !== null) search.setSelectionRange(caret, caret);
  }

  // The SVG is the pane's size; a transform on its content moves the drawing, so a frame
  // paints only what is in the pane (the browser culls the rest), however big the view.
  const place = () => {
    const { x, y, k } = state.at_view;
    camera.setAttribute("transform", `translate(${x},${y}) scale(${k})`);
    if (culling) cull();
  };
  function cull() {
    // The pane in drawing coordinates, with a pane's width and height to spare each way.
    const { x, y, k } = state.at_view;
    const w = Math.max(pane.clientWidth, 200) / k, hgt = Math.max(pane.clientHeight, 200) / k;
    const left = -x / k - PAD - w, top = -y / k - PAD - hgt;
    const right = left + 3 * w, bottom = top + 3 * hgt;
    for (const part of parts) {
      const near = part[2] <= right && part[4] >= left && part[3] <= bottom && part[5] >= top;
      if (near && !part[6]) part[1].append(part[0]);
      else if (!near && part[6]) part[0].remove();
      part[6] = near;
    }
  }
  const apply = () => {
    // As tall as the drawing, up to a projector's pane (a first view fits 1100 x 700 at
    // full size) or most of a taller window.
    const tall = Math.round(Math.min(height * state.at_view.k, Math.max(window.innerHeight * 0.8, PANE_H)));
    svg.setAttribute("height", String(tall));
    cueNow();
    place();
  };
  // Said when the drawing (at its scale, from where it is) runs past the pane: the rest
  // is dragged into view, and nothing else shows that it is there. Measured again when
  // the pane changes size: an output drawn hidden (Run All, a collapsed or background
  // tab) has no width until it shows.
  function cueNow() {
    const pw = pane.clientWidth, ph = svg.clientHeight || Number(svg.getAttribute("height"));
    if (pw <= 0) return; // not laid out yet: the observer calls again when it is
    // What is drawn (the margin around it may be cut off: nothing is there).
    const { x, y, k } = state.at_view;
    const wide = x + PAD * k < -1 || x + (PAD + view.width) * k > pw + 1;
    const tall = y + PAD * k < -1 || y + (PAD + view.height) * k > ph + 1;
    const says = wide && tall ? "↔↕ bigger than this pane" : wide ? "↔ wider than this pane" : tall ? "↕ taller than this pane" : "";
    const how = live ? ": drag to pan, or fit to close what does not fit" : ": drag to pan";
    cue.textContent = says ? says + how : "";
    root.classList.toggle("jaxlab-ge-outside", !!says);
  }
  if (state.observer) state.observer.disconnect();
  if (typeof ResizeObserver === "function") {
    state.observer = new ResizeObserver(() => cueNow());
    state.observer.observe(pane);
  }
  let frame = 0;
  const move = () => {
    if (frame) return;
    frame = requestAnimationFrame(() => { frame = 0; place(); cueNow(); });
  };
  // A match stepped to stays in view: centred in the pane when any of it is outside,
  // and the pane scrolled into the page's view when it is not there.
  function keepInView(id) {
    const [bx, by, bw, bh] = view.nodes.get(id);
    const { x, y, k } = state.at_view;
    const left = (bx + PAD) * k + x, top = (by + PAD) * k + y;
    const inside = left >= 0 && top >= 0 && left + bw * k <= pane.clientWidth && top + bh * k <= pane.clientHeight;
    if (!inside) centre(view.nodes.get(id));
    const r = pane.getBoundingClientRect();
    if (r.top < 0 || r.bottom > window.innerHeight) pane.scrollIntoView({ block: "nearest" });
  }
  function centre([bx, by, bw, bh]) {
    const { k } = state.at_view;
    state.at_view.x = pane.clientWidth / 2 - (bx + PAD + bw / 2) * k;
    state.at_view.y = pane.clientHeight / 2 - (by + PAD + bh / 2) * k;
    state.moved = true;
    apply();
  }
  // By default the drawing is at full size (14 px titles, 12 px text) from its top left,
  // and what is wider or taller is dragged into view; "fit" shows all of it, scaled down.
  if (!state.at_view || !state.moved) state.at_view = { x: 0, y: 0, k: 1 };
  apply();
  // "fit": the whole drawing in the pane, both ways, but never below full size (12 px
  // text): what does not fit at full size is closed by the kernel until it does, and the
  // view says how many boxes it left closed (no kernel: back to the top left).
  fit.addEventListener("click", () => {
    const pw = Math.max(pane.clientWidth, 200), ph = Math.max(window.innerHeight * 0.8, PANE_H);
    const k = Math.min(1, pw / width, ph / height);
    state.at_view = { x: 0, y: 0, k: Math.max(k, MIN_SCALE) };
    state.moved = false;
    apply();
    if (k < MIN_SCALE && live) model.send({ type: "fit", width: pw, height: Math.round(ph) });
  });
  svg.addEventListener("wheel", (ev) => {
    if (!ev.ctrlKey && !ev.metaKey) return; // plain wheel scrolls the notebook
    ev.preventDefault();
    const f = ev.deltaY > 0 ? 1 / 1.2 : 1.2;
    const r = pane.getBoundingClientRect();
    const px = ev.clientX - r.left, py = ev.clientY - r.top;
    const v = state.at_view;
    state.at_view = { x: px - (px - v.x) * f, y: py - (py - v.y) * f, k: v.k * f };
    state.moved = true;
    apply();
  }, { passive: false });
  let drag = null;
  pane.addEventListener("pointerdown", (ev) => {
    if (ev.target.closest && ev.target.closest(".jaxlab-ge-node, .jaxlab-ge-frame-title")) return;
    drag = [ev.clientX, ev.clientY, state.at_view.x, state.at_view.y];
    ev.preventDefault(); // a drag pans: it must not select the notebook's text
    try { pane.setPointerCapture(ev.pointerId); } catch { /* a pointer already gone */ }
  });
  pane.addEventListener("pointerup", () => { drag = null; });
  pane.addEventListener("dragstart", (ev) => ev.preventDefault()); // no native drag of the SVG
  pane.addEventListener("pointermove", (ev) => {
    if (!drag) return;
    state.at_view.x = drag[2] + ev.clientX - drag[0];
    state.at_view.y = drag[3] + ev.clientY - drag[1];
    state.moved = true;
    move();
  });
  paintFound();
  if (state.selected && nodeEls.has(state.selected)) { const sel = state.selected; state.selected = null; select(sel); }
}

export default {
  render({ model, el }) {
    const state = { query: "", at: 0, selected: null, at_view: null, moved: false, follow: false, sent: null };
    // Each redraw guarded: state that cannot be read replaces the view with a note (the
    // twin shows); the next readable state draws the view again.
    // Each draw timed (performance measure "jaxlab-ge-draw"): the SVG says how long its
    // drawing took, and how long the click before it waited for the kernel's view.
    const redraw = () => guarded(model, el, () => {
      const t0 = performance.now();
      const waited = state.sent === null ? null : t0 - state.sent;
      state.sent = null;
      state.paintFound = null;
      draw(model, el, state);
      const svg = el.querySelector(".jaxlab-ge-svg");
      if (svg) {
        svg.dataset.drawMs = (performance.now() - t0).toFixed(1);
        if (waited !== null) svg.dataset.waitMs = waited.toFixed(1);
      }
      performance.clearMeasures?.("jaxlab-ge-draw"); // the latest only: a long session adds none
      performance.measure?.("jaxlab-ge-draw", { start: t0 });
    }, "GraphExplorer");
    const refound = () => guarded(model, el, () => state.paintFound && state.paintFound(), "GraphExplorer");
    redraw();
    model.on("change:view", redraw);
    model.on("change:error", redraw);
    model.on("change:found", refound);
    return () => {
      if (state.observer) state.observer.disconnect();
      model.off("change:view", redraw);
      model.off("change:error", redraw);
      model.off("change:found", refound);
      el.querySelector(":scope > style.jaxlab-hide-twin")?.remove();
    };
  },
};
