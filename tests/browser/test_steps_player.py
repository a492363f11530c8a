"""StepsPlayer in Chromium (issue 36): the chain rule played in JupyterLab, the step index
back in the kernel and in the saved notebook, the dark theme at 1280x720, the docs site's
loader playing a saved frame with no kernel, and forged frames.

The expected steps are computed here, in the test's own process, by ``jaxlab.grad_steps``
on the same function: the page is checked against them, never against its own state.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import PANEL_ID

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "def f(x, w):\n    y = jnp.sin(x * w)\n    return y * x\n"  # x is used twice
# The player as a notebook opens it: the magic (its widget found again in the kernel, for
# the index the page wrote back).
CELLS = [
    "%load_ext jaxlab\nimport jax, jax.numpy as jnp, jaxlab\n" + SOURCE + "x, w = 0.5, 1.2\n",
    "%grad --steps --wrt x,w f(x, w)",
    "import gc\nfrom jaxlab.widgets import StepsPlayer\n"
    "print('CURRENT', *[p.current for p in gc.get_objects()\n"
    "                   if isinstance(p, StepsPlayer) and p.comm is not None])",
]
# ... and through the Python API.
API_CELLS = [
    "%load_ext jaxlab\nimport jax, jax.numpy as jnp, jaxlab\n"
    "from jaxlab.widgets import StepsPlayer\n" + SOURCE,
    "steps = jaxlab.grad_steps(f, 0.5, 1.2, argnums=(0, 1))\nplayer = StepsPlayer(steps)\nplayer",
]
TWIN = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def expected(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The frame the notebook's player shows, made here by the same call."""
    import jaxlab

    return jaxlab.grad_steps(_f(tmp_path_factory.mktemp("f")), 0.5, 1.2, argnums=(0, 1)).frame()


def _f(folder: Path) -> Any:
    """``f`` from a file of SOURCE: its lines readable, as a notebook cell's are (the steps
    name values from the source: ``y``)."""
    import runpy

    path = folder / "steps_source.py"
    path.write_text("import jax.numpy as jnp\n" + SOURCE)
    return runpy.run_path(str(path))["f"]


# The player's state in the page, read from its DOM: the step shown, each node's mark
# (by the <title> Graphviz gave it), the lit edges, the words.
SHOWN = """(panel) => {
  const root = document.querySelector(`#${panel} .jaxlab-sp`);
  if (!root) return null;
  const marks = {};
  for (const g of root.querySelectorAll("g.node")) {
    marks[g.querySelector(":scope > title").textContent] = g.dataset.spState || "";
  }
  const edges = (cls) => [...root.querySelectorAll(`g.edge.${cls}`)]
    .map((g) => g.querySelector(":scope > title").textContent);
  return {
    current: Number(root.dataset.current),
    marks,
    fan: edges("jaxlab-sp-edge-fan"),
    lit: edges("jaxlab-sp-edge-in"),
    words: root.querySelector(".jaxlab-sp-words").innerText,
    slider: Number(root.querySelector(".jaxlab-sp-slider").value),
  };
}"""


def _shown(notebook: Any) -> dict[str, Any]:
    panel = notebook.page.evaluate(PANEL_ID, notebook.name)
    return dict(notebook.page.evaluate(SHOWN, panel))


def _wait_step(notebook: Any, i: int) -> dict[str, Any]:
    panel = notebook.page.evaluate(PANEL_ID, notebook.name)
    notebook.page.wait_for_function(
        f"(panel) => Number(document.querySelector(`#${{panel}} .jaxlab-sp`)"
        f"?.dataset.current) === {i}",
        arg=panel,
    )
    return _shown(notebook)


