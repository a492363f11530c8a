"""Programs whose nested bodies return constants: a scan's reward of ``1.0`` per step, a
while loop and a cond whose branch returns a literal (issue 33: ``%jaxpr`` raised
``TypeError: unhashable type: 'Literal'`` on the scan)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

import jaxlab


def rewarded(x):
    def step(c, _):
        return c * 0.9, 1.0  # a constant reward each step

    c, rewards = lax.scan(step, x, None, length=5)
    return c.sum() + rewards.sum()


def branches(x, flag):
    return lax.cond(flag, lambda v: v.sum(), lambda v: 2.0, x) + lax.while_loop(
        lambda c: c < 3.0, lambda c: c + 1.0, 0.0
    )


def _every_view(g):
    """The graph and every view the explorer can open, each box opened in turn."""
    views = [g]
    if g.rebuild is not None:
        boxes = g.rebuild.explorer.openable()
        views += [g.rebuild(frozenset(boxes[: k + 1])) for k in range(len(boxes))]
    return views


def test_a_scan_that_returns_a_constant_each_step_is_drawn_with_its_stacked_constant():
    x = jnp.ones(3)
    g = jaxlab.jaxpr_graph(rewarded, x)
    assert any(c.primitive == "scan" for c in g.clusters) or any(
        n.primitive == "scan" for n in g.nodes
    )
    labels = [n.label for v in _every_view(g) for n in v.nodes]
    assert any("stacked 1.0" in label for label in labels), labels
    # its gradient program and values draw as well, and agree with JAX
    grad = jaxlab.jaxpr_graph(rewarded, x, grad=True, values=True)
    assert grad.nodes and _every_view(grad)
    assert float(rewarded(x)) == float(jnp.sum(x * 0.9**5) + 5.0)


def test_cond_and_while_with_literal_results_are_drawn():
    g = jaxlab.jaxpr_graph(branches, jnp.ones(3), True)
    views = _every_view(g)
    primitives = {n.primitive for v in views for n in [*v.nodes, *v.clusters]}
    assert {"cond", "while"} <= primitives
    assert jax.grad(lambda v: branches(v, True))(jnp.ones(3)).tolist() == [1.0, 1.0, 1.0]
    jaxlab.jaxpr_graph(lambda v: branches(v, True), jnp.ones(3), grad=True, values=True)


def test_an_outer_product_reads_as_one():
    from jaxlab.graph.model import EQUATION

    g = jaxlab.jaxpr_graph(lambda u, v: jnp.einsum("i,j->ij", u, v), jnp.ones(3), jnp.ones(4))
    labels = [n.label for n in g.nodes if n.kind == EQUATION]
    assert "u ⊗ v" in labels and not [x for x in labels if "none" in x]
    batched = jaxlab.jaxpr_graph(
        lambda u, v: jnp.einsum("bi,bj->bij", u, v), jnp.ones((2, 3)), jnp.ones((2, 4))
    )
    assert "u ⊗ v per axis 0" in [n.label for n in batched.nodes if n.kind == EQUATION]
