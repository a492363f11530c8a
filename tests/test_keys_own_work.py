"""Key tracking left on through jaxlab's own work: ``%bench``'s rounds and ``%jit``'s
steady runs call the user's function hundreds of times, and none of those calls is the
user's draw (``session.work.jaxlab_work``); nor is the first call of either, which only
measures or reports the call (``results_unseen``: its compilation is the user's, its
draws are no one's). A magic that inspects a call (``%grad``, ``%jaxpr``, ``%explore``)
draws nothing in the user's name either. A jitted function traced first inside jaxlab's
work still records the user's own calls afterwards (its template is written all the
same; a plain jit's callbacks are placed)."""

from __future__ import annotations

import warnings

import jax
import pytest
from IPython.utils.capture import capture_output

from jaxlab import JaxlabWarning, key_lineage, track_keys
from jaxlab.keys.track import warn_pending
from jaxlab.session.work import jaxlab_work

pytestmark = pytest.mark.usefixtures("fresh_lineage")  # tracking off, lineage empty


def _kinds() -> list[tuple[str, str]]:
    return [(e.kind, e.op) for e in key_lineage().events]


def _shell(ip) -> None:
    """``f`` jitted before ``%keys on`` (JAX compiles a callback into it at its first
    call), ``g`` a plain function; keys made while tracking."""
    ip.run_cell(
        "import jax\n"
        "f = jax.jit(lambda k: jax.random.normal(k, (4,)))\n"
        "g = lambda k: jax.random.uniform(k, (3,))\n"
        "def loss(w, k):\n"
        "    return jax.numpy.sum((w * jax.random.normal(k, (3,))) ** 2)\n"
        "w = jax.numpy.ones(3)\n"
    )
    with capture_output():
        ip.run_line_magic("keys", "on")
    ip.run_cell("key = jax.random.key(3)\nkey, k1, k2, k3 = jax.random.split(key, 4)\n")


def _run(ip, line: str) -> None:
    with capture_output(), warnings.catch_warnings():
        warnings.simplefilter("error", JaxlabWarning)  # a reuse warned fails the test
        ip.run_line_magic(*line.split(" ", 1))


@pytest.mark.parametrize(
    ("line", "call"),
    [
        ("bench -n 5 -r 3 f(k1)", "f(k1)"),
        ("bench f(k1)", "f(k1)"),  # rounds chosen as %timeit chooses: hundreds of calls
        ("bench -n 5 -r 3 g(k1)", "g(k1)"),
        ("bench --compare g(k1) f(k1)", "f(k1)"),
        ("jit f(k1)", "f(k1)"),  # 3 to 100 steady runs
        ("jit g(k1)", "g(k1)"),  # jitted inside %jit
    ],
)
def test_a_measuring_magic_draws_nothing_in_the_users_name(ip, line, call):
    _shell(ip)
    before = len(key_lineage().events)
    _run(ip, line)
    assert _kinds()[before:] == []  # not its first call either: it only measures
    with capture_output():
        # the user's own first draw from k1: no reuse (blocked on: on an accelerator the
        # callback that records it runs with the program, on the runtime's thread)
        ip.run_cell(f"out = jax.block_until_ready({call})")
    assert [kind for kind, _ in _kinds()[before:]] == ["consume"]
    assert key_lineage().reuses == ()


@pytest.mark.parametrize(
    "line", ["grad loss(w, k1)", "grad --check loss(w, k1)", "jaxpr loss(w, k1)"]
)
def test_an_inspecting_magic_draws_nothing_in_the_users_name(ip, line):
    """``%grad`` evaluates (and checks, through a jit of its own that closes over the
    key) as jaxlab's work, as the compile log counts it: none of it is the user's draw."""
    _shell(ip)
    before = len(key_lineage().events)
    _run(ip, line)
    assert _kinds()[before:] == []
    ip.run_cell("a = loss(w, k1)")  # the user's first draw from k1
    assert _kinds()[before:] == [("consume", "normal")]
    assert key_lineage().reuses == ()


def test_the_users_calls_after_jit_are_recorded_and_a_second_use_is_caught(ip):
    _shell(ip)
    with capture_output():
        ip.run_cell("h = jax.jit(lambda k: jax.random.normal(k, (4,)))")  # a tracked jit
    _run(ip, "jit h(k1)")  # traced through .trace(): the template JAX's cache keeps
    ip.run_cell("a = h(k2)")
    assert [op for _, op in _kinds()] == ["key", "split", "normal"]
    assert key_lineage().reuses == ()
    with capture_output():
        ip.run_cell("b = h(k2)")  # the user draws again from the key they drew from
    (reuse,) = key_lineage().reuses
    assert (reuse.first_op, reuse.second_op) == ("normal", "normal")


def test_draws_inside_jaxlab_work_are_not_the_users():
    track_keys()
    key = jax.random.key(0)
    with jaxlab_work():
        jax.random.normal(key, (2,))
        sub = jax.random.split(key)
        jax.random.uniform(sub[0], (2,))
    assert _kinds() == [("create", "key")]
    jax.random.normal(key, (2,))  # the user's first draw from it: no reuse
    assert _kinds() == [("create", "key"), ("consume", "normal")]
    assert key_lineage().reuses == ()


@pytest.mark.parametrize("first", ["call", "lower", "trace"])
def test_a_jitted_function_first_traced_in_jaxlab_work_records_the_users_calls(first):
    track_keys()
    sample = jax.jit(lambda k: jax.random.normal(k, (4,)))
    keys = jax.random.split(jax.random.key(1), 3)
    with jaxlab_work():  # jaxlab traces it first (a check, a drawing): JAX caches that trace
        if first == "call":
            sample(keys[0])
        else:
            getattr(sample, first)(keys[0])
    assert [op for _, op in _kinds()] == ["key", "split"]
    sample(keys[1])  # the user's call: a hit in JAX's cache, recorded from the template
    sample(keys[2])
    assert [op for _, op in _kinds()] == ["key", "split", "normal", "normal"]
    assert sample.template.ops  # the template jaxlab's trace wrote
    sample(keys[1])
    with pytest.warns(JaxlabWarning, match="reuse"):
        warn_pending()  # (a compiled call's reuse is said at the cell's end)
    (reuse,) = key_lineage().reuses
    assert (reuse.first_op, reuse.second_op) == ("normal", "normal")


def test_a_compiled_callback_on_another_thread_during_jaxlab_work_is_not_the_users():
    """On an accelerator, the callback compiled into a plain jit runs on the runtime's
    thread, not the caller's (measured on a TPU: 867 events from one ``%bench``). Here a
    thread of our own calls the function while the main thread is in jaxlab's work: the
    callback runs on that thread, which sees none of the main thread's marker."""
    import threading

    from jaxlab.session.work import results_unseen

    sample = jax.jit(lambda k: jax.random.normal(k, (4,)))  # plain: jitted before tracking
    track_keys()
    key = jax.random.key(5)
    with results_unseen():  # %bench's first call: traced with the callback, not recorded
        jax.block_until_ready(sample(key))
    assert _kinds() == [("create", "key")]

    def elsewhere() -> None:
        jax.block_until_ready(sample(key))

    with jaxlab_work():  # %bench's rounds
        runner = threading.Thread(target=elsewhere)
        runner.start()
        runner.join()
    assert _kinds() == [("create", "key")]
    elsewhere()  # no work open anywhere: the user's own call, on whichever thread
    assert _kinds() == [("create", "key"), ("consume", "normal")]
