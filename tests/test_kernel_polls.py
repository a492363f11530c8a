"""The notebook tests' kernel client polls in slices (tests/kernel_polls.py): a reply that
arrived without waking a poll is found by the next slice, not at the cell's timeout."""

import asyncio
from queue import Empty

import pytest
from kernel_polls import poll_in_slices


class Clock:
    """Time that passes only when a poll waits out its timeout."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class MissedEdgeChannel:
    """A channel whose message arrives during the first poll without waking it (the first
    poll waits out its whole timeout and finds nothing); a new poll sees it."""

    def __init__(self, clock: Clock, arrives: bool = True) -> None:
        self.clock, self.arrives = clock, arrives
        self.polls: list[float] = []

    async def get_msg(self, timeout: float | None = None) -> dict:
        self.polls.append(timeout)
        if self.arrives and len(self.polls) > 1:
            return {"msg_type": "execute_reply"}
        self.clock.now += timeout
        raise Empty


def test_a_reply_that_did_not_wake_the_poll_is_found_by_the_next_slice():
    clock = Clock()
    channel = MissedEdgeChannel(clock)
    poll_in_slices(channel, slice_s=0.5, clock=clock)
    assert asyncio.run(channel.get_msg(timeout=300)) == {"msg_type": "execute_reply"}
    assert channel.polls == [0.5, 0.5]  # one slice lost, not the cell's 300 s
    assert clock.now == 0.5


def test_the_cells_timeout_still_ends_the_wait():
    clock = Clock()
    channel = MissedEdgeChannel(clock, arrives=False)
    poll_in_slices(channel, slice_s=0.5, clock=clock)
    with pytest.raises(Empty):
        asyncio.run(channel.get_msg(timeout=1.2))
    assert channel.polls == pytest.approx([0.5, 0.5, 0.2])
    assert clock.now == pytest.approx(1.2)


def test_no_timeout_polls_until_the_message_comes():
    clock = Clock()
    channel = MissedEdgeChannel(clock)
    poll_in_slices(channel, slice_s=0.5, clock=clock)
    assert asyncio.run(channel.get_msg())["msg_type"] == "execute_reply"
    assert channel.polls == [0.5, 0.5]
