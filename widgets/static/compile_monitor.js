// CompileMonitor: the session's compilations, live. No imports, no network.
// State (synced from Python, see widgets/compile_monitor.py):
//   functions: [{name, count, total_s, last_s, recompiles, user_code, last_index, eager,
//                shapes, compiles: [{index, trace_s, lower_s, compile_s, recompile,
//                            explanation, where, signature, cache, defined_at, eager}]}]
//                (the user's functions first, then newest first; compiles newest first)
//   session:   {count, dropped, compile_s, other_s, cell_s, jaxlab_work_s, functions, mine,
//               phase_s, jaxlab_count, eager_count, eager_text, eager_hint, weak_note}
//   mine_only: the "my functions only" box (on by default)
// Colours (one language with the static table and chart): trace, lower and compile
// have one colour each wherever they appear, the rest of the cells' time ("other cell
// time", never called running) is grey, and a red stripe marks a recompilation and
// nothing else. JAX's eager operations are one line of their own, never recompilations.
//   _twin_id: names this widget's static twin (widgets/_base.py)
// Saved state is anyone's (a shared notebook, a docs page): it is read by a total, bounded
// parser (``readState``: types checked, lists capped well above what the kernel sends);
// what cannot be read is refused, and the view says so while its twin shows.

const PHASES = ["trace", "lower", "compile"];
const OTHER = "other cell time";
const OTHER_MEANING =
  "cell time not spent compiling or in jaxlab's views: your code running, Python, printing";

// Bounds of what the page reads, well above the kernel's (a log keeps 2,000 functions;
// the monitor sends max_functions of them, 50 by default, each with its recent compiles).
const MOST_FUNCTIONS = 10000;
const MOST_ITEMS = 1000; // compiles, shapes or signature entries of one function
const MOST_TEXT = 100000; // characters of one text




/** Text of a saved value: a string (cut to MOST_TEXT), a finite number; else "". */
function text(v) {
  if (typeof v === "string") return v.length > MOST_TEXT ? v.slice(0, MOST_TEXT) + "…" : v;
  return typeof v === "number" && Number.isFinite(v) ? String(v) : "";
}

/** A finite number, else 0. */
function number(v) {
  return typeof v === "number" && Number.isFinite(v) ? v : 0;
}

function isObject(v) {
  return v !== null && typeof v === "object" && !Array.isArray(v);
}

/** A list of at most ``most`` items (absent: empty), each read by ``item``; else refused. */
function list(v, what, most, item) {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) throw new Refused(`${what} is not a list`);
  if (v.length > most) throw new Refused(`${what} has ${v.length} items, more than ${most}`);
  return v.map(item);
}

/** An object (``optional``: absent is {}); anything else refused. */
function record(v, what, optional = false) {
  if (optional && (v === undefined || v === null)) return {};
  if (!isObject(v)) throw new Refused(`${what} is not an object`);
  return v;
}

function compileOf(v) {
  const c = record(v, "a compilation");
  return {
    index: number(c.index), trace_s: number(c.trace_s), lower_s: number(c.lower_s),
    compile_s: number(c.compile_s), recompile: c.recompile === true, eager: c.eager === true,
    explanation: text(c.explanation), where: text(c.where), cache: text(c.cache),
    signature: list(c.signature, "a compilation's signature", MOST_ITEMS, text),
  };
}

function functionOf(v) {
  const f = record(v, "a function");
  return {
    name: text(f.name), count: number(f.count), total_s: number(f.total_s),
    last_s: number(f.last_s), recompiles: number(f.recompiles), user_code: f.user_code === true,
    eager: f.eager === true, shapes: list(f.shapes, "a function's shapes", MOST_ITEMS, text),
    compiles: list(f.compiles, "a function's compilations", MOST_ITEMS, compileOf),
  };
}

