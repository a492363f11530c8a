"""``%jaxpr`` of a ``shard_map`` program: its collectives are named with the mesh axes
they cross (``all_gather over 'x'``), the primitive and its parameters kept on hover."""

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh
from jax.sharding import PartitionSpec as P

import jaxlab


def _program():
    mesh = Mesh(np.array(jax.devices()[:2]).reshape(2, 1), ("x", "y"))

    def f(a):
        gathered = jax.lax.all_gather(a, "x")
        total = jax.lax.psum(a, ("x", "y"))
        shifted = jax.lax.ppermute(a, "x", [(0, 1), (1, 0)])
        top = jax.lax.pmax(a, "y")
        return total.sum() + jax.lax.psum(gathered.sum() + shifted.sum() + top.sum(), ("x", "y"))

    return jax.shard_map(f, mesh=mesh, in_specs=P("x", "y"), out_specs=P())


def test_shard_map_collectives_are_named_with_their_mesh_axes():
    g = jaxlab.jaxpr_graph(_program(), jnp.ones((4, 2)))
    labels = {n.label: n.raw for n in g.nodes if n.kind == "eqn"}
    assert "all_gather over 'x'" in labels
    assert "psum over 'x', 'y'" in labels
    assert "ppermute over 'x'" in labels
    assert "pmax over 'y'" in labels
    # the raw form stays one hover away
    assert labels["ppermute over 'x'"].startswith("ppermute ")
    assert "perm=((0, 1), (1, 0))" in labels["ppermute over 'x'"]


def test_the_jaxpr_magic_shows_the_collective_labels(ip):
    ip.user_ns.update(prog=_program(), jnp=jnp)
    g = ip.run_line_magic("jaxpr", "-o prog(jnp.ones((4, 2)))")
    assert "all_gather over 'x'" in {n.label for n in g.nodes}
