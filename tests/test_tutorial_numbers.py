"""The numbers the tutorials' prose quotes, read from the markdown and checked against what
jaxlab's views compute on the same programs (issue 33, point 10).

Each check reads its figure out of the notebook's markdown, as written (``301\\,066``,
``about 0.08``, ``−9.81``), so a sentence edited to another figure is checked at its new
figure, and a sentence that no longer quotes it fails here, naming the pattern. The value
is computed by the view's Python API on the program the notebook runs (``jaxlab.show``'s
record, ``jaxpr_graph``, ``grad_report``, ``compile_report``, ``explore``), never read off
an executed notebook: this test needs no other lane to have run. A figure agrees when it is
the computed value rounded as the prose writes it (one unit of its last digit more for
"about").

Programs that need 64-bit floats (02, 06) or eight devices (08, 09's shards) run in a
subprocess of their own, one for each, so this process's JAX stays as every other test
expects it.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab
from jaxlab.arrays.words import count_words
from jaxlab.devices import format_bytes

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@functools.cache
def prose(prefix: str) -> str:
    """The markdown cells of ``notebooks/{prefix}_*.ipynb``, joined."""
    (path,) = NOTEBOOKS.glob(f"{prefix}_*.ipynb")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")


def quoted(prefix: str, pattern: str) -> str:
    """The figure the prose quotes: ``pattern``'s group 1 in notebook ``prefix``'s markdown."""
    found = re.search(pattern, prose(prefix), flags=re.S)
    assert found is not None, f"notebook {prefix}'s prose no longer says {pattern!r}"
    return found.group(1)


WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "eight": 8, "ten": 10}


def number(text: str) -> float:
    """``'301\\,066'``, ``'1,204,264'``, ``'−9.81'``, ``'two'``, ``'10^{-10}'`` as a number."""
    text = text.strip().replace("\\,", "").replace(",", "").replace("−", "-")
    if text in WORDS:
        return WORDS[text]
    power = re.fullmatch(r"10\^\{?(-?\d+)\}?", text)
    if power is not None:
        return 10.0 ** int(power.group(1))
    return float(text)


def agrees(text: str, value: float, about: bool = False) -> bool:
    """``value`` rounded as ``text`` is written (to its last digit; ±1 of it for "about")."""
    digits = text.replace("\\,", "").split(".")
    decimals = len(digits[1]) if len(digits) == 2 else 0
    unit = 10.0**-decimals
    return abs(value - number(text)) <= (1.0 if about else 0.5) * unit + 1e-12


def test_the_reader_rounds_as_the_prose_writes():
    assert agrees("0.08", 0.0849) and not agrees("0.08", 0.0851)
    assert agrees("0.08", 0.0899, about=True) and not agrees("0.08", 0.0901, about=True)
    assert number("301\\,066") == 301_066 and number("−9.81") == -9.81
    assert number("10^{-10}") == 1e-10 and number("two") == 2
    with pytest.raises(AssertionError, match="no longer says"):
        quoted("09", r"a mean of (\d+) parsecs")


def run_isolated(code: str, env: dict[str, str]) -> dict[str, Any]:
    """``code`` (which prints one JSON line last) in a fresh Python with ``env`` added."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "JAX_PLATFORMS": "cpu", **env},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- 01: thinking in JAX


def damped_wave(t, omega, gamma):
    return jnp.exp(-gamma * t) * jnp.cos(omega * t)


def newton_sqrt_unrolled(a):
    y = a
    for _ in range(10):
        y = 0.5 * (y + a / y)
    return y


def newton_sqrt_loop(a):
    return jax.lax.fori_loop(0, 10, lambda i, y: 0.5 * (y + a / y), a)


def test_01_the_conversions_and_the_unrolled_copies_are_the_drawings():
    t = jnp.linspace(0.0, 5.0, 1000)
    drawn = jaxlab.jaxpr_graph(damped_wave, t, 3.0, 0.4)
    converts = quoted("01", r"the (\w+) `as f32` nodes")
    assert drawn.primitives()["convert_element_type"] == number(converts)
    iterations = quoted("01", r"unrolled\* while tracing \((\w+)\s+iterations")
    copies = quoted("01", r"iterations, (\w+) copies of the body")
    unrolled = jaxlab.jaxpr_graph(newton_sqrt_unrolled, 2.0).primitives()["div"]
    looped = jaxlab.jaxpr_graph(newton_sqrt_loop, 2.0).primitives()["div"]
    assert (unrolled, looped) == (number(iterations), 1) and number(copies) == unrolled


