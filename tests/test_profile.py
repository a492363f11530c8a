"""%%profile and jaxlab.profile: the trace read back, syncs found at their lines, files removed."""

from __future__ import annotations

import inspect
import json
import os

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.timing.syncs import KINDS


@jax.jit
def step(x):
    return jnp.tanh(x @ x)


@jax.jit
def loss(x):
    return (x**2).mean()


def _line_of(marker: str) -> int:
    lines = inspect.getsource(inspect.getmodule(_line_of)).splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text and "_line_of" not in text)


def test_profile_of_a_known_block_names_its_jitted_functions_and_modules():
    x = jnp.ones((200, 200))
    jax.block_until_ready((step(x), loss(x)))  # compiled before, so only running is traced
    with jaxlab.profile() as p:
        y = step(x)
        z = loss(y)
        z.block_until_ready()
    r = p.result
    assert r is not None
    assert r.functions() == ["step", "loss"]
    modules = {c.name: c for c in r.modules}
    assert {"jit_step", "jit_loss"} <= set(modules)
    assert modules["jit_step"].calls == 1 and modules["jit_loss"].calls == 1
    ops = [s for s in r.spans if s.kind == "op"]
    assert ops and {s.module for s in ops} <= set(modules)
    for s in r.spans:
        assert s.start_s >= 0 and s.duration_s >= 0
    for c in r.modules:
        assert c.share == pytest.approx(c.total_s / r.duration_s)
    json.dumps(r.to_dict())
    assert r.syncs == ()


def test_a_planted_float_loop_is_found_with_its_line():
    x = jnp.ones((100, 100))
    values = []
    with jaxlab.profile() as p:
        for _ in range(5):
            values.append(float(loss(step(x))))  # planted sync
        jax.device_get(step(x))  # explicit: asked for, not a hidden sync
        if loss(x) > 0:  # planted bool
            pass
    assert values == [pytest.approx(float(loss(step(x))))] * 5
    sites = {s.lineno: s for s in p.result.syncs}
    planted = sites[_line_of("# planted sync")]
    assert planted.count == 5 and planted.kind == KINDS["__float__"]
    assert planted.code == "values.append(float(loss(step(x))))  # planted sync"
    assert planted.array == "f32[]"
    assert planted.where == f"test_profile.py, line {planted.lineno}"
    branch = sites[_line_of("# planted bool")]
    assert branch.count == 1 and branch.kind == KINDS["__bool__"]
    assert len(sites) == 2  # device_get is not counted
    assert "keep the value on the device" in str(p.result)


def _trace_folders() -> set[str]:
    import tempfile

    return {n for n in os.listdir(tempfile.gettempdir()) if n.startswith("jaxlab-profile-")}


def test_no_trace_file_is_left_and_arrays_are_restored_even_when_the_block_raises():
    array_type = type(jnp.ones(1))
    original = array_type.__dict__["__float__"]
    before = _trace_folders()
    with pytest.raises(ZeroDivisionError), jaxlab.profile() as p:
        # JAX 0.11 and later keep the trace in memory; 0.10 writes it to a folder
        assert (
            p.folder == "" if hasattr(jax.profiler, "ProfileSession") else os.path.isdir(p.folder)
        )
        assert array_type.__dict__["__float__"] is not original  # observed inside
        float(step(jnp.ones((2, 2))).sum()) / 0
    assert _trace_folders() == before
    assert p.result is None
    assert array_type.__dict__["__float__"] is original
    with jaxlab.profile() as q:
        step(jnp.ones((2, 2))).block_until_ready()
    assert _trace_folders() == before and q.result is not None


def test_profile_widget_carries_the_result(tmp_path):
    from jaxlab.widgets import ProfileTimeline

    x = jnp.ones((50, 50))
    with jaxlab.profile() as p:
        float(step(x).sum())
    w = ProfileTimeline(p.result)
    assert w.duration_s == p.result.duration_s
    assert "step" in [s["name"] for s in w.spans if s["kind"] == "dispatch"]
    assert w.syncs[0]["count"] == 1
    data, _ = w._repr_mimebundle_()
    assert "text/html" in data and "<svg" in data["text/html"]


# ------------------------------------------------------------------------------ the magic

CELL = """\
%%profile -o
total = 0.0
for i in range(3):
    y = step(x)
    total += float(y.sum())
"""


