"""How fast a step of the StepsPlayer answers in Chromium on a 200-equation program.

The program is the gradient of a 17-layer tanh MLP (``jaxlab.grad_steps``: about 210
steps, each a node of a drawing of 280 nodes). The player is measured where it
runs, in two pages of the same Chromium:

* a page of its own (as the docs site draws it from saved state: the ES module, its CSS
  and a model of plain JavaScript, no kernel);
* JupyterLab, through the browser test harness (``tests/browser/conftest.py``): the cell
  ``StepsPlayer(steps)`` in a notebook with its kernel, JupyterLab's styles and DOM around.

In each page: every ▶ from the first step to the last, every ◀ back through the first 60,
60 slider moves to random steps and 60 arrow-key presses. A step's latency runs from the
control's event to the end of the next painted frame (requestAnimationFrame, then a
message after the paint); each step is checked to have landed (the view's index), and a
step that did not is a failure. The independent reference is the same wait with no step:
from a moment to the end of the next painted frame in the same page, so the ratio says
how much a step adds to a frame. Target (issue 36): the p95 of every step's latency under
50 ms in both pages. The load average is printed at the start and the end (2 cores shared).

    .venv/bin/python benchmarks/steps_player.py          # both pages
    .venv/bin/python benchmarks/steps_player.py --page   # the page of its own only
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from _lab import run_browser_half
from _targets import Targets

ROOT = Path(__file__).resolve().parents[1]
LAYERS = 17
OUT = Path(tempfile.gettempdir()) / "jaxlab_steps_player_bench.json"
TARGET_MS = 50.0
SETUP = """%load_ext jaxlab
import jax, jax.numpy as jnp, jaxlab
from jaxlab.widgets import StepsPlayer
def deep(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.mean(x ** 2)
P = [(jnp.full((8, 8), 0.1), jnp.zeros(8)) for _ in range({layers})]
steps = jaxlab.grad_steps(deep, P, jnp.ones((4, 8)))
StepsPlayer(steps)"""

# Runs in the page, on the player under `scope`: each kind of step, timed to the end of
# the next painted frame; "landed" counts the steps whose index is not the one asked.
MEASURE = """async (scope) => {
  const root = document.querySelector(`${scope} .jaxlab-sp`);
  const n = Number(root.querySelector(".jaxlab-sp-slider").max) + 1;
  const painted = () => new Promise((done) => requestAnimationFrame(() => {
    const channel = new MessageChannel();
    channel.port1.onmessage = () => done(performance.now());
    channel.port2.postMessage(0);
  }));
  const at = () => Number(root.dataset.current);
  let missed = 0;
  const timed = async (act, want) => {
    const t0 = performance.now();
    act();
    const t1 = await painted();
    if (at() !== want) missed += 1;
    return t1 - t0;
  };
  const click = (cls) => () => root.querySelector(cls).click();
  const key = (name) => () => root.dispatchEvent(new KeyboardEvent("keydown",
    { key: name, bubbles: true, cancelable: true }));
  await timed(key("Home"), 0);
  const idle = [];
  for (let i = 0; i < 60; i++) idle.push(await timed(() => {}, 0));
  const next = [];
  for (let i = 1; i < n; i++) next.push(await timed(click(".jaxlab-sp-next"), i));
  const back = [];
  const prev = click(".jaxlab-sp-prev");
  for (let i = n - 2; i >= Math.max(0, n - 61); i--) back.push(await timed(prev, i));
  const slider = root.querySelector(".jaxlab-sp-slider");
  const jump = [];
  let seed = 7;
  for (let i = 0; i < 60; i++) {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    const to = seed % n;
    jump.push(await timed(() => {
      slider.value = String(to);
      slider.dispatchEvent(new Event("input", { bubbles: true }));
    }, to));
  }
  const keys = [];
  const from = at();
  for (let i = 1; i <= 60; i++) {
    const right = from + i <= n - 1;
    const want = right ? at() + 1 : at() - 1;
    keys.push(await timed(key(right ? "ArrowRight" : "ArrowLeft"), want));
  }
  const nodes = root.querySelectorAll("g.node").length;
  return { n, nodes, idle, next, back, jump, keys, missed };
}"""

PAGE = """async ([source, css, frame]) => {
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const widget = (await import(url)).default;
  const style = document.createElement("style");
  style.textContent = css;
  document.head.append(style);
  const state = { frame, current: 0, _twin_id: "" };
  const handlers = new Map();
  const model = {
    get: (k) => state[k],
    set: (k, v) => { state[k] = v; },
    on: (e, f) => { if (!handlers.has(e)) handlers.set(e, new Set()); handlers.get(e).add(f); },
    off: (e, f) => handlers.get(e)?.delete(f),
    save_changes() {}, send() {},
  };
  const el = document.createElement("div");
  el.id = "player";
  document.body.append(el);
  widget.render({ model, el });
}"""


def deep(params: Any, x: Any) -> Any:
    import jax.numpy as jnp

    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.mean(x**2)


def frame_of_program() -> tuple[dict[str, Any], dict[str, Any]]:
    """The player's frame for the program, and what making it cost in the kernel."""
    import jax.numpy as jnp

    import jaxlab

    params = [(jnp.full((8, 8), 0.1), jnp.zeros(8)) for _ in range(LAYERS)]
    t0 = time.perf_counter()
    steps = jaxlab.grad_steps(deep, params, jnp.ones((4, 8)))
    made = time.perf_counter() - t0
    frame = steps.frame()
    size = len(json.dumps(frame))
    return frame, {"equations": steps.n_equations, "grad_steps_s": made, "frame_bytes": size}


def own_page(frame: dict[str, Any]) -> dict[str, Any]:
    """The player in a page of its own (the docs site's way: no kernel)."""
    from playwright.sync_api import sync_playwright

    sys.path.insert(0, str(ROOT / "tests" / "browser"))
    from conftest import CHROMIUM_ARGS, _chromium

    from jaxlab.widgets._base import asset, module_source

    executable = _chromium()
    if executable is None:
        raise SystemExit("Chromium is missing: `tools/ensure_system.sh chromium` installs it")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 720})
        page.goto("about:blank")
        page.evaluate(PAGE, [module_source("steps_player"), asset("steps_player.css"), frame])
        page.wait_for_selector("#player .jaxlab-sp")
        result = dict(page.evaluate(MEASURE, "#player"))
        browser.close()
    return result


