"""The rule table: how each common JAX error is recognised, and who explains it.

A :class:`Rule` has a cheap ``matches(exc)`` (the exception's type; for JAX errors raised
as a built-in ``TypeError``/``ValueError``, its message *and* a JAX frame in the
traceback, so the same words from other code are left alone) and a ``build(exc, site)``
that writes the :class:`Finding`. ``find_rule`` takes the first rule that matches, so
``RULES`` runs from the most to the least specific. The tracing errors are explained in
:mod:`jaxlab.explain.tracing`, shapes in :mod:`jaxlab.explain.shapes`; arrays, autodiff,
keys, memory and NaNs here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp

from .._jax_compat import is_xla_runtime_error
from . import rewrite as rw
from . import tracing
from .finding import DOCS, ERRORS_PAGE, Finding, docs_in_message, jax_name, jnp_name
from .shapes import shape_finding
from .source import ErrorSite, user_frames, user_line

AT_PAGE = f"{DOCS}/_autosummary/jax.numpy.ndarray.at.html"
GRAD_PAGE = f"{DOCS}/_autosummary/jax.grad.html"
JACOBIAN_PAGE = f"{DOCS}/notebooks/autodiff_cookbook.html"
GPU_MEMORY_PAGE = f"{DOCS}/gpu_memory_allocation.html"
NANS_PAGE = f"{DOCS}/debugging/flags.html"


@dataclass(frozen=True)
class Rule:
    kind: str
    matches: Callable[[BaseException], bool]
    build: Callable[[BaseException, ErrorSite], Finding | None]


def _through_jax(exc: BaseException) -> bool:
    """Whether the traceback passes through JAX (a built-in error that JAX raised)."""
    package = os.path.dirname(jax.__file__) + os.sep
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith(package) or f"{os.sep}jaxlib{os.sep}" in filename:
            return True
        tb = tb.tb_next
    return False


def _jax_builtin(types: tuple[type, ...], *patterns: str) -> Callable[[BaseException], bool]:
    compiled = [re.compile(p) for p in patterns]

    def matches(exc: BaseException) -> bool:
        if type(exc).__module__ != "builtins" or not isinstance(exc, types):
            return False
        text = str(exc)
        return any(p.search(text) for p in compiled) and _through_jax(exc)

    return matches


def _is(*classes: type) -> Callable[[BaseException], bool]:
    return lambda exc: isinstance(exc, classes)


# --------------------------------------------------------------------------- arrays and autodiff
def build_item_assignment(exc: BaseException, site: ErrorSite) -> Finding:
    docs = docs_in_message(exc, AT_PAGE)
    stmt = site.statement
    target = rw.unparse_statement(stmt) if stmt is not None else "x[i] = v"
    what = (
        f"JAX arrays are immutable: `{target}` cannot change the array in place. `.at[...]` "
        "makes a new array with the change (under jit, XLA does it in place)."
    )
    fix = rw.rewrite_item_assignment(stmt) if stmt is not None else None
    if fix:
        return Finding(what, fix, docs, rewritten=True)
    return Finding(what, "x = x.at[i].set(v)  # also .add, .multiply, .min, .max", docs)


_OUTPUT_SHAPE = re.compile(r"Output had shape: (\([^)]*\))")


def build_grad_non_scalar(exc: BaseException, site: ErrorSite) -> Finding:
    shape = _OUTPUT_SHAPE.search(str(exc))
    of_shape = f" of shape {shape.group(1)}" if shape else ""
    what = (
        f"`grad` needs a function whose output is one number, but this one returns an array"
        f"{of_shape}. For the derivative of every output use a Jacobian (jax.jacrev; "
        "jax.jacfwd when outputs outnumber inputs); for a loss, reduce it to a scalar."
    )
    stmt = site.statement
    both = rw.rewrite_grad_to_jacobian(stmt) if stmt is not None else None
    if both:
        jacobian, summed = both
        fix = f"{jacobian}\n# or the gradient of the sum:\n{summed}"
        return Finding(what, fix, JACOBIAN_PAGE, rewritten=True)
    generic = f"{jax_name(site)}.jacrev(f)(x)  # or jax.grad(lambda x: f(x).sum())(x)"
    return Finding(what, generic, JACOBIAN_PAGE)


def build_grad_integer(exc: BaseException, site: ErrorSite) -> Finding:
    dtype = re.search(r"but got (\w+)", str(exc))
    got = f" ({dtype.group(1)})" if dtype else ""
    what = (
        f"`grad` needs floating-point inputs, but got integers{got}: there is no derivative "
        "with respect to an integer. Pass floats (3.0, not 3)."
    )

    def holds(name: str) -> str | None:
        try:
            value = site.lookup(name)
        except KeyError:
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return "python"
        dtype = getattr(value, "dtype", None)
        return "array" if dtype is not None and jnp.issubdtype(dtype, jnp.integer) else None

    stmt = site.statement
    fix = rw.rewrite_grad_float_args(stmt, holds) if stmt is not None else None
    if fix:
        return Finding(what, fix, GRAD_PAGE, rewritten=True)
    return Finding(what, "jax.grad(f)(x.astype(float))  # or jax.grad(f)(3.0)", GRAD_PAGE)


# --------------------------------------------------------------------------- keys
def build_key_reuse(exc: BaseException, site: ErrorSite) -> Finding:
    docs = docs_in_message(exc, f"{ERRORS_PAGE}#jax.errors.KeyReuseError")
    first = ""
    cause = exc.__cause__
    if isinstance(cause, jax.errors.KeyReuseError):  # eager reuse: JAX chains the first use
        frames = user_frames(cause.__traceback__)
        if frames:
            first = f" (first used at {user_line(*frames[-1]).label})"
    what = (
        f"A PRNG key was used again{first}: the same key gives the same random numbers, so the "
        "second draw would silently repeat the first. Split the key; use each part once."
    )

    def is_random(prefix: str) -> bool:
        if prefix.split(".")[-1] == "random":
            return True
        try:
            return site.lookup(prefix) is jax.random
        except KeyError:
            return False

    stmt = site.statement
    fix = rw.rewrite_key_reuse(stmt, is_random) if stmt is not None else None
    if fix:
        return Finding(what, fix, docs, rewritten=True)
    generic = f"key, subkey = {jax_name(site)}.random.split(key)  # use subkey once, keep key"
    return Finding(what, generic, docs)


# --------------------------------------------------------------------------- memory
_BYTES = re.compile(r"allocate (\d+) bytes")


def is_out_of_memory(exc: BaseException) -> bool:
    text = str(exc)
    return is_xla_runtime_error(exc) and (
        "RESOURCE_EXHAUSTED" in text or "out of memory" in text.lower()
    )


def build_out_of_memory(exc: BaseException, site: ErrorSite) -> Finding:
    size = _BYTES.search(str(exc))
    amount = f" {int(size.group(1)) / 2**30:.2f} GiB" if size else ""
    what = (
        f"The accelerator ran out of memory allocating{amount}. JAX preallocates 75% of GPU "
        "memory when it starts, so a second notebook or process on the same GPU can leave too "
        "little; a single array this large needs a smaller batch (or jax.checkpoint)."
    )
    fix = (
        "# first cell, before `import jax` (then restart the kernel):\n"
        "import os\n"
        'os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"  # allocate as needed\n'
        'os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = ".50"  # or preallocate only half'
    )
    return Finding(what, fix, GPU_MEMORY_PAGE)


# --------------------------------------------------------------------------- NaNs
_NAN = re.compile(r"invalid value \((nan|inf)\) encountered in (\S+)")
# when the op-by-op re-run of a jit function finds no NaN, JAX names the jit function itself
_NAN_IN_JIT = re.compile(r"^\('([^']+)', '(nan|inf)'\)\. Because .*debug_nans")
_NAN_CAUSES = {
    "sqrt": "the square root of a negative number",
    "rsqrt": "1/sqrt of a negative number",
    "log": "the log of a negative number",
    "div": "0/0 or inf/inf",
    "mul": "0 × inf (in a gradient: an infinite derivative times zero)",
    "sub": "inf − inf",
    "add": "inf + (−inf)",
    "pow": "a negative number to a fractional power",
}


def is_nan_check(exc: BaseException) -> bool:
    """JAX's ``jax_debug_nans`` error ("invalid value (nan) encountered in sqrt"), not NumPy's."""
    return isinstance(exc, FloatingPointError) and nan_primitive(exc) is not None


def nan_primitive(exc: BaseException) -> tuple[str, str] | None:
    """("nan" or "inf", the primitive) from JAX's message."""
    text = str(exc)
    found = _NAN.search(text)
    if found is not None:
        value, where = found.group(1), found.group(2)
    else:
        in_jit = _NAN_IN_JIT.search(text)
        if in_jit is None:
            return None
        where, value = in_jit.group(1), in_jit.group(2)
    return value, re.sub(r"^p?jit\((.+)\)$", r"\1", where.rstrip(".:,"))


