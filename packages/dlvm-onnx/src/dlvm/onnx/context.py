"""What an operator's converter sees: its node's inputs (IR values, constants known at
import, or shape vectors), attributes with ONNX's defaults, and a builder."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import dlvm.ir as ir
import onnx
from dlvm.ir import Builder, DenseLiteral, Value, constant
from dlvm.ir.runtime import numpy_dtype
from dlvm.ir.types import (
    BF16,
    BOOL,
    F16,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    DataType,
    TensorType,
    scalar,
)

from . import indices
from .errors import Invalid, Unsupported

# ONNX element types DLVM has
DTYPES: dict[int, DataType] = {
    onnx.TensorProto.FLOAT: F32, onnx.TensorProto.DOUBLE: F64, onnx.TensorProto.FLOAT16: F16,
    onnx.TensorProto.INT8: I8, onnx.TensorProto.INT16: I16, onnx.TensorProto.INT32: I32,
    onnx.TensorProto.INT64: I64, onnx.TensorProto.BOOL: BOOL, onnx.TensorProto.UINT8: U8,
    onnx.TensorProto.UINT16: U16, onnx.TensorProto.UINT32: U32, onnx.TensorProto.UINT64: U64,
    onnx.TensorProto.BFLOAT16: BF16,
}
NUMPY = {dt: numpy_dtype(dt).type for dt in DTYPES.values()}


@dataclass
class ShapeVector:
    """An int64 tensor computed from shapes at import: known sizes, None where a dimension
    is dynamic (`Shape` of a batch, then Gather, Concat, … of it), as a numpy object array.
    `origins`, of the same shape, says for a dynamic size copied from a tensor's shape which
    one: (the tensor's value, the axis) — what a tensor of that size is made from."""

    dims: Any
    origins: Any = None

    def origin(self, k: int) -> tuple[Value, int] | None:
        if self.origins is None:
            return None
        found = self.origins.reshape(-1)[k]
        return found if isinstance(found, tuple) else None


Input = Value | np.ndarray | ShapeVector | None


def dtype_of(array: np.ndarray) -> DataType:
    for dt, np_type in NUMPY.items():
        if array.dtype == np_type:
            return dt
    raise Unsupported(f"element type {array.dtype}")


def array_literal(b: Builder, array: np.ndarray, name: str | None = None) -> Value:
    """A constant array as IR: a scalar operand, a splat when every element is the same, or
    a dense literal (`name` makes even a scalar an instruction of that name)."""
    array = np.asarray(array)
    dt = dtype_of(array)
    if array.ndim == 0 and name is None:
        return constant(array.item(), scalar(dt))
    t = TensorType(array.shape, dt)
    flat = array.reshape(-1)
    if flat.size and (flat == flat[0]).all():  # NaN is never equal: stays dense
        return b.literal(flat[0].item(), t, name=name)
    return b.literal(DenseLiteral.of(array), t, name=name)


class NodeContext:
    def __init__(self, node: onnx.NodeProto, inputs: list[Input], b: Builder,
                 opset: int, module: ir.Module) -> None:
        self.node = node
        self.inputs = inputs
        self.b = b
        self.opset = opset
        self.module = module
        self.attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}

    # ------------------------------------------------------------ inputs

    def has(self, i: int) -> bool:
        return i < len(self.inputs) and self.inputs[i] is not None

    def value(self, i: int) -> Value:
        """Input i as an IR value (a constant becomes a literal)."""
        x = self.inputs[i]
        if isinstance(x, Value):
            return x
        if isinstance(x, ShapeVector):
            raise Unsupported(f"input {i} is a shape with dynamic sizes used as data")
        if x is None:
            raise Unsupported(f"input {i} is missing")
        return self.literal(x)

    def literal(self, array: np.ndarray) -> Value:
        return array_literal(self.b, array)

    def const(self, i: int) -> np.ndarray | None:
        x = self.inputs[i] if i < len(self.inputs) else None
        return x if isinstance(x, np.ndarray) else None

    def ints(self, i: int, what: str) -> list[int]:
        """A constant integer input (axes, shapes, pads), as a list."""
        x = self.const(i)
        if x is None:
            raise Unsupported(f"{what} (input {i}) must be known at import")
        return [int(v) for v in np.asarray(x).reshape(-1)]

    def attr(self, name: str, default: Any = None) -> Any:
        v = self.attrs.get(name, default)
        return v.decode() if isinstance(v, bytes) else v

    def only(self, **allowed: Callable[[Any], bool]) -> None:
        """Refuse attributes this converter does not implement (by value)."""
        for name, ok in allowed.items():
            if name in self.attrs and not ok(self.attr(name)):
                raise Unsupported(f"attribute {name}={self.attr(name)!r}")

    # ------------------------------------------------------------ types

    def type_of(self, v: Value) -> TensorType:
        t = self.module.resolve(v.type)
        assert isinstance(t, TensorType), t
        return t

    def rank(self, v: Value) -> int:
        return self.type_of(v).rank

    def axis(self, a: int, rank: int) -> int:
        """`a` (−1 is the last axis) from the start; out of range is refused (`Invalid`)."""
        return indices.axis(a, rank)

    def target_shape(self, i: int, what: str) -> tuple[list[int | None], list[Any]]:
        """Input i as a shape: its sizes (None: dynamic) and, for each dynamic one, where it
        comes from (`ShapeVector.origin`); refused when a dynamic size has no origin."""
        x = self.inputs[i] if i < len(self.inputs) else None
        if not isinstance(x, ShapeVector):
            return [int(v) for v in self.ints(i, what)], []
        sizes = [None if d is None else int(d) for d in x.dims.reshape(-1)]
        origins = [x.origin(k) for k in range(len(sizes))]
        if any(d is None and o is None for d, o in zip(sizes, origins, strict=True)):
            raise Unsupported(f"{what} (input {i}) has a size computed from a dynamic one")
        return sizes, origins

    def broadcast_to(self, x: Value, sizes: list[int | None], origins: list[Any]) -> Value:
        """x broadcast by numpy's rules to `sizes`, whose dynamic sizes are those of the
        tensors in `origins` (known only at run time): x plus zeros of each of them."""
        t = self.type_of(x)
        if t.dtype == BOOL:  # as 0/1 integers, then back
            one, zero = constant(1, scalar(I8)), constant(0, scalar(I8))
            wide = self.broadcast_to(self.b.select(one, zero, x), sizes, origins)
            return self.b.notEqual(wide, zero)
        rank = max(len(sizes), t.rank)
        static = [1 if d is None else d for d in sizes]
        out = self.broadcast_add(x, self.b.literal(0.0 if t.dtype.is_float else 0,
                                                   TensorType(tuple(static), t.dtype)))
        for k, (d, origin) in enumerate(zip(sizes, origins or [None] * len(sizes),
                                            strict=True)):
            if d is None:
                out = self.broadcast_add(out, self.zeros_along(origin, k + rank - len(sizes),
                                                               rank, t.dtype))
        return out

    def broadcast_add(self, x: Value, y: Value) -> Value:
        rx, ry = self.rank(x), self.rank(y)
        while 0 < rx < ry:
            x, rx = self.b.padShape(x, 0), rx + 1
        while 0 < ry < rx:
            y, ry = self.b.padShape(y, 0), ry + 1
        return self.b.add(x, y)

    def zeros_along(self, origin: tuple[Value, int], position: int, rank: int,
                    dtype: DataType) -> Value:
        """Zeros of `dtype` of size 1 along every axis of `rank` but `position`, where the
        size is that of the tensor `origin[0]` along its axis `origin[1]`."""
        source, axis = origin
        b = self.b
        src_t = self.type_of(source)
        zero = constant(0.0 if dtype.is_float else 0, scalar(dtype))
        flag = b.notEqual(source, source)  # any values (NaN too): only the shape matters
        zeros = b.select(zero, zero, flag)
        other = [k for k in range(src_t.rank) if k != axis]
        line = b.reduce(zeros, "add", zero, other) if other else zeros  # sums of zeros: 0
        for k in range(rank):
            if k != position:
                line = b.padShape(line, k)
        return line

    def number(self, x: float, like: Value) -> Value:
        dt = self.type_of(like).dtype
        return constant(float(x) if dt.is_float else int(x), scalar(dt))


