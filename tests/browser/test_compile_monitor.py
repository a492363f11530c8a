"""CompileMonitor in JupyterLab: it renders, follows a recompilation, stays offline."""

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

    assert page.requests.urls, "no request was recorded"
    assert page.requests.outside() == []