def _assert_lit(shown: dict[str, Any], frame: dict[str, Any], i: int) -> None:
    """Step ``i`` shown: its node lit, earlier steps' nodes in their pass's colour, later
    steps' nodes faint, its words in the panel."""
    steps = frame["steps"]
    assert shown["current"] == i and shown["slider"] == i
    assert shown["marks"][steps[i]["node"]] == "current"
    for j, step in enumerate(steps):
        if step["node"] == steps[i]["node"]:
            continue
        later = [k for k, s in enumerate(steps) if s["node"] == step["node"] and k <= i]
        want = f"done-{steps[later[-1]]['kind']}" if later else "pending"
        assert shown["marks"][step["node"]] == want, (j, step["node"])
    assert steps[i]["text"] in shown["words"]
    assert f"Step {i + 1} of {len(steps)}" in shown["words"]


def _kernel_current(notebook: Any) -> int:
    """The kernel's ``player.current``, printed by the last cell (run again until the
    page's debounced write has arrived: at most a few runs)."""
    out = notebook.locator(".jp-Cell").nth(2).locator(".jp-OutputArea-output")
    notebook.run(2)
    notebook.wait_idle()
    out.filter(has_text="CURRENT").first.wait_for()
    found = re.search(r"CURRENT (\d+)$", out.first.inner_text().strip())  # one player
    assert found
    return int(found.group(1))


def _kernel_reaches(notebook: Any, i: int) -> None:
    for _ in range(20):
        if _kernel_current(notebook) == i:
            return
        notebook.page.wait_for_timeout(250)
    assert _kernel_current(notebook) == i


def test_the_player_steps_jumps_plays_and_the_notebook_keeps_the_step(
    lab: Any, open_notebook: Any, page: Any, expected: dict[str, Any]
) -> None:
    name = "steps_player.ipynb"
    notebook = open_notebook(name, CELLS)
    notebook.run_all()
    steps = expected["steps"]
    n = len(steps)
    _assert_lit(_wait_step(notebook, 0), expected, 0)

    notebook.locator(".jaxlab-sp-next").click()  # ▶ advances one step
    _assert_lit(_wait_step(notebook, 1), expected, 1)
    assert _shown(notebook)["marks"][steps[0]["node"]] == "done-forward"

    # Arrow keys on the focused player step it, and the notebook's own keys stay out.
    active = page.evaluate(
        "(name) => window.jupyterapp.shell.currentWidget.content.activeCellIndex", name
    )
    notebook.locator(".jaxlab-sp-pane").click()
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")
    _assert_lit(_wait_step(notebook, 3), expected, 3)
    page.keyboard.press("ArrowLeft")
    _assert_lit(_wait_step(notebook, 2), expected, 2)
    page.keyboard.press("End")
    _assert_lit(_wait_step(notebook, n - 1), expected, n - 1)
    page.keyboard.press("Home")
    _wait_step(notebook, 0)
    assert active == page.evaluate(
        "(name) => window.jupyterapp.shell.currentWidget.content.activeCellIndex", name
    )

    # Jump to the step that produces ∂f/∂w, then ∂f/∂x: x is used twice, so its step adds
    # two contributions and both edges into it are lit.
    jump = notebook.locator(".jaxlab-sp-jump")
    jump.select_option(label="∂f/∂w")
    w = expected["targets"]["∂f/∂w"]
    _assert_lit(_wait_step(notebook, w), expected, w)
    jump.select_option(label="∂f/∂x")
    x = expected["targets"]["∂f/∂x"]
    shown = _wait_step(notebook, x)
    _assert_lit(shown, expected, x)
    assert steps[x]["fanout"] and steps[x]["fanout"] in shown["words"]
    assert len(shown["fan"]) == 2 and shown["lit"] == []
    assert all(re.search(rf"->{re.escape(steps[x]['node'])}$", e) for e in shown["fan"])

    # The slider goes anywhere.
    notebook.locator(".jaxlab-sp-slider").fill("4")
    _assert_lit(_wait_step(notebook, 4), expected, 4)
    _kernel_reaches(notebook, 4)  # the page wrote the step back to the kernel

    # Play at the fastest speed runs to the end and stops there.
    notebook.locator(".jaxlab-sp-speed").select_option(label="10 steps/s")
    notebook.locator(".jaxlab-sp-play").click()
    _assert_lit(_wait_step(notebook, n - 1), expected, n - 1)
    notebook.locator(".jaxlab-sp-play").filter(has_text=re.compile("^play$")).wait_for()

    # Left on step 6, saved, reopened without the kernel: the twin shows step 6.
    notebook.locator(".jaxlab-sp-slider").fill("5")
    _wait_step(notebook, 5)
    _kernel_reaches(notebook, 5)
    assert notebook.save()
    saved = json.loads((lab.root / name).read_text())
    twins = [
        "".join(out["data"]["text/html"])
        for cell in saved["cells"]
        for out in cell.get("outputs", [])
        if "jaxlab-twin" in "".join(out.get("data", {}).get("text/html", ""))
    ]
    assert len(twins) == 1 and f"Step 6 of {n}" in twins[0]
    assert notebook.close()
    page.goto(lab.notebook_url(name))
    page.wait_for_function(PANEL_ID, arg=name)
    twin = notebook.locator(".jaxlab-twin")
    twin.first.wait_for(state="visible")
    text = twin.inner_text()
    assert f"Step 6 of {n}" in text and steps[5]["text"] in text
    assert all(s["text"] in text for s in steps)  # the whole walk, readable
    assert re.search(r"▶\s*" + re.escape(steps[5]["kind"]), text)
    assert page.requests.outside() == []


