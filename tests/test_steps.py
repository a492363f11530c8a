"""grad_steps: the chain rule one equation at a time, checked against JAX itself."""

import html
import itertools
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlab
from jaxlab.steps import GradSteps, StepsError


def _close(a, b):
    return np.allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)


def _local(step):
    """The step's rule applied to its shown operands (the products a pass is made of)."""
    ops = [np.asarray(v) for v in step.operands]
    rules = {
        "mul": lambda: ops[0] * ops[1],
        "add_any": lambda: ops[0] + ops[1],
        "add": lambda: ops[0] + ops[1],
        "sub": lambda: ops[0] - ops[1],
        "div": lambda: ops[0] / ops[1],
        "neg": lambda: -ops[0],
        "sin": lambda: np.sin(ops[0]),
        "cos": lambda: np.cos(ops[0]),
        "tanh": lambda: np.tanh(ops[0]),
        "exp": lambda: np.exp(ops[0]),
        "log": lambda: np.log(ops[0]),
        "dot_general": None,
    }
    return rules.get(step.primitive)


def _check_every_step(s):
    checked = 0
    for step in s.steps:
        rule = _local(step)
        if rule is None:
            continue
        made = step.cotangent_out if step.kind == "backward" else step.values_out
        assert _close(rule(), made[0]), (step.index, step.text)
        checked += 1
    return checked


def neuron(w, b, x):
    return jnp.tanh(jnp.dot(w, x) + b)


def test_neuron_adjoints_equal_jax_grad_and_each_step_is_its_rule():
    w, b, x = jnp.array([0.5, -1.0]), 0.1, jnp.array([1.0, 2.0])
    s = jaxlab.grad_steps(neuron, w, b, x, argnums=(0, 1))
    assert isinstance(s, GradSteps) and s.mode == "reverse"
    gw, gb = jax.grad(neuron, (0, 1))(w, b, x)
    assert _close(s.adjoints["w"], gw) and _close(s.adjoints["b"], gb)
    assert _check_every_step(s) >= 3
    kinds = [st.kind for st in s.steps]
    first_back = kinds.index("backward")
    assert "forward" not in kinds[first_back:]  # forward equations, then backward ones
    assert any("tanh" in st.rule for st in s.steps if st.kind == "forward")


def test_fan_out_adds_both_contributions():
    def f(x):
        return jnp.sin(x) * x

    s = jaxlab.grad_steps(f, 0.5)
    assert _close(s.adjoints["x"], jax.grad(f)(0.5))
    (fan,) = [st for st in s.steps if st.fanout]
    a, b = (float(v) for v in fan.cotangent_in)
    assert _close(a + b, fan.cotangent_out[0])
    assert {round(a, 4), round(b, 4)} == {
        round(float(np.sin(0.5)), 4),
        round(0.5 * float(np.cos(0.5)), 4),
    }
    assert fan.fanout.startswith("x̄ = ") and f"{a:.4g}" in fan.fanout and f"{b:.4g}" in fan.fanout
    assert s.targets["∂f/∂x"] == fan.index
    assert _check_every_step(s) >= 4


def test_sine_rule_is_read_with_cotangent_names():
    def f(x):
        y = jnp.sin(x)
        return y * 2.0

    s = jaxlab.grad_steps(f, 0.3)
    rules = [st.rule for st in s.steps if st.kind == "backward"]
    assert "x̄ = ȳ · cos(x)" in rules, rules
    (step,) = [st for st in s.steps if st.rule == "x̄ = ȳ · cos(x)"]
    assert step.of == "y = sin(x)"
    assert _close(step.cotangent_out[0], 2.0 * np.cos(0.3))


def test_mlp_two_layers():
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    params = {
        "W1": jax.random.normal(k1, (3, 4)),
        "b1": jnp.zeros(4),
        "W2": jax.random.normal(k2, (4, 1)),
    }
    x = jax.random.normal(k3, (5, 3))

    def loss(p, x):
        h = jnp.tanh(x @ p["W1"] + p["b1"])
        return jnp.mean((h @ p["W2"]) ** 2)

    s = jaxlab.grad_steps(loss, params, x)
    want = jax.grad(loss)(params, x)
    for key in want:
        assert _close(s.adjoints[f"p['{key}']"], want[key]), key
    rules = [st.rule for st in s.steps if st.kind == "backward"]
    assert "h̄ = ∂(h @ p['W2']) @ p['W2']ᵀ" in rules, rules  # W̄ = ȳᵀ·x style, names kept
    assert "h = tanh((x @ p['W1']) + v1)" in [st.of for st in s.steps]
    matmuls = [st for st in s.steps if st.kind == "backward" and st.primitive == "dot_general"]
    assert matmuls and any("@" in st.rule for st in matmuls)
    for st in matmuls:  # the shown product is the product of the shown operands
        a, b = (np.asarray(v) for v in st.operands)
        got = jax.lax.dot_general(a, b, _eqn_dims(s, st))
        assert _close(got, st.cotangent_out[0])
    assert s.targets and all(0 <= i < len(s.steps) for i in s.targets.values())


