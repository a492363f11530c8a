"""jaxlab.explore and %explore (issue 35): controls, one compilation, derivatives checked
against finite differences in float64 and analytic results, sweeps, fits, coalesced
moves, failures that keep the picture, bad input refused."""

from __future__ import annotations

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from IPython.core.error import UsageError

import jaxlab
from jaxlab.explore import ExploreError, explore


def period(theta0=0.3, g=9.81, length=1.0):
    """A pendulum's period with the first large-angle correction."""
    return 2 * jnp.pi * jnp.sqrt(length / g) * (1 + theta0**2 / 16)


def small_angle_period(g, length):
    return 2 * jnp.pi * jnp.sqrt(length / g)


def projectile_range(v, theta, g=9.81):
    return v**2 * jnp.sin(2 * theta) / g


def central_difference(view, name, h=1e-6):
    """d output / d name at the view's values, by central differences in float64."""
    values = dict(view.values)
    with jax.enable_x64(True):

        def at(x):
            kw = {k: (jnp.float64(v) if isinstance(v, float) else v) for k, v in values.items()}
            kw[name] = jnp.float64(x)
            return float(view.layout.fn(**kw))

        x = float(values[name])
        return (at(x + h) - at(x - h)) / (2 * h)


def sensitivities_match_differences(view, rtol=1e-3):
    """The check a test runs: every slider's sensitivity against central differences."""
    return all(
        math.isclose(float(view.sensitivity[c]), central_difference(view, c), rel_tol=rtol)
        for c in view.values
        if view.layout.control(c).kind == "float"
    )


# --------------------------------------------------------------------------- derivatives


def test_sensitivities_match_central_differences_in_float64():
    view = explore(period, theta0=0.3, g=(1.0, 20.0), length=1.0)
    assert sensitivities_match_differences(view)
    view.set(g=3.0, theta0=0.8)
    assert sensitivities_match_differences(view)


def test_a_planted_wrong_sensitivity_fails_the_check():
    @jax.custom_jvp
    def sqrt(x):
        return jnp.sqrt(x)

    @sqrt.defjvp
    def sqrt_jvp(primals, tangents):  # wrong: the true rule is t / (2 sqrt x)
        (x,), (t,) = primals, tangents
        return jnp.sqrt(x), t / jnp.sqrt(x)

    def bad_period(g=9.81, length=1.0):
        return 2 * jnp.pi * sqrt(length / g)

    view = explore(bad_period, g=(1.0, 20.0), length=1.0)
    assert not sensitivities_match_differences(view)


def test_pendulum_sensitivity_is_the_analytic_one():
    view = explore(small_angle_period, g=(1.0, 20.0), length=2.0)
    view.set(g=9.81)
    t = 2 * math.pi * math.sqrt(2.0 / 9.81)
    assert float(view.output) == pytest.approx(t, rel=1e-5)
    assert float(view.sensitivity["g"]) == pytest.approx(-t / (2 * 9.81), rel=1e-4)
    assert float(view.sensitivity["length"]) == pytest.approx(t / (2 * 2.0), rel=1e-4)
    frame = view.frame()
    assert frame["moved"] == "g"
    assert frame["derivative_words"].startswith("d small_angle_period / d g = -0.1")
    bar = {b["name"]: b for b in frame["bar"]}
    assert bar["g"]["scaled"] == pytest.approx(-t / (2 * 9.81) * 19.0, rel=1e-4)
    assert frame["panels"][0]["tangent"] == pytest.approx(-t / (2 * 9.81), rel=1e-4)


def test_projectile_range_sensitivities_are_analytic():
    view = explore(projectile_range, v=(1.0, 50.0), theta=(0.0, 1.5))
    view.set(v=20.0, theta=0.4)
    g = 9.81
    assert float(view.sensitivity["v"]) == pytest.approx(2 * 20.0 * math.sin(0.8) / g, rel=1e-4)
    assert float(view.sensitivity["theta"]) == pytest.approx(
        2 * 400.0 * math.cos(0.8) / g, rel=1e-4
    )
    assert sensitivities_match_differences(view)
    # g has a float default: a slider too, with a range chosen around it, said so
    g_control = view.layout.control("g")
    assert g_control.kind == "float" and "range chosen around 9.81" in g_control.range_note


