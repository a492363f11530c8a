"""Property: whatever a user types after a magic, jaxlab answers with a value, a
``UsageError``, or the user's own error (raised in the user's code) — never an exception
out of jaxlab's frames — and a magic that fails leaves the notebook's namespace as it was.

Inputs are drawn from pieces a user types (each magic's options with good and bad values,
the notebook's names, calls with ``*``/``**`` and keywords, cells with statements that
write outside the cell, unbalanced quotes and brackets), plus arbitrary text from an
alphabet of Python punctuation. ``%bench``, ``%%profile``, ``%keys`` and ``%show`` are
fuzzed with sequences of one to three steps (``%keys on``, a cell that makes keys, then
``%keys --cell In[3]``), each step held to the same property.

Derandomized: CI sees the same examples every run. The long hunt::

    JAXLAB_FUZZ_EXAMPLES=1500 JAXLAB_FUZZ_SEED=1 pytest tests/test_magic_fuzz.py -k bench

(``JAXLAB_FUZZ_SEED`` draws other examples; without it hypothesis's fixed seed is used).
"""

import copy
import os
import sys
import warnings
from collections import Counter
from collections.abc import Callable
from typing import Any

import jax
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.explain.source import user_frames
from jaxlab.magics._failures import raised_in_jaxlab

_SEED = os.environ.get("JAXLAB_FUZZ_SEED")


def fuzz_settings(examples: int) -> Callable[[Any], Any]:
    """Hypothesis settings for a fuzz test: ``examples`` cases, or JAXLAB_FUZZ_EXAMPLES;
    derandomized unless JAXLAB_FUZZ_SEED picks a seed."""

    def apply(test: Any) -> Any:
        test = settings(
            max_examples=int(os.environ.get("JAXLAB_FUZZ_EXAMPLES", str(examples))),
            deadline=None,
            derandomize=_SEED is None,
            database=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )(test)
        return test if _SEED is None else seed(int(_SEED))(test)

    return apply


SETUP = """
import jax
import jax.numpy as jnp

def f(x):
    return jnp.sin(x).sum()

def g(a, b=2.0, *rest, c=1.0, **more):
    return (a * b * c).sum()

def kwonly(x, *, k):
    return (x * k).sum()

def power(x, n):
    return x ** n

def branchy(x):
    if x.sum() > 0:
        return x.sum()
    return -x.sum()

def boom(x):
    return 1 / 0

def text(x):
    return "not an array"

class M:
    pass

x = jnp.arange(3.0)
w = jnp.ones((3, 2))
i = 3
s = "words"
lst = [1.0]
d = {"a": jnp.ones(2)}
m = M()
m.k = 1.0
params = {"w": jnp.ones(3), "b": 0.5}

def gen(x):
    yield x

async def coro(x):
    return x

async def agen(x):
    yield x

jf = jax.jit(f)
"""

# Objects a failing magic might write into: compared by value, not only by identity.
MUTABLE = ("lst", "d", "m", "params")

NAMES = ["x", "w", "i", "s", "lst", "d", "m", "params", "undefined_name", "jnp", "f", "1.5"]
CALLEES = ["f", "g", "kwonly", "power", "branchy", "boom", "text", "x", "s", "jnp.sin", "M"]
NOISE = st.text(alphabet="()[]{},*=:'\"\\ -+.0123#xf@!%", max_size=12)


@st.composite
def argument(draw: st.DrawFn) -> str:
    value = draw(st.sampled_from(NAMES) | st.sampled_from(["1", "-1", "None", "'a'", "()"]))
    kind = draw(st.sampled_from(["", "", "*", "**", "k=", "x=", "n=", "depth=", "c="]))
    return kind + value


# Calls that fit (most magics answer them with a value), to be mutated below.
FITTING = [
    "f(x)",
    "g(x)",
    "g(x, 3.0, c=x)",
    "kwonly(x, k=2.0)",
    "power(x, 3)",
    "power(2.0, n=3)",
    "branchy(x)",
    "boom(x)",
    "text(x)",
    "f(*[x])",
    "f(**{'x': x})",
    "g(params['w'], **{'c': 2.0})",
    "f(d['a'])",
    "jnp.sin(x)",
    "f(params)",
]


