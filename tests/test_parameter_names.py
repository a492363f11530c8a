"""One call, one set of names (issue 33, point 2): ``def loss(params, x)`` called as
``loss(P, X)`` draws its inputs ``P['W']``, ``P['b']``, ``X`` in ``%jaxpr``,
``%jaxpr --grad``, ``%grad --graph`` and ``%%profile --graph`` alike, each input's tooltip
giving the function's own name for it (``parameter x of loss``), and a jitted function's
box names its ports by its parameters (``params['W']``, ``x``). Before, ``%%profile
--graph`` drew ``params['W']`` and ``x`` where every other view drew ``P['W']`` and ``X``,
and no tooltip said what the function calls an input.
"""

from __future__ import annotations

import re

import pytest

from jaxlab.graph import model as m

SETUP = """
import jax, jax.numpy as jnp
P = {'W': jnp.ones((3, 2)) * 0.1, 'b': jnp.zeros(2)}
X = jnp.ones((4, 3))
def loss(params, x):
    h = jnp.tanh(x @ params['W'] + params['b'])
    return (h ** 2).mean()
jloss = jax.jit(loss)
"""
CALLER = ["P['W']", "P['b']", "X"]
OWN = ["params['W']", "params['b']", "x"]


def _tooltips(graph: m.Graph) -> dict[str, list[str]]:
    """Each input node's tooltip lines, as the static drawing writes them."""
    dot = graph.to_dot()
    found = {}
    for node_id in (f"in{k}" for k in range(len(CALLER))):
        match = re.search(rf'tooltip="([^"]*)" id="node_{node_id}"', dot)
        assert match is not None, node_id
        found[node_id] = [line.replace("&#x27;", "'") for line in match.group(1).split("&#10;")]
    return found


def _named_consistently(graph: m.Graph) -> None:
    assert graph.input_names() == CALLER
    tips = _tooltips(graph)
    for k, (caller, own) in enumerate(zip(CALLER, OWN, strict=True)):
        assert tips[f"in{k}"][0] == caller
        assert f"parameter {own} of loss" in tips[f"in{k}"], tips[f"in{k}"]
    # the explorer's view with every box open says the same
    assert graph.rebuild is not None
    view = graph.rebuild(frozenset(graph.rebuild.explorer.openable()))
    sources = {n.label: n.source for n in view.nodes if n.kind == m.INPUT}
    assert sources == {c: f"parameter {o} of loss" for c, o in zip(CALLER, OWN, strict=True)}


@pytest.fixture
def shell(ip):
    ip.run_cell(SETUP)
    return ip


def test_jaxpr_names_inputs_by_the_call_and_tooltips_by_the_parameter(shell):
    _named_consistently(shell.run_line_magic("jaxpr", "-o --static loss(P, X)"))


def test_jaxpr_grad_names_them_alike(shell):
    graph = shell.run_line_magic("jaxpr", "-o --static --grad loss(P, X)")
    _named_consistently(graph)
    outputs = [n.label for n in graph.nodes if n.kind == m.OUTPUT]
    assert outputs == ["∂loss/∂P['W']", "∂loss/∂P['b']"]


def test_grad_graph_names_them_alike(shell):
    _named_consistently(shell.run_line_magic("grad", "-o --graph --static loss(P, X)").graph)


def test_a_jitted_functions_box_names_its_ports_by_its_parameters(shell):
    graph = shell.run_line_magic("jaxpr", "-o --static jloss(P, X)")
    _named_consistently(graph)
    ports = [n.label for n in graph.nodes if n.kind == m.PORT and n.id.startswith("e0/in")]
    assert ports == OWN


def test_profile_graph_names_them_as_the_cells_call_does(shell):
    cell = "jloss(P, X).block_until_ready()"
    result = shell.run_cell_magic("profile", "-o", cell)
    _named_consistently(result.graph("loss", namespace=shell.user_ns, cell=cell))


def test_profile_graph_from_the_kept_program_renames_what_the_call_names(shell):
    # an argument written as an expression is not read back: the compile log's program
    # is drawn, its inputs renamed where the call names them (P), the rest keep theirs
    shell.run_cell("jl2 = jax.jit(loss)\n_ = jl2(P, X)")
    cell = "jl2(P, X * 1).block_until_ready()"
    result = shell.run_cell_magic("profile", "-o", cell)
    graph = result.graph("loss", namespace=shell.user_ns, cell=cell)
    assert graph.input_names() == ["P['W']", "P['b']", "x"]
    sources = [n.source for n in graph.nodes if n.kind == m.INPUT]
    assert sources == ["parameter params['W'] of loss", "parameter params['b'] of loss", None]


def test_an_argument_named_as_its_parameter_gets_no_tooltip_line(shell):
    shell.run_cell("params, x = P, X")
    graph = shell.run_line_magic("jaxpr", "-o --static loss(params, x)")
    assert graph.input_names() == OWN
    assert [n.source for n in graph.nodes if n.kind == m.INPUT] == [None, None, None]
