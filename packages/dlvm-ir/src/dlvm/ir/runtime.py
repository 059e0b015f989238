"""Run-time values of the reference interpreter.

Tensors are numpy arrays (0-d for scalars) of the IR's data type; tuples and
arrays are Python tuples; structs are dicts keyed by field name; enums are
`EnumValue`; memory is a list of cells addressed by `Pointer`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .diagnostics import DlvmError
from .types import (
    ArrayType,
    DataType,
    NominalType,
    StructDecl,
    TensorType,
    TupleType,
    Type,
)


class ExecutionError(DlvmError):
    """A program fault at run time (bad shape, division by zero, trap, …)."""


_NP = {("bool", 1): np.bool_, ("float", 16): np.float16, ("float", 32): np.float32,
       ("float", 64): np.float64}


def numpy_dtype(dt: DataType) -> np.dtype[Any]:
    """The numpy dtype that holds a DLVM data type (iN in the smallest signed int ≥ N bits)."""
    if dt.kind == "int":
        for bits, t in ((8, np.int8), (16, np.int16), (32, np.int32), (64, np.int64)):
            if dt.bits <= bits:
                return np.dtype(t)
    return np.dtype(_NP[(dt.kind, dt.bits)])


def as_tensor(x: Any, t: TensorType) -> np.ndarray:
    """Coerce a value to a tensor of type `t`, checking static dimensions."""
    arr = np.asarray(x, dtype=numpy_dtype(t.dtype))
    check_shape(arr, t)
    return arr


def check_shape(arr: np.ndarray, t: TensorType, what: str = "value") -> None:
    if arr.ndim != t.rank or any(
        d is not None and d != s for d, s in zip(t.shape, arr.shape, strict=True)
    ):
        raise ExecutionError(f"{what} has shape {format_np_shape(arr.shape)}, expected {t}")


def has_static_dims(t: Type, module: Any = None) -> bool:
    """Whether a value of type `t` has a static dimension to check at run time."""
    if module is not None:
        t = module.resolve(t)
    if isinstance(t, TensorType):
        return any(d is not None for d in t.shape)
    if isinstance(t, TupleType):
        return any(has_static_dims(e, module) for e in t.elements)
    if isinstance(t, ArrayType):
        return t.count > 0 and has_static_dims(t.element, module)
    return False


def check_conforms(value: Any, t: Type, module: Any = None, what: str = "value") -> None:
    """Raise unless the tensors in `value` have the static dimensions of `t` (a value
    of a type with `_` may flow where a static type is expected)."""
    if module is not None:
        t = module.resolve(t)
    if isinstance(t, TensorType):
        if isinstance(value, np.ndarray):
            check_shape(value, t, what)
    elif isinstance(t, TupleType) and isinstance(value, tuple):
        for i, (v, et) in enumerate(zip(value, t.elements, strict=True)):
            check_conforms(v, et, module, f"{what}, element {i},")
    elif isinstance(t, ArrayType) and isinstance(value, tuple):
        for i, v in enumerate(value):
            check_conforms(v, t.element, module, f"{what}, element {i},")


def format_np_shape(shape: tuple[int, ...]) -> str:
    return "<" + " x ".join(map(str, shape)) + ">" if shape else "scalar"


@dataclass(slots=True)
class EnumValue:
    case: str
    values: tuple[Any, ...] = ()


@dataclass(slots=True)
class Memory:
    """A block of `count` cells from one allocation."""

    cells: list[Any]
    freed: bool = False


@dataclass(frozen=True, slots=True)
class Pointer:
    memory: Memory
    index: int = 0
    path: tuple[Any, ...] = ()  # keys into the cell's aggregate

    def load(self) -> Any:
        cell = self._cell()
        for k in self.path:
            cell = get_element(cell, k)
        return cell

    def store(self, value: Any) -> None:
        self._cell()
        if not self.path:
            self.memory.cells[self.index] = value
        else:
            self.memory.cells[self.index] = set_element(
                self.memory.cells[self.index], self.path, value
            )

    def offset(self, n: int) -> Pointer:
        """The address `n` elements on: the next cell, or the next element of the
        innermost indexed aggregate for an element pointer."""
        if n == 0:
            return self
        if not self.path:
            return Pointer(self.memory, self.index + n)
        last = self.path[-1]
        if not isinstance(last, int):
            raise ExecutionError("cannot step past a struct field")
        return Pointer(self.memory, self.index, (*self.path[:-1], last + n))

    def check_live(self) -> None:
        if self.memory.freed:
            raise ExecutionError("use of deallocated memory")

    def _cell(self) -> Any:
        self.check_live()
        if not 0 <= self.index < len(self.memory.cells):
            raise ExecutionError(f"pointer index {self.index} out of bounds")
        return self.memory.cells[self.index]


@dataclass(slots=True)
class Box:
    memory: Memory
    refcount: int = 1


@dataclass(slots=True)
class Stack:
    """The AD tape: each item is a pushed value with its static type."""

    items: list[tuple[Any, Type]] = field(default_factory=list)


def _check_index(x: Any, key: Any) -> None:
    """Raise unless `key` selects an element of aggregate `x` (no wrap-around)."""
    if x is None:
        raise ExecutionError("element of an undefined value")
    if isinstance(x, dict):
        if key not in x:
            raise ExecutionError(f"no field '#{key}'")
        return
    if isinstance(x, np.ndarray) and x.ndim == 0:
        raise ExecutionError(f"cannot index the scalar {x}")
    size = len(x)
    if not 0 <= key < size:
        raise ExecutionError(f"index {key} out of bounds for size {size}")


def get_element(x: Any, key: Any) -> Any:
    _check_index(x, key)
    return x[key]


def set_element(x: Any, path: tuple[Any, ...], value: Any) -> Any:
    """A copy of aggregate `x` with the element at `path` replaced."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    _check_index(x, key)
    if isinstance(x, dict):
        out = dict(x)
        out[key] = set_element(x[key], rest, value)
        return out
    if isinstance(x, np.ndarray):
        out_arr = x.copy()
        out_arr[key] = set_element(x[key], rest, value)
        return out_arr
    items = list(x)
    items[key] = set_element(items[key], rest, value)
    return tuple(items)


def zero_value(t: Type, module: Any = None) -> Any:
    """The zero (or default) value of a type."""
    if module is not None:
        t = module.resolve(t)
    if isinstance(t, TensorType):
        if not t.is_static:
            raise ExecutionError(f"cannot create a value of dynamic type {t}")
        return np.zeros(tuple(d for d in t.shape if d is not None), numpy_dtype(t.dtype))
    if isinstance(t, TupleType):
        return tuple(zero_value(e, module) for e in t.elements)
    if isinstance(t, ArrayType):
        return tuple(zero_value(t.element, module) for _ in range(t.count))
    if isinstance(t, NominalType) and module is not None:
        decl = module.type_decls.get(t.name)
        if isinstance(decl, StructDecl):
            return {k: zero_value(ft, module) for k, ft in decl.fields}
    return None


@dataclass(frozen=True, slots=True)
class Jump:
    """A terminator's decision: continue at `block` with these arguments."""

    block: Any
    args: list[Any]


@dataclass(frozen=True, slots=True)
class Return:
    value: Any