/** The saved state, checked: {functions, session, mineOnly}. */
function readState(model) {
  const functions = list(model.get("functions"), "the functions", MOST_FUNCTIONS, functionOf);
  const s = record(model.get("session"), "the session", true);
  const session = {};
  const numbers = ["count", "dropped", "compile_s", "other_s", "cell_s", "jaxlab_work_s",
    "functions", "mine", "jaxlab_count", "eager_count"];
  for (const k of numbers) session[k] = number(s[k]);
  for (const k of ["eager_text", "eager_hint", "weak_note"]) session[k] = text(s[k]);
  const phases = list(s.phase_s, "the session's phases", 3, number);
  session.phase_s = [0, 1, 2].map((i) => phases[i] || 0);
  return { functions, session, mineOnly: model.get("mine_only") === true };
}

/** @param {number} s seconds @returns {string} */
function seconds(s) {
  if (!(s > 0)) return "0 s";
  if (s >= 1) return `${s.toPrecision(3)} s`;
  if (s >= 1e-3) return `${(s * 1e3).toPrecision(3)} ms`;
  return `${(s * 1e6).toPrecision(3)} µs`;
}

/** @param {number} n @param {string} noun @returns {string} "1 function", "2 functions" */
function count(n, noun) {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}


function total(c) {
  return c.trace_s + c.lower_s + c.compile_s;
}

function legendView() {
  const legend = h("span", "jaxlab-cm-legend");
  for (const p of PHASES) legend.append(h("span", `jaxlab-cm-key jaxlab-cm-${p}`), h("span", "", ` ${p} `));
  const other = h("span", "", ` ${OTHER} `);
  other.title = OTHER_MEANING;
  legend.append(h("span", "jaxlab-cm-key jaxlab-cm-running"), other);
  legend.append(h("span", "jaxlab-cm-key-recompile"), h("span", "", " recompiled"));
  return legend;
}

function sessionView(session, shown) {
  const box = h("div", "jaxlab-cm-session");
  const otherS = session.other_s || 0;
  const all = session.compile_s + otherS;
  const share = all > 0 ? ` (${((100 * session.compile_s) / all).toFixed(0)}% compiling)` : "";
  const eager = session.eager_count || 0;
  const text =
    `${count((session.count || 0) - eager, "compilation")} of ${count(shown, "function")} · ` +
    `compiling ${seconds(session.compile_s)}` +
    // no timed cells (a log recorded in a script): no other cell time to compare with
    (session.cell_s > 0 ? `, ${OTHER} ${seconds(otherS)}${share}` : "") +
    (eager ? ` · ${count(eager, "compilation")} of JAX's eager operations` : "") +
    (session.dropped ? ` · ${session.dropped} oldest not kept` : "") +
    (session.jaxlab_count || session.jaxlab_work_s
      ? ` · jaxlab's own work ${seconds(session.jaxlab_work_s || 0)} not counted` +
        (session.jaxlab_count ? ` (${count(session.jaxlab_count, "compilation")} not shown)` : "")
      : "");
  // the session's time in the phases' own colours, then the rest of the cells in grey
  const bar = h("span", "jaxlab-cm-split");
  const parts = [...session.phase_s, otherS];
  const sum = parts.reduce((a, b) => a + b, 0);
  ["trace", "lower", "compile", "running"].forEach((name, i) => {
    const part = h("span", `jaxlab-cm-${name}`);
    part.style.width = sum > 0 ? `${((100 * parts[i]) / sum).toFixed(1)}%` : "0";
    part.title = `${i < 3 ? name : OTHER} ${seconds(parts[i])}`;
    bar.append(part);
  });
  box.append(h("span", "jaxlab-cm-summary", text), bar, legendView());
  return box;
}