def build_nan(exc: BaseException, site: ErrorSite) -> Finding | None:
    found = nan_primitive(exc)
    if found is None:
        return None
    value, primitive = found
    backward = " in the backward pass (the gradient)" if site.transformed else ""
    first = "NaN" if value == "nan" else "inf"
    what = (
        f"jax_debug_nans stopped at the first {first}: the primitive `{primitive}` made "
        f"it{backward}, typically from {_NAN_CAUSES.get(primitive, 'its inputs')}. Keep the "
        "inputs in the function's domain (`%jax_nans off` turns the check off)."
    )
    jnp_alias = jnp_name(site)
    stmt = site.statement
    fix = rw.rewrite_nan_guard(stmt, primitive, jnp_alias) if stmt is not None else None
    if fix:
        return Finding(what, fix, NANS_PAGE, rewritten=True)
    if primitive == "div":
        return Finding(what, f"y = a / {jnp_alias}.where(b == 0, 1.0, b)", NANS_PAGE)
    function = primitive if primitive in ("sqrt", "log") else "log"
    double_where = (
        f"safe = {jnp_alias}.where(x > 0, x, 1.0)  # the 'double where': no NaN in the gradient\n"
        f"y = {jnp_alias}.where(x > 0, {jnp_alias}.{function}(safe), 0.0)"
    )
    return Finding(what, double_where, NANS_PAGE)


