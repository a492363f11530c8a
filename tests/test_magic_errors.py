"""The `errors` family in a real shell: the explanation above a short traceback, the real
exception untouched, other errors exactly as IPython shows them, the previous handler put
back on unload, and ``%jax_nans``."""

import re
import shutil
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError

import jaxlab
from jaxlab.magics import errors

ANSI = re.compile(r"\x1b\[[0-9;]*m")

IF_ON_TRACER = """
@jax.jit
def f(x):
    if x > 0:
        return x
    return -x
f(1.0)
"""


def run(ip, capsys, cell):
    """Run ``cell``; return the exception and everything printed, without colours."""
    ip.run_cell("import jax\nimport jax.numpy as jnp")
    capsys.readouterr()
    result = ip.run_cell(textwrap.dedent(cell).lstrip("\n"))
    captured = capsys.readouterr()
    return result.error_in_exec, ANSI.sub("", captured.out + captured.err)


def without_jaxlab(ip, capsys, cell):
    """The same cell with the extension unloaded (loaded again afterwards)."""
    ip.run_line_magic("unload_ext", "jaxlab")
    try:
        return run(ip, capsys, cell)
    finally:
        ip.run_line_magic("load_ext", "jaxlab")


def test_explanation_is_printed_above_a_short_traceback(ip, capsys):
    exc, out = run(ip, capsys, IF_ON_TRACER)
    lines = out.splitlines()
    assert lines[0].startswith("A Python `if` needs True or False")
    assert lines[0].endswith("(TracerBoolConversionError)")
    assert re.match(r"  your line  In\[\d+\], line 3, in f:  if x > 0:$", lines[1])
    assert lines[2] == "  fix        return jax.lax.cond(x > 0, lambda: x, lambda: -x)"
    docs = next(i for i, line in enumerate(lines) if line.startswith("  docs       https://"))
    assert out.index("fix") < out.index("Traceback (most recent call last)")
    assert docs < next(i for i, line in enumerate(lines) if "Traceback" in line)
    # the real type and message end the output, as they always do
    assert lines[-3].startswith("TracerBoolConversionError: Attempted boolean conversion")
    assert str(exc).splitlines()[0] in out
    # shortened: the user's frames only, where plain IPython shows JAX's too
    _, plain = without_jaxlab(ip, capsys, IF_ON_TRACER)
    assert "jax/_src" in plain and "jax/_src" not in out
    assert "if x > 0:" in out and "f(1.0)" in out


def test_the_original_exception_is_kept_for_tb_and_debug(ip, capsys):
    exc, _ = run(ip, capsys, IF_ON_TRACER)
    assert isinstance(exc, jax.errors.TracerBoolConversionError)
    assert sys.last_value is exc and sys.last_type is type(exc)
    if sys.version_info >= (3, 12):
        assert sys.last_exc is exc
    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame.f_code.co_filename)
        tb = tb.tb_next
    assert any("jax/_src" in f for f in frames)  # its own traceback was not shortened
    ip.run_line_magic("tb", "")
    full = ANSI.sub("", capsys.readouterr().out)
    assert "jax/_src/core.py" in full
    assert "TracerBoolConversionError: Attempted boolean conversion" in full
    assert "your line" not in full  # %tb is the plain, full traceback


@pytest.mark.parametrize(
    "cell",
    [
        "1 / 0",
        "1 + 'a'",
        "x = (",
        "raise TypeError('dot_general requires contracting dimensions')",
        "import numpy as np\nnp.ones(3) @ np.ones(4)",
        "%not_a_magic_anywhere",
    ],
)
def test_errors_that_are_not_jax_s_look_exactly_as_without_jaxlab(ip, capsys, cell):
    _, with_it = run(ip, capsys, cell)
    _, without_it = without_jaxlab(ip, capsys, cell)
    assert with_it == without_it
    assert with_it.strip()  # something was shown


def test_an_error_inside_the_explainer_falls_back_to_the_normal_traceback(ip, capsys, monkeypatch):
    def broken(exc):
        raise RuntimeError("explainer bug")

    monkeypatch.setattr(errors, "explain", broken)
    _, out = run(ip, capsys, IF_ON_TRACER)
    monkeypatch.undo()
    _, plain = without_jaxlab(ip, capsys, IF_ON_TRACER)
    assert out == plain
    assert "explainer bug" not in out and "Custom TB Handler failed" not in out
    assert ip.custom_exceptions == (BaseException,)  # still installed


