// ArrayView: an array or pytree, live. No imports, no network.
// State (synced from Python, see widgets/array_view.py):
//   name, rows: [{path, key, label, depth, leaf, array, line, params, bytes, flags, more}]
//         (as one buffer of their JSON text)
//   drawing: {path, shape, line, kind, caption, sample: {values, kind, steps, slice_at, bytes},
//             (a float sample's values come as one float64 buffer, its shape in dims)
//             shards: {words, mesh, devices: [{device, process, index, bytes, here, copies}]} | null}
//   footer, updates
//   selected, slice_at (written here): the leaf to draw and a 3-D+ array's leading indices

const VIRIDIS = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];
const TWILIGHT = [
  [226, 217, 226], [94, 136, 193], [61, 44, 121], [47, 20, 54], [120, 33, 66],
  [190, 104, 80], [226, 217, 226],
];
const BOOLEAN = [[235, 235, 235], [33, 113, 181]];

/** @returns {HTMLElement} */
function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text; // never innerHTML: keys are user text
  return node;
}

function bytesText(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

/** A sampled value back to a number ("NaN", "Inf", "-Inf" travel as words). */
function num(v) {
  if (typeof v === "string") return v === "NaN" ? NaN : v === "Inf" ? Infinity : -Infinity;
  return v;
}

/** A sample's values as nested arrays: a float sample's come as a buffer of float64
 * (a DataView, or an ArrayBuffer) shaped by sample.dims; others as JSON lists. */
function sampleValues(sample) {
  const v = sample.values;
  let buffer;
  if (ArrayBuffer.isView(v)) buffer = v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength);
  else if (v instanceof ArrayBuffer) buffer = v;
  else return v;
  const flat = new Float64Array(buffer); // copied above: a view's offset may be unaligned
  const dims = sample.dims || [flat.length];
  if (dims.length < 2) return Array.from(flat);
  const cols = dims[dims.length - 1];
  const rows = [];
  for (let r = 0; r * cols < flat.length; r++) rows.push(Array.from(flat.subarray(r * cols, (r + 1) * cols)));
  return rows;
}

/** The tree's rows: they come as a buffer of JSON text (a DataView or an ArrayBuffer). */
function rowsOf(v) {
  if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) return JSON.parse(new TextDecoder().decode(v));
  return v || [];
}

function colour(stops, u) {
  if (!Number.isFinite(u)) return [255, 0, 255];
  const x = Math.min(Math.max(u, 0), 1) * (stops.length - 1);
  const lo = Math.floor(x), hi = Math.min(lo + 1, stops.length - 1), t = x - lo;
  return stops[lo].map((c, k) => c * (1 - t) + stops[hi][k] * t);
}

function range(values) {
  let lo = Infinity, hi = -Infinity;
  for (const v of values) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (lo === Infinity) return [0, 1];
  return hi > lo ? [lo, hi] : [lo - 0.5, hi + 0.5];
}

function fmt(v) {
  if (!Number.isFinite(v)) return String(v);
  return Number.isInteger(v) ? String(v) : v.toPrecision(4);
}

/** The parts to draw: [title, 2-D or 1-D number arrays, colour stops]. */
function parts(sample) {
  const kind = sample.kind;
  const deepNum = (v) => (Array.isArray(v) ? v.map(deepNum) : num(v));
  if (kind === "complex") {
    const deep = (v, f) => (Array.isArray(v[0]) ? v.map((w) => deep(w, f)) : f(num(v[0]), num(v[1])));
    return [
      ["magnitude", deep(sample.values, (re, im) => Math.hypot(re, im)), VIRIDIS],
      ["phase (rad)", deep(sample.values, (re, im) => Math.atan2(im, re)), TWILIGHT],
    ];
  }
  return [["", deepNum(sample.values), kind === "boolean" ? BOOLEAN : VIRIDIS]];
}