@pytest.mark.browser
def test_lab_half(open_notebook: Any, page: Any) -> None:
    """The player in JupyterLab: the cell run with its kernel, then the same steps."""
    from conftest import PANEL_ID

    page.set_viewport_size({"width": 1280, "height": 720})
    notebook = open_notebook("steps_bench.ipynb", [SETUP.format(layers=LAYERS)])
    notebook.run_all()
    panel = page.evaluate(PANEL_ID, notebook.name)
    page.wait_for_selector(f"#{panel} .jaxlab-sp[data-current]")
    OUT.write_text(json.dumps(page.evaluate(MEASURE, f"#{panel}")))


def lab_page() -> dict[str, Any] | None:
    figures = run_browser_half(__file__, OUT)
    return None if figures is None else dict(figures)


def summary(result: dict[str, Any]) -> dict[str, Any]:
    every = result["next"] + result["back"] + result["jump"] + result["keys"]
    idle = result["idle"]

    def p95(values: list[float]) -> float:
        return sorted(values)[max(0, round(0.95 * len(values)) - 1)]

    row = {
        "steps": result["n"],
        "nodes": result["nodes"],
        "measured": len(every),
        "missed": result["missed"],
        "median_ms": statistics.median(every),
        "p95_ms": p95(every),
        "max_ms": max(every),
        "idle_median_ms": statistics.median(idle),
        "idle_p95_ms": p95(idle),
    }
    for kind in ("next", "back", "jump", "keys"):
        row[f"{kind}_median_ms"] = statistics.median(result[kind])
        row[f"{kind}_p95_ms"] = p95(result[kind])
    return row


def main() -> None:
    targets = Targets()
    load_at_start = os.getloadavg()
    frame, kernel = frame_of_program()
    print(
        f"program: the gradient of a {LAYERS}-layer tanh MLP, {kernel['equations']} equations, "
        f"{len(frame['steps'])} steps; grad_steps {kernel['grad_steps_s']:.2f} s in the kernel, "
        f"frame {kernel['frame_bytes'] / 1024:.0f} KB (sent once)"
    )
    pages = {"own page": summary(own_page(frame))}
    if "--page" not in sys.argv:
        lab = lab_page()
        if lab is not None:
            pages["JupyterLab"] = summary(lab)
    print(
        f"{'page':>11} {'steps':>5} {'nodes':>5} {'n':>4} {'median ms':>9} {'p95 ms':>7} "
        f"{'max ms':>7} {'▶ p95':>6} {'◀ p95':>6} {'slider p95':>10} {'keys p95':>8} "
        f"{'frame, no step: median':>22} {'p95':>5}"
    )
    for name, r in pages.items():
        print(
            f"{name:>11} {r['steps']:>5} {r['nodes']:>5} {r['measured']:>4} "
            f"{r['median_ms']:>9.1f} {r['p95_ms']:>7.1f} {r['max_ms']:>7.1f} "
            f"{r['next_p95_ms']:>6.1f} {r['back_p95_ms']:>6.1f} {r['jump_p95_ms']:>10.1f} "
            f"{r['keys_p95_ms']:>8.1f} {r['idle_median_ms']:>22.1f} {r['idle_p95_ms']:>5.1f}"
        )
    print(
        "latency: from the control's event to the end of the next painted frame; the "
        "reference is that wait with no step (a frame of nothing)"
    )
    for name, r in pages.items():
        targets.at_most(
            f"{name}: p95 of a step's latency, ms ({r['steps']} steps)",
            r["p95_ms"],
            TARGET_MS,
            figure=r["p95_ms"],
            reference=r["idle_p95_ms"],
            unit="ms",
        )
        targets.at_most(f"{name}: steps that did not land", r["missed"], 0)
        print(
            f"{name}: a step's median {r['median_ms']:.1f} ms is "
            f"{r['median_ms'] / max(r['idle_median_ms'], 1e-9):.2f}x a frame with no step"
        )
    targets.print_clocks()
    load = {"start": load_at_start, "end": os.getloadavg(), "cores": os.cpu_count()}
    print(f"load average (1, 5, 15 min) at start {load_at_start}, at end {load['end']}")
    figures = {"benchmark": "steps_player", "kernel": kernel, "pages": pages, "load": load}
    print(json.dumps(figures | targets.figures()))
    sys.exit(targets.exit_code())


if __name__ == "__main__":
    main()
