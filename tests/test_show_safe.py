"""``%show on`` can never break or change a display it does not own, and ``%show`` /
``jaxlab.show`` answer a pytree JAX cannot walk, or a slice that does not fit, with one
error naming the part and the reason (issue 32, points 4 and 5)."""

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.arrays.refusals import BadSlice, UnshowablePytree

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class Pair(NamedTuple):
    """A namedtuple of the user's with its own HTML (JAX flattens it as a node)."""

    w: Any
    b: Any

    def _repr_html_(self):
        return "<b>Pair of two</b>"


class Point(NamedTuple):
    x: Any
    y: Any


class Config(dict):
    """A dict subclass with its own HTML (JAX treats it as a leaf)."""

    def _repr_html_(self):
        return "<i>a config</i>"


def _bundles(ip, obj):
    """IPython's bundle for ``obj`` with the view off, then on."""
    off = ip.display_formatter.format(obj)
    ip.run_line_magic("show", "on")
    try:
        with capture_output() as out:
            on = ip.display_formatter.format(obj)
    finally:
        ip.run_line_magic("show", "off")
    assert "Traceback" not in out.stdout + out.stderr, out.stdout
    return off, on


def _self_containing(with_array):
    d = {"w": jnp.ones(2)} if with_array else {"n": 1}
    d["self"] = d
    return d


@pytest.mark.parametrize("with_array", [False, True], ids=["plain", "holding-an-array"])
def test_a_dict_that_contains_itself_under_show_on_leaves_every_later_cell_working(ip, with_array):
    ip.user_ns["make"] = _self_containing
    ip.run_line_magic("show", "on")
    with capture_output() as out:
        first = ip.run_cell(f"d = make({with_array})\nd", store_history=True)
        second = ip.run_cell("1 + 1", store_history=True)
    printed = out.stdout + out.stderr
    assert first.error_in_exec is None and first.result is ip.user_ns["d"]
    assert "Traceback" not in printed and "Error" not in printed, printed
    assert "{...}" in printed  # IPython's own display of the cycle
    assert second.result == 2 and "Out[" in printed and printed.rstrip().endswith("2")
    # the view stays on: the next array still displays as jaxlab's view
    assert "jaxlab-show" in ip.display_formatter.format(jnp.arange(3.0))[0]["text/html"]
    ip.run_line_magic("show", "off")
    off, on = _bundles(ip, ip.user_ns["d"])
    assert on == off and "text/html" not in on[0]


@pytest.mark.parametrize(
    "obj",
    [
        Pair(jnp.ones(2), jnp.zeros(3)),
        Config(lr=0.1, w=jnp.ones(2)),
        Config(lr=0.1),
    ],
    ids=["namedtuple-with-own-html", "dict-subclass-with-own-html", "config-without-arrays"],
)
def test_objects_with_their_own_html_display_exactly_as_without_the_view(ip, obj):
    off, on = _bundles(ip, obj)
    assert on == off
    assert "jaxlab-show" not in str(on) and obj._repr_html_() == on[0]["text/html"]


def test_a_printer_registered_before_show_on_still_displays_containers_without_arrays(ip):
    formatter = ip.display_formatter.formatters["text/html"]
    formatter.for_type(dict, lambda d: f"<p>{len(d)} keys</p>")
    try:
        off, on = _bundles(ip, {"a": 1, "b": 2})
        assert on == off and on[0]["text/html"] == "<p>2 keys</p>"
        ip.run_line_magic("show", "on")
        assert "jaxlab-show" in ip.display_formatter.format({"w": jnp.ones(2)})[0]["text/html"]
        ip.run_line_magic("show", "off")
        assert formatter.type_printers[dict]({"a": 1}) == "<p>1 keys</p>"  # put back
    finally:
        formatter.type_printers.pop(dict, None)


def test_a_list_of_a_million_ints_is_never_flattened_and_displays_as_before(ip, monkeypatch):
    big = list(range(10**6))
    flattened = []
    for name in ("tree_leaves", "tree_flatten", "tree_flatten_with_path"):
        real = getattr(jax.tree_util, name)

        def counting(*args, _real=real, _name=name, **kwargs):
            flattened.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(jax.tree_util, name, counting)
    off, on = _bundles(ip, big)
    assert on == off and "text/html" not in on[0]
    assert flattened == []  # what made its display 78x slower: JAX's flatten of 10^6 leaves
    # an array past the items the printer looks at: IPython's display, as its own printer
    # shows only the first 1,000 items too
    off, on = _bundles(ip, [*range(2_000), jnp.ones(2)])
    assert on == off
    # an array among the first items, or in a namedtuple without HTML of its own: the view
    ip.run_line_magic("show", "on")
    for found in ([jnp.ones(2), *range(5_000)], Point(jnp.ones(2), 1)):
        assert "jaxlab-show" in ip.display_formatter.format(found)[0]["text/html"]


# Hostile pytrees: each one error naming the part and the reason, nothing shown or changed.


class BadRepr:
    def __repr__(self):
        raise ValueError("no repr for you")


@jax.tree_util.register_pytree_node_class
class BrokenNode:
    """A registered pytree node whose flatten raises."""

    def __init__(self, v):
        self.v = v

    def tree_flatten(self):
        raise ZeroDivisionError("flatten broke")

    @classmethod
    def tree_unflatten(cls, aux, children):
        return cls(*children)


def _recursive_list():
    lst = [jnp.ones(2)]
    lst.append(lst)
    return lst


def _recursive_dict():
    d = {"x": jnp.ones(2)}
    d["me"] = d
    return d


def _deep():
    v = jnp.ones(2)
    for _ in range(500):
        v = [v]
    return v


