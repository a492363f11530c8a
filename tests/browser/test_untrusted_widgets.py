"""An untrusted notebook's saved widgets do not run in the lab `make lab` and Binder start.

A forged notebook holds one saved anywidget model per jaxlab widget class, each with an
ES module that counts its own execution (``window.__forged``) and CSS that restyles the
page (a custom property on the root) and hides that class's twins, as a shared notebook
could. JupyterLab's widget manager restores saved models whatever the trust; the server
extension ``jaxlab_server`` (enabled by the environment's config, which
``tools/kernel_config.py`` writes for `make lab` and Binder's postBuild, and which this
session's lab reads as they do) sends an untrusted notebook without them. Opened
untrusted: no execution, no restyle, every twin shows. Trusted on the server (the trust
endpoint), or in the page ("Trust Notebook", which saves), and reopened: the saved models
are restored (their module runs: it is the user's to trust).
"""

from __future__ import annotations

import importlib.util
import json
import urllib.request
from pathlib import Path
from typing import Any

import anywidget
import nbformat
import pytest
from conftest import CLOSE, PANEL_ID, Lab, Notebook

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parents[2]
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# One forged model per widget jaxlab ships (one ES module each in widgets/static/).
CLASSES = sorted(p.stem for p in (ROOT / "widgets" / "static").glob("*.js"))
FORGED = "window.__forged || 0"
RESTYLED = "getComputedStyle(document.documentElement).getPropertyValue('--jaxlab-forged')"


def _forged_notebook() -> Any:
    """One cell per jaxlab widget class: its live view (a forged saved model) and its
    twin, as a kernel displays them."""
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    models: dict[str, Any] = {}
    for i, name in enumerate(CLASSES):
        twin_class = f"jaxlab-twin-{name.replace('_', '-')}"
        model_id, layout_id = f"forged{i}", f"layout{i}"
        models[layout_id] = {
            "model_name": "LayoutModel",
            "model_module": "@jupyter-widgets/base",
            "model_module_version": "2.0.0",
            "state": {},
        }
        models[model_id] = {
            "model_name": anywidget.AnyWidget._model_name.default_value,
            "model_module": anywidget.AnyWidget._model_module.default_value,
            "model_module_version": anywidget.AnyWidget._model_module_version.default_value,
            "state": {
                "_anywidget_id": f"jaxlab.widgets.{name}",
                # Distinct text per model: each is its own module, each import counts.
                "_esm": (
                    f"/* {name} */ window.__forged = (window.__forged || 0) + 1;\n"
                    "export default { render({ el }) { el.textContent = 'FORGED'; } };\n"
                ),
                "_css": (
                    f":root {{ --jaxlab-forged: {name}; }}\n"
                    f".{twin_class}, .jaxlab-twin {{ display: none !important; }}\n"
                ),
                "layout": f"IPY_MODEL_{layout_id}",
            },
        }
        view = nbformat.v4.new_output(
            "display_data",
            data={
                WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": model_id},
                "text/plain": "",
            },
        )
        twin = nbformat.v4.new_output(
            "display_data",
            data={
                "text/html": f'<div class="jaxlab-twin {twin_class}">twin of {name}</div>',
                "text/plain": f"<{name}>",
            },
        )
        nb.cells.append(nbformat.v4.new_code_cell(f"# {name}", outputs=[view, twin]))
    nb.metadata["widgets"] = {
        WIDGET_STATE: {"version_major": 2, "version_minor": 0, "state": models}
    }
    return nb


def _open_untrusted(lab: Lab, page: Any, name: str) -> None:
    """Write the forged notebook (unsigned), open it, and wait for its kernel. The page
    must have been sent the notebook without its widget state: the manager restores what
    it is given, so nothing given means nothing to wait for."""
    nbformat.write(_forged_notebook(), str(lab.root / name))
    sent: list[Any] = []
    page.on("response", lambda r: sent.append(r) if f"/api/contents/{name}" in r.url else None)
    _open(lab, page, name)
    Notebook(page, name).wait_idle()
    notebooks = [r.json() for r in sent if r.request.method == "GET" and r.ok]
    contents = [
        m["content"] for m in notebooks if isinstance(m, dict) and isinstance(m["content"], dict)
    ]
    assert contents, "the page read no notebook content"
    assert all("widgets" not in c["metadata"] for c in contents)
    assert all(c["cells"][0]["metadata"]["trusted"] is False for c in contents)