# ------------------------------------------------------------------ index helpers
# shared by the converters that build indices (gathers, reductions, layout, attention)

Size = int | Value  # a dimension's size: known at import, or an i64 scalar at run time


def i64(n: int) -> Value:
    return constant(n, scalar(I64))


def size_of(c: NodeContext, v: Value, axis: int) -> Size:
    d = c.type_of(v).shape[axis]
    return d if d is not None else c.b.extract(c.b.shape(v), [axis])


def positions(c: NodeContext, x: Value, axis: int) -> Value:
    """0 … n−1 (i64) for x's size n along `axis`: a literal, or counted at run time."""
    n = c.type_of(x).shape[axis]
    if n is not None:
        return c.literal(np.arange(n, dtype=np.int64))
    ones = c.b.add(c.zeros_along((x, axis), 0, 1, I64), i64(1))
    return c.b.subtract(c.b.scan(ones, "add", [0]), i64(1))


def along(c: NodeContext, v: Value, axis: int, rank: int) -> Value:
    """A vector as a tensor of `rank` with its elements along `axis` (size 1 elsewhere)."""
    for _ in range(axis):
        v = c.b.padShape(v, 0)
    while c.rank(v) < rank:
        v = c.b.padShape(v, c.rank(v))
    return v


def same_sizes(c: NodeContext, pairs: list[tuple[Size, Size]], what: str) -> Value | None:
    """An i64 zero that is a run-time error unless the sizes of each pair are equal (their
    difference is an index into a vector of one element); a static pair is checked now."""
    b = c.b
    zero: Value | None = None
    for p, q in pairs:
        if isinstance(p, int) and isinstance(q, int):
            if p != q:
                raise Invalid(f"{what}: sizes {p} and {q} (they must be equal)")
            continue
        dynamic = q if isinstance(p, int) else p
        pv = i64(p) if isinstance(p, int) else p
        qv = i64(q) if isinstance(q, int) else q
        z = b.subtract(b.extract(b.padShape(dynamic, 0), [b.subtract(pv, qv)]), dynamic)
        zero = z if zero is None else b.add(zero, z)
    return zero
