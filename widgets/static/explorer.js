// Explorer: sliders on a compiled function, its answer and derivatives drawn live (issue 35).
// No imports, no network; every drawing is SVG made here (numbers only) and every text is
// set with textContent. State (synced from Python, widgets/explorer.py): `frame`, the core's
// frame() (kernel_ext/explore/), and `_twin_id`. The page writes no trait: it sends
//   {type: "move", name, value, seq}  {type: "sweep", name}  {type: "fit"}  {type: "stop"}
// and the kernel answers with a new frame. Moves: one in flight at a time; a move made
// while one is computed waits and only the latest waiting one is sent (the kernel
// coalesces too), so the view never lags the hand by more than one computation.
// Saved state is anyone's: the frame is read by total, bounded readers below; what cannot
// be read is refused and the view says so while its twin shows.

const SVGNS = "http://www.w3.org/2000/svg";
const MOST_CONTROLS = 256;
const MOST_PANELS = 64;
const MOST_POINTS = 200000; // values in one curve
const MOST_TEXT = 20000;
const POSITIONS = 1000; // slider positions along a range
const NO_KERNEL = "the sliders need a running kernel";
const W = 420; // a chart's width and height, px (two fit beside the controls at 1280 px)
const H = 150;

function text(v) {
  if (typeof v === "string") return v.length > MOST_TEXT ? v.slice(0, MOST_TEXT) + "…" : v;
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return "";
}
function finite(v) {
  return typeof v === "number" && Number.isFinite(v);
}
function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}
/** A list of at most ``most`` items (absent: empty), or refused. */
function list(v, what, most) {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new Refused(`${what} is not a list`);
  if (v.length > most) throw new Refused(`${what} has ${v.length} items, more than ${most}`);
  return v;
}
/** Numbers of a curve (a non-number is a gap: NaN). */
function nums(v, what) {
  return list(v, what, MOST_POINTS).map((x) => (typeof x === "number" ? x : NaN));
}
/** A number as a reader takes it in: 4 significant figures, NaN/Inf said. */
function fmt(v) {
  if (typeof v === "boolean") return v ? "True" : "False";
  if (typeof v !== "number") return text(v);
  if (Number.isNaN(v)) return "NaN";
  if (!Number.isFinite(v)) return v > 0 ? "Inf" : "-Inf";
  if (Number.isInteger(v) && Math.abs(v) < 1e6) return String(v);
  const a = Math.abs(v);
  return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(3) : String(Number(v.toPrecision(4)));
}

/** The frame, checked: every list bounded, every field of the type drawn. */
function readFrame(raw) {
  if (raw === undefined || raw === null) return null;
  if (!isObject(raw)) throw new Refused("the frame is not an object");
  const controls = list(raw.controls, "controls", MOST_CONTROLS).map((c) => {
    if (!isObject(c)) throw new Refused("a control is not an object");
    const kind = ["float", "bool", "static", "fixed"].includes(c.kind) ? c.kind : "fixed";
    return {
      name: text(c.name), kind, value: c.value, scale: c.scale === "log" ? "log" : "linear",
      lo: finite(c.lo) ? c.lo : null, hi: finite(c.hi) ? c.hi : null,
      note: text(c.range_note), flag: text(c.flag),
    };
  });
  const panels = list(raw.panels, "panels", MOST_PANELS).map((p) => {
    if (!isObject(p)) throw new Refused("a panel is not an object");
    return p;
  });
  const bar = list(raw.bar, "bar", MOST_CONTROLS).filter(isObject);
  const fit = isObject(raw.fit) ? { running: raw.fit.running === true, loss: nums(raw.fit.loss, "the loss"), step: raw.fit.step, ended: text(raw.fit.ended) } : null;
  const error = isObject(raw.error) ? { message: text(raw.error.message), where: text(raw.error.where), param: text(raw.error.param) } : null;
  return {
    fn: text(raw.function), seq: Number.isInteger(raw.seq) ? raw.seq : 0, controls, panels, bar, fit, error,
    moved: text(raw.moved), words: text(raw.derivative_words),
    notes: list(raw.notes, "notes", MOST_CONTROLS).map(text), compiles: raw.compiles,
  };
}

