"""Run-time values of the reference interpreter.

Tensors are numpy arrays (0-d for scalars) of the IR's data type; tuples and
arrays are Python tuples; structs are dicts keyed by field name; enums are
`EnumValue`; memory is a block of cells (`Memory`) addressed by `Pointer`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
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
       ("float", 64): np.float64, ("bfloat", 16): ml_dtypes.bfloat16,
       ("uint", 8): np.uint8, ("uint", 16): np.uint16, ("uint", 32): np.uint32,
       ("uint", 64): np.uint64}
BFLOAT16 = np.dtype(ml_dtypes.bfloat16)


def is_float_dtype(dt: np.dtype[Any]) -> bool:
    """numpy's floats and bfloat16 (which numpy files under kind 'V')."""
    return dt.kind == "f" or dt == BFLOAT16


def array_kind(dt: np.dtype[Any]) -> str:
    """numpy's one-letter kind, with bfloat16 a float ('f') rather than a record."""
    return "f" if dt == BFLOAT16 else dt.kind


def numpy_dtype(dt: DataType) -> np.dtype[Any]:
    """The numpy dtype that holds a DLVM data type (iN in the smallest signed int ≥ N bits)."""
    if dt.kind == "int":
        for bits, t in ((8, np.int8), (16, np.int16), (32, np.int32), (64, np.int64)):
            if dt.bits <= bits:
                return np.dtype(t)
    return np.dtype(_NP[(dt.kind, dt.bits)])


