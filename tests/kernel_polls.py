"""nbclient's ``NotebookClient`` with its kernel's messages read in short polls.

nbclient waits for a cell's reply in one poll of the shell socket as long as the cell's
timeout (300 s here). A reply can arrive without waking that poll (nbclient issue #312,
with widgets in the cell): the poll then returns only at its timeout, finds the reply, and
the notebook goes on. In one `make test` the tutorial 04's ``interact`` cell was followed by
299 s of this wait. A new poll looks at the socket first, so polls of half a second each
find such a reply within half a second; the cell's own timeout is kept.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from queue import Empty
from typing import Any

import nbclient
from nbclient.util import run_sync

SLICE_S = 0.5


def poll_in_slices(
    channel: Any, slice_s: float = SLICE_S, clock: Callable[[], float] = time.monotonic
) -> None:
    """Make ``channel.get_msg(timeout)`` poll at most ``slice_s`` at a time, until a message
    comes or ``timeout`` (None: never) has passed, when it raises ``Empty`` as before."""
    get_msg = channel.get_msg

    async def sliced(timeout: float | None = None) -> Any:
        deadline = None if timeout is None else clock() + timeout
        while True:
            left = None if deadline is None else deadline - clock()
            step = slice_s if left is None else max(0.0, min(slice_s, left))
            try:
                return await get_msg(timeout=step)
            except Empty:
                if left is not None and left <= slice_s:
                    raise

    channel.get_msg = sliced


class NotebookClient(nbclient.NotebookClient):
    """nbclient's client, its shell and IOPub channels polled in slices."""

    async def async_start_new_kernel_client(self) -> Any:
        kc = await super().async_start_new_kernel_client()
        poll_in_slices(kc.shell_channel)
        poll_in_slices(kc.iopub_channel)
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)