@st.composite
def call(draw: st.DrawFn) -> str:
    how = draw(st.sampled_from(["fitting", "fitting", "extra", "composed", "noise"]))
    if how == "composed":
        callee = draw(st.sampled_from(CALLEES))
        return f"{callee}({', '.join(draw(st.lists(argument(), max_size=4)))})"
    text = draw(st.sampled_from(FITTING))
    if how == "extra":  # one argument more: maybe a keyword that collides, maybe * or **
        return f"{text[:-1]}, {draw(argument())})"
    if how == "noise":  # a piece missing, a piece extra
        cut = draw(st.integers(0, len(text)))
        return text[:cut] + draw(NOISE) + text[cut + draw(st.integers(0, 2)) :]
    return text


OPTIONS = {
    "jaxpr": [
        "--text",
        "--stablehlo",
        "--grad",
        "--depth 1",
        "--depth -1",
        "--depth x",
        "--budget 1",
        "--budget 0",
        "--budget 3",
        "-o",
        "-o",
        "--nope",
        "--depth",
    ],
    "grad": [
        "--wrt x",
        "--wrt a,b",
        "--wrt nope",
        "--argnums 0",
        "--argnums 1,0",
        "--argnums x",
        "--has-aux",
        "--check",
        "--mode fwd",
        "--mode up",
        "--hessian",
        "--hvp x",
        "--hvp nope(",
        "--jacobian",
        "--graph",
        "--split",
        "-o",
        "-o",
    ],
    "jit": [
        "--static n",
        "--static 1",
        "--static -1",
        "--static 'a b'",
        "--static x,",
        "-q",
        "-o",
        "-o",
        "--stablehlo",
        "--nope",
    ],
    "compile_log": ["-o", "--last 0", "--last x", "--clear", "--all -o", "--nope"],
    "jax_devices": ["-o", "--nope", "x"],
    "jax_nans": ["on", "off", "maybe", "-o", "on -o", "''"],
}


def options(magic: str) -> st.SearchStrategy[str]:
    pieces = st.lists(st.sampled_from(OPTIONS[magic]) | NOISE.map(lambda t: t[:4]), max_size=3)
    return pieces.map(" ".join)


STATEMENTS = [
    "y = x * 2",
    "y = jnp.tanh(x @ w)",
    "lst.append(9.0)",
    "m.k = x * 2",
    "setattr(m, 'k', x)",
    "d['c'] = x * 3",
    "params['w'] = params['w'] * x",
    "global q6\nq6 = 1",
    "return x",
    "yield x",
    "await x",
    "from math import *",
    "import math",
    "del lst",
    "x[0] = 1.0",
    "for k in range(2):\n    y = x + k",
    "if x.sum() > 0:\n    y = x",
    "y = 1 / 0",
    "y = undefined_name",
    "def inner(v):\n    return v * 2",
    "lambda: (",
]
FINALS = ["", "y.sum()", "(x ** 2).sum()", "x", "jnp.sin(x).sum()", "lst", "s", "y"]


@st.composite
def cell(draw: st.DrawFn) -> str:
    body = draw(st.lists(st.sampled_from(STATEMENTS) | NOISE, max_size=3))
    return "\n".join([*body, draw(st.sampled_from(FINALS))])


@st.composite
def magic_input(draw: st.DrawFn) -> tuple[str, str, str | None]:
    """(magic, line, cell or None)."""
    magic = draw(
        st.sampled_from(
            ["jaxpr", "grad", "grad", "jit", "jit", "compile_log", "jax_devices", "jax_nans"]
        )
    )
    opts = draw(options(magic))
    if magic in ("grad", "jit") and draw(st.booleans()):
        return magic, opts, draw(cell())
    if magic in ("jaxpr", "grad", "jit"):
        return magic, f"{opts} {draw(call())}".strip(), None
    return magic, opts, None


def _users_own(error: BaseException) -> bool:
    """Whether ``error`` passed through the user's code (a cell, a function of the notebook):
    this test's own frame, where it is caught, does not count."""
    here = os.path.abspath(__file__)
    frames = user_frames(error.__traceback__)
    return any(os.path.abspath(f.f_code.co_filename) != here for f, _ in frames)


