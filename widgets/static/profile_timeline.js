// ProfileTimeline: a %%profile trace. No imports, no network.
// State (synced from Python, see widgets/profile_timeline.py):
//   title, duration_s, kept (what was drawn of a long trace, or ""),
//   spans:   [{lane: "host"|"jax"|"device",
//              kind: "dispatch"|"sync"|"trace"|"lower"|"compile"|"module"|"op",
//              name, start_s, duration_s, module, words}]
//   compilations: [{function, start_s, total_s, trace_s, lower_s, compile_s}]
//   modules, ops: [{name, module, calls, total_s, share}]; module_columns, op_columns
//   syncs:   [{where, code, kind, count, seconds, advice}]

// [label, kinds drawn]: the same lanes as the static view (timing/profile_svg.py).
const LANES = [
  ["host: jitted calls", ["dispatch"]],
  ["JAX: trace, lower, compile", ["trace", "lower", "compile"]],
  ["device: XLA modules", ["module"]],
  ["device: XLA ops", ["op"]],
];
const KEY = [
  ["dispatch", "jitted call (Python → JAX)"],
  ["trace", "tracing"],
  ["lower", "lowering"],
  ["compile", "XLA compile"],
  ["module", "XLA module run"],
  ["op", "XLA op"],
  ["sync", "implicit sync (host waits)"],
];
const SVG = "http://www.w3.org/2000/svg";
const LABEL_W = 180;
const LANE_H = 24;
const AXIS_H = 26;

/** @param {number} s seconds @returns {string} */
function seconds(s) {
  if (s <= 0) return "0 s";
  if (s >= 1) return `${s.toPrecision(3)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toPrecision(3)} ms`;
  return `${(s * 1e6).toPrecision(3)} µs`;
}

/** One unit for the whole axis, from the view's extent, and round ticks in it.
 * @param {number} start @param {number} end @returns {{unit: string, factor: number, ticks: number[]}} */
function axisTicks(start, end) {
  const extent = end - start;
  const [unit, factor] = end >= 1 ? ["s", 1] : end >= 1e-3 ? ["ms", 1e3] : ["µs", 1e6];
  const raw = Math.max(extent * factor, 1e-9) / 6;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((v) => v >= raw) / factor;
  const ticks = [];
  for (let t = Math.ceil(start / step) * step; t <= end + step * 1e-9; t += step) ticks.push(t);
  return { unit, factor, ticks };
}

/** @param {string} tag @param {string} [cls] @param {string} [text] @returns {HTMLElement} */
function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text; // never innerHTML: names are user text
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  return node;
}

function table(caption, head, rows) {
  const t = h("table", "jaxlab-pt-table");
  t.append(h("caption", "", caption));
  const tr = h("tr");
  for (const c of head) tr.append(h("th", "", c));
  t.append(tr);
  for (const row of rows) {
    const r = h("tr");
    for (const c of row) r.append(h("td", "", c));
    t.append(r);
  }
  return t;
}

function legend() {
  const key = h("div", "jaxlab-pt-key");
  for (const [kind, words] of KEY) {
    const item = h("span", "jaxlab-pt-key-item");
    const swatch = svg("svg", { width: 12, height: 12 });
    swatch.append(svg("rect", { width: 12, height: 12, class: `jaxlab-pt-${kind}` }));
    item.append(swatch, h("span", "", words));
    key.append(item);
  }
  return key;
}

