"""Key tracking never changes what the user's code does, keeps nothing alive, and its
words point at the user's own names and lines (issue 19).

Every program here runs in a real IPython shell twice, with tracking off and on, and
the results, exception types and messages must be identical.
"""

from __future__ import annotations

import gc
import json
import re
import warnings
import weakref
from pathlib import Path

import jax
import numpy as np
import pytest
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab import JaxlabWarning, key_lineage, track_keys

NOTEBOOK = Path(__file__).parent.parent / "notebooks" / "05_random.ipynb"


@pytest.fixture(autouse=True)
def clean():
    key_lineage().clear()
    yield
    track_keys(False)
    key_lineage().clear()


def outcome(ip, source: str):
    """What a cell did: ("ok", its `out` as NumPy leaves) or ("error", type, message)."""
    ip.user_ns.pop("out", None)
    with warnings.catch_warnings(), capture_output():
        warnings.simplefilter("ignore", JaxlabWarning)  # reuses are the programs' own
        result = ip.run_cell(source)
    error = result.error_in_exec or result.error_before_exec
    if error is not None:
        return ("error", type(error).__name__, str(error))
    leaves = jax.tree_util.tree_leaves(ip.user_ns.get("out"))
    return ("ok", [np.asarray(jax.random.key_data(x)) if _typed(x) else x for x in leaves])


def _typed(x) -> bool:
    return hasattr(x, "dtype") and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key)


def same(a, b) -> bool:
    if a[0] != b[0]:
        return False
    if a[0] == "error":
        return a == b
    return len(a[1]) == len(b[1]) and all(
        type(x) is type(y) and np.array_equal(np.asarray(x), np.asarray(y))
        for x, y in zip(a[1], b[1], strict=True)
    )


SETUP = "import jax, jax.numpy as jnp, numpy as np, dataclasses, functools, math\n"

