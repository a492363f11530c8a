"""What a projected output looks like, measured in the page (issue 34): shared by
test_fit_screen_in_lab.py (the big programs) and test_tutorials_in_lab.py (every tutorial).

Each measurement is a JavaScript function for ``page.evaluate``:

- ``EXPLORERS(scope)``: per GraphExplorer under ``scope`` (a CSS selector; the whole page
  when omitted), its pane, the box around everything drawn, the camera's scale, the
  smallest text as drawn, the cue and the notes (``MEASURE_EXPLORER``);
- ``SPLIT(scope)``: the first ``%grad --split`` output, per program its scrolling box, its
  SVG, its smallest text and whether its "scroll sideways" cue shows (``MEASURE_SPLIT``);
- ``OUTPUTS(name)``: every output of notebook ``name``, cell by cell, with its size, its
  sideways scroll, its smallest text (``SMALLEST_TEXT``) and the explorers and splits in it.

Text sizes are as drawn: the font size times the SVG's scale on screen.
"""

from __future__ import annotations

from typing import Any

FRAME = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"

# One explorer, scrolled into view first: JupyterLab lays out only the cells near the
# screen, and an output scrolled to must then be measured again (its cue too).
MEASURE_EXPLORER = f"""async (root) => {{
  root.scrollIntoView({{block: 'start'}});
  await ({FRAME})();
  const pane = root.querySelector('.jaxlab-ge-pane').getBoundingClientRect();
  const drawn = Array.from(root.querySelectorAll(
    '.jaxlab-ge-svg g[data-id] > rect, .jaxlab-ge-frame > rect'))
    .map(r => r.getBoundingClientRect());
  const texts = Array.from(root.querySelectorAll('.jaxlab-ge-svg text'))
    .filter(t => t.getBBox().width > 0)
    .map(t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
  const camera = root.querySelector('.jaxlab-ge-svg > g').getAttribute('transform');
  return {{
    pane: [pane.left, pane.top, pane.right, pane.bottom],
    extent: [Math.min(...drawn.map(r => r.left)), Math.min(...drawn.map(r => r.top)),
             Math.max(...drawn.map(r => r.right)), Math.max(...drawn.map(r => r.bottom))],
    boxes: drawn.length,
    scale: parseFloat(camera.match(/scale\\(([\\d.]+)\\)/)[1]),
    smallest: Math.min(...texts),
    texts: texts.length,
    cue: root.querySelector('.jaxlab-ge-cue').textContent,
    notes: Array.from(root.querySelectorAll('.jaxlab-ge-note')).map(n => n.textContent),
    labels: Array.from(root.querySelectorAll('.jaxlab-ge-svg .jaxlab-ge-label'))
      .map(t => t.textContent),
    frames: Array.from(root.querySelectorAll('.jaxlab-ge-svg .jaxlab-ge-frame-title'))
      .map(t => t.textContent),
  }};
}}"""

EXPLORERS = f"""async (scope) => {{
  const within = scope ? document.querySelector(scope) : document;
  const out = [];
  for (const root of Array.from(within.querySelectorAll('.jaxlab-ge'))) {{
    out.push(await ({MEASURE_EXPLORER})(root));
  }}
  return out;
}}"""

# One `%grad --split` output (its .jaxlab-grad-split element): the output's sideways
# scroll and, per program, the box it scrolls in, its SVG, its smallest text, and whether
# its "scroll sideways" cue is shown (it may be in the page yet take no room).
MEASURE_SPLIT = """(root) => {
  const out = root.closest('.jp-OutputArea-output') || root;
  const programs = Array.from(root.querySelectorAll('.jaxlab-split-program')).map(s => {
    const scroller = s.querySelector('div[style*="overflow-x"]');
    const svg = s.querySelector('svg').getBoundingClientRect();
    const texts = Array.from(s.querySelectorAll('svg text'))
      .map(t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
    const cue = s.querySelector('.jaxlab-split-scroll');
    const shown = !!cue && cue.getBoundingClientRect().height > 0
      && getComputedStyle(cue).visibility !== 'hidden';
    return {scroll: [scroller.scrollWidth, scroller.clientWidth], svg: [svg.width, svg.height],
            smallest: Math.min(...texts), cue: shown};
  });
  return {output: [out.scrollWidth, out.clientWidth], programs};
}"""

