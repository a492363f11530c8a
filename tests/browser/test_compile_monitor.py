"""CompileMonitor in JupyterLab: it renders, follows a recompilation, stays offline."""

from __future__ import annotations

from typing import Any

import nbformat
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

KERNEL_IDLE = """() => {
  const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const kernel = panel && panel.sessionContext && panel.sessionContext.session
    && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle';
}"""

RUN_CELL = """async (index) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  panel.content.activeCellIndex = index;
  await app.commands.execute('notebook:run-cell');
}"""


def write_notebook(path: Any) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in CELLS]
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    nbformat.write(nb, str(path))


def row(page: Any, name: str) -> Any:
    return page.locator(f'.jaxlab-cm tr[data-function="{name}"]')


def test_compile_monitor_renders_and_follows_recompilation(lab: Any, page: Any) -> None:
    write_notebook(lab.root / "monitor.ipynb")
    page.goto(lab.notebook_url("monitor.ipynb"))
    page.wait_for_function(KERNEL_IDLE)

    page.evaluate(RUN_CELL, 0)
    page.wait_for_function(KERNEL_IDLE)
    page.evaluate(RUN_CELL, 1)
    f = row(page, "f")
    f.wait_for()  # the widget rendered (not the static fallback: that has no data-function)
    assert f.locator(".jaxlab-cm-count").inner_text() == "1"
    assert f.locator(".jaxlab-cm-bar").count() == 1
    assert f.locator(".jaxlab-cm-reason").count() == 0
    assert "compilations of" in page.locator(".jaxlab-cm-summary").inner_text()

    page.evaluate(RUN_CELL, 2)  # a new shape: f compiles again and the widget follows
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
