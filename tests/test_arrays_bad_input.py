"""``%show`` and ``jaxlab.show`` given what is not a plain live array: non-array leaves,
empty trees, deleted and donated arrays, 0-d and NaN-only arrays, arrays too large to
copy, and names that do not exist. Each says what it is; none crashes the view."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.core.error import UsageError

import jaxlab
from jaxlab.arrays import sample as sample_module
from jaxlab.arrays import show_record
from jaxlab.arrays.info import SMALL
from jaxlab.arrays.sample import MAX_LINE, MAX_SIDE
from jaxlab.widgets import ArrayView


class Config:
    """A user's own object in a pytree: not registered, so a leaf."""

    def __repr__(self):
        return "Config(lr=0.1)"


def test_non_array_leaves_are_shown_as_what_they_are():
    tree = {
        "w": jnp.ones(3),
        "act": jax.nn.gelu,
        "square": lambda v: v * v,
        "cls": Config,
        "cfg": Config(),
        "name": "tanh",
        "none": None,
        "n": 3,
        "long": "x" * 500,
    }
    r = show_record(tree, "m")
    by_key = {n.key: (n.label, n.value) for n in r.root.children}
    assert by_key["['act']"] == ("function", "gelu")
    assert by_key["['square']"][0] == "function" and "lambda" in by_key["['square']"][1]
    assert by_key["['cls']"] == ("class", "Config")
    assert by_key["['cfg']"] == ("Config", "Config(lr=0.1)")
    assert by_key["['name']"] == ("str", "'tanh'")
    assert by_key["['none']"] == ("None", "None")
    assert by_key["['n']"] == ("int", "3")
    assert len(by_key["['long']"][1]) <= 80  # a repr is bounded
    assert r.leaves == 1 and r.root.params == 3
    text = r.text()
    assert "['act']: function gelu" in text and "['none']: None None" in text
    # the live view draws the array and lists the rest as rows with their values
    view = ArrayView(tree, name="m")
    try:
        rows = {row["key"]: row for row in view.rows}
        assert rows["['act']"]["line"] == "gelu" and not rows["['act']"]["array"]
        assert view.drawing["path"] == "m['w']"
    finally:
        view.close()


@pytest.mark.parametrize("empty", [{}, [], (), {"a": [], "b": {}}], ids=repr)
def test_an_empty_pytree_says_it_has_no_leaves(empty):
    r = show_record(empty, "e")
    assert r.leaves == 0 and r.root.params == 0 and r.copied_bytes == 0
    assert "empty" in r.text()
    view = ArrayView(empty, name="e")
    try:
        assert view.drawing == {} and view.rows[0]["params"] == 0
    finally:
        view.close()
    if empty == {}:
        assert r.notes == ("an empty pytree: no leaves",)


def test_a_deleted_array_says_so_and_its_neighbours_are_still_shown():
    gone = jnp.arange(100_000.0)  # large: would be reduced on the device
    gone.delete()
    small_gone = jnp.ones(4)  # small: would be in the batched host copy
    small_gone.delete()
    tree = {"gone": gone, "small_gone": small_gone, "kept": jnp.full(3, 2.0)}
    r = show_record(tree, "t")
    for key in ("gone", "small_gone"):
        info = r.root.find(f"t[{key!r}]").array
        assert info.state == "deleted" and info.stats is None and info.sample is None
        assert "deleted" in info.note
    assert r.root.find("t['kept']").array.stats.mean == 2.0
    assert "its values are gone" in r.text() and "its values are gone" in r.html()
    view = jaxlab.show(tree, name="t")
    try:
        view.widget.set_state({"selected": "t['gone']"})
        assert view.widget.drawing["sample"] is None
        assert "deleted" in view.widget.drawing["caption"]
    finally:
        view.widget.close()


