// jaxlab-widgets.js: the widgets saved in a documentation page, drawn from their saved
// state by their own ES modules. Served from the site's _static/: nothing is fetched from
// a CDN or the network.
//
// A tutorial page carries what the notebook saved (MyST-NB writes it):
//   <script type="application/vnd.jupyter.widget-state+json">{"state": {id: {...}}}</script>
//   <script type="application/vnd.jupyter.widget-view+json">{"model_id": id}</script>
// An anywidget's state holds its ES module (_esm) and CSS (_css). For each view this
// imports the module from a Blob URL of that source and calls its render({model, el})
// with a SavedModel: get/set/on/off work on the saved state, save_changes keeps changes
// in the page, and send has no kernel to reach, so it says so beside the widget. Once a
// view is drawn, its static twin (the HTML the kernel saved beside it, marked
// data-jaxlab-model) is hidden; a view that fails leaves its twin showing. Widgets that
// are not anywidgets (ipywidgets' sliders) were written as text when the site was built.
//
// Example (what a page does by itself once this script has run):
//   window.jaxlabWidgets.rendered  // a Promise of the model ids drawn on this page
(() => {
  "use strict";

  const STATE = "application/vnd.jupyter.widget-state+json";
  const VIEW = "application/vnd.jupyter.widget-view+json";
  const NO_KERNEL =
    "This page has no kernel: open the notebook in Jupyter to use this control.";

  /** Every saved model on the page: id -> {model_name, model_module, state, buffers}. */
  function savedModels() {
    const models = {};
    for (const script of document.querySelectorAll(`script[type="${STATE}"]`)) {
      try {
        Object.assign(models, JSON.parse(script.textContent).state || {});
      } catch (err) {
        console.error("jaxlab: unreadable widget state", err);
      }
    }
    return models;
  }

  /** Binary traits come base64-encoded with the path to put them at (ipywidgets' format). */
  function withBuffers(entry) {
    const state = structuredClone(entry.state || {});
    for (const { path, data, encoding } of entry.buffers || []) {
      if (encoding !== "base64" || !path?.length) continue;
      const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
      let target = state;
      for (const key of path.slice(0, -1)) target = target[key];
      target[path[path.length - 1]] = new DataView(bytes.buffer);
    }
    return state;
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

  /** Source of an anywidget ES module held in the state; null for a URL (never fetched). */
  function esmSource(state) {
    const esm = state && state._esm;
    if (typeof esm !== "string" || /^\s*(https?:)?\/\/\S+\s*$/i.test(esm)) return null;
    return esm;
  }

  function twins(id) {
    return document.querySelectorAll(`.jaxlab-twin[data-jaxlab-model="${CSS.escape(id)}"]`);
  }

  async function draw(script, models) {
    let view;
    try {
      view = JSON.parse(script.textContent);
    } catch {
      return null;
    }
    const id = view && view.model_id;
    const entry = id && models[id];
    const source = entry && esmSource(entry.state);
    if (!source) return null; // not an anywidget, or its state was not saved: twin stays

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

    const model = new SavedModel(id, withBuffers(entry), (content) => {
      console.info("jaxlab: no kernel on this page; a saved widget sent", content);
      note.textContent = NO_KERNEL;
      note.hidden = false;
    });
    try {
      const mod = await importSource(source);
      let widget = mod.default ?? mod;
      if (typeof widget === "function") widget = await widget();
      if (typeof widget?.render !== "function") throw new Error("the module has no render()");
      await widget.initialize?.({ model });
      addStyle(entry.state);
      await widget.render({ model, el });
      host.dataset.rendered = "true";
      for (const twin of twins(id)) twin.style.display = "none";
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
    const drawn = (await Promise.all([...scripts].map((s) => draw(s, models)))).filter(Boolean);
    // A widget's CSS hides every twin of its class; keep showing those whose view was not
    // drawn here (no saved state, or their module failed), since they are all there is.
    const done = new Set(drawn);
    for (const twin of document.querySelectorAll(".jaxlab-twin[data-jaxlab-model]")) {
      if (!done.has(twin.dataset.jaxlabModel)) twin.style.display = "block";
    }
    return drawn;
  }

  const start = () => drawAll();
  const rendered =
    document.readyState === "loading"
      ? new Promise((resolve) => document.addEventListener("DOMContentLoaded", () => resolve(start())))
      : start();
  window.jaxlabWidgets = { rendered };
})();
