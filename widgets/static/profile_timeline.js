// ProfileTimeline: a %%profile trace. No imports, no network.
// State (synced from Python, see widgets/profile_timeline.py):
//   title, duration_s, kept (what was drawn of a long trace, or ""),
//   spans:   [{lane: "host"|"jax"|"device",
//              kind: "dispatch"|"sync"|"trace"|"lower"|"compile"|"module"|"op",
//              name, start_s, duration_s, module, words}]
//   compilations: [{function, start_s, total_s, trace_s, lower_s, compile_s}]
//   modules, ops: [{name, module, calls, total_s, share}]; module_columns, op_columns
//   syncs:   [{where, code, kind, count, seconds, advice}]
//   _twin_id: names this widget's static twin (widgets/_base.py)
// Saved state is anyone's (a shared notebook, a docs page): it is read by a total, bounded
// parser (``readState``: types checked, lists capped well above what the kernel sends,
// ticks counted, not stepped); what cannot be read is refused, and the view says so while
// its twin shows.

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

// Bounds of what the page reads, well above the kernel's (MAX_DRAWN 5,000 spans drawn).
const MOST_SPANS = 50000;
const MOST_ROWS = 10000; // rows of one table
const MOST_TEXT = 100000; // characters of one text
const MOST_TICKS = 50;
const COLUMNS = new Set(["name", "module", "runs", "total", "share of the cell"]);




/** Text of a saved value: a string (cut to MOST_TEXT), a finite number; else "". */
function text(v) {
  if (typeof v === "string") return v.length > MOST_TEXT ? v.slice(0, MOST_TEXT) + "…" : v;
  return typeof v === "number" && Number.isFinite(v) ? String(v) : "";
}

/** A finite number, else 0. */
function number(v) {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

/** A list of at most ``most`` objects (absent: empty), each read by ``item``; else refused. */
function list(v, what, most, item) {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new Refused(`${what} is not a list`);
  if (v.length > most) throw new Refused(`${what} has ${v.length} items, more than ${most}`);
  return v.map((x) => {
    if (x === null || typeof x !== "object" || Array.isArray(x)) throw new Refused(`an item of ${what} is not an object`);
    return item(x);
  });
}

/** The saved state, checked. */
function readState(model) {
  const duration = model.get("duration_s");
  if (duration !== undefined && duration !== null && (typeof duration !== "number" || !(duration >= 0))) {
    throw new Refused(`the trace's duration ${String(duration).slice(0, 40)} is not a number of seconds`);
  }
  const columns = (v, what) => {
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v) || v.length > COLUMNS.size) throw new Refused(`${what} are not a short list`);
    return v.filter((k) => COLUMNS.has(k));
  };
  const cost = (c) => ({ name: text(c.name), module: text(c.module), calls: number(c.calls),
    total_s: number(c.total_s), share: number(c.share) });
  const texts = model.get("title");
  return {
    title: text(texts),
    duration_s: duration || 1e-6,
    kept: text(model.get("kept")),
    spans: list(model.get("spans"), "the spans", MOST_SPANS, (x) => ({
      kind: text(x.kind), start_s: number(x.start_s), duration_s: Math.max(0, number(x.duration_s)),
      words: text(x.words),
    })),
    compilations: list(model.get("compilations"), "the compilations", MOST_ROWS, (c) => ({
      function: text(c.function), start_s: number(c.start_s), total_s: number(c.total_s),
      trace_s: number(c.trace_s), lower_s: number(c.lower_s), compile_s: number(c.compile_s),
    })),
    modules: list(model.get("modules"), "the modules", MOST_ROWS, cost),
    ops: list(model.get("ops"), "the ops", MOST_ROWS, cost),
    module_columns: columns(model.get("module_columns"), "the module columns"),
    op_columns: columns(model.get("op_columns"), "the op columns"),
    syncs: list(model.get("syncs"), "the syncs", MOST_ROWS, (x) => ({
      where: text(x.where), code: text(x.code), kind: text(x.kind), count: number(x.count),
      seconds: number(x.seconds), advice: text(x.advice),
    })),
  };
}

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
  if (!(step > 0) || !Number.isFinite(step)) return { unit, factor, ticks };
  // Counted, not stepped: far from zero, t + step may equal t.
  const first = Math.ceil(start / step);
  for (let i = 0; i < MOST_TICKS; i++) {
    const t = (first + i) * step;
    if (!(t <= end + step * 1e-9)) break;
    ticks.push(t);
  }
  return { unit, factor, ticks };
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

function timeline(state, root) {
  const box = h("div", "jaxlab-pt-timeline");
  const tip = h("div", "jaxlab-pt-tip", "wheel: zoom · drag: pan · a double press: reset");
  const width = () => Math.max(300, (box.clientWidth || 700) - 4);
  const view = { start: 0, end: state.duration_s };
  const spans = state.spans;
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
    view.end = state.duration_s;
    draw();
  });
  draw();
}

function render(model, el) {
  const state = readState(model);
  const root = h("div", "jaxlab-pt");
  root.append(h("div", "jaxlab-pt-title", state.title));
  timeline(state, root);
  if (state.kept) root.append(h("p", "jaxlab-pt-kept", state.kept));
  const compilations = state.compilations;
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
  if (state.modules.length)
    root.append(table("XLA modules, costliest first", state.module_columns,
      costs(state.modules, state.module_columns)));
  if (state.ops.length)
    root.append(table("XLA ops, costliest first", state.op_columns,
      costs(state.ops, state.op_columns)));
  const syncs = state.syncs;
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
    // Each redraw guarded: state that cannot be read replaces the view with a note (the
    // twin shows); the next readable state draws the view again.
    const redraw = () => guarded(model, el, () => render(model, el), "ProfileTimeline");
    redraw();
    model.on("change:spans", redraw);
    return () => {
      model.off("change:spans", redraw);
      el.querySelector(":scope > style.jaxlab-hide-twin")?.remove();
    };
  },
};
