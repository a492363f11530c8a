"""``%jit``'s memory line (arguments / outputs / temporaries / code) is XLA's own
``compiled.memory_analysis()`` of the same program, printed as numbers."""

import jax
import jax.numpy as jnp


def test_jit_memory_figures_are_xlas_memory_analysis(ip):
    def spread(x, w):  # a product whose result is reduced: XLA keeps a temporary
        h = jnp.tanh(x @ w)
        return (h @ h.T).sum(axis=0), h[:3]

    x, w = jnp.ones((256, 128)), jnp.ones((128, 256))
    ip.user_ns.update(spread=spread, x=x, w=w)
    r = ip.run_line_magic("jit", "-o spread(x, w)")
    m = jax.jit(spread).lower(x, w).compile().memory_analysis()
    figures = (r.argument_bytes, r.output_bytes, r.temp_bytes, r.generated_code_bytes)
    assert figures == (
        m.argument_size_in_bytes,
        m.output_size_in_bytes,
        m.temp_size_in_bytes,
        m.generated_code_size_in_bytes,
    )
    assert r.argument_bytes == x.nbytes + w.nbytes
    # the two outputs, plus the small table XLA keeps for a tuple of results
    assert 4 * (256 + 3 * 256) <= r.output_bytes <= 4 * (256 + 3 * 256) + 64
    assert r.temp_bytes > 0
    line = next(x for x in str(r).splitlines() if "memory: arguments" in x)
    assert f"{r.argument_bytes:,} / {r.output_bytes:,} / {r.temp_bytes:,} /" in line
