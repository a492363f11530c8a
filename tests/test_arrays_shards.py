"""Where a sharded array lives (``arrays/shards.py``, ``arrays/shards_html.py``): the
drawing's blocks against ``shard.index`` on 1-D and 2-D meshes, the words of the layout,
and an array on one device."""

import json
import os
import re
import subprocess
import sys
import textwrap
from html.parser import HTMLParser

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from jaxlab.arrays import show_record
from jaxlab.arrays.shards import shard_layout
from jaxlab.arrays.shards_html import BAR_H, BLOCKS_W, layout_html


class _Blocks(HTMLParser):
    """Each drawn block: its data-index, data-devices and its rectangle."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks: list[dict] = []
        self.cells: dict[int, str] = {}
        self.svg: dict = {}
        self._cell: int | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "svg" and "jaxlab-shard-blocks" in (a.get("class") or ""):
            self.svg = a
        if tag == "g" and a.get("class") == "jaxlab-shard-block":
            self.blocks.append(
                {
                    "index": a["data-index"],
                    "devices": [int(d) for d in a["data-devices"].split(",")],
                    "here": a["data-here"] == "1",
                }
            )
        if tag == "rect" and self.blocks:
            self.blocks[-1]["rect"] = tuple(float(a[k]) for k in ("x", "y", "width", "height"))
        if tag == "td" and "data-device" in a:
            self._cell = int(a["data-device"])
            self.cells[self._cell] = ""

    def handle_endtag(self, tag):
        if tag == "td":
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self.cells[self._cell] += data


def _index_text(index, shape):
    """``shard.index`` (slices) written as the drawing writes a block: ``[0:2, 0:8]``."""
    parts = []
    for s, n in zip(index, shape, strict=True):
        start, stop, _ = s.indices(n)
        parts.append(f"{start}:{stop}")
    return "[" + ", ".join(parts) + "]"


def _check_drawing(html_text, shards, shape):
    """Every shard's device is drawn in exactly one block, whose index is ``shard.index``,
    placed where that index lies in the array; every mesh cell names its block."""
    p = _Blocks()
    p.feed(html_text)
    assert p.blocks, "no block drawn"
    axes = [int(a) for a in p.svg["data-axes"].split(",") if a]
    height = float(p.svg["height"]) - 2
    for shard in shards:
        want = _index_text(shard["index"], shape)
        mine = [b for b in p.blocks if shard["device"] in b["devices"]]
        assert len(mine) == 1, (shard["device"], p.blocks)
        assert mine[0]["index"] == want
        assert want in p.cells[shard["device"]]
        x, y, w, h = mine[0]["rect"]
        bounds = [s.indices(n)[:2] for s, n in zip(shard["index"], shape, strict=True)]
        (c0, c1) = bounds[axes[-1]]
        cols = shape[axes[-1]]
        np.testing.assert_allclose([x, w], [c0 * BLOCKS_W / cols, (c1 - c0) * BLOCKS_W / cols])
        if len(axes) == 2:
            (r0, r1), rows = bounds[axes[0]], shape[axes[0]]
            np.testing.assert_allclose([y, h], [r0 * height / rows, (r1 - r0) * height / rows])
    # one block per distinct index, never a stray one
    assert len(p.blocks) == len({_index_text(s["index"], shape) for s in shards})
    return p


def _shards(x):
    return [{"device": s.device.id, "index": s.index} for s in x.addressable_shards]


def test_a_1d_mesh_layout_is_the_shards_own_blocks():
    mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
    x = jax.device_put(jnp.arange(24.0).reshape(6, 4), NamedSharding(mesh, P("x")))
    layout = shard_layout(x)
    assert layout is not None
    assert layout.mesh_shape == (("x", 2),) and layout.spec == "P('x',)"
    assert layout.axis_mesh == (("x",), ()) and layout.replicated_over == ()
    assert layout.partitioned_axes == (0,) and layout.replicated_axes == (1,)
    assert [s.bytes for s in layout.shards] == [48, 48]
    assert all(s.here and not s.replicated for s in layout.shards)
    for s in x.addressable_shards:
        mine = layout.shard_on(s.device.id)
        assert mine.index == tuple(
            sl.indices(n)[:2] for sl, n in zip(s.index, x.shape, strict=True)
        )
        assert mine.bytes == s.data.nbytes
    r = show_record(x, "x")
    _check_drawing(r.html(), _shards(x), x.shape)
    assert "axis 0 split over x" in r.text()
    # drawn as one row of cells, and every text at 12 px, readable at 1280x720 (issue 24)
    assert "<caption>mesh: x across</caption>" in r.html()
    assert not re.search(r'font-size(?::|=")(?:[0-9]|1[01])(?:px|")', r.html())
    assert ".jaxlab-shard-mesh code{font-size:12px}" in r.html()  # not a page's smaller code


def test_a_2x1_mesh_and_a_replicated_array():
    mesh = Mesh(np.array(jax.devices()[:2]).reshape(2, 1), ("data", "model"))
    x = jax.device_put(jnp.ones((4, 6)), NamedSharding(mesh, P(None, "data")))
    layout = shard_layout(x)
    assert layout.axis_mesh == ((), ("data",))
    assert layout.mesh_devices == (0, 1)
    _check_drawing(layout_html(layout), _shards(x), x.shape)
    # replicated over the whole mesh: one block, on both devices
    rep = jax.device_put(jnp.arange(5.0), NamedSharding(mesh, P()))
    layout = shard_layout(rep)
    assert layout.blocks == 1 and all(s.copies == 2 for s in layout.shards)
    assert layout.replicated_over == ("data",)
    p = _check_drawing(layout_html(layout), _shards(rep), rep.shape)
    assert p.blocks[0]["rect"] == (0.0, 0.0, float(BLOCKS_W), float(BAR_H))
    assert "replicated over data" in layout.words()


def test_an_array_on_one_device_has_no_layout_and_says_one_device():
    x = jnp.ones((3, 4))
    assert shard_layout(x) is None
    r = show_record(x, "x")
    assert r.root.array.layout is None
    assert "one device" in r.text()
    assert "jaxlab-shard" not in r.html()


def test_mesh_names_are_escaped():
    mesh = Mesh(np.array(jax.devices()[:2]), ("<s>x",))
    x = jax.device_put(jnp.ones(4), NamedSharding(mesh, P("<s>x")))
    page = show_record(x, "x").html()
    assert "<s>" not in page and "&lt;s&gt;x" in page


_EIGHT = textwrap.dedent(
    """
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_num_cpu_devices", 8)
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    from jaxlab.arrays import show_record
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
    out = []
    for shape, spec in [((8, 6), P("x", "y")), ((8, 6), P("x")), ((6, 8), P("y", "x")),
                        ((8, 4, 2), P(None, "x", "y")), ((16,), P(("x", "y"))),
                        ((8, 2), P("y"))]:
        x = jax.device_put(jnp.zeros(shape), NamedSharding(mesh, spec))
        r = show_record(x, "x")
        out.append({
            "shape": shape,
            "shards": [[s.device.id, [[sl.start, sl.stop] for sl in s.index]]
                       for s in x.addressable_shards],
            "html": r.html(), "text": r.text(),
            "over": list(r.root.array.layout.replicated_over),
        })
    print(json.dumps(out))
    """
)


def test_a_2d_mesh_of_eight_devices_draws_every_shards_block():
    env = {**os.environ, "JAX_NUM_CPU_DEVICES": "8", "JAX_PLATFORMS": "cpu"}
    run = subprocess.run(
        [sys.executable, "-c", _EIGHT], capture_output=True, text=True, timeout=120, env=env
    )
    assert run.returncode == 0, run.stderr[-2000:]
    cases = json.loads(run.stdout.strip().splitlines()[-1])
    for case in cases:
        shape = tuple(case["shape"])
        shards = [
            {"device": d, "index": tuple(slice(a, b) for a, b in idx)} for d, idx in case["shards"]
        ]
        assert len(shards) == 8
        _check_drawing(case["html"], shards, shape)
    # P('x') on a 4x2 mesh: replicated over y, each block on two devices
    assert cases[1]["over"] == ["y"] and "replicated over y" in cases[1]["text"]
    assert cases[0]["over"] == [] and "axis 1 split over y" in cases[0]["text"]
    assert "axis 0 split over (x, y)" in cases[4]["text"]


def test_the_array_views_payload_lists_each_devices_block():
    from jaxlab.widgets import ArrayView

    mesh = Mesh(np.array(jax.devices()[:2]), ("x",))
    x = jax.device_put(jnp.arange(8.0), NamedSharding(mesh, P("x")))
    view = ArrayView(x, name="x")
    try:
        listed = {d["device"]: d["index"] for d in view.drawing["shards"]["devices"]}
        assert listed == {s.device.id: _index_text(s.index, x.shape) for s in x.addressable_shards}
        assert "axis 0 split over x" in view.drawing["shards"]["words"]
        one = ArrayView(jnp.ones(3), name="one")
        assert one.drawing["shards"] is None
        one.close()
    finally:
        view.close()