CONTRAST = """(panel) => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).slice(0, 4).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  const back = (el) => {
    for (let e = el; e; e = e.parentElement) {
      const c = rgb(getComputedStyle(e).backgroundColor);
      if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c;
    }
    return [255, 255, 255];
  };
  const root = document.querySelector(`#${panel} .jaxlab-sp`);
  const out = [];
  const read = ".jaxlab-sp-words *, .jaxlab-sp-title, .jaxlab-sp-bar button, " +
    ".jaxlab-sp-counter, .jaxlab-sp-item, .jaxlab-sp-legend span, .jaxlab-sp-note";
  for (const el of root.querySelectorAll(read)) {
    const words = [...el.childNodes].some((c) => c.nodeType === 3 && c.data.trim());
    if (!words) continue;
    const s = getComputedStyle(el);
    if (el.disabled) continue;
    const a = lum(rgb(s.color)), b = lum(back(el));
    out.push({ cls: el.className, px: parseFloat(s.fontSize),
               ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05) });
  }
  const words = root.querySelector(".jaxlab-sp-words").getBoundingClientRect();
  const px = (cls) => parseFloat(getComputedStyle(root.querySelector(cls)).fontSize);
  return { out, right: words.right, width: words.width,
           text: px(".jaxlab-sp-text"), equation: px(".jaxlab-sp-equation") };
}"""
THEME = """async (name) => {
  await window.jupyterapp.commands.execute("apputils:change-theme", { theme: name });
}"""