// ------------------------------------------------------------------------- drawing

function s(tag, attrs) {
  const node = document.createElementNS(SVGNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
  return node;
}

/** A chart: ``series`` of {xs, ys, cls} (and {band: [xs, lo, hi]}), on shared axes, with
 * its range written at the corners; ``marks`` are points [x, y]; ``lines`` segments. */
function chart(series, { width = W, height = H, marks = [], lines = [], label = "" } = {}) {
  const svg = s("svg", { class: "jaxlab-ex-chart", width, height, viewBox: `0 0 ${width} ${height}`, role: "img" });
  if (label) svg.setAttribute("aria-label", label);
  let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
  const take = (x, y) => {
    if (!Number.isFinite(x) || !Number.isFinite(y)) return;
    x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y);
  };
  for (const c of series) {
    if (c.band) c.xs.forEach((x, i) => { take(x, c.lo[i]); take(x, c.hi[i]); });
    else c.xs.forEach((x, i) => take(x, c.ys[i]));
  }
  for (const [x, y] of marks) take(x, y);
  if (!(x0 <= x1)) { svg.append(s("text", { x: 8, y: height / 2 })); svg.lastChild.textContent = "nothing finite to draw"; return svg; }
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (y1 === y0) { y0 -= Math.abs(y0) * 0.1 || 1; y1 += Math.abs(y1) * 0.1 || 1; }
  const L = 52, R = 8, T = 8, B = 18;
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (width - L - R);
  const sy = (y) => height - B - ((y - y0) / (y1 - y0)) * (height - T - B);
  svg.append(s("rect", { class: "jaxlab-ex-frame", x: L, y: T, width: width - L - R, height: height - T - B }));
  if (y0 < 0 && y1 > 0) svg.append(s("line", { class: "jaxlab-ex-zero", x1: L, x2: width - R, y1: sy(0), y2: sy(0) }));
  const label4 = (x, y, words, anchor) => {
    const t = s("text", { x, y, "text-anchor": anchor, class: "jaxlab-ex-axis" });
    t.textContent = words;
    svg.append(t);
  };
  label4(L - 3, T + 10, fmt(y1), "end");
  label4(L - 3, height - B, fmt(y0), "end");
  label4(L, height - 4, fmt(x0), "start");
  label4(width - R, height - 4, fmt(x1), "end");
  const clip = (y) => Math.max(-1e6, Math.min(1e6, y));
  for (const c of series) {
    if (c.band) {
      const top = [], bottom = [];
      c.xs.forEach((x, i) => {
        if (Number.isFinite(x) && Number.isFinite(c.lo[i]) && Number.isFinite(c.hi[i])) {
          top.push(`${sx(x).toFixed(1)},${clip(sy(c.hi[i])).toFixed(1)}`);
          bottom.unshift(`${sx(x).toFixed(1)},${clip(sy(c.lo[i])).toFixed(1)}`);
        }
      });
      if (top.length > 1) svg.append(s("polygon", { class: c.cls, points: top.concat(bottom).join(" ") }));
      continue;
    }
    let run = [];
    const flush = () => { if (run.length > 1) svg.append(s("polyline", { class: c.cls, points: run.join(" ") })); run = []; };
    c.xs.forEach((x, i) => {
      const y = c.ys[i];
      if (Number.isFinite(x) && Number.isFinite(y)) run.push(`${sx(x).toFixed(1)},${clip(sy(y)).toFixed(1)}`);
      else flush();
    });
    flush();
  }
  for (const [xa, ya, xb, yb, cls] of lines) {
    if ([xa, ya, xb, yb].every(Number.isFinite)) svg.append(s("line", { class: cls, x1: sx(xa), y1: clip(sy(ya)), x2: sx(xb), y2: clip(sy(yb)) }));
  }
  for (const [x, y] of marks) {
    if (Number.isFinite(x) && Number.isFinite(y)) svg.append(s("circle", { class: "jaxlab-ex-mark", cx: sx(x), cy: clip(sy(y)), r: 4 }));
  }
  return svg;
}