SPLIT = f"""(scope) => ({MEASURE_SPLIT})(
  (scope ? document.querySelector(scope) : document).querySelector('.jaxlab-grad-split'))"""

# The smallest text under ``el`` as drawn, with the text and the class of what holds it:
# every visible text node (a hidden twin, a closed <details> have no boxes); in an SVG its
# font size times the SVG's scale on screen.
SMALLEST_TEXT = """(el) => {
  let best = {px: Infinity, text: '', where: ''};
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.trim();
    const holder = node.parentElement;
    if (!text || !holder || holder.closest('style, script')) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    if (!Array.from(range.getClientRects()).some(r => r.width > 0 && r.height > 0)) continue;
    let px = parseFloat(getComputedStyle(holder).fontSize);
    if (holder instanceof SVGElement && holder.getScreenCTM()) {
      const m = holder.getScreenCTM();
      px *= Math.hypot(m.a, m.b);
    }
    if (px < best.px) {
      best = {px, text: text.slice(0, 40),
              where: (holder.getAttribute('class') || holder.tagName.toLowerCase())};
    }
  }
  return best;
}"""

# What reaches furthest right past ``el``'s right edge: its class (or tag) and its width.
WIDEST = """(el) => {
  const edge = el.getBoundingClientRect().right;
  let best = {past: 0, what: '', width: 0};
  for (const d of el.querySelectorAll('*')) {
    const r = d.getBoundingClientRect();
    if (r.width > 0 && r.right - edge > best.past) {
      best = {past: r.right - edge, width: r.width,
              what: (d.getAttribute('class') || d.tagName.toLowerCase()).slice(0, 60)};
    }
  }
  return best;
}"""

# Every output of the notebook open at ``name``, cell by cell, each scrolled into view
# before it is measured.
OUTPUTS = f"""async (name) => {{
  const app = window.jupyterapp;
  const panel = Array.from(app.shell.widgets('main'))
    .find(w => w.context && w.context.path === name);
  const out = [];
  const cells = panel.content.widgets;
  for (let i = 0; i < cells.length; i++) {{
    const cell = cells[i];
    if (cell.model.type !== 'code') continue;
    if (panel.content.scrollToItem) await panel.content.scrollToItem(i, 'start');
    const outputs = Array.from(cell.node.querySelectorAll('.jp-OutputArea-output'));
    for (let k = 0; k < outputs.length; k++) {{
      const o = outputs[k];
      o.scrollIntoView({{block: 'start'}});
      await ({FRAME})();
      const box = o.getBoundingClientRect();
      if (box.width === 0 && box.height === 0) continue;  // hidden: a live widget's twin
      const entry = {{
        cell: i, output: k,
        source: cell.model.sharedModel.getSource().split('\\n').find(l => l.trim()) || '',
        mime: o.dataset.mimeType || '',
        size: [box.width, box.height],
        scroll: [o.scrollWidth, o.clientWidth],
        overflow: getComputedStyle(o).overflowX,
        widest: ({WIDEST})(o),
        text: ({SMALLEST_TEXT})(o),
        explorers: [], splits: [],
      }};
      for (const root of Array.from(o.querySelectorAll('.jaxlab-ge'))) {{
        entry.explorers.push(await ({MEASURE_EXPLORER})(root));
      }}
      for (const root of Array.from(o.querySelectorAll('.jaxlab-grad-split'))) {{
        entry.splits.push(({MEASURE_SPLIT})(root));
      }}
      out.push(entry);
    }}
  }}
  return out;
}}"""


def theme(page: Any, name: str, light: bool) -> None:
    """Switch JupyterLab's theme and wait until the page has it."""
    page.evaluate(
        f"() => window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{name}'}})"
    )
    page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{str(light).lower()}'")
