"""Timing under asynchronous dispatch: ``%bench`` and ``%%profile``.

::

    r = jaxlab.bench(f, x)        # BenchResult: compile, dispatch and ready times apart
    with jaxlab.profile() as p:   # a jax.profiler trace of the block, parsed in-process
        y = f(x)
    p.result                      # ProfileResult: host and device spans, costs, hidden syncs
"""
