"""Explorer in JupyterLab (issue 35): a slider moved by the keyboard updates the answer and
its derivative to the analytic values at the slider's value, a burst of moves ends on the
last one, the dark theme reads, text is at least 12 px and the view fits 1280x720; saved
and reopened without its kernel, the notebook shows the last state and says the sliders
need a running kernel."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import PANEL_ID

pytestmark = pytest.mark.browser

NAME = "explorer.ipynb"
CELLS = [
    "%load_ext jaxlab\n"
    "import jax.numpy as jnp, jaxlab\n"
    "from jaxlab.widgets import Explorer\n"
    "def period(g=9.81, length=1.0):\n"
    "    return 2 * jnp.pi * jnp.sqrt(length / g)\n"
    "view = jaxlab.explore(period, g=(1.0, 20.0), length=1.0)",
    "Explorer(view)",
]
POSITIONS = 1000  # the page's slider positions along a range (static/explorer.js)

SMALLEST_TEXT = """(roots) => {
  let smallest = Infinity, what = '';
  for (const el of roots.flatMap(root => [...root.querySelectorAll('*')])) {
    const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own || !el.getClientRects().length) continue;
    const px = parseFloat(getComputedStyle(el).fontSize);
    if (px < smallest) { smallest = px; what = el.className.baseVal ?? el.className; }
  }
  return [smallest, what];
}"""

# WCAG contrast of each element's text against the background it is drawn on.
CONTRAST = """(els) => els.map((el) => {
  const rgb = (css) => css.match(/[\\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => {
    const [r, g, b] = c.map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b;
  };
  let back = el;
  const clear = (c) => c === 'transparent' || c.endsWith(', 0)');
  while (back.parentElement && clear(getComputedStyle(back).backgroundColor)) {
    back = back.parentElement;
  }
  const a = lum(rgb(getComputedStyle(el).color));
  const b = lum(rgb(getComputedStyle(back).backgroundColor));
  return [(Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05), el.className];
})"""


def _g_at(position: int) -> float:
    return 1.0 + (20.0 - 1.0) * position / POSITIONS


def _shown(view: Any) -> tuple[float, float, float]:
    """The page's g (its readout), period (the big value) and d period / d g (its words)."""
    g = float(view.locator('.jaxlab-ex-control[data-name="g"] .jaxlab-ex-readout').inner_text())
    value = float(view.locator(".jaxlab-ex-value").inner_text())
    words = view.locator(".jaxlab-ex-words").inner_text()
    match = re.fullmatch(r"d period / d g = (\S+) per unit", words)
    assert match, words
    return g, value, float(match.group(1))


def _check_analytic(g: float, value: float, slope: float) -> None:
    period = 2 * math.pi * math.sqrt(1.0 / g)
    assert value == pytest.approx(period, rel=2e-3)  # 4 significant figures shown
    assert slope == pytest.approx(-period / (2 * g), rel=2e-3)  # dT/dg = -T/(2g)


def test_a_slider_moves_the_answer_and_its_derivative_and_the_saved_view_keeps_the_last(
    lab: Any, open_notebook: Any, page: Any, tmp_path: Path
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    notebook = open_notebook(NAME, CELLS)
    notebook.run_all()
    view = notebook.locator(".jaxlab-ex")
    view.wait_for()
    slider = view.locator('.jaxlab-ex-control[data-name="g"] input[type="range"]')
    assert _shown(view)[0] == 9.81

    # one move: the key to the top of the range
    slider.focus()
    page.keyboard.press("End")
    notebook.locator('.jaxlab-ex[data-seq="1"]').wait_for()
    g, value, slope = _shown(view)
    assert g == 20.0
    _check_analytic(g, value, slope)

    # a burst of 40 moves, pressed as fast as the keyboard goes: the view ends on the last
    for _ in range(40):
        page.keyboard.press("ArrowLeft")
    last = _g_at(POSITIONS - 40)
    page.wait_for_function(
        """([el, want]) => Math.abs(parseFloat(el.textContent) - want) < 1e-9
            && el.closest('.jaxlab-ex').dataset.seq === el.closest('.jaxlab-ex').dataset.sent""",
        arg=[
            view.locator('.jaxlab-ex-control[data-name="g"] .jaxlab-ex-readout').element_handle(),
            float(f"{last:.4g}"),
        ],
    )
    g, value, slope = _shown(view)
    assert g == pytest.approx(last, rel=1e-3)
    _check_analytic(last, value, slope)
    # the sensitivity bar: one row per slider, d period / d g negative, d period / d length
    # positive
    assert view.locator(".jaxlab-ex-barrow .jaxlab-ex-neg").count() == 1
    assert view.locator(".jaxlab-ex-barrow .jaxlab-ex-pos").count() == 1

    # readable at 1280x720: no text under 12 px, nothing wider than the output area
    smallest, what = view.evaluate_all(SMALLEST_TEXT)
    assert smallest >= 12, what
    overflow = view.evaluate("el => el.scrollWidth - el.clientWidth")
    assert overflow <= 1
    box = view.bounding_box()
    assert box is not None and box["width"] <= 1280

    # the dark theme: the value, the words and the names read at 4.5:1 or more
    page.evaluate(
        "() => window.jupyterapp.commands.execute('apputils:change-theme', "
        "{theme: 'JupyterLab Dark'})"
    )
    try:
        page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
        page.wait_for_timeout(500)  # the theme's stylesheet applied
        texts = view.locator(
            ".jaxlab-ex-value, .jaxlab-ex-words, .jaxlab-ex-name, .jaxlab-ex-readout"
        )
        for ratio, what in texts.evaluate_all(CONTRAST):
            assert ratio >= 4.5, (ratio, what)
    finally:
        page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme', "
            "{theme: 'JupyterLab Light'})"
        )

    # Saved, closed, reopened without a kernel: the twin shows the last state.
    twin = notebook.locator(".jaxlab-twin")
    assert twin.count() == 1 and not twin.is_visible()
    want = f"{last:.4g}"
    page.wait_for_function(  # the twin is rewritten within its interval after the moves
        "([el, want]) => el.textContent.includes(want)", arg=[twin.element_handle(), want]
    )
    assert notebook.save()
    assert notebook.close()
    page.goto(lab.notebook_url(NAME))
    page.wait_for_function(PANEL_ID, arg=NAME)
    twin = notebook.locator(".jaxlab-twin")
    twin.wait_for(state="visible")
    shown = twin.inner_text()
    assert "the sliders need a running kernel" in shown
    assert want in shown and f"{2 * math.pi * math.sqrt(1 / last):.4g}" in shown
    assert notebook.locator(".jaxlab-ex").count() == 0  # no live view without a kernel
    assert page.requests.outside() == []

    # Exported to HTML and opened with the network blocked: the same last state and words.
    html = tmp_path / "explorer.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "jupyter",
            "nbconvert",
            "--to",
            "html",
            "--output",
            str(html.with_suffix("")),
            str(lab.root / NAME),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    local = ("file:", "data:")
    page.route(
        "**/*",
        lambda route: route.continue_() if route.request.url.startswith(local) else route.abort(),
    )
    page.goto(html.as_uri())
    exported = page.locator(".jaxlab-twin")
    exported.first.wait_for(state="visible")
    shown = exported.inner_text()
    assert "the sliders need a running kernel" in shown and want in shown


# A derivative rule planted wrong (custom_jvp: d sqrt(x) = t / sqrt(x), twice the truth),
# a fall time that is NaN below a height, a heat map and a line to fit: one notebook.
PLANTED = "explorer_planted.ipynb"
PLANTED_CELLS = [
    "%load_ext jaxlab\n"
    "import jax, jax.numpy as jnp, jaxlab\n"
    "@jax.custom_jvp\n"
    "def root(x):\n"
    "    return jnp.sqrt(x)\n"
    "@root.defjvp\n"
    "def root_jvp(primals, tangents):\n"
    "    (x,), (t,) = primals, tangents\n"
    "    return jnp.sqrt(x), t / jnp.sqrt(x)  # planted: the rule is t / (2 sqrt(x))\n"
    "def period(g=9.81, length=1.0):\n"
    "    return 2 * jnp.pi * root(length / g)\n"
    "planted = jaxlab.explore(period, g=(1.0, 20.0), length=1.0)",
    "planted",  # a view at the end of a cell shows the live Explorer
    "def fall_time(h=1.0, g=9.81):\n"
    "    return jnp.sqrt(2 * h / g - 0.1)\n"
    "jaxlab.explore(fall_time, h=(0.0, 2.0), g=9.81)",
    "def series(x=0.5, n=3, negate=False):\n"
    "    total = sum(x**k for k in range(n))\n"
    "    return -total if negate else total\n"
    "jaxlab.explore(series, x=(0.0, 0.9), n=3, negate=False)",
    "def field(k=1.0):\n"
    "    t = jnp.linspace(0.0, 1.0, 30)\n"
    "    return jnp.sin(k * jnp.outer(t, t))\n"
    "jaxlab.explore(field, k=(0.5, 3.0))",
    "ts = jnp.linspace(0.0, 1.0, 20)\n"
    "def line(a=1.0):\n"
    "    return a * ts\n"
    "jaxlab.explore(line, a=(0.0, 5.0), target=3.0 * ts)",
]


def test_the_drawn_derivative_check_fails_on_a_planted_rule_and_failures_sweeps_fits_draw(
    open_notebook: Any, page: Any
) -> None:
    page.set_viewport_size({"width": 1280, "height": 720})
    notebook = open_notebook(PLANTED, PLANTED_CELLS)
    notebook.run_all()
    views = notebook.locator(".jaxlab-ex")
    views.nth(4).wait_for()
    assert views.count() == 5
    planted, fall, series, heat, fit = (views.nth(i) for i in range(5))

    # The planted rule: the period drawn is right, its drawn derivative is twice the truth,
    # and the check the first test makes on the page's numbers fails on it.
    planted.locator('.jaxlab-ex-control[data-name="g"] input[type="range"]').focus()
    page.keyboard.press("End")
    notebook.locator('.jaxlab-ex[data-seq="1"]').first.wait_for()
    g, value, slope = _shown(planted)
    assert g == 20.0
    assert value == pytest.approx(2 * math.pi * math.sqrt(1 / 20.0), rel=2e-3)
    with pytest.raises(AssertionError):
        _check_analytic(g, value, slope)
    assert slope == pytest.approx(-value / g, rel=2e-3)  # -T/g: the planted rule's number

    # Sweep: 64 values in one call, drawn against g with the current value marked.
    planted.locator('.jaxlab-ex-control[data-name="g"] .jaxlab-ex-sweep').click()
    caption = planted.locator(".jaxlab-ex-caption", has_text="against g (● now")
    caption.wait_for()
    assert planted.locator("svg .jaxlab-ex-curve").count() >= 1
    assert planted.locator("svg .jaxlab-ex-mark").count() >= 1

    # A NaN: the last good answer stays drawn, the slider is flagged, the error names the
    # user's line.
    good = fall.locator(".jaxlab-ex-value").inner_text()
    fall.locator('.jaxlab-ex-control[data-name="h"] input[type="range"]').focus()
    page.keyboard.press("Home")  # h = 0: sqrt(-0.1)
    error = fall.locator(".jaxlab-ex-error")
    page.wait_for_function("(el) => el.textContent.includes('NaN')", arg=error.element_handle())
    assert "sqrt" in error.inner_text() and "last good values" in error.inner_text()
    assert fall.locator('.jaxlab-ex-control.jaxlab-ex-flagged[data-name="h"]').count() == 1
    assert fall.locator(".jaxlab-ex-value").inner_text() == good

    # A checkbox and a static whole number: each change answers, the static's compiles
    # again and the view says so.
    assert series.locator(".jaxlab-ex-value").inner_text() == "1.75"  # 1 + x + x^2 at 0.5
    series.locator('.jaxlab-ex-control[data-name="negate"] input[type="checkbox"]').check()
    series.locator(".jaxlab-ex-value", has_text="-1.75").wait_for()
    field_n = series.locator('.jaxlab-ex-control[data-name="n"] input.jaxlab-ex-static')
    field_n.fill("5")
    field_n.dispatch_event("change")
    series.locator(".jaxlab-ex-value", has_text="-1.938").wait_for()  # -(1 + ... + x^4)
    note = series.locator(".jaxlab-ex-notes", has_text="n = 5 (was 3): compiled again")
    assert note.count() == 1

    # A heat map and its sensitivity map, each with its colour bar and its range's ends.
    maps = heat.locator("img.jaxlab-ex-map")
    assert maps.count() == 2
    bars = heat.locator(".jaxlab-ex-cbar")
    assert bars.count() == 2
    assert bars.nth(0).locator(".jaxlab-ex-caption").all_inner_texts() == ["0.8415", "0"]
    sens_hi, sens_lo = bars.nth(1).locator(".jaxlab-ex-caption").all_inner_texts()
    assert float(sens_lo) == -float(sens_hi) > -1.0  # |d sin(k st)/dk| = |st cos(k st)| < 1
    for img in [*maps.all(), *heat.locator("img.jaxlab-ex-cbar-img").all()]:
        assert img.evaluate("el => el.complete && el.naturalWidth > 0")  # the PNGs decode

    # Fit: the button runs the fit, the slider follows to the target's a = 3, the loss drawn.
    fit.locator(".jaxlab-ex-fitbutton").click()
    page.wait_for_function(
        "(el) => /\\((steps done|converged)\\)/.test(el.textContent)",
        arg=fit.locator(".jaxlab-ex-fit").element_handle(),
    )
    a = float(fit.locator('.jaxlab-ex-control[data-name="a"] .jaxlab-ex-readout').inner_text())
    assert a == pytest.approx(3.0, rel=0.02)
    assert fit.locator("svg .jaxlab-ex-loss").count() == 1

    # Every kind of view at 1280x720: no text under 12 px, none wider than its output area.
    smallest, what = views.evaluate_all(SMALLEST_TEXT)
    assert smallest >= 12, what
    for i in range(5):
        assert views.nth(i).evaluate("el => el.scrollWidth - el.clientWidth") <= 1
    assert page.requests.outside() == []