function heatMap(box, values, stops, steps, tip) {
  const rows = values.length, cols = values[0].length;
  const flat = values.flat();
  const [lo, hi] = stops === TWILIGHT ? [-Math.PI, Math.PI] : range(flat);
  const canvas = h("canvas", "jaxlab-av-map");
  canvas.width = cols; canvas.height = rows;
  const scale = 240 / Math.max(rows, cols);
  canvas.style.width = `${Math.max(1, Math.round(cols * scale))}px`;
  canvas.style.height = `${Math.max(1, Math.round(rows * scale))}px`;
  const ctx = canvas.getContext("2d");
  const img = ctx.createImageData(cols, rows);
  flat.forEach((v, i) => {
    const [r, g, b] = colour(stops, (v - lo) / (hi - lo));
    img.data.set([r, g, b, 255], 4 * i);
  });
  ctx.putImageData(img, 0, 0);
  canvas.addEventListener("mousemove", (e) => {
    const rect = canvas.getBoundingClientRect();
    const c = Math.floor(((e.clientX - rect.left) / rect.width) * cols);
    const r = Math.floor(((e.clientY - rect.top) / rect.height) * rows);
    if (r < 0 || c < 0 || r >= rows || c >= cols) return;
    tip.textContent = `[${r * steps[0]}, ${c * steps[1]}] = ${fmt(values[r][c])}`;
  });
  const bar = h("div", "jaxlab-av-bar");
  const grad = stops.slice().reverse().map((s) => `rgb(${s.join(",")})`).join(",");
  bar.append(h("div", "jaxlab-av-bar-top", stops === BOOLEAN ? "True" : fmt(hi)));
  const strip = h("div", "jaxlab-av-bar-strip");
  strip.style.background = `linear-gradient(${grad})`;
  bar.append(strip, h("div", "jaxlab-av-bar-bottom", stops === BOOLEAN ? "False" : fmt(lo)));
  const row = h("div", "jaxlab-av-maprow");
  row.append(canvas, bar);
  box.append(row);
}

function line(box, values, step, tip) {
  const W = 480, H = 110;
  const canvas = h("canvas", "jaxlab-av-line");
  canvas.width = W; canvas.height = H;
  const ctx = canvas.getContext("2d");
  const [lo, hi] = range(values);
  const style = getComputedStyle(box);
  ctx.strokeStyle = style.getPropertyValue("--jp-brand-color1").trim() || "#1976d2";
  const x = (i) => 4 + (values.length > 1 ? (i / (values.length - 1)) * (W - 8) : W / 2);
  const y = (v) => H - 14 - ((v - lo) / (hi - lo)) * (H - 28);
  ctx.beginPath();
  let pen = false;
  values.forEach((v, i) => {
    if (!Number.isFinite(v)) { pen = false; return; }
    if (pen) ctx.lineTo(x(i), y(v)); else ctx.moveTo(x(i), y(v));
    pen = true;
  });
  ctx.stroke();
  ctx.fillStyle = style.getPropertyValue("--jp-ui-font-color1").trim() || "#222";
  ctx.font = "12px sans-serif";
  ctx.fillText(fmt(hi), 2, 12);
  ctx.fillText(fmt(lo), 2, H - 2);
  canvas.addEventListener("mousemove", (e) => {
    const rect = canvas.getBoundingClientRect();
    const i = Math.round(((e.clientX - rect.left) / rect.width) * (values.length - 1));
    if (i >= 0 && i < values.length) tip.textContent = `[${i * step}] = ${fmt(values[i])}`;
  });
  box.append(canvas);
}

function sliceControl(box, model, drawing) {
  const shape = drawing.shape;
  const at = drawing.sample.slice_at;
  const bar = h("div", "jaxlab-av-slice", "slice ");
  at.forEach((index, axis) => {
    const input = h("input");
    input.type = "number"; input.min = "0"; input.max = String(shape[axis] - 1);
    input.value = String(index);
    input.title = `index along axis ${axis} (0..${shape[axis] - 1})`;
    input.addEventListener("change", () => {
      const chosen = [...bar.querySelectorAll("input")].map((i) => Number(i.value) || 0);
      model.set("slice_at", chosen);
      model.save_changes();
    });
    bar.append(input, h("span", "", axis < at.length - 1 ? ", " : ", :, :"));
  });
  box.append(bar);
}

