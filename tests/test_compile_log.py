"""The compile log: records, explanations, listeners' life, %compile_log, static views."""

import json
import logging
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.compile.capture import is_listening, jaxlab_work
from jaxlab.compile.log import ArgChange, CompileLog
from jaxlab.compile.log_view import (
    OTHER,
    OTHER_NAME,
    PHASES,
    RECOMPILED,
    log_figure,
    log_html,
    log_text,
)
from jaxlab.compile.messages import CallSignature, base_name, explain, short_type

PE_LOGGER = "jax._src.interpreters.partial_eval"
PXLA_LOGGER = "jax._src.interpreters.pxla"


def fresh(name="f"):
    """A new Python function each call (JAX's caches key on the function object)."""

    def f(x):
        return jnp.sin(x).sum()

    f.__name__ = f.__qualname__ = name
    return f


# --------------------------------------------------------------------------- reasons


def signature(fun, args=(), statics=(), config=(), defined_at="a.py:1"):
    return CallSignature.of(
        fun, defined_at=defined_at, user_code=True, args=args, statics=statics, config=config
    )


def test_explain_names_types_static_values_and_config_old_to_new():
    f = fresh()
    before = signature(
        f, (("x", "f32[3]"), ("n", "i32[]")), (("k", "2"),), (("jax_enable_x64", "False"),)
    )
    assert explain([], before) == ("first compilation", ())
    text, changes = explain(
        [before],
        signature(
            f, (("x", "f32[4]"), ("n", "i32[]")), (("k", "3"),), (("jax_enable_x64", "True"),)
        ),
    )
    assert changes == (
        ArgChange("x", "f32[3]", "f32[4]"),
        ArgChange("k (static)", "2", "3"),
        ArgChange("config jax_enable_x64", "False", "True"),
    )
    assert text == "x: f32[3] → f32[4]; k (static): 2 → 3; config jax_enable_x64: False → True"
    same_text, same_changes = explain([before], before)
    assert same_changes == () and same_text.startswith("same function, argument types")
    assert explain([before], None)[0].startswith("compiled again")


def test_explain_compares_with_the_closest_of_a_few_earlier_signatures():
    f = fresh()
    a3 = signature(f, (("x", "f32[3]"), ("y", "f32[2]")))
    b4 = signature(f, (("x", "f32[4]"), ("y", "f32[5]")))
    # back to x: f32[3] with a new y: closest is the older a3 (one change), not b4 (two)
    _, changes = explain([a3, b4], signature(f, (("x", "f32[3]"), ("y", "f32[9]"))))
    assert changes == (ArgChange("y", "f32[2]", "f32[9]"),)


def test_explain_names_a_new_function_object_and_where_it_was_defined():
    old, new = fresh(), fresh()
    text, changes = explain(
        [signature(old, (("x", "f32[3]"),), defined_at="In[3], line 1")],
        signature(new, (("x", "f32[3]"),), defined_at="In[5], line 1"),
    )
    assert changes == ()
    assert text.startswith("new function object at In[5], line 1")
    assert "the last one at In[3], line 1" in text


def test_short_type_and_base_name():
    assert short_type(jax.ShapeDtypeStruct((3, 2), jnp.float32)) == "f32[3,2]"
    assert short_type(jax.ShapeDtypeStruct((), jnp.int8)) == "i8[]"
    assert short_type(jax.ShapeDtypeStruct((2,), jnp.bfloat16)) == "bf16[2]"
    assert short_type(jax.ShapeDtypeStruct((2,), jnp.bool_)) == "bool[2]"
    assert base_name("jit(f)") == "f" and base_name("pmap(<lambda>)") == "<lambda>"
    assert base_name("f") == "f"


# --------------------------------------------------------------------------- the store


def test_record_fills_recompile_and_reason_from_signatures():
    log = CompileLog()
    first = log.record("g", compile_s=0.5, signature=("f32[3]",))
    again = log.record("g", compile_s=0.25, signature=("f32[4]",))
    same = log.record("g", compile_s=0.25, signature=("f32[4]",))
    assert (first.recompile, again.recompile) == (False, True)
    assert first.explanation == "first compilation"
    assert again.changes == (ArgChange("arg 0", "f32[3]", "f32[4]"),)
    assert again.explanation == "arg 0: f32[3] → f32[4]"
    assert same.explanation.startswith("compiled again")  # no call to compare: says so
    (row,) = log.functions()
    assert (row.name, row.count, row.recompiles) == ("g", 3, 2)
    assert row.total_s == pytest.approx(1.0) and row.last_s == pytest.approx(0.25)
    assert log.compile_s == pytest.approx(1.0)


