"""FLOPs and bytes per equation (jaxlab.equation_costs) against analytic counts and XLA."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import jaxlab
from jaxlab._jax_compat import cost_analysis
from jaxlab.compile.loop_costs import loops_counted_whole
from jaxlab.timing.equation_cost import equation_costs


def _xla(fun, *args):
    traced = jax.jit(fun).trace(*args)
    costs = cost_analysis(traced.lower().compile())
    return costs, loops_counted_whole(traced.jaxpr, costs)


def test_a_matmul_s_flops_are_2mkn_on_its_equation_and_bytes_are_xla_s():
    def mm(a, b):
        return jnp.tanh(a @ b).sum()

    a, b = jnp.ones((64, 32)), jnp.ones((32, 16))
    c = equation_costs(mm, a, b)
    top = c.ranked(1)[0]
    assert (top.primitive, top.flops) == ("dot_general", 2 * 64 * 32 * 16)
    tanh = next(k for k, p in c.primitives.items() if p == "tanh")
    assert c.transcendentals[tanh] == 64 * 16  # counted apart, as XLA counts them
    xla, _ = _xla(mm, a, b)
    assert c.total_transcendentals == xla["transcendentals"]
    assert 0.9 < c.total_bytes / xla["bytes accessed"] < 1.1
    assert 0.95 < c.total_flops / xla["flops"] < 1.05


def test_a_scan_is_counted_by_its_trip_count_not_once():
    def run(c, w):
        return jax.lax.scan(lambda c, _: (jnp.tanh(c @ w), None), c, None, length=1000)[0]

    x, w = jnp.ones(8), jnp.ones((8, 8))
    c = equation_costs(run, x, w)
    xla, whole = _xla(run, x, w)
    assert xla["flops"] < 200  # XLA's own figure counts the body once
    assert 0.97 < c.total_flops / whole.flops < 1.03  # its body costed by XLA, times 1,000
    scan = next(k for k, p in c.primitives.items() if p == "scan")
    inside = sum(v for k, v in c.flops.items() if k == scan or k.startswith(scan + "/"))
    assert inside >= 1000 * 2 * 8 * 8  # the body's dot, 1,000 times
    assert c.total_transcendentals == 1000 * 8
    assert c.notes == () or all("trip count" not in n for n in c.notes)


def test_a_while_loop_without_a_trip_count_is_counted_once_and_says_so():
    def until(x):
        return jax.lax.while_loop(lambda v: v.sum() < 100.0, lambda v: v * 2.0, x)

    c = equation_costs(until, jnp.ones(4))
    assert any("without a known trip count" in n for n in c.notes), c.notes
    assert any("trip count" in n for n in c.graph.notes)


def test_the_overlay_draws_the_measure_and_a_box_sums_its_contents():
    def layer(x, w):
        return jnp.tanh(x @ w)

    def model(x, w):
        return jax.jit(layer)(x, w).sum()

    x, w = jnp.ones((16, 16)), jnp.ones((16, 16))
    c = equation_costs(model, x, w, measure="bytes")
    assert c.graph.overlay_name == "bytes" and c.measure == "bytes"
    box = next(k for k, p in c.primitives.items() if p in ("pjit", "jit"))
    closed = next(n for n in c.graph.nodes if n.overlay is not None and box in n.id)
    inside = sum(v for k, v in c.bytes.items() if k == box or k.startswith(box + "/"))
    assert closed.overlay == pytest.approx(inside) and inside > 0  # a box sums its contents
    flops = equation_costs(model, x, w)
    inner = next(k for k, p in flops.primitives.items() if p == "dot_general")
    assert flops.flops[inner] == 2 * 16**3
    assert jaxlab.equation_costs is equation_costs


def test_an_mlp_training_step_ranks_its_matmuls_first():
    def loss(params, x, y):
        h = x
        for w, b in params[:-1]:
            h = jnp.tanh(h @ w + b)
        w, b = params[-1]
        return jnp.mean((h @ w + b - y) ** 2)

    @jax.jit
    def step(params, x, y):
        g = jax.grad(loss)(params, x, y)
        return jax.tree.map(lambda p, d: p - 0.01 * d, params, g)

    sizes = [(32, 64), (64, 64), (64, 4)]
    params = [(jnp.ones(s) * 0.01, jnp.zeros(s[1])) for s in sizes]
    x, y = jnp.ones((8, 32)), jnp.ones((8, 4))
    c = equation_costs(step, params, x, y)
    top = c.ranked(3)
    assert all(e.primitive == "dot_general" for e in top), top
    # forward 2*8*(32*64 + 64*64 + 64*4) and backward about twice that again
    forward = 2 * 8 * (32 * 64 + 64 * 64 + 64 * 4)
    matmuls = sum(v for k, v in c.flops.items() if c.primitives.get(k) == "dot_general")
    assert 2.5 * forward <= matmuls <= 3.05 * forward
    xla, _ = _xla(step, params, x, y)
    assert 0.9 < c.total_flops / xla["flops"] < 1.1


def test_a_bad_measure_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="flops, bytes, transcendentals"):
        equation_costs(lambda x: x + 1, jnp.ones(2), measure="time")


def test_an_equinox_gradient_s_matmuls_are_the_analytic_count():
    eqx = pytest.importorskip("equinox")
    model = eqx.nn.MLP(16, 4, 32, 2, key=jax.random.key(0))
    x = jnp.ones((8, 16))

    def loss(m, x):
        return jnp.mean(jax.vmap(m)(x) ** 2)

    c = equation_costs(eqx.filter_jit(eqx.filter_grad(loss)), model, x)
    matmuls = sum(v for k, v in c.flops.items() if c.primitives[k] == "dot_general")
    forward = 2 * 8 * (16 * 32 + 32 * 32 + 32 * 4)
    weights = forward  # each layer's weight gradient: one product as large as its forward
    inputs = 2 * 8 * (32 * 32 + 32 * 4)  # activations' gradients (not the input x's)
    assert matmuls == forward + weights + inputs == 71_680
    assert all(e.primitive == "dot_general" for e in c.ranked(6))


def test_the_magic_draws_and_returns_the_costs_and_refuses_what_it_cannot(ip):
    from IPython.core.error import UsageError

    ip.run_cell(
        "import jax, jax.numpy as jnp\n"
        "def mm(a, b):\n    return jnp.tanh(a @ b).sum()\n"
        "a, b = jnp.ones((64, 32)), jnp.ones((32, 16))"
    )
    c = ip.run_line_magic("jaxpr", "--cost flops -o mm(a, b)")
    assert c.ranked(1)[0].flops == 2 * 64 * 32 * 16 and c.graph.overlay_name == "flops"
    grad = ip.run_line_magic("jaxpr", "--cost bytes --grad -o mm(a, b)")
    assert grad.measure == "bytes" and grad.total_bytes > c.total_bytes
    before = dict(ip.user_ns)
    with pytest.raises(UsageError, match="one of flops, bytes, transcendentals, not 'time'"):
        ip.run_line_magic("jaxpr", "--cost time mm(a, b)")
    with pytest.raises(UsageError, match="leave out --text"):
        ip.run_line_magic("jaxpr", "--cost flops --text mm(a, b)")
    assert set(ip.user_ns) == set(before)
