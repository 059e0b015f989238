"""The DLVM type system.

Types are immutable and hashable, so they compare structurally and can be
interned. A scalar is a rank-0 tensor (`f32` is `TensorType((), F32)`).
A tensor dimension is an `int` or `None`, the dynamic dimension `_`.
Nominal types (`$Name`) are referenced by name; the module holds their
declarations (`StructDecl`, `EnumDecl`, `AliasDecl`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from .diagnostics import Location

Dim: TypeAlias = int | None
Shape: TypeAlias = tuple[Dim, ...]


class Type:
    """Base of every IR type."""

    __slots__ = ()

    @property
    def is_tensor(self) -> bool:
        return isinstance(self, TensorType)

    @property
    def is_void(self) -> bool:
        return isinstance(self, TupleType) and not self.elements


@dataclass(frozen=True, slots=True)
class DataType:
    """An element type: `bool`, `iN` (signed), `uN` (unsigned), `fN` or `bf16` (bfloat16:
    float32's exponent with an 8-bit significand)."""

    kind: str  # "bool" | "int" | "uint" | "float" | "bfloat"
    bits: int

    def __str__(self) -> str:
        if self.kind == "bool":
            return "bool"
        return _PREFIX[self.kind] + str(self.bits)

    @property
    def is_numeric(self) -> bool:
        return self.kind != "bool"

    @property
    def is_float(self) -> bool:
        return self.kind in ("float", "bfloat")

    @property
    def is_int(self) -> bool:
        """Signed or unsigned integers."""
        return self.kind in ("int", "uint")

    @property
    def is_signed_int(self) -> bool:
        """`iN`: what indices and counts are (a negative one is an error to report)."""
        return self.kind == "int"

    @property
    def is_unsigned(self) -> bool:
        return self.kind == "uint"

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    def can_widen_to(self, other: DataType) -> bool:
        """Whether every value of `self` is a value of `other`."""
        if self.kind == other.kind:
            return self.bits <= other.bits
        if self.kind == "bfloat":
            return other.kind == "float" and other.bits >= 32
        if self.kind == "uint":
            return other.kind == "int" and other.bits > self.bits
        return False


_PREFIX = {"int": "i", "uint": "u", "float": "f", "bfloat": "bf"}

BOOL = DataType("bool", 1)
F16 = DataType("float", 16)
F32 = DataType("float", 32)
F64 = DataType("float", 64)
BF16 = DataType("bfloat", 16)
I1 = DataType("int", 1)
I8 = DataType("int", 8)
I16 = DataType("int", 16)
I32 = DataType("int", 32)
I64 = DataType("int", 64)
U8 = DataType("uint", 8)
U16 = DataType("uint", 16)
U32 = DataType("uint", 32)
U64 = DataType("uint", 64)

FLOAT_WIDTHS = (16, 32, 64)
UINT_WIDTHS = (8, 16, 32, 64)
MAX_INT_WIDTH = 64
# The largest dimension, element count or array count: sizes are i64 at run time.
MAX_SIZE = 2**63 - 1


def parse_data_type(text: str) -> DataType | None:
    """`f32` → F32; returns None if `text` names no data type."""
    if text == "bool":
        return BOOL
    if text == "bf16":
        return BF16
    if len(text) >= 2 and text[0] in "ifu" and text[1:].isdigit() and text[1] != "0":
        bits = int(text[1:])
        if text[0] == "f":
            return DataType("float", bits) if bits in FLOAT_WIDTHS else None
        if text[0] == "u":
            return DataType("uint", bits) if bits in UINT_WIDTHS else None
        return DataType("int", bits) if 1 <= bits <= MAX_INT_WIDTH else None
    return None


def format_dim(d: Dim) -> str:
    return "_" if d is None else str(d)


def format_shape(shape: Shape) -> str:
    return " x ".join(format_dim(d) for d in shape)


@dataclass(frozen=True, slots=True)
class TensorType(Type):
    """`<d0 x … x dt>`; rank 0 prints as the bare data type."""

    shape: Shape
    dtype: DataType

    def __str__(self) -> str:
        if not self.shape:
            return str(self.dtype)
        return f"<{format_shape(self.shape)} x {self.dtype}>"

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_scalar(self) -> bool:
        return not self.shape

    @property
    def is_static(self) -> bool:
        return all(d is not None for d in self.shape)

    @property
    def count(self) -> int | None:
        """Element count, None when a dimension is dynamic."""
        n = 1
        for d in self.shape:
            if d is None:
                return None
            n *= d
        return n

    def with_shape(self, shape: Shape) -> TensorType:
        return TensorType(tuple(shape), self.dtype)

    def with_dtype(self, dtype: DataType) -> TensorType:
        return TensorType(self.shape, dtype)


def scalar(dtype: DataType) -> TensorType:
    return TensorType((), dtype)


def tensor(shape: Sequence[Dim], dtype: DataType) -> TensorType:
    return TensorType(tuple(shape), dtype)


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    elements: tuple[Type, ...]

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.elements)) + ")"


