"""Why tracing the user's program failed, in the terms a fix is chosen by.

::

    try:
        jax.jit(lambda x: 1 if x > 0 else 0)(1.0)
    except Exception as e:
        needs_concrete_value(e)   # True: use lax.cond / jnp.where, or a static argument
        first_line(e)             # 'Attempted boolean conversion of traced array ...'

``%jaxpr``, ``%jit`` and ``%%jit`` each word their hint for their own syntax; which
errors get it is decided here, once.
"""

from __future__ import annotations


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s message ('' for an empty one)."""
    return (str(error).strip().splitlines() or [""])[0]


def needs_concrete_value(error: BaseException) -> bool:
    """Whether Python asked for the value of a traced array (``if``, ``range(n)``,
    ``int(x)``, ``np.asarray(x)``): JAX's concretization errors, whose fix is lax
    control flow, ``jnp.where`` or a static argument."""
    import jax

    # TracerBoolConversionError is a ConcretizationTypeError; the other two are not.
    return isinstance(
        error,
        jax.errors.ConcretizationTypeError
        | jax.errors.TracerIntegerConversionError
        | jax.errors.TracerArrayConversionError,
    )


def returns_non_array(error: BaseException) -> bool:
    """Whether the traced function returned something that is not an array (a string)."""
    # "function f at ... traced for jit returned a value of type <class 'str'>, which is
    # not a valid JAX type"
    return isinstance(error, TypeError) and "not a valid JAX type" in str(error)


def is_non_array_argument(error: BaseException) -> bool:
    """Whether JAX refused an argument that is not an array (a string, an object)."""
    # "Error interpreting argument to <function f> as an abstract array. The problematic
    # value is of type <class 'str'> ..."
    return isinstance(error, TypeError) and "as an abstract array" in str(error)
