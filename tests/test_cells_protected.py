"""%%jit and %%grad cells change nothing unless the whole magic succeeds (issue 9, items
11, 12, 14 and 21a): writes outside the cell are refused (or undone), code that cannot be a
function body gets a UsageError, typed PRNG keys and equinox / flax nnx models are inputs.
"""

import re
import types

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

from jaxlab.compile.cell import CellJit
from jaxlab.compile.log import CompileLog
from jaxlab.program import ProgramError, analyse_cell
from jaxlab.program.guard import guarded, outside_writes


class Box:
    """A hashable notebook object (identity hash), so %%jit takes it as a static input."""

    def __init__(self) -> None:
        self.k = 1.0


def _push(items):
    items.append(1.0)


@pytest.fixture
def nb(ip):
    ip.run_cell(
        "import jax, jax.numpy as jnp, types\n"
        "x = jnp.arange(3.0)\n"
        "m = types.SimpleNamespace(k=1.0)\n"
        "d = {}\n"
        "lst = []\n"
        "n = 2\n"
    )
    ip.user_ns.update(box=Box(), push=_push)
    return ip


def _state(ip):
    """Every user name and the object it holds (identity), plus the contents of the
    mutable ones: what "exactly as before" compares."""
    ns = ip.user_ns
    names = {k: id(v) for k, v in ns.items() if not k.startswith("_") and k not in ("In", "Out")}
    return names, ns["m"].k, dict(ns["d"]), list(ns["lst"]), ns["box"].k, ns["box"].__dict__.copy()


def _refused(ip, magic, options, cell, needle):
    before = _state(ip)
    with pytest.raises(UsageError, match=needle) as e:
        ip.run_cell_magic(magic, options, cell)
    assert _state(ip) == before
    return str(e.value)


# --------------------------------------------------------------------------- item 11


@pytest.mark.parametrize(
    ("magic", "options", "cell", "needle"),
    [
        (
            "grad",
            "",
            "m.k = x * 2\n(x ** 2).sum()",
            r"changes `m` in place \(line 1: `m.k = x \* 2`",
        ),
        ("grad", "", "global q6\nq6 = 1\n(x ** 2).sum()", "declares `global q6`"),
        ("grad", "", "d['c'] = x * 3\n(x ** 2).sum()", r"changes `d` in place \(line 1"),
        ("grad", "--check", "lst.append(9.0)\n(x ** 2).sum()", r"changes `lst` in place"),
        ("grad", "", "lst += [9.0]\n(x ** 2).sum()", r"changes `lst` in place"),
        ("grad", "", "del m\n(x ** 2).sum()", "deletes the notebook name `m`"),
        ("grad", "", "setattr(m, 'k', x)\n(x ** 2).sum()", "changes `m` in place"),
        (
            "grad",
            "",
            "exec('m.k = x')\n(x ** 2).sum()",
            r"calls exec \(line 1: .*jaxlab cannot see what exec",
        ),
        ("grad", "", "def f():\n    global q6\n    q6 = x\nf()\n(x ** 2).sum()", "global q6"),
        ("jit", "", "setattr(m, 'k', x)\ny = x", r"changes `m` in place \(line 1"),
        ("jit", "", "global x\nx = x + 1", "declares `global x`"),
        ("jit", "", "box.k = x\ny = x", r"changes `box` in place"),
        ("jit", "", "d.update(c=x)\ny = x", r"changes `d` in place"),
        ("jit", "", "m.__setattr__('k', x)\ny = x", r"changes `m` in place"),
    ],
)
def test_writes_outside_the_cell_are_refused_and_change_nothing(nb, magic, options, cell, needle):
    text = _refused(nb, magic, options, cell, needle)
    assert text.startswith(f"%%{magic}: ")
    assert "q6" not in nb.user_ns
    assert float(nb.user_ns["m"].k + 1) == 2.0  # no tracer left behind


def test_the_refusal_shows_the_fix_written_from_the_users_line(nb):
    text = _refused(nb, "grad", "", "d['c'] = x * 3\n(x ** 2).sum()", "changes `d`")
    assert "`d = {**d, 'c': x * 3}`" in text and "`d = d.at['c'].set(x * 3)`" in text
    text = _refused(nb, "grad", "", "m.k = x * 2\n(x ** 2).sum()", "changes `m`")
    assert "dataclasses.replace(m, k=x * 2)" in text and "eqx.tree_at" in text