# -- 03: jit and compilation


def test_03_three_muls_and_two_mnk_flops():
    muls = quoted("03", r"shows the unrolled loop: (\w+) `mul`s for \$n = 3\$")
    power_loop = notebook_function("03", "power_loop")
    drawn = jaxlab.jaxpr_graph(lambda v: power_loop(v, 3), jnp.array([1.5, 2.0, 3.0]))
    assert drawn.primitives()["mul"] == number(muls)
    assert "$2 m n k$ floating-point operations" in prose("03")
    m, k, n = 8, 16, 4
    xm, w = jnp.ones((m, k)), jnp.ones((k, n))
    assert jaxlab.compile_report(lambda a, b: a @ b, xm, w).flops == 2 * m * n * k


def notebook_function(prefix: str, name: str) -> Any:
    """The function ``name`` as notebook ``prefix`` defines it (its ``def`` alone run)."""
    (path,) = NOTEBOOKS.glob(f"{prefix}_*.ipynb")
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] != "code" or f"def {name}(" not in source:
            continue
        lines = [line for line in source.splitlines() if not line.startswith("%")]
        tree = ast.parse("\n".join(lines))
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
        space: dict[str, Any] = {"jax": jax, "jnp": jnp, "np": np}
        exec(compile(ast.Module(defs, []), f"<notebook {prefix}>", "exec"), space)
        return space[name]
    raise AssertionError(f"notebook {prefix} defines no {name}")


# -- 04: vmap


def test_04_the_sum_reads_as_the_picture_labels_it():
    def distance(p):
        return jnp.sqrt(jnp.sum(p**2))

    points = jnp.ones((1000, 3))
    drawn = jaxlab.jaxpr_graph(jax.vmap(distance), points)
    label = quoted("04", r'and a "(sum over axis \d)"')
    shape = quoted("04", r"now on `(f32\[[\d,]+\])`")
    assert [n.label for n in drawn.nodes if n.primitive == "reduce_sum"] == [label]
    assert [n.types for n in drawn.nodes if n.kind == "input"] == [(shape,)]


# -- 09: arrays, shards and memory (one device)

N, R = 128, 0.2


def heat_step(u):
    g = jnp.pad(u, 1, mode="edge")
    laplacian = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] - 4 * u
    return u + R * laplacian


@jax.jit
def evolve(u):
    return jax.lax.fori_loop(0, 1000, lambda _, u: heat_step(u), u)


def u0() -> jax.Array:
    return jnp.zeros((N, N)).at[16:48, 24:56].set(1.0)


def test_09_the_plates_figures_are_the_views():
    start = jaxlab.show(u0(), name="u0").record.root.array
    values = quoted("09", r"one this small\s+\(([\d,]+) values\)")
    mean = quoted("09", r"on \$128\^2 = 16384\$ cells: a mean of (\d+(?:\.\d+)?)")
    assert start.size == number(values) and agrees(mean, start.stats.mean)
    u = u0()
    for _ in range(20):  # 20 frames of 1000 steps, as the live view's loop runs
        u = evolve(u)
    last = jaxlab.show(u, name="u").record.root.array.stats
    hot = quoted("09", r"hottest cell has cooled from 1 to about (\d+(?:\.\d+)?)")
    cold = quoted("09", r"coldest warmed from 0 to\s+about (\d+(?:\.\d+)?)")
    still = quoted("09", r"the mean is still (\d+(?:\.\d+)?)")
    assert agrees(hot, last.max, about=True) and agrees(cold, last.min, about=True)
    assert agrees(still, last.mean)
    g = 1 - 4 * R * math.sin(math.pi / (2 * N)) ** 2
    fade = quoted("09", r"\$g\^\{20000\}\$ of its start, about\s+(\d+(?:\.\d+)?)")
    assert agrees(fade, g**20000, about=True)