# --------------------------------------------------------------------------- compiled once


def test_a_thousand_moves_compile_once():
    compiles = []

    def listen(event, duration, **kwargs):
        if event == "/jax/compilation_cache/compile_requests_use_cache" or event.endswith(
            "backend_compile_duration"
        ):
            compiles.append(event)

    jax.monitoring.register_event_duration_secs_listener(listen)
    view = explore(period, theta0=0.3, g=(1.0, 20.0), length=1.0)
    seen = len(compiles)
    for i in range(1000):
        view.move(("g", "theta0", "length")[i % 3], 1.0 + (i % 97) * 0.01, seq=i)
    assert view.compiles == 1 and view.compiles_by == {"evaluate": 1}
    assert len(compiles) == seen  # JAX's own events: no XLA compilation during the moves
    assert seen >= 1
    assert view.frame()["seq"] == 999


def test_static_int_recompiles_and_says_so():
    def series(x=0.5, n=3):
        return sum(x**k for k in range(n))

    view = explore(series, x=0.5, n=3)
    assert view.layout.control("n").kind == "static"
    view.set(n=5)
    assert view.compiles == 2
    assert float(view.output) == pytest.approx(sum(0.5**k for k in range(5)), rel=1e-6)
    assert any("n = 5 (was 3): compiled again" in n for n in view.frame()["notes"])
    view.set(n=3)  # seen before: JAX's cache, no new compilation
    assert view.compiles == 2
    assert any("compiled before, reused" in n for n in view.frame()["notes"])
    with pytest.raises(ExploreError, match="static"):
        view.set(n=2.5)


# --------------------------------------------------------------------------- coalescing


def test_two_hundred_moves_end_on_the_last_value_within_one_computation():
    # 199 moves arrive while the first computes: one more computation, on the latest
    view = explore(period, theta0=0.3, g=(1.0, 20.0), length=1.0)
    first = [True]

    def burst(frame):
        if first[0]:
            first[0] = False
            for i in range(1, 200):
                view.move("g", 1.0 + i * 0.05, seq=i)

    view.subscribe(burst)
    before = view.computations
    view.move("g", 1.0, seq=0)
    assert view.computations - before == 2  # the first move, then the latest of 199
    assert view.frame()["seq"] == 199 and view.values["g"] == pytest.approx(10.95)


# --------------------------------------------------------------------------- failures


def test_nan_keeps_the_last_good_answer_and_flags_the_slider():
    def fall_time(h=1.0, g=9.81):
        return jnp.sqrt(2 * h / g - 0.1)

    view = explore(fall_time, h=(0.0, 2.0), g=9.81)
    view.set(h=1.0)
    good = float(view.output)
    good_panels = view.frame()["panels"]
    view.set(h=0.1)  # 0.2/9.81 - 0.1 < 0: sqrt of a negative
    assert float(view.output) == good
    frame = view.frame()
    assert frame["panels"] == good_panels
    assert frame["error"]["param"] == "h"
    assert "NaN" in frame["error"]["message"] and "h = 0.1" in frame["error"]["message"]
    assert "sqrt" in frame["error"]["where"] and "test_explore.py" in frame["error"]["where"]
    assert "NaN here" in view.layout.control("h").flag
    view.set(h=1.5)
    assert view.frame()["error"] is None and view.layout.control("h").flag is None
    assert view.compiles == 1


def test_integer_output_has_no_derivative_and_says_why():
    def count(x=0.5):
        return jnp.floor(x * 10).astype(jnp.int32), x * 2

    view = explore(count, x=0.5)
    frame = view.frame()
    assert frame["panels"][0]["kind"] == "text"
    assert "no derivative" in frame["panels"][0]["note"]
    assert frame["panels"][1]["kind"] == "scalar" and frame["panels"][1]["tangent"] == 2.0
    assert view.sensitivity["x"][0] is None
    assert float(view.sensitivity["x"][1]) == 2.0


def test_untraceable_function_raises_the_users_error():
    def branchy(x=0.5):
        if x > 0:
            return x
        return -x

    with pytest.raises(jax.errors.TracerBoolConversionError) as info:
        explore(branchy, x=0.5)
    assert jaxlab.explain(info.value) is not None


# --------------------------------------------------------------------------- bad input


