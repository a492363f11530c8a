"""The lab's server extension keeps an untrusted notebook's saved widgets from the page.

``jaxlab_server`` (enabled by ``tools/kernel_config.py`` for ``make lab`` and Binder)
makes the server's contents manager send a notebook whose signature does not check
without ``metadata.widgets``, keep that state on disk when the page saves, and sign the
whole file when asked to trust it. These tests drive the contents manager itself with a
notary of their own (secret and signatures in a temporary folder); the browser test
(tests/browser/test_untrusted_widgets.py) opens a forged notebook in JupyterLab.
"""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import json
import logging
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nbformat
import pytest
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from nbformat.sign import MemorySignatureStore, NotebookNotary

from jaxlab_server import _link_jupyter_server_extension
from jaxlab_server.contents import WidgetTrustContentsManager
from jaxlab_server.widget_state import (
    WIDGET_STATE,
    WIDGET_VIEW,
    keep_withheld,
    saved_models,
    shown_models,
    withhold,
)

ROOT = Path(__file__).resolve().parents[1]
FORGED_ESM = "window.__forged = (window.__forged || 0) + 1; export default {};"


def _model(esm: str = FORGED_ESM, **state: Any) -> dict[str, Any]:
    return {
        "model_name": "AnyModel",
        "model_module": "anywidget",
        "model_module_version": "~0.9.*",
        "state": {"_esm": esm, "_css": "body { background: red; }", **state},
    }


def _view(model_id: str) -> dict[str, Any]:
    return nbformat.v4.new_output(
        "display_data",
        data={
            WIDGET_VIEW: {"version_major": 2, "version_minor": 0, "model_id": model_id},
            "text/plain": "",
        },
    )


def _forged() -> Any:
    """A notebook showing widget ``a`` (whose layout is ``lay``) and ``b``; ``orphan`` is
    in the state but shown by no output."""
    nb = nbformat.v4.new_notebook()
    first = nbformat.v4.new_code_cell("a", outputs=[_view("a")])
    second = nbformat.v4.new_code_cell("b", outputs=[_view("b")])
    nb.cells = [first, second, nbformat.v4.new_markdown_cell("text")]
    nb.metadata["widgets"] = {
        WIDGET_STATE: {
            "version_major": 2,
            "version_minor": 0,
            "state": {
                "a": _model(layout="IPY_MODEL_lay"),
                "lay": {"model_name": "LayoutModel", "state": {}},
                "b": _model(),
                "orphan": _model(),
            },
        }
    }
    return nb


# ------------------------------------------------------------------ the state functions


def test_withhold_removes_the_widget_state_and_counts_its_models():
    nb = _forged()
    assert withhold(nb) == 4
    assert "widgets" not in nb.metadata and saved_models(nb) == {}
    assert withhold(nb) == 0  # nothing left to hold back


def test_shown_models_follow_outputs_and_references_inside_the_state():
    nb = _forged()
    assert shown_models(nb, saved_models(nb)) == {"a", "lay", "b"}  # not the orphan
    # An Output widget's state holds outputs: the views inside count as shown.
    models = {
        "out": {"model_name": "OutputModel", "state": {"outputs": [_view("inner")]}},
        "inner": _model(),
    }
    page = nbformat.v4.new_notebook()
    page.cells = [nbformat.v4.new_code_cell("o", outputs=[_view("out")])]
    assert shown_models(page, models) == {"out", "inner"}


def test_references_nested_deeper_than_the_bound_are_not_followed():
    deep: Any = "IPY_MODEL_b"
    for _ in range(500):
        deep = [deep]
    models = {"a": {"state": {"x": deep}}, "b": _model()}
    page = nbformat.v4.new_notebook()
    page.cells = [nbformat.v4.new_code_cell("a", outputs=[_view("a")])]
    assert shown_models(page, models) == {"a"}  # bounded, and never raises


def test_keep_withheld_puts_back_the_models_the_saved_outputs_show_page_wins():
    disk = _forged()
    saved = copy.deepcopy(disk)
    withhold(saved)
    # The page ran the second cell again: its output shows a new model, not "b".
    saved.cells[1].outputs = [_view("new")]
    saved.metadata["widgets"] = {
        WIDGET_STATE: {"version_major": 2, "version_minor": 0, "state": {"new": _model("x")}}
    }
    assert keep_withheld(saved, disk) == 2
    assert set(saved_models(saved)) == {"a", "lay", "new"}  # no b, no orphan
    assert saved_models(saved)["a"] == disk.metadata.widgets[WIDGET_STATE]["state"]["a"]


