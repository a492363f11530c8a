"""The lab's contents manager: an untrusted notebook reaches the page without widget state.

Jupyter's trust is the notebook's signature, checked on the server when a notebook is
read (``mark_trusted_cells``): a notebook this machine did not sign (downloaded, shared,
forged) is untrusted. JupyterLab then sanitises its HTML outputs, but its widget manager
restores ``metadata.widgets`` all the same, and anywidget imports each model's ``_esm``
as it is made. This manager sends an untrusted notebook without that state, so the page
has nothing to restore (the outputs show their static twins), and keeps the state on
disk for when the notebook is trusted:

- saved from the page, the models the saved outputs still show and the page did not
  send are put back from the disk copy (``widget_state.keep_withheld``), trusted or not:
  a page that opened the notebook untrusted never has them, also after it trusted it;
  models no output shows any more (their cells ran again) are dropped, so a signature
  never covers a stranger's model that nothing displays;
- trusted from the page ("Trust Notebook", which saves), the save is signed with those
  models, and reopened it restores them;
- trusted on the server (``jupyter trust nb.ipynb``, or the ``/api/contents/<path>/trust``
  endpoint, which signs the whole file: ``trust_notebook`` reads it whole), reopened it
  restores them.

A copy made in the lab (File > Duplicate) is read as the page reads it, so a copy of an
untrusted notebook has no widget state.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import nbformat
from anyio.to_thread import run_sync
from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from .widget_state import WIDGET_STATE, keep_withheld, withhold

# Set while trust_notebook reads the notebook it signs: the whole file, widget state
# included (signing the page's copy would sign a notebook that is not the one on disk).
_READ_WHOLE: ContextVar[bool] = ContextVar("jaxlab_read_whole", default=False)


class WidgetTrustContentsManager(AsyncLargeFileManager):
    """Jupyter server's default contents manager, sending an untrusted notebook without
    its saved widget state and keeping that state on disk (module docstring)."""

    def mark_trusted_cells(self, nb: Any, path: str = "") -> None:
        # jupyter_server's own three lines, then the widget state held back.
        trusted = self.notary.check_signature(nb)
        if not trusted:
            self.log.warning("Notebook %s is not trusted", path)
        self.notary.mark_cells(nb, trusted)
        if not trusted and not _READ_WHOLE.get():
            count = withhold(nb)
            if count:
                self.log.warning(
                    "jaxlab: the %d saved widget models of untrusted notebook %s are not "
                    "sent to the page (trust it to restore them)",
                    count,
                    path,
                )

    async def trust_notebook(self, path: str) -> None:
        token = _READ_WHOLE.set(True)
        try:
            await super().trust_notebook(path)
        finally:
            _READ_WHOLE.reset(token)

    async def save(self, model: dict[str, Any], path: str = "") -> dict[str, Any]:
        content = model.get("content")
        if model.get("type") == "notebook" and isinstance(content, dict):
            disk = await self._on_disk_with_state(path)
            if disk is not None:
                kept = keep_withheld(content, disk)
                if kept:
                    self.log.info("jaxlab: %d saved widget models kept in %s", kept, path)
        return await super().save(model, path)

    async def _on_disk_with_state(self, path: str) -> Any:
        """The notebook now at ``path`` when it holds widget state, else None."""
        try:
            raw = await run_sync(_read_bytes, self._get_os_path(path.strip("/")))
        except OSError:
            return None
        if WIDGET_STATE.encode() not in raw:  # most saves: no parse
            return None
        try:
            return nbformat.reads(raw.decode("utf-8"), as_version=4)
        except (ValueError, KeyError, TypeError):  # not JSON, not a notebook: nothing sent
            return None


def _read_bytes(os_path: str) -> bytes:
    with open(os_path, "rb") as f:
        return f.read()
