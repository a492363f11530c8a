"""The KeyLineage widget left live for a session (issue 32): interrupts always win, the
view is sent what changed, the saved twin is written once per cell and bounded, and
recording makes no reference cycles.

The throttle is driven by an injected clock; the interrupt test runs a real kernel and
counts outcomes, never durations (a generous bound only catches a lost interrupt)."""

from __future__ import annotations

import gc
import os
import queue
import signal
import threading
import time
from typing import Any

import jax
import pytest

import jaxlab
from jaxlab.widgets import KeyLineage as KeyLineageWidget
from jaxlab.widgets._throttle import Throttle
from jaxlab.widgets.key_lineage import TWIN_ROWS


# ------------------------------------------------------------------------- the throttle
class NoTicker:
    """A ticker that never looks: the test calls ``tick`` itself."""

    def add(self, throttle: Throttle) -> None:
        pass

    def discard(self, throttle: Throttle) -> None:
        pass


def test_a_change_is_a_flag_pushed_by_the_one_ticker_at_most_once_per_interval():
    pushed: list[float] = []
    clock = [10.0]
    throttle = Throttle(
        lambda: pushed.append(clock[0]), interval=0.25, clock=lambda: clock[0], ticker=NoTicker()
    )
    try:
        threads = threading.active_count()
        for _ in range(10_000):  # a loop's draws: nothing pushed, no thread started
            throttle.changed()
        assert pushed == [] and throttle.pending and threading.active_count() == threads
        assert throttle.tick() and pushed == [10.0]  # the ticker's look
        throttle.changed()
        clock[0] += 0.1
        assert not throttle.tick() and pushed == [10.0]  # within the interval: held
        clock[0] += 0.25
        assert throttle.tick() and pushed == pytest.approx([10.0, 10.35])  # the trailing push
        assert not throttle.tick()  # nothing changed since
        throttle.changed(now=True)  # the end of a cell: pushed here, at once
        assert pushed == pytest.approx([10.0, 10.35, 10.35]) and not throttle.pending
    finally:
        throttle.cancel()


def test_every_throttle_is_served_by_one_thread():
    from jaxlab.widgets import _throttle

    done = threading.Event()
    throttles = [Throttle(done.set, interval=0.0) for _ in range(20)]
    try:
        throttles[7].changed()
        assert done.wait(60)  # pushed by the ticker, not by changed()
        named = [t for t in threading.enumerate() if t.name == "jaxlab-throttle"]
        assert named == [_throttle._TICKER.thread]
    finally:
        for t in throttles:
            t.cancel()


def test_a_view_collected_while_a_throttle_registers_does_not_hang(monkeypatch):
    """Making the ticker's thread allocates, so a collection can run inside add() and close
    a view nothing holds (ipywidgets' Widget.__del__): its throttle leaves the ticker on
    the same thread, under the lock add() holds. A plain lock hung the kernel there (a
    CompileMonitor collected while another was made, in `make test`)."""
    from types import SimpleNamespace

    from jaxlab.widgets import _throttle

    ticker = _throttle._Ticker()
    collected: list[Throttle] = []  # the throttle of the view "collected" next

    class Thread:  # threading.Thread for the ticker: its making runs the "collection"
        def __init__(self, **_: Any) -> None:
            while collected:
                collected.pop().cancel()  # what Widget.__del__ -> close() -> detach() does

        def start(self) -> None:
            pass

    monkeypatch.setattr(_throttle, "threading", SimpleNamespace(Thread=Thread, Lock=threading.Lock))
    old = Throttle(lambda: None, ticker=ticker)
    ticker._thread = None  # the ticker had stopped: the next add() makes its thread again
    collected.append(old)
    made: list[Throttle] = []
    adding = threading.Thread(target=lambda: made.append(Throttle(lambda: None, ticker=ticker)))
    adding.daemon = True  # with a plain lock it never ends
    adding.start()
    adding.join(30)
    assert not adding.is_alive(), "add() deadlocked on a throttle leaving from a collection"
    assert list(ticker._throttles) == [id(made[0])]


