"""Read each tutorial page of the built site as a reader does: Chromium at 1280x720.

``check_site.py`` calls :func:`reading_problems` after its static checks. Each tutorial
page is served from the built site on 127.0.0.1 (its widgets are drawn by the site's own
loader, as a reader sees them) and read for three things, one line per offending element:

- **small text**: visible text in a cell's output drawn under :data:`SMALLEST_PX` px: the
  computed font size, times the SVG's scale for SVG text (a graph shrunk to fit its column
  draws 14 px labels at its scale), as the explorer's browser tests measure it
  (``getScreenCTM``);
- **too wide**: an output wider than the content column that is not inside a box that
  scrolls sideways (or clips a drawing that pans, as the GraphExplorer's pane does), or
  is inside one with no visible cue saying so (a line with "scroll", "drag", "pan" or
  "↔" in the output: a scrollbar can sit a screen below, and a pane shows no sign);
- **click**: visible text anywhere in the tutorial promising a click: the site has no
  kernel, so nothing there answers one.

:data:`READ` is the one measurement, in the page; ``tests/browser/test_docs_reading.py``
runs it on pages written to fail each way.
"""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

VIEWPORT = {"width": 1280, "height": 720}
SMALLEST_PX = 12.0
CHROMIUM = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# In the page: [kind, where, what] for each offending element. `column` is the content
# column (alabaster's div.body; the page's body elsewhere), `outputs` each cell's output.
READ = r"""([smallest, outputSelector, columnSelector]) => {
  const found = [];
  const column = document.querySelector(columnSelector) || document.body;
  const right = column.getBoundingClientRect().right + 1;
  const visible = el => {
    if (!el.getClientRects().length) return false;
    const style = getComputedStyle(el);
    return style.visibility !== 'hidden' && style.display !== 'none' && +style.opacity !== 0;
  };
  const where = el => {
    const cell = el.closest('.cell');
    const cells = [...document.querySelectorAll('.cell')];
    const classes = [...el.classList].map(c => '.' + c).join('');
    const tag = el.tagName.toLowerCase() + classes;
    return (cell ? 'cell ' + (cells.indexOf(cell) + 1) + ' ' : '') + tag;
  };
  const MOVES = 'scrolls or pans';
  const snippet = text => text.replace(/\s+/g, ' ').trim().slice(0, 60);
  const ownText = el => [...el.childNodes]
    .filter(n => n.nodeType === 3).map(n => n.textContent).join('').trim();
  const outputs = [...document.querySelectorAll(outputSelector)];
  // Small text: the drawn size of every visible element holding text of its own.
  for (const out of outputs) {
    for (const el of out.querySelectorAll('*')) {
      const text = ownText(el);
      if (!text || !visible(el) || el.closest('script, style, noscript')) continue;
      let px = parseFloat(getComputedStyle(el).fontSize);
      if (el instanceof SVGElement && el.getScreenCTM) {
        const m = el.getScreenCTM();
        if (m) px *= Math.hypot(m.a, m.b);
      }
      if (px < smallest - 0.05)
        found.push(['small text', where(el), px.toFixed(1) + ' px: ' + snippet(text)]);
    }
  }
  // Too wide: the outermost element of each output reaching past the column.
  // A box that scrolls, or clips a drawing that pans (the GraphExplorer's pane).
  const scrolls = el => /(auto|scroll|hidden|clip)/.test(getComputedStyle(el).overflowX);
  const cued = (box, out) => [box, out].some(root => [...root.querySelectorAll('*')].some(
    el => visible(el) && /scroll|↔|drag|\bpan\b/i.test(ownText(el))));
  for (const out of outputs) {
    const wide = [...out.querySelectorAll('*')].filter(
      el => visible(el) && el.getBoundingClientRect().right > right);
    const outer = wide.filter(el => !wide.some(o => o !== el && o.contains(el)));
    for (const el of outer) {
      let box = el.parentElement;
      while (box && box !== out.parentElement && !scrolls(box)) box = box.parentElement;
      const w = Math.round(el.getBoundingClientRect().width) + ' px wide';
      if (!box || box === out.parentElement || box.getBoundingClientRect().right > right)
        found.push(['too wide', where(el), w + ', past the column, in no box that ' + MOVES]);
      else if (!cued(box, out))
        found.push(['too wide', where(el), w + ' in a box that ' + MOVES + ' with no visible cue']);
    }
  }
  // Click: any visible text of the page that promises one.
  const walker = document.createTreeWalker(column, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (/\bclick/i.test(n.textContent) && el && visible(el) && !el.closest('script, style'))
      found.push(['click', where(el), snippet(n.textContent)]);
  }
  return found;
}"""

OUTPUTS = ".cell_output"
COLUMN = "div.body"


def chromium() -> str | None:
    """Chromium's executable here (``tools/ensure_system.sh chromium`` installs it)."""
    for path in CHROMIUM:
        if os.access(path, os.X_OK):
            return path
    return shutil.which("chromium")


@contextmanager
def served(site: Path) -> Iterator[str]:
    """``site`` served on 127.0.0.1 (ES modules do not load from file: URLs)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def read_page(page: Any, url: str) -> list[list[str]]:
    """[kind, where, what] for each offending element of the page at ``url``."""
    page.goto(url, wait_until="load")
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(200)  # the widget loader draws after load
    found: list[list[str]] = page.evaluate(READ, [SMALLEST_PX, OUTPUTS, COLUMN])
    return found


def reading_problems(site: Path, pages: Sequence[str], browser: Any = None) -> list[str]:
    """One line per offending element of each page (paths relative to ``site``), read in
    ``browser`` (a Playwright browser already running: the tests' session one), else in a
    Chromium started for it."""
    if browser is not None:
        with served(site) as base:
            return _read_all(browser, base, pages)
    executable = chromium()
    if executable is None:
        return ["Chromium is missing, so no tutorial was read: tools/ensure_system.sh chromium"]
    from playwright.sync_api import sync_playwright

    with served(site) as base, sync_playwright() as p:
        started = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            return _read_all(started, base, pages)
        finally:
            started.close()


def _read_all(browser: Any, base: str, pages: Sequence[str]) -> list[str]:
    lines = []
    page = browser.new_page(viewport=VIEWPORT)
    try:
        for name in pages:
            for kind, where, what in read_page(page, f"{base}/{name}"):
                lines.append(f"{name} at 1280x720: {kind}: {where}: {what}")
    finally:
        page.close()
    return lines
