"""%%profile and jaxlab.profile: the trace read back, syncs found at their lines, files removed."""

from __future__ import annotations

import inspect
import json
import os

import jax
import jax.numpy as jnp
import pytest
from IPython.core.error import UsageError
from IPython.utils.capture import capture_output

import jaxlab
from jaxlab.timing.syncs import KINDS


@jax.jit
def step(x):
    return jnp.tanh(x @ x)


@jax.jit
def loss(x):
    return (x**2).mean()


def _line_of(marker: str) -> int:
    lines = inspect.getsource(inspect.getmodule(_line_of)).splitlines()
    return next(i for i, text in enumerate(lines, 1) if marker in text and "_line_of" not in text)


def test_profile_of_a_known_block_names_its_jitted_functions_and_modules():
    x = jnp.ones((200, 200))
    jax.block_until_ready((step(x), loss(x)))  # compiled before, so only running is traced
    with jaxlab.profile() as p:
        y = step(x)
        z = loss(y)
        z.block_until_ready()
    r = p.result
    assert r is not None
    assert r.functions() == ["step", "loss"]
    modules = {c.name: c for c in r.modules}
    assert {"jit_step", "jit_loss"} <= set(modules)
    assert modules["jit_step"].calls == 1 and modules["jit_loss"].calls == 1
    ops = [s for s in r.spans if s.kind == "op"]
    assert ops and {s.module for s in ops} <= set(modules)
    for s in r.spans:
        assert s.start_s >= 0 and s.duration_s >= 0
    for c in r.modules:
        assert c.share == pytest.approx(c.total_s / r.duration_s)
    json.dumps(r.to_dict())
    assert r.syncs == ()


def test_a_planted_float_loop_is_found_with_its_line():
    x = jnp.ones((100, 100))
    values = []
    with jaxlab.profile() as p:
        for _ in range(5):
            values.append(float(loss(step(x))))  # planted sync
        jax.device_get(step(x))  # explicit: asked for, not a hidden sync
        if loss(x) > 0:  # planted bool
            pass
    assert values == [pytest.approx(float(loss(step(x))))] * 5
    sites = {s.lineno: s for s in p.result.syncs}
    planted = sites[_line_of("# planted sync")]
    assert planted.count == 5 and planted.kind == KINDS["__float__"]
    assert planted.code == "values.append(float(loss(step(x))))  # planted sync"
    assert planted.array == "f32[]"
    assert planted.where == f"test_profile.py, line {planted.lineno}"
    branch = sites[_line_of("# planted bool")]
    assert branch.count == 1 and branch.kind == KINDS["__bool__"]
    assert len(sites) == 2  # device_get is not counted
    assert "keep the value on the device" in str(p.result)


def test_the_trace_folder_is_removed_and_arrays_restored_even_when_the_block_raises():
    array_type = type(jnp.ones(1))
    original = array_type.__dict__["__float__"]
    with pytest.raises(ZeroDivisionError), jaxlab.profile() as p:
        assert os.path.isdir(p.folder)
        assert array_type.__dict__["__float__"] is not original  # observed inside
        float(step(jnp.ones((2, 2))).sum()) / 0
    assert not os.path.exists(p.folder)
    assert p.result is None
    assert array_type.__dict__["__float__"] is original
    with jaxlab.profile() as q:
        step(jnp.ones((2, 2))).block_until_ready()
    assert not os.path.exists(q.folder) and q.result is not None


def test_profile_widget_carries_the_result(tmp_path):
    from jaxlab.widgets import ProfileTimeline

    x = jnp.ones((50, 50))
    with jaxlab.profile() as p:
        float(step(x).sum())
    w = ProfileTimeline(p.result)
    assert w.duration_s == p.result.duration_s
    assert "step" in [s["name"] for s in w.spans if s["kind"] == "dispatch"]
    assert w.syncs[0]["count"] == 1
    data, _ = w._repr_mimebundle_()
    assert "text/html" in data and "<svg" in data["text/html"]