def test_the_words_read_at_1280x720_in_the_dark_and_light_themes(
    open_notebook: Any, page: Any
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    notebook = open_notebook("steps_dark.ipynb", API_CELLS)
    notebook.run_all()
    _wait_step(notebook, 0)
    notebook.locator(".jaxlab-sp-last").click()  # the fan-out step: the most words
    _wait_step(notebook, int(notebook.locator(".jaxlab-sp-slider").get_attribute("max") or 0))
    panel = page.evaluate(PANEL_ID, notebook.name)
    try:
        for theme, light in (("JupyterLab Dark", "false"), ("JupyterLab Light", "true")):
            page.evaluate(THEME, theme)
            page.wait_for_function(f"() => document.body.dataset.jpThemeLight === '{light}'")
            seen = page.evaluate(CONTRAST, panel)
            assert seen["text"] >= 14 and seen["equation"] >= 14, (theme, seen)
            assert seen["out"], theme
            for item in seen["out"]:
                assert item["px"] >= 12, (theme, item)
                assert item["ratio"] >= 4.5, (theme, item)
            assert seen["width"] >= 250 and seen["right"] <= 1280, (theme, seen)
    finally:
        page.evaluate(THEME, "JupyterLab Light")


# ---------------------------------------------------------------- without a kernel
def _saved_page(folder: Path, current: int) -> Path:
    """A docs page as the site writes it: a player's saved state, trusted by hash, and its
    twin beside it (docs/_static/jaxlab-widgets.js, docs/_ext/widget_trust.py)."""
    import importlib.util

    import jaxlab
    from jaxlab.widgets import StepsPlayer

    spec = importlib.util.spec_from_file_location(
        "widget_trust", ROOT / "docs" / "_ext" / "widget_trust.py"
    )
    assert spec is not None and spec.loader is not None
    trust = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(trust)
    loader = folder / "jaxlab-widgets.js"
    loader.write_text((ROOT / "docs" / "_static" / "jaxlab-widgets.js").read_text())
    trust.trust_loader(loader)
    player = StepsPlayer(jaxlab.grad_steps(_f(folder), 0.5, 1.2, argnums=(0, 1)))
    try:
        player.current = current
        state = {**player.get_state(), "_twin_id": TWIN}
        state = {k: v for k, v in state.items() if k != "layout"}
        twin = player.static_bundle()["text/html"].replace(player._twin_id, TWIN)
    finally:
        player.close()
    entry = {"model_name": "AnyModel", "model_module": "anywidget", "state": state}
    saved = json.dumps({"version_major": 2, "version_minor": 0, "state": {"m0": entry}})
    page = folder / "saved.html"
    page.write_text(
        '<!doctype html><html><head><meta charset="utf-8">'
        '<script src="jaxlab-widgets.js"></script></head><body>'
        f'<script type="application/vnd.jupyter.widget-state+json">'
        f"{saved.replace('<', chr(92) + 'u003c')}</script>"
        '<script type="application/vnd.jupyter.widget-view+json">{"model_id": "m0"}</script>'
        f"{twin}</body></html>"
    )
    return page


def test_the_docs_site_plays_the_saved_frame_without_a_kernel(
    page: Any, tmp_path: Path, expected: dict[str, Any]
) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(_saved_page(tmp_path, current=3).as_uri())
    page.evaluate("() => window.jaxlabWidgets.rendered.then((ids) => { window.__drawn = ids; })")
    page.wait_for_function("() => window.__drawn !== undefined")
    assert page.evaluate("() => window.__drawn") == ["m0"]
    root = page.locator(".jaxlab-sp")
    assert root.get_attribute("data-current") == "3"  # the step it was saved on
    assert not page.locator(".jaxlab-twin").is_visible()  # the view drew: its twin hides
    page.locator(".jaxlab-sp-next").click()  # stepping needs no kernel
    page.wait_for_function("() => document.querySelector('.jaxlab-sp').dataset.current === '4'")
    assert expected["steps"][4]["text"] in page.locator(".jaxlab-sp-words").inner_text()
    assert errors == []
    assert [u for u in page.requests.outside() if not u.startswith("file:")] == []


FORGED = """async ([source, cases, twin]) => {
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const widget = (await import(url)).default;
  window.__alerted = false;
  window.alert = () => { window.__alerted = true; };
  const results = [];
  for (const [name, stateText] of cases) {
    const record = { name, thrown: null };
    try {
      const state = JSON.parse(stateText);
      const model = { get: (k) => state[k], set: (k, v) => { state[k] = v; }, on() {}, off() {},
                      save_changes() {}, send() {} };
      const box = document.createElement("section");
      box.innerHTML = `<div class="view"></div>` +
        `<div class="jaxlab-twin" data-jaxlab-twin="${twin}">twin</div>`;
      document.body.replaceChildren(box);
      const el = box.querySelector(".view");
      widget.render({ model, el });
      el.querySelector(".jaxlab-sp-next")?.click();
      record.twin = getComputedStyle(box.querySelector(".jaxlab-twin")).display !== "none";
      record.error = el.querySelector(".jaxlab-error")?.textContent ?? null;
      record.current = el.querySelector(".jaxlab-sp")?.dataset.current ?? null;
      record.steps = el.querySelectorAll(".jaxlab-sp-item").length;
      record.title = el.querySelector(".jaxlab-sp-title")?.textContent ?? null;
      const active = "script, foreignObject, image, iframe, a, img";
      record.active = [...el.querySelectorAll(active)].length
        + [...el.querySelectorAll("*")].filter((e) => [...e.attributes].some(
            (a) => /^on/i.test(a.name) || /javascript:|url\\(/i.test(a.value))).length;
    } catch (err) {
      record.thrown = String(err);
    }
    results.push(record);
  }
  await new Promise((r) => setTimeout(r, 50));
  return { results, alerted: window.__alerted };
}"""


def test_forged_frames_draw_what_they_can_and_run_nothing(
    page: Any, expected: dict[str, Any]
) -> None:
    from jaxlab.widgets._base import module_source

    hostile = "<img src=x onerror=alert(1)></b>"
    svg = expected["svg"].replace(
        "</svg>",
        '<script>alert(2)</script><foreignObject><img src="x" onerror="alert(3)"/>'
        '</foreignObject><a href="javascript:alert(4)"><rect width="1" height="1" '
        'onclick="alert(5)" fill="url(https://example.com/x)"/></a>'
        '<image href="https://example.com/t.png"/></svg>',
    )
    good = {**expected, "svg": svg, "function": hostile}
    steps = expected["steps"]
    cases: dict[str, tuple[dict[str, Any], str | None]] = {
        "hostile svg and name": ({"frame": good, "current": 0}, "1"),
        "current past the end": ({"frame": expected, "current": 10**9}, "1"),
        "current a string": ({"frame": expected, "current": "5"}, "1"),
        "a step of the wrong type": (
            {"frame": {**expected, "steps": [None, 7, "x", *steps]}, "current": 0},
            "1",
        ),
        "targets past the end": (
            {"frame": {**expected, "targets": {"∂f/∂x": 99, "__proto__": 1}}, "current": 0},
            "1",
        ),
        "a hundred thousand steps": (
            {"frame": {**expected, "steps": steps * 10_000}, "current": 0},
            "1",
        ),
        "svg not an svg": ({"frame": {**expected, "svg": "<html><b>x</b>"}, "current": 0}, "1"),
        "no steps": ({"frame": {**expected, "steps": []}, "current": 0}, None),
        "steps not a list": ({"frame": {**expected, "steps": {"0": 1}}, "current": 0}, None),
        "frame not an object": ({"frame": [1, 2], "current": 0}, None),
    }
    wire = [[name, json.dumps({**state, "_twin_id": TWIN})] for name, (state, _) in cases.items()]
    page.goto("about:blank")
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    seen = page.evaluate(FORGED, [module_source("steps_player"), wire, TWIN])
    assert errors == [] and not seen["alerted"]
    for record, (_, (_, current)) in zip(seen["results"], cases.items(), strict=True):
        assert record["thrown"] is None and record["active"] == 0, record
        assert record["current"] == current, record
        if record["error"] is not None:  # refused: it says so and the twin shows
            assert record["twin"], record
        else:
            assert not record["twin"], record
    hostile_case = seen["results"][0]
    assert hostile in hostile_case["title"]  # the name is text, never markup
    assert seen["results"][5]["steps"] == 20_000  # capped, still drawn
    assert seen["results"][8]["error"] and "no list of steps" in seen["results"][8]["error"]


# ---------------------------------------------------------------- boxes
BOXED_SOURCE = """\
import jax
import jax.numpy as jnp


@jax.jit
def inner(x):
    return jnp.tanh(x) * 2.0


def g(x, w):
    with jax.named_scope("scaled"):
        z = x * w + 1.0
    return inner(z) ** 2
"""
BOXED = """async ([source, state, css]) => {
  const style = document.createElement("style");
  style.textContent = css || "";
  document.head.append(style);
  const url = URL.createObjectURL(new Blob([source], { type: "text/javascript" }));
  const widget = (await import(url)).default;
  window.__written = [];
  const model = { get: (k) => state[k], set: (k, v) => { state[k] = v; window.__written.push(v); },
                  on() {}, off() {}, save_changes() {}, send() {} };
  const el = document.createElement("div");
  document.body.replaceChildren(el);
  widget.render({ model, el });
}"""
SEEN = """() => {
  const root = document.querySelector(".jaxlab-sp");
  const marks = {};
  for (const g of root.querySelectorAll("g.node")) {
    marks[g.querySelector(":scope > title").textContent] = g.dataset.spState || "";
  }
  return {
    current: Number(root.dataset.current),
    box: root.dataset.closedBox,
    counter: root.querySelector(".jaxlab-sp-counter").textContent,
    words: root.querySelector(".jaxlab-sp-words").innerText,
    items: [...root.querySelectorAll(".jaxlab-sp-item")].filter((li) => !li.hidden)
      .map((li) => Number(li.dataset.step)),
    marks,
  };
}"""


def test_a_jit_and_a_named_scope_are_one_step_closed_and_open_into_their_steps(
    page: Any, tmp_path: Path
) -> None:
    """Boxes start closed: a closed box is one step (all its nodes lit, its first numbers
    in and last out); ▶ passes it whole; "open" plays its steps one by one; a target
    inside a closed box opens it; "open boxes" opens them all."""
    import runpy

    import jaxlab
    from jaxlab.widgets._base import module_source

    path = tmp_path / "boxed.py"
    path.write_text(BOXED_SOURCE)
    walk = jaxlab.grad_steps(runpy.run_path(str(path))["g"], 0.4, 1.5, argnums=(0, 1))
    frame = walk.frame()
    steps = frame["steps"]
    n = len(steps)
    boxes = {(b["name"], b["first"], b["last"]) for b in frame["boxes"]}
    assert {("scope scaled", 0, 1), ("jit inner", 2, 4)} <= boxes  # forward: scope, jit
    assert any(name == "jit inner" and steps[a]["kind"] == "backward" for name, a, _ in boxes)
    stops = n - sum(b - a for _, a, b in boxes)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("about:blank")
    page.evaluate(BOXED, [module_source("steps_player"), {"frame": frame, "current": 0}])

    seen = page.evaluate(SEEN)  # the scope, closed: one step
    assert seen["current"] == 0 and seen["box"] == "scope scaled"
    assert (
        seen["counter"] == f"step 1 / {stops}" and "scope scaled (closed: 2 steps)" in seen["words"]
    )
    assert {seen["marks"][steps[i]["node"]] for i in (0, 1)} == {"current"}
    assert steps[1]["text"] in seen["words"]  # its last step's words: what it ends with
    page.locator(".jaxlab-sp-next").click()  # ▶ passes the whole box: the jit, closed
    seen = page.evaluate(SEEN)
    assert seen["current"] == 2 and seen["box"] == "jit inner"
    assert {seen["marks"][steps[i]["node"]] for i in (2, 3, 4)} == {"current"}
    assert {seen["marks"][steps[i]["node"]] for i in (0, 1)} == {"done-forward"}
    assert seen["items"][:4] == [0, 2, 5, 6]  # the list: one line a closed box
    page.locator(".jaxlab-sp-open").click()  # opened: its steps one by one
    seen = page.evaluate(SEEN)
    assert seen["current"] == 2 and seen["box"] == "" and f"Step 3 of {n}" in seen["words"]
    assert seen["marks"][steps[3]["node"]] == "pending" and steps[2]["text"] in seen["words"]
    for i in (3, 4, 5):
        page.locator(".jaxlab-sp-next").click()
        seen = page.evaluate(SEEN)
        assert seen["current"] == i and steps[i]["text"] in seen["words"], i
    assert seen["counter"] == f"step 5 / {stops + 2}"  # the scope still one step
    # The step producing ∂g/∂x sits inside a closed box (the scope's backward run): the
    # jump opens that box and shows the very step.
    w = frame["targets"]["∂g/∂x"]
    assert any(a < w <= b for _, a, b in boxes), (w, boxes)
    page.locator(".jaxlab-sp-jump").select_option(label="∂g/∂x")
    seen = page.evaluate(SEEN)
    assert seen["current"] == w and seen["box"] == "" and steps[w]["text"] in seen["words"]
    page.locator(".jaxlab-sp-close").click()  # closed again around the step shown
    seen = page.evaluate(SEEN)
    assert seen["box"] == "scope scaled" and seen["current"] < w
    page.locator(".jaxlab-sp-boxes").click()  # every box open: every step a stop
    seen = page.evaluate(SEEN)
    assert seen["items"] == list(range(n)) and seen["counter"].endswith(f"/ {n}")
    page.locator(".jaxlab-sp").focus()
    page.keyboard.press("End")
    assert page.evaluate(SEEN)["current"] == n - 1
    page.wait_for_function(f"() => window.__written.at(-1) === {n - 1}")  # the index written
    assert errors == []


# ---------------------------------------------------------------- a long scan
SCAN_SOURCE = """\
def h(x):
    def body(c, _):
        return jnp.sin(c) * 1.1, c

    out, _ = jax.lax.scan(body, x, None, length=12)
    return out
"""


def test_a_long_scans_iteration_is_chosen_in_the_page_and_stepped_by_the_kernel(
    open_notebook: Any, tmp_path: Path
) -> None:
    """Past five iterations a scan steps the one chosen: the page's control asks the
    kernel, which steps the walk again there; the page then plays that iteration's
    numbers (checked against the walk made here at that iteration)."""
    import runpy

    import jaxlab

    path = tmp_path / "scan_source.py"
    path.write_text("import jax\nimport jax.numpy as jnp\n" + SCAN_SOURCE)
    want = jaxlab.grad_steps(runpy.run_path(str(path))["h"], 0.7, iteration=9).frame()
    first = next(i for i, s in enumerate(want["steps"]) if s["iteration"] == 9)
    cells = [
        "%load_ext jaxlab\nimport jax, jax.numpy as jnp\n" + SCAN_SOURCE + "x = 0.7\n",
        "%grad --steps h(x)",
    ]
    notebook = open_notebook("steps_scan.ipynb", cells)
    notebook.run_all()
    _wait_step(notebook, 0)
    words = notebook.locator(".jaxlab-sp-loops").inner_text()
    assert "0, 1, 2, 3, 4 of 12" in words and "11, 10, 9, 8, 7 of 12" in words
    choose = notebook.locator(".jaxlab-sp-iteration")
    choose.fill("9")
    choose.dispatch_event("change")
    notebook.locator(".jaxlab-sp-loops").filter(has_text="9 of 12").first.wait_for()
    shown = _wait_step(notebook, first)  # the kernel's new walk, opened on iteration 9
    box = next(b for b in want["boxes"] if b["first"] == first)  # the body, closed
    assert "iteration 9" in box["name"] and f"{box['name']} (closed" in shown["words"]
    assert notebook.locator(".jaxlab-sp-item").count() == len(want["steps"])
    notebook.locator(".jaxlab-sp-open").click()
    words = notebook.locator(".jaxlab-sp-words")
    words.filter(has_text=want["steps"][first]["text"]).wait_for()
    notebook.locator(".jaxlab-sp-next").click()
    shown = _wait_step(notebook, first + 1)
    assert want["steps"][first + 1]["text"] in shown["words"]
    assert want["steps"][first + 1]["iteration"] == 9


def test_a_program_over_2000_equations_plays_box_by_box_and_a_box_opens(page: Any) -> None:
    """The user's top-level structure first: each ``layer k`` call one closed step; a box
    opens into its equations; the step producing ∂f/∂w is found inside its box."""
    import jax.numpy as jnp

    import jaxlab
    from jaxlab.widgets._base import module_source

    def layer(h: Any, w: Any) -> Any:
        return jnp.tanh(h * w + 0.1)

    def f(x: Any, w: Any) -> Any:
        h = x
        for _ in range(200):
            h = layer(h, w)
        return jnp.sum(h)

    walk = jaxlab.grad_steps(f, jnp.ones(3), jnp.full(3, 0.9), argnums=(0, 1))
    assert walk.n_equations > 2000
    frame = walk.frame()
    steps, boxes = frame["steps"], frame["boxes"]
    stops = len(steps) - sum(b["last"] - b["first"] for b in boxes)
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("about:blank")
    page.evaluate(BOXED, [module_source("steps_player"), {"frame": frame, "current": 0}])
    seen = page.evaluate(SEEN)
    assert seen["box"] == "layer 0" and seen["counter"] == f"step 1 / {stops}"
    assert "layer 0 (closed:" in seen["words"]
    page.locator(".jaxlab-sp-next").click()
    seen = page.evaluate(SEEN)
    assert seen["box"] == "layer 1" and seen["current"] == boxes[1]["first"]
    page.locator(".jaxlab-sp-open").click()  # layer 1's equations, one a step
    page.locator(".jaxlab-sp-next").click()
    seen = page.evaluate(SEEN)
    assert seen["current"] == boxes[1]["first"] + 1 and seen["box"] == ""
    assert steps[seen["current"]]["text"] in seen["words"]
    w = frame["targets"]["∂f/∂w"]
    page.locator(".jaxlab-sp-jump").select_option(label="∂f/∂w")
    seen = page.evaluate(SEEN)
    assert seen["current"] == w and steps[w]["text"] in seen["words"]
    assert errors == []


def test_forward_mode_plays_tangents_and_says_the_passes_a_jacobian_needs(
    page: Any, tmp_path: Path
) -> None:
    """``--jvp``'s walk in the page: tangent steps done in their own colour (green), the
    title saying n inputs → n forward passes, m outputs → m reverse passes."""
    import jaxlab
    from jaxlab.widgets._base import asset, module_source

    walk = jaxlab.grad_steps(_f(tmp_path), 0.5, 1.2, argnums=(0, 1), mode="forward")
    frame = walk.frame()
    steps = frame["steps"]
    assert frame["passes_note"] == "2 inputs → 2 forward passes, 1 output → 1 reverse pass"
    page.goto("about:blank")
    state = {"frame": frame, "current": 0}
    page.evaluate(BOXED, [module_source("steps_player"), state, asset("steps_player.css")])
    title = page.locator(".jaxlab-sp-title").inner_text()
    assert "forward mode (tangents)" in title and frame["passes_note"] in title
    page.locator(".jaxlab-sp").focus()
    page.keyboard.press("End")
    seen = page.evaluate(SEEN)
    last = len(steps) - 1
    assert seen["current"] == last and steps[last]["text"] in seen["words"]
    assert "tangent (forward mode)" in seen["words"]
    done = {
        seen["marks"][s["node"]]
        for i, s in enumerate(steps[:last])
        if s["kind"] == "tangent" and all(t["node"] != s["node"] for t in steps[i + 1 :])
    }
    assert done == {"done-tangent"}
    colour = page.evaluate(
        "() => getComputedStyle(document.querySelector("
        "'.jaxlab-sp-done-tangent ellipse, .jaxlab-sp-done-tangent polygon, "
        ".jaxlab-sp-done-tangent path')).stroke"
    )
    assert colour == "rgb(26, 127, 55)"  # the tangent green, not the backward red