def test_bad_input_is_refused_with_the_fix():
    with pytest.raises(ExploreError, match="has no argument `gg`: its arguments are"):
        explore(period, gg=1.0)
    with pytest.raises(ExploreError, match="not a range"):
        explore(period, g=(20.0, 1.0))
    with pytest.raises(ExploreError, match="log range needs lo > 0"):
        explore(period, g=(0.0, 1.0, "log"))
    with pytest.raises(ExploreError, match="takes a function"):
        explore(3.0, g=1.0)
    view = explore(period)
    with pytest.raises(ExploreError, match="no control named `q`"):
        view.set(q=1.0)
    with pytest.raises(ExploreError, match="give a number"):
        view.set(g="fast")


def test_magic_explores_and_leaves_the_namespace_unchanged_on_failure(ip):
    ip.user_ns["period"] = period
    view = ip.run_line_magic("explore", "-o period(theta0=0.3, g=(1.0, 20.0), length=1.0)")
    assert view.values == {"theta0": 0.3, "g": 9.81, "length": 1.0}
    assert view.layout.control("g").range_note.startswith("range given (1 .. 20)")
    before = dict(ip.user_ns)
    for line, words in [
        ("period(gg=1.0)", "does not fit"),
        ("period(g=(5.0, 1.0))", "not a range"),
        ("missing(g=1.0)", "define it"),
        ("--x nowhere period(g=1.0)", "--x"),
        ("", "give a call"),
    ]:
        with pytest.raises(UsageError, match=words):
            ip.run_line_magic("explore", line)
        assert ip.user_ns.keys() == before.keys()


def test_magic_says_why_an_untraceable_function_fails(ip):
    ip.run_cell("def branchy(x=0.5):\n    if x > 0:\n        return x\n    return -x\n")
    with pytest.raises(UsageError, match="if x > 0") as info:
        ip.run_line_magic("explore", "branchy(x=0.5)")
    assert "jnp.where" in str(info.value)


# --------------------------------------------------------------------------- panels, sweep, fit


def test_each_output_kind_has_its_panel_and_the_frame_is_json():
    ts = jnp.linspace(0.0, 1.0, 50)

    def several(k=1.0, flag=True):
        wave = jnp.sin(k * ts)
        orbit = jnp.stack([jnp.cos(k * ts), jnp.sin(k * ts)], axis=1)
        field = jnp.outer(wave, wave) * (2.0 if flag else 1.0)
        return {"energy": k**2, "wave": wave, "orbit": orbit, "field": field}

    view = explore(several, x=ts, k=(0.5, 3.0), flag=True)
    frame = json.loads(json.dumps(view.frame()))  # plain JSON, no numpy
    kinds = {p["path"]: p["kind"] for p in frame["panels"]}
    assert kinds == {
        "['energy']": "scalar",
        "['field']": "heatmap",
        "['orbit']": "path",
        "['wave']": "line",
    }
    wave = next(p for p in frame["panels"] if p["path"] == "['wave']")
    assert wave["x"][-1] == pytest.approx(1.0) and len(wave["tangent"]) == 50
    assert wave["tangent"][-1] == pytest.approx(math.cos(1.0), rel=1e-4)  # d sin(k t)/dk, t=1
    field = next(p for p in frame["panels"] if p["path"] == "['field']")
    assert field["png"].startswith("data:image/png;base64,") and field["sens_png"]
    # the colour bar: the arrays' colours from the top (hi) to the bottom (lo) of the map
    import base64
    import zlib

    bar = base64.b64decode(field["bar_png"].split(",", 1)[1])
    width, height = int.from_bytes(bar[16:20], "big"), int.from_bytes(bar[20:24], "big")
    assert (width, height) == (1, 64)
    idat = bar[bar.index(b"IDAT") + 4 :]
    rows = zlib.decompress(idat[: int.from_bytes(bar[bar.index(b"IDAT") - 4 :][:4], "big")])
    top, bottom = rows[1:4], rows[-3:]  # each row: a filter byte, then one RGB cell
    from jaxlab.arrays.png import VIRIDIS

    assert list(top) == list(VIRIDIS[-1].astype(int)) and list(bottom) == list(VIRIDIS[0])
    assert field["lo"] < field["hi"] and field["sens_lo"] == -field["sens_hi"]
    assert view.layout.control("flag").kind == "bool"
    view.set(flag=False)
    assert view.compiles_by["evaluate"] == 2
    assert frame["derivative_words"].startswith("d several['energy'] / d k = ")