def _snapshot(ns: dict) -> dict:
    plain = {k: id(v) for k, v in ns.items() if not k.startswith("_")}
    state = {k: copy.deepcopy(_state(ns[k])) for k in MUTABLE if k in ns}
    return {"names": plain, "state": state}


def _state(value):
    if hasattr(value, "__dict__") and not isinstance(value, type):
        value = dict(vars(value))
    return jax.tree_util.tree_map(lambda a: a.tolist() if hasattr(a, "tolist") else a, value)


@pytest.fixture
def fuzz_shell(ip, monkeypatch):
    from jaxlab.magics import _progress

    monkeypatch.setattr(_progress, "NOTICE_AFTER_S", 600.0)  # no notices in the output
    ip.run_cell(SETUP)
    ip.user_ns["__fuzz_setup__"] = {k: v for k, v in ip.user_ns.items() if not k.startswith("_")}
    yield ip
    jax.config.update("jax_debug_nans", False)


def _restore(ip) -> None:
    setup = ip.user_ns["__fuzz_setup__"]
    for name in [k for k in ip.user_ns if not k.startswith("_") and k not in setup]:
        del ip.user_ns[name]
    ip.user_ns.update(setup)
    ip.user_ns["lst"] = [1.0]
    ip.user_ns["d"] = {"a": ip.user_ns["jnp"].ones(2)}
    ip.user_ns["m"].__dict__.clear()
    ip.user_ns["m"].k = 1.0
    ip.user_ns["params"] = {"w": ip.user_ns["jnp"].ones(3), "b": 0.5}
    jax.config.update("jax_debug_nans", False)


# About 10 s on two cores; JAXLAB_FUZZ_EXAMPLES=2000 for a longer hunt.
@fuzz_settings(250)
@given(case=magic_input())
def test_any_magic_input_gets_a_value_a_usage_error_or_the_users_own_error(fuzz_shell, case):
    ip = fuzz_shell
    magic, line, body = case
    _restore(ip)
    before = _snapshot(ip.user_ns)
    try:
        if body is None:
            ip.run_line_magic(magic, line)
        else:
            ip.run_cell_magic(magic, line, body)
    except UsageError:
        pass
    except Exception as e:
        assert not raised_in_jaxlab(e), f"{magic} {line!r} {body!r}: jaxlab raised {e!r}"
        assert _users_own(e), f"{magic} {line!r} {body!r}: raw {e!r}"
    else:
        return  # it worked: a cell magic may store its results
    assert _snapshot(ip.user_ns) == before, f"{magic} {line!r} {body!r} changed the namespace"


# ------------------------------------------- %bench, %%profile, %keys, %show (issue 22)

# Cheap by default: one call per round, one round (the fuzzed options come after these, and
# argparse keeps the last -n/-r), so a case costs a compile and a few calls of a tiny array.
BENCH_CHEAP = "-n 1 -r 1"
BENCH_OPTIONS = [
    "-n 1",
    "-n 2",
    "-r 1",
    "-r 2",
    "-n 0",
    "-n -1",
    "-n x",
    "-r 0",
    "-r 1.5",
    "-n",
    "--compare f(x)",
    "--compare g(x, 3.0)",
    "--compare=jf(x)",
    "--compare boom(x)",
    "--compare gen(x)",
    "--compare nope(",
    "--compare",
    "--explain",
    "--explain",
    "-o",
    "-o",
    "--nope",
    "--peak",
]
BENCH_CALLS = [
    "gen(x)",
    "coro(x)",
    "agen(x)",
    "M()",
    "M(x)",
    "jax.jit(f, static_argnums=0)(x)",
    "jax.jit(f)(x)",
    "jax.jit(power, static_argnums=1)(x, 3)",
    "jf(x)",
    "jf(w)",
    "(lambda: coro(x))()",
    "jnp.dot(w.T, w)",
    "lst.append(x)",
    "float(f(x))",
    "",
]