def _eqn_dims(s, st):
    # the dimension numbers of the step's equation, read back from the program drawn
    for eqn in _equations(s.graph.jaxpr.jaxpr):
        if eqn.primitive.name == "dot_general":
            ins = eqn.invars
            shapes = [tuple(v.aval.shape) for v in ins]
            if shapes == [np.shape(v) for v in st.operands]:
                return eqn.params["dimension_numbers"]
    raise AssertionError(st.text)


def _equations(jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        for sub in jax.extend.core.jaxprs_in_params(eqn.params):
            yield from _equations(sub)


def test_scan_and_cond_adjoints():
    def f(x):
        def body(c, _):
            return jnp.sin(c) * 1.5, c

        h, _ = jax.lax.scan(body, x, None, length=4)
        return jax.lax.cond(h > 0, lambda a: a * 2.0, lambda a: -a, h)

    s = jaxlab.grad_steps(f, 0.7)
    assert _close(s.adjoints["x"], jax.grad(f)(0.7))
    # the cond shows its taken branch only: one of the two bodies stepped
    assert any("cond" in " ".join(st.box) or "branch" in " ".join(st.box) for st in s.steps)
    assert not any(st.primitive == "neg" for st in s.steps)  # the branch not taken
    assert any(st.iteration is not None for st in s.steps)  # the scan per iteration


@jax.custom_vjp
def cube(x):
    return x**3


def _cube_fwd(x):
    return x**3, x


def _cube_bwd(x, g):
    return (g * 3 * x**2,)


def _cube_bwd_wrong(x, g):
    return (g * 2 * x**2,)  # planted: 2 for 3


cube.defvjp(_cube_fwd, _cube_bwd)


@jax.custom_vjp
def cube_wrong(x):
    return x**3


cube_wrong.defvjp(_cube_fwd, _cube_bwd_wrong)


def test_custom_vjp_adjoint_and_planted_wrong_rule_shows_where_it_enters():
    def good(x):
        return jnp.sin(cube(x))

    def bad(x):
        return jnp.sin(cube_wrong(x))

    sg, sb = jaxlab.grad_steps(good, 0.8), jaxlab.grad_steps(bad, 0.8)
    assert _close(sg.adjoints["x"], jax.grad(good)(0.8))
    assert _close(sb.adjoints["x"], jax.grad(bad)(0.8))  # JAX's own (wrong) number
    assert not _close(sb.adjoints["x"], sg.adjoints["x"])
    (custom,) = [st for st in sb.steps if st.kind == "backward" and "_cube_bwd_wrong" in st.rule]
    (right,) = [st for st in sg.steps if st.kind == "backward" and "_cube_bwd" in st.rule]
    assert custom.names_out == ["x̄"] and custom.substeps  # the rule's equations inside
    assert _close(custom.cotangent_in[0], right.cotangent_in[0])  # the same arriving
    assert not _close(custom.cotangent_out[0], right.cotangent_out[0])  # differs here
    before = [st for st in sb.steps if st.kind == "backward" and st.index < custom.index]
    twins = [st for st in sg.steps if st.kind == "backward" and st.index < right.index]
    for a, b in zip(before, twins, strict=True):  # every step before it agrees
        assert _close(a.cotangent_out[0], b.cotangent_out[0])


def test_forward_mode_tangents_equal_jax_jvp():
    def f(x, w):
        y = jnp.sin(x * w)
        return y * x

    s = jaxlab.grad_steps(f, 0.5, 1.2, argnums=(0, 1), mode="forward")
    _, want = jax.jvp(lambda x: f(x, 1.2), (0.5,), (1.0,))
    assert s.mode == "forward" and _close(s.tangents["ḟ"], want)
    assert any(st.kind == "tangent" and st.rule.startswith("ẏ = ") for st in s.steps)
    assert s.passes_note == "2 inputs → 2 forward passes, 1 output → 1 reverse pass"
    assert _check_every_step(s) >= 4


def test_frame_is_json_and_every_node_is_in_the_drawing():
    import json
    import shutil

    s = jaxlab.grad_steps(lambda x: jnp.sin(x) * x, 0.5)
    frame = json.loads(json.dumps(s.frame()))
    assert frame["mode"] == "reverse" and frame["current"] == 0
    assert len(frame["steps"]) == len(s.steps) and frame["targets"]
    if shutil.which("dot"):
        for st in frame["steps"]:
            assert (
                f"<title>{st['node']}</title>" in frame["svg"]
                or f'id="{st["node"]}"' in frame["svg"]
            )
    text = s.text()
    assert all(st.text in text for st in s.steps)


def test_bad_input_raises():
    with pytest.raises(StepsError, match="mode"):
        jaxlab.grad_steps(lambda x: x, 1.0, mode="sideways")
    with pytest.raises(StepsError):
        jaxlab.grad_steps(lambda x: x, 1.0, argnums=3)
    with pytest.raises(StepsError, match="floating-point"):
        jaxlab.grad_steps(lambda n: n * 2, 3)
    with pytest.raises(StepsError, match="mode='forward'"):
        jaxlab.grad_steps(lambda x: (x, x), 1.0)


def test_a_program_over_2000_equations_is_stepped_box_by_box():
    def layer(h, w):
        return jnp.tanh(h * w + 0.1)

    def f(x, w):
        h = x
        for _ in range(200):
            h = layer(h, w)
        return jnp.sum(h)

    x, w = jnp.ones(3), jnp.full(3, 0.9)
    s = jaxlab.grad_steps(f, x, w, argnums=(0, 1))
    assert s.n_equations > 2000
    assert _close(s.adjoints["w"], jax.grad(f, 1)(x, w))
    forward = [st for st in s.steps if st.kind == "forward"]
    assert [st.equation for st in forward[:200]] == [f"layer {k}" for k in range(200)]
    assert len(forward) <= 202  # then the sum's line
    assert all(st.substeps for st in s.steps) and len(s.steps) < 300
    assert sum(len(st.substeps) for st in s.steps) > 2000  # every equation inside a box
    assert any("box by box" in n for n in s.notes)
    # The player plays the boxes closed, each opening into its equations' steps.
    frame = s.frame()
    boxes = frame["boxes"]
    assert [b["name"] for b in boxes[:200]] == [f"layer {k}" for k in range(200)]
    assert len(frame["steps"]) == sum(max(1, len(st.substeps)) for st in s.steps)
    assert all(a["last"] < b["first"] for a, b in itertools.pairwise(boxes))
    first = boxes[3]["first"]
    assert [x["text"] for x in frame["steps"][first : boxes[3]["last"] + 1]] == [
        x.text for x in s.steps[3].substeps
    ]
    assert s.frame(current=3)["current"] == first  # a box is played from its first step
    w = frame["targets"]["∂f/∂w"]
    assert frame["steps"][w]["text"].startswith("w̄ = ")
    if shutil.which("dot"):  # each box lights a node of the (budgeted) drawing
        svg = html.unescape(s.svg)
        assert all(f"<title>{st.node}</title>" in svg for st in s.steps)


def test_a_value_used_five_times_gets_five_numbered_contributions():
    def f(x, w):
        h = x
        for _ in range(5):
            h = jnp.tanh(h * w + 0.1)
        return jnp.sum(h)

    s = jaxlab.grad_steps(f, jnp.ones(3), jnp.full(3, 0.9), argnums=1)
    made = [n for st in s.steps for n in st.names_out if n.startswith("w̄")]
    assert {"w̄₁", "w̄₂", "w̄₃", "w̄₄", "w̄₅", "w̄"} <= set(made)
    (last,) = [st for st in s.steps if st.names_out == ["w̄"]]
    assert last.fanout and s.targets["∂f/∂w"] == last.index
    assert _close(last.cotangent_out[0], jax.grad(f, 1)(jnp.ones(3), jnp.full(3, 0.9)))


def test_a_jitted_function_is_a_box_its_equations_stepped_inside():
    @jax.jit
    def inner(x):
        return jnp.tanh(x) * 2.0

    def f(x, w):
        return inner(x * w) ** 2

    s = jaxlab.grad_steps(f, 0.4, 1.5, argnums=(0, 1))
    gx, gw = jax.grad(f, (0, 1))(0.4, 1.5)
    assert _close(s.adjoints["x"], gx) and _close(s.adjoints["w"], gw)
    boxed = [st for st in s.steps if st.box]
    assert {st.kind for st in boxed} == {"forward", "backward"}
    assert all("inner" in " ".join(st.box) for st in boxed)
    assert any(st.primitive == "tanh" for st in boxed)
    assert _check_every_step(s) >= 4


@jax.custom_jvp
def softplus(x):
    return jnp.log1p(jnp.exp(x))


@softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return softplus(x), t * jax.nn.sigmoid(x)


def test_custom_jvp_is_one_backward_step_naming_the_rule():
    def f(x):
        return jnp.sin(softplus(x))

    s = jaxlab.grad_steps(f, 0.3)
    assert _close(s.adjoints["x"], jax.grad(f)(0.3))
    (rule,) = [st for st in s.steps if "_softplus_jvp" in st.rule]
    assert rule.kind == "backward" and rule.names_out == ["x̄"]
    assert _close(rule.cotangent_out[0], np.cos(np.log1p(np.exp(0.3))) / (1 + np.exp(-0.3)))


def test_forward_mode_on_a_pytree_seeds_every_leaf_of_the_first_argument():
    params = {"W": jnp.array([[0.5, -0.2], [0.1, 0.3]]), "b": jnp.array([0.1, -0.1])}
    x = jnp.array([1.0, 2.0])

    def loss(p, x):
        return jnp.sum(jnp.tanh(p["W"] @ x + p["b"]) ** 2)

    s = jaxlab.grad_steps(loss, params, x, mode="forward")
    ones = jax.tree_util.tree_map(jnp.ones_like, params)
    _, want = jax.jvp(lambda p: loss(p, x), (params,), (ones,))
    assert list(s.tangents) == ["dloss"] and _close(s.tangents["dloss"], want)
    assert s.steps[-1].kind == "tangent" and s.targets
    assert _check_every_step(s) >= 3


def test_passes_note_counts_numbers_in_and_out():
    s = jaxlab.grad_steps(lambda w, x: jnp.sum(jnp.tanh(w @ x)), jnp.ones((2, 3)), jnp.ones(3))
    assert s.passes_note == "6 inputs → 6 forward passes, 1 output → 1 reverse pass"
    f = jaxlab.grad_steps(lambda x: jnp.sin(x) * 2.0, jnp.ones(4), mode="forward")
    assert f.passes_note == "4 inputs → 4 forward passes, 4 outputs → 4 reverse passes"


def test_forward_mode_steps_a_scan_per_iteration():
    def f(x):
        def body(c, _):
            return jnp.sin(c) * 1.5, c

        h, _ = jax.lax.scan(body, x, None, length=3)
        return h

    s = jaxlab.grad_steps(f, 0.7, mode="forward")
    assert _close(s.tangents["ḟ"], jax.jvp(f, (0.7,), (1.0,))[1])
    rows = [st for st in s.steps if st.iteration is not None and st.primitive == "sin"]
    assert [st.iteration for st in rows] == [0, 1, 2]
    assert _close(rows[1].values_in[0], np.sin(0.7) * 1.5)  # the carry of iteration 1
    assert _check_every_step(s) >= 6


# ---------------------------------------------------------------- boxes, branches, loops


@jax.jit
def _inner(x):
    return jnp.tanh(x) * 2.0


def _scoped(x, w):
    with jax.named_scope("scaled"):
        z = x * w + 1.0
    return _inner(z) ** 2


def test_a_jit_and_a_named_scope_are_boxes_a_player_closes_into_one_step():
    s = jaxlab.grad_steps(_scoped, 0.4, 1.5, argnums=(0, 1))
    gx, gw = jax.grad(_scoped, (0, 1))(0.4, 1.5)
    assert _close(s.adjoints["x"], gx) and _close(s.adjoints["w"], gw)
    runs = {(name, s.steps[a].kind): (a, b) for name, a, b in s.boxes}
    # both passes: the scope's forward equations and their transposes, the jit's too
    assert set(runs) == {
        ("scope scaled", "forward"),
        ("scope scaled", "backward"),
        ("jit _inner", "forward"),
        ("jit _inner", "backward"),
    }
    for (name, kind), (a, b) in runs.items():
        inside = s.steps[a : b + 1]
        assert b > a and all(st.box[0] == name and st.kind == kind for st in inside)
        outside = [st for st in (s.steps[a - 1 : a] + s.steps[b + 1 : b + 2])]
        assert all(st.box[:1] != [name] or st.kind != kind for st in outside)
    a, b = runs[("jit _inner", "forward")]
    inside = [st.primitive for st in s.steps[a : b + 1]]  # tanh, 1 - tanh² (as JAX has it), ·2
    assert len(inside) == 3 and inside[0] == "tanh" and inside[-1] == "mul"
    a, b = runs[("scope scaled", "backward")]
    assert {st.names_out[0] for st in s.steps[a : b + 1]} == {"x̄", "w̄"}
    frame = s.frame()
    assert [(x["name"], x["first"], x["last"]) for x in frame["boxes"]] == s.boxes


def test_cond_steps_the_branch_taken_either_way():
    def f(x):
        return jax.lax.cond(x > 0, lambda a: a * 2.0, lambda a: -jnp.sin(a) * 3.0, x)

    for x, taken, not_taken in ((0.7, "true", "neg"), (-0.7, "false", "integer_pow")):
        s = jaxlab.grad_steps(f, x)
        assert _close(s.adjoints["x"], jax.grad(f)(x))
        branch = [st for st in s.steps if st.box[:1] == ["cond (2 branches)"]]
        assert branch and {st.box[1] for st in branch} == {taken}, x
        assert not any(st.primitive == not_taken for st in s.steps), x
        # inside the transposed branch only its last step makes x̄, the rest temporaries
        back = [st for st in branch if st.kind == "backward"]
        assert [st.names_out for st in back][-1] == ["x̄"], [st.text for st in back]
        assert all(st.names_out != ["x̄"] for st in back[:-1]), [st.text for st in back]
        assert s.targets["∂f/∂x"] == back[-1].index
        assert _close(back[-1].cotangent_out[0], jax.grad(f)(x))
        if taken == "false":
            assert any(st.primitive == "sin" for st in branch)
        else:
            assert not any(st.primitive == "sin" for st in s.steps)


def _long_scan(x):
    def body(c, _):
        return jnp.sin(c) * 1.1, c

    h, _ = jax.lax.scan(body, x, None, length=12)
    return h


def _carry(x, n):
    for _ in range(n):
        x = np.sin(x) * np.float32(1.1)
    return x


def test_a_long_scan_steps_five_iterations_then_the_one_chosen():
    s = jaxlab.grad_steps(_long_scan, 0.7)
    assert _close(s.adjoints["x"], jax.grad(_long_scan)(0.7))
    forward = [st.iteration for st in s.steps if st.kind == "forward" and st.primitive == "sin"]
    backward = [
        st.iteration for st in s.steps if st.kind == "backward" and st.iteration is not None
    ]
    assert forward == [0, 1, 2, 3, 4]
    assert list(dict.fromkeys(backward)) == [11, 10, 9, 8, 7]  # the reverse scan's order
    assert [loop["length"] for loop in s.loops] == [12, 12] and s.again is not None
    assert any("5 of 12 iterations stepped" in n for n in s.notes)
    chosen = s.again(9)  # the player's control: iteration 9 alone, both passes
    assert {st.iteration for st in chosen.steps} == {9, None}
    assert [loop["shown"] for loop in chosen.loops] == [[9], [9]]
    assert _close(chosen.adjoints["x"], s.adjoints["x"])
    (sin,) = [st for st in chosen.steps if st.primitive == "sin"]
    assert _close(sin.values_in[0], _carry(np.float32(0.7), 9))  # the carry entering 9
    # the cotangent arriving at iteration 9: ∂h/∂(carry leaving iteration 9)
    (arrive,) = [st for st in chosen.steps if st.kind == "backward" and st.iteration == 9][:1]
    after = jax.grad(lambda c: _long_scan_from(c, 2))(_carry(np.float32(0.7), 10))
    assert _close(arrive.cotangent_in[0], after)
    assert chosen.frame()["loops"] == chosen.loops
    assert jaxlab.grad_steps(_long_scan, 0.7, iteration=99).loops[0]["shown"] == [11]


def _long_scan_from(c, n):
    for _ in range(n):
        c = jnp.sin(c) * 1.1
    return c


def test_forward_mode_chosen_iteration_and_its_target():
    s = jaxlab.grad_steps(_long_scan, 0.7, mode="forward", iteration=3)
    _, want = jax.jvp(_long_scan, (0.7,), (1.0,))
    ((out, tangent),) = s.tangents.items()
    assert _close(tangent, want) and [x["shown"] for x in s.loops] == [[3]]
    assert {st.iteration for st in s.steps} == {3, None}
    for walk in (s, jaxlab.grad_steps(_long_scan, 0.7, mode="forward")):  # 1 and 5 shown
        target = walk.steps[walk.targets[out]]  # the record that makes the output's tangent
        assert any(_close(v, want) for v in target.values_out), target.text
    assert jaxlab.grad_steps(lambda x: jnp.sin(x), 0.3).again is None  # nothing to choose