def test_sweep_is_one_vmapped_call_with_slopes_and_compiles_once():
    view = explore(small_angle_period, g=(1.0, 20.0), length=1.0)
    s = view.sweep("g", n=64)
    assert s.values.shape == (64,) and s.outputs.shape == (64,)
    expected = 2 * np.pi * np.sqrt(1.0 / s.values)
    np.testing.assert_allclose(s.outputs, expected, rtol=1e-5)
    np.testing.assert_allclose(s.slopes, -expected / (2 * s.values), rtol=1e-4)
    view.sweep("g", n=64)
    view.sweep("length", n=64)
    assert view.compiles_by == {"evaluate": 1, "sweep": 1}
    panel = view.frame()["panels"][0]
    assert panel["sweep"]["param"] == "length" and len(panel["sweep"]["xs"]) == 64


def test_fit_moves_the_sliders_toward_the_target_and_stop_keeps_them():
    ts = jnp.linspace(0.0, 2.0, 40)

    def decay(rate=1.0, amplitude=1.0):
        return amplitude * jnp.exp(-rate * ts)

    data = decay(2.5, 1.5)
    view = explore(decay, target=data, rate=(0.1, 5.0), amplitude=(0.1, 3.0))
    state = view.fit(steps=400, learning_rate=0.05)
    assert state.ended in ("steps done", "converged") and not state.running
    assert state.losses[-1] < state.losses[0] / 100
    assert view.values["rate"] == pytest.approx(2.5, rel=0.05)
    assert view.values["amplitude"] == pytest.approx(1.5, rel=0.05)
    assert view.compiles_by["fit"] == 1

    view.set(rate=0.5, amplitude=0.5)
    steps = []

    def stop_after_three(frame):
        if frame["fit"] and frame["fit"]["running"]:
            steps.append(frame["fit"]["step"])
            if frame["fit"]["step"] == 3:
                view.stop()

    view.subscribe(stop_after_three)
    reached = None
    state = view.fit(steps=400, learning_rate=0.05)
    reached = dict(view.values)
    assert state.ended == "stopped" and state.step == 3
    assert reached["rate"] != 0.5 and view.values == reached
    assert view.compiles_by["fit"] == 1


def test_fit_without_optax_takes_optax_adams_steps(monkeypatch):
    """optax is no dependency of jaxlab (Binder has none): the fit's own Adam takes the
    steps optax.adam takes, and the fit works in a kernel without optax."""
    pytest.importorskip("optax")
    import sys

    ts = jnp.linspace(0.0, 2.0, 40)

    def decay(rate=1.0, amplitude=1.0):
        return amplitude * jnp.exp(-rate * ts)

    def fitted():
        view = explore(decay, target=decay(2.5, 1.5), rate=(0.1, 5.0), amplitude=(0.1, 3.0))
        state = view.fit(steps=60, learning_rate=0.05)
        return np.asarray(state.losses), view.values

    with_optax, values = fitted()
    monkeypatch.setitem(sys.modules, "optax", None)  # `import optax` raises ImportError
    from jaxlab.explore.fit import Adam, adam

    assert isinstance(adam(0.05), Adam)
    without, values_without = fitted()
    np.testing.assert_allclose(without, with_optax, rtol=1e-4)
    assert values_without == pytest.approx(values, rel=1e-4)
    assert without[-1] < without[0] / 10


def test_fit_interrupted_keeps_the_values_reached():
    def line(a=1.0):
        return a * 2.0

    view = explore(line, target=jnp.asarray(5.0), a=(0.0, 4.0))

    def interrupt(frame):
        if frame["fit"] and frame["fit"]["running"] and frame["fit"]["step"] == 2:
            raise KeyboardInterrupt

    view.subscribe(interrupt)
    state = view.fit(steps=50)
    assert state.ended == "interrupted" and not state.running and state.step == 2
    assert view.values["a"] != 2.0