function timeline(model, root) {
  const box = h("div", "jaxlab-pt-timeline");
  const tip = h("div", "jaxlab-pt-tip", "wheel: zoom · drag: pan · a double press: reset");
  const width = () => Math.max(300, (box.clientWidth || 700) - 4);
  const view = { start: 0, end: model.get("duration_s") || 1e-6 };
  const spans = model.get("spans");
  const syncs = spans.filter((s) => s.kind === "sync");
  const lanesH = LANE_H * LANES.length;
  const drawing = svg("svg", { class: "jaxlab-pt-svg", height: lanesH + AXIS_H });
  box.append(drawing);
  root.append(box, tip, legend());

  function rect(s, x, right, y, height, cls) {
    const node = svg("rect", {
      x: x.toFixed(1), y, height, width: Math.max(1, right - x).toFixed(1), class: cls,
    });
    const title = svg("title", {});
    title.textContent = s.words;
    node.append(title);
    node.addEventListener("mouseenter", () => { tip.textContent = s.words; });
    return node;
  }

  function draw() {
    const w = width();
    drawing.setAttribute("width", w);
    drawing.replaceChildren();
    const scale = (w - LABEL_W) / (view.end - view.start);
    const place = (s) => {
      const end = s.start_s + s.duration_s;
      if (end < view.start || s.start_s > view.end) return null;
      const x = LABEL_W + Math.max(0, (s.start_s - view.start) * scale);
      const right = LABEL_W + Math.min(w - LABEL_W, (end - view.start) * scale);
      return [x, right];
    };
    LANES.forEach(([label, kinds], i) => {
      const y = 2 + i * LANE_H;
      const text = svg("text", { x: 0, y: y + 14, class: "jaxlab-pt-label" });
      text.textContent = label;
      drawing.append(text);
      for (const s of spans) {
        if (!kinds.includes(s.kind)) continue;
        const at = place(s);
        if (at) drawing.append(rect(s, at[0], at[1], y, LANE_H - 6, `jaxlab-pt-span jaxlab-pt-${s.kind}`));
      }
    });
    for (const s of syncs) {  // across every lane: the host waited here
      const at = place(s);
      if (at) drawing.append(rect(s, at[0], Math.max(at[1], at[0] + 2), 0, lanesH, "jaxlab-pt-span jaxlab-pt-sync"));
    }
    const { unit, factor, ticks } = axisTicks(view.start, view.end);
    for (const t of ticks) {
      const x = LABEL_W + (t - view.start) * scale;
      drawing.append(svg("line", { x1: x, x2: x, y1: lanesH + 2, y2: lanesH + 6, class: "jaxlab-pt-tick" }));
      const label = svg("text", { x, y: lanesH + 19, "text-anchor": "middle", class: "jaxlab-pt-label jaxlab-pt-axis" });
      label.textContent = `${Number((t * factor).toPrecision(4))} ${unit}`;
      drawing.append(label);
    }
  }
  drawing.addEventListener("wheel", (event) => {
    event.preventDefault();
    const w = width();
    const at = view.start + ((event.offsetX - LABEL_W) / (w - LABEL_W)) * (view.end - view.start);
    const factor = event.deltaY < 0 ? 0.8 : 1.25;
    const span = Math.max(1e-7, (view.end - view.start) * factor);
    const left = (at - view.start) / (view.end - view.start);
    view.start = Math.max(0, at - left * span);
    view.end = view.start + span;
    draw();
  });
  let dragging = null;
  drawing.addEventListener("mousedown", (event) => { dragging = event.clientX; });
  window.addEventListener("mouseup", () => { dragging = null; });
  drawing.addEventListener("mousemove", (event) => {
    if (dragging === null) return;
    const shift = ((dragging - event.clientX) / (width() - LABEL_W)) * (view.end - view.start);
    dragging = event.clientX;
    const span = view.end - view.start;
    view.start = Math.max(0, view.start + shift);
    view.end = view.start + span;
    draw();
  });
  drawing.addEventListener("dblclick", () => {
    view.start = 0;
    view.end = model.get("duration_s") || 1e-6;
    draw();
  });
  draw();
}

function render(model, el) {
  const root = h("div", "jaxlab-pt");
  root.append(h("div", "jaxlab-pt-title", model.get("title")));
  timeline(model, root);
  if (model.get("kept")) root.append(h("p", "jaxlab-pt-kept", model.get("kept")));
  const compilations = model.get("compilations");
  if (compilations.length) {
    root.append(table(
      "JAX compiled during the cell (a first call, or new argument types)",
      ["function", "total", "tracing", "lowering", "XLA compile", "at"],
      compilations.map((c) => [c.function, seconds(c.total_s), seconds(c.trace_s),
        seconds(c.lower_s), seconds(c.compile_s), seconds(c.start_s)]),
    ));
  }
  // Only the columns a table needs (the kernel says which: no empty "module" column).
  const costs = (rows, columns) => rows.map((c) => {
    const cells = { name: c.name, module: c.module !== c.name ? c.module : "",
      runs: c.calls.toLocaleString("en"), total: seconds(c.total_s),
      "share of the cell": `${(100 * c.share).toFixed(0)}%` };
    return columns.map((k) => cells[k]);
  });
  if (model.get("modules").length)
    root.append(table("XLA modules, costliest first", model.get("module_columns"),
      costs(model.get("modules"), model.get("module_columns"))));
  if (model.get("ops").length)
    root.append(table("XLA ops, costliest first", model.get("op_columns"),
      costs(model.get("ops"), model.get("op_columns"))));
  const syncs = model.get("syncs");
  if (syncs.length) {
    root.append(table(
      "implicit device-to-host transfers: each waits for the device",
      ["where", "code", "what", "times", "time", "what to do"],
      syncs.map((s) => [s.where, s.code, s.kind, s.count.toLocaleString("en"), seconds(s.seconds), s.advice]),
    ));
  } else {
    root.append(h("p", "jaxlab-pt-none", "No implicit device-to-host transfers."));
  }
  el.replaceChildren(root);
}

export default {
  render({ model, el }) {
    const redraw = () => render(model, el);
    redraw();
    model.on("change:spans", redraw);
    return () => model.off("change:spans", redraw);
  },
};
