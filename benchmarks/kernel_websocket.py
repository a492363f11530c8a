"""A kernel message's round trip through Jupyter's server, with and without jaxlab's
server extension (``jaxlab_server/nodelay.py``: TCP_NODELAY on kernel websockets).

Two ``jupyter server`` processes on 127.0.0.1, one with the extension and one without,
each with a kernel; a websocket client of the kernel channels (tornado's) sends
``kernel_info_request`` and ``execute_request("pass")`` 40 times each, alternating between
the servers, and takes the medians. The reference is jupyter_server as it ships. Every
widget move in JupyterLab pays this trip (a slider's answer is several small messages);
the 50 ms target of the Explorer (issue 35) cannot be met while the server holds each
second message for the browser's delayed acknowledgement. Target: with the extension at
most half the round trip without::

    .venv/bin/python benchmarks/kernel_websocket.py
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _targets import Targets
from kernel_channels import connect, execute, round_trip, server, start_kernel

ROUNDS = 40


async def _measure(ends: dict[str, tuple[str, str, str]]) -> dict[str, dict[str, float]]:
    sockets = {
        name: await connect(base, token, kernel) for name, (base, token, kernel) in ends.items()
    }
    times: dict[str, dict[str, list[float]]] = {n: {"kernel_info": [], "execute": []} for n in ends}
    for i in range(ROUNDS + 5):  # 5 rounds to warm both up, then the measured ones
        for name, ws in sockets.items():
            for what, msg, content in (
                ("kernel_info", "kernel_info_request", {}),
                ("execute", "execute_request", execute("pass")),
            ):
                t0 = time.perf_counter()
                await round_trip(ws, msg, content)
                if i >= 5:
                    times[name][what].append((time.perf_counter() - t0) * 1e3)
    for ws in sockets.values():
        ws.close()
    return {n: {w: statistics.median(v) for w, v in t.items()} for n, t in times.items()}


def main() -> int:
    targets = Targets()
    load = os.getloadavg()
    with ExitStack() as stack:
        ends = {}
        for name, on in (("jaxlab", True), ("plain", False)):
            base, token, _ = stack.enter_context(server(on))
            ends[name] = (base, token, start_kernel(base, token))
        medians = asyncio.run(_measure(ends))
    head = f"round trip, median of {ROUNDS}"
    print(f"{head:<34} {'with jaxlab_server':>20} {'jupyter_server alone':>22}")
    for what in ("kernel_info", "execute"):
        ours, plain = medians["jaxlab"][what], medians["plain"][what]
        print(f"{what:<34} {ours:>17.2f} ms {plain:>19.2f} ms")
        targets.at_most(
            f"{what} round trip with the extension / without",
            ours / plain,
            0.5,
            figure=ours,
            reference=plain,
            unit="ms",
        )
    print(f"load average at start {load}, at end {os.getloadavg()}")
    targets.print_clocks()
    print(json.dumps({"benchmark": "kernel_websocket", "medians_ms": medians, **targets.figures()}))
    return targets.exit_code()


if __name__ == "__main__":
    sys.exit(main())