def test_leaves_make_a_pytrees_float_leaves_sliders():
    def energy(params, x):
        return params["k"] * jnp.sum(x**2) / 2 + params["shift"]

    x = jnp.arange(4.0)
    view = explore(energy, {"k": 2.0, "shift": 0.5}, x, leaves=True)
    names = {c.name: c.kind for c in view.layout.controls}
    assert names == {"params['k']": "float", "params['shift']": "float", "x": "fixed"}
    view.set(**{"params['k']": 3.0})
    assert float(view.output) == pytest.approx(3.0 * 14 / 2 + 0.5)
    assert float(view.sensitivity["params['k']"]) == pytest.approx(7.0)
    assert "held fixed: x (f32[4])" in view.frame()["notes"]


def random_walk(sigma, drift, key):
    """A stochastic model with its noise fixed by a key: where a 100-step walk ends."""
    return jnp.sum(drift + sigma * jax.random.normal(key, (100,)))


def test_a_key_argument_is_held_fixed_and_the_noise_is_the_keys():
    key = jax.random.key(7)
    view = explore(random_walk, 1.0, 0.1, key)
    controls = {c.name: (c.kind, c.described) for c in view.layout.controls}
    assert controls["key"] == ("fixed", "key<fry>[]")
    assert (controls["sigma"][0], controls["drift"][0]) == ("float", "float")
    view.set(sigma=0.5, drift=0.2)
    noise = float(jnp.sum(jax.random.normal(key, (100,))))  # JAX's own draw, same key
    assert float(view.output) == pytest.approx(100 * 0.2 + 0.5 * noise, rel=1e-5)
    assert float(view.sensitivity["sigma"]) == pytest.approx(noise, rel=1e-4)
    assert float(view.sensitivity["drift"]) == pytest.approx(100.0, rel=1e-5)