@pytest.mark.parametrize(
    ("magic", "cell"),
    [
        ("grad", "a = m\na.k = x * 2\n(x ** 2).sum()"),
        ("grad", "push(lst)\n(x ** 2).sum()"),
        ("jit", "b = box\nb.k = x * 2\ny = x"),
    ],
)
def test_a_change_through_an_alias_is_undone_and_refused(nb, magic, cell):
    box_dict = nb.user_ns["box"].__dict__
    _refused(nb, magic, "", cell, r"changed `(m|lst|box)` in place \(through another name")
    assert nb.user_ns["box"].__dict__ is box_dict and nb.user_ns["lst"] == []


def test_grad_runs_the_alias_cell_once_per_trace_but_leaves_nothing(nb):
    before = _state(nb)
    with pytest.raises(UsageError):
        nb.run_cell_magic("grad", "--check", "push(lst)\n(x ** 2).sum()")
    assert _state(nb) == before and nb.user_ns["lst"] == []


def test_cells_that_build_their_own_objects_still_work(nb):
    cell = (
        "y = x * 2\n"
        "out = []\n"
        "out.append(y)\n"
        "cfg = {}\n"
        "cfg['a'] = y\n"
        "n = n + 1\n"  # a notebook name read, then assigned: the old value is the input
        "(out[0] ** 2).sum() + cfg['a'].sum() * n"
    )
    report = nb.run_cell_magic("grad", "-o --wrt x --check", cell)
    expected = jax.grad(lambda x: ((x * 2) ** 2).sum() + (x * 2).sum() * 3)(jnp.arange(3.0))
    np.testing.assert_allclose(report.grad, expected, rtol=1e-6)
    assert report.check.passed
    assert nb.user_ns["n"] == 3 and nb.user_ns["cfg"]["a"].shape == (3,)
    assert len(nb.user_ns["out"]) == 1 and nb.user_ns["lst"] == [] and nb.user_ns["d"] == {}
    value = nb.run_cell("%%jit\nz = [x]\nz.append(x + 1)\nq = {}\nq['s'] = z[1]\nq['s'].sum()")
    assert value.error_in_exec is None and float(value.result) == pytest.approx(6.0)


def test_optax_update_is_a_call_not_a_mutation(ip):
    optax = pytest.importorskip("optax")
    ip.user_ns.update(jnp=jnp, opt=optax.sgd(0.5), params=jnp.ones(2))
    ip.run_cell("state = opt.init(params)")
    cell = "g = params * 2\nupdates, state2 = opt.update(g, state, params)\nnew = params + updates"
    ip.run_cell_magic("jit", "", cell)
    np.testing.assert_allclose(ip.user_ns["new"], jnp.zeros(2))


def test_analysis_finds_each_write_with_its_line():
    program = analyse_cell("y = m\ny.k = 1\nd['a'] = 2\nlst.append(3)\nglobal g\ndel e\nz = e")
    found = [(w.name, w.line, w.kind, w.containers_only) for w in outside_writes(program)]
    assert found == [
        ("d", 3, "item", False),
        ("lst", 4, "method", True),
        ("g", 5, "global", False),
        ("e", 6, "del", False),
    ]  # y.k: y is the cell's own name (the alias is the run-time guard's job)


def test_guard_restores_containers_and_attributes():
    obj, items, table = types.SimpleNamespace(a=1), [1, 2], {"k": 1}
    changed = pytest.raises(ProgramError, match="changed `obj`, `items`, `table` in place")
    with changed, guarded({"obj": obj, "items": items, "table": table}):
        items.append(3)
        obj.a = 2
        obj.b = 3  # a plain new attribute is a cache, restored with the rest
        table["k"] = 5
    assert items == [1, 2] and obj.__dict__ == {"a": 1} and table == {"k": 1}
    with guarded({"obj": obj}):
        obj.cache = 1.0  # a cached_property filling in: allowed
    assert obj.cache == 1.0


_FRAGMENTS = [
    "y = x * 2",
    "m.k = x",
    "d['c'] = x",
    "lst.append(1.0)",
    "a = m",
    "a.k = x",
    "b = box",
    "b.k = x * 3",
    "global q",
    "q = 1",
    "del d",
    "setattr(box, 'k', x)",
    "push(lst)",
    "z = [x]",
    "z.append(x)",
    "lst += [x]",
    "n = n + 1",
    "exec('q = 1')",
    "await x",
    "yield x",
    "return x",
    "from math import *",
    "if x.sum() > 0:\n    y = x",
]