def test_out_of_memory_is_explained_in_the_shell(ip, capsys):
    _, out = run(
        ip,
        capsys,
        'raise jax.errors.JaxRuntimeError("RESOURCE_EXHAUSTED: Out of memory while trying '
        'to allocate 1073741824 bytes.")',
    )
    assert "ran out of memory allocating 1.00 GiB" in out
    assert 'os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"' in out
    assert "JaxRuntimeError: RESOURCE_EXHAUSTED" in out.splitlines()[-1]


def test_unload_restores_the_previous_handler(ip, capsys):
    ip.run_line_magic("unload_ext", "jaxlab")
    seen = []

    def mine(shell, etype, value, tb, tb_offset=None):
        seen.append(etype)
        return ["mine"]

    ip.set_custom_exc((ZeroDivisionError,), mine)
    previous_handler = ip.CustomTB
    try:
        ip.run_line_magic("load_ext", "jaxlab")
        assert ip.custom_exceptions == (BaseException,)
        _, out = run(ip, capsys, "1 / 0")  # still the previous handler's error
        assert seen == [ZeroDivisionError]
        _, out = run(ip, capsys, IF_ON_TRACER)  # JAX's: explained
        assert "your line" in out and seen == [ZeroDivisionError]
        ip.run_line_magic("unload_ext", "jaxlab")
        assert ip.custom_exceptions == (ZeroDivisionError,)
        assert ip.CustomTB is previous_handler
    finally:
        ip.set_custom_exc((), None)
        ip.run_line_magic("load_ext", "jaxlab")


def test_unload_leaves_no_handler_when_there_was_none(ip, capsys):
    ip.run_line_magic("unload_ext", "jaxlab")
    try:
        assert ip.custom_exceptions == ()
        _, out = run(ip, capsys, IF_ON_TRACER)
        assert "your line" not in out
    finally:
        ip.run_line_magic("load_ext", "jaxlab")


# --------------------------------------------------------------------------- %jax_nans
@pytest.fixture
def nans_off():
    # The global setting, not `with jax.debug_nans(False)`: a context value would hide
    # what %jax_nans writes, which is the global one.
    jax.config.update("jax_debug_nans", False)
    yield
    jax.config.update("jax_debug_nans", False)


def test_jax_nans_switches_jax_debug_nans(ip, nans_off):
    state = ip.run_line_magic("jax_nans", "on -o")
    assert state == jaxlab.NanCheck(enabled=True, previous=False)
    assert jax.config.jax_debug_nans is True
    assert ip.run_line_magic("jax_nans", "-o") == jaxlab.NanCheck(enabled=True, previous=True)
    assert ip.run_line_magic("jax_nans", "OFF -o").enabled is False
    assert jax.config.jax_debug_nans is False
    bundle = state._repr_mimebundle_()
    assert "jax_debug_nans is on (was off)" in bundle["text/plain"]
    assert bundle["text/html"].startswith("<div>")


def test_jax_nans_rejects_other_words_and_changes_nothing(ip, nans_off):
    with pytest.raises(UsageError, match="takes `on` or `off`, not `maybe`"):
        ip.run_line_magic("jax_nans", "maybe")
    with pytest.raises(UsageError, match=r"takes `on` or `off`, not `loss\(w, k\)`"):
        ip.run_line_magic("jax_nans", "loss(w, k)")  # (argparse said "unrecognized: k)")
    assert jax.config.jax_debug_nans is False


def test_a_nan_is_explained_with_its_primitive_and_line(ip, capsys, nans_off):
    ip.run_line_magic("jax_nans", "on")
    _, out = run(
        ip,
        capsys,
        """
        def logs(x):
            y = jnp.log(x) + 1
            return y
        jax.jit(logs)(-2.0)
        """,
    )
    ip.run_line_magic("jax_nans", "off")
    assert "the primitive `log` made it" in out
    assert re.search(r"your line  In\[\d+\], line 2, in logs:  y = jnp.log\(x\) \+ 1", out)
    assert "fix        y = jnp.log(jnp.maximum(x, 1e-12)) + 1" in out
    assert out.rstrip().endswith("FloatingPointError: invalid value (nan) encountered in log")


def test_unload_restores_the_nan_setting_found_at_load(ip, nans_off):
    ip.run_line_magic("jax_nans", "on")
    ip.run_line_magic("unload_ext", "jaxlab")
    try:
        assert jax.config.jax_debug_nans is False
    finally:
        ip.run_line_magic("load_ext", "jaxlab")