def test_keep_withheld_writes_the_state_block_when_the_page_saves_none():
    disk = _forged()
    saved = copy.deepcopy(disk)
    withhold(saved)  # saveState off: the page's notebook has no metadata.widgets
    assert keep_withheld(saved, disk) == 3
    block = saved.metadata["widgets"][WIDGET_STATE]
    assert (block["version_major"], block["version_minor"]) == (2, 0)
    assert set(block["state"]) == {"a", "lay", "b"}


def test_keep_withheld_with_nothing_shown_changes_nothing():
    disk = _forged()
    saved = nbformat.v4.new_notebook()
    assert keep_withheld(saved, disk) == 0
    assert "widgets" not in saved.metadata


# ------------------------------------------------------------------ the contents manager


@pytest.fixture
def manager(tmp_path: Path) -> Any:
    def make(cls: type = WidgetTrustContentsManager) -> Any:
        root = tmp_path / "root"
        root.mkdir(exist_ok=True)
        cm = cls(root_dir=str(root))
        data = tmp_path / "data"
        data.mkdir(exist_ok=True)
        cm.notary = NotebookNotary(data_dir=str(data))
        cm.notary.store = MemorySignatureStore()  # no SQLite: the calls run on two threads
        return cm

    return make


def _write(cm: Any, name: str, nb: Any) -> Path:
    path = Path(cm.root_dir) / name
    nbformat.write(nb, str(path))
    return path


def _run(coroutine: Any) -> Any:
    # On a thread of its own: Playwright's sync API (the browser tests, in the same
    # process) leaves an event loop running on the main thread.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _get(cm: Any, name: str) -> Any:
    return _run(cm.get(name))["content"]


def test_jupyter_servers_own_manager_sends_an_untrusted_notebooks_widget_state(manager):
    # The upstream behaviour this extension exists for: trust is checked, the cells are
    # marked untrusted, and the widget state reaches the page all the same.
    cm = manager(AsyncLargeFileManager)
    _write(cm, "forged.ipynb", _forged())
    nb = _get(cm, "forged.ipynb")
    assert nb.cells[0].metadata.trusted is False
    assert set(saved_models(nb)) == {"a", "lay", "b", "orphan"}


def test_an_untrusted_notebook_reaches_the_page_without_widget_state(manager, caplog):
    cm = manager()
    _write(cm, "forged.ipynb", _forged())
    with caplog.at_level(logging.WARNING):
        nb = _get(cm, "forged.ipynb")
    assert nb.cells[0].metadata.trusted is False
    assert "widgets" not in nb.metadata
    assert "4 saved widget models of untrusted notebook forged.ipynb" in caplog.text


def test_a_trusted_notebook_keeps_its_widget_state(manager):
    cm = manager()
    nb = _forged()
    cm.notary.sign(nb)
    _write(cm, "signed.ipynb", nb)
    got = _get(cm, "signed.ipynb")
    assert got.cells[0].metadata.trusted is True
    assert set(saved_models(got)) == {"a", "lay", "b", "orphan"}


def test_trusting_on_the_server_signs_the_whole_file(manager):
    # /api/contents/<path>/trust: signing the copy the page gets (no widget state) would
    # sign a notebook that is not the one on disk, and it would stay untrusted.
    cm = manager()
    _write(cm, "forged.ipynb", _forged())
    _run(cm.trust_notebook("forged.ipynb"))
    got = _get(cm, "forged.ipynb")
    assert got.cells[0].metadata.trusted is True
    assert set(saved_models(got)) == {"a", "lay", "b", "orphan"}


def _page_save(cm: Any, name: str, nb: Any) -> Any:
    _run(cm.save({"type": "notebook", "format": "json", "content": nb}, name))
    return json.loads((Path(cm.root_dir) / name).read_text())


