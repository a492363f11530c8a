// ProfileTimeline: a %%profile trace. No imports, no network.
// State (synced from Python, see widgets/profile_timeline.py):
//   title, duration_s,
//   spans:   [{lane: "host"|"device", kind: "dispatch"|"module"|"op", name, start_s,
//              duration_s, module}]
//   modules, ops: [{name, module, calls, total_s, share}]
//   syncs:   [{where, code, kind, count, seconds, advice}]

const LANES = [
  ["host", "dispatch", "host: jitted calls"],
  ["device", "module", "device: XLA modules"],
  ["device", "op", "device: XLA ops"],
];
const SVG = "http://www.w3.org/2000/svg";
const LABEL_W = 130;
const LANE_H = 22;

/** @param {number} s seconds @returns {string} */
function seconds(s) {
  if (s >= 1) return `${s.toPrecision(3)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toPrecision(3)} ms`;
  return `${(s * 1e6).toPrecision(3)} µs`;
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

function timeline(model, root) {
  const box = h("div", "jaxlab-pt-timeline");
  const tip = h("div", "jaxlab-pt-tip", "wheel: zoom · drag: pan · double-click: reset");
  const width = () => Math.max(300, (box.clientWidth || 700) - 4);
  const view = { start: 0, end: model.get("duration_s") || 1e-6 };
  const spans = model.get("spans");
  const drawing = svg("svg", { class: "jaxlab-pt-svg", height: LANE_H * LANES.length + 20 });
  box.append(drawing);
  root.append(box, tip);

  function draw() {
    const w = width();
    drawing.setAttribute("width", w);
    drawing.replaceChildren();
    const scale = (w - LABEL_W) / (view.end - view.start);
    LANES.forEach(([lane, kind, label], i) => {
      const y = 2 + i * LANE_H;
      const text = svg("text", { x: 0, y: y + 13, class: "jaxlab-pt-label" });
      text.textContent = label;
      drawing.append(text);
      for (const s of spans) {
        if (s.lane !== lane || s.kind !== kind) continue;
        const end = s.start_s + s.duration_s;
        if (end < view.start || s.start_s > view.end) continue;
        const x = LABEL_W + Math.max(0, (s.start_s - view.start) * scale);
        const right = LABEL_W + Math.min(w - LABEL_W, (end - view.start) * scale);
        const rect = svg("rect", {
          x: x.toFixed(1), y, height: LANE_H - 6, width: Math.max(1, right - x).toFixed(1),
          class: `jaxlab-pt-span jaxlab-pt-${kind}`,
        });
        const words = `${s.name}${s.module && s.module !== s.name ? ` (${s.module})` : ""}: ` +
          `${seconds(s.duration_s)} at ${seconds(s.start_s)}`;
        const title = svg("title", {});
        title.textContent = words;
        rect.append(title);
        rect.addEventListener("mouseenter", () => { tip.textContent = words; });
        drawing.append(rect);
      }
    });
    const axis = svg("text", { x: LABEL_W, y: LANE_H * LANES.length + 14, class: "jaxlab-pt-label" });
    axis.textContent = `${seconds(view.start)} – ${seconds(view.end)}`;
    drawing.append(axis);
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
  const costs = (rows) =>
    rows.map((c) => [c.name, c.module !== c.name ? c.module : "", String(c.calls),
      seconds(c.total_s), `${(100 * c.share).toFixed(0)}%`]);
  const head = ["name", "module", "runs", "total", "share of the cell"];
  if (model.get("modules").length)
    root.append(table("XLA modules, costliest first", head, costs(model.get("modules"))));
  if (model.get("ops").length)
    root.append(table("XLA ops, costliest first", head, costs(model.get("ops"))));
  const syncs = model.get("syncs");
  if (syncs.length) {
    root.append(table(
      "implicit device-to-host transfers: each waits for the device",
      ["where", "code", "what", "times", "time", ""],
      syncs.map((s) => [s.where, s.code, s.kind, String(s.count), seconds(s.seconds), s.advice]),
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
