"""The cheap paths of a view (issue 37): the masked reduction compiled only for an array
that needs it, a CPU array's sample strided in place, a sample's array kept for its
readers, and the fastest PNG compression: each gives what the slow path gave."""

import base64
import zlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlab.arrays import sample as sample_module
from jaxlab.arrays import stats as stats_module
from jaxlab.arrays.draw import sample_values
from jaxlab.arrays.png import colours, png_uri
from jaxlab.arrays.sample import held_array, in_host_memory, take_sample
from jaxlab.arrays.stats import device_stats


def test_a_finite_array_is_reduced_without_compiling_the_masked_reduction():
    masked = stats_module._jitted("masked")
    zeros = stats_module._jitted("zeros")
    shape = (70_001,)  # a size no other test reduces
    before, counted = masked._cache_size(), zeros._cache_size()
    line = jnp.arange(1, shape[0] + 1, dtype=jnp.float32) / 35_000  # no zero
    s = device_stats(line)
    assert (s.nan, s.inf, s.finite, s.zero) == (0, 0, shape[0], 0)
    # neither the masked reduction nor the zeros' count traced for this shape
    assert (masked._cache_size(), zeros._cache_size()) == (before, counted)
    s = device_stats(line - line[35_000])  # one zero, exactly
    assert (s.nan, s.inf, s.finite, s.zero) == (0, 0, shape[0], 1)
    assert (masked._cache_size(), zeros._cache_size()) == (before, counted + 1)
    bad = device_stats(line.at[5].set(jnp.nan).at[9].set(jnp.inf).at[11].set(0.0))
    assert masked._cache_size() == before + 1  # compiled once it was needed
    assert (bad.nan, bad.inf, bad.finite, bad.zero) == (1, 1, shape[0] - 2, 1)
    assert bad.max == pytest.approx(shape[0] / 35_000) and bad.min == 0.0


@pytest.mark.parametrize(
    "value",
    [
        np.array([0, -3, 7], np.int32),
        np.array([-(2**31), 5], np.int32),  # its magnitude overflows as an int32
        np.array([True, False]),
        np.array([True, True]),
        np.array([0j, 1e-30 + 1e-30j], np.complex64),
        np.array([1e-45, -0.0], np.float32),  # the least subnormal and a negative zero
        np.array([1e-45, 3.0], np.float32),
    ],
)
def test_zeros_are_counted_as_the_device_compares_them(value):
    x = jnp.asarray(value)
    # the device's own x == 0 (XLA's CPU backend reads a subnormal float as zero)
    assert device_stats(x).zero == int(jax.jit(lambda a: jnp.sum(a == 0))(x))


def test_a_sum_that_overflows_takes_the_masked_path_and_its_figures_are_exact():
    x = jnp.full((1000,), 3e38, jnp.float32)  # each finite, their float32 sum is not
    s = device_stats(x)
    assert (s.nan, s.inf, s.finite) == (0, 0, 1000)
    assert s.min == s.max == pytest.approx(3e38, rel=1e-6)


@pytest.mark.parametrize(
    "value, slice_at",
    [
        (np.random.default_rng(0).normal(size=(10_007,)).astype(np.float32), None),
        (np.random.default_rng(1).normal(size=(3, 333, 401)).astype(np.float32), (2,)),
        (np.arange(-600, 600, dtype=np.int32).reshape(40, 30), None),
        (np.random.default_rng(2).normal(size=(5, 7)) > 0, None),
        (np.float32(2.5), None),
    ],
    ids=["line", "slice-of-3d", "int-field", "bool", "scalar"],
)
def test_a_cpu_arrays_sample_strided_in_place_equals_the_device_slice(value, slice_at):
    x = jnp.asarray(value)
    assert in_host_memory(x)  # these tests run on CPU
    kind = {"f": "float", "i": "integer", "b": "boolean"}[np.asarray(value).dtype.kind]
    fast = take_sample(x, kind, slice_at)
    # the slice JAX makes on the device: what every array off the CPU still gets
    index = tuple(fast.slice_at) + tuple(slice(None, None, k) for k in fast.steps)
    device = np.asarray(x[index] if index else x)
    assert fast.bytes == device.nbytes
    assert fast.values == device.astype(np.int64 if kind == "integer" else np.float64).tolist()


def test_a_sharded_or_deleted_array_is_not_read_in_place():
    x = jnp.ones(8)
    x.delete()
    assert not in_host_memory(x)
    if jax.device_count() > 1:  # notebooks' 8 CPU devices; one device here otherwise
        mesh = jax.make_mesh((jax.device_count(),), ("d",))
        split = jax.NamedSharding(mesh, jax.sharding.PartitionSpec("d"))
        spread = jax.device_put(jnp.ones(8 * jax.device_count()), split)
        assert not in_host_memory(spread)


@pytest.mark.parametrize(
    "value, kind",
    [
        (np.array([[1.5, np.nan], [-np.inf, np.inf]], np.float32), "float"),
        (np.array([-(2**40), 3, 2**53 + 1], np.int64), "integer"),
        (np.array([True, False, True]), "boolean"),
        (np.array([1 + 2j, np.nan + 1j, 3 - np.inf * 1j], np.complex64), "complex"),
    ],
    ids=["float-nan-inf", "integer", "boolean", "complex"],
)
@pytest.mark.filterwarnings("error")  # none made while sampling (1j * inf is NaN + inf j)
def test_a_samples_kept_array_is_what_its_values_read_back_to(value, kind):
    s = take_sample(value, kind)
    kept = held_array(s.values)
    assert kept is not None and not kept.flags.writeable  # shared: nobody may change it
    read = np.asarray(s.values, dtype=np.float64)  # what sample_values read before
    if kind == "complex":
        with np.errstate(invalid="ignore"):
            read = read[..., 0] + 1j * read[..., 1]
    np.testing.assert_array_equal(kept, read)
    assert sample_values(s) is kept
    # a values list it does not know (a copy) is read back as before
    with np.errstate(invalid="ignore"):
        again = sample_values(type(s)(**{**s.__dict__, "values": list(s.values)}))
    np.testing.assert_array_equal(again, read)


def test_only_the_latest_samples_arrays_are_kept():
    made = [take_sample(np.arange(10.0) + i, "float") for i in range(sample_module._HELD_MAX + 3)]
    assert held_array(made[0].values) is None
    assert held_array(made[-1].values) is not None
    np.testing.assert_array_equal(sample_values(made[0]), np.arange(10.0))


def test_the_png_holds_every_pixel_as_given():
    rgb = colours(np.random.default_rng(3).uniform(size=(37, 53)))
    rgb[4, 7] = (255, 0, 255)
    data = base64.b64decode(png_uri(rgb).split(",", 1)[1])
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (53, 37)
    size = int.from_bytes(data[33:37], "big")
    assert data[37:41] == b"IDAT"
    rows = np.frombuffer(zlib.decompress(data[41 : 41 + size]), np.uint8).reshape(37, -1)
    assert (rows[:, 0] == 0).all()  # filter byte 0 on every row
    np.testing.assert_array_equal(rows[:, 1:].reshape(37, 53, 3), rgb)


def test_under_x64_a_float32_subnormal_is_counted_as_before():
    value = np.array([1e-45, 3.0], np.float32)
    with jax.enable_x64(True):
        x = jnp.asarray(value)
        assert x.dtype == jnp.float32
        assert device_stats(x).zero == int(jax.jit(lambda a: jnp.sum(a == 0))(x))
