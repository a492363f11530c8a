// jaxlab-widgets.js: the widgets saved in a documentation page, drawn from their saved
// state by their own ES modules. Served from the site's _static/: nothing is fetched from
// a CDN or the network.
//
// A tutorial page carries what the notebook saved (MyST-NB writes it):
//   <script type="application/vnd.jupyter.widget-state+json">{"state": {id: {...}}}</script>
//   <script type="application/vnd.jupyter.widget-view+json">{"model_id": id}</script>
// An anywidget's state holds its ES module (_esm) and CSS (_css). Only jaxlab's own
// modules run: a view is drawn when the SHA-256 of its _esm and _css are those of a widget
// jaxlab ships (SHIPPED, written into the built copy of this file by docs/_ext/
// widget_trust.py; the source file trusts nothing), and anything else (a module a
// notebook's state brought from elsewhere) keeps its static twin. For a trusted view this
// imports the module from a Blob URL of that source and calls its render({model, el})
// with a SavedModel: get/set/on/off work on the saved state, save_changes keeps changes
// in the page, and send has no kernel to reach, so it says so beside the widget. A view
// that draws hides its own static twin (the HTML the kernel saved beside it, marked
// data-jaxlab-twin) from inside itself; a view that is not drawn, fails, or cannot read
// its saved state (it says so) leaves its twin showing. Each view is drawn inside its own
// error boundary: a malformed saved state or buffer spoils only its own widget, and a
// buffer is put only at a path of the state's own keys (never through __proto__). What
// the loader reads of a page is bounded (models, buffers, a buffer's path) and each
// module reads its state with total, bounded parsers, so no saved state can hang the
// page. Widgets that are not anywidgets (ipywidgets' sliders) were written as text when
// the site was built.
//
// Example (what a page does by itself once this script has run):
//   window.jaxlabWidgets.rendered  // a Promise of the model ids drawn on this page
(() => {
  "use strict";

  const STATE = "application/vnd.jupyter.widget-state+json";
  const VIEW = "application/vnd.jupyter.widget-view+json";
  const NO_KERNEL =
    "This page has no kernel: open the notebook in Jupyter to use this control.";
  /** @type {{widget: string, esm: string, css: string}[]} */
  const SHIPPED = /* jaxlab:shipped */ [];
  // Bounds of what the loader reads of a page, far above what a notebook saves.
  const MOST_MODELS = 10000;
  const MOST_BUFFERS = 1000; // buffers of one model
  const MOST_PATH = 64; // keys on a buffer's path

  /** Every saved model on the page: id -> {model_name, model_module, state, buffers}. A
   * Map: an id such as "__proto__" is one more key, never a prototype. */
  function savedModels() {
    const models = new Map();
    for (const script of document.querySelectorAll(`script[type="${STATE}"]`)) {
      try {
        const state = JSON.parse(script.textContent).state;
        if (state && typeof state === "object" && !Array.isArray(state)) {
          for (const [id, entry] of Object.entries(state)) {
            if (models.size >= MOST_MODELS) throw new Error(`more than ${MOST_MODELS} saved models`);
            if (entry && typeof entry === "object") models.set(id, entry);
          }
        }
      } catch (err) {
        console.error("jaxlab: unreadable widget state", err);
      }
    }
    return models;
  }

  const FORBIDDEN = new Set(["__proto__", "constructor", "prototype"]);

  /** Binary traits come base64-encoded with the path to put them at (ipywidgets' format).
   * Every key on the way must be the state's own (an object or array it holds), and the
   * last is defined as an own property: a path cannot reach a prototype. */
  function withBuffers(entry) {
    const state = structuredClone(entry.state || {});
    const buffers = entry.buffers || [];
    if (!Array.isArray(buffers)) throw new Error("saved buffers are not a list");
    if (buffers.length > MOST_BUFFERS) throw new Error(`more than ${MOST_BUFFERS} saved buffers`);
    for (const buffer of buffers) {
      const { path, data, encoding } = buffer && typeof buffer === "object" ? buffer : {};
      if (encoding !== "base64" || typeof data !== "string" || !Array.isArray(path) || !path.length) {
        throw new Error(`a saved buffer has no base64 data or no path`);
      }
      if (path.length > MOST_PATH) throw new Error(`a saved buffer's path has ${path.length} keys`);
      const keys = path.map(String);
      if (keys.some((key) => FORBIDDEN.has(key))) {
        throw new Error(`a saved buffer's path names ${keys.join(".")}`);
      }
      const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
      let target = state;
      for (const key of keys.slice(0, -1)) {
        if (!Object.hasOwn(target, key) || typeof target[key] !== "object" || !target[key]) {
          throw new Error(`a saved buffer's path ${keys.join(".")} is not in the state`);
        }
        target = target[key];
      }
      Object.defineProperty(target, keys[keys.length - 1], {
        value: new DataView(bytes.buffer),
        writable: true,
        enumerable: true,
        configurable: true,
      });
    }
    return state;
  }

  /** SHA-256 of a string's UTF-8 bytes, hex (no crypto.subtle: it exists only on https
   * and localhost pages, and a site may be read from a plain http server or a file). */
  function sha256(text) {
    const rotr = (x, n) => (x >>> n) | (x << (32 - n));
    const h = [];
    const k = [];
    for (let n = 2, found = 0; found < 64; n++) {
      let prime = true;
      for (let d = 2; d * d <= n; d++) if (n % d === 0) prime = false;
      if (!prime) continue;
      if (found < 8) h[found] = (Math.pow(n, 1 / 2) * 2 ** 32) | 0;
      k[found++] = (Math.pow(n, 1 / 3) * 2 ** 32) | 0;
    }
    const data = new TextEncoder().encode(text);
    const blocks = (data.length + 9 + 63) >> 6;
    const words = new Uint32Array(blocks * 16);
    for (let i = 0; i < data.length; i++) words[i >> 2] |= data[i] << (24 - (i & 3) * 8);
    words[data.length >> 2] |= 0x80 << (24 - (data.length & 3) * 8);
    words[blocks * 16 - 2] = Math.floor((data.length * 8) / 2 ** 32);
    words[blocks * 16 - 1] = (data.length * 8) >>> 0;
    const H = Uint32Array.from(h);
    const w = new Uint32Array(64);
    for (let b = 0; b < words.length; b += 16) {
      for (let t = 0; t < 64; t++) {
        if (t < 16) {
          w[t] = words[b + t];
        } else {
          const x = w[t - 15];
          const y = w[t - 2];
          const s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3);
          const s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10);
          w[t] = w[t - 16] + s0 + w[t - 7] + s1;
        }
      }
      let [a, bb, c, d, e, f, g, hh] = H;
      for (let t = 0; t < 64; t++) {
        const t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[t] + w[t];
        const t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
        hh = g;
        g = f;
        f = e;
        e = (d + t1) >>> 0;
        d = c;
        c = bb;
        bb = a;
        a = (t1 + t2) >>> 0;
      }
      H[0] += a;
      H[1] += bb;
      H[2] += c;
      H[3] += d;
      H[4] += e;
      H[5] += f;
      H[6] += g;
      H[7] += hh;
    }
    return [...H].map((x) => x.toString(16).padStart(8, "0")).join("");
  }

  /** Whether a saved state's module and CSS are a widget jaxlab ships, byte for byte. */
  function shipped(state) {
    if (typeof state._esm !== "string" || typeof state._css !== "string") return false;
    const esm = sha256(state._esm);
    const css = sha256(state._css);
    return SHIPPED.some((m) => m.esm === esm && m.css === css);
  }

  /** The model an anywidget's render() is given, backed by the saved state only. */
  class SavedModel {
    constructor(id, state, onSend) {
      this.model_id = id;
      this._state = state;
      this._handlers = new Map();
      this._onSend = onSend;
    }
    get(name) {
      return this._state[name];
    }
    set(name, value) {
      const old = this._state[name];
      this._state[name] = value;
      if (old !== value) {
        this._emit(`change:${name}`, value);
        this._emit("change", value);
      }
    }
    on(event, handler) {
      if (!this._handlers.has(event)) this._handlers.set(event, new Set());
      this._handlers.get(event).add(handler);
    }
    off(event, handler) {
      if (event === undefined) this._handlers.clear();
      else if (handler === undefined) this._handlers.delete(event);
      else this._handlers.get(event)?.delete(handler);
    }
    save_changes() {} // changes stay in the page: there is no kernel to sync them to
    // A widget asks this before it offers what only a kernel can do (GraphExplorer's
    // "click to open" and search); a live model has no such property.
    get has_kernel() {
      return false;
    }
    send(content) {
      this._onSend(content);
    }
    get widget_manager() {
      return {
        get_model: async (id) => {
          throw new Error(`jaxlab: no kernel on this page to look up model ${id}`);
        },
      };
    }
    _emit(event, value) {
      for (const handler of [...(this._handlers.get(event) || [])]) {
        try {
          handler(value);
        } catch (err) {
          console.error(`jaxlab: a widget's ${event} handler failed`, err);
        }
      }
    }
  }

  // One import per module source: a page with five graph explorers imports one module.
  const modules = new Map();
  function importSource(source) {
    if (!modules.has(source)) {
      const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
      const loaded = import(url).finally(() => URL.revokeObjectURL(url));
      modules.set(source, loaded);
    }
    return modules.get(source);
  }

  const styled = new Set();
  function addStyle(state) {
    const css = state._css;
    if (typeof css !== "string" || !css || styled.has(css)) return;
    styled.add(css);
    const style = document.createElement("style");
    style.dataset.jaxlabWidget = state._anywidget_id || "";
    style.textContent = css;
    document.head.append(style);
  }

  /** Source of a jaxlab ES module held in the state; null for anything else (a URL is
   * never fetched, a module jaxlab does not ship is never run). */
  function esmSource(state) {
    if (!state || typeof state !== "object" || !shipped(state)) return null;
    return state._esm;
  }

  async function draw(script, models) {
    let view;
    try {
      view = JSON.parse(script.textContent);
    } catch {
      return null;
    }
    const id = view && view.model_id;
    const entry = typeof id === "string" ? models.get(id) : null;
    const source = entry && esmSource(entry.state);
    if (!source) return null; // not jaxlab's, or its state was not saved: twin stays

    const host = document.createElement("div");
    host.className = "jaxlab-site-widget";
    host.dataset.jaxlabModel = id;
    const el = document.createElement("div");
    host.append(el);
    const note = document.createElement("p");
    note.className = "jaxlab-site-widget-note";
    note.setAttribute("role", "status");
    note.hidden = true;
    host.append(note);
    script.after(host);

    try {
      const model = new SavedModel(id, withBuffers(entry), (content) => {
        console.info("jaxlab: no kernel on this page; a saved widget sent", content);
        note.textContent = NO_KERNEL;
        note.hidden = false;
      });
      const mod = await importSource(source);
      let widget = mod.default ?? mod;
      if (typeof widget === "function") widget = await widget();
      if (typeof widget?.render !== "function") throw new Error("the module has no render()");
      await widget.initialize?.({ model });
      addStyle(entry.state);
      await widget.render({ model, el });
      host.dataset.rendered = "true";
      // The twin: hidden by the view itself once it drew (data-jaxlab-twin), else shown.
      return id;
    } catch (err) {
      console.error(`jaxlab: the saved widget ${id} could not be drawn`, err);
      host.remove();
      return null;
    }
  }

  async function drawAll() {
    const models = savedModels();
    const scripts = document.querySelectorAll(`script[type="${VIEW}"]`);
    // Each view in its own boundary: one that fails in any way is simply not drawn.
    const settled = await Promise.allSettled([...scripts].map((s) => draw(s, models)));
    return settled.filter((r) => r.status === "fulfilled" && r.value).map((r) => r.value);
  }

  const start = () => drawAll();
  const rendered =
    document.readyState === "loading"
      ? new Promise((resolve) => document.addEventListener("DOMContentLoaded", () => resolve(start())))
      : start();
  window.jaxlabWidgets = { rendered };
})();
