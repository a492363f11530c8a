"""FLOPs and bytes per equation (jaxlab.equation_costs) against analytic counts and XLA."""

from __future__ import annotations

import re

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
    bare = ip.run_line_magic("jaxpr", "-o --cost mm(a, b)")  # --cost alone: FLOPs
    assert bare.measure == "flops" and bare.total_flops == c.total_flops
    with pytest.raises(UsageError, match="one of flops, bytes, transcendentals, not 'time'"):
        ip.run_line_magic("jaxpr", "--cost time mm(a, b)")
    with pytest.raises(UsageError, match="leave out --text"):
        ip.run_line_magic("jaxpr", "--cost flops --text mm(a, b)")
    assert set(ip.user_ns) == set(before)


# ---------------------------------------------------------------- each equation's own work
def _layer(p, x):
    return jnp.tanh(x @ p["W"] + p["b"])


def _mlp(params, x):
    for p in params:
        x = _layer(p, x)
    return x


def _mlp_loss(params, x):
    return jnp.mean(_mlp(params, x) ** 2)


MLP_LINE = _layer.__code__.co_firstlineno + 1


def _own_matmul_flops(c, k):
    """2·m·k·n of one dot_general equation, from its own operands' shapes."""
    block, at = c.graph.rebuild.explorer.where[k]
    eqn = block.items[at].eqn
    (contract, _), _ = eqn.params["dimension_numbers"]
    lhs = eqn.invars[0].aval.shape
    inner = 1
    for d in contract:
        inner *= lhs[d]
    out = 1
    for d in eqn.outvars[0].aval.shape:
        out *= d
    return 2 * out * inner


@pytest.mark.parametrize("batch", [1, 8])
def test_a_20_layer_mlp_s_matmuls_each_have_their_own_flops(batch):
    params = [
        {"W": jnp.ones((64 if i == 0 else 128, 128)) * 0.01, "b": jnp.zeros(128)} for i in range(20)
    ]
    c = equation_costs(_mlp_loss, params, jnp.ones((batch, 64)))
    dots = [k for k, p in c.primitives.items() if p == "dot_general"]
    assert len(dots) == 20
    for k in dots:
        assert c.flops[k] == pytest.approx(_own_matmul_flops(c, k), rel=1e-9), k
    assert c.flops[dots[0]] == 2 * batch * 64 * 128  # layer 0: its own shapes
    assert c.flops[dots[1]] == pytest.approx(2 * batch * 128 * 128, rel=1e-9)
    # the notes name the code, its line and the layer, never jaxlab's ids
    largest = [n for n in c.graph.notes if n.startswith("flops largest:")]
    assert largest and all('x @ p["W"]' in n for n in largest), largest
    assert all(f"test_equation_cost.py:{MLP_LINE}" in n for n in largest)
    assert all(re.search(r"layer \d+", n) for n in largest), largest
    assert not any(re.search(r"\be\d+\b", n) for n in largest), largest
    top = c.ranked(1)[0]
    assert top.code == 'x @ p["W"]' and top.call is not None and top.call.startswith("_layer ")


def test_a_gradient_s_matmuls_on_one_line_keep_their_own_shapes():
    params = [{"W": jnp.ones((64 if i == 0 else 128, 128)), "b": jnp.zeros(128)} for i in range(4)]
    c = equation_costs(jax.grad(_mlp_loss), params, jnp.ones((8, 64)))
    dots = [k for k, p in c.primitives.items() if p == "dot_general"]
    assert len(dots) >= 11  # forward 4, backward 4 weight + 3 input gradients
    for k in dots:
        assert c.flops[k] == pytest.approx(_own_matmul_flops(c, k), rel=1e-9), k


