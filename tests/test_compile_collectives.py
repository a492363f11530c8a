"""The communication XLA inserts for a sharded call, read from the compiled HLO
(compile/collectives.py) and listed by ``%jit`` (issue 33: tutorial 09 said XLA "adds the
communication the stencil needs" and never showed it)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import jaxlab
from jaxlab.compile.collectives import collectives

N = 32


def stencil(u):
    lap = jnp.roll(u, 1, 0) + jnp.roll(u, -1, 0) + jnp.roll(u, 1, 1) + jnp.roll(u, -1, 1)
    return u + 0.1 * (lap - 4 * u)


def evolve(u):
    return jax.lax.fori_loop(0, 5, lambda i, u: stencil(u), u)


def _rows(u):
    mesh = jax.sharding.Mesh(np.array(jax.devices()), ("rows",))
    return jax.device_put(u, NamedSharding(mesh, P("rows", None)))


def test_a_sharded_stencil_exchanges_its_edge_rows_each_step():
    devices = jax.device_count()
    assert devices >= 2  # tests/conftest.py: two simulated CPU devices
    r = jaxlab.compile_report(evolve, _rows(jnp.ones((N, N))))
    permutes = [c for c in r.collectives if c.op == "collective-permute"]
    # one edge row up and one down, each f32[1, N], between every device and its neighbour
    assert len(permutes) == 2 and all(c.shape == f"f32[1,{N}]" for c in permutes)
    assert all(c.bytes == 4 * N and c.pairs == devices and c.in_loop for c in permutes)
    assert "communication XLA added" in str(r) and "collective-permute" in str(r)
    one = jaxlab.compile_report(evolve, jnp.ones((N, N)))  # one device: nothing to exchange
    assert one.collectives == () and "communication" not in str(one)


def test_a_sum_over_a_sharded_axis_is_an_all_reduce():
    r = jaxlab.compile_report(lambda u: u.sum(), _rows(jnp.ones((N, N))))
    assert [c.op for c in r.collectives] == ["all-reduce"] and r.collectives[0].bytes == 4
    assert r.to_dict()["collectives"][0]["op"] == "all-reduce"


def test_an_asynchronous_pair_is_counted_once_at_its_start():
    text = """HloModule m
ENTRY %main (p: f32[8,4]) -> f32[16,4] {
  %p = f32[8,4]{1,0} parameter(0)
  %ag-start = (f32[8,4]{1,0}, f32[16,4]{1,0}) all-gather-start(%p), dimensions={0}
  ROOT %ag-done = f32[16,4]{1,0} all-gather-done(%ag-start)
}
"""
    found = collectives(text)
    assert [(c.op, c.shape, c.bytes, c.computation) for c in found] == [
        ("all-gather", "f32[16,4]", 256, "main")
    ]