const range = (n) => Array.from({ length: n }, (_, i) => i);

/** An image the kernel drew (PNG as base64, or SVG text as a data URL: an image runs no
 * script); null when it is neither. */
function image(p, key, svgKey, alt) {
  const img = h("img", "jaxlab-ex-map");
  img.alt = alt;
  const png = p[key];
  if (typeof png === "string" && png.length < 8e6) {
    const raw = png.startsWith("data:image/png;base64,") ? png.slice(22) : png;
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(raw)) return null;
    img.src = "data:image/png;base64," + raw;
    return img;
  }
  const svg = svgKey ? p[svgKey] : undefined;
  if (typeof svg === "string" && svg.length < 8e6) {
    img.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svg);
    return img;
  }
  return null;
}

function scalarPanel(box, p, f) {
  box.append(h("div", "jaxlab-ex-value", fmt(p.value)));
  const hist = nums(p.history, "the history");
  if (hist.length > 1) box.append(chart([{ xs: range(hist.length), ys: hist, cls: "jaxlab-ex-spark" }], { width: 200, height: 44, label: "recent values" }));
  if (f.words) box.append(h("div", "jaxlab-ex-words", f.words));
  const sw = isObject(p.sweep) ? p.sweep : null;
  if (!sw) return;
  const xs = nums(sw.xs, "the sweep's values"), ys = nums(sw.ys, "the sweep's outputs");
  const slopes = nums(sw.slopes, "the sweep's slopes");
  const cur = finite(sw.current) ? sw.current : NaN;
  const param = text(sw.param);
  // The current point: the answer now; its slope: the tangent when this slider moved
  // last, else the sweep's slope nearest the current value.
  let k = 0;
  xs.forEach((x, i) => { if (Math.abs(x - cur) < Math.abs(xs[k] - cur)) k = i; });
  const y = finite(p.value) ? p.value : ys[k];
  const slope = param === f.moved && finite(p.tangent) ? p.tangent : slopes[k];
  const half = (Math.max(...xs.filter(Number.isFinite)) - Math.min(...xs.filter(Number.isFinite))) / 6;
  const lines = [];
  if (Number.isFinite(slope) && Number.isFinite(half)) {
    // the tangent, a third of the sweep wide, kept inside the sweep's values
    const xa = Math.max(cur - half, Math.min(...xs.filter(Number.isFinite)));
    const xb = Math.min(cur + half, Math.max(...xs.filter(Number.isFinite)));
    lines.push([xa, y + slope * (xa - cur), xb, y + slope * (xb - cur), "jaxlab-ex-tangent"]);
  }
  box.append(h("div", "jaxlab-ex-caption", `${p.path || "output"} against ${param} (● now, slope ${fmt(slope)})`));
  box.append(chart([{ xs, ys, cls: "jaxlab-ex-curve" }], { marks: [[cur, y]], lines, label: `sweep over ${param}` }));
}

function linePanel(box, p, f) {
  const ys = nums(p.y, "the line");
  const xs = p.x === null || p.x === undefined ? range(ys.length) : nums(p.x, "the line's x");
  const tan = p.tangent === null || p.tangent === undefined ? null : nums(p.tangent, "the tangent");
  const delta = finite(p.delta) ? p.delta : 0;
  const series = [];
  if (tan && delta) series.push({ band: true, xs, lo: ys.map((y, i) => y - delta * tan[i]), hi: ys.map((y, i) => y + delta * tan[i]), cls: "jaxlab-ex-band" });
  series.push({ xs, ys, cls: "jaxlab-ex-curve" });
  box.append(chart(series, { label: p.path || "output" }));
  if (tan && f.moved) {
    box.append(h("div", "jaxlab-ex-caption", `d ${p.path || "output"} / d ${f.moved}` + (delta ? ` (band: ± ${fmt(delta)} × it)` : "")));
    box.append(chart([{ xs, ys: tan, cls: "jaxlab-ex-tangent-curve" }], { height: 90, label: "tangent" }));
  }
}

