// ArrayView: an array or pytree, live. No imports, no network.
// State (synced from Python, see widgets/array_view.py):
//   name, rows: [{path, key, label, depth, leaf, array, line, params, bytes, flags, more}]
//         (as one buffer of their JSON text)
//   drawing: {path, shape, line, kind, caption, sample: {values, kind, steps, slice_at, bytes},
//             (a float sample's values come as one float64 buffer, its shape in dims)
//             shards: {words, mesh, devices: [{device, process, index, bytes, here, copies}]} | null,
//             range: [lo, hi] | null (the colours' range: the whole array's, or fixed),
//             range_fixed, sample_range (what the sample spans, when that differs),
//             legend ("NaN at [3, 7] and 4 more")}
//   footer, updates
//   selected, slice_at (written here): the leaf to draw and a 3-D+ array's leading indices
//   _twin_id: names this widget's static twin (widgets/_base.py)
// Saved state is anyone's (a shared notebook, a docs page): every value is read by a
// total, bounded parser below (types checked, dims checked against the buffer, lists
// capped well above what the kernel sends); what cannot be read is refused, and the view
// says so while its twin shows.

const VIRIDIS = [
  [68, 1, 84], [71, 44, 122], [59, 81, 139], [44, 113, 142], [33, 144, 141],
  [39, 173, 129], [92, 200, 99], [170, 220, 50], [253, 231, 37],
];
const TWILIGHT = [
  [226, 217, 226], [94, 136, 193], [61, 44, 121], [47, 20, 54], [120, 33, 66],
  [190, 104, 80], [226, 217, 226],
];
const BOOLEAN = [[235, 235, 235], [33, 113, 181]];
// Bounds of what the page reads, well above the kernel's (MAX_ROWS 3000 tree rows; a sample
// of at most 2,000 points or 160 x 160, jaxlab.arrays.sample).
const MOST_ROWS = 10000;
const MOST_SIDE = 4096; // values along one drawn axis
const MOST_VALUES = 1 << 18; // values in one sample
const MOST_AXES = 64; // NumPy's limit
const MOST_TEXT = 100000; // characters of one text




/** Text of a saved value: a string (cut to MOST_TEXT), a finite number; else "". */
function text(v) {
  if (typeof v === "string") return v.length > MOST_TEXT ? v.slice(0, MOST_TEXT) + "…" : v;
  return typeof v === "number" && Number.isFinite(v) ? String(v) : "";
}

/** A finite number, or ``otherwise``. */
function number(v, otherwise = 0) {
  return typeof v === "number" && Number.isFinite(v) ? v : otherwise;
}

/** A list of at most ``most`` items, or refused. */
function list(v, what, most) {
  if (!Array.isArray(v)) throw new Refused(`${what} is not a list`);
  if (v.length > most) throw new Refused(`${what} has ${v.length} items, more than ${most}`);
  return v;
}

/** A list of whole numbers in [lo, hi], or refused. */
function wholes(v, what, lo, hi, most = MOST_AXES) {
  for (const d of list(v, what, most)) {
    if (!Number.isInteger(d) || d < lo || d > hi) throw new Refused(`${what} ${JSON.stringify(v).slice(0, 80)} are not whole numbers from ${lo} to ${hi}`);
  }
  return v;
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v) && !ArrayBuffer.isView(v) && !(v instanceof ArrayBuffer);
}