def test_function_rows_are_made_again_only_after_a_compilation_or_a_clear():
    log = CompileLog()
    log.record("g", compile_s=0.5, signature=("f32[3]",))
    rows = log.functions()
    log.add_cell_time(1.0, 0.5)  # a cell that compiled nothing: the same rows
    assert log.functions() is rows
    log.record("h", compile_s=0.25)
    again = log.functions()
    assert again is not rows and [r.name for r in again] == ["h", "g"]
    assert [r.count for r in again] == [1, 1]
    log.clear()
    assert log.functions() == ()
    log.record("g", compile_s=0.5)  # as many compilations as before the clear: made again
    log.record("k", compile_s=0.5)
    assert [(r.name, r.count) for r in log.functions()] == [("k", 1), ("g", 1)]


def test_log_html_kept_by_a_live_view_draws_its_summary_anew_and_its_tables_when_changed():
    log = CompileLog()
    log.record("g", compile_s=0.5, where="In[1], line 1")
    cache: dict = {}
    first = log_html(log, cache)
    log.add_cell_time(2.0, 0.5)  # the summary changes, the tables do not
    second = log_html(log, cache)
    (summary, tables), (summary_2, tables_2) = first.split("</p>", 1), second.split("</p>", 1)
    assert f"{OTHER_NAME} 1.5" not in summary and f"{OTHER_NAME} 1.5" in summary_2
    assert tables == tables_2
    log.record("h", compile_s=0.25)
    third = log_html(log, cache)
    assert "<code>h</code>" in third and "<code>h</code>" not in second
    ids = re.compile(r"jaxlab-cl-\d+")  # (each drawing's anchors have their own ids)
    assert ids.sub("ID", third) == ids.sub("ID", log_html(log))  # as drawn without one


def test_store_is_bounded_and_counts_the_rest():
    log = CompileLog(maxlen=3)
    for i in range(5):
        log.record(f"f{i}", compile_s=1.0)
    assert len(log) == 3 and log.count == 5 and log.dropped == 2
    assert [e.index for e in log.events] == [2, 3, 4]
    assert log.compile_s == pytest.approx(5.0)  # totals cover dropped events too
    data = json.loads(log.to_json())
    assert data["count"] == 5 and data["dropped"] == 2 and len(data["events"]) == 3
    assert data["events"][0]["fun_name"] == "f2"


def test_cell_time_splits_compiling_and_jaxlabs_work_from_the_rest_and_subscribers_hear_it():
    log = CompileLog()
    heard = []
    unsubscribe = log.subscribe(heard.append)
    log.record("f", compile_s=0.5)
    log.add_cell_time(2.0, 0.5, 0.25)
    assert log.other_s == pytest.approx(1.25) and log.cell_s == pytest.approx(2.0)
    unsubscribe()
    log.record("f", compile_s=0.5)
    assert heard == ["event", "cell"]
    log.clear()
    assert (log.count, len(log), log.compile_s, log.other_s) == (0, 0, 0.0, 0.0)


# --------------------------------------------------------------------------- listening


def test_phases_cache_hits_and_new_shape():
    log = CompileLog()
    f = jax.jit(fresh("phased"))
    x3, x4 = jnp.ones(3), jnp.ones(4)
    with log.recording():
        f(x3)
        after_first = log.for_function("phased")
        f(x3)  # a cache hit: no event
        after_hit = log.for_function("phased")
        f(x4)
    events = log.for_function("phased")
    assert len(after_first) == 1 and after_hit == after_first and len(events) == 2
    first, second = events
    assert first.trace_s > 0 and first.lower_s > 0 and first.compile_s > 0
    assert first.signature == ("f32[3]",) and not first.recompile
    assert second.recompile and second.signature == ("f32[4]",)
    assert second.changes == (ArgChange("x", "f32[3]", "f32[4]"),)
    assert "x" in second.explanation and "f32[3]" in second.explanation
    assert "f32[4]" in second.explanation
    assert first.where.startswith("test_compile_log.py:")
    assert first.persistent_cache == "off"


def test_listening_changes_no_config_and_no_logger():
    log = CompileLog()
    loggers = [logging.getLogger(n) for n in ("jax", PE_LOGGER, PXLA_LOGGER)]

    def state():
        return (
            jax.config.jax_explain_cache_misses,
            [(lg.level, lg.propagate, list(lg.handlers), list(lg.filters)) for lg in loggers],
        )

    before = state()
    with log.recording():
        assert is_listening(log)
        assert state() == before  # nothing switched on, no handler, no level
        jax.jit(fresh("untouched"))(jnp.ones(2))
    assert state() == before and not is_listening(log)
    assert len(log.for_function("untouched")) == 1


def _compiling_records(run):
    """JAX's "Compiling ..." records that a user's own DEBUG handler on `jax` receives."""
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    jax_logger = logging.getLogger("jax")
    handler, level = Keep(logging.DEBUG), jax_logger.level
    jax_logger.addHandler(handler)
    jax_logger.setLevel(logging.DEBUG)
    try:
        run()
    finally:
        jax_logger.removeHandler(handler)
        jax_logger.setLevel(level)
    return [m.split(" with ")[0] for m in seen if m.startswith("Compiling ")]


