"""A Jupyter server on 127.0.0.1 and a websocket client of a kernel's channels, for the
tests and the benchmark of ``jaxlab_server.nodelay`` (no browser: tornado's own client)."""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server(extension: bool) -> Iterator[tuple[str, str, str]]:
    """A ``jupyter server`` with jaxlab's extension on or off and one kernel: (base URL,
    token, the server's log path)."""
    port, token = _free_port(), secrets.token_hex(8)
    config = tempfile.mkdtemp()
    log = os.path.join(config, "server.log")
    on = "True" if extension else "False"
    args = [
        sys.executable, "-m", "jupyter", "server", "--no-browser", "--ip=127.0.0.1",
        f"--port={port}", "--ServerApp.port_retries=0", f"--ServerApp.token={token}",
        f"--ServerApp.jpserver_extensions={{'jaxlab_server': {on}}}",
        f"--ServerApp.root_dir={config}",
    ]  # fmt: skip
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        args.append("--allow-root")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": config, "JAX_PLATFORMS": "cpu"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"{base}/api?token={token}", timeout=5)
                break
            except OSError:
                if proc.poll() is not None:
                    raise RuntimeError(Path(log).read_text()) from None
                time.sleep(0.1)
        yield base, token, log
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def start_kernel(base: str, token: str) -> str:
    req = urllib.request.Request(f"{base}/api/kernels?token={token}", data=b"{}", method="POST")
    return str(json.load(urllib.request.urlopen(req, timeout=60))["id"])


async def connect(base: str, token: str, kernel: str) -> Any:
    from tornado.websocket import websocket_connect

    url = base.replace("http", "ws") + f"/api/kernels/{kernel}/channels?token={token}"
    return await websocket_connect(url)


async def round_trip(ws: Any, msg_type: str, content: dict[str, Any]) -> list[dict[str, Any]]:
    """Send a shell request; every message that answers it, until its reply and idle."""
    mid = uuid.uuid4().hex
    header = {"msg_id": mid, "msg_type": msg_type, "username": "", "session": "t",
              "date": "", "version": "5.3"}  # fmt: skip
    msg = {"header": header, "parent_header": {}, "metadata": {}, "content": content,
           "channel": "shell", "buffers": []}  # fmt: skip
    await ws.write_message(json.dumps(msg))
    got: list[dict[str, Any]] = []
    replied = idle = False
    while not (replied and idle):
        r = json.loads(await ws.read_message())
        if r["parent_header"].get("msg_id") != mid:
            continue
        got.append(r)
        replied |= r["msg_type"] == msg_type.replace("_request", "_reply")
        idle |= r["msg_type"] == "status" and r["content"]["execution_state"] == "idle"
    return got


def execute(code: str) -> dict[str, Any]:
    return {"code": code, "silent": False, "store_history": False, "user_expressions": {},
            "allow_stdin": False}  # fmt: skip
