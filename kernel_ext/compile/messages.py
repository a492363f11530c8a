"""Read what JAX says about a compilation: its cache-miss explanation and its types.

Pure functions over JAX's words, no listening (that is :mod:`jaxlab.compile.capture`)::

    base_name("jit(f)")                                     # "f"
    short_type(jax.ShapeDtypeStruct((3, 3), jnp.float32))   # "f32[3,3]"
    parse_explanation(message).changes  # (ArgChange("x", "f32[3]", "f32[4]"),)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .log import ArgChange

_WRAPPED = re.compile(r"^[A-Za-z_]\w*\((.*)\)$")  # "jit(f)" -> "f", "pmap(g)" -> "g"


def base_name(fun_name: str) -> str:
    """``"jit(f)" -> "f"``: JAX names a lowering after the transform that asked for it."""
    m = _WRAPPED.match(fun_name)
    return m.group(1) if m else fun_name


# --------------------------------------------------------------------------- explanations
@dataclass(frozen=True)
class Explanation:
    """JAX's ``TRACING CACHE MISS`` message, parsed."""

    fun_name: str
    text: str | None  # None for a function JAX had never seen
    changes: tuple[ArgChange, ...]
    new_function: bool


_NEVER_SEEN = re.compile(r"never seen function:\s*\n\s*(?P<name>.+?) id=\d+")
_FOR = re.compile(r"^\s*for (?P<name>.+?)(?: defined at .*)?$", re.M)
_TYPE_CHANGE = re.compile(r"^\s*\* at (?P<name>.+?), now (?P<after>.+?) and before (?P<before>.+)$")
_HEADER = re.compile(r"all previously seen cache keys differ\. For the closest previous key:")
_STATIC_CHANGE = re.compile(
    r"^\* at input path (?P<path>.+?), now .*?Static\(val=(?P<after>.*?)\) and before "
    r".*?Static\(val=(?P<before>.*?)\)(?:, so .*)?$"
)
_KWARG_PATH = re.compile(r"^\[1\]\['(\w+)'\]$")  # (args, kwargs)[1][name]: a keyword


def parse_explanation(message: str) -> Explanation | None:
    """Read JAX's cache-miss explanation (the format of JAX 0.10 to 0.12).

    >>> parse_explanation("TRACING CACHE MISS at a.py:3 (<module>):\\n  for f defined at a.py:1\\n"
    ...     "  all previously seen cache keys differ. For the closest previous key:\\n"
    ...     "  different input types:\\n  * at x, now f32[4] and before f32[3]").text
    'x: f32[3] → f32[4]'
    """
    if not message.startswith("TRACING CACHE MISS"):
        return None
    seen = _NEVER_SEEN.search(message)
    if seen:
        return Explanation(seen.group("name").strip(), None, (), True)
    named = _FOR.search(message)
    if not named:
        return None
    body = message[named.end() :]
    header = _HEADER.search(body)
    if header:
        body = body[header.end() :]
    lines = [ln.strip() for ln in body.splitlines() if ln.strip()]
    if not lines or lines[0].startswith("cache miss explanation unavailable"):
        # JAX 0.12 says this when only a static argument changed: let the log compare
        # signatures instead.
        return Explanation(named.group("name").strip(), None, (), False)
    changes = []
    if lines[0].startswith("different input types"):
        for line in lines[1:]:
            m = _TYPE_CHANGE.match(line)
            if m:
                changes.append(ArgChange(m.group("name"), m.group("before"), m.group("after")))
    else:
        for line in lines[1:]:
            m = _STATIC_CHANGE.match(line)
            if m:
                path = m.group("path")
                kw = _KWARG_PATH.match(path)
                name = f"{kw.group(1)} (static)" if kw else f"input {path} (static)"
                changes.append(ArgChange(name, m.group("before"), m.group("after")))
    if changes:
        text = "; ".join(map(str, changes))
    else:
        text = " ".join(ln.lstrip("* ").strip() for ln in lines)
    return Explanation(named.group("name").strip(), text, tuple(changes), False)


_DTYPE = re.compile(r"^(?P<kind>bfloat|float|int|uint|complex)(?P<bits>\d+)")
_SHORT_KIND = {"bfloat": "bf", "float": "f", "int": "i", "uint": "u", "complex": "c"}


def short_type(aval: Any) -> str:
    """``ShapedArray(float32[3,3])`` → ``"f32[3,3]"`` (JAX's own short notation)."""
    try:
        name = str(aval.dtype)
        m = _DTYPE.match(name)
        dtype = f"{_SHORT_KIND[m.group('kind')]}{m.group('bits')}" if m else name
        shape = ",".join(str(d) for d in aval.shape)
        weak = "{weak}" if getattr(aval, "weak_type", False) else ""
        return f"{dtype}[{shape}]{weak}"
    except (AttributeError, TypeError):
        return str(aval)
