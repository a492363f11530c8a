"""jaxlab's Jupyter server extension: the lab does not run an untrusted notebook's widgets.

A Jupyter server extension (``jupyter_server_config.d/jaxlab.json`` enables it, written
by ``tools/kernel_config.py`` for ``make lab`` and Binder). Linked before the server
makes its contents manager, it makes that manager :class:`~.contents.WidgetTrustContentsManager`
(jupyter_server's default, sending an untrusted notebook without its saved widget state)::

    {"ServerApp": {"jpserver_extensions": {"jaxlab_server": true}}}

A contents manager chosen in the user's own config is left as it is, with a warning
that untrusted notebooks' widget state then reaches the page.
"""

from __future__ import annotations

from typing import Any

EXTENSION = "jaxlab_server"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": EXTENSION}]


def _link_jupyter_server_extension(serverapp: Any) -> None:
    from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

    from .contents import WidgetTrustContentsManager

    chosen = serverapp.contents_manager_class
    if chosen is AsyncLargeFileManager:
        serverapp.contents_manager_class = WidgetTrustContentsManager
    elif not issubclass(chosen, WidgetTrustContentsManager):
        serverapp.log.warning(
            "jaxlab: ServerApp.contents_manager_class is %s.%s (your config), so an "
            "untrusted notebook's saved widgets are restored and run their code; "
            "subclass jaxlab_server.contents.WidgetTrustContentsManager to keep them out",
            chosen.__module__,
            chosen.__qualname__,
        )


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from .contents import WidgetTrustContentsManager
    from .nodelay import without_nagle

    if isinstance(serverapp.contents_manager, WidgetTrustContentsManager):
        serverapp.log.info("jaxlab: untrusted notebooks reach the page without widget state")
    if without_nagle(serverapp.web_app.settings):
        serverapp.log.info("jaxlab: kernel websockets send at once (TCP_NODELAY)")