# --------------------------------------------------------------------------- a real kernel
@pytest.mark.notebooks
def test_in_a_kernel_the_error_keeps_its_name_and_value(tmp_path, monkeypatch):
    """ipykernel sends the real ename/evalue; the explanation rides in the traceback."""
    import json

    import nbformat
    from kernel_polls import NotebookClient

    spec = tmp_path / "kernels" / "jaxlab-errors"
    spec.mkdir(parents=True)
    argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec.joinpath("kernel.json").write_text(json.dumps({"argv": argv, "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("%load_ext jaxlab\nimport jax.numpy as jnp"),
        nbformat.v4.new_code_cell("x = jnp.zeros(3)\nx[0] = 1.0"),
    ]
    NotebookClient(nb, timeout=120, kernel_name="jaxlab-errors", allow_errors=True).execute()
    (error,) = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert error.ename == "TypeError"
    assert error.evalue.startswith("JAX arrays are immutable")
    text = ANSI.sub("", "\n".join(error.traceback))
    assert re.search(r"your line  In\[2\], line 2:  x\[0\] = 1\.0", text)
    assert "fix        x = x.at[0].set(1.0)" in text


# --------------------------------------------------------------------------- bad input
BAD_INPUT_SETUP = """
import jax
import jax.numpy as jnp
import jax.numpy as jnp
def f(x):
    return jnp.sin(x).sum()
def kwonly(x, *, k):
    return (x * k).sum()
x = jnp.ones(3)
i = 3
"""


def _names(ip):
    return {k: id(v) for k, v in ip.user_ns.items() if not k.startswith("_")}


@pytest.mark.parametrize(
    ("magic", "line", "words"),
    [
        # 13: the user's call does not fit the function: Python's own words, as a UsageError
        # (Python 3.12 says "keyword-only argument", 3.11 "argument")
        ("grad", "kwonly(x)", "does not fit `kwonly(x, *, k)`: missing a required"),
        ("grad", "kwonly(x)", "argument: 'k'"),
        ("jaxpr", "f(x, depth=3)", "got an unexpected keyword argument 'depth'"),
        ("jaxpr", "f(x, **{'depth': 1})", "got an unexpected keyword argument 'depth'"),
        ("jit", "f(x, 2)", "too many positional arguments"),
        ("jaxpr", "f(x=x, x=x)", "keyword argument repeated"),
        ("grad", "f(x, **{'x': 1})", "multiple values for argument 'x'"),
        ("grad", "f(**{'x': x}, **{'x': x})", "f() got multiple values for keyword argument 'x'"),
        # 16: unpacking what cannot be unpacked
        ("jaxpr", "f(**x)", "f() argument after ** must be a mapping"),
        ("grad", "f(*i)", "f() argument after * must be an iterable, not int"),
        ("jit", "f(*i)", "f() argument after * must be an iterable, not int"),
        # 15: an unclosed quote in the options
        ("jaxpr", "--depth '1 f(x)", "No closing quotation"),
        ("grad", '--wrt "x f(x)', "No closing quotation"),
        ("jax_nans", "'", "No closing quotation"),
        ("compile_log", "'", "No closing quotation"),
        ("jax_devices", '"', "No closing quotation"),
    ],
)
def test_bad_calls_and_options_are_usage_errors_naming_the_problem(ip, magic, line, words):
    ip.run_cell(BAD_INPUT_SETUP)
    before = _names(ip)
    with pytest.raises(UsageError) as caught:
        ip.run_line_magic(magic, line)
    assert words in str(caught.value)
    assert str(caught.value).startswith(f"%{magic}")
    assert _names(ip) == before


def test_a_call_binds_as_python_binds_it(ip):
    """Left-to-right evaluation, * and ** unpacking, defaults: the arguments Python passes."""
    ip.run_cell(BAD_INPUT_SETUP + "def g(a, b=2.0, *rest, c, **more):\n    return a\n")
    ip.run_cell("order = []\ndef note(v):\n    order.append(v)\n    return v\n")
    graph = ip.run_line_magic(
        "jaxpr", "-o g(note(1.0), *[note(2.0), 3.0], c=note(4.0), **{'d': note(5.0)})"
    )
    assert ip.user_ns["order"] == [1.0, 2.0, 4.0, 5.0]
    assert len(graph.jaxpr.jaxpr.invars) == 5  # a, b, rest[0], c, d
    # a walrus in an argument does not assign into the notebook
    ip.run_line_magic("jaxpr", "-o f(y := x)")
    assert "y" not in ip.user_ns


@pytest.mark.parametrize("budget", [1, 2, 3, 4])
def test_the_smallest_budgets_draw_a_graph(ip, budget):
    ip.run_cell(
        BAD_INPUT_SETUP
        + "def h(v):\n    for _ in range(10):\n        v = jnp.tanh(v)\n    return v.sum()\n"
    )
    graph = ip.run_line_magic("jaxpr", f"--budget {budget} -o h(x)")
    assert graph.n_equations == 11
    segments = [n for n in graph.nodes if n.kind == "segment"]
    assert segments and sum(n.n_equations for n in segments) == 11
    with pytest.raises(UsageError, match="--budget must be 1 or more, not 0"):
        ip.run_line_magic("jaxpr", "--budget 0 h(x)")


def test_control_characters_in_names_reach_dot_escaped(ip):
    ip.run_cell(BAD_INPUT_SETUP + "f.__name__ = 'bad\\x01name\\x1b[31m<b>\\x00'")
    graph = ip.run_line_magic("jaxpr", "-o f(x)")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot is not installed")
    bundle = graph._repr_mimebundle_()
    assert "image/svg+xml" in bundle, bundle.get("text/plain", "")[:300]
    svg = bundle["image/svg+xml"]
    # shown as Python writes them, and markup stays text
    assert "bad\\x01name\\x1b[31m&lt;b&gt;\\x00" in svg
    assert not any(ch in svg for ch in "\x00\x01\x1b")


def test_when_dot_fails_the_note_says_what_dot_said(ip, tmp_path, monkeypatch):
    from jaxlab.graph import render

    fake = tmp_path / "dot"
    fake.write_text(
        "#!/bin/sh\ncat > /dev/null\n"
        "echo 'Error: syntax error in line 3 near ;' >&2\necho '... in label of graph' >&2\n"
        "exit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(render, "dot_executable", lambda: str(fake))
    ip.run_cell(BAD_INPUT_SETUP)
    bundle = ip.run_line_magic("jaxpr", "-o f(x)")._repr_mimebundle_()
    assert "image/svg+xml" not in bundle
    note = bundle["text/plain"].splitlines()[0]
    assert note == (
        "Graphviz could not draw this graph; showing the text view. "
        "dot said: Error: syntax error in line 3 near ; ... in label of graph"
    )
    assert "sin" in bundle["text/plain"]  # the text view follows
    assert "dot said: Error: syntax error in line 3 near ;" in bundle["text/html"]


# --------------------------------------------------------------------------- long steps
SLOW_SETUP = """
import time
def slow(v):
    for _ in range(4):
        time.sleep(0.15)  # tracing that takes a while, as 50 nested conds do
        v = jnp.tanh(v)
    return v.sum()
def stop(v):
    raise KeyboardInterrupt  # the user pressing ■ while JAX traces
"""


def test_a_slow_trace_says_what_it_is_doing(ip, capsys, monkeypatch):
    from jaxlab.magics import _progress

    monkeypatch.setattr(_progress, "NOTICE_AFTER_S", 0.1)
    ip.run_cell(BAD_INPUT_SETUP + SLOW_SETUP)
    capsys.readouterr()
    graph = ip.run_line_magic("jaxpr", "-o slow(x)")
    out = capsys.readouterr().out
    assert graph.n_equations == 5  # 4 tanh and the sum
    assert out == "%jaxpr: still tracing `slow(x)` after 0.1 s … (interrupt the kernel to stop)\n"
    report = ip.run_line_magic("grad", "-o slow(x)")
    assert "%grad: still differentiating `slow(x)` after 0.1 s" in capsys.readouterr().out
    assert report.value == pytest.approx(float(jnp.tanh(jnp.tanh(jnp.tanh(jnp.tanh(1.0))))) * 3)


def test_a_quick_trace_says_nothing(ip, capsys):
    ip.run_cell(BAD_INPUT_SETUP)
    capsys.readouterr()
    ip.run_line_magic("jaxpr", "-o f(x)")
    ip.run_line_magic("grad", "-o f(x)")
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize(
    ("magic", "line", "cell", "doing"),
    [
        ("jaxpr", "stop(x)", None, "tracing `stop(x)`"),
        ("jaxpr", "--grad stop(x)", None, "tracing `stop(x)`"),
        ("grad", "--graph stop(x)", None, "differentiating `stop(x)`"),
        ("grad", "", "y = x * 2\nstop(y)", "differentiating the cell"),
        ("jit", "stop(x)", None, "compiling `stop(x)`"),
        ("jit", "", "y = x * 2\nstop(y)", "running the cell"),
    ],
)
def test_an_interrupt_ends_the_magic_cleanly(ip, magic, line, cell, doing):
    ip.run_cell(BAD_INPUT_SETUP + SLOW_SETUP)
    before = _names(ip)
    with pytest.raises(UsageError) as caught:
        if cell is None:
            ip.run_line_magic(magic, line)
        else:
            ip.run_cell_magic(magic, line, cell)
    prefix = "%%" if cell is not None else "%"
    assert re.fullmatch(
        rf"{re.escape(prefix + magic)}: interrupted while {re.escape(doing)} after \d+\.\d s; "
        "nothing in the notebook changed",
        str(caught.value),
    )
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert _names(ip) == before
    # JAX's tracing state was unwound: the next trace works
    assert ip.run_line_magic("jaxpr", "-o f(x)").n_equations == 2


def test_an_interrupt_in_the_shell_shows_one_line(ip, capsys):
    ip.run_cell(BAD_INPUT_SETUP + SLOW_SETUP)
    capsys.readouterr()
    result = ip.run_cell("%jaxpr stop(x)")
    captured = capsys.readouterr()
    out = ANSI.sub("", captured.out + captured.err)
    assert isinstance(result.error_in_exec, UsageError)
    assert "UsageError: %jaxpr: interrupted while tracing `stop(x)`" in out
    assert "Traceback" not in out and "jaxlab" not in out.replace("%jaxpr", "")


# --------------------------------------------------------------------------- words
def test_long_fix_lines_wrap_at_words_and_code_stays_whole():
    from jaxlab.explain.explanation import Explanation

    note = (
        "every pair of batches; or make the batch axes equal, or map over the batch axis "
        "with jax.vmap so that each pair of rows meets once, as jnp.einsum would"
    )
    code = "scores = queries[:, None] @ keys_transposed_for_the_attention_heads[None]"
    long_code = "y = " + " + ".join(f"weights_{k} @ inputs_{k}" for k in range(8))
    fix = f"{code}  # {note}\n{long_code}"
    assert len(fix.splitlines()[0]) > 190
    lines = Explanation(
        kind="shapes",
        error_type="TypeError",
        error_message="",
        what="Shapes.",
        fix=fix,
        docs_url="",
    ).lines()
    fix_lines = [line[13:] for line in lines[1:]]  # after "  fix        " and its indent
    assert lines[1].startswith("  fix        # every pair")
    comments = [line for line in fix_lines if line.startswith("# ")]
    assert " ".join(c[2:] for c in comments) == note  # every word, none cut
    assert all(len(line) <= 100 for line in lines[1:-1])
    assert fix_lines[len(comments) :] == [code, long_code]  # code as written, never broken
    assert len(lines[-1]) > 100
    html = Explanation(
        kind="shapes",
        error_type="TypeError",
        error_message="",
        what="Shapes.",
        fix=fix,
        docs_url="",
    )._repr_html_()
    assert "white-space:pre-wrap;word-break:normal" in html


def test_a_decorator_with_parameters_of_its_own_is_judged_by_them(ip):
    """functools.wraps makes inspect report the wrapped signature; the call binds to the
    wrapper's own when it declares parameters (not when it only forwards, as jax.grad)."""
    ip.run_cell(
        BAD_INPUT_SETUP
        + "import functools\n"
        + "def with_key(fun):\n"
        + "    @functools.wraps(fun)\n"
        + "    def wrapper(*args, key=None, **kwargs):\n"
        + "        return fun(*args, **kwargs)\n"
        + "    return wrapper\n"
        + "h = with_key(f)\n"
        + "gf = jax.grad(f)\n"
    )
    assert ip.run_line_magic("jaxpr", "-o h(x, key=1)").n_equations == 2
    # the wrapper takes it, its call of f does not: still the user's error, where it happened
    with pytest.raises(UsageError, match="takes 1 positional argument but 2 were given"):
        ip.run_line_magic("jaxpr", "h(x, x)")
    with pytest.raises(UsageError, match="does not fit `gf\\(x\\)`: got an unexpected keyword"):
        ip.run_line_magic("jaxpr", "gf(x, key=1)")
