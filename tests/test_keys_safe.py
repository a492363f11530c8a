"""Key tracking is safe to leave on (issue 32): a jitted function lives as long as what
JAX returned for it, the lineage's cap is a bound and never an exception, ``%keys off``
takes jaxlab's callbacks out of every compiled program, and two keys of one seed made
before tracking are two keys."""

from __future__ import annotations

import functools
import gc
import warnings
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab import JaxlabWarning, key_lineage, track_keys
from jaxlab.keys import store
from jaxlab.keys.track import warn_pending


@pytest.fixture(autouse=True)
def clean():
    key_lineage().clear()
    yield
    track_keys(False)
    key_lineage().clear()


def equations(jaxpr) -> tuple[int, int]:
    """(equations, debug callbacks) in a jaxpr and every jaxpr in its equations' params."""
    jaxpr = getattr(jaxpr, "jaxpr", jaxpr)
    count = callbacks = 0
    for eqn in jaxpr.eqns:
        count += 1
        callbacks += "callback" in eqn.primitive.name
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple | list) else (value,):
                if hasattr(sub, "eqns") or hasattr(getattr(sub, "jaxpr", None), "eqns"):
                    more, calls = equations(sub)
                    count, callbacks = count + more, callbacks + calls
    return count, callbacks


# --------------------------------------------------------------------------- lifetime
X = jnp.arange(3.0)


@pytest.mark.parametrize(
    "use",
    [
        lambda: jax.jit(lambda q: q * 2).lower(X).compile()(X),
        lambda: jax.jit(lambda q: q * 2).trace(X).lower().compile()(X),
        lambda: jax.jit(functools.partial(lambda a, q: q * a, 2.0)).lower(X).compile()(X),
        lambda: jnp.zeros(jax.jit(lambda q: q * 2).eval_shape(X).shape) + 2 * X,
    ],
    ids=["lower", "trace", "partial", "eval_shape"],
)
def test_a_temporary_jitted_function_lives_until_jax_has_traced_it(use):
    with track_keys():
        got = use()
    np.testing.assert_array_equal(got, 2 * X)


def test_the_function_lives_as_long_as_what_jax_returned_for_it_and_no_longer():
    def double(q):
        return q * 2

    alive = weakref.ref(double)
    with track_keys():
        lower = jax.jit(double).lower  # the jitted function itself is gone at once
        del double
        gc.collect()
        assert alive() is not None  # a bound .lower can still trace it
        compiled = lower(X).compile()
        del lower
    gc.collect()
    np.testing.assert_array_equal(compiled(X), 2 * X)
    assert alive() is None  # only the memo was left: weak, so nothing keeps it


def test_jitted_twice_shares_one_trace_per_options_while_the_function_lives():
    traces = []

    def f(x):
        traces.append(1)
        return x + 1

    with track_keys():
        jax.jit(f)(X)
        jax.jit(f).lower(X)  # the memo's compiled function: JAX's cache, no new trace
        jax.jit(f, donate_argnums=())(X)  # other options: its own
    assert len(traces) == 2


def _shell_with_keys_on(ip):
    ip.run_cell("import jax, jax.numpy as jnp\nx = jnp.arange(3.0)\ndef f(q):\n    return q * 2\n")
    with capture_output():
        ip.run_line_magic("keys", "on")


def test_aot_code_runs_with_keys_on_in_a_shell(ip):
    _shell_with_keys_on(ip)
    result = ip.run_cell("out = jax.jit(lambda q: q * 2).lower(x).compile()(x)")
    assert result.success, result.error_in_exec
    np.testing.assert_array_equal(ip.user_ns["out"], [0.0, 2.0, 4.0])


def test_bench_runs_with_keys_on_in_a_shell(ip):
    _shell_with_keys_on(ip)
    runs = []
    with capture_output():
        for _ in range(4):  # the function jax.jit made inside %bench dies between calls
            runs.append(ip.run_line_magic("bench", "-o -n 2 -r 2 f(x)"))
    assert [(r.name, r.runs, r.repeats) for r in runs] == [("f(x)", 2, 2)] * 4


def test_profile_graph_runs_with_keys_on_in_a_shell(ip):
    _shell_with_keys_on(ip)
    ip.run_cell(
        "def step(a):\n    return jnp.tanh(a @ a).sum()\ng = jax.jit(step)\ny = jnp.ones((8, 8))"
    )
    with capture_output():
        result = ip.run_cell_magic("profile", "--graph --static -o", "g(y).block_until_ready()")
    assert result.costliest_function() == "step"