SIZES = [64, 512, 512, 10]


def test_09_the_parameter_trees_count_and_bytes_are_the_views():
    keys = jax.random.split(jax.random.key(0), len(SIZES) - 1)
    params = {
        "layers": [
            {"W": jax.random.normal(k, (m, n)) / np.sqrt(m), "b": jnp.zeros(n)}
            for k, m, n in zip(keys, SIZES[:-1], SIZES[1:], strict=True)
        ]
    }
    record = jaxlab.show(params, name="params").record
    count = quoted("09", r"= *\n?(301\\,066)\$ parameters")
    rounded = quoted("09", r"the tree rounds it to (\d+(?:\.\d+)?k) values")
    size = quoted("09", r"`-o` gives the count\), ([\d,]+)\s+bytes")
    mib = quoted("09", r"bytes \((\d+(?:\.\d+)? MiB)\) in float32")
    assert record.root.params == number(count)
    assert count_words(record.root.params) == rounded and f"{rounded} values" in record.text()
    assert record.root.bytes == number(size) and format_bytes(record.root.bytes) == mib


def test_09_the_movies_bytes():
    @jax.jit
    def film(u):
        return jax.lax.scan(lambda u, _: (heat_step(u), heat_step(u)), u, None, length=1000)[1]

    movie = jax.eval_shape(film, u0())
    made = math.prod(movie.shape) * movie.dtype.itemsize
    mb = quoted("09", r"float32 values, (\d+(?:\.\d+)?) MB")
    mib = quoted("09", r"MB \((\d+(?:\.\d+)?) MiB\)")
    assert agrees(mb, made / 1e6) and agrees(mib, made / 2**20)


# -- 02 and 06: 64-bit programs, in a process of their own