function barView(c, scale) {
  const bar = h("div", "jaxlab-cm-bar" + (c.recompile ? " jaxlab-cm-recompile" : ""));
  bar.dataset.index = String(c.index);
  bar.title =
    `#${c.index} ${c.recompile ? "recompiled" : c.eager ? "compiled (eager)" : "compiled"}` +
    ` in ${seconds(total(c))}` +
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
  // an eager operation has no reasons to give: its argument types instead
  if (f.eager) for (const s of f.shapes || []) list.append(h("li", "jaxlab-cm-shape", s || "(no arguments)"));
  for (const c of f.compiles) {
    if (!c.recompile) continue;
    const item = h("li", "jaxlab-cm-reason", `#${c.index}: ${c.explanation}`);
    if (c.where) item.append(h("small", "", ` (${c.where})`));
    list.append(item);
  }
  reasons.append(list);
  const recompiled = h("td", "jaxlab-cm-recompiles");
  if (f.recompiles) {
    // the count leads to its reasons: scrolls them into view and marks them
    const link = h("a", "jaxlab-cm-link", count(f.recompiles, "recompilation"));
    link.href = "#";
    link.addEventListener("click", (event) => {
      event.preventDefault();
      reasons.scrollIntoView({ block: "nearest" });
      reasons.classList.remove("jaxlab-cm-flash");
      void reasons.offsetWidth; // restart the animation
      reasons.classList.add("jaxlab-cm-flash");
    });
    recompiled.append(link);
  }
  row.append(
    name,
    h("td", "jaxlab-cm-count", String(f.count)),
    recompiled,
    h("td", "jaxlab-cm-total", seconds(f.total_s)),
    h("td", "jaxlab-cm-last", seconds(f.last_s)),
    bars,
    reasons,
  );
  return row;
}

function draw(model, el) {
  const { functions: all, session, mineOnly } = readState(model);
  const functions = mineOnly ? all.filter((f) => f.user_code) : all;
  let scale = 0;
  for (const f of functions) for (const c of f.compiles) scale = Math.max(scale, total(c));
  const root = h("div", "jaxlab-cm");
  root.append(sessionView(session, session.functions || 0));

  const filter = h("label", "jaxlab-cm-filter");
  const box = /** @type {HTMLInputElement} */ (h("input"));
  box.type = "checkbox";
  box.checked = Boolean(mineOnly);
  box.addEventListener("change", () => {
    model.set("mine_only", box.checked);
    model.save_changes();
  });
  const others = (session.functions || 0) - (session.mine || 0);
  filter.append(
    box,
    h("span", "", " my functions only"),
    h(
      "small",
      "",
      mineOnly && others > 0
        ? ` (${count(others, "function")} of JAX and libraries hidden)`
        : "",
    ),
  );
  root.append(filter);

  const scroller = h("div", "jaxlab-cm-scroll");
  const table = h("table", "jaxlab-cm-table");
  const head = h("tr");
  const titles = ["function", "compiles", "recompiled", "total", "last", "phases, newest first", "why"];
  for (const title of titles) head.append(h("th", "", title));
  table.append(h("thead"), h("tbody"));
  table.tHead.append(head);
  for (const f of functions) table.tBodies[0].append(rowView(f, scale));
  const more = (mineOnly ? session.mine || 0 : session.functions || 0) - functions.length;
  if (more > 0) {
    const row = h("tr", "jaxlab-cm-more");
    const cell = h("td", "", `… ${count(more, "more function")}`);
    cell.colSpan = titles.length;
    row.append(cell);
    table.tBodies[0].append(row);
  }
  if (!functions.length) {
    scroller.append(
      h("p", "jaxlab-cm-empty", mineOnly ? "None of your functions compiled yet." : "No compilation yet."),
    );
  } else scroller.append(table);
  root.append(scroller);
  if (session.eager_text) {
    // JAX's eager operations: how many, which shapes, and what to do about them
    const eagerLine = h("p", "jaxlab-cm-eager", `Eager operations: ${session.eager_text}`);
    eagerLine.title = session.eager_hint || "";
    root.append(eagerLine);
  }
  if (session.weak_note) root.append(h("p", "jaxlab-cm-note", session.weak_note));
  // keep the reader's place when the view redraws
  const previous = el.querySelector(".jaxlab-cm-scroll");
  const top = previous ? previous.scrollTop : 0;
  el.replaceChildren(root);
  scroller.scrollTop = top;
}

export default {
  render({ model, el }) {
    // Each redraw guarded: state that cannot be read replaces the view with a note (the
    // twin shows); the next readable state draws the view again.
    const redraw = () => guarded(model, el, () => draw(model, el), "CompileMonitor");
    redraw();
    const events = ["change:functions", "change:session", "change:mine_only"];
    for (const e of events) model.on(e, redraw);
    return () => {
      for (const e of events) model.off(e, redraw);
      el.querySelector(":scope > style.jaxlab-hide-twin")?.remove();
    };
  },
};
