"""PRNG key lineage: records, reuse, static flow, jit on every call, vmap, scan, typed and
legacy keys, pytrees, tracking switched on mid-session, agreement with JAX's own checker."""

from __future__ import annotations

import sys
import warnings
from contextlib import contextmanager

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.utils.capture import capture_output

from jaxlab import JaxlabWarning, key_flow, key_lineage, track_keys
from jaxlab.keys import events, record, store, track
from jaxlab.keys.site import Site
from jaxlab.keys.tree import GROUP, lineage_tree
from jaxlab.keys.view import lineage_html


def here() -> int:
    """The caller's line number (so tests name the lines they expect)."""
    return sys._getframe(1).f_lineno


@pytest.fixture(autouse=True)
def clean():
    key_lineage().clear()
    yield
    track_keys(False)
    key_lineage().clear()


def data(key) -> str:
    raw = jax.random.key_data(key) if jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key) else key
    return np.asarray(raw).tobytes().hex()


@contextmanager
def quiet():
    """Reuse warnings are asserted on records here; the warning has its own test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", JaxlabWarning)
        yield


# --------------------------------------------------------------------------- records
def test_a_key_split_in_three_each_sampled_one_folded_in_gives_the_expected_tree():
    with track_keys():
        key = jax.random.key(42)
        line_split = here() + 1
        k0, k1, k2 = jax.random.split(key, 3)
        draws = [jax.random.normal(k, (2, 3)) for k in (k0, k1, k2)]
        folded = jax.random.fold_in(k1, 7)
    lineage = key_lineage()
    nodes = {n.data: n for n in lineage.nodes}
    seed = nodes[data(key)]
    assert seed.origin == "seed" and seed.parent is None
    children = [nodes[data(k)] for k in (k0, k1, k2)]
    assert [c.origin for c in children] == ["split"] * 3
    assert [c.index for c in children] == [0, 1, 2]
    assert {c.parent for c in children} == {seed.id}
    assert all(c.site.lineno == line_split for c in children)
    fold = nodes[data(folded)]
    assert fold.origin == "fold_in" and fold.parent == children[1].id
    edges = {(e.parent, e.child, e.op) for e in lineage.edges}
    assert edges == {(seed.id, c.id, "split") for c in children} | {
        (children[1].id, fold.id, "fold_in")
    }
    for child, draw in zip(children, draws, strict=True):
        (use,) = lineage.consumers(child.id)
        assert (use.op, use.kind, use.shape, use.dtype) == ("normal", "consume", (2, 3), "float32")
        assert draw.shape == (2, 3)
    assert lineage.reuses == ()
    assert all(n.site.filename == __file__ for n in lineage.nodes)


def test_reuse_is_flagged_at_once_with_both_lines():
    with track_keys():
        key = jax.random.key(0)
        first = here() + 1
        jax.random.normal(key, (3,))
        second = here() + 2
        with pytest.warns(JaxlabWarning, match="consumed twice") as caught:
            jax.random.uniform(key, (3,))
    (reuse,) = key_lineage().reuses
    assert (reuse.first.lineno, reuse.second.lineno) == (first, second)
    assert (reuse.first_op, reuse.second_op, reuse.kind) == ("normal", "uniform", "consumed twice")
    assert reuse.first.filename == reuse.second.filename == __file__
    assert caught[0].lineno == second and caught[0].filename == __file__
    assert f"line {first}" in str(caught[0].message)


def test_a_key_used_after_it_was_split_is_a_reuse():
    with quiet(), track_keys():
        key = jax.random.key(1)
        jax.random.split(key)
        jax.random.normal(key)
    (reuse,) = key_lineage().reuses
    assert reuse.kind == "used after split"


def test_fold_in_and_clone_do_not_consume():
    with track_keys():
        key = jax.random.key(2)
        jax.random.fold_in(key, 1)
        copy = jax.random.clone(key)
        jax.random.normal(key)
        jax.random.normal(copy)  # a clone may be drawn from once more
    assert key_lineage().reuses == ()
    origins = sorted(n.origin for n in key_lineage().nodes)
    assert origins == ["clone", "fold_in", "seed"]


def test_results_are_bit_identical_with_tracking_on_and_off():
    def program(key):
        k1, k2 = jax.random.split(key)
        ks = jax.random.split(k2, 4)
        jitted = jax.jit(
            lambda k: jax.random.normal(k, (5,)) + jax.random.uniform(jax.random.fold_in(k, 3))
        )
        scanned = jax.lax.scan(lambda c, k: (c + jax.random.normal(k), None), 0.0, ks)[0]
        return (
            jax.random.normal(k1, (4,)),
            jax.vmap(lambda k: jax.random.bernoulli(k, 0.3, (3,)))(ks),
            jitted(k1),
            scanned,
            jax.random.randint(ks[0], (6,), 0, 10),
            jax.random.permutation(ks[1], 8),
            jax.random.categorical(ks[2], jnp.log(jnp.array([0.2, 0.3, 0.5])), shape=(7,)),
        )

    off = program(jax.random.key(7))
    with quiet(), track_keys():
        on = program(jax.random.key(7))
    assert len(key_lineage().events) > 10  # tracking did record
    for a, b in zip(off, on, strict=True):
        assert a.dtype == b.dtype and np.array_equal(np.asarray(a), np.asarray(b))


def test_a_jitted_function_records_on_every_call():
    @jax.jit
    def step(key):
        sub = jax.random.fold_in(key, 1)
        return jax.random.normal(sub, (3,))

    keys = [jax.random.key(i) for i in range(3)]
    with track_keys():
        for k in keys:
            step(k)
        jax.effects_barrier()
    lineage = key_lineage()
    draws = [e for e in lineage.events if e.op == "normal"]
    assert len(draws) == 3 and all(e.traced and not e.in_loop for e in draws)
    # each call's key is the fold_in of that call's argument
    for k, e in zip(keys, draws, strict=True):
        (node,) = [n for n in lineage.nodes if n.id == e.inputs[0]]
        assert node.data == data(jax.random.fold_in(k, 1))
        assert node.origin == "fold_in"
        parent = next(n for n in lineage.nodes if n.id == node.parent)
        assert parent.data == data(k) and parent.origin == "unknown"  # made before tracking


def test_vmap_over_split_keys_records_each_key():
    with track_keys():
        keys = jax.random.split(jax.random.key(3), 4)
        out = jax.vmap(lambda k: jax.random.normal(k, (2,)))(keys)
        jax.effects_barrier()
    lineage = key_lineage()
    draws = [e for e in lineage.events if e.op == "normal"]
    assert len(draws) == 4
    drawn = sorted(next(n for n in lineage.nodes if n.id == e.inputs[0]).index for e in draws)
    assert drawn == [0, 1, 2, 3]
    assert out.shape == (4, 2)


def test_a_scan_body_is_one_node_per_line_and_its_reuse_is_seen():
    def body(carry, key):
        line = here() + 1
        a = jax.random.normal(key)
        b = jax.random.normal(key)  # the same key twice in one iteration
        return carry + a + b, line

    with quiet(), track_keys():
        jax.lax.scan(body, 0.0, jax.random.split(jax.random.key(4), 1000))
    lineage = key_lineage()
    loop = [e for e in lineage.events if e.in_loop]
    assert [e.op for e in loop] == ["normal", "normal"]  # once, not 1000 times
    (reuse,) = lineage.reuses
    assert reuse.second.lineno == reuse.first.lineno + 1


def test_typed_and_legacy_keys_are_both_followed():
    with quiet(), track_keys():
        legacy = jax.random.PRNGKey(5)
        a, _b = jax.random.split(legacy)
        jax.random.normal(a)
        jax.random.normal(a)
    lineage = key_lineage()
    nodes = {n.data: n for n in lineage.nodes}
    assert nodes[data(legacy)].origin == "seed"
    assert nodes[data(a)].parent == nodes[data(legacy)].id
    assert len(lineage.reuses) == 1 and lineage.reuses[0].key == nodes[data(a)].id


def test_keys_in_pytrees_passed_to_jit():
    @jax.jit
    def draw(tree):
        return {name: jax.random.uniform(k) for name, k in tree.items()}

    with track_keys():
        k1, k2 = jax.random.split(jax.random.key(6))
        draw({"w": k1, "b": k2})
        jax.effects_barrier()
    lineage = key_lineage()
    used = {
        next(n for n in lineage.nodes if n.id == e.inputs[0]).index
        for e in lineage.events
        if e.op == "uniform"
    }
    assert used == {0, 1}


def test_keys_made_before_tracking_are_roots_of_unknown_origin():
    before = jax.random.key(8)
    with track_keys():
        k1, _ = jax.random.split(before)
        jax.random.normal(k1)
    root = key_lineage().find(np.asarray(jax.random.key_data(before)))
    assert root is not None and root.origin == "unknown" and root.parent is None
    assert {n.parent for n in key_lineage().nodes if n.origin == "split"} == {root.id}


def test_switching_off_restores_jax_random_and_records_nothing():
    originals = {name: getattr(jax.random, name) for name in ("split", "normal", "key")}
    track_keys()
    assert jax.random.split is not originals["split"]
    track_keys(False)
    assert {name: getattr(jax.random, name) for name in originals} == originals
    jax.random.normal(jax.random.key(0))
    assert key_lineage().events == ()


def test_a_compiled_callback_records_nothing_once_tracking_is_off():
    f = jax.jit(lambda k: jax.random.normal(k))
    with track_keys():
        f(jax.random.key(0))
        jax.effects_barrier()
    count = len(key_lineage().events)
    f(jax.random.key(1))  # the callback is compiled in, but tracking is off
    jax.effects_barrier()
    assert len(key_lineage().events) == count


def test_the_store_is_bounded(monkeypatch):
    monkeypatch.setattr(store, "MAX_NODES", 100)
    with track_keys():
        key = jax.random.key(0)
        for _ in range(80):
            key, _ = jax.random.split(key)
    lineage = key_lineage()
    assert len(lineage.nodes) <= 100
    assert lineage.dropped > 0
    assert f"{lineage.dropped} oldest keys forgotten" in lineage_html(lineage)


def test_a_library_we_did_not_write_is_charged_to_the_users_line():
    with track_keys():
        line = here() + 1
        eqx.nn.Linear(2, 3, key=jax.random.key(0))
    lineage = key_lineage()
    assert any(e.kind == "consume" for e in lineage.events)
    assert {e.site.lineno for e in lineage.events} == {line}


# --------------------------------------------------------------------------- JAX agrees
def _prog_twice(k):
    return jax.random.normal(k) + jax.random.normal(k)


def _prog_after_split(k):
    a, _b = jax.random.split(k)
    return jax.random.normal(k) + jax.random.normal(a)


def _prog_fold(k):
    return jax.random.normal(jax.random.fold_in(k, 1)) + jax.random.normal(k)


def _prog_good(k):
    a, b = jax.random.split(k)
    return jax.random.normal(a) + jax.random.uniform(b)


def _prog_index(k):
    ks = jax.random.split(k, 3)
    return jax.random.normal(ks[0]) + jax.random.normal(ks[0])


@pytest.mark.parametrize(
    "program", [_prog_twice, _prog_after_split, _prog_fold, _prog_good, _prog_index]
)
@pytest.mark.parametrize("jitted", [False, True])
def test_jaxlab_and_jax_debug_key_reuse_agree(program, jitted):
    # a new function for each jit: a trace JAX cached without tracking is not retraced
    def fresh():
        return jax.jit(lambda k: program(k)) if jitted else program

    run = fresh()
    jax.config.update("jax_debug_key_reuse", True)
    try:
        try:
            run(jax.random.key(11))
            jax_says = False
        except Exception as e:  # KeyReuseError is not public API
            assert type(e).__name__ == "KeyReuseError"
            jax_says = True
    finally:
        jax.config.update("jax_debug_key_reuse", False)
    with quiet(), track_keys():
        fresh()(jax.random.key(11))
        jax.effects_barrier()
    ours = bool(key_lineage().reuses)
    assert ours == jax_says
    assert bool(key_flow(program, jax.random.key(11)).reuses) == jax_says


# --------------------------------------------------------------------------- static flow
def test_static_flow_finds_the_same_reuse_as_the_runtime():
    def f(key):
        x = jax.random.normal(key, (3,))
        return x + jax.random.uniform(key, (3,))

    with track_keys(), pytest.warns(JaxlabWarning, match="^key is reused .* uniform at ") as w:
        jax.jit(f)(jax.random.key(0))
        assert len(w) == 1  # said right after the call, not when someone looks
    (runtime,) = key_lineage().reuses
    key_lineage().clear()
    flow = key_flow(f, jax.random.key(0))
    (static,) = flow.reuses
    assert (static.first.lineno, static.second.lineno) == (
        runtime.first.lineno,
        runtime.second.lineno,
    )
    assert (static.first_op, static.second_op) == ("normal", "uniform")
    assert key_lineage().events == ()  # key_flow ran nothing and recorded nothing


def test_static_flow_through_loops_conditionals_and_legacy_keys():
    def closed_over(key):
        return jax.lax.scan(lambda c, _: (c + jax.random.normal(key), None), 0.0, None, length=3)[0]

    def carried(key):
        def body(k, _):
            k, sub = jax.random.split(k)
            return k, jax.random.normal(sub)

        return jax.lax.scan(body, key, None, length=3)

    def carried_unchanged(key):
        return jax.lax.scan(lambda k, _: (k, jax.random.normal(k)), key, None, length=3)

    def scanned_over(key):
        return jax.lax.scan(
            lambda c, k: (c + jax.random.normal(k), None), 0.0, jax.random.split(key, 5)
        )

    def branches(key):
        return jax.lax.cond(True, jax.random.normal, jax.random.uniform, key)

    def while_closed(key):
        return jax.lax.while_loop(
            lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] + jax.random.normal(key)), (0, 0.0)
        )

    expected = {
        closed_over: 1,
        carried: 0,
        carried_unchanged: 1,
        scanned_over: 0,
        branches: 0,
        while_closed: 1,
    }
    for fun, reuses in expected.items():
        for key in (jax.random.key(0), jax.random.PRNGKey(0)):
            assert len(key_flow(fun, key).reuses) == reuses, (fun.__name__, key.dtype)


def test_static_flow_distinguishes_split_indices():
    def f(key):
        ks = jax.random.split(key, 3)
        a, b = jax.random.split(ks[2])
        return (
            jax.random.normal(ks[0])
            + jax.random.normal(ks[1])
            + jax.random.normal(a)
            + jax.random.normal(b)
        )

    flow = key_flow(f, jax.random.key(0))
    assert flow.reuses == ()
    assert [u.op for u in flow.uses] == ["split", "split", "normal", "normal", "normal", "normal"]


def test_static_flow_of_an_equinox_model_with_dropout():
    model = eqx.nn.Dropout(0.5)

    def f(x, key):
        return model(x, key=key) + model(x, key=key)

    flow = key_flow(f, jnp.ones(3), jax.random.key(0))
    assert len(flow.reuses) == 1


# --------------------------------------------------------------------------- the forest
def test_a_big_split_is_one_group_and_a_huge_session_is_drawn_by_call_site():
    with track_keys():
        key = jax.random.key(0)
        many = jax.random.split(key, 300)
        jax.random.normal(many[5])
    forest = lineage_tree(key_lineage())
    groups = [i for i in forest.items if i.kind == "group"]
    assert len(groups) == 1 and groups[0].count == 299
    assert not forest.by_site and len(forest.items) == 4  # seed, the drawn key, its draw, group
    with track_keys():
        jax.random.normal(jax.random.split(jax.random.key(2), 10_000)[7])
    forest = lineage_tree(key_lineage())  # more keys than rows: one row per call site
    assert forest.by_site and [(i.label, i.count) for i in forest.items] == [
        ("seed ×1", 1), ("split ×300", 300), ("normal float32[] ×1", 1),
        ("seed ×1", 1), ("split ×10000", 10000), ("normal float32[] ×1", 1),
    ]  # fmt: skip
    key_lineage().clear()

    with track_keys():
        key = jax.random.key(1)
        for _ in range(1200):
            key, sub = jax.random.split(key)
            jax.random.uniform(sub)
    forest = lineage_tree(key_lineage(), max_items=2000)
    assert forest.by_site and len(forest.items) <= 10
    uniform = next(i for i in forest.items if i.label.startswith("uniform"))
    assert uniform.count == 1200
    assert GROUP < 10_000


def test_static_html_escapes_user_text():
    lineage = record.KeyLineage()
    site = Site("In[1], line 1", "In[1]", "x = '<script>alert(1)</script>'")
    lineage.created("key", np.zeros((1, 2), np.uint32), "threefry2x32", site, False)
    html = lineage_html(lineage)
    assert "<script>" not in html and "&lt;script&gt;" in html


def test_track_keys_is_a_context_manager_that_restores_the_previous_state():
    assert not track.is_tracking()
    with track_keys() as lineage:
        assert track.is_tracking() and lineage is key_lineage()
        with track_keys(False):
            assert not track.is_tracking()
        assert track.is_tracking()
    assert not track.is_tracking()


# --------------------------------------------------------------------------- jit made while on
def test_a_function_jitted_while_tracking_records_each_call_without_a_callback():
    with track_keys():

        @jax.jit
        def step(key):
            key, sub = jax.random.split(key)
            return key, jax.random.normal(sub, (4,))

        key = jax.random.key(0)
        for _ in range(3):
            key, _ = step(key)
        assert jax.jit(step.__wrapped__).template is step.template  # one trace cache
        lowered = step.lower(key)  # jax.jit's own methods still work
        jaxpr = step.trace(key).jaxpr
    assert "debug_callback" not in str(jaxpr) and lowered.as_text()
    lineage = key_lineage()
    splits = [e for e in lineage.events if e.op == "split"]
    draws = [e for e in lineage.events if e.op == "normal"]
    assert len(splits) == 3 and len(draws) == 3 and all(e.traced for e in splits + draws)
    # each call consumed the key the previous call returned: one unbroken chain, no reuse
    seed = next(n for n in lineage.nodes if n.origin == "seed")
    returned = [n for n in lineage.nodes if n.origin == "returned by step"]
    assert len(returned) == 3 and returned[-1].data == data(key)
    assert splits[0].inputs == (seed.id,)
    assert [e.inputs[0] for e in splits[1:]] == [r.id for r in returned[:2]]
    assert lineage.reuses == ()


def test_a_function_jitted_while_tracking_finds_reuse_across_calls_and_inside():
    with quiet(), track_keys():
        f = jax.jit(lambda k: jax.random.normal(k))
        key = jax.random.key(1)
        f(key)
        f(key)  # the same key twice: a reuse across calls

        @jax.jit
        def g(k):
            ks = jax.random.split(k, 2)
            return jax.random.normal(ks[0]) + jax.random.normal(ks[0])  # a slice twice

        g(jax.random.key(2))
    across, inside = key_lineage().reuses
    assert (across.first_op, across.second_op, across.key >= 0) == ("normal", "normal", True)
    assert (inside.first_op, inside.second_op) == ("normal", "normal")
    assert inside.second.lineno == inside.first.lineno  # both draws are on one line


def test_results_are_bit_identical_for_functions_jitted_while_tracking():
    def mc(key):
        keys = jax.random.split(key, 50)
        return jax.lax.scan(lambda t, k: (t + jax.random.normal(k, (10,)).sum(), None), 0.0, keys)[
            0
        ]

    off = jax.jit(mc)(jax.random.key(3))
    with track_keys():
        on = jax.jit(mc)(jax.random.key(3))
    assert np.array_equal(np.asarray(off), np.asarray(on))


def test_a_loop_run_twice_from_one_seed_is_not_a_reuse():
    def loop():
        key = jax.random.key(0)
        for _ in range(20):
            key, sub = jax.random.split(key)
            jax.random.normal(sub, (2,))

    with track_keys():
        loop()
        loop()  # the same keys again, made anew: a cell run twice
    assert key_lineage().reuses == ()
    assert len(key_lineage().same_seeds) == 1


def test_a_key_from_an_eager_loop_drawn_again_warns_at_once_with_both_lines():
    # more splits than are kept unread, so the reused key's data was read and stored
    with track_keys():
        key = jax.random.key(0)
        subs = []
        for _ in range(3 * events.UNREAD_SPLITS):
            key, sub = jax.random.split(key)
            jax.random.normal(sub, (2,))
            first = here() - 1
            subs.append(sub)
        with pytest.warns(JaxlabWarning, match="reused"):
            jax.random.uniform(subs[2])
        second = here() - 1
    lineage = key_lineage()
    (reuse,) = lineage.reuses
    assert (reuse.first.lineno, reuse.second.lineno) == (first, second)
    assert (reuse.first_op, reuse.second_op) == ("normal", "uniform")
    assert len(lineage.nodes) == 1 + 2 * 3 * events.UNREAD_SPLITS
    node = lineage.find(np.asarray(jax.random.key_data(subs[2])))
    assert node is not None and node.origin == "split" and node.index == 1


def test_a_draw_recorded_after_its_key_object_died_means_what_it_meant_then():
    keys = [jax.random.key(1)]  # made before tracking began, as is b (the same seed)
    b = jax.random.key(1)
    with track_keys():
        jax.random.normal(keys.pop())  # that object is gone before anyone reads
        jax.random.normal(b)  # another object of that seed: not a reuse
    assert key_lineage().reuses == ()
    assert len(key_lineage().same_seeds) == 1
    assert key_lineage().unseen == 2


def test_an_eager_loop_keeps_only_its_newest_split_results_alive():
    import gc
    import weakref

    alive = []
    with track_keys():
        key = jax.random.PRNGKey(0)  # legacy: a split's result is the user's own array
        for _ in range(5 * events.UNREAD_SPLITS):
            out = jax.random.split(key)
            alive.append(weakref.ref(out))
            key, sub = out
            jax.random.normal(sub, (2,))
        del out
        gc.collect()
        # the newest splits, and the first (recorded at once, its keys read when needed)
        assert sum(r() is not None for r in alive) <= events.UNREAD_SPLITS + 1
        assert len(key_lineage().nodes) == 1 + 2 * 5 * events.UNREAD_SPLITS


LIBRARY = """
import jax


