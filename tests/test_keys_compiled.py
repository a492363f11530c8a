"""The compiled hot path of eager key tracking (``keys/_hot.c``, ``keys/hot.py``) makes
the records the Python wrappers make, and stands for JAX's functions as they do."""

from __future__ import annotations

import inspect
import os
import shutil
import sysconfig
import threading
import warnings
from collections.abc import Callable

import jax
import numpy as np
import pytest
from test_key_runs import a_reuse, counting_runs, mixed, nested, observed, three_ways
from test_keys_unpacked import pairs

from jaxlab import JaxlabWarning, key_lineage, track_keys
from jaxlab.keys import hot


def can_build() -> bool:
    """A C compiler and this Python's headers: the install builds the extension then."""
    headers = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    return bool(shutil.which("cc") or shutil.which("gcc")) and os.path.exists(headers)


# Where the extension could have been built, these run (and fail if it was not): only a
# machine that cannot build it skips them.
pytestmark = [
    pytest.mark.usefixtures("fresh_lineage"),
    pytest.mark.skipif(hot._hot is None and not can_build(), reason="cannot be built here"),
]


def test_the_hot_path_is_built_where_a_compiler_is():
    """``pip install -e .`` builds it (an optional extension: no compiler, no build)."""
    assert hot._hot is not None and hot.compiled()


def lineage_of(program: Callable[[int], None], steps: int, python: bool, monkeypatch) -> dict:
    """The records, reuses, warnings and site table of ``program``, tracked with the
    Python wrappers (``python``) or the compiled ones."""
    lineage = key_lineage()
    lineage.clear()
    if python:
        monkeypatch.setenv(hot.PYTHON_ONLY, "1")
    else:
        monkeypatch.delenv(hot.PYTHON_ONLY, raising=False)
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always", JaxlabWarning)
        with track_keys():
            assert (type(jax.random.split).__name__ == "Hook") is not python
            program(steps)
    return observed(said)


PROGRAMS = [pairs, three_ways, nested, a_reuse, mixed(1), mixed(2), mixed(3)]


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_compiled_wrappers_make_the_records_the_python_wrappers_make(program, monkeypatch):
    runs = counting_runs(monkeypatch)
    compiled = lineage_of(program, 120, False, monkeypatch)
    assert sum(runs) > 40  # the compiled path noted the loop's calls by their tokens
    runs.clear()
    python = lineage_of(program, 120, True, monkeypatch)
    assert sum(runs) > 40
    assert compiled == python
    assert compiled["events"] and compiled["nodes"]
    if program is a_reuse:
        assert len(compiled["reuses"]) == 1 and compiled["said"]


def library_program(steps: int) -> None:
    """Keys through equinox's own splits and an optax initialiser, between the loop's."""
    eqx = pytest.importorskip("equinox")
    key = jax.random.key(11)
    for _ in range(steps // 10):
        key, sub, other = jax.random.split(key, 3)
        eqx.nn.MLP(2, 2, 4, 1, key=sub)
        jax.random.normal(other, (2,))


def test_on_a_library_s_keys_the_records_are_the_python_wrappers_records(monkeypatch):
    compiled = lineage_of(library_program, 60, False, monkeypatch)
    python = lineage_of(library_program, 60, True, monkeypatch)
    assert compiled == python and len(compiled["events"]) > 30


def test_past_the_caps_the_compiled_wrappers_forget_as_the_python_ones(monkeypatch):
    from jaxlab.keys import store

    monkeypatch.setattr(store, "MAX_NODES", 50)
    monkeypatch.setattr(store, "MAX_EVENTS", 35)
    compiled = lineage_of(pairs, 80, False, monkeypatch)
    python = lineage_of(pairs, 80, True, monkeypatch)
    assert compiled["dropped"] > 50 and compiled == python


def test_a_compiled_wrapper_stands_for_jax_s_function():
    original = jax.random.normal
    with track_keys():
        wrapper = jax.random.normal
        assert type(wrapper).__name__ == "Hook" and wrapper is not original
        assert wrapper.__name__ == "normal" and wrapper.__doc__ == original.__doc__
        assert wrapper.__wrapped__ is original and wrapper.__jaxlab_original__ is original
        assert wrapper.__module__ == original.__module__
        assert inspect.signature(wrapper) == inspect.signature(original)
        assert "jax.random.normal" in repr(wrapper)

        class Holder:  # bound as a method, as a Python function would be
            draw = wrapper

            def __init__(self) -> None:
                self.key = jax.random.key(2)

        holder = Holder()
        with pytest.raises(TypeError):
            holder.draw((2,))  # (self given as the key: JAX's own complaint)
        assert Holder.__dict__["draw"].__get__(None, Holder) is wrapper
        key, sub = jax.random.split(jax.random.key(1), num=2)  # keywords, both kinds
        drawn = jax.random.normal(sub, shape=(3,))
        jitted = jax.jit(jax.random.normal, static_argnums=1)(key, (2,))
    assert jax.random.normal is original
    key, sub = jax.random.split(jax.random.key(1), num=2)
    np.testing.assert_array_equal(drawn, jax.random.normal(sub, shape=(3,)))
    np.testing.assert_array_equal(jitted, jax.random.normal(key, (2,)))
    ops = [e.op for e in key_lineage().events]
    # the holder's key, then the split and the draws (the jitted one by its callback)
    assert ops == ["key", "key", "split", "normal", "normal"]


def test_the_compiled_unpacking_watch_stands_for_jax_s_iter():
    key_class = type(jax.random.key(0))
    original = key_class.__dict__["__iter__"]
    with track_keys():
        watch = key_class.__dict__["__iter__"]
        assert type(watch).__name__ == "Watch" and watch.__wrapped__ is original
        out = jax.random.split(jax.random.key(3), 3)
        assert [np.asarray(jax.random.key_data(k)).tolist() for k in out] == (
            np.asarray(jax.random.key_data(out)).tolist()
        )
        assert len(key_lineage().kids) == 3  # the split's keys, known by their tokens
        with pytest.raises(TypeError, match="0-d"):
            iter(jax.random.key(1))  # JAX's own complaint, through the watch
    assert key_class.__dict__["__iter__"] is original


def failing(steps: int) -> None:
    key = jax.random.key(9)
    for _ in range(steps):
        key, sub = jax.random.split(key)
        with pytest.raises(TypeError):
            jax.random.normal(sub, "not a shape")  # JAX's error, the key consumed
        jax.random.normal(sub, (1,))  # a reuse


def test_a_draw_that_raises_is_recorded_as_by_the_python_wrappers(monkeypatch):
    compiled = lineage_of(failing, 3, False, monkeypatch)
    python = lineage_of(failing, 3, True, monkeypatch)
    assert compiled == python and len(compiled["reuses"]) == 3


def test_while_another_thread_holds_the_lineage_the_compiled_note_waits_for_it():
    """The compiled note takes the lineage's lock without waiting; held elsewhere, it asks
    the Python method, which waits: the note is made once the other thread lets go."""
    lineage = key_lineage()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lineage._lock:
            held.set()
            release.wait(10)

    with track_keys():
        _, sub = jax.random.split(jax.random.key(3))
        other = threading.Thread(target=hold)
        other.start()
        held.wait(10)
        threading.Timer(0.2, release.set).start()
        jax.random.normal(sub, (2,))  # noted by its token once the lock is free
        other.join()
        with pytest.warns(JaxlabWarning, match="reused"):
            jax.random.normal(sub, (2,))  # a reuse, told
    assert [e.op for e in lineage.events] == ["key", "split", "normal", "normal"]
    assert len(lineage.reuses) == 1