# --------------------------------------------------------------------------- the cap
def test_the_cap_forgets_the_oldest_keys_and_a_seed_after_it_is_recorded(monkeypatch):
    monkeypatch.setattr(store, "MAX_NODES", 40)
    with track_keys():
        for _ in range(3):
            jax.random.key(0)  # twins of one seed: the data's list of nodes
        for seed in range(1, 61):
            jax.random.key(seed)  # pushes every key(0) past the cap
    track_keys(False)
    track_keys(True)
    jax.random.key(0)  # was an IndexError (its data's list of nodes emptied by the cap)
    lineage = key_lineage()
    assert lineage.size <= 40
    assert lineage.size + lineage.dropped == 64  # every key held, or counted as older
    newest = lineage.nodes[-1]
    assert newest.origin == "seed" and lineage.find(bytes.fromhex(newest.data)) == newest
    assert lineage.same_seeds == {}  # its twins were forgotten: nothing to point at


def test_every_path_through_created_is_total_under_a_tiny_cap(monkeypatch):
    monkeypatch.setattr(store, "MAX_NODES", 6)
    made = 0
    with track_keys():
        for i in range(120):
            if i % 17 == 0:
                track_keys(False)
                track_keys(True)
            key = jax.random.key(i % 4)  # four seeds, each made again and again
            made += 1
            if i % 5 == 0:
                jax.random.normal(key)
    lineage = key_lineage()
    assert lineage.size <= 6 and lineage.size + lineage.dropped == made
    held = {n.id for n in lineage.nodes}
    assert set(lineage.same_seeds) <= held
    assert lineage.reuses == ()


def test_the_cap_leaves_no_mapping_pointing_at_a_forgotten_key_nor_a_used_key_unknown(
    monkeypatch,
):
    monkeypatch.setattr(store, "MAX_NODES", 100)
    monkeypatch.setattr(store, "MAX_EVENTS", 90)
    monkeypatch.setattr(store, "MAX_NOTED", 20)  # the used keys' data rebuilt as it forgets

    def cell(seed, n):  # a seed run again: its keys' data have a list of nodes each
        key = jax.random.key(seed)
        for _ in range(n):
            key, sub = jax.random.split(key)
            jax.random.normal(sub, (2,))

    with track_keys():
        for seed in (0, 0, 1, 2, 3):
            cell(seed, 30)
            warn_pending()  # the noted calls recorded, forgetting as they go
        lineage = key_lineage()
        assert lineage.size <= 100 and lineage.size + lineage.dropped == 5 * 61
        assert len(lineage.events) <= 90
        held = set(lineage._nodes)
        assert min(held) > 0 and max(held) == lineage._next_node - 1  # the newest kept
        assert set(lineage._consumers) <= held and set(lineage._consumed_by) <= held
        ids = [
            n for v in lineage._data_index().values() for n in ([v] if isinstance(v, int) else v)
        ]
        assert set(ids) == held and len(ids) == len(held)  # each held key by its data, once
        used = {lineage._nodes[n][0] for n in lineage._consumed_by if n in held}
        assert used <= lineage._consumed_data  # (a rebuild while recording lost some)
        _, sub = jax.random.split(jax.random.key(99))
        with pytest.warns(JaxlabWarning, match="reused"):
            jax.random.normal(sub)
            jax.random.normal(sub)  # a reuse after the cap forgot, still told
            warn_pending()


def test_keys_looked_up_by_data_before_the_cap_forgets_them_leave_the_data_index(monkeypatch):
    monkeypatch.setattr(store, "MAX_NODES", 100)
    monkeypatch.setattr(store, "MAX_EVENTS", 90)
    with track_keys():
        lineage = key_lineage()
        for seed in range(6):
            key = jax.random.key(seed)
            for _ in range(30):
                key, sub = jax.random.split(key)
                jax.random.normal(sub, (2,))
            warn_pending()
            # a look-up by data (the index brought up to date), then the next cell forgets
            assert lineage.find(jax.random.key_data(key)) is not None
        held = set(lineage._nodes)
        assert lineage.dropped > 0 and min(held) > 0
        index = lineage._data_index()
        ids = [n for v in index.values() for n in ([v] if isinstance(v, int) else v)]
        assert set(ids) == held and len(ids) == len(held)  # no forgotten key left in it


# --------------------------------------------------------------------------- %keys off
PROGRAM = """\
import jax

def make_inner():
    return jax.jit(lambda k: jax.random.uniform(k, (2,)))  # not a name the user sees

inner = make_inner()

@jax.jit
def f(key):
    a, b = jax.random.split(key)
    return jax.random.normal(a, (2,)) + inner(b)

key = jax.random.key(0)
f(key)
"""