PROGRAMS = {
    "%%jit cell reading jnp": (
        "x = jnp.arange(4.0)\nk = jax.random.key(3)\n",
        "%%jit\ny = jnp.sin(x) + jax.random.normal(k, (4,))\nout = y * 2\nout",
    ),
    "static module argument": (
        "",
        "def g(x, mod):\n    return mod.sum(x)\n"
        "out = jax.jit(g, static_argnums=1)(jnp.arange(3.0), jnp)",
    ),
    "static arguments of every kind": (
        "",
        "@dataclasses.dataclass(frozen=True)\nclass Cfg:\n    n: int = 2\n"
        "def g(x, n, name, shape, none, fn, cfg, mod, *, scale=1.0):\n"
        "    y = fn(x) * n * scale + len(name) + sum(shape) + cfg.n\n"
        "    return mod.sum(y) if none is None else y\n"
        "jg = jax.jit(g, static_argnums=(1, 2, 3, 4, 5, 6, 7), static_argnames=('scale',))\n"
        "out = [jg(jnp.ones(3), 3, 'ab', (1, 2), None, jnp.tanh, Cfg(), np, scale=2.0),\n"
        "       jg(jnp.ones(3), 4, 'abc', (2,), None, math.sin if False else jnp.cos, Cfg(5),"
        " jnp, scale=0.5)]",
    ),
    "static_argnames by name": (
        "",
        "def power(x, n):\n    return x ** n\n"
        "out = [jax.jit(power, static_argnames='n')(jnp.arange(3.0), n=3),"
        " jax.jit(power, static_argnames=('n',))(2.0, 4)]",
    ),
    "a keyword argument named fun": (
        "",
        "def f(x, fun=None, owner=None, args=None):\n    return x + 1 if fun is None else x\n"
        "out = [jax.jit(f)(jnp.ones(2), fun=None), jax.jit(f, static_argnames='fun')(1.0,"
        " fun='a')]",
    ),
    "keys through jit, split and fold_in": (
        "",
        "@jax.jit\ndef step(key, x):\n    key, sub = jax.random.split(key)\n"
        "    return key, x + jax.random.normal(sub, x.shape)\n"
        "key, x = jax.random.key(0), jnp.zeros(3)\n"
        "for i in range(3):\n    key, x = step(jax.random.fold_in(key, i), x)\n"
        "out = (key, x, jax.random.PRNGKey(4), jax.random.uniform(jax.random.PRNGKey(4)))",
    ),
    "a list as a key": ("", "out = jax.random.normal([1, 2], (3,))"),
    "a bad shape": ("", "out = jax.random.normal(jax.random.key(0), 'abc')"),
    "a concretization error inside jit": (
        "",
        "@jax.jit\ndef f(key):\n    x = jax.random.normal(key)\n"
        "    return 1 if x > 0 else 0\nout = f(jax.random.key(0))",
    ),
    "an error raised by the user's function": (
        "",
        "def f(x):\n    raise ValueError(f'bad x: {x.shape}')\nout = jax.jit(f)(jnp.ones(2))",
    ),
    "vmap and scan over keys": (
        "",
        "ks = jax.random.split(jax.random.key(1), 4)\n"
        "out = (jax.vmap(lambda k: jax.random.normal(k, (2,)))(ks),"
        " jax.lax.scan(lambda c, k: (c + jax.random.uniform(k), None), 0.0, ks)[0])",
    ),
    "equinox MLP with dropout": (
        "import equinox as eqx\n",
        "class Net(eqx.Module):\n    lin: eqx.nn.Linear\n    drop: eqx.nn.Dropout\n"
        "    def __init__(self, key):\n        self.lin = eqx.nn.Linear(3, 2, key=key)\n"
        "        self.drop = eqx.nn.Dropout(0.5)\n"
        "    def __call__(self, x, key):\n        return self.drop(self.lin(x), key=key)\n"
        "k1, k2 = jax.random.split(jax.random.key(0))\nnet = Net(k1)\n"
        "out = eqx.filter_jit(lambda m, x, k: m(x, k))(net, jnp.ones(3), k2)",
    ),
    "flax nnx module with Rngs": (
        "from flax import nnx\n",
        "class M(nnx.Module):\n    def __init__(self, rngs):\n"
        "        self.lin = nnx.Linear(3, 2, rngs=rngs)\n"
        "        self.drop = nnx.Dropout(0.5, rngs=rngs)\n"
        "    def __call__(self, x):\n        return self.drop(self.lin(x))\n"
        "m = M(nnx.Rngs(0))\n"
        "out = (m(jnp.ones((2, 3))), nnx.jit(lambda m, x: m(x))(m, jnp.ones(3)))",
    ),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_program_does_the_same_with_tracking_on_and_off(ip, name):
    setup, program = PROGRAMS[name]
    assert ip.run_cell(SETUP + setup).success
    off = outcome(ip, program)
    ip.run_line_magic("keys", "on")
    on = outcome(ip, program)
    ip.run_line_magic("keys", "off")
    assert same(off, on), (off, on)
    if "error" not in name and "list" not in name and "shape" not in name:
        assert off[0] == "ok", off


def test_the_tutorials_code_does_the_same_with_tracking_on_and_off(ip):
    cells = [
        "".join(c["source"])
        for c in json.loads(NOTEBOOK.read_text())["cells"]
        if c["cell_type"] == "code"
    ]
    code = [c for c in cells if not c.lstrip().startswith("%") and "plt." not in c]
    code = [c for c in code if "lineage" not in c]  # cells that read %keys -o
    assert len(code) >= 8
    ip.run_cell("import matplotlib\nmatplotlib.use('Agg')")

    names = ("a", "b", "c", "u", "noise_a", "noise_b", "signal", "counts", "pi_hat")

    def run_all() -> list:
        for name in names:  # each run starts from none of the tutorial's results
            ip.user_ns.pop(name, None)
        found = []
        for cell in code:
            found.append(outcome(ip, f"{cell}\nout = [globals().get(n) for n in {names}]"))
        return found

    off = run_all()
    ip.run_line_magic("keys", "on")
    on = run_all()
    ip.run_line_magic("keys", "off")
    assert all(o[0] == "ok" for o in off), [o for o in off if o[0] != "ok"]
    assert [i for i, (a, b) in enumerate(zip(off, on, strict=True)) if not same(a, b)] == []
    assert len(key_lineage().reuses) >= 1  # the planted reuse was seen while on


def test_errors_stay_jaxs_and_jaxlabs_frames_are_hidden(ip):
    ip.run_line_magic("keys", "on")
    with capture_output() as out:
        result = ip.run_cell("import jax\njax.random.normal([1, 2], (3,))")
    assert isinstance(result.error_in_exec, TypeError)
    assert "unexpected PRNG key type" in str(result.error_in_exec)
    assert "kernel_ext" not in out.stdout and "jaxlab" not in out.stdout, out.stdout
    with capture_output() as out:
        result = ip.run_cell(
            "@jax.jit\ndef f(key):\n    return 1 if jax.random.normal(key) > 0 else 0\n"
            "f(jax.random.key(0))"
        )
    assert type(result.error_in_exec).__name__ == "TracerBoolConversionError"
    assert "kernel_ext" not in out.stdout, out.stdout


@pytest.mark.slow  # 300 compiles (19 s on JAX 0.10): run on 3.12 only
def test_the_memo_of_tracked_functions_keeps_no_function_alive():
    alive = []
    x = jax.numpy.ones(3)
    with track_keys():
        for i in range(300):
            f = eval(f"lambda x: x + {i}")  # a new function each time, as in new cells
            alive.append(weakref.ref(f))
            jax.jit(f)(x).block_until_ready()
            del f
    gc.collect()
    assert sum(r() is not None for r in alive) == 0


def test_one_function_jitted_twice_shares_its_compiled_code():
    traces = []

    def f(x):
        traces.append(1)
        return x * 2

    with track_keys():
        jax.jit(f)(1.0)
        jax.jit(f)(2.0)  # the same shape: JAX's own cache, no new trace
    assert len(traces) == 1


def test_two_objects_of_one_seed_are_not_a_reuse_but_one_object_twice_is():
    a, b = jax.random.key(1), jax.random.key(1)  # made before tracking began
    with track_keys():
        jax.random.normal(a)
        jax.random.normal(b)
        assert key_lineage().reuses == ()
        c = jax.random.key(2)
        d = jax.random.key(2)
        jax.random.normal(c)
        jax.random.normal(d)
        assert key_lineage().reuses == ()
        with pytest.warns(JaxlabWarning, match="^a is reused"):
            jax.random.uniform(a)
    (reuse,) = key_lineage().reuses
    assert (reuse.first_op, reuse.second_op) == ("normal", "uniform")
    notes = key_lineage().same_seeds
    assert len(notes) == 2  # b (a's seed) and d (c's seed)
    assert "same seed as" in jaxlab.key_lineage()._repr_mimebundle_()["text/plain"]


def test_reuse_inside_jit_warns_once_per_call_site_after_the_call(ip):
    ip.run_line_magic("keys", "on")
    source = (
        "import jax\n@jax.jit\ndef f(k_noise):\n"
        "    return jax.random.normal(k_noise) + jax.random.uniform(k_noise)\n"
        "for i in range(3):\n    f(jax.random.key(i))"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", JaxlabWarning)
        assert ip.run_cell(source).success
    messages = [str(w.message) for w in caught if w.category is JaxlabWarning]
    assert len(messages) == 1, messages
    assert messages[0].startswith("k_noise is reused (consumed twice): normal at In[")
    assert ", line 4 and uniform at In[" in messages[0] and "`" not in messages[0]


def test_reuse_across_compiled_calls_warns_when_the_cell_ends(ip):
    ip.run_line_magic("keys", "on")
    source = (
        "import jax\ndraw = jax.jit(lambda k: jax.random.normal(k))\n"
        "k_step = jax.random.key(5)\ndraw(k_step)\ndraw(k_step)"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", JaxlabWarning)
        assert ip.run_cell(source).success
    messages = [str(w.message) for w in caught if w.category is JaxlabWarning]
    assert len(messages) == 1 and "is reused" in messages[0], messages


def test_the_warning_names_the_variable_the_cell_and_a_fix_that_fits(ip):
    ip.run_line_magic("keys", "on")
    planted = (
        "import jax\nroot = jax.random.key(0)\nk_signal, k_noise = jax.random.split(root)\n"
        "noise_a = jax.random.normal(k_noise, (10,))\nnoise_b = jax.random.normal(k_noise, (10,))"
    )
    loop = "key = jax.random.key(3)\nfor i in range(4):\n    x = jax.random.normal(key, (2,))"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", JaxlabWarning)
        assert ip.run_cell(planted).success
        assert ip.run_cell(loop).success
    found = [w for w in caught if w.category is JaxlabWarning]
    assert len(found) == 2, [str(w.message) for w in found]  # the loop warns once
    two, looped = found
    text = str(two.message)
    assert text.startswith("k_noise is reused (consumed twice): normal at In[")
    assert "line 4 and normal at" in text and "line 5" in text
    assert "Split before the draws, into as many keys as there are draws" in text
    assert "splitting k_noise now would not do" in text  # as notebooks/05_random says
    assert str(two.filename).startswith("In[") and two.lineno == 5  # not a temporary file
    text = str(looped.message)
    assert text.startswith("key is reused") and "Split per iteration" in text
    assert "keys = jax.random.split(key, n)" in text
    for message in (str(two.message), text):
        assert "`" not in message
    lineage = key_lineage()
    html = lineage._repr_mimebundle_()["text/html"]
    assert "`" not in html.replace("<style>", "").split("</style>")[-1], html
    assert "4 reuses" in html  # the planted one, and three more passes of the loop


def test_one_reuse_is_one_reuse_in_words():
    with track_keys(), pytest.warns(JaxlabWarning):
        k = jax.random.key(0)
        jax.random.normal(k)
        jax.random.normal(k)
    text = key_lineage()._repr_mimebundle_()["text/plain"]
    assert re.search(r"\b1 reuse\b(?!s)", text) and "1 reuses" not in text


def test_functions_compiled_before_tracking_are_retraced_and_seen(ip):
    ip.run_cell(
        "import jax\n@jax.jit\ndef planted(key):\n"
        "    return jax.random.normal(key) + jax.random.normal(key)\n"
        "planted(jax.random.key(0))"
    )
    with capture_output() as out:
        ip.run_line_magic("keys", "on")
    assert "retraced on their next call" in out.stdout and "planted" in out.stdout
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", JaxlabWarning)
        assert ip.run_cell("planted(jax.random.key(1))").success
    assert any("is reused" in str(w.message) for w in caught)
    assert len(key_lineage().reuses) == 1


def test_keys_from_code_that_ran_unseen_are_said_to_be(ip):
    outside = jax.jit(lambda k: jax.random.split(k))  # compiled before tracking, not a name
    outside(jax.random.key(0))
    with track_keys():
        a, _ = outside(jax.random.key(9))
        jax.random.normal(a)
    text = key_lineage()._repr_mimebundle_()["text/plain"]
    assert "1 key of unknown origin" in text and "ran unseen" in text