def _open(lab: Lab, page: Any, name: str) -> None:
    page.goto(lab.notebook_url(name))
    page.wait_for_function(PANEL_ID, arg=name)


def _in_panel(page: Any, name: str, css: str) -> Any:
    panel = page.evaluate(PANEL_ID, name)
    return page.locator(f"#{panel} {css}")


def _close_and_remove(lab: Lab, page: Any, name: str) -> None:
    """Leave no forged notebook for a later test's restored tabs to open."""
    page.evaluate(CLOSE, name)
    (lab.root / name).unlink(missing_ok=True)


def test_the_lab_reads_the_environments_config_that_make_lab_and_binder_write(lab: Lab):
    spec = importlib.util.spec_from_file_location(
        "kernel_config", ROOT / "tools" / "kernel_config.py"
    )
    assert spec is not None and spec.loader is not None
    config = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(config)
    written = config.server_config_path()  # this environment's, as `make setup` wrote it
    assert json.loads(written.read_text()) == config.SERVER_CONFIG, "run `make setup`"
    assert "jaxlab: untrusted notebooks reach the page without widget state" in (
        lab.log.read_text()
    )


def test_an_untrusted_notebook_runs_none_of_its_saved_widgets(lab: Lab, page: Any):
    name = "forged_untrusted.ipynb"
    try:
        _open_untrusted(lab, page, name)
        assert page.evaluate(FORGED) == 0  # no saved module ran
        assert page.evaluate(RESTYLED).strip() == ""  # no saved CSS reached the page
        twins = _in_panel(page, name, ".jaxlab-twin")
        assert twins.count() == len(CLASSES)
        for i, cls in enumerate(CLASSES):  # every output shows its twin, none is blank
            assert twins.nth(i).is_visible(), cls
            assert twins.nth(i).inner_text() == f"twin of {cls}"
        saved = nbformat.read(str(lab.root / name), as_version=4)
        assert len(saved.metadata.widgets[WIDGET_STATE]["state"]) == 2 * len(CLASSES)
    finally:
        _close_and_remove(lab, page, name)


def test_trusted_on_the_server_the_notebook_restores_its_widgets(lab: Lab, page: Any):
    name = "forged_server_trust.ipynb"
    try:
        _open_untrusted(lab, page, name)
        assert page.evaluate(FORGED) == 0
        request = urllib.request.Request(
            f"{lab.url}/api/contents/{name}/trust?token={lab.token}", method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as answer:
            assert answer.status == 201
        _open(lab, page, name)  # reopened (a new page): the saved models come with it
        page.wait_for_function(f"({FORGED}) >= {len(CLASSES)}")
        assert page.evaluate(RESTYLED).strip() in CLASSES
    finally:
        _close_and_remove(lab, page, name)


# Started, not awaited: the command asks in a dialog, which the test then answers, and
# saves the notebook when trusted; window.__trustSaved says that save completed.
TRUST_IN_PAGE = """(name) => {
  const app = window.jupyterapp;
  for (const w of app.shell.widgets('main')) {
    if (w.context && w.context.path === name) {
      app.shell.activateById(w.id);
      window.__trustSaved = false;
      w.context.saveState.connect((_, state) => {
        if (state === 'completed') { window.__trustSaved = true; }
      });
      app.commands.execute('notebook:trust');
      return true;
    }
  }
  return false;
}"""


def test_trusted_in_the_page_the_notebook_restores_its_widgets(lab: Lab, page: Any):
    name = "forged_page_trust.ipynb"
    try:
        _open_untrusted(lab, page, name)
        assert page.evaluate(FORGED) == 0
        assert page.evaluate(TRUST_IN_PAGE, name)
        page.get_by_role("button", name="Confirm Trusting this notebook").click()
        page.wait_for_function("window.__trustSaved === true")
        # The page never had the widget state; its save kept it on disk, now signed.
        saved = nbformat.read(str(lab.root / name), as_version=4)
        assert len(saved.metadata.widgets[WIDGET_STATE]["state"]) == 2 * len(CLASSES)
        assert page.evaluate(FORGED) == 0  # trusting alone restored nothing in this page
        _open(lab, page, name)
        page.wait_for_function(f"({FORGED}) >= {len(CLASSES)}")
    finally:
        _close_and_remove(lab, page, name)
