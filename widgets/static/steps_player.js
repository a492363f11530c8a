// StepsPlayer: the chain rule played one equation at a time (issue 36). No imports, no
// network. State (synced from Python, see widgets/steps_player.py):
//   frame: {function, mode: "reverse"|"forward", svg (Graphviz's drawing; a step's node is
//           an element whose id is its "node", or a <g class="node"> whose <title> is it),
//           steps: [{index, kind: "forward"|"backward"|"tangent", equation, rule, text,
//                    fanout, node, box, values_in, values_out, cotangent_in, cotangent_out}],
//           targets: {"∂f/∂w": step index}, passes_note, notes,
//           boxes: [{name, first, last}] (runs of steps a closed box shows as one step),
//           loops: [{name, length, shown}] (scans past the iterations stepped one by one)}
//   current: the step shown (front_end: written from here, so a saved notebook and its
//            twin show the step the view was left on)
//   iteration: a long scan's iteration chosen here (front_end; the kernel answers with
//              a new frame stepped at that iteration; -1: the first ones)
//   _twin_id: names this widget's static twin (widgets/_base.py)
// Every step is in the frame: stepping never asks the kernel. A step changes only the
// nodes between the old step and the new one, the lit edges and the words.
// Saved state is anyone's (a shared notebook, a docs page): the frame is read by total,
// bounded readers, and the drawing is copied element by element through an allow-list
// (no script, no event attribute, no link, nothing fetched), all text as text.

const SVG_NS = "http://www.w3.org/2000/svg";
const MOST_STEPS = 20000;
const MOST_TEXT = 2000; // characters of one field
const MOST_SVG = 8_000_000; // characters of the drawing
const MOST_ELEMENTS = 200_000; // elements of the drawing copied
const MOST_DEPTH = 64;
const MOST_LIST = 16; // values of one step's list
const MOST_TARGETS = 500;
const KINDS = new Set(["forward", "backward", "tangent"]);
const SPEEDS = [
  ["1 step/s", 1000],
  ["2 steps/s", 500],
  ["4 steps/s", 250],
  ["10 steps/s", 100],
];
const SYNC_MS = 250; // the index reaches the kernel this long after stepping settles
const PASS_WORDS = { forward: "forward pass", backward: "backward pass", tangent: "tangent (forward mode)" };
// The drawing's allow-list: shapes and text, no script, foreignObject, image, use or link.
const ELEMENTS = new Set([
  "svg", "g", "title", "desc", "path", "polygon", "polyline", "ellipse", "circle", "rect",
  "line", "text", "tspan",
]);
const ATTRIBUTES = new Set([
  "id", "class", "d", "points", "cx", "cy", "rx", "ry", "r", "x", "y", "x1", "y1", "x2", "y2",
  "dx", "dy", "width", "height", "viewBox", "transform", "fill", "stroke", "stroke-width",
  "stroke-dasharray", "stroke-opacity", "fill-opacity", "opacity", "font-family",
  "font-size", "font-weight", "font-style", "text-anchor", "text-decoration",
  "preserveAspectRatio",
]);

/** A string cut to `most` characters; "" for anything else (numbers written out). */
function str(value, most = MOST_TEXT) {
  if (typeof value === "number" && Number.isFinite(value)) return String(value);
  return typeof value === "string" ? value.slice(0, most) : "";
}

function obj(value) {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? value : {};
}

function strings(value) {
  return Array.isArray(value) ? value.slice(0, MOST_LIST).map((v) => str(v, 300)).filter((v) => v) : [];
}

/** A whole number in [0, most] or null. */
function index(value, most) {
  return typeof value === "number" && Number.isInteger(value) && value >= 0 && value <= most ? value : null;
}

function readStep(value) {
  const raw = obj(value);
  return {
    kind: KINDS.has(raw.kind) ? raw.kind : "forward",
    equation: str(raw.equation),
    rule: str(raw.rule),
    text: str(raw.text),
    fanout: str(raw.fanout),
    node: str(raw.node, 300),
    source: str(raw.source),
    box: strings(raw.box),
    values_in: strings(raw.values_in),
    values_out: strings(raw.values_out),
    cotangent_in: strings(raw.cotangent_in),
    cotangent_out: strings(raw.cotangent_out),
  };
}

