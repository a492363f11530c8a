// CompileMonitor: the session's compilations, live. No imports, no network.
// State (synced from Python, see widgets/compile_monitor.py):
//   functions: [{name, count, total_s, last_s, recompiles,
//                compiles: [{index, trace_s, lower_s, compile_s, recompile,
//                            explanation, where, signature, cache}]}]
//   session:   {count, dropped, compile_s, running_s, functions}

const PHASES = ["trace", "lower", "compile"];

/** @param {number} s seconds @returns {string} */
function seconds(s) {
  if (s >= 1) return `${s.toPrecision(3)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toPrecision(3)} ms`;
  return `${(s * 1e6).toPrecision(3)} µs`;
}

/**
 * @param {string} tag
 * @param {string} [cls]
 * @param {string} [text]
 * @returns {HTMLElement}
 */
function h(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = text; // never innerHTML: names are user text
  return node;
}

function total(c) {
  return c.trace_s + c.lower_s + c.compile_s;
}

function sessionView(session) {
  const box = h("div", "jaxlab-cm-session");
  const all = session.compile_s + session.running_s;
  const share = all > 0 ? session.compile_s / all : 0;
  const text = h(
    "span",
    "jaxlab-cm-summary",
    `${session.count} compilations of ${session.functions} functions · ` +
      `compiling ${seconds(session.compile_s)} versus running ${seconds(session.running_s)}` +
      (session.dropped ? ` · ${session.dropped} oldest not kept` : ""),
  );
  const bar = h("span", "jaxlab-cm-split");
  const compiling = h("span", "jaxlab-cm-split-compile");
  compiling.style.width = `${(100 * share).toFixed(1)}%`;
  bar.title = `compiling ${(100 * share).toFixed(0)}%, running ${(100 * (1 - share)).toFixed(0)}%`;
  bar.append(compiling);
  // the split bar's colours are not the phases': say in words what it shows
  const shareText = h("span", "jaxlab-cm-share", `${(100 * share).toFixed(0)}% compiling`);
  const legend = h("span", "jaxlab-cm-legend");
  for (const p of PHASES) {
    const key = h("span", `jaxlab-cm-key jaxlab-cm-${p}`);
    legend.append(key, h("span", "", ` ${p} `));
  }
  legend.append(h("span", "jaxlab-cm-key-recompile"), h("span", "", " recompiled"));
  box.append(text, bar, shareText, legend);
  return box;
}

function barView(c, scale) {
  const bar = h("div", "jaxlab-cm-bar" + (c.recompile ? " jaxlab-cm-recompile" : ""));
  bar.dataset.index = String(c.index);
  bar.title =
    `#${c.index} ${c.recompile ? "recompiled" : "compiled"} in ${seconds(total(c))}` +
    ` (trace ${seconds(c.trace_s)}, lower ${seconds(c.lower_s)}, compile ${seconds(c.compile_s)}` +
    `, persistent cache ${c.cache})` +
    (c.where ? ` at ${c.where}` : "") +
    (c.signature.length ? `\n(${c.signature.join(", ")})` : "") +
    `\n${c.explanation}`;
  for (const p of PHASES) {
    const part = h("span", `jaxlab-cm-${p}`);
    const value = c[`${p}_s`];
    part.style.width = scale > 0 ? `${((100 * value) / scale).toFixed(2)}%` : "0";
    bar.append(part);
  }
  return bar;
}

function rowView(f, scale) {
  const row = h("tr", "jaxlab-cm-row" + (f.recompiles ? " jaxlab-cm-recompiled" : ""));
  row.dataset.function = f.name;
  const name = h("td", "jaxlab-cm-name");
  name.append(h("code", "", f.name));
  const bars = h("td", "jaxlab-cm-bars");
  for (const c of f.compiles) bars.append(barView(c, scale));
  const reasons = h("td", "jaxlab-cm-reasons");
  const list = h("ul");
  for (const c of f.compiles) {
    if (!c.recompile) continue;
    const item = h("li", "jaxlab-cm-reason", `#${c.index}: ${c.explanation}`);
    if (c.where) item.append(h("small", "", ` (${c.where})`));
    list.append(item);
  }
  reasons.append(list);
  row.append(
    name,
    h("td", "jaxlab-cm-count", String(f.count)),
    h("td", "jaxlab-cm-total", seconds(f.total_s)),
    h("td", "jaxlab-cm-last", seconds(f.last_s)),
    bars,
    reasons,
  );
  return row;
}

function draw(model, el) {
  const functions = model.get("functions") || [];
  const session = model.get("session") || {};
  let scale = 0;
  for (const f of functions) for (const c of f.compiles) scale = Math.max(scale, total(c));
  const root = h("div", "jaxlab-cm");
  root.append(sessionView(session));
  const table = h("table", "jaxlab-cm-table");
  const head = h("tr");
  for (const title of ["function", "compiles", "total", "last", "phases", "recompiled because"]) {
    head.append(h("th", "", title));
  }
  table.append(h("thead"), h("tbody"));
  table.tHead.append(head);
  for (const f of functions) table.tBodies[0].append(rowView(f, scale));
  if (session.functions > functions.length) {
    const more = h("tr", "jaxlab-cm-more");
    const cell = h("td", "", `… ${session.functions - functions.length} more functions`);
    cell.colSpan = 6;
    more.append(cell);
    table.tBodies[0].append(more);
  }
  if (!functions.length) root.append(h("p", "jaxlab-cm-empty", "No compilation yet."));
  else root.append(table);
  el.replaceChildren(root);
}

export default {
  render({ model, el }) {
    const redraw = () => draw(model, el);
    redraw();
    model.on("change:functions", redraw);
    model.on("change:session", redraw);
    return () => {
      model.off("change:functions", redraw);
      model.off("change:session", redraw);
    };
  },
};
