"""PRNG key lineage: every key's family tree, and reuse caught where it happens.

::

    with jaxlab.track_keys():                     # or %keys on
        k1, k2 = jax.random.split(jax.random.key(0))
        jax.random.normal(k1, (3,))
    jaxlab.key_lineage()                          # KeyLineage: .nodes, .edges, .reuses
    jaxlab.key_flow(f, key)                       # static: reuse found in the jaxpr

Modules: ``site`` (the user's line), ``record`` (nodes, events, reuses, the bounded
session store), ``track`` (runtime tracking and its switch), ``flow`` (static analysis
of ``random_*`` equations through sub-jaxprs), ``tree`` (the forest a view draws, with
aggregation), ``view`` (static HTML and text).

How keys are tracked, and why: instrumented ``jax.random`` functions, not a wrapping PRNG
implementation defined with ``jax.extend.random.define_prng_impl``. A wrapping
implementation changes the user's keys (their dtype names the new implementation) and
reports through a ``jax.debug.callback`` in every split and every draw, including inside
loop bodies, where a callback runs on every iteration: the issue measured a jitted loop
33x slower. The wrappers call JAX's own functions (results bit-identical), read key data
directly when eager, add one callback per call site outside loop bodies under
``jit``/``vmap`` (so each call of a compiled function records), and record loop bodies
once, when traced. The keys a split makes are kept as one data array and materialised
only when someone looks. ``benchmarks/key_tracking.py`` measures the cost.
"""