/** Boxes (a jit, a named scope, a loop's iteration) as runs of steps: in order, apart,
 * two steps at least; anything else left out. */
function readBoxes(value, n) {
  const boxes = [];
  let end = -1;
  for (const raw of Array.isArray(value) ? value.slice(0, MOST_STEPS) : []) {
    const box = obj(raw);
    const first = index(box.first, n - 1);
    const last = index(box.last, n - 1);
    if (first === null || last === null || first <= end || last <= first) continue;
    boxes.push({ name: str(box.name, 300) || "box", first, last });
    end = last;
  }
  return boxes;
}

/** Scans past the iterations stepped one by one: {name, length, shown}. */
function readLoops(value) {
  const loops = [];
  for (const raw of Array.isArray(value) ? value.slice(0, MOST_LIST) : []) {
    const loop = obj(raw);
    const length = index(loop.length, 1e9);
    if (!length) continue;
    const shown = Array.isArray(loop.shown)
      ? loop.shown.slice(0, MOST_LIST).filter((t) => index(t, length - 1) !== null)
      : [];
    loops.push({ name: str(loop.name, 300) || "scan", length, shown });
  }
  return loops;
}

/** The frame as this view draws it; throws Refused when there is nothing to play. */
function readFrame(value) {
  const raw = obj(value);
  if (!Array.isArray(raw.steps)) throw new Refused("the saved frame has no list of steps");
  const steps = raw.steps.slice(0, MOST_STEPS).map(readStep);
  const targets = [];
  for (const [name, at] of Object.entries(obj(raw.targets)).slice(0, MOST_TARGETS)) {
    const i = index(at, steps.length - 1);
    if (i !== null && name) targets.push([name.slice(0, 200), i]);
  }
  return {
    function: str(raw.function, 200) || "f",
    mode: raw.mode === "forward" ? "forward" : "reverse",
    svg: typeof raw.svg === "string" && raw.svg.length <= MOST_SVG ? raw.svg : "",
    steps,
    targets,
    boxes: readBoxes(raw.boxes, steps.length),
    loops: readLoops(raw.loops),
    passes_note: str(raw.passes_note),
    notes: strings(raw.notes),
  };
}