# ------------------------------------------------------------------------------ the magic

CELL = """\
%%profile -o
total = 0.0
for i in range(3):
    y = step(x)
    total += float(y.sum())
"""


def test_profile_magic_runs_the_cell_and_finds_the_sync_in_the_cell(ip):
    ip.user_ns.update(step=step, x=jnp.ones((64, 64)))
    result = ip.run_cell(CELL)
    r = result.result
    assert isinstance(r, jaxlab.ProfileResult)
    expected = 3 * float(step(jnp.ones((64, 64))).sum())
    assert ip.user_ns["total"] == pytest.approx(expected)  # assignments took effect
    assert "step" in r.functions()
    (site,) = [s for s in r.syncs if s.kind == KINDS["__float__"]]
    assert site.count == 3 and site.lineno == 5 and site.where.endswith(", line 5")
    assert site.where.startswith("In[")
    assert site.code == "total += float(y.sum())"


def test_profile_magic_displays_the_widget_or_static_html_and_returns_the_value(ip):
    ip.user_ns.update(step=step, x=jnp.ones((8, 8)))
    with capture_output() as out:
        value = ip.run_cell_magic("profile", "", "y = step(x)\ny.shape")
    assert value == (8, 8)
    assert "application/vnd.jupyter.widget-view+json" in out.outputs[0].data
    with capture_output() as out:
        ip.run_cell_magic("profile", "--static", "step(x)")
    assert "<svg" in out.outputs[0].data["text/html"]


def test_profile_magic_on_a_raising_cell_shows_the_error_and_removes_the_trace(ip, tmp_path):
    import tempfile

    before = set(os.listdir(tempfile.gettempdir()))
    result = ip.run_cell("%%profile\nz = 1\n1 / 0")
    assert isinstance(result.error_in_exec, ZeroDivisionError)
    assert ip.user_ns["z"] == 1  # as in a normal run, the lines before the error ran
    left = {n for n in set(os.listdir(tempfile.gettempdir())) - before if "jaxlab-profile" in n}
    assert left == set()


def test_profile_magic_bad_options_are_usage_errors(ip):
    with pytest.raises(UsageError, match="%%profile"):
        ip.run_cell_magic("profile", "--nonsense", "1")
    with pytest.raises(UsageError, match="not valid Python"):
        ip.run_cell_magic("profile", "", "x = = 1")


def test_a_library_program_optax_step():
    optax = pytest.importorskip("optax")
    params = {"w": jnp.ones((16, 4))}
    opt = optax.adam(1e-2)
    state = opt.init(params)

    @jax.jit
    def update(params, state, x):
        grads = jax.grad(lambda p: ((x @ p["w"]) ** 2).mean())(params)
        updates, state = opt.update(grads, state)
        return optax.apply_updates(params, updates), state

    x = jnp.ones((8, 16))
    update(params, state, x)
    with jaxlab.profile() as p:
        for _ in range(3):
            params, state = update(params, state, x)
        params["w"][0, 0].item()  # planted item
    calls = [s.name for s in p.result.spans if s.kind == "dispatch"]
    assert calls[:3] == ["update"] * 3  # then JAX's own indexing: dynamic_slice, squeeze
    (site,) = p.result.syncs
    assert site.kind == KINDS["item"] and site.lineno == _line_of("# planted item")


def test_a_trace_already_running_is_a_profile_error_and_leaves_nothing(tmp_path):
    from jaxlab.timing.profile import ProfileError

    original = type(jnp.ones(())).__dict__["__float__"]
    jax.profiler.start_trace(str(tmp_path))
    try:
        with pytest.raises(ProfileError, match="stop the other trace"), jaxlab.profile():
            pass
    finally:
        jax.profiler.stop_trace()
    assert type(jnp.ones(())).__dict__["__float__"] is original  # arrays not left hooked