def test_profile_magic_runs_the_cell_and_finds_the_sync_in_the_cell(ip):
    ip.user_ns.update(step=step, x=jnp.ones((64, 64)))
    result = ip.run_cell(CELL)
    r = result.result
    assert isinstance(r, jaxlab.ProfileResult)
    expected = 3 * float(step(jnp.ones((64, 64))).sum())
    assert ip.user_ns["total"] == pytest.approx(expected)  # assignments took effect
    assert "step" in r.functions()
    (site,) = [s for s in r.syncs if s.kind == KINDS["__float__"]]
    assert site.count == 3 and site.lineno == 5 and site.where.endswith(", line 5")
    assert site.where.startswith("In[")
    assert site.code == "total += float(y.sum())"


def test_profile_magic_displays_the_widget_or_static_html_and_returns_the_value(ip):
    ip.user_ns.update(step=step, x=jnp.ones((8, 8)))
    with capture_output() as out:
        value = ip.run_cell_magic("profile", "", "y = step(x)\ny.shape")
    assert value == (8, 8)
    assert "application/vnd.jupyter.widget-view+json" in out.outputs[0].data
    with capture_output() as out:
        ip.run_cell_magic("profile", "--static", "step(x)")
    assert "<svg" in out.outputs[0].data["text/html"]


def test_profile_magic_on_a_raising_cell_shows_the_error_and_removes_the_trace(ip, tmp_path):
    import tempfile

    before = set(os.listdir(tempfile.gettempdir()))
    result = ip.run_cell("%%profile\nz = 1\n1 / 0")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert ip.user_ns["z"] == 1  # as in a normal run, the lines before the error ran
    left = {n for n in set(os.listdir(tempfile.gettempdir())) - before if "jaxlab-profile" in n}
    assert left == set()


def test_profile_magic_bad_options_are_usage_errors(ip):
    with pytest.raises(UsageError, match="%%profile"):
        ip.run_cell_magic("profile", "--nonsense", "1")
    with pytest.raises(UsageError, match="not valid Python"):
        ip.run_cell_magic("profile", "", "x = = 1")


def test_a_library_program_optax_step():
    optax = pytest.importorskip("optax")
    params = {"w": jnp.ones((16, 4))}
    opt = optax.adam(1e-2)
    state = opt.init(params)

    @jax.jit
    def update(params, state, x):
        grads = jax.grad(lambda p: ((x @ p["w"]) ** 2).mean())(params)
        updates, state = opt.update(grads, state)
        return optax.apply_updates(params, updates), state

    x = jnp.ones((8, 16))
    update(params, state, x)
    with jaxlab.profile() as p:
        for _ in range(3):
            params, state = update(params, state, x)
        params["w"][0, 0].item()  # planted item
    calls = [s.name for s in p.result.spans if s.kind == "dispatch"]
    assert calls[:3] == ["update"] * 3  # then JAX's own indexing: dynamic_slice, squeeze
    (site,) = p.result.syncs
    assert site.kind == KINDS["item"] and site.lineno == _line_of("# planted item")


def test_a_trace_already_running_is_a_profile_error_and_leaves_nothing(tmp_path):
    from jaxlab.timing.profile import ProfileError

    original = type(jnp.ones(())).__dict__["__float__"]
    jax.profiler.start_trace(str(tmp_path))
    try:
        with pytest.raises(ProfileError, match="stop the other trace"), jaxlab.profile():
            pass
    finally:
        jax.profiler.stop_trace()
    assert type(jnp.ones(())).__dict__["__float__"] is original  # arrays not left hooked


# ------------------------------------------------------- complete counts, named compiles


def test_every_call_is_counted_and_a_long_loop_is_drawn_from_a_bounded_sample():
    from jaxlab.timing.profile_spans import MAX_DRAWN

    x = jnp.ones((4, 4))
    loss(x).block_until_ready()
    with jaxlab.profile() as p:
        for _ in range(200):
            y = loss(x)
        y.block_until_ready()
    r = p.result
    assert r.called["loss"] == 200 and r.calls == 200
    assert {c.name: c.calls for c in r.modules}["jit_loss"] == 200
    assert r.dropped_spans == 0 and "200 jitted calls" in str(r)

    with jaxlab.profile() as p:
        for _ in range(6000):
            y = loss(x)
        y.block_until_ready()
    r = p.result
    assert r.called == {"loss": 6000} and r.counts["dispatch"] == 6000
    assert {c.name: c.calls for c in r.modules}["jit_loss"] == 6000  # costs over all runs
    assert len(r.spans) == MAX_DRAWN and r.dropped_spans == sum(r.counts.values()) - MAX_DRAWN
    drawn = [s for s in r.spans if s.kind == "module"]
    longest = max(
        (s.duration_s for s in r.spans if s.kind == "op"), default=0.0
    )  # the longest op of all is drawn: the drawn ops include the trace's maximum
    assert longest > 0 and r.longest_drawn == MAX_DRAWN // 2
    # the even sample reaches across the loop, not only its start
    assert max(s.start_s for s in drawn) > 0.8 * max(s.end_s for s in r.spans)
    assert "6,000 jitted calls" in str(r) and "drawn: 5,000 of 18,000 spans" in str(r)