PROFILE_OPTIONS = ["--static", "--static", "-o", "-o", "--explain", "--nope", "-n 1", "x", "'"]
PROFILE_STATEMENTS = [
    "for _ in range(3):\n    y = float(jf(x))",
    "for _ in range(2):\n    y = jf(x)",
    "y = jf(x).block_until_ready()",
    "nonlocal q",
    "yield from x",
    "async for a in b:\n    pass",
    "async with a:\n    pass",
    "z = [a async for a in b]",
    "with jax.profiler.TraceAnnotation('step'):\n    y = jf(x)",
    "jax.profiler.stop_trace()",
    "def gen2():\n    yield x",
    "async def main():\n    await coro(x)",
]

KEYS_OPTIONS = [
    "on",
    "on",
    "off",
    "show",
    "clear",
    "--cell In[1]",
    "--cell In[2]",
    "--cell In[99]",
    "--cell nonsense",
    "--cell",
    "--static",
    "--static",
    "-o",
    "--max 1",
    "--max 0",
    "--max x",
    "x",
    "undefined_name",
    "f(x)",
    "--nope",
]
# Cells that make, split, fold and draw keys, eagerly and under jit, run between %keys steps.
KEY_CELLS = [
    "k = jax.random.key(0)\nk1, k2 = jax.random.split(k)\nv = jax.random.normal(k1, (2,))",
    "v = jax.random.uniform(jax.random.PRNGKey(1), (3,))",
    "kk = jax.random.key(2)\nv1 = jax.random.normal(kk)\nv2 = jax.random.normal(kk)",
    "@jax.jit\ndef draw(k):\n    return jax.random.normal(k, (2,))\nv = draw(jax.random.key(3))",
    "kf = jax.random.fold_in(jax.random.key(4), 7)\nks = jax.random.split(kf, 3)",
]

SHOW_OPTIONS = [
    "--static",
    "--static",
    "--slice 1,2",
    "--slice 0",
    "--slice x",
    "--slice",
    "--slice=1",
    "-o",
    "-o",
    "--nope",
]
SHOW_EXPRESSIONS = [
    "x",
    "w",
    "params",
    "d",
    "lst",
    "m",
    "s",
    "i",
    "x + 1",
    "jnp.zeros((2, 3, 4))",
    "jnp.array([jnp.nan, jnp.inf])",
    "{'a': x, 'b': [w, None]}",
    "f(x)",
    "boom(x)",
    "undefined_name",
    "lambda: 1",
    "1 / 0",
    "x[",
    "on",
    "off",
    "",
]
# Cells whose value is displayed (as jaxlab's view after %show on).
DISPLAY_CELLS = ["x", "params", "w * 2", "d", "(x, s)", "jnp.zeros((2, 3, 4))"]


def _pieces(pool: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.sampled_from(pool) | NOISE.map(lambda t: t[:4]), max_size=3).map(" ".join)


@st.composite
def bench_step(draw: st.DrawFn) -> tuple[str, str, str | None]:
    # half the cases options and a call that fit: a refusal alone would not measure anything
    target = draw(st.sampled_from(FITTING) | call() | st.sampled_from(BENCH_CALLS))
    opts = draw(
        st.sampled_from(["", "-o", "--explain", "--compare jf(x)"]) | _pieces(BENCH_OPTIONS)
    )
    return "bench", f"{BENCH_CHEAP} {opts} {target}".strip(), None


@st.composite
def profile_step(draw: st.DrawFn) -> tuple[str, str, str | None]:
    statements = st.sampled_from(PROFILE_STATEMENTS) | st.sampled_from(STATEMENTS)
    body = draw(st.lists(statements, max_size=3)) or [draw(cell())]
    # mostly options that run (a refused line would hide the cell behind it)
    line = draw(st.sampled_from(["", "", "--static", "-o"]) | _pieces(PROFILE_OPTIONS))
    return "profile", line, "\n".join([*body, draw(st.sampled_from(FINALS))])


@st.composite
def keys_step(draw: st.DrawFn) -> tuple[str, str, str | None]:
    if draw(st.integers(0, 2)) == 0:
        return "cell", draw(st.sampled_from(KEY_CELLS)), None
    return "keys", draw(_pieces(KEYS_OPTIONS)), None


@st.composite
def show_step(draw: st.DrawFn) -> tuple[str, str, str | None]:
    if draw(st.integers(0, 3)) == 0:
        return "cell", draw(st.sampled_from(DISPLAY_CELLS)), None
    expression = draw(st.sampled_from(SHOW_EXPRESSIONS) | st.sampled_from(NAMES) | call())
    return "show", f"{draw(_pieces(SHOW_OPTIONS))} {expression}".strip(), None


