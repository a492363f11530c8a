"""Property: whatever a user types after a magic, jaxlab answers with a value, a
``UsageError``, or the user's own error (raised in the user's code) — never an exception
out of jaxlab's frames — and a magic that fails leaves the notebook's namespace as it was.

Inputs are drawn from pieces a user types (each magic's options with good and bad values,
the notebook's names, calls with ``*``/``**`` and keywords, cells with statements that
write outside the cell, unbalanced quotes and brackets), plus arbitrary text from an
alphabet of Python punctuation. Derandomized: CI sees the same examples every run.
"""

import copy
import os

import jax
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

from jaxlab.explain.source import user_frames
from jaxlab.magics._failures import raised_in_jaxlab

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


# About 30 s on two cores; JAXLAB_FUZZ_EXAMPLES=2000 for a longer hunt.
@settings(
    max_examples=int(os.environ.get("JAXLAB_FUZZ_EXAMPLES", "250")),
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
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
        assert user_frames(e.__traceback__), f"{magic} {line!r} {body!r}: raw {e!r}"
    else:
        return  # it worked: a cell magic may store its results
    assert _snapshot(ip.user_ns) == before, f"{magic} {line!r} {body!r} changed the namespace"
