"""Each browser test starts from a clean lab: the fixture that follows every test that used
the lab (tests/browser/conftest.py) shuts its kernels down and forgets its workspace, so
that no later page restores, reconnects to or draws the earlier tests' notebooks."""

import time
from typing import Any

import pytest
from conftest import Lab, _api, clean_lab

pytestmark = pytest.mark.browser


def _saved_tabs(lab: Lab) -> str:
    return "".join(p.read_text() for p in lab.workspaces.glob("*.jupyterlab-workspace"))


def test_clean_lab_shuts_the_kernels_down_and_forgets_the_tabs(
    lab: Lab, page: Any, open_notebook: Any
):
    open_notebook("cleanup_a.ipynb", ["a = 1"]).run_all()
    open_notebook("cleanup_b.ipynb", ["b = 2"]).run_all()
    sessions = {s["path"] for s in _api(lab, "GET", "/api/sessions")}
    assert {"cleanup_a.ipynb", "cleanup_b.ipynb"} <= sessions
    deadline = time.monotonic() + 60  # JupyterLab saves its layout a moment after a change
    while "notebook:cleanup_b.ipynb" not in _saved_tabs(lab) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "notebook:cleanup_a.ipynb" in _saved_tabs(lab)
    assert "notebook:cleanup_b.ipynb" in _saved_tabs(lab)
    page.goto("about:blank")  # the app gone, nothing saves the layout again

    clean_lab(lab)

    assert _api(lab, "GET", "/api/sessions") == []
    assert _api(lab, "GET", "/api/kernels") == []
    assert _saved_tabs(lab) == ""