def solve(key):  # a library's own jitted function: its jaxpr holds no frame of the user's
    @jax.jit
    def inner(k):
        a = jax.random.split(k)
        b = jax.random.split(k)  # the library reuses its key (as a Brownian tree does)
        return a, b

    return inner(key)


def draw(key):  # a library's eager draw from the key it is given
    return jax.random.normal(key, (2,))
"""


def test_a_reuse_inside_a_librarys_jitted_function_names_the_librarys_lines(tmp_path, monkeypatch):
    folder = tmp_path / "site-packages"  # a library's file, as is_user_file tells one
    folder.mkdir()
    (folder / "keylib_for_test.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(folder))
    import keylib_for_test

    track_keys()
    key = jax.random.key(0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        keylib_for_test.solve(key)
    said = [str(w.message) for w in caught if issubclass(w.category, JaxlabWarning)]
    sys.modules.pop("keylib_for_test", None)
    # its jaxpr's tracebacks end at the library's function: jaxlab's wrappers were the
    # innermost lines that were not JAX's (track.py, line 223 was named)
    assert len(said) == 1, said
    assert "inside a library (split at keylib_for_test.py, line 8, split at" in said[0]
    assert "keylib_for_test.py, line 9), not in your code" in said[0]


def test_a_reuse_with_a_use_in_the_users_code_keeps_the_users_fix():
    from jaxlab.keys.model import KeyReuse

    lib = Site("tree.py, line 394", None, "", "/env/site-packages/diffrax/tree.py", 394)
    cell = "<ipython-input-2-3e110fae2acf>"
    mine = Site("In[2], line 3", "In[2]", "x = jax.random.normal(k, (3,))", cell, 3)
    assert KeyReuse(0, lib, lib, "split", "split", True).in_library
    both = KeyReuse(0, lib, mine, "split", "normal", True)
    assert not both.in_library
    assert "k is reused (used after split)" in both.message()


def test_a_reuse_made_by_a_library_names_its_line_and_the_users_lines_that_called_it(
    tmp_path, monkeypatch
):
    folder = tmp_path / "site-packages"
    folder.mkdir()
    (folder / "keylib_for_test.py").write_text(LIBRARY)
    monkeypatch.syspath_prepend(str(folder))
    import keylib_for_test

    track_keys()
    key = jax.random.key(0)
    lines = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):  # the same key given to the library twice
            lines.append(here() + 1)
            keylib_for_test.draw(key)
    sys.modules.pop("keylib_for_test", None)
    said = [str(w.message) for w in caught if issubclass(w.category, JaxlabWarning)]
    assert len(said) == 1, said
    (reuse,) = key_lineage().reuses
    at = 1 + next(i for i, text in enumerate(LIBRARY.splitlines()) if "normal(key" in text)
    assert reuse.first.via == reuse.second.via == f"keylib_for_test.py, line {at}"
    assert reuse.first.where == f"test_keys.py, line {lines[0]}"  # the user's line, as before
    called = f"normal at keylib_for_test.py, line {at} (called from test_keys.py, line {lines[0]})"
    assert called in said[0]
    assert "or your code gives it one key twice" in said[0]


def test_an_equation_with_no_user_or_library_line_is_named_after_the_call():
    from types import SimpleNamespace as Fake

    from jaxlab.keys import flow

    ours = Fake(file_name=track.__file__, line_num=223)
    jaxs = Fake(file_name=jax.random.__file__, line_num=1)
    eqn = Fake(source_info=Fake(traceback=Fake(frames=[jaxs, ours])))
    call = Site("In[4], line 2", "In[4]", "sol = solve(key)")
    assert flow._site(eqn, flow._State(call_site=call)) is call


def test_a_key_a_jitted_function_drew_from_and_returned_is_returned_spent():
    track_keys()

    @jax.jit
    def step(k):
        k, sub = jax.random.split(k)
        return k, sub, jax.random.normal(sub, (2,))  # sub drawn from, and returned

    k, sub, _ = step(jax.random.key(0))
    jax.random.normal(k, (2,))  # the fresh key it returned: no reuse
    assert key_lineage().reuses == ()
    with pytest.warns(JaxlabWarning, match="sub is reused"):
        jax.random.normal(sub, (2,))  # drawn from inside step already: told at once
    (reuse,) = key_lineage().reuses
    assert (reuse.first_op, reuse.second_op) == ("normal", "normal")


def test_a_jit_cells_key_drawn_from_again_in_the_next_cell_is_the_users_reuse(ip):
    with capture_output():
        ip.run_line_magic("keys", "on")
        ip.run_cell("import jax\nkey = jax.random.key(0)")
        ip.run_cell_magic(
            "jit", "", "key, sub = jax.random.split(key)\ny = jax.random.normal(sub, (3,))"
        )
        ip.run_cell_magic("jit", "", "z = jax.random.normal(sub, (3,))")  # sub: drawn from
    (reuse,) = key_lineage().reuses
    assert not reuse.in_library  # the cell's compiled code ("<jaxlab cell>") is the user's
    assert reuse.message().startswith("sub is reused (consumed twice)")
