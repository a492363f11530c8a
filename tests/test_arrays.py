"""The pytree walk, on-device statistics, the bounded sample and the static view
(``jaxlab.arrays``): figures against NumPy's on a host copy, flags on their paths."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.arrays import show_record
from jaxlab.arrays.draw import sample_values
from jaxlab.arrays.sample import MAX_CELLS, plan_sample, take_sample
from jaxlab.arrays.stats import device_stats, host_stats


def _numpy_figures(a):
    v = np.abs(a) if np.iscomplexobj(a) else a.astype(np.float64)
    f = v[np.isfinite(v)]
    return f.min(), f.max(), f.mean(), f.std()


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(0).normal(3.0, 2.0, (300, 200)).astype(np.float32),
        np.array([1.5, np.nan, -np.inf, 0.0, 7.25], np.float32),
        np.random.default_rng(1).integers(-50, 50, (1000,)).astype(np.int32),
        (np.random.default_rng(2).normal(size=64) + 1j).astype(np.complex64),
    ],
    ids=["float-field", "nan-inf-zero", "int", "complex"],
)
def test_device_statistics_equal_numpys_on_the_host_copy(values):
    x = jnp.asarray(values)
    s = device_stats(x)
    host = np.asarray(x)  # the host copy the reference is computed on
    lo, hi, mean, std = _numpy_figures(host)
    assert s.computed_on == "device"
    assert (s.size, s.nan, s.inf) == (host.size, np.isnan(host).sum(), np.isinf(host).sum())
    assert s.zero == np.count_nonzero(host == 0)
    assert s.finite == np.isfinite(np.abs(host)).sum()
    np.testing.assert_allclose([s.min, s.max], [lo, hi], rtol=1e-6)
    np.testing.assert_allclose([s.mean, s.std], [mean, std], rtol=1e-5, atol=1e-6)
    # the NumPy path used for small leaves agrees with the device path
    h = host_stats(host)
    np.testing.assert_allclose(
        [h.min, h.max, h.mean, h.std], [s.min, s.max, s.mean, s.std], rtol=1e-5, atol=1e-6
    )


def test_a_planted_nan_deep_in_a_pytree_is_flagged_on_its_path_at_every_level():
    params = {
        "encoder": [
            {"W": jnp.ones((4, 4)), "b": jnp.zeros(4)},
            {"W": jnp.ones((4, 4)).at[2, 1].set(jnp.nan), "b": jnp.zeros(4)},
        ],
        "decoder": {"W": jnp.ones((4, 2)), "scale": jnp.array([jnp.inf, 1.0])},
    }
    r = show_record(params, "params")
    flagged = {n.path for n in r.root.walk() if n.nan}
    assert flagged == {
        "params",
        "params['encoder']",
        "params['encoder'][1]",
        "params['encoder'][1]['W']",
    }
    assert {n.path for n in r.root.walk() if n.inf} == {
        "params",
        "params['decoder']",
        "params['decoder']['scale']",
    }
    assert r.root.params == 16 + 4 + 16 + 4 + 8 + 2
    assert r.root.bytes == 4 * r.root.params
    assert r.root.find("params['encoder']").params == 40
    assert "NaN x1" in r.text().splitlines()[0]


def test_non_array_leaves_are_shown_as_what_they_are_and_escaped():
    r = show_record({"act": jax.nn.relu, "name": "<b>x</b>", "none": None, "n": 3}, "m")
    by_key = {n.key: n for n in r.root.children}
    assert (by_key["['act']"].label, by_key["['act']"].value) == ("function", "relu")
    assert (by_key["['name']"].label, by_key["['name']"].value) == ("str", "'<b>x</b>'")
    assert by_key["['none']"].label == "None"
    assert by_key["['n']"].label == "int"
    assert r.root.params == 0
    page = r.html()
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page


def test_bad_input_empty_deleted_zero_d_nan_only_and_abstract():
    assert show_record({}).notes == ("an empty pytree: no leaves",)
    assert show_record({}).root.label == "dict (empty)"
    gone = jnp.ones(3)
    gone.delete()
    info = show_record(gone).root.array
    assert info.state == "deleted" and info.stats is None and "deleted" in info.note
    zero_d = show_record(jnp.asarray(2.5)).root.array
    assert zero_d.shape == () and zero_d.stats.mean == 2.5 and zero_d.weak
    assert "weakly typed" in show_record(jnp.asarray(2.5)).text()
    nan_only = show_record(jnp.full((5,), jnp.nan)).root.array.stats
    assert nan_only.all_nan and nan_only.min is None
    assert nan_only.words() == "all NaN (5 NaN, 0 Inf of 5)"
    abstract = show_record(jax.ShapeDtypeStruct((3, 4), jnp.float32)).root.array
    assert abstract.state == "abstract" and abstract.stats is None and abstract.nbytes == 48


def test_a_billion_element_request_is_bounded_without_allocating():
    at, steps = plan_sample((10**9,))
    assert math.ceil(10**9 / steps[0]) <= MAX_CELLS
    at, steps = plan_sample((1000, 10**5, 10**4))
    assert at == (500,)
    assert math.ceil(10**5 / steps[0]) * math.ceil(10**4 / steps[1]) <= MAX_CELLS


def test_a_large_array_is_reduced_on_device_and_only_its_sample_copied():
    x = jnp.arange(2_000_000, dtype=jnp.float32).reshape(1000, 2000)
    r = show_record(x)
    info = r.root.array
    assert info.stats.computed_on == "device"
    assert info.stats.max == 1_999_999.0
    assert info.sample.steps == (7, 13)
    assert r.copied_bytes == info.sample.bytes == 143 * 154 * 4  # every 7th row, 13th column
    drawn = sample_values(info.sample)
    np.testing.assert_array_equal(drawn, np.asarray(x)[::7, ::13])


def test_a_3d_array_is_drawn_as_a_chosen_slice():
    x = jnp.arange(4 * 5 * 6, dtype=jnp.float32).reshape(4, 5, 6)
    s = take_sample(x, "float", slice_at=(3,))
    assert s.slice_at == (3,)
    np.testing.assert_array_equal(sample_values(s), np.asarray(x)[3])
    page = show_record(x, slice_at=(3,)).html()
    assert "slice [3, :, :]" in page
    assert "font-size:90%" not in page  # the caption at the view's 12 px, not 10.8 (issue 24)


def test_complex_boolean_and_integer_samples_keep_their_kind():
    z = jnp.exp(1j * jnp.linspace(0, 3, 100))
    s = take_sample(z, "complex")
    np.testing.assert_allclose(sample_values(s), np.asarray(z), rtol=1e-6)
    page = show_record(z).html()
    assert "magnitude" in page and "phase" in page
    b = show_record(jnp.arange(100 * 100).reshape(100, 100) % 3 == 0)
    assert b.root.array.kind == "boolean" and b.root.array.sample.values[0][:3] == [1, 0, 0]
    assert ">True<" in b.html()
    i = show_record(jnp.arange(200, dtype=jnp.int16)).root.array
    assert i.kind == "integer" and i.stats.max == 199 and i.sample.values[:2] == [0, 1]


def test_nan_in_a_drawing_is_kept_as_a_word_for_json():
    s = take_sample(jnp.array([1.0, jnp.nan, jnp.inf] * 30), "float")
    assert s.values[:3] == [1.0, "NaN", "Inf"]


def test_equinox_module_structure():
    eqx = pytest.importorskip("equinox")
    mlp = eqx.nn.MLP(3, 2, 8, 2, key=jax.random.key(0))
    r = show_record(mlp, "mlp")
    assert r.root.label == "MLP (equinox)"
    layers = r.root.find("mlp.layers")
    assert [c.label for c in layers.children] == ["Linear (equinox)"] * 3
    assert r.root.find("mlp.layers[0].weight").array.shape == (8, 3)
    assert r.root.params == sum(x.size for x in jax.tree.leaves(eqx.filter(mlp, eqx.is_array)))
    assert r.root.find("mlp.activation").label == "function"


def test_flax_nnx_module_structure():
    nnx = pytest.importorskip("flax.nnx")

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.dense = nnx.Linear(3, 4, rngs=rngs)
            self.norm = nnx.LayerNorm(4, rngs=rngs)

    r = show_record(Block(nnx.Rngs(0)), "model")
    assert r.root.label == "Block (flax nnx)"
    dense = r.root.find("model.dense")
    assert dense.label == "Linear (flax nnx)"
    assert dense.params == 3 * 4 + 4
    assert not any("_pytree__" in n.path for n in r.root.walk())


def test_haiku_parameters_by_module_structure():
    hk = pytest.importorskip("haiku")

    def forward(x):
        return hk.nets.MLP([8, 2])(x)

    params = hk.transform(forward).init(jax.random.key(0), jnp.ones((1, 3)))
    r = show_record(params, "params")
    assert r.root.label == "haiku parameters"
    mlp = r.root.children[0]
    assert mlp.key == "mlp" and [c.key for c in mlp.children] == ["linear_0", "linear_1"]
    w = r.root.find("params['mlp/~/linear_0']['w']")
    assert w is not None and w.array.shape == (3, 8)
    assert r.root.params == 3 * 8 + 8 + 8 * 2 + 2


def test_small_leaves_of_one_shape_reduced_together_equal_one_by_one():
    from jaxlab.arrays.stats import host_stats_many

    rng = np.random.default_rng(3)
    arrays = [rng.normal(size=(6, 5)).astype(np.float32) for _ in range(3)]
    arrays[1][2, 3] = np.nan
    arrays[2][0, 0] = -np.inf
    arrays += [np.full((6, 5), np.nan, np.float32), np.zeros(7, np.int32), np.ones(7, np.int32)]
    arrays += [np.array([True, False, False]), np.array([False, False, True])]
    arrays += [np.arange(4.0), np.zeros((0,))]  # alone in their groups
    batched = host_stats_many(arrays)
    assert len(batched) == len(arrays)
    for a, got in zip(arrays, batched, strict=True):
        want = host_stats(a)
        assert (got.size, got.nan, got.inf, got.zero, got.finite) == (
            want.size, want.nan, want.inf, want.zero, want.finite,
        )  # fmt: skip
        for field in ("min", "max", "mean", "std"):
            g, w = getattr(got, field), getattr(want, field)
            assert (g is None) == (w is None)
            if w is not None:
                assert g == pytest.approx(w, rel=1e-12, abs=1e-12)


def test_device_counts_are_exact_past_a_uint8_row_and_float32s_integers():
    n = 2**24 + 131  # float32 counts stop being exact at 2**24; not a multiple of 128
    x = jnp.ones(n, jnp.float32).at[::3].set(0.0).at[5].set(jnp.nan).at[n - 1].set(jnp.inf)
    s = device_stats(x)
    zeros = len(range(0, n, 3)) - (1 if (n - 1) % 3 == 0 else 0)
    assert (s.zero, s.nan, s.inf, s.finite) == (zeros, 1, 1, n - 2)
    assert device_stats(jnp.zeros(n, jnp.bool_)).zero == n


def test_a_view_pauses_the_collector_only_while_it_is_built():
    import gc

    from jaxlab.session.collector import collector_paused

    seen = []
    with collector_paused():
        seen.append(gc.isenabled())
    assert seen == [False] and gc.isenabled()
    show_record([{"W": jnp.ones((2, 2))}] * 3).html()
    assert gc.isenabled()
    gc.disable()  # the user's own pause is theirs: a view does not end it
    try:
        show_record(jnp.ones(3)).text()
        assert not gc.isenabled()
    finally:
        gc.enable()