@settings(
    max_examples=40,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    magic=st.sampled_from(["jit", "grad"]),
    body=st.lists(st.sampled_from(_FRAGMENTS), min_size=1, max_size=4),
    final=st.booleans(),
)
def test_any_cell_is_a_value_or_a_usage_error_and_never_changes_notebook_objects(
    nb, magic, body, final
):
    m, d, lst, box = types.SimpleNamespace(k=1.0), {}, [], Box()
    nb.user_ns.update(x=jnp.arange(3.0), m=m, d=d, lst=lst, box=box, n=2)
    nb.user_ns.pop("q", None)
    before = _state(nb)
    cell = "\n".join(body) + ("\n(x ** 2).sum()" if final else "")
    try:
        nb.run_cell_magic(magic, "", cell)
    except UsageError:
        assert _state(nb) == before, cell
    # Success or not, the notebook's objects hold what they held: no tracer, no append.
    assert m.__dict__ == {"k": 1.0} and d == {} and lst == [] and box.__dict__ == {"k": 1.0}
    assert nb.user_ns["d"] is d and nb.user_ns["m"] is m
    if any(f.startswith(("global", "exec")) for f in body):  # always refused
        assert "q" not in nb.user_ns


# --------------------------------------------------------------------------- item 14


@pytest.mark.parametrize("magic", ["jit", "grad"])
@pytest.mark.parametrize(
    ("cell", "needle"),
    [
        ("await x", r"line 1: `await x` awaits.*normal cell first"),
        ("y = x\nfrom math import *\n(x ** 2).sum()", r"line 2: `from math import \*`.*sin, cos"),
        ("yield x", r"line 1: `yield x` yields.*generator"),
        ("y = x\nreturn (y ** 2).sum()", r"line 2: .*returns outside a function.*`\(y \*\* 2\)"),
        ("async for i in x:\n    pass\nx.sum()", "line 1: .*awaits"),
        ("nonlocal x\n(x ** 2).sum()", "line 1: `nonlocal x`.*nested function"),
    ],
)
def test_code_that_cannot_be_a_function_gets_a_usage_error(nb, magic, cell, needle):
    text = _refused(nb, magic, "", cell, f"%%{magic}: ")
    assert re.search(needle, text, flags=re.S), text
    assert "y" not in nb.user_ns


# --------------------------------------------------------------------------- item 12


def test_jit_cell_splits_and_samples_a_typed_key_like_plain_jax(ip):
    ip.run_cell("import jax\nkey = jax.random.key(0)")
    cell = "key, sub = jax.random.split(key)\nz = jax.random.normal(sub, (3,))\nz.sum()"
    run = ip.run_cell_magic("jit", "-o", cell)
    key, sub = jax.random.split(jax.random.key(0))
    np.testing.assert_array_equal(ip.user_ns["z"], jax.random.normal(sub, (3,)))
    np.testing.assert_array_equal(jax.random.key_data(ip.user_ns["key"]), jax.random.key_data(key))
    assert run.compiled and run.inputs == ("key",) and run.signature[0] == "key: key<fry>[]"
    again = ip.run_cell_magic("jit", "-o", cell)  # a new key of the same type: no compile
    assert not again.compiled
    key, sub = jax.random.split(key)
    np.testing.assert_array_equal(ip.user_ns["z"], jax.random.normal(sub, (3,)))


def test_a_new_key_type_recompiles_with_its_reason():
    cells = CellJit(CompileLog())
    ns = {"jax": jax, "key": jax.random.key(0)}
    cells.run("k2 = jax.random.split(key, 4)\nk2", ns)
    ns["key"] = jax.random.key(0, impl="rbg")
    _, run = cells.run("k2 = jax.random.split(key, 4)\nk2", ns)
    assert run is not None and run.explanation == "key: key<fry>[] → key<rbg>[]"
    assert str(ns["k2"].dtype) == "key<rbg>" and ns["k2"].shape == (4,)


# --------------------------------------------------------------------------- item 21a


def test_jit_cell_over_an_equinox_mlp_equals_the_eager_call():
    log = CompileLog()
    cells = CellJit(log)
    model = eqx.nn.MLP(2, 3, 8, 2, key=jax.random.key(0))
    ns = {"jax": jax, "model": model, "x": jnp.ones((5, 2))}
    source = "y = jax.vmap(model)(x)\ny.sum()"
    with log.recording():
        value, run = cells.run(source, ns)
        assert run is not None and run.inputs == ("model", "x")
        np.testing.assert_allclose(ns["y"], jax.vmap(model)(ns["x"]), rtol=1e-6)
        np.testing.assert_allclose(value, jax.vmap(model)(ns["x"]).sum(), rtol=1e-6)
        compiled = len(log.for_function(run.name))
        _, again = cells.run(source, ns)
        assert again is None and len(log.for_function(run.name)) == compiled == 1
        # Same structure, a new weight shape: recompiles and names the leaf.
        wider = eqx.tree_at(lambda m: m.layers[0].weight, model, jnp.ones((8, 4)))
        ns.update(model=wider, x=jnp.ones((5, 4)))
        _, new = cells.run(source, ns)
    assert new is not None and new.compiled
    assert {c.name: (c.before, c.after) for c in new.changes} == {
        "model.layers[0].weight": ("f32[8,2]", "f32[8,4]"),
        "x": ("f32[5,2]", "f32[5,4]"),
    }
    assert len(log.for_function(new.name)) == 2
    np.testing.assert_allclose(ns["y"], jax.vmap(wider)(ns["x"]), rtol=1e-6)