# ---------------------------------------------------------------- every primitive costed
def _conv(x, k):
    return jax.lax.conv_general_dilated(
        x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


def test_a_3x3_convolution_counts_its_whole_window():
    x, k = jnp.ones((2, 28, 28, 8)), jnp.ones((3, 3, 8, 16))
    c = equation_costs(_conv, x, k)
    conv = next(k_ for k_, p in c.primitives.items() if p == "conv_general_dilated")
    assert c.flops[conv] == 2 * 2 * 28 * 28 * 16 * 3 * 3 * 8  # 2·N·H·W·Cout·kh·kw·Cin
    xla, _ = _xla(_conv, x, k)
    assert 0.9 < c.total_flops / xla["flops"] < 1.1
    grouped = equation_costs(
        lambda x, k: jax.lax.conv_general_dilated(
            x, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
            feature_group_count=2,
        ),
        x, jnp.ones((3, 3, 4, 16)),
    )  # fmt: skip
    assert grouped.total_flops == 2 * 2 * 28 * 28 * 16 * 3 * 3 * 4  # Cin of a group


def test_an_fft_sort_and_scatter_are_counted_as_xla_counts_them():
    def spectral(x):
        return jnp.fft.irfft(jnp.fft.rfft2(x) * 0.5).sum()

    x = jnp.ones((64, 128))
    c = equation_costs(spectral, x)
    fft = [k for k, p in c.primitives.items() if p == "fft"]
    # XLA: 2 x 4 multiply-adds per element of the input and per level (log2 of each length)
    assert c.flops[fft[0]] == 8 * 64 * 128 * 6 * 7
    xla, _ = _xla(spectral, x)
    assert 0.9 < c.total_flops / xla["flops"] < 1.1
    for fun, args in (
        (jnp.sort, (jnp.ones((16, 100)),)),
        (lambda v, i: v.at[i].add(1.0), (jnp.ones((1000, 8)), jnp.arange(50) * 3)),
    ):
        got = equation_costs(fun, *args)
        xla, _ = _xla(fun, *args)
        assert got.total_flops == xla["flops"] > 0


def _cnn(params, x):
    for k in params:
        x = jax.nn.relu(_conv(x, k))
        x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    return jnp.mean(x**2)


def _block(p, x):
    q, k, v = x @ p["q"], x @ p["k"], x @ p["v"]
    a = jax.nn.softmax(q @ k.T / 8.0, axis=-1)
    h = x + a @ v @ p["o"]
    h = h - h.mean(-1, keepdims=True)
    return jnp.sum(h + jax.nn.gelu(h @ p["up"]) @ p["down"])


def _solver(u):
    k = jnp.fft.fftfreq(u.shape[-1]) ** 2

    def step(u, _):
        return jnp.fft.irfft(jnp.fft.rfft(u) * jnp.exp(-0.01 * k[: u.shape[-1] // 2 + 1])), None

    return jax.lax.scan(step, u, None, length=10)[0].sum()


@pytest.mark.parametrize(
    "fun, args",
    [
        (_cnn, ([jnp.ones((3, 3, 3, 16)), jnp.ones((3, 3, 16, 32))], jnp.ones((4, 32, 32, 3)))),
        (
            jax.grad(_cnn),
            ([jnp.ones((3, 3, 3, 16)), jnp.ones((3, 3, 16, 32))], jnp.ones((4, 32, 32, 3))),
        ),
        (
            _block,
            (
                {
                    n: jnp.ones(s)
                    for n, s in dict(
                        q=(64, 64), k=(64, 64), v=(64, 64), o=(64, 64), up=(64, 256), down=(256, 64)
                    ).items()
                },
                jnp.ones((32, 64)),
            ),
        ),
        (_solver, (jnp.ones((8, 256)),)),
    ],
    ids=["cnn", "cnn-grad", "transformer-block", "spectral-solver"],
)
def test_totals_are_within_10_percent_of_xla_s(fun, args):
    c = equation_costs(fun, *args)
    _, whole = _xla(fun, *args)  # XLA's count, a loop's body counted by its trip count
    assert 0.9 < c.total_flops / whole.flops < 1.1, (c.total_flops, whole.flops)