STEPS = {"bench": bench_step, "profile": profile_step, "keys": keys_step, "show": show_step}
# Default cases per magic: about +30 s on two cores for the four together.
EXAMPLES = {"bench": 40, "profile": 40, "keys": 60, "show": 60}
# Steps per case: a %bench case is one measurement (cases are independent anyway); %keys
# and %show steps build on each other (on, a cell, a view).
MOST_STEPS = {"bench": 1, "profile": 2, "keys": 4, "show": 3}


# What each step came to, per magic: printed with JAXLAB_FUZZ_TALLY=1 (how many cases ran
# their call or cell, not only refusals).
TALLY: Counter[tuple[str, str]] = Counter()


def _run_step(ip, case: str, magic: str, line: str, body: str | None) -> None:
    outcome = _step(ip, magic, line, body)
    TALLY[(case, f"{magic} {outcome}")] += 1


def _step(ip, magic: str, line: str, body: str | None) -> str:
    """One step under the property; a plain cell (keys made, a value displayed) must run
    as it runs without jaxlab, and print no traceback (a display formatter's included)."""
    where = f"{'%%' if body is not None else '%'}{magic} {line!r} {body!r}"
    if magic == "cell":
        with capture_output() as out, warnings.catch_warnings(record=True):
            warnings.simplefilter("always")  # a reused key warns: told, not raised
            result = ip.run_cell(line, store_history=True)
        assert result.error_in_exec is None, f"cell {line!r}: {result.error_in_exec!r}"
        assert "Traceback" not in out.stdout + out.stderr, f"cell {line!r}: {out.stdout}"
        return "ran"
    before = _snapshot(ip.user_ns)
    try:
        if body is None:
            ip.run_line_magic(magic, line)
        else:
            ip.run_cell_magic(magic, line, body)
    except UsageError as e:
        if magic == "profile" and not str(e).startswith("%%profile"):
            assert _users_own(e), f"{where}: jaxlab raised {e!r}"
            return "user's error"  # a magic inside the cell refused: as in any cell
        outcome = "UsageError"
    except Exception as e:
        assert not raised_in_jaxlab(e), f"{where}: jaxlab raised {e!r}"
        assert _users_own(e), f"{where}: raw {e!r} from a library frame, not the user's"
        outcome = "user's error"
        if magic == "profile":
            return outcome  # the cell's own error: the cell ran up to it, as any cell does
    else:
        return "value"  # it worked: a cell may assign, %keys on may wrap a notebook's functions
    assert _snapshot(ip.user_ns) == before, f"{where} changed the namespace"
    return outcome


def _settle(ip, has_show: bool) -> None:
    """Each case starts with key tracking off and nothing recorded, and %show off."""
    jaxlab.track_keys(False)
    jaxlab.key_lineage().clear()
    if has_show:
        ip.run_line_magic("show", "off")
    _restore(ip)


@pytest.mark.parametrize("magic", list(STEPS))
def test_timing_keys_and_show_input_gets_a_value_a_usage_error_or_the_users_own_error(
    fuzz_shell, magic, capsys
):
    ip = fuzz_shell
    has_show = ip.find_line_magic("show") is not None
    if magic == "show" and not has_show:
        pytest.skip("%show is not in this checkout")

    @fuzz_settings(EXAMPLES[magic])
    @given(steps=st.lists(STEPS[magic](), min_size=1, max_size=MOST_STEPS[magic]))
    def check(steps: list[tuple[str, str, str | None]]) -> None:
        _settle(ip, has_show)
        try:
            for step in steps:
                _run_step(ip, magic, *step)
        finally:
            _settle(ip, has_show)
            capsys.readouterr()  # the views' printed text is not kept across cases

    check()
    if os.environ.get("JAXLAB_FUZZ_TALLY"):
        counts = {k[1]: n for k, n in sorted(TALLY.items()) if k[0] == magic}
        print(f"\n{magic} (seed {_SEED or 'derandomized'}): {counts}", file=sys.__stderr__)
