"""What the GraphExplorer's speed-ups keep as it was (issue 37): the kept ``dot`` lays out
as a dot of its own does and says a refused graph's error the same way; the collector is
back on after a view; equation counts and loops counted once by the walk are the
program's."""

from __future__ import annotations

import gc
import shutil
import subprocess
from collections import Counter

import jax
import jax.numpy as jnp
import pytest

from jaxlab.graph.walk import Item, count_primitives, walk
from jaxlab.session.collector import collector_paused

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is missing")


def _graphs(n: int) -> list[str]:
    from jaxlab.widgets.graph_dot import dot_text

    found = []
    for k in range(n):
        names = [f"a{j}" for j in range(3 + k % 5)]
        sizes = {v: (60.0 + 7 * j, 30.0) for j, v in enumerate(names)}
        edges = [(names[j], names[j + 1], "") for j in range(len(names) - 1)]
        found.append(dot_text(names, sizes, edges, [], rankdir="LR" if k % 2 else "TB"))
    return found


@needs_dot
def test_the_kept_dot_lays_out_as_a_dot_of_its_own():
    from jaxlab.widgets.graph_dot import _LAYOUT_ARGS, parse_plain, run_dot

    texts = _graphs(400)  # more output than a pipe holds: read while it is written
    own = subprocess.run(
        [shutil.which("dot"), "-Tplain", *_LAYOUT_ARGS],
        input="".join(texts).encode(),
        capture_output=True,
        check=True,
    )
    expected = parse_plain(own.stdout.decode(), len(texts))
    assert run_dot(texts) == expected
    assert run_dot(texts[:3]) == expected[:3]  # the same dot again, from its next graph


@needs_dot
def test_a_graph_dot_refuses_is_said_and_the_next_is_laid_out():
    from jaxlab.widgets.graph_dot import run_dot

    with pytest.raises(RuntimeError, match="dot could not lay out the graph"):
        run_dot(["digraph g { n0 -> ; }\n"])
    (laid,) = run_dot(_graphs(1))
    assert set(laid["nodes"]) == {"0", "1", "2"}


def test_the_collector_is_back_as_it_was_after_a_view():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
        with collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner pause does not end the outer one
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # the user's own choice kept
    finally:
        gc.enable()
    with pytest.raises(ValueError), collector_paused():
        raise ValueError
    assert gc.isenabled()


def _counts(item: Item) -> Counter[str]:
    """Each item's primitives, nested ones after it, as walk counted them before."""
    counts: Counter[str] = Counter([item.primitive])
    for block in item.blocks:
        for inner in block.items:
            counts.update(_counts(inner))
    return counts


def test_counts_and_loops_made_by_the_walk_are_the_programs():
    def inner(x):
        return jax.lax.cond(x.sum() > 0, jnp.sin, jnp.cos, x) * 2

    def f(x):
        def body(c, _):
            return jax.jit(inner)(c) + 1, None

        y, _ = jax.lax.scan(body, x, None, length=3)
        z = jax.lax.while_loop(lambda v: v.sum() < 10, lambda v: v + 1, y)
        return jnp.exp(z).sum()

    tree = walk(jax.make_jaxpr(f)(jnp.ones(3)).jaxpr)

    def every(block):
        for item in block.items:
            yield item
            for sub in item.blocks:
                yield from every(sub)

    items = list(every(tree))
    assert tree.n_equations == len(items) > 12
    for item in items:
        assert item.n_equations == 1 + sum(1 for b in item.blocks for _ in every(b))
        made: dict[str, int] = {}
        count_primitives([item], made)
        # The same counts in the same order (most_common's ties go to the first counted).
        assert list(made.items()) == list(_counts(item).items())
    assert [i.id for i in tree.loops] == [i.id for i in items if i.primitive in ("scan", "while")]
    assert {i.primitive for i in tree.loops} == {"scan", "while"}