function pathPanel(box, p, f) {
  const xy = list(p.xy, "the path", MOST_POINTS).map((q) => (Array.isArray(q) ? q : [NaN, NaN]));
  const xs = xy.map((q) => (typeof q[0] === "number" ? q[0] : NaN));
  const ys = xy.map((q) => (typeof q[1] === "number" ? q[1] : NaN));
  const series = [{ xs, ys, cls: "jaxlab-ex-curve" }];
  const tan = list(p.tangent, "the path's tangent", MOST_POINTS);
  const c = f.controls.find((q) => q.name === f.moved);
  if (tan.length === xy.length && c && c.lo !== null && c.hi !== null) {
    // the path nudged by a twentieth of the slider's range along its tangent
    const d = (c.hi - c.lo) / 20;
    series.push({ xs: xs.map((x, i) => x + d * (Array.isArray(tan[i]) ? tan[i][0] : NaN)), ys: ys.map((y, i) => y + d * (Array.isArray(tan[i]) ? tan[i][1] : NaN)), cls: "jaxlab-ex-nudged" });
    box.append(h("div", "jaxlab-ex-caption", `dashed: moved by ${fmt(d)} in ${f.moved}, to first order`));
  }
  box.append(chart(series, { width: 300, height: 300, marks: xs.length ? [[xs[0], ys[0]]] : [], label: p.path || "path" }));
}

/** The colour bar beside a map: the kernel's PNG of the colours, ``hi`` above, ``lo`` below. */
function colourBar(p, hi, lo) {
  const bar = image(p, "bar_png", null, "colour bar");
  if (!bar) return null;
  bar.className = "jaxlab-ex-cbar-img";
  const box = h("div", "jaxlab-ex-cbar");
  box.append(h("span", "jaxlab-ex-caption", fmt(hi)), bar, h("span", "jaxlab-ex-caption", fmt(lo)));
  return box;
}

function heatPanel(box, p, f) {
  const row = h("div", "jaxlab-ex-maps");
  const main = image(p, "png", "svg", p.path || "output");
  if (main) row.append(main);
  const bar = main && colourBar(p, p.hi, p.lo);
  if (bar) row.append(bar);
  const sens = image(p, "sens_png", null, "sensitivity");
  if (sens) {
    const col = h("div", "");
    col.append(h("div", "jaxlab-ex-caption", `d / d ${f.moved || "slider"}`), sens);
    row.append(col);
    const sensBar = colourBar(p, p.sens_hi, p.sens_lo);
    if (sensBar) row.append(sensBar);
  }
  box.append(row);
  if (finite(p.lo) && finite(p.hi)) box.append(h("div", "jaxlab-ex-caption", `colours from ${fmt(p.lo)} to ${fmt(p.hi)}`));
}

function drawPanels(box, f) {
  box.replaceChildren();
  for (const p of f.panels) {
    const panel = h("div", "jaxlab-ex-panel");
    panel.dataset.kind = text(p.kind);
    panel.append(h("div", "jaxlab-ex-title", text(p.path) || "output"));
    const draw = { scalar: scalarPanel, line: linePanel, path: pathPanel, heatmap: heatPanel }[p.kind];
    if (draw) draw(panel, p, f);
    else panel.append(h("pre", "jaxlab-ex-text", text(p.text)));
    if (p.note) panel.append(h("div", "jaxlab-ex-note", text(p.note)));
    box.append(panel);
  }
}

function drawBar(box, f) {
  box.replaceChildren();
  if (!f.bar.length) return;
  box.append(h("div", "jaxlab-ex-title", "which knob matters most (d output / d slider × its range)"));
  const most = Math.max(...f.bar.map((b) => Math.abs(finite(b.scaled) ? b.scaled : 0))) || 1;
  for (const b of f.bar) {
    const v = (finite(b.scaled) ? b.scaled : 0) / most;
    const row = h("div", "jaxlab-ex-barrow");
    const track = h("span", "jaxlab-ex-track");
    const fill = h("span", v >= 0 ? "jaxlab-ex-pos" : "jaxlab-ex-neg");
    fill.style.left = `${v >= 0 ? 50 : 50 + 50 * v}%`;
    fill.style.width = `${50 * Math.abs(v)}%`;
    track.append(fill);
    row.append(h("span", "jaxlab-ex-barname", text(b.name)), track, h("span", "jaxlab-ex-barval", fmt(b.value)));
    box.append(row);
  }
}

