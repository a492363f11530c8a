"""session/: the own-work marker and the session's kept programs, below every capability."""

from __future__ import annotations

import threading

import jax
import jax.numpy as jnp
import pytest

import jaxlab
from jaxlab.compile.log import CompileLog
from jaxlab.session import programs, work


def test_the_marker_says_whose_work_per_thread_and_times_the_outermost_block():
    heard: list[float] = []
    undo = work.on_jaxlab_time(heard.append)
    try:
        assert not work.in_jaxlab_work()
        with work.jaxlab_work():
            with work.jaxlab_work():
                assert work.in_jaxlab_work()
                other: list[bool] = []
                thread = threading.Thread(target=lambda: other.append(work.in_jaxlab_work()))
                thread.start()
                thread.join()
                assert other == [False]  # another thread's work is not marked by this one
            assert heard == []  # an inner block's end is not the work's end
        assert not work.in_jaxlab_work()
        assert len(heard) == 1 and heard[0] >= 0.0
    finally:
        undo()
    with work.jaxlab_work():
        pass
    assert len(heard) == 1  # undone: heard no more
    undo()  # twice is harmless


def test_the_compile_log_listens_to_the_marker_only_while_it_records():
    before = work._listeners
    log = CompileLog()
    x = jnp.ones(3)
    with log.recording():
        assert len(work._listeners) == len(before) + (0 if before else 1)
        with work.jaxlab_work():
            jax.jit(lambda x: jnp.sin(x) + 1.0)(x)
    assert log.jaxlab_count >= 1 and log.count == 0  # counted as jaxlab's, not logged
    assert log.jaxlab_work_s > 0
    assert work._listeners == before
    spent = log.jaxlab_work_s
    with work.jaxlab_work():
        pass
    assert log.jaxlab_work_s == spent  # not recording: not told


def test_the_session_log_keeps_the_programs_capabilities_read(monkeypatch):
    assert programs.kept_programs() is jaxlab.compile_log()
    monkeypatch.setattr(programs, "_KEEPER", None)  # no keeper: nothing was kept
    with pytest.raises(ValueError, match="keeps no two programs of `step`"):
        jaxlab.recompile_diff("step")
