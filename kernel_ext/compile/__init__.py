"""Compiling, observed: the phase report of one call, ``%%jit`` cells, lowered text, and
the session's compile log.

``report`` times trace, lower, compile and run of one call; ``cell`` compiles a cell as
one function of its free variables; ``lowered`` prints StableHLO and HLO. The compile log
is ``log`` (records and the bounded store), fed by ``capture`` (JAX's monitoring events
and cache-miss messages, read by ``messages``) and drawn by ``log_view``.
"""