function bytesText(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

/** A sampled value back to a number ("NaN", "Inf", "-Inf" travel as words); any other
 * value is refused. */
function num(v) {
  if (typeof v === "number") return v;
  if (v === "NaN") return NaN;
  if (v === "Inf") return Infinity;
  if (v === "-Inf") return -Infinity;
  throw new Refused(`a sampled value is ${JSON.stringify(v)?.slice(0, 40) ?? typeof v}, not a number`);
}

/** A buffer's bytes as float64 values (a DataView, or an ArrayBuffer), copied: a view's
 * offset may be unaligned. */
function floats(v) {
  const bytes = ArrayBuffer.isView(v) ? v.buffer.slice(v.byteOffset, v.byteOffset + v.byteLength) : v;
  if (bytes.byteLength % 8) throw new Refused(`the sample's buffer of ${bytes.byteLength} bytes is not whole float64 values`);
  if (bytes.byteLength / 8 > MOST_VALUES) throw new Refused(`the sample holds ${bytes.byteLength / 8} values, more than ${MOST_VALUES}`);
  return new Float64Array(bytes);
}

/** A sample's values as numbers, 1-D or 2-D (rows of equal length), checked and bounded:
 * a float sample's come as a buffer of float64 shaped by sample.dims; others as JSON lists
 * (complex: [re, im] pairs, which ``pair`` reads into one number each). */
function sampleValues(sample, pair) {
  const v = sample.values;
  if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) {
    const flat = floats(v);
    const dims = sample.dims === undefined || sample.dims === null ? [flat.length] : sample.dims;
    wholes(dims, "the sample's dims", 0, MOST_VALUES, 2);
    const count = dims.reduce((a, b) => a * b, 1);
    if (dims.length === 0 || count !== flat.length) {
      throw new Refused(`the sample's dims [${dims.join(", ")}] do not hold its ${flat.length} values`);
    }
    if (dims.length === 1) return Array.from(flat);
    const [rows, cols] = dims;
    if (rows > MOST_SIDE || cols > MOST_SIDE) throw new Refused(`the sample's dims [${rows}, ${cols}] exceed ${MOST_SIDE}`);
    const out = [];
    for (let r = 0; r < rows; r++) out.push(Array.from(flat.subarray(r * cols, (r + 1) * cols)));
    return out;
  }
  const one = (x) => (pair ? pairValue(x, pair) : num(x));
  if (!Array.isArray(v) || (pair && !Array.isArray(v[0]))) return one(v); // a scalar
  list(v, "the sample's values", MOST_VALUES);
  if (!Array.isArray(v[0]) || (pair && !Array.isArray(v[0][0]))) return v.map(one);
  const cols = v[0].length;
  if (v.length > MOST_SIDE || cols > MOST_SIDE || v.length * cols > MOST_VALUES) {
    throw new Refused(`the sample's ${v.length} x ${cols} values are more than it may hold`);
  }
  return v.map((row) => {
    if (!Array.isArray(row) || row.length !== cols) throw new Refused("the sample's rows are not of one length");
    return row.map(one);
  });
}

/** A complex value's [re, im] pair through ``f`` (magnitude or phase). */
function pairValue(x, f) {
  if (!Array.isArray(x) || x.length !== 2) throw new Refused("a complex value is not an [re, im] pair");
  return f(num(x[0]), num(x[1]));
}

/** The tree's rows: they come as a buffer of JSON text (a DataView or an ArrayBuffer);
 * each is checked and its fields read as what they should be. */
function rowsOf(v) {
  if (v === undefined || v === null) return [];
  let rows = v;
  if (ArrayBuffer.isView(v) || v instanceof ArrayBuffer) {
    try {
      rows = JSON.parse(new TextDecoder().decode(v));
    } catch (err) {
      throw new Refused(`the tree's rows are not readable JSON (${err.message})`);
    }
  }
  return list(rows, "the tree's rows", MOST_ROWS).map((row) => {
    if (!isObject(row)) throw new Refused("a row of the tree is not an object");
    const depth = row.depth;
    if (!Number.isInteger(depth) || depth < 0 || depth > MOST_ROWS) throw new Refused(`a row's depth ${String(depth).slice(0, 20)} is not a whole number`);
    return {
      path: text(row.path), key: text(row.key), label: text(row.label), depth,
      leaf: row.leaf === true, array: row.array === true, line: text(row.line),
      params: text(row.params), bytes: number(row.bytes), flags: text(row.flags),
      more: number(row.more),
    };
  });
}