// ------------------------------------------------------------------------- controls

function toPosition(c, v) {
  if (!finite(v) || c.lo === null || c.hi === null || c.hi === c.lo) return 0;
  const t = c.scale === "log" && c.lo > 0 ? Math.log(v / c.lo) / Math.log(c.hi / c.lo) : (v - c.lo) / (c.hi - c.lo);
  return Math.round(Math.max(0, Math.min(1, t)) * POSITIONS);
}
function fromPosition(c, p) {
  const t = p / POSITIONS;
  return c.scale === "log" && c.lo > 0 ? c.lo * Math.pow(c.hi / c.lo, t) : c.lo + t * (c.hi - c.lo);
}

function render({ model, el }) {
  const live = model.has_kernel !== false;
  const root = h("div", "jaxlab-ex");
  const head = h("div", "jaxlab-ex-head");
  const body = h("div", "jaxlab-ex-body");
  const side = h("div", "jaxlab-ex-side");
  const controlsBox = h("div", "jaxlab-ex-controls");
  const barBox = h("div", "jaxlab-ex-bar");
  const fitBox = h("div", "jaxlab-ex-fit");
  const main = h("div", "jaxlab-ex-main");
  const errorBox = h("div", "jaxlab-ex-error");
  const panels = h("div", "jaxlab-ex-panels");
  const notes = h("div", "jaxlab-ex-notes");
  side.append(controlsBox, barBox, fitBox);
  main.append(errorBox, panels);
  body.append(side, main);
  root.append(head, body, notes);
  let shape = ""; // the controls' names and kinds: rebuilt only when they change
  let rows = new Map(); // name -> {input, readout, flag, control}
  let sent = 0; // the last move's seq sent by this view
  let waiting = null; // the latest move made while one was computed
  let sentAt = 0;
  let drawnPanels = false;
  let seen = 0; // the seq of the frame drawn last

  const send = (name, value) => {
    if (!live) return;
    if (sent > seen && performance.now() - sentAt < 5000) { waiting = { name, value }; return; }
    sent = Math.max(sent, seen) + 1;
    sentAt = performance.now();
    root.dataset.sent = String(sent);
    model.send({ type: "move", name, value, seq: sent });
  };
  const current = () => readFrame(model.get("frame"));

  const buildControls = (f) => {
    controlsBox.replaceChildren();
    rows = new Map();
    for (const c of f.controls) {
      const row = h("div", "jaxlab-ex-control");
      row.dataset.name = c.name;
      const label = h("label", "jaxlab-ex-name", c.name);
      const readout = h("span", "jaxlab-ex-readout");
      const flag = h("div", "jaxlab-ex-flag");
      let input = null;
      if (c.kind === "float" && c.lo !== null && c.hi !== null) {
        input = h("input", "jaxlab-ex-slider");
        input.type = "range";
        input.min = "0";
        input.max = String(POSITIONS);
        input.step = "1";
        input.addEventListener("input", () => {
          const v = fromPosition(c, Number(input.value));
          readout.textContent = fmt(v);
          send(c.name, v);
        });
      } else if (c.kind === "bool") {
        input = h("input", "jaxlab-ex-check");
        input.type = "checkbox";
        input.addEventListener("change", () => send(c.name, input.checked));
      } else if (c.kind === "static") {
        input = h("input", "jaxlab-ex-static");
        input.type = typeof c.value === "number" ? "number" : "text";
        input.addEventListener("change", () => send(c.name, input.type === "number" ? Number(input.value) : input.value));
      }
      const line = h("div", "jaxlab-ex-line");
      line.append(label);
      if (input) {
        // JupyterLab's command mode binds arrow keys (headings, cells) on the document;
        // on a slider they belong to the slider
        input.addEventListener("keydown", (e) => e.stopPropagation());
        input.disabled = !live;
        input.setAttribute("aria-label", c.name);
        line.append(input);
      }
      line.append(readout);
      if (c.kind === "float" && live) {
        const sweep = h("button", "jaxlab-ex-sweep", "sweep");
        sweep.title = `draw the output against ${c.name}`;
        sweep.addEventListener("click", () => model.send({ type: "sweep", name: c.name }));
        line.append(sweep);
      }
      row.append(line);
      if (c.note) row.append(h("div", "jaxlab-ex-note", c.note));
      row.append(flag);
      controlsBox.append(row);
      rows.set(c.name, { input, readout, flag, row });
    }
  };

  const setControls = (f) => {
    const ahead = sent > f.seq || waiting !== null; // the hand is ahead: leave the sliders be
    for (const c of f.controls) {
      const r = rows.get(c.name);
      if (!r) continue;
      r.flag.textContent = c.flag;
      r.row.classList.toggle("jaxlab-ex-flagged", !!c.flag);
      if (ahead) continue;
      r.readout.textContent = fmt(c.value);
      if (!r.input) continue;
      if (c.kind === "float") r.input.value = String(toPosition(c, c.value));
      else if (c.kind === "bool") r.input.checked = c.value === true;
      else if (document.activeElement !== r.input) r.input.value = text(c.value);
    }
  };

  const drawFit = (f) => {
    fitBox.replaceChildren();
    if (!f.fit && model.get("fittable") !== true) return;
    const fit = f.fit || { running: false, loss: [], step: 0, ended: "" };
    const button = h("button", "jaxlab-ex-fitbutton", fit.running ? "stop" : "fit");
    button.title = fit.running ? "stop the fit, keeping the values reached" : "fit the sliders to the target from here";
    button.disabled = !live;
    button.addEventListener("click", () => model.send({ type: fit.running ? "stop" : "fit" }));
    const last = fit.loss.length ? `, loss ${fmt(fit.loss[fit.loss.length - 1])}` : "";
    fitBox.append(button, h("span", "jaxlab-ex-caption", ` step ${fmt(fit.step)}${last}${fit.ended ? ` (${fit.ended})` : ""}`));
    f = { ...f, fit };
    if (f.fit.loss.length > 1) fitBox.append(chart([{ xs: range(f.fit.loss.length), ys: f.fit.loss, cls: "jaxlab-ex-loss" }], { width: 300, height: 100, label: "loss" }));
  };

  const paint = () => guarded(model, el, () => {
    const f = current();
    if (!el.contains(root)) el.replaceChildren(root);
    if (!f) { head.textContent = "explore: nothing drawn yet"; return; }
    head.replaceChildren(h("b", "", `explore ${f.fn}`));
    head.append(h("span", "jaxlab-ex-caption", ` · compiled ${fmt(f.compiles)}×`));
    if (!live) head.append(h("span", "jaxlab-ex-nokernel", ` · ${NO_KERNEL}`));
    const now = JSON.stringify(f.controls.map((c) => [c.name, c.kind, c.lo, c.hi, c.scale]));
    if (now !== shape) { shape = now; buildControls(f); }
    setControls(f);
    errorBox.textContent = f.error ? `${f.error.message}${f.error.where ? ` (${f.error.where})` : ""} · the drawing shows the last good values` : "";
    // A failed value keeps the last good drawing when the kernel sends none.
    if (!(f.error && !f.panels.length && drawnPanels)) { drawPanels(panels, f); drawnPanels = f.panels.length > 0; }
    drawBar(barBox, f);
    drawFit(f);
    notes.replaceChildren(...f.notes.map((n) => h("div", "jaxlab-ex-note", n)));
    seen = f.seq;
    root.dataset.seq = String(f.seq);
    if (waiting && f.seq >= sent) { const w = waiting; waiting = null; send(w.name, w.value); }
  }, "Explorer");
  paint();
  model.on("change:frame", paint);
  model.on("change:fittable", paint);
  return () => {
    model.off("change:frame", paint);
    model.off("change:fittable", paint);
    el.querySelector(":scope > style.jaxlab-hide-twin")?.remove();
  };
}

export default { render };