X64 = r"""
import json, math
import numpy as np
import jax, jax.numpy as jnp
import jaxlab

out = {}
# 02: the central difference's error against the step
G = 9.81
def projectile_range(v, theta):
    return v**2 * jnp.sin(2 * theta) / G
v, theta = 20.0, 0.5
exact = float(jax.grad(projectile_range, argnums=1)(v, theta))
steps = 0.1 / 2.0 ** np.arange(37)
errors = np.array([abs(float((projectile_range(v, theta + h) - projectile_range(v, theta - h))
                   / (2 * h)) - exact) for h in steps])
best = int(errors.argmin())
out["02 best step"], out["02 best error"] = float(steps[best]), float(errors[best])
# 02: micrograd's neuron, its adjoints as %grad --graph draws them
def neuron(x1, x2, w1, w2, b):
    return jnp.tanh(x1 * w1 + x2 * w2 + b)
r = jaxlab.grad_report(neuron, 2.0, 0.0, -3.0, 1.0, 6.8813735870195432,
                       wrt="x1,x2,w1,w2,b", graph=True)
nodes = r.graph.nodes
out["02 adjoints"] = {n.label: n.adjoint.scalar for n in nodes if n.kind == "input"}
out["02 add before tanh"] = next(n.adjoint.scalar for n in nodes if n.label == "add"
                                 and n.phase == "forward" and n.value.scalar > 0)
# 06: the pendulum's energy, its adjoints
M, L, G6 = 1.0, 1.0, 9.81
def hamiltonian(theta, p):
    return p**2 / (2 * M * L**2) + M * G6 * L * (1 - jnp.cos(theta))
r = jaxlab.grad_report(hamiltonian, 0.3, 0.5, wrt="theta,p", graph=True)
nodes = r.graph.nodes
out["06 cos adjoint"] = next(n.adjoint.scalar for n in nodes if n.label == "cos")
out["06 theta adjoint"] = next(n.adjoint.scalar for n in nodes
                               if n.kind == "input" and n.label == "theta")
# 06: Euler's energy against Verlet's over 10,000 steps of 5 ms from 1 rad
dH_dtheta = jax.grad(hamiltonian, argnums=0)
dH_dp = jax.grad(hamiltonian, argnums=1)
DT = 0.005
def euler_step(state, _):
    theta, p = state
    new = (theta + DT * dH_dp(theta, p), p - DT * dH_dtheta(theta, p))
    return new, new
def verlet_step(state, _):
    theta, p = state
    p_half = p - 0.5 * DT * dH_dtheta(theta, p)
    theta_new = theta + DT * dH_dp(theta, p_half)
    new = (theta_new, p_half - 0.5 * DT * dH_dtheta(theta_new, p_half))
    return new, new
start = (jnp.float64(1.0), jnp.float64(0.0))
E0 = float(hamiltonian(*start))
drift = [float(jnp.abs(jax.vmap(hamiltonian)(*jax.lax.scan(step, start, None, length=10_000)[1])
                       - E0).max() / E0) for step in (euler_step, verlet_step)]
out["06 band ratio"] = drift[0] / drift[1]
# 06: the period under the sliders
def period(theta0=0.3, g=9.81, length=1.0):
    def torque(theta):
        return -(g / length) * jnp.sin(theta)
    def step(state, _):
        theta, omega = state
        omega_half = omega + 0.5 * DT * torque(theta)
        theta_new = theta + DT * omega_half
        return (theta_new, omega_half + 0.5 * DT * torque(theta_new)), theta_new
    _, thetas = jax.lax.scan(step, (theta0, 0.0 * theta0), None, length=1000)
    thetas = jnp.concatenate([jnp.reshape(theta0, (1,)), thetas])
    i = jnp.argmax(thetas[1:] <= 0)
    frac = thetas[i] / (thetas[i] - thetas[i + 1])
    return 4 * DT * (i + frac)
view = jaxlab.explore(period, theta0=(0.01, 1.5), g=(1.0, 20.0), length=(0.25, 4.0))
view.set(theta0=0.05)
out["06 bar"] = {b["name"]: b["scaled"] for b in view.frame()["bar"]}
swept = view.sweep("theta0", n=64)
T, slopes = np.asarray(swept.outputs), np.asarray(swept.slopes)
out["06 sweep"] = [float(T[0]), float(T[-1]), float(slopes[0]), float(slopes[-1]),
                   float(np.asarray(swept.values)[-1])]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def x64() -> dict[str, Any]:
    return run_isolated(X64, {"JAX_ENABLE_X64": "1"})


def test_02_the_error_bottoms_out_where_the_prose_says(x64):
    floor = quoted("02", r"bottoms out near \$(10\^\{-\d+\})\$")
    step = quoted("02", r"at a step \$h\$\s+of a few \$(10\^\{-\d+\})\$")
    assert round(math.log10(x64["02 best error"])) == math.log10(number(floor))
    assert number(step) <= x64["02 best step"] < 10 * number(step)  # "a few" of them


def test_02_micrograds_adjoints_are_the_drawings(x64):
    adjoints = x64["02 adjoints"]
    for name in ("x1", "w1", "x2", "w2", "b"):
        said = quoted("02", rf"`{name}\.grad = (-?\d+(?:\.\d+)?)`")
        assert agrees(said, adjoints[name]), (name, said, adjoints[name])
    said = quoted("02", r"the `add` before it gets \$1 - o\^2 = (\d+(?:\.\d+)?)\$")
    assert agrees(said, x64["02 add before tanh"])


def test_06_the_pendulums_adjoints_are_the_drawings(x64):
    cos = quoted("06", r"= -m g L\$, (−\d+(?:\.\d+)?) here")
    theta = quoted("06", r"\\sin\\theta\$: (\d+(?:\.\d+)?) at \$\\theta = 0\.3\$")
    assert agrees(cos, x64["06 cos adjoint"]) and agrees(theta, x64["06 theta adjoint"])


def test_06_verlets_band_is_as_many_times_narrower_as_the_prose_says(x64):
    times = quoted("06", r"stays within a band (tens of thousands) of times narrower")
    assert times == "tens of thousands" and 1e4 <= x64["06 band ratio"] < 1e5


def test_06_the_period_sliders_bar_and_sweep_are_the_views(x64):
    across_length = quoted(
        "06", r"length matters most over these ranges \((\d+(?:\.\d+)?) s across it\)"
    )
    across_g = quoted("06", r"then \$g\$\s+\((−\d+(?:\.\d+)?) s\)")
    bar = x64["06 bar"]
    assert agrees(across_length, bar["length"]) and agrees(across_g, bar["g"])
    first, last, slope0, slope1, top = x64["06 sweep"]
    grows = re.search(
        r"grows from (\d+(?:\.\d+)?) s to (\d+(?:\.\d+)?) s at (\d+(?:\.\d+)?) rad, its"
        r"\s+slope from (\d+(?:\.\d+)?) to (\d+(?:\.\d+)?) s/rad",
        prose("06"),
    )
    assert grows is not None, "06 no longer quotes the sweep's period and slope"
    t0, t1, rad, s0, s1 = grows.groups()
    assert agrees(t0, first) and agrees(t1, last) and number(rad) == top
    assert agrees(s0, slope0) and agrees(s1, slope1)
    small = quoted("06", r"\\sqrt\{L/g\} \\approx (\d+(?:\.\d+)?)\$ s")
    assert agrees(small, 2 * math.pi * math.sqrt(1.0 / 9.81))
    longer = quoted("06", r"predicts about (\d+(?:\.\d+)?)% longer")
    series = 1 + 1 / 16 + 11 / 3072 + 173 / 737280  # 1 rad
    assert agrees(longer, 100 * (series - 1), about=True)


# -- 08 and 09: eight devices, in a process of their own

EIGHT = r"""
import json
import numpy as np
import jax
jax.config.update("jax_num_cpu_devices", 8)
import jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import jaxlab