def test_the_longest_spans_of_all_are_among_those_drawn():
    from jaxlab.timing.profile_spans import keep_for_drawing
    from jaxlab.timing.trace import Span

    spans = [Span("device", "op", f"op{i}", i * 1.0, 0.5 + (i % 97) / 100) for i in range(9000)]
    spans.append(Span("jax", "compile", "f", 3.0, 0.1))
    kept = keep_for_drawing(spans, limit=1000)
    assert len(kept.spans) == 1000 and kept.longest == 499
    assert any(s.kind == "compile" for s in kept.spans)  # compile steps are always kept
    longest = sorted(spans[:-1], key=lambda s: -s.duration_s)[:499]
    assert set(longest) <= set(kept.spans)
    assert [s.start_s for s in kept.spans] == sorted(s.start_s for s in kept.spans)


def test_a_first_call_compile_is_named_for_its_function_and_agrees_with_jax_monitoring():
    durations: list[float] = []

    def listen(event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            durations.append(duration)

    @jax.jit
    def fresh_step(x):  # compiled inside the block: a first call
        return jnp.tanh(x @ x) + jnp.sin(x)

    x = jnp.ones((32, 32))
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        with jaxlab.profile() as p:
            fresh_step(x).block_until_ready()
            fresh_step(x).block_until_ready()  # cached: no second compile
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    r = p.result
    (c,) = r.compilations
    assert c.function == "fresh_step"
    assert c.trace_s > 0 and c.lower_s > 0 and c.compile_s > 0
    # XLA's compile as JAX's own monitoring timed it (an independent clock and event)
    (reference,) = durations
    assert c.compile_s == pytest.approx(reference, rel=0.2, abs=2e-3)
    phases = {s.kind: s for s in r.spans if s.lane == "jax"}
    assert set(phases) == {"trace", "lower", "compile"}
    assert {s.name for s in phases.values()} == {"fresh_step"}
    (first, _) = [s for s in r.spans if s.kind == "dispatch"]
    assert first.start_s <= phases["trace"].start_s < phases["compile"].end_s <= first.end_s
    # jnp calls made while tracing (matmul, tanh, sin) are not host dispatches
    assert r.functions() == ["fresh_step"] and r.called == {"fresh_step": 2}
    assert "1 compile (" in str(r) and "fresh_step" in str(r)


def test_syncs_are_marked_on_the_timeline_at_their_line():
    x = jnp.ones((16, 16))
    step(x).block_until_ready()
    with jaxlab.profile() as p:
        for _ in range(4):
            float(step(x).sum())  # planted mark
        jax.device_get(step(x))  # asked for: no mark
    marks = [s for s in p.result.spans if s.kind == "sync"]
    line = _line_of("# planted mark")
    assert len(marks) == 4
    assert {m.name for m in marks} == {
        f"test_profile.py, line {line}: float(step(x).sum())  # planted mark"
    }
    calls = [s for s in p.result.spans if s.kind == "dispatch" and s.name == "step"]
    # each mark lies after the step call whose result it waits for
    for call, mark in zip(calls, marks, strict=False):
        assert mark.start_s >= call.start_s


# ------------------------------------------------------------------------------ the views


def test_static_view_has_one_axis_unit_a_key_no_empty_columns_and_12px_text():
    from jaxlab.timing.profile_svg import KEY, axis_ticks
    from jaxlab.timing.profile_view import profile_html

    unit, factor, ticks = axis_ticks(0.0324)
    assert unit == "ms" and factor == 1e3
    assert ticks[0] == 0 and ticks[-1] <= 0.0324 and len(ticks) >= 4
    assert axis_ticks(2.5)[0] == "s" and axis_ticks(4e-4)[0] == "µs"

    x = jnp.ones((16, 16))
    with jaxlab.profile() as p:
        float(step(x).sum())
    page = profile_html(p.result)
    assert "font:12px" in page and "11px" not in page
    for _, words in KEY:
        assert html_escape(words) in page
    modules_table = page.split("XLA modules, costliest first")[1].split("</table>")[0]
    assert "<th>module</th>" not in modules_table  # a module's module is itself
    assert "<th></th>" not in page
    units = {t.rsplit(" ", 1)[-1] for t in _tick_texts(page)}
    assert len(units) == 1


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


def _tick_texts(page: str) -> list[str]:
    import re

    return re.findall(r'text-anchor="middle" fill="currentColor">([^<]+)</text>', page)


# ------------------------------------------------------------------- the magic's bad input


def test_the_sync_table_names_the_cell_as_it_ran(ip):
    ip.user_ns.update(step=step, x=jnp.ones((8, 8)))
    first = ip.run_cell("1 + 1", store_history=True)
    result = ip.run_cell(CELL, store_history=True)
    assert result.execution_count == first.execution_count + 1
    (site,) = result.result.syncs
    assert site.where == f"In[{result.execution_count}], line 5"


@pytest.mark.parametrize(
    ("cell", "words"),
    [
        ("y = 1\nreturn y", "line 4: `return` outside a function"),
        ("yield 1", "line 3: `yield` outside a function"),
        ("for i in range(2):\n    yield from range(i)", "line 4: `yield from`"),
        ("import asyncio\nawait asyncio.sleep(0)", "line 4: `await` at the top of the cell"),
        ("nonlocal y", "line 3: `nonlocal` at the top of the cell"),
        ("[i async for i in y]", "line 3: an `async for` comprehension"),
        ("class A:\n    return 1", "line 4: 'return' outside function"),
    ],
)
def test_statements_only_a_function_may_hold_are_usage_errors(ip, cell, words):
    before = dict(ip.user_ns)
    with pytest.raises(UsageError, match="%%profile") as caught:
        ip.run_cell_magic("profile", "", "z = 1\n" + cell)
    assert words in str(caught.value)
    assert "z" not in ip.user_ns and ip.user_ns.keys() == before.keys()


def test_a_cell_ipython_cannot_tokenize_is_a_usage_error_with_its_line(ip):
    # found by the fuzz (issue 22): a line unindented to no enclosing level fails in
    # IPython's own transform, before the cell is parsed; it was a raw IndentationError
    before = dict(ip.user_ns)
    with pytest.raises(UsageError, match="%%profile: the cell is not valid Python") as caught:
        ip.run_cell_magic("profile", "", "for k in range(2):\n    y = k\n 0\n")
    assert "unindent does not match" in str(caught.value)
    assert "(line 4)" in str(caught.value)  # the third line of the cell, below %%profile
    assert ip.user_ns.keys() == before.keys()


def test_a_def_in_the_cell_may_return_yield_and_await(ip):
    cell = (
        "def gen():\n    yield 1\n    return 2\n"
        "async def co():\n    await co2()\n"
        "total = sum(gen())"
    )
    ip.run_cell_magic("profile", "-o", cell)
    assert ip.user_ns["total"] == 1


def test_an_unwritable_temporary_directory_is_a_usage_error_where_a_folder_is_needed(
    ip, monkeypatch
):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", "/sys")  # not writable, even for root
    try:
        tempfile.mkdtemp()
    except PermissionError:
        pass
    else:
        pytest.skip("/sys is writable here")
    if hasattr(jax.profiler, "ProfileSession"):  # the trace stays in memory: no folder
        ip.run_cell_magic("profile", "-o", "z = 1")
        assert ip.user_ns["z"] == 1
        return
    with pytest.raises(UsageError, match=r"temporary directory '/sys'.*TMPDIR") as caught:
        ip.run_cell_magic("profile", "", "z = 1")
    assert isinstance(caught.value.__cause__.__cause__.__cause__, PermissionError)
    assert "z" not in ip.user_ns


def test_a_cell_that_starts_the_profiler_is_told_that_profile_holds_it(ip, tmp_path):
    ip.user_ns["folder"] = str(tmp_path)
    for cell in (
        "import jax\nwith jax.profiler.trace(folder):\n    z = 1",
        "from jax import profiler\nprofiler.start_trace(folder)",
        "import jax\njax.profiler.stop_trace()",
    ):
        with pytest.raises(UsageError, match=r"line 3 (starts|stops) jax\.profiler's trace, wh"):
            ip.run_cell_magic("profile", "", cell)
    assert "z" not in ip.user_ns
    # called from a function, it cannot be seen in the cell: JAX's error says who holds it
    ip.user_ns["start"] = lambda: jax.profiler.start_trace(str(tmp_path))
    result = ip.run_cell("%%profile\nstart()")
    assert isinstance(result.error_in_exec, RuntimeError)
    assert any("%%profile" in note for note in result.error_in_exec.__notes__)
    with jaxlab.profile() as p:  # the profiler was released
        pass
    assert p.result is not None
    ip.user_ns["stop"] = jax.profiler.stop_trace  # stopping %%profile's trace from inside
    with pytest.raises(UsageError, match="stopped by the code it traced"):
        ip.run_cell_magic("profile", "", "z = 2\nstop()")
    with jaxlab.profile() as p:  # and the profiler is free again
        pass
    assert p.result is not None


def test_a_profile_inside_a_profile_says_which_holds_the_profiler():
    from jaxlab.timing.profile import ProfileError

    with (
        jaxlab.profile(),
        pytest.raises(ProfileError, match="already running: %%profile"),
        jaxlab.profile(),
    ):
        pass


def test_a_program_compiled_while_another_is_traced_is_named_inside_it():
    @jax.jit
    def outer_fn(x):
        with jax.ensure_compile_time_eval():  # runs (and compiles) while outer_fn is traced
            scale = jnp.cos(jnp.full((13,), 0.5)).sum()
        return x * scale

    x = jnp.ones(3)
    with jaxlab.profile() as p:
        outer_fn(x).block_until_ready()
    r = p.result
    by_name = {c.function: c for c in r.compilations}
    assert by_name["outer_fn"].during == ""
    inner = [c for c in r.compilations if c.during == "outer_fn"]
    assert inner and all(c.function != "outer_fn" for c in inner)
    # the inner compiles happened inside outer_fn's tracing, which counts them once
    outer = by_name["outer_fn"]
    assert sum(c.total_s for c in inner) <= outer.trace_s
    assert r.called == {"outer_fn": 1}  # cos, full, sum while tracing: not host calls
    assert "while tracing outer_fn" in str(r) and "1 compile (" in str(r)


def test_a_library_program_equinox_filter_jit_step():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(3, 1, 8, 1, key=jax.random.key(0))

    @eqx.filter_jit
    def eqx_step(model, x):
        grads = eqx.filter_grad(lambda m: jnp.mean(jax.vmap(m)(x) ** 2))(model)
        return eqx.apply_updates(model, jax.tree.map(lambda g: -0.1 * g, grads))

    x = jnp.ones((4, 3))
    with jaxlab.profile() as p:
        for _ in range(20):
            model = eqx_step(model, x)
        jax.block_until_ready(model)
    r = p.result
    assert r.called == {"eqx_step": 20}
    assert [c.function for c in r.compilations if not c.during] == ["eqx_step"]


def test_fuzzed_cells_are_compiled_or_refused_never_a_raw_syntax_error(ip):
    import random

    from jaxlab.magics.timing import _compile_cell

    heads = ["", "x = ", "y = [", "for i in range(2):\n    ", "if x:\n    ", "with a as b:\n    "]
    bodies = [
        "return 1",
        "yield x",
        "yield from y",
        "await z",
        "nonlocal q",
        "global q",
        "[i async for i in y]",
        "lambda: (yield)",
        "async for i in y: pass",
        "async with a: pass",
        "break",
        "continue",
        "del",
        "(",
        "f'{'",
        "print(*)",
        "def f():\n    return (yield)",
        "class A:\n    return 1",
        "x = 1",
        "%time 1",
        "jax.profiler.trace('/tmp')",
        "profiler.stop_trace()",
        "import jax",
    ]
    rng = random.Random(18)
    outcomes = {"compiled": 0, "refused": 0}
    for _ in range(300):
        cell = "\n".join(rng.choice(heads) + rng.choice(bodies) for _ in range(rng.randint(1, 3)))
        try:
            _compile_cell(ip, "", cell)
            outcomes["compiled"] += 1
        except UsageError as e:
            assert str(e).startswith("%%profile: ")
            outcomes["refused"] += 1
    assert outcomes["compiled"] > 0 and outcomes["refused"] > 0
