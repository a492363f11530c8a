// What every jaxlab view shares. widgets/_base.py puts this file before each widget's own
// module (one ES module per widget, as anywidget loads it), so each view has these names.

/** Saved state this view cannot read: the view says so and its twin shows. */
class Refused extends Error {}

// The static twin (widgets/_base.py) shows unless this view drew: a drawn view holds a rule
// hiding its twin inside its own element, so the rule goes when the view goes.
const TWIN_ID = /^[0-9a-f]{8,64}$/;

/** Run ``paint`` guarded: drawn, the twin is hidden; failed, the view says why (never
 * throwing out of the view) and the twin shows. ``widget`` names the view in the console.
 * Returns whether it drew. */
function guarded(model, el, paint, widget) {
  let hide = el.querySelector(":scope > style.jaxlab-hide-twin");
  try {
    paint();
    const id = model.get("_twin_id");
    if (typeof id === "string" && TWIN_ID.test(id)) {
      hide = hide || document.createElement("style");
      hide.className = "jaxlab-hide-twin";
      hide.textContent = `.jaxlab-twin[data-jaxlab-twin="${id}"] { display: none; }`;
      el.append(hide);
    }
    return true;
  } catch (err) {
    const why = err instanceof Refused ? err.message : `${err && err.name}: ${err && err.message}`;
    console.warn(`jaxlab: a ${widget} could not draw its saved state:`, err);
    const note = h("div", "jaxlab-error", `This view could not draw its saved state: ${why.slice(0, 300)}. The saved copy below shows it.`);
    el.replaceChildren(note);
    return false;
  }
}

/**
 * An element with a class and text.
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
