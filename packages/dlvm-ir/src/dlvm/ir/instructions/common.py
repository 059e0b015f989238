"""Helpers shared by the type rules and semantics of the instruction tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from ..core import Instruction, Module, Value
from ..opdef import TypeRuleError
from ..runtime import ExecutionError, numpy_dtype
from ..types import Dim, Shape, TensorType, Type


def fail(message: str) -> NoReturn:
    raise TypeRuleError(message)


def resolved(t: Type, module: Module | None) -> Type:
    return module.resolve(t) if module is not None else t


def tensor_type(v: Value, module: Module | None, what: str = "operand") -> TensorType:
    t = resolved(v.type, module)
    if not isinstance(t, TensorType):
        fail(f"{what} must be a tensor, found '{v.type}'")
    return t


def float_tensor(v: Value, module: Module | None, what: str = "operand") -> TensorType:
    t = tensor_type(v, module, what)
    if not t.dtype.is_float:
        fail(f"{what} must have a floating-point data type, found '{v.type}'")
    return t


def numeric_tensor(v: Value, module: Module | None, what: str = "operand") -> TensorType:
    t = tensor_type(v, module, what)
    if not t.dtype.is_numeric:
        fail(f"{what} must have a numeric data type, found '{v.type}'")
    return t


def integer_tensor(v: Value, module: Module | None, what: str = "operand") -> TensorType:
    t = tensor_type(v, module, what)
    if not t.dtype.is_int:
        fail(f"{what} must have an integer data type (iN or uN), found '{v.type}'")
    return t


def bool_tensor(v: Value, module: Module | None, what: str = "operand") -> TensorType:
    t = tensor_type(v, module, what)
    if not t.dtype.is_bool:
        fail(f"{what} must have data type bool, found '{v.type}'")
    return t


def scalar_of(v: Value, module: Module | None, what: str) -> TensorType:
    t = tensor_type(v, module, what)
    if not t.is_scalar:
        fail(f"{what} must be a scalar, found '{v.type}'")
    return t


def check_axes(axes: Sequence[int], rank: int, what: str = "dimension") -> None:
    seen: set[int] = set()
    for a in axes:
        if not 0 <= a < rank:
            fail(f"{what} {a} is out of range for rank {rank}")
        if a in seen:
            fail(f"{what} {a} is listed twice")
        seen.add(a)


def dims_equal(a: Dim, b: Dim) -> bool:
    return a is None or b is None or a == b


def merge_dim(a: Dim, b: Dim) -> Dim:
    return a if a is not None else b


# ---------------------------------------------------------------- run-time helpers


def result_array(inst: Instruction, x: Any) -> np.ndarray:
    """Coerce a numpy result to the instruction's type (dtype and rank)."""
    t = inst.type
    assert isinstance(t, TensorType)
    arr = np.asarray(x)
    dt = numpy_dtype(t.dtype)
    if arr.dtype != dt:
        arr = arr.astype(dt)
    if arr.ndim != t.rank:
        raise ExecutionError(f"internal: result rank {arr.ndim} does not match {t}")
    return arr


def static_shape(shape: Shape, what: str) -> tuple[int, ...]:
    if any(d is None for d in shape):
        raise ExecutionError(f"{what} needs a static shape")
    return tuple(d for d in shape if d is not None)