def test_keys_off_takes_every_callback_out_of_code_traced_while_on(ip):
    ip.run_cell(PROGRAM)
    f, key = ip.user_ns["f"], ip.user_ns["key"]
    before = equations(jax.make_jaxpr(f)(key))
    traced = equations(f.trace(key).jaxpr)
    assert before[1] == traced[1] == 0
    with capture_output():
        ip.run_line_magic("keys", "on")  # f's compiled code dropped: traced again when called
    assert ip.run_cell("f(key)").success
    assert equations(f.trace(key).jaxpr)[1] > 0  # while on: jaxlab's callbacks in it
    with capture_output() as out:
        ip.run_line_magic("keys", "off")
    assert equations(jax.make_jaxpr(f)(key)) == before
    assert equations(f.trace(key).jaxpr) == traced
    assert "callback" not in f.lower(key).as_text()
    assert "compiles again" in out.stdout
    events = key_lineage().event_count
    f(key)
    jax.effects_barrier()
    assert key_lineage().event_count == events


def test_keys_off_without_callbacks_keeps_jaxs_compiled_code():
    traces = []

    @jax.jit
    def g(x):
        traces.append(1)
        return x + 1

    g(X)
    with track_keys():
        jax.random.normal(jax.random.key(0))  # eager: no callback compiled anywhere
    g(X)
    assert len(traces) == 1


# --------------------------------------------------------------------------- identity
def _debug_key_reuse_raises(run) -> bool:
    """Whether JAX's own checker finds a reuse in ``run()`` (tracking off)."""
    jax.config.update("jax_debug_key_reuse", True)
    try:
        run()
        return False
    except Exception as e:  # KeyReuseError is not public API
        assert type(e).__name__ == "KeyReuseError", e
        return True
    finally:
        jax.config.update("jax_debug_key_reuse", False)


USES = {
    "jit": lambda draw: draw,
    "eager": lambda draw: lambda k: jax.random.normal(k, (2,)),
}


@pytest.mark.parametrize("second", ["jit", "eager"])
@pytest.mark.parametrize("first", ["jit", "eager"])
@pytest.mark.parametrize("same_object", [False, True])
def test_keys_made_before_tracking_are_told_apart_by_identity(first, second, same_object):
    def program(draw):
        k1 = jax.random.key(2)
        k2 = k1 if same_object else jax.random.key(2)
        return k1, k2, lambda: (USES[first](draw)(k1), USES[second](draw)(k2))

    _, _, run = program(jax.jit(lambda k: jax.random.normal(k, (2,))))
    jax_says = _debug_key_reuse_raises(run)
    k1, k2, _ = program(None)  # made before tracking began
    with track_keys(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", JaxlabWarning)
        draw = jax.jit(lambda k: jax.random.normal(k, (2,)))  # jitted while on
        USES[first](draw)(k1)
        USES[second](draw)(k2)
        reuses = key_lineage().reuses
        warn_pending()  # as at the end of a cell
    assert jax_says == same_object
    assert len(reuses) == len(caught) == int(same_object)
    if not same_object:
        assert len(key_lineage().same_seeds) == 1  # told as a same-seed note instead


def test_the_lineage_still_reads_keys_after_tracking_switched_off_and_on():
    k1, k2 = jax.random.key(5), jax.random.key(5)
    with track_keys():
        draw = jax.jit(lambda k: jax.random.normal(k))
        draw(k1)
    with track_keys():
        draw(k2)
        assert len(jaxlab.key_lineage().nodes) == 2  # read: both calls replayed
    assert key_lineage().reuses == ()


@pytest.mark.parametrize("twice_inside", [False, True])
def test_a_function_compiled_before_tracking_tells_keys_apart_as_jax_does(twice_inside):
    def body(k):
        x = jax.random.normal(k, (2,))
        return x + jax.random.uniform(k, (2,)) if twice_inside else x

    def program(f):
        k1, k2 = jax.random.key(3), jax.random.key(3)  # two objects of one seed
        return lambda: (f(k1), f(k2))

    jax_says = _debug_key_reuse_raises(program(jax.jit(body)))
    compiled = jax.jit(body)
    run = program(compiled)  # its keys made before tracking began
    compiled.clear_cache()  # as %keys on does: traced again, with jaxlab's callbacks
    with warnings.catch_warnings(record=True), track_keys():
        warnings.simplefilter("always", JaxlabWarning)
        run()
        jax.effects_barrier()
        reuses = key_lineage().reuses
    assert jax_says == twice_inside
    # inside: one reuse per call (each call draws twice from its one key), told apart
    assert [(r.first_op, r.second_op) for r in reuses] == [("normal", "uniform")] * (
        2 * twice_inside
    )
    assert len(key_lineage().same_seeds) == 1  # k2: another key of k1's data
