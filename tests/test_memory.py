"""``%memory`` and ``jaxlab.memory()``: live arrays by the line that allocated them (a
planted 100 MB array found at its line, first), the figures' words per platform, the
pprof reader against a profile written by hand, and bad input."""

import gzip
import sys

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError

import jaxlab
from jaxlab.arrays.memory import MemoryReport, pool_words, settings_note, user_frame
from jaxlab.arrays.pprof import Frame, ProfileError, read_profile


def test_a_planted_100_mb_array_is_found_at_its_line_largest_first(ip):
    ip.run_cell("import jax.numpy as jnp\nsmall = jnp.ones((3, 4))", store_history=True)
    n = ip.execution_count  # the number the next cell runs as
    ip.run_cell(
        "x = 1\nbig = jnp.zeros((25_000_000,), jnp.float32)\nbig.block_until_ready();",
        store_history=True,
    )
    try:
        # Every site (the suite's earlier tests leave live arrays of their own: by
        # default only the largest few are listed, and 48 bytes may fall below them).
        r = ip.run_line_magic("memory", "--top 100000 -o")
        assert isinstance(r, MemoryReport)
        # First among what this test made (an earlier test's live arrays may be larger).
        top = r.site(f"In[{n}], line 2")
        assert top is not None, r.text()
        assert all(s.bytes >= top.bytes for s in r.sites[: r.sites.index(top)])
        assert top.bytes >= 100_000_000 and top.buffers >= 1
        assert top.code == "big = jnp.zeros((25_000_000,), jnp.float32)"
        assert "float32[25000000]" in top.shapes
        assert [s.bytes for s in r.sites] == sorted((s.bytes for s in r.sites), reverse=True)
        small = r.site(f"In[{n - 1}], line 2")
        assert small is not None and small.bytes == 48
        # A shape is named only where one kind of live array has that buffer size (the
        # profile records sizes, not shapes): the suite's other 48-byte arrays may not.
        kinds = {(str(a.dtype), a.shape) for a in jax.live_arrays() if a.nbytes == 48}
        if kinds == {("float32", (3, 4))}:
            assert "float32[3,4]" in small.shapes
        else:
            assert small.shapes == ()
        # the figures: CPU keeps no memory_stats, so they are the live arrays, host memory
        assert r.host and r.platform == "cpu"
        # As JAX counts them (a buffer the suite frees between the two reads may differ).
        assert r.live_bytes == pytest.approx(sum(a.nbytes for a in jax.live_arrays()), rel=1e-4)
        assert r.live_bytes >= 100_000_000
        assert all(d.bytes_in_use is None for d in r.devices)
        assert sum(d.arrays_bytes for d in r.devices) >= 100_000_000
        assert "host memory" in r.text() and "host memory" in r._repr_html_()
        assert repr(r).splitlines()[0].startswith("cpu backend:")
    finally:
        ip.run_cell("del big, small")


def test_memory_displays_its_report_and_the_twin_agrees(ip, capsys):
    keep = jnp.arange(1000.0)
    other = jnp.ones(10)
    ip.run_line_magic("memory", "")
    shown = capsys.readouterr().out
    assert "live array(s)" in shown and "by the line that allocated them" in shown
    r = jaxlab.memory(top=1)
    assert len(r.sites) == 1 and r.more_sites >= 1
    # this file is the user's code here: the line above is a site of its own
    assert any("keep = jnp.arange(1000.0)" in s.code for s in jaxlab.memory().sites)
    del keep, other


def test_a_librarys_frames_are_skipped_for_the_line_that_called_it(ip, tmp_path):
    lib = tmp_path / "site-packages" / "fakelib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(
        "import jax.numpy as jnp\ndef make():\n    return jnp.full((1000, 250), 2.0)\n"
    )
    sys.path.insert(0, str(lib.parent))
    try:
        n = ip.execution_count  # the number the next cell runs as
        ip.run_cell("import fakelib\nmade = fakelib.make()", store_history=True)
        r = jaxlab.memory()
        site = next(s for s in r.sites if "fakelib.make()" in s.code)
        assert site.where == f"In[{n}], line 2" and site.bytes == 1_000_000
    finally:
        sys.path.remove(str(lib.parent))
        sys.modules.pop("fakelib", None)
        ip.run_cell("del made")
    stack = [Frame("make", str(lib / "__init__.py"), 3), Frame("<module>", "/home/u/run.py", 9)]
    assert user_frame(stack) == stack[1]
    assert user_frame(stack[:1]) is None


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("--nope", "unrecognized arguments: --nope"),
        ("big", "unrecognized arguments: big"),
        ("--top 0", "--top takes a count"),
        ("--top x", "invalid int value"),
    ],
)
def test_bad_options_are_usage_errors_and_change_nothing(ip, line, words):
    ip.run_cell("y = 2")
    before = dict(ip.user_ns)
    with pytest.raises(UsageError, match=words):
        ip.run_line_magic("memory", line)
    assert ip.user_ns.keys() == before.keys() and ip.user_ns["y"] == 2


