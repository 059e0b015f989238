"""numpy's type promotion (NEP 50) for staged operations on two operands.

DLVM's element-wise instructions take operands of one element type, so NNKit picks the
type numpy would and casts to it (`dataTypeCast`) before the instruction:

- a staged tensor or a numpy array or scalar is *strong*: two strong types promote as
  `numpy.result_type` says (int32 with float32 is float64);
- a Python number is *weak*: it takes the other operand's type when its kind (bool < int
  < float) is not higher (`x_f16 * 2.5` stays f16), else the default type of its kind
  (`x_i32 * 3.7` is f64, `x_bool + 1` is i64); an int that does not fit is an error, as
  in numpy (`x_i8 + 300`);
- `/` of integers or bools is true division, in float64, as numpy's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dlvm.ir import BOOL, F64, I64, DataType
from dlvm.ir.runtime import numpy_dtype

from .errors import value_error
from .types import from_numpy

KIND_ORDER = {"bool": 0, "int": 1, "float": 2}
# a Python number's kind, and the type it has on its own (numpy's defaults)
PYTHON_KINDS: dict[type, tuple[str, DataType]] = {
    bool: ("bool", BOOL), int: ("int", I64), float: ("float", F64)}


def is_weak(x: Any) -> bool:
    """A Python number (not a numpy scalar): it adapts to the other operand's type."""
    return type(x) in PYTHON_KINDS


def weak_default(x: Any) -> DataType:
    return PYTHON_KINDS[type(x)][1]


def with_weak(strong: DataType, x: Any, what: str) -> DataType:
    """The type of an operation between a value of type `strong` and the Python number
    `x`."""
    kind, default = PYTHON_KINDS[type(x)]
    if KIND_ORDER[kind] > KIND_ORDER[strong.kind]:
        return default
    if strong.is_int and kind == "int":
        info = np.iinfo(numpy_dtype(strong))
        if not info.min <= x <= info.max:
            raise value_error(f"{what}: the Python integer {x} is out of range for {strong} "
                              f"({info.min} to {info.max})")
    return strong


def strong(a: DataType, b: DataType) -> DataType:
    """The type of an operation between values of types `a` and `b` (numpy's)."""
    if a == b:
        return a
    return from_numpy(np.result_type(numpy_dtype(a), numpy_dtype(b)))


def true_division(dtype: DataType) -> DataType:
    """`/` divides integers and bools in float64, as numpy's true division does."""
    return dtype if dtype.is_float else F64