out = {"devices": jax.device_count()}
N, R = 128, 0.2
def heat_step(u):
    g = jnp.pad(u, 1, mode="edge")
    laplacian = g[:-2, 1:-1] + g[2:, 1:-1] + g[1:-1, :-2] + g[1:-1, 2:] - 4 * u
    return u + R * laplacian
@jax.jit
def evolve(u, steps=1000):
    return jax.lax.fori_loop(0, steps, lambda _, u: heat_step(u), u)
u0 = jnp.zeros((N, N)).at[16:48, 24:56].set(1.0)
mesh = jax.sharding.Mesh(np.array(jax.devices()), ("rows",))
u = jax.device_put(u0, NamedSharding(mesh, P("rows", None)))
layout = jaxlab.show(u, name="u").record.root.array.layout
out["09 blocks"] = layout.blocks
out["09 rows"] = sorted({s.index[0][1] - s.index[0][0] for s in layout.shards})
r = jaxlab.compile_report(evolve, u)
out["09 collectives"] = [[c.op, c.bytes, c.in_loop] for c in r.collectives]
mesh = jax.sharding.Mesh(np.array(jax.devices()), ("atoms",))
pos = jnp.ones((64, 3))
atoms = jaxlab.show(jax.device_put(pos, NamedSharding(mesh, P("atoms", None))), name="p")
out["08 rows"] = sorted({s.index[0][1] - s.index[0][0]
                         for s in atoms.record.root.array.layout.shards})
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def eight() -> dict[str, Any]:
    return run_isolated(EIGHT, {})


def test_09_the_shards_and_the_collective_xla_adds(eight):
    assert eight["devices"] == 8
    blocks = quoted("09", r"cut into\s+(\d+) blocks of \d+ rows")
    rows = quoted("09", r"blocks of (\d+) rows, one per device")
    assert eight["09 blocks"] == number(blocks) and eight["09 rows"] == [number(rows)]
    op = quoted("09", r"lists what XLA added: `([\w-]+)`s inside the\s+loop body")
    assert eight["09 collectives"] and {c[0] for c in eight["09 collectives"]} == {op}
    assert all(in_loop and 0 < sent < 16 * N * 4 for _, sent, in_loop in eight["09 collectives"])


def test_08_the_atoms_per_device(eight):
    atoms = quoted("08", r"With (\d+) atoms, \d+ each")
    each = quoted("08", r"With \d+ atoms, (\d+) each")
    assert number(atoms) == 64 and eight["08 rows"] == [number(each)]
