"""``--slice`` (``slice_at``) checked against the array it draws, before anything is drawn.

::

    check_slice([("v", jnp.zeros((3, 4, 5)))], (-1,))    # (2,): from the end, as NumPy
    check_slice([("v", jnp.zeros((3, 4, 5)))], (99,))    # BadSlice: ... use 0 to 2 ...

The slice fixes the leading axes of the first array of 3 or more axes (the value itself,
or in a pytree the first such leaf in the view's order); it takes one index per leading
axis, each in ``-size .. size-1``. A value with no such array is refused: a 1-D or 2-D
array is drawn whole.
"""

from __future__ import annotations

import operator
from typing import Any

from .refusals import BadSlice, short_path


def check_slice(arrays: list[tuple[str, Any]], slice_at: tuple[int, ...]) -> tuple[int, ...]:
    """``slice_at`` as non-negative indices into the first 3-D+ array of ``arrays``
    (``(path, array)`` pairs, as ``tree.pytree_arrays`` lists them), or ``BadSlice``."""
    try:
        slice_at = tuple(operator.index(i) for i in slice_at)
    except TypeError as e:
        raise BadSlice(f"slice_at takes integers, one per leading axis, not {slice_at!r}") from e
    given = ",".join(str(i) for i in slice_at)
    target = next(((p, a) for p, a in arrays if len(a.shape) >= 3), None)
    if target is None:
        raise BadSlice(
            f"--slice {given}: the slice fixes the leading axes of an array of 3 or more axes, "
            f"and {_what(arrays)}: a 1-D or 2-D array is drawn whole, leave --slice out"
        )
    path, array = target
    shape = tuple(int(d) for d in array.shape)
    lead = shape[:-2]
    where = f"{short_path(path)} (shape {shape})"
    if len(slice_at) != len(lead):
        example = ",".join(str(d // 2) for d in lead)
        raise BadSlice(
            f"--slice {given} gives {len(slice_at)} index(es); {where} is drawn as a 2-D slice "
            f"at {len(lead)} leading index(es): give {len(lead)}, e.g. --slice {example}"
        )
    out = []
    for axis, (i, d) in enumerate(zip(slice_at, lead, strict=True)):
        if d == 0:
            raise BadSlice(f"--slice {given}: axis {axis} of {where} is empty: nothing to draw")
        if not -d <= i < d:
            raise BadSlice(
                f"--slice {given}: index {i} is out of range for axis {axis} of {where}: "
                f"use 0 to {d - 1}, or -{d} to -1 from the end"
            )
        out.append(i + d if i < 0 else i)
    return tuple(out)


def _what(arrays: list[tuple[str, Any]]) -> str:
    if not arrays:
        return "the value holds no array"
    if len(arrays) == 1:
        path, a = arrays[0]
        return f"{short_path(path)} is {len(a.shape)}-D (shape {tuple(a.shape)})"
    return f"the {len(arrays)} arrays here have at most 2 axes"
