"""Two lambdas are two functions in the compile log (compile/identity.py, issue 33):
``small_f = jax.jit(lambda v: ...)`` and ``big_f = jax.jit(lambda a: ...)`` were one
``<lambda>`` that "recompiled" with arguments "absent → f32[1200,1200]"."""

import jax
import jax.numpy as jnp

import jaxlab
from jaxlab.compile.identity import AnonymousNames, code_identity


def test_two_lambdas_of_one_cell_are_two_functions_each_compiled_once(ip):
    cell = (
        "import jax, jax.numpy as jnp\n"
        "small_f = jax.jit(lambda v: v * 2)\n"
        "big_f = jax.jit(lambda a: a @ a)\n"
        "small_f(jnp.ones(3)); big_f(jnp.ones((40, 40)))"
    )
    log = jaxlab.compile_log()
    before = log.count
    ip.run_cell(cell, store_history=True)
    n = ip.execution_count - 1
    mine = [e for e in log.events[before - log.count :] if e.user_code and not e.eager]
    assert [e.defined_at for e in mine] == [f"In[{n}], line 2", f"In[{n}], line 3"]
    assert [e.recompile for e in mine] == [False, False]
    assert {e.explanation for e in mine} == {"first compilation"}
    assert mine[0].fun_name != mine[1].fun_name
    assert mine[1].fun_name.startswith("<lambda>") and f"In[{n}], line 3" in mine[1].fun_name
    rows = {row.name: row for row in log.functions(mine_only=True)}
    assert rows[mine[0].fun_name].recompiles == 0 and rows[mine[1].fun_name].recompiles == 0


def test_the_same_lambda_written_again_by_a_rerun_cell_is_the_same_function(ip):
    cell = "import jax, jax.numpy as jnp\nsq = jax.jit(lambda q: q * q)\nsq(jnp.ones(2))"
    log = jaxlab.compile_log()
    ip.run_cell(cell, store_history=True)
    first = log.events[-1]
    ip.run_cell(cell, store_history=True)
    again = log.events[-1]
    assert again.fun_name == first.fun_name and again.recompile
    assert again.explanation.startswith("new function object")


def test_identity_is_the_line_in_the_cell_and_the_code():
    def one(v):
        return v * 2

    def other(v):
        return v * 3

    a = code_identity(one, "In[3], line 2")
    assert a == code_identity(one, "In[9], line 2")  # a re-run cell: the same function
    assert a != code_identity(one, "In[3], line 4")  # written on another line
    assert a != code_identity(other, "In[3], line 2")  # other code
    names = AnonymousNames()
    assert names.name("<lambda>", a, "In[3], line 2") == "<lambda>"
    assert names.name("<lambda>", a, "In[9], line 2") == "<lambda>"
    b = code_identity(other, "In[3], line 2")
    assert names.name("<lambda>", b, "In[3], line 2") == "<lambda> (In[3], line 2)"
    assert names.name("step", b, "In[3], line 2") == "step"  # a named function keeps its name
    c = code_identity(lambda v: v - 1, "In[3], line 2")  # a third written on the same line
    assert names.name("<lambda>", c, "In[3], line 2") == "<lambda> (In[3], line 2, 2)"
    assert float(jax.jit(one)(jnp.float32(2))) == 4.0


def test_two_lambdas_on_one_line_are_two_functions_with_keys_on(ip):
    # %keys on jits a wrapper of its own around each function (one code object for all):
    # the log looks through it to the user's lambda
    ip.run_line_magic("keys", "on")
    try:
        log = jaxlab.compile_log()
        before = log.count
        ip.run_cell(
            "import jax, jax.numpy as jnp\n"
            "f1 = jax.jit(lambda w: w * 5); f2 = jax.jit(lambda b: b @ b)\n"
            "f1(1.0); f2(jnp.eye(3))",
            store_history=True,
        )
        mine = [e for e in log.events[before - log.count :] if e.user_code and not e.eager]
        assert len(mine) == 2 and [e.recompile for e in mine] == [False, False]
        assert mine[0].fun_name != mine[1].fun_name
    finally:
        ip.run_line_magic("keys", "off")