HOSTILE = {
    "bad_repr": (lambda: {"a": jnp.ones(2), "b": BadRepr()}, r"bad_repr\['b'\]", "__repr__ raised"),
    "rec_list": (_recursive_list, r"rec_list\[1\]", r"it is rec_list itself.*cycle"),
    "rec_dict": (_recursive_dict, r"rec_dict\['me'\]", r"it is rec_dict itself.*cycle"),
    "deep": (_deep, r"deep\[0\]\[0\]", "nested 100 containers deep"),
    "mixed": (lambda: {1: jnp.ones(2), "a": jnp.ones(2)}, "mixed", r"keys \(1, 'a'\) cannot"),
    "broken": (lambda: {"n": BrokenNode(jnp.ones(2))}, r"broken\['n'\]", "ZeroDivisionError"),
}


@pytest.fixture
def live_ip(ip, monkeypatch):
    """The shell as a notebook's kernel: %show would show the widget."""
    monkeypatch.setattr(ip, "kernel", object(), raising=False)
    return ip


@pytest.mark.parametrize("name", list(HOSTILE))
@pytest.mark.parametrize("options", ["", "--static ", "-o "], ids=["widget", "static", "record"])
def test_a_hostile_pytree_is_one_usage_error_naming_it_and_changes_nothing(
    live_ip, monkeypatch, name, options
):
    make, where, why = HOSTILE[name]
    live_ip.user_ns[name] = value = make()
    before = dict(live_ip.user_ns)
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda *a, **k: shown.append(a))
    monkeypatch.setattr("jaxlab.magics.arrays.display", lambda *a, **k: shown.append(a))
    with pytest.raises(UsageError, match=rf"^%show {name}: {where}.*: .*{why}") as caught:
        live_ip.run_line_magic("show", f"{options}{name}")
    assert isinstance(caught.value.__cause__, UnshowablePytree)
    assert shown == []  # no widget made, nothing displayed
    assert live_ip.user_ns.keys() == before.keys() and live_ip.user_ns[name] is value
    # the twin: the same words as a ValueError
    with pytest.raises(ValueError, match=rf"^{where}.*: .*{why}"):
        jaxlab.show(value, name=name)
    # under %show on, the view declines it (no HTML, as IPython without it), no traceback
    html = live_ip.display_formatter.formatters["text/html"]
    assert html(value) is None
    live_ip.run_line_magic("show", "on")
    with capture_output() as out:
        assert html(value) is None
    assert "Traceback" not in out.stdout + out.stderr, out.stdout


# --slice: checked against the array it draws


@pytest.fixture
def vol_ip(ip):
    ip.run_cell(
        "import jax.numpy as jnp\nvol = jnp.arange(60.0).reshape(3, 4, 5)\n"
        "line = jnp.arange(10.0)\ntree = {'a': line, 'v': vol}"
    )
    return ip


@pytest.mark.parametrize(("given", "index"), [("-1", 2), ("-2", 1)], ids=str)
def test_a_negative_slice_counts_from_the_end_as_numpy(vol_ip, given, index):
    r = vol_ip.run_line_magic("show", f"--slice {given} -o vol")
    sample = r.root.array.sample
    assert sample.slice_at == (index,)
    assert sample.values[0][0] == float(jnp.arange(60.0).reshape(3, 4, 5)[int(given), 0, 0])
    in_tree = vol_ip.run_line_magic("show", f"--slice {given} -o tree")
    assert in_tree.root.find("tree['v']").array.sample.slice_at == (index,)


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("--slice 99 vol", r"index 99 is out of range for axis 0 of vol .*use 0 to 2, or -3"),
        ("--slice -4 vol", r"index -4 is out of range .*use 0 to 2, or -3 to -1"),
        ("--slice 1,2 vol", r"gives 2 index\(es\).*give 1, e.g. --slice 1"),
        ("--slice 3 line", r"line is 1-D \(shape \(10,\)\).*drawn whole"),
        ("--slice 0 tree['a']", r"1-D .*drawn whole"),
    ],
    ids=["past-the-end", "before-the-start", "too-many", "1-D", "1-D-in-a-tree"],
)
def test_a_slice_that_does_not_fit_is_refused_with_the_valid_range(vol_ip, line, words):
    before = dict(vol_ip.user_ns)
    with pytest.raises(UsageError, match=words) as caught:
        vol_ip.run_line_magic("show", line)
    assert isinstance(caught.value.__cause__, BadSlice)
    assert vol_ip.user_ns.keys() == before.keys()


def test_the_twin_checks_and_normalises_its_slice():
    vol = jnp.arange(60.0).reshape(3, 4, 5)
    view = jaxlab.show(vol, name="vol", slice_at=(-1,))
    try:
        assert view.widget.slice_at == [2]
        assert view.record.root.array.sample.slice_at == (2,)
    finally:
        view.widget.close()
    with pytest.raises(ValueError, match="use 0 to 2, or -3 to -1 from the end"):
        jaxlab.show(vol, name="vol", slice_at=(5,))
    with pytest.raises(ValueError, match="drawn whole"):
        jaxlab.show(jnp.ones(4), slice_at=(0,))


def test_show_on_compiles_nothing_in_the_users_name(ip):
    import jax

    import jaxlab

    log = jaxlab.compile_log()
    jax.clear_caches()  # the array probe %show on makes compiles again, as in a new session
    before, own = log.count, log.jaxlab_count
    ip.run_line_magic("show", "on")
    try:
        assert log.count == before  # nothing logged as the user's (nor as an eager op)
        assert log.jaxlab_count > own  # the probe's compilation, counted as jaxlab's
    finally:
        ip.run_line_magic("show", "off")