def test_saved_from_the_page_untrusted_the_shown_models_stay_on_disk(manager):
    cm = manager()
    _write(cm, "forged.ipynb", _forged())
    page = _get(cm, "forged.ipynb")
    page.cells[2].source = "edited"  # an edit, no cell run: still untrusted
    disk = _page_save(cm, "forged.ipynb", page)
    assert set(saved_models(disk)) == {"a", "lay", "b"}  # the orphan dropped
    assert "widgets" not in _get(cm, "forged.ipynb").metadata  # still withheld


def test_trusted_in_the_page_and_saved_the_notebook_restores_its_models(manager):
    # JupyterLab's "Trust Notebook" marks every cell trusted in the page; the save is
    # then signed, with the models the page never had put back.
    cm = manager()
    _write(cm, "forged.ipynb", _forged())
    page = _get(cm, "forged.ipynb")
    for cell in page.cells:
        if cell.cell_type == "code":
            cell.metadata.trusted = True
    _page_save(cm, "forged.ipynb", page)
    got = _get(cm, "forged.ipynb")
    assert got.cells[0].metadata.trusted is True
    assert set(saved_models(got)) == {"a", "lay", "b"}


def test_later_saves_of_a_page_that_opened_it_untrusted_keep_the_models(manager):
    # Trusted and saved, the notebook is signed with its models; the page still has none
    # (it got the notebook without them) and its next save, an autosave, must not drop
    # them now that the disk copy is trusted.
    cm = manager()
    _write(cm, "forged.ipynb", _forged())
    page = _get(cm, "forged.ipynb")
    for cell in page.cells:
        if cell.cell_type == "code":
            cell.metadata.trusted = True
    _page_save(cm, "forged.ipynb", copy.deepcopy(page))
    page.cells[2].source = "edited after trusting"
    disk = _page_save(cm, "forged.ipynb", page)
    assert set(saved_models(disk)) == {"a", "lay", "b"}
    got = _get(cm, "forged.ipynb")
    assert got.cells[0].metadata.trusted is True
    assert set(saved_models(got)) == {"a", "lay", "b"}


# ------------------------------------------------------------------ the server's config


class _Server:
    def __init__(self, cls: type) -> None:
        self.contents_manager_class = cls
        self.log = logging.getLogger("test-server")


def test_the_extension_makes_the_default_manager_the_guarded_one(caplog):
    server = _Server(AsyncLargeFileManager)
    _link_jupyter_server_extension(server)
    assert server.contents_manager_class is WidgetTrustContentsManager

    class Own(AsyncLargeFileManager):
        pass

    mine = _Server(Own)
    with caplog.at_level(logging.WARNING):
        _link_jupyter_server_extension(mine)
    assert mine.contents_manager_class is Own  # the user's choice stands, said out loud
    assert re.search(r"contents_manager_class is .*Own .*restored and run", caplog.text)


def _kernel_config() -> Any:
    path = ROOT / "tools" / "kernel_config.py"
    spec = importlib.util.spec_from_file_location("kernel_config", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_environment_config_enables_the_extension(tmp_path, monkeypatch):
    # What `make lab` and Binder's postBuild write, read as the server reads it.
    from jupyter_server.extension.config import ExtensionConfigManager

    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    _kernel_config().main()
    manager = ExtensionConfigManager(read_config_path=[str(tmp_path / "etc" / "jupyter")])
    assert manager.get_jpserver_extensions() == {"jaxlab_server": True}


def test_binder_and_make_lab_write_the_config():
    post = (ROOT / "binder" / "postBuild").read_text()
    assert re.search(r"^python tools/kernel_config\.py$", post, re.MULTILINE)
    make = (ROOT / "Makefile").read_text()
    assert "$(VENV)/bin/python tools/kernel_config.py" in make
    assert re.search(r"^lab: setup$", make, re.MULTILINE)
    assert re.search(r"^setup: .*\$\(VENV\)/\.kernel-config", make, re.MULTILINE)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_binders_server_enables_the_extension(binder_env):
    from binder_setup import run

    listed = run([binder_env / "jupyter", "server", "extension", "list"])
    assert re.search(r"jaxlab_server\s+(\x1b\[\d+m)?enabled", listed)
    assert re.search(r"jaxlab_server\s+(\x1b\[\d+m)?OK", listed)