# ------------------------------------------------------------------------ patches
def _apply(state: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """What the page does with a patch (widgets/static/key_lineage.js, applyPatch)."""
    assert patch["base"] == state["rev"]
    rows = {r["id"]: r for r in state["items"]}
    for gone in patch["gone"]:
        rows.pop(gone)
    rows.update({r["id"]: r for r in patch["rows"]})
    order = patch.get("order", [r["id"] for r in state["items"]])
    return {
        "rev": patch["rev"],
        "items": [rows[i] for i in order],
        "reuses": patch.get("reuses", state["reuses"]),
        "summary": patch["summary"],
    }


def test_the_view_is_sent_what_changed_and_the_page_rebuilds_the_state(fresh_lineage):
    sent: list[dict[str, Any]] = []
    with jaxlab.track_keys():
        key = jax.random.key(0)
        for _ in range(40):
            key, sub = jax.random.split(key)
            jax.random.normal(sub)
        widget = KeyLineageWidget()
        widget.send = sent.append  # type: ignore[method-assign]
        page = dict(widget.state)
        assert len(page["items"]) == len(widget.items) > 80
        key, sub = jax.random.split(key)  # one more pair of rows
        jax.random.normal(sub)
        widget.refresh()  # (the ticker may have sent a part already)
        # the rows that changed (the new ones and the parent that now has a child), not
        # the 80 before them
        assert 1 <= sum(len(p["rows"]) for p in sent) <= 4
        assert [p["gone"] for p in sent] == [[]] * len(sent)
        for patch in sent:
            page = _apply(page, patch)
        before = len(sent)
        widget.refresh()  # nothing changed: nothing sent
        assert len(sent) == before
        for _ in range(300):  # past the key-by-key budget: drawn by call site
            key, sub = jax.random.split(key)
            jax.random.normal(sub)
        widget.refresh()
        for patch in sent[before:]:
            page = _apply(page, patch)
        assert page == widget._full() and page["summary"]["by_site"]
    widget.close()


def test_a_view_that_missed_a_patch_gets_the_whole_state(fresh_lineage):
    sent: list[dict[str, Any]] = []
    with jaxlab.track_keys():
        widget = KeyLineageWidget()
        widget.send = sent.append  # type: ignore[method-assign]
        jax.random.normal(jax.random.key(1))
        widget.refresh()
        widget._page_message(widget, {"kind": "sync"}, [])  # what the page asks
    full = sent[-1]
    assert full["base"] is None and full["rev"] == widget.rev >= 1
    assert [r["id"] for r in full["rows"]] == [r["id"] for r in widget.items]
    widget._page_message(widget, {"kind": "expand", "id": 5}, [])  # forged: ignored
    widget._page_message(widget, ["expand"], [])
    assert widget.expanded == ""
    widget.close()


# ------------------------------------------------------------------------- the twin
def test_the_twin_is_written_once_per_cell_that_changed_the_lineage_and_is_bounded(
    ip, fresh_lineage, monkeypatch
):
    widget = KeyLineageWidget()
    written: list[dict[str, str]] = []
    monkeypatch.setattr(widget, "update_static", lambda: written.append(widget.static_bundle()))
    ip.user_ns["jax"] = jax
    with jaxlab.track_keys():
        ip.run_cell("k = jax.random.key(3)")
        assert len(written) == 1
        ip.run_cell("1 + 1")  # no key made or used: no twin
        assert len(written) == 1
        # a lineage whose live view draws 500 rows: 250 lines, a seed and a draw each
        ip.run_cell("\n".join(f"jax.random.normal(jax.random.key({i}))" for i in range(250)))
    assert len(written) == 2
    html = written[-1]["text/html"]
    assert len(widget.items) > TWIN_ROWS
    assert html.count("<li") <= TWIN_ROWS + 20 and len(html) < 100_000
    assert "more not drawn" in html
    widget.close()


# ----------------------------------------------------------------- reference cycles
def test_recording_with_the_view_live_makes_no_reference_cycles(ip, fresh_lineage, monkeypatch):
    widget = KeyLineageWidget()
    monkeypatch.setattr(widget, "_twin_ids", ["twin"])  # a displayed twin, rewritten
    monkeypatch.setattr("IPython.display.update_display", lambda *a, **k: None)
    ip.user_ns["jax"] = jax
    with jaxlab.track_keys():
        ip.run_cell("key = jax.random.key(0)")
        gc.collect()
        gc.disable()
        try:
            for _ in range(20):  # cells of draws, each pushed and its twin written
                ip.run_cell(
                    "for _ in range(20):\n"
                    "    key, sub = jax.random.split(key)\n"
                    "    jax.random.normal(sub)"
                )
                widget.refresh()
            found = gc.collect()
        finally:
            gc.enable()
    widget.close()
    # IPython's own run_cell leaves a few (its execution info); per event: none
    assert found < 20, f"{found} objects in reference cycles after 800 tracked events"


# ----------------------------------------------------------------------- interrupts
# An interrupt handled inside a garbage-collector callback (JAX registers one): Python
# drops the KeyboardInterrupt ("Exception ignored in ..."). Run in a fresh interpreter,
# since the collector and the unraisable hook are process-wide.
DROPPED_INTERRUPT = """
import gc, signal, sys
# Python's own handler, even where this process was started with SIGINT ignored (a shell's
# background job, as a CI runner may start the suite): the test is about what it does.
signal.signal(signal.SIGINT, signal.default_int_handler)
from IPython.core.interactiveshell import InteractiveShell
ip = InteractiveShell.instance()
if sys.argv[1] == "loaded":
    ip.run_line_magic("load_ext", "jaxlab")
fired = []
def callback(phase, info):
    if phase == "stop" and not fired:
        fired.append(True)
        signal.raise_signal(signal.SIGINT)  # arrives while the collector's callback runs
        for _ in range(3):  # handled here, inside the callback
            pass
gc.callbacks.append(callback)
n, kept = 0, []
try:
    while n < 3_000_000:  # keeps what it makes a while: collections run inside the loop
        kept.append([])
        if len(kept) > 5000:
            kept = []
        n += 1
    print("ran on", n)
except KeyboardInterrupt:
    print("interrupted", n, len(fired))
"""


@pytest.mark.parametrize("extension", ["loaded", "not loaded"])
def test_an_interrupt_dropped_inside_a_collector_callback_is_raised_again(extension):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", DROPPED_INTERRUPT, extension],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )  # fmt: skip
    words = done.stdout.split()
    if extension == "loaded":  # raised again in the loop, and nothing printed about it
        assert words[0] == "interrupted" and words[2] == "1", done.stdout + done.stderr
        assert int(words[1]) < 3_000_000 and "Exception ignored" not in done.stderr
    else:  # what Python does alone: the loop runs to its end
        assert words == ["ran", "on", "3000000"], done.stdout + done.stderr
        assert "KeyboardInterrupt" in done.stderr


BREAK_JAX = (  # where an interrupt between two lines of JAX 0.12's Primitive.bind leaves it
    "import jax\nfrom jax._src import core\ncore.trace_ctx.set_trace(None)\nraise KeyboardInterrupt"
)


def test_a_cell_that_leaves_jax_s_trace_state_empty_is_mended_at_its_end(ip, capsys):
    from jax._src import core

    from jaxlab.magics._interrupts import MENDED

    try:
        ip.run_cell(BREAK_JAX)
        assert MENDED in capsys.readouterr().err  # told in that cell's output
        result = ip.run_cell("y = jax.lax.sin(0.0) + 3")
        assert result.error_in_exec is None and float(ip.user_ns["y"]) == 3.0
        assert core.trace_ctx.is_top_level()
        ip.run_cell("z = jax.lax.sin(0.0)")  # told once: nothing to mend now
        assert MENDED not in capsys.readouterr().err
        ip.run_line_magic("unload_ext", "jaxlab")  # without jaxlab, JAX stays broken
        ip.run_cell(BREAK_JAX)
        result = ip.run_cell("y = jax.lax.sin(0.0) + 3")
        assert isinstance(result.error_in_exec, AttributeError)
    finally:
        core.trace_ctx.reset()
        if "jaxlab" not in ip.extension_manager.loaded:
            ip.run_line_magic("load_ext", "jaxlab")


CODE_SETUP = (
    "%load_ext jaxlab\n%keys on\n"
    "import jax, time, warnings\nwarnings.simplefilter('ignore')\nk = jax.random.key(0)"
)
# A runaway loop; the time the interrupt ended it is kept (a monotonic clock, shared by
# the processes of one machine)
CODE_LOOP = (
    "key = k\n"
    "try:\n"
    "    n = 0\n"
    "    while True:\n"
    "        jax.random.normal(k)\n"
    "        key, sub = jax.random.split(key)\n"
    "        n += 1\n"
    "        if n == 50:\n"
    "            print('looping', flush=True)\n"
    "except BaseException:\n"
    "    caught = time.monotonic()\n"
    "    raise\n"
)


@pytest.mark.slow
def test_a_tracked_runaway_loop_with_the_view_live_stops_at_every_interrupt():
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3", env={**os.environ, "JAX_PLATFORMS": "cpu"})

    def reply(msg_id: str, timeout: float) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while True:
            msg = kc.get_shell_msg(timeout=max(0.01, end - time.monotonic()))
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg["content"]

    def run(code: str) -> dict[str, Any]:
        return reply(kc.execute(code), 300)

    try:
        assert run(CODE_SETUP)["status"] == "ok"
        assert run("%keys")["status"] == "ok"  # the live view
        lags, lost, where = [], 0, []
        for trial in range(20):
            # (an interrupted cell must not abort the requests that follow it)
            msg_id = kc.execute(CODE_LOOP, stop_on_error=False)
            while True:  # the loop has started
                msg = kc.get_iopub_msg(timeout=300)
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                if "looping" in str(msg["content"].get("text", "")):
                    break
                # (the last interrupt left the session broken: say so, not wait 300 s)
                assert msg["msg_type"] != "error", (trial, msg["content"]["traceback"][-3:])
            time.sleep(0.05 + 0.07 * (trial % 8))  # land at different points of the loop
            sent = time.monotonic()
            os.kill(km.provisioner.process.pid, signal.SIGINT)
            try:
                # a lost interrupt never ends the loop: 60 s only tells it from a slow one
                content = reply(msg_id, 60)
            except queue.Empty:
                lost += 1
                km.interrupt_kernel()  # end it to report, and go on counting
                content = reply(msg_id, 60)
                where.append(_printed(kc, msg_id, "stderr")[-600:])
            # ended by the interrupt: KeyboardInterrupt, or JAX's ValueError raised from it
            # when it landed in a key's __eq__ inside JAX's C++ cache ("cache keys should
            # be comparable using __eq__", as plain JAX does)
            tb = "\n".join(content.get("traceback", []))
            assert content["status"] == "error", tb[-3000:]
            assert content["ename"] == "KeyboardInterrupt" or (
                content["ename"] == "ValueError" and "KeyboardInterrupt" in tb
            ), tb[-3000:]
            printed = _printed(kc, kc.execute("print(caught)", stop_on_error=False))
            lags.append(float(printed) - sent)
        assert lost == 0, f"{lost} of 20 interrupts were lost: {where}"
        assert all(0 <= lag < 10 for lag in lags), lags  # the bound is 1 s
    finally:
        km.shutdown_kernel(now=True)


def _printed(kc: Any, msg_id: str, name: str = "stdout") -> str:
    """What the execution ``msg_id`` printed (on ``name``), once the kernel is idle after
    it."""
    text = ""
    while True:
        msg = kc.get_iopub_msg(timeout=300)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        if msg["msg_type"] == "stream" and msg["content"]["name"] == name:
            text += msg["content"]["text"]
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return text
