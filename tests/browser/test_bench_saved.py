"""A saved %bench output reopened without its kernel: the progress bar's widget is gone,
and ipywidgets' "model not found" note for it is hidden above the result (issue 18, item 6).

The bar is tqdm's widget, closed when the measurement ends; the saved notebook keeps its
view output, whose model no longer exists anywhere once the notebook is reopened. The
result's own HTML carries the rule that hides that note, as a widget's static twin does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from conftest import PANEL_ID

pytestmark = pytest.mark.browser

NAME = "saved_bench.ipynb"
CELLS = [
    "%load_ext jaxlab\n"
    "import jax, jax.numpy as jnp\n"
    "f = jax.jit(lambda a: a @ a)\n"
    "x = jnp.ones((256, 256))",
    # long enough for the progress bar (shown when the rounds left take over 1 s)
    "%bench -n 1000 -r 4 f(x)",
]
WIDGET = "application/vnd.jupyter.widget-view+json"


def test_reopened_bench_output_hides_the_missing_progress_bar_model(
    lab: Any, open_notebook: Any, page: Any
) -> None:
    notebook = open_notebook(NAME, CELLS)
    notebook.run_all()
    notebook.locator(".jaxlab-bench").first.wait_for(state="visible")
    assert notebook.save()
    outputs = json.loads((lab.root / NAME).read_text())["cells"][1]["outputs"]
    kinds = [next(iter(out.get("data", {"stream": ""}))) for out in outputs]
    assert WIDGET in kinds  # the progress bar's view was saved (the case to hide)

    assert notebook.close()
    page.goto(lab.notebook_url(NAME))
    page.wait_for_function(PANEL_ID, arg=NAME)
    result = notebook.locator(".jaxlab-bench").first
    result.wait_for(state="visible")
    assert "per call, each awaited" in result.inner_text()
    missing = notebook.locator(".jp-OutputArea").get_by_text(
        "Error displaying widget: model not found"
    )
    missing.wait_for(state="attached")  # ipywidgets did not find the bar's model ...
    assert not missing.is_visible()  # ... and the result's rule hid its note