def test_users_debug_logging_gets_jaxs_records_as_without_jaxlab(ip):
    # With the extension loaded, a user who turns JAX's logger to DEBUG with a handler of
    # their own gets the same "Compiling ..." records as a session without jaxlab.
    def compile_three():
        f = jax.jit(fresh("logged"))
        f(jnp.ones(2))
        f(jnp.ones(3))
        f(jnp.ones(4))

    with_jaxlab = _compiling_records(compile_three)
    ip.run_line_magic("unload_ext", "jaxlab")
    try:
        without = _compiling_records(compile_three)
    finally:
        ip.run_line_magic("load_ext", "jaxlab")
    assert with_jaxlab == without == ["Compiling jit(logged)"] * 3
    assert len(jaxlab.compile_log().for_function("logged")) == 3


def test_jaxlab_work_is_counted_apart_not_logged():
    log = CompileLog()
    with log.recording():
        with jaxlab_work():
            jax.jit(fresh("ours"))(jnp.ones(5))
        jax.jit(fresh("theirs"))(jnp.ones(5))
    assert log.for_function("ours") == () and len(log.for_function("theirs")) == 1
    assert log.jaxlab_count >= 1 and log.jaxlab_s > 0
    assert all(e.fun_name != "ours" for e in log.events)


def test_static_argument_and_random_normal_shape_are_named():
    import functools

    log = CompileLog()
    key = jax.random.key(0)

    @functools.partial(jax.jit, static_argnames="n")
    def power(x, n):
        return x**n

    with log.recording():
        power(jnp.ones(3), n=2)
        power(jnp.ones(3), n=3)
        # shapes no other test draws: JAX compiles both here, whatever ran before
        jax.random.normal(key, (3, 7, 1))
        jax.random.normal(key, (2, 5, 1))
    _, again = log.for_function("power")
    assert again.recompile and again.changes == (ArgChange("n (static)", "2", "3"),)
    # jax.random.normal run outside jit is one of JAX's eager operations: compiled once
    # per shape by design, grouped, never a recompilation with a reason
    normal = [e for e in log.events if e.fun_name == "_normal"]
    assert len(normal) == 2 and all(e.eager and not e.recompile for e in normal)
    assert not normal[-1].user_code and normal[-1].changes == ()
    assert again.user_code and again.defined_at.startswith("test_compile_log.py:")


def test_config_change_is_named():
    log = CompileLog()
    f = jax.jit(fresh("precise"))
    with log.recording():
        f(jnp.ones(3))
        with jax.default_matmul_precision("highest"):
            f(jnp.ones(3))
    _, again = log.for_function("precise")
    (change,) = again.changes
    assert change.name == "config jax_default_matmul_precision"
    assert (change.before, change.after) == ("None", "highest")


def test_nested_recording_logs_each_compile_once():
    log = CompileLog()
    with log.recording(), log.recording():
        jax.jit(fresh("nested"))(jnp.ones(2))
    assert len(log.for_function("nested")) == 1


PERSISTENT_CACHE_SCRIPT = """
import json, sys, tempfile
import jax, jax.numpy as jnp
from jaxlab.compile.log import CompileLog
jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp())
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
x = jnp.ones(3)
def f(x):
    return jnp.sin(x) * 3
log = CompileLog()
with log.recording():
    jax.jit(f)(x)
    jax.clear_caches()  # the in-memory caches: the next call asks the persistent cache
    jax.jit(f)(x)
print(json.dumps([e.persistent_cache for e in log.for_function("f")]))
"""