def test_a_donated_array_says_it_was_donated_or_freed():
    x = jnp.ones((8, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a backend that cannot donate says so and keeps x
        y = jax.jit(lambda a: a * 2, donate_argnums=0)(x)
    if not x.is_deleted():
        pytest.skip("this backend did not take the donated buffer")
    info = show_record(x, "x").root.array
    assert info.state == "deleted" and "donated" in info.note
    assert info.shape == (8, 8) and info.nbytes == 256  # what it was is still known
    assert show_record(y).root.array.stats.max == 2.0


def test_a_zero_d_array_is_one_value():
    r = show_record(jnp.float32(-1.5), "s")
    info = r.root.array
    assert info.shape == () and info.size == 1 and info.stats.min == -1.5
    assert info.sample.values == -1.5
    assert "<code>-1.5</code>" in r.html()
    view = ArrayView(jnp.asarray(7), name="s")
    try:
        assert view.drawing["shape"] == [] and view.drawing["sample"]["values"] == 7
    finally:
        view.close()


@pytest.mark.parametrize("size", [16, SMALL + 1], ids=["host-copy", "on-device"])
def test_a_nan_only_array_prints_no_nan_statistics(size):
    r = show_record(jnp.full((size,), jnp.nan, jnp.float32), "x")
    stats = r.root.array.stats
    assert stats.all_nan and stats.nan == size and stats.finite == 0
    assert stats.min is None and stats.max is None and stats.mean is None and stats.std is None
    words = stats.words()
    assert words == f"all NaN ({size} NaN, 0 Inf of {size})"
    for page in (r.text(), r.html()):
        assert "all NaN" in page
        assert "min nan" not in page.lower() and "mean nan" not in page.lower()
    assert r.root.nan == size  # flagged on the tree


def test_inf_only_and_mixed_nonfinite_arrays_on_the_device():
    n = SMALL + 10
    mixed = jnp.zeros(n).at[0].set(jnp.nan).at[1].set(jnp.inf).at[2].set(-jnp.inf).at[3].set(5)
    stats = show_record(mixed).root.array.stats
    assert (stats.nan, stats.inf, stats.finite, stats.zero) == (1, 2, n - 3, n - 4)
    assert stats.max == 5.0 and stats.min == 0.0
    only_inf = show_record(jnp.full((n,), jnp.inf)).root.array.stats
    assert only_inf.words() == f"no finite value (0 NaN, {n} Inf of {n})"
    # a finite array whose sum overflows float32 is still exact (the masked reduction)
    huge = show_record(jnp.full((n,), 3e38, jnp.float32)).root.array.stats
    assert huge.nan == 0 and huge.inf == 0 and huge.finite == n and huge.max == pytest.approx(3e38)


def _host_copies(monkeypatch):
    """Every element count a view copies to the host: through ``jax.device_get``, through
    NumPy's conversion of a ``jax.Array`` and through the sample's own copy."""
    copied: list[int] = []
    device_get = jax.device_get

    def counting_get(tree):
        copied.extend(int(np.size(leaf)) for leaf in jax.tree.leaves(tree))
        return device_get(tree)

    on_host = sample_module._on_host

    def counting_on_host(x, index):
        part = on_host(x, index)
        copied.append(int(part.size))
        return part

    array_type = type(jnp.zeros(1))
    to_numpy = array_type.__array__

    def counting_array(self, *args, **kwargs):
        copied.append(int(self.size))
        return to_numpy(self, *args, **kwargs)

    monkeypatch.setattr(jax, "device_get", counting_get)
    monkeypatch.setattr(sample_module, "_on_host", counting_on_host)
    monkeypatch.setattr(array_type, "__array__", counting_array)
    return copied


@pytest.mark.parametrize(
    ("shape", "bound"),
    [
        ((3_000_000,), MAX_LINE),  # a line: every k-th point
        ((1500, 2100), MAX_SIDE * MAX_SIDE),  # a heat map: every k-th row and column
        ((40, 300, 400), MAX_SIDE * MAX_SIDE),  # one 2-D slice of a volume
    ],
    ids=["1-D", "2-D", "3-D"],
)
def test_a_large_array_is_copied_to_the_host_only_within_the_views_limits(
    monkeypatch, shape, bound
):
    x = jnp.ones(shape, jnp.float32)
    copied = _host_copies(monkeypatch)
    r = show_record(x, "x")
    view = ArrayView(x, name="x")
    view.close()
    info = r.root.array
    assert info.stats.computed_on == "device" and info.stats.mean == 1.0
    assert len(copied) > 0 and max(copied) <= bound  # no full copy asked for, ever
    assert r.copied_bytes == info.sample.bytes <= bound * 4
    assert f"{r.copied_bytes:,} bytes copied" in r.html()


def test_a_tree_of_many_small_leaves_copies_at_most_the_walks_host_budget(monkeypatch):
    from jaxlab.arrays import info as info_module

    monkeypatch.setattr(info_module, "HOST_BUDGET", 10 * 1024 * 4)  # ten 1,024-float leaves
    tree = [jnp.full((1024,), float(i)) for i in range(30)]
    r = show_record(tree, "t")
    assert r.copied_bytes <= 10 * 1024 * 4 + 4 * 1024 * 4  # the budget, plus drawn samples
    on_host = [n.array.stats.computed_on for n in r.root.children]
    assert on_host.count("host copy") == 10 and on_host.count("device") == 20
    assert [n.array.stats.mean for n in r.root.children] == [float(i) for i in range(30)]


def test_a_billion_element_array_is_described_without_values():
    r = show_record(jax.ShapeDtypeStruct((10**9,), jnp.float32), "plan")
    info = r.root.array
    assert info.state == "abstract" and info.nbytes == 4 * 10**9 and r.copied_bytes == 0
    assert "3.7 GiB" in r.text()


@pytest.mark.parametrize(
    ("line", "missing"),
    [("nope", "nope"), ("nope['W']", "nope"), ("params[nope]", "nope"), ("--static nope", "nope")],
)
def test_an_unknown_name_is_a_usage_error_and_changes_nothing(ip, monkeypatch, line, missing):
    monkeypatch.setattr(ip, "kernel", object(), raising=False)  # the widget's path too
    ip.run_cell("import jax.numpy as jnp\nparams = {'W': jnp.ones(2)}")
    before = set(ip.user_ns)
    with pytest.raises(UsageError, match=f"name '{missing}' is not defined"):
        ip.run_line_magic("show", line)
    assert set(ip.user_ns) == before
