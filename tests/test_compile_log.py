"""The compile log: records, explanations, listeners' life, %compile_log, static views."""

import json
import logging
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.compile.capture import _Handler, is_listening
from jaxlab.compile.log import ArgChange, CompileLog
from jaxlab.compile.log_view import log_figure, log_html, log_text
from jaxlab.compile.messages import base_name, parse_explanation, short_type

PE_LOGGER = "jax._src.interpreters.partial_eval"


def fresh(name="f"):
    """A new Python function each call (JAX's caches key on the function object)."""

    def f(x):
        return jnp.sin(x).sum()

    f.__name__ = f.__qualname__ = name
    return f


# --------------------------------------------------------------------------- parsing


def test_parse_type_change_names_argument_and_both_shapes():
    message = (
        "TRACING CACHE MISS at /tmp/a.py:23 (<module>):\n"
        "  for f defined at /tmp/a.py:17\n"
        "  all previously seen cache keys differ. For the closest previous key:\n"
        "  different input types:\n"
        "  * at x, now f32[4,4] and before f32[3,3]\n"
        "  * at y, now f32[4] and before f32[3]"
    )
    parsed = parse_explanation(message)
    assert parsed is not None and parsed.fun_name == "f" and not parsed.new_function
    assert parsed.changes == (
        ArgChange("x", "f32[3,3]", "f32[4,4]"),
        ArgChange("y", "f32[3]", "f32[4]"),
    )
    assert parsed.text == "x: f32[3,3] → f32[4,4]; y: f32[3] → f32[4]"


def test_parse_never_seen_and_other_reasons():
    seen = parse_explanation(
        "TRACING CACHE MISS at a.py:1 (<module>):\n  never seen function:\n"
        "    Model.__call__ id=1234 defined at a.py:3"
    )
    assert seen is not None and seen.new_function and seen.fun_name == "Model.__call__"
    header = (
        "TRACING CACHE MISS at a.py:1 (<module>):\n  for g defined at a.py:1\n"
        "  all previously seen cache keys differ. For the closest previous key:\n"
    )
    static = parse_explanation(  # JAX 0.10's words for a new static keyword value
        header + "  different input pytree:\n  * at input path [1]['n'], now <class "
        "'jax._src.tree_util.Static'> with pytree metadata Static(val=4) and before <class "
        "'jax._src.tree_util.Static'> with pytree metadata Static(val=3), so the pytree node "
        "metadata does not match"
    )
    assert static is not None and static.changes == (ArgChange("n (static)", "3", "4"),)
    tree = parse_explanation(
        header + "  different input pytree:\n  * at input path [0][0], now <class 'dict'> "
        "with 2 children and before <class 'dict'> with 1 child, so the numbers of children "
        "do not match, with the symmetric difference of key sets: {'b'}"
    )
    assert tree is not None and tree.changes == () and tree.text is not None
    assert "symmetric difference of key sets: {'b'}" in tree.text
    unavailable = parse_explanation(header + "  cache miss explanation unavailable")
    assert unavailable is not None and unavailable.text is None  # the log compares signatures
    assert not unavailable.new_function
    assert parse_explanation("something else") is None


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
    assert "static argument" in same.explanation
    (row,) = log.functions()
    assert (row.name, row.count, row.recompiles) == ("g", 3, 2)
    assert row.total_s == pytest.approx(1.0) and row.last_s == pytest.approx(0.25)
    assert log.compile_s == pytest.approx(1.0)


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


def test_cell_time_splits_running_from_compiling_and_subscribers_hear_it():
    log = CompileLog()
    heard = []
    unsubscribe = log.subscribe(heard.append)
    log.record("f", compile_s=0.5)
    log.add_cell_time(2.0, 0.5)
    assert log.running_s == pytest.approx(1.5)
    unsubscribe()
    log.record("f", compile_s=0.5)
    assert heard == ["event", "cell"]
    log.clear()
    assert (log.count, len(log), log.compile_s, log.running_s) == (0, 0, 0.0, 0.0)


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


def test_listening_restores_config_and_loggers():
    log = CompileLog()
    logger = logging.getLogger(PE_LOGGER)
    before = (
        jax.config.jax_explain_cache_misses,
        logger.level,
        logger.propagate,
        list(logger.handlers),
    )
    with log.recording():
        assert jax.config.jax_explain_cache_misses is True
        assert is_listening(log)
    after = (
        jax.config.jax_explain_cache_misses,
        logger.level,
        logger.propagate,
        list(logger.handlers),
    )
    assert after == before and not is_listening(log)


def test_explanations_reach_user_handlers_only_if_the_user_asked(monkeypatch):
    seen = []

    class Keep(logging.Handler):
        def emit(self, record):
            seen.append(record.getMessage())

    handler = Keep(logging.DEBUG)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        log = CompileLog()
        with log.recording():
            jax.jit(fresh("quiet"))(jnp.ones(2))
        assert not any("TRACING CACHE MISS" in m for m in seen)
        assert not any(m.startswith("Compiling") for m in seen)  # DEBUG, not for the user
        jax.config.update("jax_explain_cache_misses", True)
        try:
            with log.recording():
                jax.jit(fresh("loud"))(jnp.ones(2))
        finally:
            jax.config.update("jax_explain_cache_misses", False)
        assert any("TRACING CACHE MISS" in m and "loud" in m for m in seen)
        assert len(log.for_function("loud")) == 1
    finally:
        root.removeHandler(handler)


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
    before = jaxlab.compile_log().count
    ip.run_cell("%jit -o g(jnp.full((5,), 2.0))", store_history=True)
    events = [e for e in jaxlab.compile_log().events if e.index >= before]
    eager = [e for e in events if e.fun_name == "broadcast_in_dim"]  # jnp.full, eagerly
    assert eager and all(e.where == f"In[{n}], line 1" for e in eager), [
        (e.fun_name, e.where) for e in events
    ]


def test_unload_and_reload_log_each_compile_once(ip):
    ip.run_line_magic("unload_ext", "jaxlab")
    assert not is_listening(jaxlab.compile_log())
    assert jax.config.jax_explain_cache_misses is False
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
    ours = [h for h in logging.getLogger(PE_LOGGER).handlers if isinstance(h, _Handler)]
    assert len(ours) == 1


def test_compile_log_magic(ip):
    log = ip.run_line_magic("compile_log", "-o")
    assert log is jaxlab.compile_log()
    with capture_output() as out:
        ip.run_line_magic("compile_log", "")
    (widget_output,) = out.outputs
    assert "application/vnd.jupyter.widget-view+json" in widget_output.data
    assert "text/html" in widget_output.data
    with capture_output() as again:
        ip.run_line_magic("compile_log", "")
    (again_output,) = again.outputs
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
    cell_before = log.running_s + log.compile_s
    ip.run_cell("import time\ntime.sleep(0.05)", store_history=True)
    assert log.running_s + log.compile_s >= cell_before + 0.05


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
    assert ax.containers[2][2].get_width() == pytest.approx(3.0)  # ms