def test_a_static_leaf_change_recompiles_and_a_model_is_not_told_to_become_an_array():
    cells = CellJit(CompileLog())
    make = lambda act: eqx.nn.MLP(2, 1, 4, 1, activation=act, key=jax.random.key(1))  # noqa: E731
    ns = {"model": make(jax.nn.relu), "x": jnp.ones(2)}
    cells.run("y = model(x)", ns)
    ns["model"] = make(jnp.tanh)
    _, run = cells.run("y = model(x)", ns)
    assert run is not None and run.explanation.startswith("model.activation: ")
    assert "(static) → tanh (static)" in run.explanation
    np.testing.assert_allclose(ns["y"], ns["model"](ns["x"]), rtol=1e-6)
    ns["m"] = types.SimpleNamespace(k=1.0)
    with pytest.raises(ProgramError) as e:
        cells.run("y = x * m.k", ns)
    assert "jnp.asarray(m)" not in str(e.value) and "`k = m.k`" in str(e.value)


def test_a_dict_of_arrays_and_settings_takes_the_settings_as_static():
    cells = CellJit(CompileLog())
    ns = {"jnp": jnp, "cfg": {"w": jnp.ones(3), "mode": "double", "act": jnp.tanh}}
    source = "y = cfg['act'](cfg['w'])\nif cfg['mode'] == 'double':\n    y = y * 2\ny.sum()"
    value, run = cells.run(source, ns)
    assert float(value) == pytest.approx(6 * np.tanh(1.0), rel=1e-6)
    assert run is not None and run.inputs == ("cfg",)
    ns["cfg"] = {**ns["cfg"], "mode": "single"}
    value, run = cells.run(source, ns)
    assert float(value) == pytest.approx(3 * np.tanh(1.0), rel=1e-6)
    assert (
        run is not None and run.explanation == "cfg['mode']: 'double' (static) → 'single' (static)"
    )
    # Arrays and numbers only: traced as plain JAX takes them, a new number compiles nothing.
    ns = {"p": {"w": jnp.ones(3), "lr": 0.1}}
    cells.run("y = p['w'] * p['lr']", ns)
    ns["p"] = {"w": jnp.ones(3), "lr": 0.2}
    assert cells.run("y = p['w'] * p['lr']", ns)[1] is None
    np.testing.assert_allclose(ns["y"], 0.2 * np.ones(3), rtol=1e-6)


def test_jit_cell_over_a_flax_nnx_module_equals_the_eager_call():
    nnx = pytest.importorskip("flax.nnx")
    cells = CellJit(CompileLog())
    layer = nnx.Linear(2, 3, rngs=nnx.Rngs(0))
    ns = {"layer": layer, "x": jnp.ones((4, 2))}
    value, run = cells.run("y = layer(x)\ny.sum()", ns)
    np.testing.assert_allclose(ns["y"], layer(ns["x"]), rtol=1e-6)
    np.testing.assert_allclose(value, layer(ns["x"]).sum(), rtol=1e-6)
    assert run is not None and run.inputs == ("layer", "x")
    assert cells.run("y = layer(x)\ny.sum()", ns)[1] is None


def test_jit_cell_over_a_graph_mode_nnx_module_splits_it_with_nnx():
    nnx = pytest.importorskip("flax.nnx")

    class Block(nnx.Module, pytree=False):  # not a pytree: nnx.split / nnx.merge
        def __init__(self, rngs):
            self.lin = nnx.Linear(2, 3, rngs=rngs)
            self.act = jax.nn.relu

        def __call__(self, x):
            return self.act(self.lin(x))

    block = Block(nnx.Rngs(0))
    assert jax.tree_util.tree_leaves(block) == [block]
    cells = CellJit(CompileLog())
    ns = {"block": block, "x": jnp.ones((4, 2))}
    _, run = cells.run("y = block(x)", ns)
    np.testing.assert_allclose(ns["y"], block(ns["x"]), rtol=1e-6)
    assert run is not None and run.inputs == ("block", "x")
    assert cells.run("y = block(x)", ns)[1] is None
    block.lin = nnx.Linear(2, 5, rngs=nnx.Rngs(1))
    _, run = cells.run("y = block(x)", ns)
    assert run is not None
    assert run.explanation == "block: Block(f32[3], f32[2,3]) → Block(f32[5], f32[2,5])"
    np.testing.assert_allclose(ns["y"], block(ns["x"]), rtol=1e-6)