/** A colour or length attribute that fetches nothing (no CSS url function, no expression). */
function safeValue(value) {
  return !/url\s*\(|expression|javascript:/i.test(value);
}

/**
 * Graphviz's SVG copied through the allow-list into fresh elements. Ids become data-sp-id
 * (two players on a page would share Graphviz's "node1"). Returns null for no drawing.
 */
function drawing(source) {
  if (!source) return null;
  const parsed = new DOMParser().parseFromString(source, "image/svg+xml");
  const top = parsed.documentElement;
  if (!top || top.localName !== "svg" || parsed.getElementsByTagName("parsererror").length) {
    return null;
  }
  let budget = MOST_ELEMENTS;
  const copy = (from, depth) => {
    const to = document.createElementNS(SVG_NS, from.localName);
    for (const attr of from.attributes) {
      const name = attr.localName;
      if (!ATTRIBUTES.has(name) || attr.namespaceURI || !safeValue(attr.value)) continue;
      if (name === "id") to.setAttribute("data-sp-id", attr.value.slice(0, 300));
      else to.setAttribute(name, attr.value.slice(0, 100000));
    }
    for (const child of from.childNodes) {
      if (child.nodeType === 3) {
        to.append(document.createTextNode(child.data));
      } else if (child.nodeType === 1 && ELEMENTS.has(child.localName) && child.namespaceURI === SVG_NS) {
        if (depth >= MOST_DEPTH || --budget <= 0) continue;
        to.append(copy(child, depth + 1));
      } else if (child.nodeType === 1 && child.localName === "a" && depth < MOST_DEPTH) {
        // a link's drawing is kept, the link is not
        for (const inner of child.children) {
          if (ELEMENTS.has(inner.localName) && --budget > 0) to.append(copy(inner, depth + 1));
        }
      }
    }
    return to;
  };
  const svg = copy(top, 0);
  svg.classList.add("jaxlab-sp-svg");
  return svg;
}

/** node name -> its element; and Graphviz's edges by head node: name -> [edge elements]. */
function nodesOf(svg) {
  const nodes = new Map();
  const into = new Map();
  if (!svg) return { nodes, into };
  for (const g of svg.querySelectorAll("g")) {
    const id = g.getAttribute("data-sp-id");
    const title = g.querySelector(":scope > title")?.textContent ?? "";
    if (g.classList.contains("edge")) {
      const head = title.split(/->|--/).pop()?.replace(/:[^:]*$/, "").trim() ?? "";
      if (!into.has(head)) into.set(head, []);
      into.get(head).push(g);
      const whole = title.split(/->|--/).pop()?.trim() ?? "";
      if (whole !== head) {
        if (!into.has(whole)) into.set(whole, []);
        into.get(whole).push(g);
      }
    } else {
      if (id && !nodes.has(id)) nodes.set(id, g);
      if (g.classList.contains("node") && title && !nodes.has(title)) nodes.set(title, g);
    }
  }
  return { nodes, into };
}

function row(cls, label, value) {
  const line = h("div", `jaxlab-sp-line ${cls}`);
  if (label) line.append(h("span", "jaxlab-sp-label", label));
  line.append(h("span", "jaxlab-sp-value", value));
  return line;
}

/** The words of step `i` (rebuilt at every step: a dozen elements). */
function words(frame, i) {
  const step = frame.steps[i];
  const panel = [];
  const head = h("div", `jaxlab-sp-kind jaxlab-sp-kind-${step.kind}`,
    `Step ${i + 1} of ${frame.steps.length} · ${PASS_WORDS[step.kind]}`);
  panel.push(head);
  if (step.box.length) panel.push(h("div", "jaxlab-sp-box", `in ${step.box.join(" › ")}`));
  panel.push(h("div", "jaxlab-sp-equation", step.equation || "(an equation)"));
  if (step.rule) panel.push(row("jaxlab-sp-rule", "rule", step.rule));
  if (step.text) panel.push(h("div", "jaxlab-sp-text", step.text));
  if (step.fanout) {
    const fan = row("jaxlab-sp-fanout", "fan-out: contributions add", step.fanout);
    panel.push(fan);
  }
  if (step.kind === "backward") {
    if (step.cotangent_in.length) panel.push(row("", "arriving", step.cotangent_in.join(", ")));
    if (step.cotangent_out.length) panel.push(row("", "leaving", step.cotangent_out.join(", ")));
  } else {
    if (step.values_in.length) panel.push(row("", "in", step.values_in.join(", ")));
    if (step.values_out.length) panel.push(row("", "out", step.values_out.join(", ")));
  }
  if (step.source) panel.push(row("jaxlab-sp-source", "your line", step.source));
  return panel;
}

/** The words of a closed box shown as one step: its steps' first numbers in, last out. */
function boxWords(frame, box) {
  const first = frame.steps[box.first];
  const last = frame.steps[box.last];
  const count = box.last - box.first + 1;
  const panel = [
    h("div", `jaxlab-sp-kind jaxlab-sp-kind-${last.kind}`,
      `Steps ${box.first + 1}–${box.last + 1} of ${frame.steps.length} · ${PASS_WORDS[last.kind]}`),
    h("div", "jaxlab-sp-equation", `${box.name} (closed: ${count} steps)`),
  ];
  if (last.text) panel.push(row("jaxlab-sp-rule", "ends with", last.text));
  if (last.kind === "backward") {
    if (first.cotangent_in.length) panel.push(row("", "arriving", first.cotangent_in.join(", ")));
    if (last.cotangent_out.length) panel.push(row("", "leaving", last.cotangent_out.join(", ")));
  } else {
    if (first.values_in.length) panel.push(row("", "in", first.values_in.join(", ")));
    if (last.values_out.length) panel.push(row("", "out", last.values_out.join(", ")));
  }
  return panel;
}

function button(text, title, cls) {
  const b = h("button", `jaxlab-sp-button ${cls}`, text);
  b.type = "button";
  b.title = title;
  b.setAttribute("aria-label", title);
  return b;
}

/** Draw the player into `el`; returns {go, stop} (the view's controls, for the caller). */
function draw(model, el, frame) {
  const n = frame.steps.length;
  const root = h("div", "jaxlab-sp");
  root.tabIndex = 0;
  root.setAttribute("data-lm-suppress-shortcuts", "true"); // arrows step here, not cells
  const modeWords = frame.mode === "forward" ? "forward mode (tangents)" : "reverse mode (adjoints)";
  const title = h("div", "jaxlab-sp-title");
  title.append(h("b", "", `Chain rule of ${frame.function}`), h("span", "", ` · ${modeWords}`));
  if (frame.passes_note) title.append(h("span", "jaxlab-sp-passes", ` · ${frame.passes_note}`));
  root.append(title);
  if (!n) {
    root.append(h("div", "jaxlab-sp-empty", "This program has no steps to play."));
    el.replaceChildren(root);
    return { go() {}, stop() {}, root };
  }

  const bar = h("div", "jaxlab-sp-bar");
  const first = button("|◀", "first step (Home)", "jaxlab-sp-first");
  const prev = button("◀", "previous step (←)", "jaxlab-sp-prev");
  const next = button("▶", "next step (→)", "jaxlab-sp-next");
  const last = button("▶|", "last step (End)", "jaxlab-sp-last");
  const play = button("play", "play / pause (space)", "jaxlab-sp-play");
  const speed = h("select", "jaxlab-sp-speed");
  speed.title = "speed";
  speed.setAttribute("aria-label", "speed");
  for (const [label, ms] of SPEEDS) {
    const option = h("option", "", label);
    option.value = String(ms);
    speed.append(option);
  }
  speed.value = "500";
  const slider = h("input", "jaxlab-sp-slider");
  slider.type = "range";
  slider.min = "0";
  slider.max = String(n - 1);
  slider.step = "1";
  slider.setAttribute("aria-label", "step");
  const counter = h("span", "jaxlab-sp-counter");
  bar.append(first, prev, play, next, last, speed, slider, counter);
  // Boxes start closed, one step each (the program's own structure first); a box opens
  // into its steps (its button, a step inside it chosen, "open boxes").
  const boxes = frame.boxes;
  const boxOf = new Int32Array(n).fill(-1);
  boxes.forEach((b, k) => boxOf.fill(k, b.first, b.last + 1));
  const closed = new Set(boxes.map((_, k) => k));
  let toggle = null;
  if (boxes.length) {
    toggle = button("open boxes", "open every box into its steps", "jaxlab-sp-boxes");
    bar.append(toggle);
  }
  let jump = null;
  if (frame.targets.length) {
    jump = h("select", "jaxlab-sp-jump");
    jump.setAttribute("aria-label", "jump to the step that produces");
    jump.append(h("option", "", "jump to the step that produces…"));
    jump.firstChild.value = "";
    for (const [name, i] of frame.targets) {
      const option = h("option", "", name);
      option.value = String(i);
      jump.append(option);
    }
    bar.append(jump);
  }
  root.append(bar);
  if (frame.loops.length) {
    // A long scan steps one iteration chosen here: the kernel steps the walk again there
    // (a page without a kernel keeps the iterations it was saved with).
    const longest = Math.max(...frame.loops.map((l) => l.length));
    const loopBar = h("div", "jaxlab-sp-loops");
    const label = h("label", "jaxlab-sp-label", "iteration ");
    const choose = h("input", "jaxlab-sp-iteration");
    choose.type = "number";
    choose.min = "0";
    choose.max = String(longest - 1);
    choose.step = "1";
    choose.setAttribute("aria-label", "the scan iteration stepped");
    const chosen = index(model.get("iteration"), longest - 1);
    choose.value = chosen === null ? "" : String(chosen);
    choose.placeholder = "0…" + (longest - 1);
    label.append(choose);
    const said = frame.loops.map((l) => `${l.name}: ${l.shown.join(", ")} of ${l.length}`);
    loopBar.append(label, h("span", "jaxlab-sp-note", ` stepped: ${said.join("; ")}`));
    choose.addEventListener("change", () => {
      const k = index(Number(choose.value), longest - 1);
      if (k === null) return;
      model.set("iteration", k);
      model.save_changes();
    });
    root.append(loopBar);
  }

  const body = h("div", "jaxlab-sp-body");
  const pane = h("div", "jaxlab-sp-pane");
  const svg = drawing(frame.svg);
  if (svg) pane.append(svg);
  else pane.append(h("div", "jaxlab-sp-empty", "No drawing was saved with these steps."));
  const side = h("div", "jaxlab-sp-side");
  const panel = h("div", "jaxlab-sp-words");
  panel.setAttribute("aria-live", "polite");
  const list = h("ol", "jaxlab-sp-list");
  list.start = 1;
  const items = frame.steps.map((step, i) => {
    const li = h("li", `jaxlab-sp-item jaxlab-sp-item-${step.kind}`, step.text || step.equation);
    li.dataset.step = String(i);
    li.dataset.n = String(i + 1); // numbered by step whatever boxes hide (CSS)
    return li;
  });
  list.append(...items);
  side.append(panel, list);
  body.append(pane, side);
  root.append(body);
  const legend = h("div", "jaxlab-sp-legend");
  for (const [cls, label] of [
    ["current", "this step"],
    ["forward", "done, forward pass"],
    [frame.mode === "forward" ? "tangent" : "backward", frame.mode === "forward" ? "done, tangent" : "done, backward pass"],
    ["pending", "still to come"],
  ]) {
    legend.append(h("span", `jaxlab-sp-key jaxlab-sp-key-${cls}`, label));
  }
  root.append(legend);
  for (const note of frame.notes) root.append(h("div", "jaxlab-sp-note", note));
  el.replaceChildren(root);

  // Each node's steps; a node shows the state of its latest step at or before `current`.
  const { nodes, into } = nodesOf(svg);
  const stepsOf = new Map();
  frame.steps.forEach((step, i) => {
    const node = nodes.get(step.node);
    if (!node) return;
    if (!stepsOf.has(node)) stepsOf.set(node, []);
    stepsOf.get(node).push(i);
  });
  const stateOf = (node, lo, hi) => {
    let state = "pending";
    for (const i of stepsOf.get(node)) {
      if (i < lo) state = `done-${frame.steps[i].kind}`;
      else if (i <= hi) state = "current";
    }
    return state;
  };
  const paint = (node, lo, hi) => {
    const state = stateOf(node, lo, hi);
    if (node.dataset.spState === state) return;
    if (node.dataset.spState) node.classList.remove(`jaxlab-sp-${node.dataset.spState}`);
    node.classList.add(`jaxlab-sp-${state}`);
    node.dataset.spState = state;
  };
  for (const node of stepsOf.keys()) paint(node, -1, -1);

  // The stops: every step outside a closed box, and a closed box's first step (the box).
  let stops = [];
  const stopAt = new Int32Array(n); // the position of the stop that shows step i
  const restop = () => {
    stops = [];
    for (let i = 0; i < n; i++) {
      const k = boxOf[i];
      const hidden = k >= 0 && closed.has(k) && i !== boxes[k].first;
      if (!hidden) stops.push(i);
      items[i].hidden = hidden;
    }
    let p = 0;
    for (let i = 0; i < n; i++) {
      while (stops[p] < i) p++;
      stopAt[i] = p;
    }
    boxes.forEach((b, k) => {
      const step = frame.steps[b.first];
      items[b.first].textContent = closed.has(k)
        ? `▸ ${b.name}: ${b.last - b.first + 1} steps`
        : step.text || step.equation;
    });
    slider.max = String(stops.length - 1);
    if (toggle) toggle.textContent = closed.size ? "open boxes" : "close boxes";
  };
  restop();

  let shown = -1;
  let shownLo = -1; // the steps lit as this step: a closed box's all
  let shownHi = -1;
  let again = false;
  let lit = [];
  let timer = null;
  let syncTimer = null;
  const sync = () => {
    syncTimer = null;
    if (model.get("current") !== shown) {
      model.set("current", shown);
      model.save_changes();
    }
  };
  const centre = (node) => {
    const box = node.getBoundingClientRect();
    const frameBox = pane.getBoundingClientRect();
    const left = pane.scrollLeft + box.left - frameBox.left + box.width / 2 - pane.clientWidth / 2;
    const top = pane.scrollTop + box.top - frameBox.top + box.height / 2 - pane.clientHeight / 2;
    pane.scrollTo({ left: Math.max(0, left), top: Math.max(0, top), behavior: "instant" });
  };
  const go = (target, { send = true } = {}) => {
    const to = Math.max(0, Math.min(n - 1, Math.round(target)));
    const k = boxOf[to];
    if (k >= 0 && closed.has(k) && to !== boxes[k].first) {
      closed.delete(k); // a step inside a closed box was asked for: the box opens
      restop();
    }
    const box = k >= 0 && closed.has(k) ? boxes[k] : null;
    const from = shown;
    const fromLo = shownLo;
    const fromHi = shownHi;
    const lo = to;
    const hi = box ? box.last : to;
    if (to === from && hi === fromHi && !again) return;
    again = false;
    shown = to;
    shownLo = lo;
    shownHi = hi;
    // only the nodes of the steps between the old span and the new change state
    const touched = new Set();
    const upTo = Math.min(n - 1, Math.max(fromHi, hi));
    for (let i = Math.max(0, Math.min(fromLo, lo)); i <= upTo; i++) {
      const node = nodes.get(frame.steps[i].node);
      if (node) touched.add(node);
    }
    for (const node of touched) paint(node, lo, hi);
    for (const edge of lit) edge.classList.remove("jaxlab-sp-edge-in", "jaxlab-sp-edge-fan");
    const step = frame.steps[to];
    lit = into.get(step.node) || [];
    const edgeClass = step.fanout ? "jaxlab-sp-edge-fan" : "jaxlab-sp-edge-in";
    for (const edge of lit) edge.classList.add(edgeClass);
    if (box) {
      const open = button("open", `open ${box.name} into its steps`, "jaxlab-sp-open");
      open.addEventListener("click", () => {
        closed.delete(k);
        restop();
        manual(box.first);
      });
      panel.replaceChildren(...boxWords(frame, box), open);
    } else {
      const said = words(frame, to);
      if (k >= 0) {
        const shut = button("close", `close ${boxes[k].name} into one step`, "jaxlab-sp-close");
        shut.addEventListener("click", () => {
          closed.add(k);
          restop();
          manual(boxes[k].first);
        });
        said.push(shut);
      }
      panel.replaceChildren(...said);
    }
    if (from >= 0 && items[from]) items[from].classList.remove("jaxlab-sp-item-current");
    items[to].classList.add("jaxlab-sp-item-current");
    const item = items[to];
    if (item.offsetTop < list.scrollTop || item.offsetTop + item.offsetHeight > list.scrollTop + list.clientHeight) {
      list.scrollTop = Math.max(0, item.offsetTop - list.clientHeight / 2);
    }
    const at = stopAt[to];
    slider.value = String(at);
    counter.textContent = `step ${at + 1} / ${stops.length}`;
    prev.disabled = first.disabled = at === 0;
    next.disabled = last.disabled = at === stops.length - 1;
    root.dataset.current = String(to);
    root.dataset.closedBox = box ? box.name : "";
    const node = nodes.get(step.node);
    if (node) centre(node);
    if (send) {
      if (syncTimer !== null) clearTimeout(syncTimer);
      syncTimer = setTimeout(sync, SYNC_MS);
    }
  };
  const stop = () => {
    if (timer !== null) clearInterval(timer);
    timer = null;
    play.textContent = "play";
    root.classList.remove("jaxlab-sp-playing");
  };
  // the stop `by` stops away from the one shown (clamped to the first and last)
  const stopFrom = (by) => stops[Math.max(0, Math.min(stops.length - 1, stopAt[shown] + by))];
  const start = () => {
    if (stopAt[shown] >= stops.length - 1) go(stops[0]);
    play.textContent = "pause";
    root.classList.add("jaxlab-sp-playing");
    timer = setInterval(() => {
      if (stopAt[shown] >= stops.length - 1) stop();
      else go(stopFrom(1));
    }, Number(speed.value) || 500);
  };
  const manual = (to) => {
    stop();
    go(to);
  };
  first.addEventListener("click", () => manual(stops[0]));
  prev.addEventListener("click", () => manual(stopFrom(-1)));
  next.addEventListener("click", () => manual(stopFrom(1)));
  last.addEventListener("click", () => manual(stops[stops.length - 1]));
  if (toggle) {
    toggle.addEventListener("click", () => {
      const k = boxOf[shown];
      if (closed.size) closed.clear();
      else boxes.forEach((_, j) => closed.add(j));
      restop();
      again = true; // the stops changed: the counter and slider even where the step stays
      manual(k >= 0 && closed.has(k) ? boxes[k].first : shown);
    });
  }
  play.addEventListener("click", () => (timer === null ? start() : stop()));
  speed.addEventListener("change", () => {
    if (timer !== null) {
      stop();
      start();
    }
  });
  slider.addEventListener("input", () => manual(stops[Number(slider.value)] ?? 0));
  if (jump) {
    jump.addEventListener("change", () => {
      if (jump.value !== "") manual(Number(jump.value));
      jump.value = "";
    });
  }
  list.addEventListener("click", (ev) => {
    const item = ev.target instanceof Element ? ev.target.closest("li[data-step]") : null;
    if (item) manual(Number(item.dataset.step));
  });
  root.addEventListener("keydown", (ev) => {
    const inControl = ev.target instanceof Element && ev.target.matches("select, input");
    const moves = {
      ArrowRight: () => manual(stopFrom(1)),
      ArrowLeft: () => manual(stopFrom(-1)),
      Home: () => manual(stops[0]),
      End: () => manual(stops[stops.length - 1]),
      " ": () => (timer === null ? start() : stop()),
    };
    if (inControl || !moves[ev.key] || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    moves[ev.key]();
    ev.preventDefault();
    ev.stopPropagation(); // the notebook's own arrow keys stay out of it
  });
  pane.addEventListener("click", () => root.focus({ preventScroll: true }));
  const flush = () => {
    if (syncTimer !== null) {
      clearTimeout(syncTimer);
      sync();
    }
  };
  return { go, stop, flush, root, shown: () => shown };
}

/** The `current` trait as an index of `frame`'s steps (0 for anything unreadable). */
function currentOf(model, frame) {
  const i = index(model.get("current"), Math.max(0, frame.steps.length - 1));
  return i === null ? 0 : i;
}

function render({ model, el }) {
  let view = null;
  let frame = null;
  const redraw = () => {
    if (view) view.stop();
    guarded(
      model,
      el,
      () => {
        frame = readFrame(model.get("frame"));
        view = draw(model, el, frame);
        view.go(currentOf(model, frame), { send: false });
      },
      "StepsPlayer",
    );
  };
  // The kernel (or a sibling view) moved the index: follow it without sending it back.
  const follow = () => {
    if (view && frame && frame.steps.length && view.shown() !== currentOf(model, frame)) {
      view.go(currentOf(model, frame), { send: false });
    }
  };
  redraw();
  model.on("change:frame", redraw);
  model.on("change:current", follow);
  return () => {
    if (view) {
      view.stop();
      view.flush?.();
    }
    model.off("change:frame", redraw);
    model.off("change:current", follow);
  };
}

export default { render };
