"""jaxlab's server extension sends kernel messages to the page at once (TCP_NODELAY on
the kernel websockets, ``jaxlab_server/nodelay.py``): the class swap, and a real server's
kernel channels working through it. The round trip it saves (44 ms a message, Nagle's
wait for the browser's delayed acknowledgement) is measured by
``benchmarks/kernel_websocket.py``, not here."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from jupyter_server.gateway.connections import GatewayWebSocketConnection
from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection
from kernel_channels import connect, execute, round_trip, server, start_kernel

from jaxlab_server.nodelay import NoDelayConnection, without_nagle


def test_the_default_connection_becomes_the_one_without_nagle():
    settings = {"kernel_websocket_connection_class": ZMQChannelsWebsocketConnection}
    assert without_nagle(settings)
    assert settings["kernel_websocket_connection_class"] is NoDelayConnection
    assert issubclass(NoDelayConnection, ZMQChannelsWebsocketConnection)


def test_a_gateways_or_the_users_connection_class_is_kept():
    class Mine(ZMQChannelsWebsocketConnection):
        pass

    for kept in (GatewayWebSocketConnection, Mine):
        settings = {"kernel_websocket_connection_class": kept}
        assert not without_nagle(settings)
        assert settings["kernel_websocket_connection_class"] is kept
    assert not without_nagle({})


def _session(extension: bool) -> tuple[list[dict], list[dict], str]:
    with server(extension) as (base, token, log):
        kernel = start_kernel(base, token)

        async def talk():
            ws = await connect(base, token, kernel)
            info = await round_trip(ws, "kernel_info_request", {})
            run = await round_trip(ws, "execute_request", execute("print(6 * 7)"))
            ws.close()
            return info, run

        info, run = asyncio.run(talk())
        return info, run, Path(log).read_text()


@pytest.mark.slow  # a Jupyter server and a kernel: 14-16 s under load; once per `make test`
def test_a_real_servers_kernel_channels_work_through_it():
    info, run, log = _session(extension=True)
    assert "kernel websockets send at once (TCP_NODELAY)" in log
    (reply,) = [m for m in info if m["msg_type"] == "kernel_info_reply"]
    assert reply["content"]["status"] == "ok"
    printed = [m["content"]["text"] for m in run if m["msg_type"] == "stream"]
    assert printed == ["42\n"]
    # without the extension: jupyter_server's own class, and nothing said
    _, _, plain_log = _session(extension=False)
    assert "TCP_NODELAY" not in plain_log
