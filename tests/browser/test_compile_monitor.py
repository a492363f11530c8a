"""CompileMonitor in JupyterLab: it renders, follows a recompilation, filters the user's
functions, keeps its height, links counts to reasons, stays offline."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser

CELLS = [
    "%load_ext jaxlab\n"
    "import jax, jax.numpy as jnp\n"
    "def f(x):\n"
    "    return jnp.sin(x).sum()\n"
    "jax.jit(f)(jnp.ones(3))",
    "%compile_log",
    "jax.jit(f)(jnp.ones(4))",
    # forty functions of the user's: the widget keeps its height and scrolls
    "for i in range(40):\n"
    "    g = lambda x, i=i: x * i\n"
    "    g.__name__ = g.__qualname__ = f'g{i}'\n"
    "    jax.jit(g)(jnp.ones(2))",
]


def row(page: Any, name: str) -> Any:
    return page.locator(f'.jaxlab-cm tr[data-function="{name}"]')


def test_compile_monitor_renders_and_follows_recompilation(open_notebook: Any, page: Any) -> None:
    notebook = open_notebook("monitor.ipynb", CELLS)
    notebook.run(0)
    notebook.wait_idle()
    notebook.run(1)
    f = row(page, "f")
    f.wait_for()  # the widget rendered (not the static fallback: that has no data-function)
    assert f.locator(".jaxlab-cm-count").inner_text() == "1"
    assert f.locator(".jaxlab-cm-bar").count() == 1
    assert f.locator(".jaxlab-cm-reason").count() == 0
    assert "compilations of" in page.locator(".jaxlab-cm-summary").inner_text()

    notebook.run(2)  # a new shape: f compiles again and the widget follows
    page.wait_for_function(
        """() => {
          const c = document.querySelector('.jaxlab-cm tr[data-function="f"] .jaxlab-cm-count');
          return c && c.textContent === '2';
        }"""
    )
    assert f.locator(".jaxlab-cm-bar").count() == 2
    assert f.locator(".jaxlab-cm-bar.jaxlab-cm-recompile").count() == 1
    reason = f.locator(".jaxlab-cm-reason").inner_text()
    assert "x: f32[3] → f32[4]" in reason

    # "my functions only", on by default: jnp.ones's eager broadcast_in_dim is hidden
    mine = page.locator(".jaxlab-cm-filter input")
    assert mine.is_checked()
    assert row(page, "broadcast_in_dim").count() == 0
    mine.uncheck()
    row(page, "broadcast_in_dim").first.wait_for()
    mine.check()
    page.wait_for_function(
        "() => !document.querySelector('.jaxlab-cm tr[data-function=\"broadcast_in_dim\"]')"
    )
    legend = page.locator(".jaxlab-cm-legend").inner_text()
    assert all(w in legend for w in ("trace", "lower", "compile", "other cell time", "recompiled"))

    # the recompile count leads to the reasons
    f.locator(".jaxlab-cm-link").click()
    assert "jaxlab-cm-flash" in (f.locator(".jaxlab-cm-reasons").get_attribute("class") or "")

    notebook.run(3)  # forty more functions: newest first, and the box keeps its height
    row(page, "g39").wait_for()
    names = page.locator(".jaxlab-cm tr.jaxlab-cm-row").evaluate_all(
        "rows => rows.map(r => r.dataset.function)"
    )
    assert names[:2] == ["g39", "g38"] and len(names) >= 41
    box = page.locator(".jaxlab-cm").bounding_box()
    assert box is not None and box["height"] < 520  # 41 rows would be over 900 px
    scroller = page.locator(".jaxlab-cm-scroll")
    assert scroller.evaluate("el => el.scrollHeight > el.clientHeight")

    assert page.requests.urls, "no request was recorded"
    assert page.requests.outside() == []
