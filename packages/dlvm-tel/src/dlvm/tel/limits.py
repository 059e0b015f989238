"""What the IR can hold: sizes up to `MAX_SIZE` and constants within their data type.

The checker asks these before code generation, so a size or a constant out of range is a
diagnostic at the TEL source rather than an IR verifier error without one (or, for a float
constant, a silent infinity).
"""

from __future__ import annotations

import math

import numpy as np

from dlvm.ir.types import MAX_SIZE

from .syntax import Shape


def shape_problem(shape: Shape) -> str | None:
    """Why a tensor of `shape` cannot exist (None when it can): a dimension, or the number
    of elements, beyond `MAX_SIZE` (dynamic dimensions count as 1)."""
    for d in shape:
        if d is not None and d > MAX_SIZE:
            return f"the dimension {d} is beyond the largest size ({MAX_SIZE})"
    count = math.prod(d for d in shape if d is not None)
    if count > MAX_SIZE:
        return (f"a tensor of {count} elements is beyond the largest size ({MAX_SIZE})")
    return None


def constant_problem(value: int | float, dtype: str) -> str | None:
    """Why `value` is not a constant of `dtype` (None when it is): an integer out of the
    type's range, or a number that would round to infinity in a floating-point type."""
    if dtype.startswith("int"):
        info = np.iinfo(dtype)
        if isinstance(value, int) and not info.min <= value <= info.max:
            return f"it does not fit in {dtype} ({info.min} … {info.max})"
        return None
    largest = float(np.finfo(dtype).max)
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    with np.errstate(over="ignore"):
        rounded = np.array(number, dtype=dtype)
    if not np.isfinite(rounded):
        return f"it is beyond the range of {dtype} (±{largest:.8g})"
    return None