def test_the_figures_words_follow_the_gpu_pool_settings():
    assert "host memory" in pool_words("cpu", {})[0]
    words, settings = pool_words("gpu", {})
    assert "preallocated a pool of 0.75" in words and settings == ()
    words, settings = pool_words("gpu", {"XLA_PYTHON_CLIENT_MEM_FRACTION": ".5"})
    assert "pool of .5" in words and settings == (("XLA_PYTHON_CLIENT_MEM_FRACTION", ".5"),)
    assert "grows on demand" in pool_words("gpu", {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"})[0]
    assert "no pool" in pool_words("gpu", {"XLA_PYTHON_CLIENT_ALLOCATOR": "platform"})[0]


def test_pool_settings_are_said_to_change_nothing_off_a_gpu():
    settings = (("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),)
    assert settings_note("gpu", settings) == "set: XLA_PYTHON_CLIENT_PREALLOCATE=false"
    assert settings_note("tpu", settings) == (
        "set: XLA_PYTHON_CLIENT_PREALLOCATE=false "
        "(a GPU's pool settings: no effect on the tpu backend)"
    )
    assert pool_words("tpu", dict(settings))[1] == settings


# A pprof Profile written by hand (the wire format, field numbers of profile.proto), so
# the reader is checked against bytes it did not come from JAX with.


def _varint(n):
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, value):
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    return _varint(number << 3 | 2) + _varint(len(value)) + value


def _packed(number, values):
    return _field(number, b"".join(_varint(v) for v in values))


def test_the_pprof_reader_reads_a_profile_written_by_hand():
    strings = ["", "allocations", "count", "space", "bytes", "kind", "buffer", "f", "m.py"]
    strings += ["g", "lib.py", "device", "cpu:0"]
    s = {t: i for i, t in enumerate(strings)}
    fn = [_field(1, 1) + _field(2, s["f"]) + _field(4, s["m.py"])]
    fn.append(_field(1, 2) + _field(2, s["g"]) + _field(4, s["lib.py"]))
    loc = [_field(1, 10) + _field(4, _field(1, 2) + _field(2, 7))]  # g at lib.py:7
    loc.append(_field(1, 11) + _field(4, _field(1, 1) + _field(2, 42)))  # f at m.py:42
    label = _field(3, _field(1, s["kind"]) + _field(2, s["buffer"]))
    label += _field(3, _field(1, s["device"]) + _field(2, s["cpu:0"]))
    packed = _packed(1, [10, 11]) + _packed(2, [3, 4096]) + label
    unpacked = _field(1, 11) + _field(2, 1) + _field(2, -5)  # one varint per value
    data = b"".join(
        [
            _field(1, _field(1, s["allocations"]) + _field(2, s["count"])),
            _field(1, _field(1, s["space"]) + _field(2, s["bytes"])),
            _field(2, packed),
            _field(2, unpacked),
            *(_field(4, x) for x in loc),
            *(_field(5, x) for x in fn),
            _field(9, 123456789),  # time_nanos: a field the reader skips
            *(_field(6, t.encode()) for t in strings),
        ]
    )
    for blob in (data, gzip.compress(data)):
        p = read_profile(blob)
        assert p.sample_types == (("allocations", "count"), ("space", "bytes"))
        first, second = p.samples
        assert first.values == (3, 4096) and p.value(first, "space") == 4096
        assert first.labels == {"kind": "buffer", "device": "cpu:0"}
        assert p.stack(first) == [Frame("g", "lib.py", 7), Frame("f", "m.py", 42)]
        assert second.values == (1, -5) and p.stack(second) == [Frame("f", "m.py", 42)]
    with pytest.raises(ProfileError):
        read_profile(data[:-3] + b"\x80")  # a varint cut short
    with pytest.raises(ProfileError):
        read_profile(b"\x1f\x8bnot gzip")


def test_jaxs_own_profile_reads_with_the_planted_bytes():
    held = jnp.zeros((1000, 1000), jnp.float32)
    p = read_profile(jax.profiler.device_memory_profile())
    buffers = [x for x in p.samples if x.labels.get("kind") == "buffer"]
    assert sum(p.value(x, "space") for x in buffers) >= held.nbytes
    assert any(p.value(x, "space") == 4_000_000 for x in buffers)
    del held


def test_many_live_arrays_are_grouped_by_line_without_reading_each_arrays_shards(ip, monkeypatch):
    """20,000 arrays made at one line, one on the second device, one split over both: the
    report's counts, bytes and lines agree with a count of every array's shards, and the
    report read shards and sizes only for the arrays split over devices (asking each of
    200,000 arrays is what made %memory take 10-43 s; the time is benchmarks/'s)."""
    n = ip.execution_count
    ip.run_cell(
        "import jax, jax.numpy as jnp\n"
        "many = [jax.device_put(float(i)) for i in range(20_000)]\n"
        "on_second = jax.device_put(jnp.ones((7, 3)), jax.devices()[1])\n"
        "from jax.sharding import NamedSharding, PartitionSpec as P\n"
        "mesh = jax.make_mesh((2,), ('x',))\n"
        "split = jax.device_put(jnp.ones((6, 5)), NamedSharding(mesh, P('x')))",
        store_history=True,
    )
    array_type = type(ip.user_ns["split"])
    reads = {"addressable_shards": 0, "nbytes": 0}
    for name in reads:
        real = getattr(array_type, name)

        def counting(self, _real=real, _name=name):
            reads[_name] += 1
            return _real.__get__(self)

        monkeypatch.setattr(array_type, name, property(counting))
    try:
        r = jaxlab.memory(top=100_000)
        monkeypatch.undo()
        live = jax.live_arrays()  # the reference: every array's shards, counted here
        sharded = [a for a in live if not isinstance(a.sharding, jax.sharding.SingleDeviceSharding)]
        # read one by one: the arrays split over devices, and one array of each aval
        assert reads["addressable_shards"] <= len(sharded) < 100
        assert reads["nbytes"] <= len({a.aval for a in live}) + len(sharded) < 1_000
        # the figures, against every live array's shards counted here
        assert r.live_arrays == len(live) and r.live_bytes == sum(a.nbytes for a in live)
        # each buffer once: two arrays may share one (numpyro's jnp.asarray of an
        # array it was given, on JAX 0.10), which JAX's memory profile lists once
        per_device = {d.id: 0 for d in jax.local_devices()}
        buffers = set()
        for a in live:
            for s in a.addressable_shards:
                buffer = (s.device.id, s.data.unsafe_buffer_pointer())
                if buffer not in buffers:
                    buffers.add(buffer)
                    per_device[s.device.id] += s.data.nbytes
        assert {d.id: d.arrays_bytes for d in r.devices} == per_device
        made = r.site(f"In[{n}], line 2")
        assert made.buffers == 20_000 and made.bytes == 80_000
        assert made.code == "many = [jax.device_put(float(i)) for i in range(20_000)]"
        second = r.site(f"In[{n}], line 3")
        assert (second.buffers, second.bytes) == (1, 84)
        assert second.devices == (str(jax.devices()[1]),)
        halves = r.site(f"In[{n}], line 6")
        assert (halves.buffers, halves.bytes) == (2, 120) and len(halves.devices) == 2
        # a shape is named where one kind of live array has buffers of that size
        by_size: dict[int, set[str]] = {}
        for a in live:
            for s in a.addressable_shards:
                shape = f"{a.dtype}[{','.join(map(str, a.shape))}]"
                by_size.setdefault(s.data.nbytes, set()).add(shape)
        for site, size in ((made, 4), (second, 84), (halves, 60)):
            kinds = by_size[size]
            assert site.shapes == (tuple(kinds) if len(kinds) == 1 else ()), (site, kinds)
    finally:
        ip.run_cell("del many, on_second, split")


def test_each_devices_bytes_come_from_the_profile_unless_it_names_an_unknown_device():
    from jaxlab.arrays.live import device_bytes, live_arrays, shard_bytes
    from jaxlab.arrays.pprof import Profile, Sample

    class Device:
        def __init__(self, i):
            self.id = i

        def __str__(self):
            return f"gpu:{self.id}"

    def profile(*labels):
        samples = [
            Sample((), (1, 100 * (i + 1)), {"kind": "buffer", "device": d})
            for i, d in enumerate(labels)
        ]
        samples.append(Sample((), (1, 0), {"kind": "executable"}))
        return Profile((("allocations", "count"), ("space", "bytes")), tuple(samples), {})

    devices = [Device(0), Device(1)]
    assert device_bytes(profile("gpu:0", "gpu:1", "gpu:0"), devices) == {0: 400, 1: 200}
    assert device_bytes(profile("gpu:0", "tpu:7"), devices) is None  # then every shard read
    assert device_bytes(None, devices) is None
    held = jnp.ones((5, 7))
    exact = shard_bytes(live_arrays(jax.live_arrays()))
    assert exact[held.sharding.device_set.pop().id] >= 140
    del held