def test_exploring_with_keys_tracked_draws_nothing_in_the_users_name(fresh_lineage):
    """The explorer's program calls the function several times (value, tangent,
    Jacobian): none of that is the user's draw, nor a reuse of theirs."""
    import warnings

    from jaxlab import JaxlabWarning, track_keys
    from jaxlab.keys.track import warn_pending

    track_keys()
    key = jax.random.key(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", JaxlabWarning)
        view = explore(random_walk, 1.0, 0.1, key)
        for sigma in (0.5, 0.8, 1.3):
            view.move("sigma", sigma)
        view.sweep("drift", 8)
        warn_pending()
    assert [e.op for e in fresh_lineage.events] == ["key"]
    random_walk(1.0, 0.1, key)  # the user's own first draw from it
    assert [e.op for e in fresh_lineage.events] == ["key", "normal"]
    assert fresh_lineage.reuses == ()


def test_magic_displays_the_explorer_and_takes_its_options(ip):
    from IPython.utils.capture import capture_output

    ip.user_ns.update(period=period, ts=jnp.linspace(0.0, 1.0, 5))
    with capture_output() as captured:
        assert ip.run_line_magic("explore", "period(g=(1.0, 20.0))") is None
    shown = [o.data for o in captured.outputs]
    assert any(
        "application/vnd.jupyter.widget-view+json" in d or "Exploration" in str(d) for d in shown
    )
    ip.run_cell("def energy(params):\n    return params['k'] ** 2\n")
    ip.user_ns["params"] = {"k": 2.0}
    view = ip.run_line_magic("explore", "--leaves -o energy(params)")
    assert view.values == {"params['k']": 2.0}
    assert float(view.sensitivity["params['k']"]) == pytest.approx(4.0)
    ip.user_ns["curve"] = lambda k=1.0: k * ip.user_ns["ts"]
    view = ip.run_line_magic("explore", "--x ts -o curve(k=2.0)")
    assert view.frame()["panels"][0]["x"][-1] == pytest.approx(1.0)


def test_a_move_that_raises_keeps_the_picture_and_names_the_users_line():
    def tiled(scale=1.0, n=3):
        if n < 1:
            raise ValueError("n must be at least 1")
        return scale * jnp.ones(n)

    view = explore(tiled, scale=1.0, n=3)
    good = view.frame()["panels"]
    view.set(n=0)
    frame = view.frame()
    assert frame["panels"] == good and float(view.output.sum()) == 3.0
    assert frame["error"]["message"].startswith("ValueError: n must be at least 1")
    assert "raise ValueError" in frame["error"]["where"]
    view.set(n=4)
    assert view.frame()["error"] is None and view.output.shape == (4,)


def test_explores_compilations_are_jaxlabs_not_the_users(ip):
    ip.user_ns["period"] = period
    log = jaxlab.compile_log()
    before, ours = len(log.events), log.jaxlab_count
    view = ip.run_line_magic("explore", "-o period(g=(1.0, 20.0))")
    view.set(g=4.0)
    view.sweep("g", n=8)
    assert [e.fun_name for e in log.events[before:]] == []  # nothing logged as the user's
    assert log.jaxlab_count >= ours + 2  # counted as jaxlab's own
    assert view.compiles == 2


def test_a_range_starts_at_the_functions_default_else_its_middle_and_a_bool_is_a_checkbox():
    def signed_area(a, b=1.0, c=1.0, positive=True):
        return a * b * c if positive else -a * b * c

    view = explore(signed_area, a=(0.0, 10.0), b=(0.0, 4.0), c=(2.0, 4.0))
    a, b, c = (view.layout.control(n) for n in "abc")
    assert view.values == {"a": 5.0, "b": 1.0, "c": 3.0, "positive": True}
    assert "starts at the middle" in a.range_note  # no default
    assert "starts at the function's default" in b.range_note
    assert "starts at the middle" in c.range_note  # its default is outside the range
    control = view.layout.control("positive")
    assert control.kind == "bool" and "checkbox" in control.range_note
    assert float(view.output) == pytest.approx(15.0)
    view.set(positive=False)  # a checkbox: its setting is static, compiled once each
    assert float(view.output) == pytest.approx(-15.0)
    assert float(view.sensitivity["a"]) == pytest.approx(-3.0)
    assert view.compiles == 2
    view.set(positive=True)
    assert view.compiles == 2
    with pytest.raises(ExploreError, match="checkbox"):
        view.set(positive=1)


def test_a_log_range_starts_in_its_geometric_middle_and_sweeps_evenly_in_log():
    view = explore(small_angle_period, g=(0.1, 10.0, "log"), length=1.0)
    g = view.layout.control("g")
    assert g.scale == "log" and view.values["g"] == pytest.approx(1.0)
    assert g.step == pytest.approx(2.0 / 1000)
    s = view.sweep("g", n=5)
    np.testing.assert_allclose(s.values, [0.1, 10**-0.5, 1.0, 10**0.5, 10.0], rtol=1e-6)
    bar = {b["name"]: b for b in view.frame()["bar"]}
    # per unit of ln g over the range's ln(100): g dT/dg ln(100) = -T/2 ln(100)
    t = 2 * math.pi
    assert bar["g"]["scaled"] == pytest.approx(-t / 2 * math.log(100.0), rel=1e-4)


def test_moves_from_another_thread_while_one_computes_are_coalesced():
    import threading

    view = explore(period, theta0=0.3, g=(1.0, 20.0), length=1.0)
    busy, release = threading.Event(), threading.Event()
    armed = [True]

    def hold(frame):  # the runner is busy (drawing) until the other moves have arrived
        if armed[0]:
            armed[0] = False
            busy.set()
            release.wait(30)  # a safety net only: the test releases it itself

    view.subscribe(hold)
    before = view.computations
    runner = threading.Thread(target=view.move, args=("g", 1.0, 0))
    runner.start()
    assert busy.wait(30)
    coalesced = [view.move("g", 1.0 + i * 0.05, seq=i) for i in range(1, 200)]
    release.set()
    runner.join(30)
    assert coalesced == [None] * 199  # each only noted: the busy runner takes the latest
    assert view.computations - before == 2
    assert view.frame()["seq"] == 199 and view.values["g"] == pytest.approx(10.95)
    assert float(view.output) == pytest.approx(float(period(0.3, 10.95, 1.0)), rel=1e-6)


def test_a_static_change_that_cannot_be_traced_keeps_the_picture_with_the_fix():
    def stepper(x=0.5, mode="smooth"):
        if mode == "sharp" and x > 0:  # a Python branch on a traced slider
            return x
        return jnp.tanh(x)

    view = explore(stepper, x=0.5, mode="smooth")
    good = float(view.output)
    view.set(mode="sharp")
    error = view.frame()["error"]
    assert float(view.output) == good
    assert "TracerBoolConversionError" in error["message"] and "x > 0" in error["where"]
    assert "jnp.where" in error["fix"] or "lax.cond" in error["fix"]