/** The drawing, checked: {path, shape, line, kind, caption, sample, shards}; {} draws none. */
function drawingOf(v) {
  if (v === undefined || v === null) return {};
  if (!isObject(v)) throw new Refused("the drawing is not an object");
  if (!v.path) return {};
  const d = { path: text(v.path), line: text(v.line), kind: text(v.kind), caption: text(v.caption) };
  d.shape = wholes(v.shape, "the drawn array's shape", 0, Number.MAX_SAFE_INTEGER);
  d.range = null;
  if (Array.isArray(v.range) && v.range.length === 2 && v.range.every(Number.isFinite) && v.range[0] < v.range[1]) {
    d.range = [v.range[0], v.range[1]];
  }
  d.rangeFixed = v.range_fixed === true;
  d.sampleRange = text(v.sample_range);
  d.legend = text(v.legend);
  // the sample's cells under a marker (its NaN/Inf, and those the device found that a
  // strided sample stepped over); null: the page finds the sample's own
  d.marks = null;
  if (Array.isArray(v.marks)) {
    d.marks = list(v.marks, "the drawing's marks", MARKS_DRAWN).map((c) => wholes(c, "a marked cell", 0, MOST_VALUES, 2));
  }
  d.sample = null;
  if (v.sample !== null && v.sample !== undefined) {
    const s = v.sample;
    if (!isObject(s)) throw new Refused("the drawing's sample is not an object");
    const kind = text(s.kind);
    const parts = kind === "complex"
      ? [["magnitude", sampleValues(s, Math.hypot), VIRIDIS],
         ["phase (rad)", sampleValues(s, (re, im) => Math.atan2(im, re)), TWILIGHT]]
      : [["", sampleValues(s, null), kind === "boolean" ? BOOLEAN : VIRIDIS]];
    const values = parts[0][1];
    const axes = !Array.isArray(values) ? 0 : Array.isArray(values[0]) ? 2 : 1;
    if (axes !== Math.min(d.shape.length, 2) && !(axes === 1 && values.length === 0)) {
      throw new Refused(`a ${axes}-D sample does not draw a ${d.shape.length}-D array`);
    }
    const steps = s.steps === undefined || s.steps === null ? [1, 1] : s.steps;
    wholes(steps, "the sample's steps", 1, Number.MAX_SAFE_INTEGER);
    const at = s.slice_at === undefined || s.slice_at === null ? [] : s.slice_at;
    wholes(at, "the sample's slice", 0, Number.MAX_SAFE_INTEGER);
    if (d.shape.length > 2 && at.length !== d.shape.length - 2) {
      throw new Refused(`the slice [${at.join(", ")}] does not fix the leading axes of shape [${d.shape.join(", ")}]`);
    }
    d.sample = { parts, axes, steps: [steps[0] ?? 1, steps[1] ?? steps[0] ?? 1], slice_at: at };
    if (axes === 0) d.sample.scalar = JSON.stringify(s.values).slice(0, 200);
  }
  d.shards = null;
  if (v.shards !== null && v.shards !== undefined) {
    if (!isObject(v.shards)) throw new Refused("the drawing's shards are not an object");
    const devices = list(v.shards.devices, "the shards' devices", 1 << 16);
    d.shards = {
      words: text(v.shards.words),
      devices: devices.slice(0, 64).map((s) => (isObject(s) ? s : {})),
      more: Math.max(0, devices.length - 64),
    };
  }
  return d;
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

// A NaN/Inf marker: a magenta square outlined black and white, at least MARK_SIDE px,
// seen on any colour of the map, in either theme, on a projector.
const MARK_SIDE = 8;
const MARKS_DRAWN = 200;

function marker(x, y, side) {
  const m = h("div", "jaxlab-av-mark");
  m.style.left = `${x - side / 2}px`; m.style.top = `${y - side / 2}px`;
  m.style.width = `${side}px`; m.style.height = `${side}px`;
  return m;
}

function heatMap(box, values, stops, steps, tip, given, marks) {
  const rows = values.length, cols = values[0].length;
  const flat = values.flat();
  const [lo, hi] = stops === TWILIGHT ? [-Math.PI, Math.PI] : given ?? range(flat);
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
  const frame = h("div", "jaxlab-av-mapframe");
  frame.append(canvas);
  const side = Math.max(MARK_SIDE, scale);
  const cells = [];
  if (marks) {
    for (const [r, c] of marks) if (r < rows && c < cols) cells.push([r, c]);
  } else {
    for (let i = 0; i < flat.length && cells.length < MARKS_DRAWN; i++) {
      if (!Number.isFinite(flat[i])) cells.push([Math.floor(i / cols), i % cols]);
    }
  }
  for (const [r, c] of cells) frame.append(marker((c + 0.5) * scale, (r + 0.5) * scale, side));
  const bar = h("div", "jaxlab-av-bar");
  const grad = stops.slice().reverse().map((s) => `rgb(${s.join(",")})`).join(",");
  bar.append(h("div", "jaxlab-av-bar-top", stops === BOOLEAN ? "True" : fmt(hi)));
  const strip = h("div", "jaxlab-av-bar-strip");
  strip.style.background = `linear-gradient(${grad})`;
  bar.append(strip, h("div", "jaxlab-av-bar-bottom", stops === BOOLEAN ? "False" : fmt(lo)));
  const row = h("div", "jaxlab-av-maprow");
  row.append(frame, bar);
  box.append(row);
}

function line(box, values, step, tip, given, marks) {
  const W = 480, H = 110;
  const canvas = h("canvas", "jaxlab-av-line");
  canvas.width = W; canvas.height = H;
  const ctx = canvas.getContext("2d");
  const [lo, hi] = given ?? range(values);
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
  const at = marks ? marks.map(([i]) => i).filter((i) => i < values.length)
    : values.flatMap((v, i) => (Number.isFinite(v) ? [] : [i])).slice(0, MARKS_DRAWN);
  at.forEach((i) => {
    const s = MARK_SIDE, cx = x(i) - s / 2, cy = H - 9 - s / 2;
    ctx.fillStyle = "rgb(255,0,255)"; ctx.fillRect(cx, cy, s, s);
    ctx.strokeStyle = "#000"; ctx.lineWidth = 2; ctx.strokeRect(cx, cy, s, s);
    ctx.strokeStyle = "#fff"; ctx.lineWidth = 1; ctx.strokeRect(cx - 1.5, cy - 1.5, s + 3, s + 3);
  });
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
      const chosen = [...bar.querySelectorAll("input")].map((i) => Math.max(0, Math.trunc(Number(i.value)) || 0));
      model.set("slice_at", chosen);
      model.save_changes();
    });
    bar.append(input, h("span", "", axis < at.length - 1 ? ", " : ", :, :"));
  });
  box.append(bar);
}

