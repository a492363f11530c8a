"""The kernel's websocket without Nagle's delay: a slider's answer reaches the page at once.

jupyter_server writes each kernel message to the page's websocket as it comes, and leaves
the socket's Nagle algorithm on: a small message written while the one before it is not
yet acknowledged waits for that acknowledgement, which the browser delays by up to
40 ms on Linux. A widget's answer to a move is several small messages (busy, the state
update, idle), so every move paid that wait: JupyterLab's round trip for a slider printing
its value, no JAX at all, read 62-67 ms median in Chromium (``benchmarks/explore_latency.py``,
the messaging floor) against a 3 ms round trip of the kernel itself. Tornado's documented
switch for interactive websockets, ``set_nodelay(True)``, is set on every kernel
connection: the web app's ``kernel_websocket_connection_class`` (read by the kernel
websocket handler on each connection) becomes jupyter_server's own class with only this
added, when it is that class; a gateway's or one chosen in the user's config is kept.
Measured with a websocket client of the server's kernel channels (kernel_info's round
trip, median of 40): 44 ms without, 8 ms with (``tests/test_lab_widget_trust.py``).
"""

from __future__ import annotations

from typing import Any

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection


class NoDelayConnection(ZMQChannelsWebsocketConnection):
    """jupyter_server's kernel websocket connection, with TCP_NODELAY on its socket."""

    def connect(self) -> Any:
        self.websocket_handler.set_nodelay(True)
        return super().connect()


def without_nagle(settings: dict[str, Any]) -> bool:
    """Make the web app's kernel connections :class:`NoDelayConnection`, when they are
    jupyter_server's default class; True when it did."""
    if settings.get("kernel_websocket_connection_class") is not ZMQChannelsWebsocketConnection:
        return False
    settings["kernel_websocket_connection_class"] = NoDelayConnection
    return True