# --------------------------------------------------------------------------- the table
RULES: tuple[Rule, ...] = (
    Rule("tracer-bool", _is(jax.errors.TracerBoolConversionError), tracing.build_tracer_bool),
    Rule(
        "tracer-integer",
        _is(jax.errors.TracerIntegerConversionError),
        tracing.build_tracer_integer,
    ),
    Rule("tracer-array", _is(jax.errors.TracerArrayConversionError), tracing.build_tracer_array),
    Rule("concretization", _is(jax.errors.ConcretizationTypeError), tracing.build_concretization),
    Rule(
        "concretization",
        _jax_builtin(
            (TypeError, IndexError),
            r"Shapes must be 1D sequences of concrete values",
            r"static start/stop/step|Slice entries must be static",
        ),
        tracing.build_concretization,
    ),
    Rule(
        "boolean-index",
        _is(jax.errors.NonConcreteBooleanIndexError),
        tracing.build_boolean_index,
    ),
    Rule("leaked-tracer", _is(jax.errors.UnexpectedTracerError), tracing.build_leaked_tracer),
    Rule("key-reuse", _is(jax.errors.KeyReuseError), build_key_reuse),
    Rule(
        "item-assignment",
        _jax_builtin((TypeError,), r"do(es)? not support (in-place )?item assignment"),
        build_item_assignment,
    ),
    Rule(
        "grad-non-scalar",
        _jax_builtin((TypeError,), r"Gradient only defined for scalar-output functions"),
        build_grad_non_scalar,
    ),
    Rule(
        "grad-integer",
        _jax_builtin((TypeError,), r"grad requires real- or complex-valued inputs"),
        build_grad_integer,
    ),
    Rule(
        "shape-mismatch",
        _jax_builtin(
            (TypeError, ValueError),
            r"dot_general requires contracting dimensions",
            r"[Ii]ncompatible shapes for broadcasting",
            r"Incompatible types for matmul arguments",
        ),
        shape_finding,
    ),
    Rule("out-of-memory", is_out_of_memory, build_out_of_memory),
    Rule("nan", is_nan_check, build_nan),
)


def find_rule(exc: BaseException) -> Rule | None:
    """The first rule that recognises ``exc``, or None (not a JAX error we explain)."""
    if not isinstance(exc, Exception):
        return None
    return next((rule for rule in RULES if rule.matches(exc)), None)