function drawPane(box, model) {
  const d = drawingOf(model.get("drawing"));
  box.replaceChildren();
  if (!d.path) { box.append(h("div", "jaxlab-av-dim", "no array to draw")); return; }
  box.append(h("div", "jaxlab-av-path", d.path), h("div", "jaxlab-av-dim", d.line));
  const s = d.sample;
  if (!s) { box.append(h("div", "jaxlab-av-dim", d.caption)); return; }
  if (d.shape.length > 2) sliceControl(box, model, d);
  const tip = h("div", "jaxlab-av-tip", "hover for values");
  if (s.axes === 0) {
    box.append(h("code", "", s.scalar));
  } else if (s.parts[0][1].length === 0 || (s.axes === 2 && s.parts[0][1][0].length === 0)) {
    box.append(h("div", "jaxlab-av-dim", "no values to draw"));
  } else {
    for (const [title, values, stops] of s.parts) {
      if (title) box.append(h("div", "jaxlab-av-title", title));
      const given = stops === VIRIDIS && title !== "magnitude" ? d.range : null;
      if (s.axes === 2) heatMap(box, values, stops, s.steps, tip, given, d.marks);
      else line(box, values, s.steps[0], tip, given, d.marks);
    }
    if (d.range && (d.rangeFixed || d.sampleRange)) {
      const fixed = d.rangeFixed ? `colours fixed at ${fmt(d.range[0])} to ${fmt(d.range[1])}` : "";
      box.append(h("div", "jaxlab-av-dim jaxlab-av-range", [fixed, d.sampleRange].filter(Boolean).join("; ")));
    }
    if (d.legend) box.append(h("div", "jaxlab-av-legend", d.legend));
    box.append(tip);
  }
  if (d.caption) box.append(h("div", "jaxlab-av-dim", d.caption));
  if (d.shards) shardList(box, d.shards);
}

// Which device holds which block: the layout's words, then one line per device.
function shardList(box, shards) {
  box.append(h("div", "jaxlab-av-title", shards.words));
  for (const s of shards.devices) {
    const where = s.here ? "" : `, process ${text(s.process)} (elsewhere)`;
    box.append(h("div", "jaxlab-av-dim", `device ${text(s.device)}${where}: ${text(s.index)}, ${bytesText(number(s.bytes))}`));
  }
  if (shards.more) box.append(h("div", "jaxlab-av-dim", `… ${shards.more} more`));
}

function drawTree(box, model, collapsed, redraw) {
  const rows = rowsOf(model.get("rows"));
  const selected = model.get("selected");
  box.replaceChildren();
  let hideBelow = Infinity;
  for (const row of rows) {
    if (row.depth > hideBelow) continue;
    hideBelow = Infinity;
    const div = h("div", "jaxlab-av-row");
    div.style.paddingLeft = `${Math.min(row.depth, 100) * 1.1}em`;
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
  const collapsed = new Set();
  const title = () => {
    head.textContent = `${text(model.get("name")) || "value"} · update ${number(model.get("updates"))}`;
  };
  // Each redraw guarded: state that cannot be read replaces the view with a note (the
  // twin shows); the next readable state draws the view again.
  const draw = (part) => guarded(model, el, () => {
    if (!el.contains(root)) { el.replaceChildren(root); part = "all"; }
    if (part === "all" || part === "title") title();
    if (part === "all" || part === "tree") drawTree(tree, model, collapsed, redraw);
    if (part === "all" || part === "pane") drawPane(pane, model);
    if (part === "all") foot.textContent = text(model.get("footer"));
  }, "ArrayView");
  const redraw = () => draw("all");
  const events = [
    ["change:rows", redraw],
    ["change:drawing", () => draw("pane")],
    ["change:selected", () => draw("tree")],
    ["change:updates", () => draw("title")],
  ];
  redraw();
  for (const [event, handler] of events) model.on(event, handler);
  return () => {
    for (const [event, handler] of events) model.off(event, handler);
    el.querySelector(":scope > style.jaxlab-hide-twin")?.remove();
  };
}

export default { render };