def test_persistent_cache_hit_and_miss_quietly():
    # A process of its own: the persistent cache is configured once per process.
    done = subprocess.run(
        [sys.executable, "-c", PERSISTENT_CACHE_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["miss", "hit"]
    assert "PERSISTENT" not in done.stderr and "TRACING CACHE MISS" not in done.stderr


# --------------------------------------------------------------------------- the extension


def test_extension_logs_compiles_with_cell_location(ip):
    ip.run_cell("import jax, jax.numpy as jnp\ndef f(x):\n    return x * 2", store_history=True)
    n = ip.execution_count
    before = jaxlab.compile_log().count
    ip.run_cell("y = jax.jit(f)(jnp.ones(3))", store_history=True)
    ip.run_cell("y = jax.jit(f)(jnp.ones(3))", store_history=True)
    events = [e for e in jaxlab.compile_log().events if e.index >= before and e.fun_name == "f"]
    assert len(events) == 1
    assert events[0].where == f"In[{n}], line 1"


def test_compiles_while_a_magic_reads_its_arguments_name_the_cell(ip):
    # `jnp.full` runs eagerly while %jit evaluates its arguments: the log names the
    # user's cell, not jaxlab's own evaluation of the line.
    ip.run_cell("import jax, jax.numpy as jnp\ndef g(x):\n    return x + 1", store_history=True)
    n = ip.execution_count
    # An earlier test may have compiled the same eager broadcast: start from no cache.
    jax.clear_caches()
    before = jaxlab.compile_log().count
    ip.run_cell("%jit -o g(jnp.full((5, 3), 2.0))", store_history=True)
    events = [e for e in jaxlab.compile_log().events if e.index >= before]
    eager = [e for e in events if e.fun_name == "broadcast_in_dim"]  # jnp.full, eagerly
    assert eager and all(e.where == f"In[{n}], line 1" for e in eager), [
        (e.fun_name, e.where) for e in events
    ]


def test_unload_and_reload_log_each_compile_once(ip):
    ip.run_line_magic("unload_ext", "jaxlab")
    assert not is_listening(jaxlab.compile_log())
    f = fresh("unloaded")
    jax.jit(f)(jnp.ones(2))
    assert jaxlab.compile_log().for_function("unloaded") == ()
    ip.run_line_magic("load_ext", "jaxlab")
    ip.run_line_magic("unload_ext", "jaxlab")
    ip.run_line_magic("load_ext", "jaxlab")
    jax.jit(fresh("reloaded"))(jnp.ones(2))
    jax.jit(fresh("reloaded"))(jnp.ones(3))
    events = jaxlab.compile_log().for_function("reloaded")
    assert len(events) == 2


def test_compile_log_magic(ip):
    log = ip.run_line_magic("compile_log", "-o")
    assert log is jaxlab.compile_log()
    with capture_output() as out:
        ip.run_line_magic("compile_log", "")
    widget_output, twin = out.outputs  # the live view, then its static twin
    assert "application/vnd.jupyter.widget-view+json" in widget_output.data
    assert "CompileLog:" in twin.data["text/plain"] and "<table" in twin.data["text/html"]
    with capture_output() as again:
        ip.run_line_magic("compile_log", "")
    again_output, _ = again.outputs
    model = "application/vnd.jupyter.widget-view+json"
    assert again_output.data[model]["model_id"] == widget_output.data[model]["model_id"]
    with capture_output() as out:
        ip.run_line_magic("compile_log", "--static --last 5")
    kinds = [set(o.data) for o in out.outputs]
    assert {"text/html", "text/plain"} <= kinds[0] and "image/png" in kinds[1]
    with pytest.raises(UsageError, match="--last must be a positive number"):
        ip.run_line_magic("compile_log", "--last 0")
    with pytest.raises(UsageError, match="see %compile_log"):
        ip.run_line_magic("compile_log", "--nope")


def test_cells_are_timed(ip):
    log = jaxlab.compile_log()
    cell_before = log.other_s + log.compile_s
    ip.run_cell("import time\ntime.sleep(0.05)", store_history=True)
    assert log.other_s + log.compile_s >= cell_before + 0.05


# --------------------------------------------------------------------------- static views


def test_views_escape_and_show_every_function():
    log = CompileLog()
    log.record("<lambda>", compile_s=0.01, signature=("f32[3]",))
    log.record("<lambda>", compile_s=0.02, signature=("f32[4]",), where="In[2], line 1")
    log.record("g", trace_s=0.001, lower_s=0.002, compile_s=0.003)
    html = log_html(log)
    assert "&lt;lambda&gt;" in html and "<lambda>" not in html
    assert "arg 0: f32[3] → f32[4]" in html and "In[2], line 1" in html
    text = log_text(log)
    assert "<lambda>: 2×" in text and "g: 1×" in text
    assert "1 recompilation" in text and "1 recompilations" not in text
    fig = log_figure(log)
    (ax,) = fig.axes
    assert len(ax.containers) == 3  # trace, lower, compile
    assert [len(c) for c in ax.containers] == [3, 3, 3]
    assert ax.containers[2][0].get_width() == pytest.approx(3.0)  # ms; newest at the top
    assert ax.get_yticklabels()[0].get_text() == "#2 g"


def _record_user(log, name, explanation=None, **kw):
    call = CallSignature.of(fresh(name), defined_at="a.py:1", user_code=True)
    return log.record(name, call=call, explanation=explanation, **kw)


def test_plurals_and_zero_times_read_right():
    log = CompileLog()
    log.record("f", compile_s=0.002)
    text, page = log_text(log), log_html(log)
    assert "1 compilation of 1 function ·" in text and "1 compilation of 1 function" in page
    assert "compilations" not in text.splitlines()[0] and "functions" not in page
    assert "µs" not in text.splitlines()[0]
    # no cells timed (a script's recording): nothing to compare compiling with
    assert "other cell time" not in text.splitlines()[0] and "% compiling" not in text
    log.record("g", compile_s=0.001)
    assert "2 compilations of 2 functions" in log_text(log)
    log.add_cell_time(0.003, 0.003)  # a cell that only compiled
    first = log_text(log).splitlines()[0]
    assert "other cell time 0 s (100% compiling)" in first


def test_recompile_count_links_to_its_reasons_and_colours_have_one_legend():
    log = CompileLog()
    _record_user(log, "f", compile_s=0.001, signature=("f32[3]",))
    _record_user(log, "f", "x: f32[3] → f32[4]", compile_s=0.001)
    _record_user(log, "f", "x: f32[4] → f32[5]", compile_s=0.001)
    page = log_html(log)
    link = re.search(r'<a href="#([\w-]+)">2 recompilations</a>', page)
    assert link is not None
    reasons = re.search(rf'<td id="{link.group(1)}"><ul class="reasons">(.*?)</ul>', page)
    assert reasons is not None
    items = re.findall(r"<li>#(\d+): ([^<]*)", reasons.group(1))
    assert items == [("2", "x: f32[4] → f32[5]"), ("1", "x: f32[3] → f32[4]")]  # newest first
    legend = re.search(r'<span class="jaxlab-cl-legend">(.*?)</span>(?:</p>)', page).group(1)
    for name, colour in (*PHASES, (OTHER_NAME, OTHER), ("recompiled", RECOMPILED)):
        assert colour in legend and name in legend
    # red only ever marks a recompilation: no phase or share bar uses it
    assert RECOMPILED not in {c for _, c in PHASES} | {OTHER}
    assert page.count(f"border-left:3px solid {RECOMPILED}") == 2 + 1  # two bars + legend


def test_library_functions_fold_away_below_the_users():
    log = CompileLog()
    _record_user(log, "mine", compile_s=0.001)
    theirs = CallSignature.of(jnp.sin, defined_at="ufuncs.py:1", user_code=False)
    log.record("sin", call=theirs, compile_s=0.001)
    assert [r.name for r in log.functions(mine_only=True)] == ["mine"]
    page = log_html(log)
    mine_at, details_at = page.index("<code>mine</code>"), page.index("<details>")
    assert mine_at < details_at < page.index("<code>sin</code>")
    assert "1 compilation of 1 function from JAX and libraries" in page
    (ax,) = log_figure(log).axes  # the chart draws the user's by default
    assert [t.get_text() for t in ax.get_yticklabels()] == ["#0 mine"]
    (ax,) = log_figure(log, mine_only=False).axes
    assert len(ax.get_yticklabels()) == 2


def test_user_text_is_never_read_as_mathtext(ip):
    import io

    log = jaxlab.compile_log()
    log.clear()
    _record_user(log, "cost$", compile_s=0.001)
    reason = r"a $\frac{bad$ reason $x^2$"
    _record_user(log, "cost$", reason, compile_s=0.002)
    fig = log_figure(log)
    fig.savefig(io.BytesIO(), format="png")  # matplotlib would raise on the bad TeX
    (ax,) = fig.axes
    assert [t.get_text() for t in ax.texts] == [reason]
    assert ax.texts[0].get_parse_math() is False
    with capture_output() as out:
        ip.run_line_magic("compile_log", "--static")
        ip.run_line_magic("compile_log", "--static")  # and again: the next call too
    assert sum("image/png" in o.data for o in out.outputs) == 2


def test_chart_is_sized_to_its_content():
    import io

    from PIL import Image

    def width(reason):
        log = CompileLog()
        _record_user(log, "f", compile_s=0.004)
        _record_user(log, "f", reason, compile_s=0.002)
        fig = log_figure(log)
        (ax,) = fig.axes
        assert ax.get_xlim()[1] == pytest.approx(4.0 * 1.02)  # the longest bar fills it
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
        drawn = ax.texts[0].get_text()
        assert drawn.replace("\n", " ") == reason.strip()  # wrapped, not cut
        return Image.open(io.BytesIO(buffer.getvalue())).size[0]

    short, long = width("x: f32[3] → f32[4]"), width("x: f32[3] → f32[4]; " * 5)
    assert long > short + 150  # the figure grows with its reasons ...
    assert short < 700  # ... and is no wider than its content needs


# --------------------------------------------------------------------------- the lesson

LESSON_SETUP = """import jax, jax.numpy as jnp
def mlp(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return x.sum()
def waves(x):
    return jnp.sin(x) * 2
params = [(jnp.ones((4, 8)) * 0.1, jnp.zeros(8)), (jnp.ones((8, 1)) * 0.1, jnp.zeros(1))]
x = jnp.ones((2, 4))"""


def test_lesson_logs_one_user_recompile_with_its_reason_and_none_of_jaxlabs_work(ip):
    log = jaxlab.compile_log()
    ip.run_cell(LESSON_SETUP, store_history=True)
    ip.run_line_magic("compile_log", "--clear")
    with capture_output():
        assert ip.run_cell("%grad mlp(params, x)", store_history=True).success
        count, ours = log.count, log.jaxlab_count
        # drawing the gradient graph and checking it against finite differences compile
        # dozens of programs: jaxlab's work, counted apart, none of it in the log
        assert ip.run_cell("%grad --graph mlp(params, x)", store_history=True).success
        assert ip.run_cell("%grad --check mlp(params, x)", store_history=True).success
        assert log.count == count and log.jaxlab_count > ours + 10
        assert ip.run_cell("%grad waves(jnp.ones(3))", store_history=True).success  # Jacobian
        cell = "jf = jax.jit(mlp)\njf(params, x)\njf(params, jnp.ones((3, 4)))"
        assert ip.run_cell(cell, store_history=True).success
    n = ip.execution_count - 1
    mine = [e for e in log.events if e.user_code]
    assert [(e.fun_name, e.recompile) for e in mine] == [("mlp", False), ("mlp", True)]
    recompiled = mine[1]
    assert recompiled.changes == (ArgChange("x", "f32[2,4]", "f32[3,4]"),)
    assert recompiled.where == f"In[{n}], line 3"
    first_row = log.functions(mine_only=True)[0]
    assert first_row.name == "mlp" and first_row.recompiles == 1
    text = log_text(log)
    assert "x: f32[2,4] → f32[3,4]" in text.split("last compilations:")[0]


def test_a_rerun_cell_names_the_new_function_object(ip):
    cell = "import jax, jax.numpy as jnp\nstep = jax.jit(lambda x: x + 1)\ny = step(jnp.ones(2))"
    ip.run_cell(cell, store_history=True)
    first = ip.execution_count - 1
    ip.run_cell(cell, store_history=True)
    second = ip.execution_count - 1
    *_, again = jaxlab.compile_log().for_function("<lambda>")
    assert again.recompile and again.changes == ()
    assert again.explanation.startswith(f"new function object at In[{second}], line 2")
    assert f"the last one at In[{first}], line 2" in again.explanation
    assert again.where == f"In[{second}], line 3"


def test_equinox_filter_jit_is_the_users_function_with_its_reason():
    # equinox jits a wrapper of its own (in site-packages) named after the user's function
    # and passes the user's function as a static argument: the log credits the user's.
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(3, 1, 8, 2, key=jax.random.key(0))

    @eqx.filter_jit
    def mlp_loss(model, x):
        return jnp.sum(jax.vmap(model)(x) ** 2)

    log = CompileLog()
    with log.recording():
        mlp_loss(model, jnp.ones((4, 3)))
        mlp_loss(model, jnp.ones((5, 3)))
    first, again = log.for_function("mlp_loss")
    assert first.user_code and again.user_code and again.recompile
    assert [r.name for r in log.functions(mine_only=True)] == ["mlp_loss"]
    (change,) = again.changes
    assert (change.before, change.after) == ("f32[4,3]", "f32[5,3]")
    assert first.defined_at.startswith("test_compile_log.py:")  # not equinox's _jit.py


def test_compile_report_logs_the_users_one_compilation_and_flax_nnx_names_the_argument():
    log = CompileLog()
    x = jnp.ones(3)
    reported = fresh("reported")
    with log.recording():
        report = jaxlab.compile_report(reported, x)  # trace, lower, compile, then runs
    (event,) = log.for_function("reported")  # the runs reuse it: nothing of jaxlab's
    assert event.user_code and report.compile_s > 0
    nnx = pytest.importorskip("flax.nnx")
    model = nnx.Linear(3, 2, rngs=nnx.Rngs(0))

    @nnx.jit
    def forward(model, x):
        return model(x).sum()

    with log.recording():
        forward(model, jnp.ones((4, 3)))
        forward(model, jnp.ones((5, 3)))
    _, again = log.for_function("forward")
    assert again.user_code and again.changes == (ArgChange("x", "f32[4,3]", "f32[5,3]"),)


# --------------------------------------------------------------------------- eager operations

EAGER_SETUP = """import jax, jax.numpy as jnp
def mlp_loss(params, x):
    for w, b in params:
        x = jnp.tanh(x @ w + b)
    return jnp.mean(x ** 2)
params = [(jnp.ones((4, 8)) * 0.1, jnp.zeros(8)), (jnp.ones((8, 1)) * 0.1, jnp.zeros(1))]
xb = jnp.ones((2, 4))"""


def test_an_eager_mlp_lesson_logs_no_recompile_and_groups_its_operations(ip):
    # JAX caches eager operations per process: sizes no other test uses (6 → 9 → 1)
    log = jaxlab.compile_log()
    setup = EAGER_SETUP.replace("(4, 8)", "(6, 9)").replace("zeros(8)", "zeros(9)")
    ip.run_cell(setup.replace("(8, 1)", "(9, 1)").replace("(2, 4)", "(5, 6)"))
    ip.run_line_magic("compile_log", "--clear")
    with capture_output():
        assert ip.run_cell("%grad mlp_loss(params, xb)", store_history=True).success
        # the lesson runs its loss eagerly on two more batch sizes: op by op, by design
        cell = "mlp_loss(params, jnp.ones((7, 6)))\nmlp_loss(params, jnp.ones((11, 6)))"
        assert ip.run_cell(cell, store_history=True).success
    assert log.count > 0 and not any(e.recompile for e in log.events)
    assert all(e.eager and not e.user_code and e.changes == () for e in log.events)
    ops = log.eager_operations()
    assert ops.count == log.count == log.eager_count
    by_name = {r.name: r for r in ops.rows}
    # each operation once per shape it met: both layers' matmuls at both batch sizes
    assert by_name["matmul"].shapes == (
        "f32[7,6], f32[6,9]",
        "f32[7,9], f32[9,1]",
        "f32[11,6], f32[6,9]",
        "f32[11,9], f32[9,1]",
    )
    assert by_name["matmul"].count == 4 and by_name["matmul"].recompiles == 0
    assert by_name["tanh"].shapes == ("f32[7,9]", "f32[7,1]", "f32[11,9]", "f32[11,1]")
    text, page = log_text(log), log_html(log)
    assert "recompil" not in text and "JAX does not say why" not in text
    assert "0 compilations of 0 functions" in text
    assert f"{ops.count} compilations of {len(ops.rows)} eager operations" in text
    assert "jax.jit(f) compiles a whole function once" in text
    assert "eager operations of JAX (run outside jax.jit)" in page
    assert page.count(f"border-left:3px solid {RECOMPILED}") == 1  # the legend's key only
    (mine,) = log_figure(log).axes  # the user's chart: nothing of theirs, and it says why
    assert mine.get_title(loc="left").endswith(f"({ops.count} eager operations not drawn)")
    (ax,) = log_figure(log, mine_only=False).axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels and all(label.endswith(" (eager)") for label in labels) and not ax.texts


def test_a_users_jit_of_a_jax_function_is_the_users_not_eager():
    log = CompileLog()
    with log.recording():
        sin = jax.jit(jnp.sin)  # the user jitted it: a recompile is theirs to know about
        sin(jnp.ones(3))
        sin(jnp.ones(4))
    first, again = log.for_function("sin")[-2:]
    assert not first.eager and again.recompile
    assert again.changes == (ArgChange("x", "f32[3]", "f32[4]"),)


def test_grad_leaves_no_user_event_and_its_work_is_timed_apart(ip):
    log = jaxlab.compile_log()
    ip.run_cell(EAGER_SETUP + "\njf = jax.jit(mlp_loss)", store_history=True)
    ip.run_line_magic("compile_log", "--clear")
    with capture_output():
        assert ip.run_cell("%grad mlp_loss(params, xb)", store_history=True).success
        assert ip.run_cell("%grad jf(params, xb)", store_history=True).success
    # value and gradient of an eager and of a jitted function: jaxlab's evaluation
    assert log.count == 0 and log.events == ()
    assert log.jaxlab_count > 0 and log.jaxlab_work_s > log.jaxlab_s > 0
    with capture_output():
        assert ip.run_cell("jf(params, xb)", store_history=True).success
    (event,) = log.events  # the user's own call still compiles, and is the user's
    assert event.fun_name == "mlp_loss" and event.user_code and not event.recompile


def test_other_cell_time_is_what_is_left_of_the_cells(ip):
    # "other cell time" is a cell's wall time less the user's compiling and jaxlab's own
    # work: a sleeping cell adds its sleep to it, %grad --check adds little to it.
    log = jaxlab.compile_log()
    ip.run_cell(EAGER_SETUP, store_history=True)
    with capture_output():
        ip.run_cell("%grad mlp_loss(params, xb)", store_history=True)  # warm the caches
    before = (log.other_s, log.jaxlab_work_s, log.cell_s)
    with capture_output():
        assert ip.run_cell("%grad --check mlp_loss(params, xb)", store_history=True).success
    other, work, cell = (
        a - b for a, b in zip((log.other_s, log.jaxlab_work_s, log.cell_s), before, strict=True)
    )
    assert work > 0 and other + work == pytest.approx(cell, rel=1e-6, abs=1e-6)
    assert other < work  # the check is jaxlab's work, not the user's code running
    before_sleep = log.other_s
    ip.run_cell("import time\ntime.sleep(0.1)", store_history=True)
    assert log.other_s - before_sleep >= 0.1
    text = log_text(log)
    assert "other cell time" in text.splitlines()[0] and "running" not in text.splitlines()[0]
    assert "jaxlab's own work" in text.splitlines()[0]


# --------------------------------------------------------------------------- readable


def test_chart_text_is_12_px_and_fits_a_1280_screen_and_weak_types_are_explained():
    import io

    from PIL import Image

    log = CompileLog()
    _record_user(log, "f", compile_s=0.004)
    reason = "x: f32[] → f32[]{weak}; " + "y: f32[3] → f32[4]; " * 8  # 190 characters
    _record_user(log, "f", reason, compile_s=0.002)
    fig = log_figure(log)
    texts = [t for t in fig.findobj(lambda o: hasattr(o, "get_fontsize") and o.get_text())]
    sizes = {t.get_text()[:20]: t.get_fontsize() * 96 / 72 for t in texts}
    assert min(sizes.values()) >= 12, sizes  # px at the 96 dpi %compile_log saves at
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    width = Image.open(io.BytesIO(buffer.getvalue())).size[0]
    assert width <= 1000  # shown unscaled in a notebook on a 1280×720 projector
    (ax,) = fig.axes
    assert ax.texts[0].get_text().count("\n") == 1 and ax.texts[0].get_text().endswith("…")
    assert any("weakly typed value, from a Python scalar" in t.get_text() for t in fig.texts)
    for view in (log_text(log), log_html(log)):
        assert "{weak}: a weakly typed value, from a Python scalar" in view
    plain = CompileLog()
    plain.record("g", signature=("f32[3]",))
    assert "weakly typed" not in log_text(plain) + log_html(plain)


# --------------------------------------------------------------------------- the monitor's life


def test_unload_leaves_no_subscriber(ip):
    from jaxlab.widgets import CompileMonitor

    log = jaxlab.compile_log()
    before = log.subscribers
    with capture_output():
        ip.run_line_magic("compile_log", "")
    mine = CompileMonitor()  # one a user made by hand follows the session log too
    assert log.subscribers == before + 2 and mine.subscribed
    shown = sys.modules["jaxlab.magics.compile_log"]._MONITOR
    ip.run_line_magic("unload_ext", "jaxlab")
    try:
        assert log.subscribers == 0 and not mine.subscribed and not shown.subscribed
        jax.jit(fresh("after_unload"))(jnp.ones(2))  # nothing listens, nothing is told
        assert all(r["name"] != "after_unload" for r in mine.functions)
    finally:
        ip.run_line_magic("load_ext", "jaxlab")
        mine.close()
    with capture_output():
        ip.run_line_magic("compile_log", "")  # a new view, subscribed again
    again = sys.modules["jaxlab.magics.compile_log"]._MONITOR
    assert again is not shown and again.subscribed and log.subscribers == 1


def test_a_failing_push_is_logged_once_and_retried(monkeypatch, caplog):
    import time

    from jaxlab.widgets import CompileMonitor, compile_monitor

    monkeypatch.setattr(compile_monitor, "RETRY_S", 0.05)
    log = CompileLog()
    monitor = CompileMonitor(log)
    real_state, failures = monitor.state, [3]

    def flaky():
        if failures[0]:
            failures[0] -= 1
            raise ConnectionError("the kernel's channel is gone")
        return real_state()

    monkeypatch.setattr(monitor, "state", flaky)
    try:
        with caplog.at_level(logging.WARNING, logger=compile_monitor.__name__):
            log.add_cell_time(0.1, 0.0)  # pushed at once: fails, and is retried ...
            log.record("late", compile_s=0.01)  # ... a change meanwhile fails too
            deadline = time.monotonic() + 5
            while failures[0] and time.monotonic() < deadline:
                time.sleep(0.02)
            while monitor.failed_pushes and time.monotonic() < deadline:
                time.sleep(0.02)
        assert failures == [0] and monitor.failed_pushes == 0
        assert [r["name"] for r in monitor.functions] == ["late"]  # the latest state, sent
        warnings = [r for r in caplog.records if r.name == compile_monitor.__name__]
        assert len(warnings) == 1 and "retrying" in warnings[0].getMessage()
    finally:
        monitor.close()
    # a subscriber that raises never fails the compilation that notified it
    log.subscribe(lambda kind: 1 / 0)
    log.record("still_logged")
    assert log.for_function("still_logged") and "ZeroDivisionError" in log.capture_errors[-1]


def test_the_logs_asides_are_never_drawn_under_12_px():
    """Where a recompile came from (``In[3], line 9``) is an aside in <small>: quieter, not
    smaller than 12 px (a browser's <small> of the log's 13 px is 10.8 px; the docs'
    reading check found it on the site)."""
    from jaxlab.compile.log_view import _STYLE

    assert ".jaxlab-compile-log small{font-size:max(12px," in _STYLE