VOID = TupleType(())


@dataclass(frozen=True, slots=True)
class FunctionType(Type):
    arguments: tuple[Type, ...]
    result: Type

    def __str__(self) -> str:
        return "(" + ", ".join(map(str, self.arguments)) + f") -> {self.result}"


@dataclass(frozen=True, slots=True)
class ArrayType(Type):
    count: int
    element: Type

    def __str__(self) -> str:
        return f"[{self.count} x {self.element}]"


@dataclass(frozen=True, slots=True)
class PointerType(Type):
    pointee: Type

    def __str__(self) -> str:
        return f"*{self.pointee}"


@dataclass(frozen=True, slots=True)
class BoxType(Type):
    """A reference-counted box holding a `boxed` value."""

    boxed: Type

    def __str__(self) -> str:
        return f"box{{{self.boxed}}}"


@dataclass(frozen=True, slots=True)
class StackType(Type):
    """The AD tape: a last-in first-out stack of values of any type."""

    def __str__(self) -> str:
        return "stack"


STACK = StackType()


@dataclass(frozen=True, slots=True)
class NominalType(Type):
    """`$Name`: a struct, an enum or an alias declared in the module."""

    name: str

    def __str__(self) -> str:
        return f"${self.name}"


@dataclass(frozen=True, slots=True)
class InvalidType(Type):
    """The type of a value whose type rule failed; the verifier reports it."""

    def __str__(self) -> str:
        return "<<error>>"


INVALID = InvalidType()


# ---------------------------------------------------------------- nominal declarations


@dataclass(eq=False, slots=True)
class StructDecl:
    name: str
    fields: list[tuple[str, Type]]
    location: Location | None = None

    def field_type(self, key: str) -> Type | None:
        return next((t for k, t in self.fields if k == key), None)


@dataclass(eq=False, slots=True)
class EnumDecl:
    name: str
    cases: list[tuple[str, tuple[Type, ...]]]
    location: Location | None = None

    def case_types(self, case: str) -> tuple[Type, ...] | None:
        return next((ts for c, ts in self.cases if c == case), None)


@dataclass(eq=False, slots=True)
class AliasDecl:
    """`type $Name = T`, or an opaque alias when `target` is None."""

    name: str
    target: Type | None
    location: Location | None = None


TypeDecl: TypeAlias = StructDecl | EnumDecl | AliasDecl


# ---------------------------------------------------------------- shape rules


def broadcast_dims(a: Dim, b: Dim) -> Dim | bool:
    """One dimension pair under DLVM broadcasting; False when incompatible."""
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if a is None:
        return b
    if b is None:
        return a
    return False


def broadcast_shapes(a: Shape, b: Shape) -> Shape | None:
    """DLVM broadcasting: a scalar with anything, or equal ranks with size-1
    dimensions. No implicit rank promotion. None when incompatible."""
    if not a:
        return b
    if not b:
        return a
    if len(a) != len(b):
        return None
    out: list[Dim] = []
    for x, y in zip(a, b, strict=True):
        d = broadcast_dims(x, y)
        if d is False:
            return None
        out.append(d)  # type: ignore[arg-type]
    return tuple(out)


def dims_compatible(a: Dim, b: Dim) -> bool:
    """Equal, or unknown on either side (checked at run time)."""
    return a is None or b is None or a == b


def shapes_compatible(a: Shape, b: Shape) -> bool:
    return len(a) == len(b) and all(dims_compatible(x, y) for x, y in zip(a, b, strict=True))


def types_compatible(a: Type, b: Type) -> bool:
    """Structural equality where a dynamic dimension matches any size."""
    if a == b:
        return True
    if isinstance(a, TensorType) and isinstance(b, TensorType):
        return a.dtype == b.dtype and shapes_compatible(a.shape, b.shape)
    if isinstance(a, TupleType) and isinstance(b, TupleType):
        return len(a.elements) == len(b.elements) and all(
            types_compatible(x, y) for x, y in zip(a.elements, b.elements, strict=True)
        )
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return a.count == b.count and types_compatible(a.element, b.element)
    if isinstance(a, PointerType) and isinstance(b, PointerType):
        return types_compatible(a.pointee, b.pointee)
    if isinstance(a, BoxType) and isinstance(b, BoxType):
        return types_compatible(a.boxed, b.boxed)
    if isinstance(a, FunctionType) and isinstance(b, FunctionType):
        return (
            len(a.arguments) == len(b.arguments)
            and all(
                types_compatible(x, y) for x, y in zip(a.arguments, b.arguments, strict=True)
            )
            and types_compatible(a.result, b.result)
        )
    return False


def is_differentiable(t: Type) -> bool:
    """Differentiable types are tensors of a floating-point data type."""
    return isinstance(t, TensorType) and t.dtype.is_float