def sum_dtype(dt: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype a sum of `dt` values accumulates in: float64 for float16 and float32, so
    that a long sum neither stops growing (float32 adds nothing to 2^24 + 1) nor depends on
    its order beyond n·2^-53·Σ|x| before the one rounding to `dt`; any other dtype itself.
    Every target sums so (`reduce … by add`, `unbroadcast`); bfloat16 too, which numpy
    would otherwise sum in bfloat16."""
    return np.dtype(np.float64) if dt in (np.float16, np.float32, BFLOAT16) else np.dtype(dt)


def as_tensor(x: Any, t: TensorType) -> np.ndarray:
    """Coerce a value the program made itself to a tensor of type `t`, checking static
    dimensions (values from outside go through `convert_argument`)."""
    arr = np.asarray(x, dtype=numpy_dtype(t.dtype))
    check_shape(arr, t)
    return arr


def int_range(dt: DataType) -> tuple[int, int]:
    """The values an `iN` holds: [-2^(N-1), 2^(N-1) - 1] (i1 holds -1 and 0); a `uN`
    holds [0, 2^N - 1]."""
    if dt.is_unsigned:
        return 0, (1 << dt.bits) - 1
    half = 1 << (dt.bits - 1)
    return -half, half - 1


def convert_argument(x: Any, t: TensorType, what: str = "argument") -> np.ndarray:
    """An array from outside (a caller's argument, a file) as a tensor of type `t`.

    Only conversions that keep every value are made: numpy's `same_kind` rule (bool → int →
    float, and narrowing within a kind), with integers checked against the range of `iN` and
    floats checked not to overflow when narrowed. Everything else (1.7 → i8, NaN → bool,
    complex, objects) is refused with an `ExecutionError` naming `what`. Every target calls
    this, so that all of them accept the same arguments.
    """
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError, OverflowError) as e:
        raise ExecutionError(f"{what}: cannot convert to {t}: {e}") from None
    dst = numpy_dtype(t.dtype)
    if dst == BFLOAT16 and arr.dtype.kind == "V" and arr.dtype.itemsize == 2 \
            and arr.dtype.fields is None:
        arr = arr.view(BFLOAT16)  # numpy writes bfloat16 to .npy/.npz as raw 2-byte records
    src = arr.dtype
    src_kind, dst_kind = array_kind(src), array_kind(dst)
    if src_kind not in "biuf":
        raise ExecutionError(f"{what}: cannot pass an array of {_dtype_name(src)} as {t}")
    if src != dst and not _keeps_values(src, dst):
        raise ExecutionError(f"{what}: converting {_dtype_name(src)} to {t.dtype} could lose "
                             f"values; convert it explicitly")
    if dst_kind in "iu" and src_kind in "biu" and arr.size:
        lo, hi = int_range(t.dtype)
        low, high = int(arr.min()), int(arr.max())
        if low < lo or high > hi:
            bad = low if low < lo else high
            raise ExecutionError(f"{what}: the value {bad} does not fit in {t.dtype}")
    if src != dst:
        with np.errstate(all="ignore"):
            out = arr.astype(dst)
        if dst_kind == "f" and src_kind == "f" and _narrows(src, dst):
            overflow = np.isinf(out) & np.isfinite(arr)
            if overflow.any():
                bad = arr[overflow].flat[0]
                raise ExecutionError(f"{what}: the value {float(bad):g} overflows {t.dtype}")
        arr = out
    check_shape(arr, t, what)
    return arr


def _keeps_values(src: np.dtype[Any], dst: np.dtype[Any]) -> bool:
    """numpy's `same_kind` rule, with signed and unsigned integers one kind (their ranges
    are checked) and bfloat16 a float."""
    src_kind, dst_kind = array_kind(src), array_kind(dst)
    if src_kind in "iu" and dst_kind in "iu":
        return True
    if src_kind == "f" and dst_kind == "f":
        return True
    return "biuf".index(src_kind) <= "biuf".index(dst_kind) and (src_kind, dst_kind) != ("f", "i")


def _narrows(src: np.dtype[Any], dst: np.dtype[Any]) -> bool:
    """Whether a float conversion can overflow: to a smaller maximum."""
    return float(ml_dtypes.finfo(dst).max) < float(ml_dtypes.finfo(src).max)


def _dtype_name(dt: np.dtype[Any]) -> str:
    return {"c": "complex numbers", "O": "Python objects", "U": "strings", "S": "bytes",
            "M": "dates", "m": "time deltas", "V": "records"}.get(dt.kind, str(dt))


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


def read_only(arr: np.ndarray) -> np.ndarray:
    """A view of `arr` that cannot be written through. A caller's argument enters as one: the
    program never writes it, memory that keeps it makes a copy (`kept`), and a result that
    is one is copied for the caller (`flatten_results` copies read-only arrays)."""
    view = arr.view()
    view.flags.writeable = False
    return view


def kept(value: Any) -> Any:
    """`value` as memory keeps it: arrays of its own, which nobody else can write. An array
    that is read-only and owns its data is one already; any other (a caller's argument, a
    view, an array someone still holds) is copied, so that what a later call loads is what
    was stored, and a loaded value handed to Python is copied again on the way out."""
    if isinstance(value, np.ndarray):
        if not value.flags.writeable and value.base is None:
            return value
        out = value.copy()
        out.flags.writeable = False
        return out
    if isinstance(value, tuple):
        return tuple(kept(v) for v in value)
    if isinstance(value, dict):
        return {k: kept(v) for k, v in value.items()}
    if isinstance(value, EnumValue):
        return EnumValue(value.case, tuple(kept(v) for v in value.values))
    return value


class Memory:
    """A block of `count` cells from one allocation, each holding a value `kept` for it.

    Cells come into being as they are written: `written` maps a cell's index to its value,
    and a cell never written reads as the block's `zero`. An allocation costs the same
    whatever its count — a billion cells are a number until a program stores to them, and
    a program that stores to many of them runs as many instructions, which the
    interpreter's step and time limits bound.
    """

    __slots__ = ("count", "freed", "written", "zero")

    def __init__(self, count: int, zero: Any) -> None:
        if count < 0:
            raise ExecutionError(f"allocation of a negative count {count}")
        self.count = count
        self.zero = kept(zero)
        self.written: dict[int, Any] = {}
        self.freed = False

    @classmethod
    def holding(cls, value: Any) -> Memory:
        """One cell holding `value` (a box's contents, a global variable)."""
        return cls(1, value)

    def read(self, index: int) -> Any:
        self.check_index(index)
        return self.written.get(index, self.zero)

    def write(self, index: int, value: Any) -> None:
        self.check_index(index)
        self.written[index] = kept(value)

    def check_index(self, index: int) -> None:
        if self.freed:
            raise ExecutionError("use of deallocated memory")
        if not 0 <= index < self.count:
            raise ExecutionError(f"pointer index {index} out of bounds")

    def free(self) -> None:
        """Mark the block freed (a later access is an error) and drop what it held."""
        self.freed = True
        self.written.clear()

    def copy_cells(self, start: int, target: Memory, target_start: int, n: int) -> None:
        """Cells start…start+n−1 to target_start… of `target` (the caller checked both
        ranges), each read before any is written: the work is that of the cells either
        side holds written, not of `n`."""
        moved = self._written_in(start, n)
        for i in target._written_in(target_start, n):
            if i - target_start + start not in moved:
                del target.written[i]  # its source was never written: it reads as zero
        for i, v in moved.items():
            target.written[i - start + target_start] = v

    def _written_in(self, start: int, n: int) -> dict[int, Any]:
        if n <= len(self.written):
            return {i: self.written[i] for i in range(start, start + n) if i in self.written}
        return {i: v for i, v in self.written.items() if start <= i < start + n}


@dataclass(frozen=True, slots=True)
class Pointer:
    memory: Memory
    index: int = 0
    path: tuple[Any, ...] = ()  # keys into the cell's aggregate

    def load(self) -> Any:
        cell = self.memory.read(self.index)
        for k in self.path:
            cell = get_element(cell, k)
        return cell

    def store(self, value: Any) -> None:
        if not self.path:
            self.memory.write(self.index, value)
        else:
            self.memory.write(self.index, set_element(
                self.memory.read(self.index), self.path, value))

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
        new = set_element(x[key], rest, value)
        if np.shape(new) != np.shape(x[key]):  # the types say equal: never broadcast
            raise ExecutionError(f"an element of shape {format_np_shape(np.shape(new))} "
                                 f"cannot replace one of shape "
                                 f"{format_np_shape(np.shape(x[key]))}")
        out_arr[key] = new
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
        n = held_elements(t, module)
        if n > MAX_ARRAY_ELEMENTS:
            raise ExecutionError(f"a value of type {t} holds {n} elements, more than the "
                                 f"interpreter keeps in arrays ({MAX_ARRAY_ELEMENTS}); use a "
                                 "tensor type")
        return tuple(zero_value(t.element, module) for _ in range(t.count))
    if isinstance(t, NominalType) and module is not None:
        decl = module.type_decls.get(t.name)
        if isinstance(decl, StructDecl):
            return {k: zero_value(ft, module) for k, ft in decl.fields}
    return None


# Array values are tuples of their elements, one Python object each: a zero value of more
# elements than this is refused rather than built for minutes (a tensor holds any number).
MAX_ARRAY_ELEMENTS = 1 << 24


def held_elements(t: Type, module: Any = None) -> int:
    """The Python objects a value of type `t` is made of (a tensor counts as one)."""
    if module is not None:
        t = module.resolve(t)
    if isinstance(t, ArrayType):
        return t.count * held_elements(t.element, module) if t.count else 0
    if isinstance(t, TupleType):
        return sum(held_elements(e, module) for e in t.elements)
    if isinstance(t, NominalType) and module is not None:
        decl = module.type_decls.get(t.name)
        if isinstance(decl, StructDecl):
            return sum(held_elements(ft, module) for _, ft in decl.fields)
    return 1


@dataclass(frozen=True, slots=True)
class Jump:
    """A terminator's decision: continue at `block` with these arguments."""

    block: Any
    args: list[Any]


@dataclass(frozen=True, slots=True)
class Return:
    value: Any
