"""KeyLineage in JupyterLab: it renders the forest, marks reuse, and a click shows lines."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.browser

CELLS = [
    "%load_ext jaxlab\n%keys on\nimport jax, warnings\nwarnings.simplefilter('ignore')",
    "k = jax.random.key(0)\n"
    "a, b = jax.random.split(k)\n"
    "x = jax.random.normal(a, (3,))\n"
    "y = jax.random.uniform(a, (2,))",
    "%keys",
]


def test_key_lineage_renders_and_a_click_shows_the_source_line(
    open_notebook: Any, page: Any
) -> None:
    notebook = open_notebook("keys.ipynb", CELLS)
    for i in range(len(CELLS)):
        notebook.run(i)
        notebook.wait_idle()
    row = page.locator('.jaxlab-kl-row[data-id="k1"]')  # the split's first key
    row.wait_for()  # the widget rendered (the static list has no data-id)
    assert row.locator(".jaxlab-kl-label").inner_text() == "split [0]"
    assert "jaxlab-kl-reused" in (row.locator(".jaxlab-kl-label").get_attribute("class") or "")
    assert "1 reuse" in page.locator(".jaxlab-kl-summary").inner_text()
    assert page.locator(".jaxlab-kl-consume").count() == 2  # normal and uniform

    row.click()
    detail = page.locator(".jaxlab-kl-detail")
    text = detail.inner_text()
    assert "Made at In[2], line 2" in text
    assert "a, b = jax.random.split(k)" in text
    assert "Consumed by normal float32[3] at In[2], line 3" in text
    assert "y = jax.random.uniform(a, (2,))" in text

    page.locator('.jaxlab-kl-row[data-id="k0"] .jaxlab-kl-toggle').click()  # collapse the seed
    page.wait_for_function(
        "() => !document.querySelector('.jaxlab-kl-row[data-id=\"k1\"]')?.offsetParent"
    )
    assert page.requests.outside() == []