function drawPane(box, model) {
  box.replaceChildren();
  const d = model.get("drawing") || {};
  if (!d.path) { box.append(h("div", "jaxlab-av-dim", "no array to draw")); return; }
  box.append(h("div", "jaxlab-av-path", d.path), h("div", "jaxlab-av-dim", d.line));
  const s = d.sample ? { ...d.sample, values: sampleValues(d.sample) } : null;
  if (!s) { box.append(h("div", "jaxlab-av-dim", d.caption || "")); return; }
  if (d.shape.length > 2) sliceControl(box, model, d);
  const tip = h("div", "jaxlab-av-tip", "hover for values");
  if (d.shape.length === 0) {
    box.append(h("code", "", JSON.stringify(s.values)));
  } else {
    for (const [title, values, stops] of parts(s)) {
      if (title) box.append(h("div", "jaxlab-av-title", title));
      if (Array.isArray(values[0])) heatMap(box, values, stops, s.steps, tip);
      else line(box, values, s.steps[0], tip);
    }
    box.append(tip);
  }
  if (d.caption) box.append(h("div", "jaxlab-av-dim", d.caption));
  if (d.shards) shardList(box, d.shards);
}

// Which device holds which block: the layout's words, then one line per device.
function shardList(box, shards) {
  box.append(h("div", "jaxlab-av-title", shards.words));
  for (const s of shards.devices.slice(0, 64)) {
    const where = s.here ? "" : `, process ${s.process} (elsewhere)`;
    box.append(h("div", "jaxlab-av-dim", `device ${s.device}${where}: ${s.index}, ${bytesText(s.bytes)}`));
  }
  if (shards.devices.length > 64) box.append(h("div", "jaxlab-av-dim", `… ${shards.devices.length - 64} more`));
}

function drawTree(box, model, collapsed, redraw) {
  box.replaceChildren();
  const rows = rowsOf(model.get("rows"));
  const selected = model.get("selected");
  let hideBelow = Infinity;
  for (const row of rows) {
    if (row.depth > hideBelow) continue;
    hideBelow = Infinity;
    const div = h("div", "jaxlab-av-row");
    div.style.paddingLeft = `${row.depth * 1.1}em`;
    if (row.path === selected) div.classList.add("jaxlab-av-selected");
    const closed = collapsed.has(row.path);
    if (closed) hideBelow = row.depth;
    const caret = h("span", "jaxlab-av-caret", row.leaf ? " " : closed ? "▸" : "▾");
    div.append(caret, h("b", "", row.key), h("span", "jaxlab-av-dim", ` ${row.label} `));
    if (row.leaf) div.append(h("span", "", row.line));
    else div.append(h("span", "jaxlab-av-dim", `${row.params} values, ${bytesText(row.bytes)}`));
    if (row.flags) div.append(h("span", "jaxlab-av-flag", ` ${row.flags}`));
    if (row.more) div.append(h("span", "jaxlab-av-dim", ` … ${row.more} more`));
    div.addEventListener("click", () => {
      if (row.array) {
        model.set("selected", row.path);
        model.set("slice_at", []);
        model.save_changes();
      } else if (!row.leaf) {
        if (closed) collapsed.delete(row.path); else collapsed.add(row.path);
        redraw();
      }
    });
    box.append(div);
  }
}

function render({ model, el }) {
  const root = h("div", "jaxlab-av");
  const head = h("div", "jaxlab-av-head");
  const body = h("div", "jaxlab-av-body");
  const tree = h("div", "jaxlab-av-tree");
  const pane = h("div", "jaxlab-av-pane");
  const foot = h("div", "jaxlab-av-dim");
  body.append(tree, pane);
  root.append(head, body, foot);
  el.append(root);
  const collapsed = new Set();
  const redraw = () => {
    head.textContent = `${model.get("name") || "value"} · update ${model.get("updates")}`;
    drawTree(tree, model, collapsed, redraw);
    drawPane(pane, model);
    foot.textContent = model.get("footer") || "";
  };
  redraw();
  model.on("change:rows", redraw);
  model.on("change:drawing", () => drawPane(pane, model));
  model.on("change:selected", () => drawTree(tree, model, collapsed, redraw));
  model.on("change:updates", () => {
    head.textContent = `${model.get("name") || "value"} · update ${model.get("updates")}`;
  });
}

export default { render };
