"""How DLVM values are laid out in LLVM: one LLVM type per DLVM type.

- A scalar (rank-0 tensor) is an LLVM scalar: `iN` is held in its numpy storage width
  (i8/i16/i32/i64, so arithmetic wraps as numpy's does), `bool` is `i1` in registers and a
  byte in tensor buffers, `f16/f32/f64` are `half/float/double`, `bf16` is its 16 bits
  (`i16`; its arithmetic is rewritten to f32 before code generation, bfloat.py).
- A tensor of rank r ≥ 1 is `{ptr buf, ptr data, [r x i64] dims}`: `buf` is the
  reference-counted allocation that owns the elements, `data` the first element (a view, such
  as a row or a `slice`, points inside its owner), `dims` the sizes (constants when static).
  Elements are contiguous and row-major, as numpy's C order.
- Tuples and structs are LLVM structs of their elements, arrays LLVM arrays, by value.
- Enums (possibly recursive), boxes, stacks and functions are pointers. A DLVM pointer is
  `{ptr allocation, ptr address, i64 offset, i64 rank}`, so accesses can be checked against
  the allocation; a pointer to elements of a tensor held in memory (an `elementPointer` with
  tensor indices) has the address of the tensor, the byte offset of the elements in it (else
  -1) and the tensor's rank.

`managed` tells which values hold references that ownership must count (tensors of rank ≥ 1,
enums, pointers, stacks, and aggregates holding them).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np
from llvmlite import ir as ll

from dlvm.ir import Module
from dlvm.ir.runtime import numpy_dtype
from dlvm.ir.types import (
    ArrayType,
    BoxType,
    DataType,
    EnumDecl,
    FunctionType,
    NominalType,
    PointerType,
    StackType,
    StructDecl,
    TensorType,
    TupleType,
    Type,
)

I1 = ll.IntType(1)
I8 = ll.IntType(8)
I32 = ll.IntType(32)
I64 = ll.IntType(64)
PTR = ll.PointerType()
VOID = ll.VoidType()
F16 = ll.HalfType()
F32 = ll.FloatType()
F64 = ll.DoubleType()
# a DLVM pointer: (allocation, address, element byte offset or -1, rank of the tensor)
POINTER = ll.LiteralStructType([PTR, PTR, ll.IntType(64), ll.IntType(64)])


def scalar_type(dt: DataType) -> ll.Type:
    """The register type of one element."""
    if dt.is_bool:
        return I1
    if dt.kind == "bfloat":
        return ll.IntType(16)
    if dt.is_float:
        return {16: F16, 32: F32, 64: F64}[dt.bits]
    return ll.IntType(numpy_dtype(dt).itemsize * 8)


def element_type(dt: DataType) -> ll.Type:
    """The in-buffer type of one element (numpy's layout: a bool is a byte)."""
    return I8 if dt.is_bool else scalar_type(dt)


def element_size(dt: DataType) -> int:
    return int(np.dtype(numpy_dtype(dt)).itemsize)


@cache
def tensor_struct(rank: int) -> ll.LiteralStructType:
    return ll.LiteralStructType([PTR, PTR, ll.ArrayType(I64, rank)])


@dataclass
class Layout:
    """Type lowering for one module (nominal types need its declarations)."""

    module: Module

    def resolve(self, t: Type) -> Type:
        return self.module.resolve(t)

    def lower(self, t: Type) -> ll.Type:
        """The LLVM type that holds a value of DLVM type `t`."""
        t = self.resolve(t)
        if isinstance(t, TensorType):
            return scalar_type(t.dtype) if t.rank == 0 else tensor_struct(t.rank)
        if isinstance(t, TupleType):
            return ll.LiteralStructType([self.lower(e) for e in t.elements])
        if isinstance(t, ArrayType):
            return ll.ArrayType(self.lower(t.element), t.count)
        if isinstance(t, NominalType):
            decl = self.module.type_decls.get(t.name)
            if isinstance(decl, StructDecl):
                return ll.LiteralStructType([self.lower(ft) for _, ft in decl.fields])
            return PTR  # enums live on the heap; opaque values are pointers
        if isinstance(t, PointerType):
            return POINTER
        if isinstance(t, BoxType | StackType | FunctionType):
            return PTR
        raise TypeError(f"no LLVM layout for {t}")

    def managed(self, t: Type) -> bool:
        """Whether values of `t` hold counted references (see the module docstring)."""
        t = self.resolve(t)
        if isinstance(t, TensorType):
            return t.rank > 0
        if isinstance(t, TupleType):
            return any(self.managed(e) for e in t.elements)
        if isinstance(t, ArrayType):
            return t.count > 0 and self.managed(t.element)
        if isinstance(t, NominalType):
            decl = self.module.type_decls.get(t.name)
            if isinstance(decl, StructDecl):
                return any(self.managed(ft) for _, ft in decl.fields)
            return isinstance(decl, EnumDecl)
        return isinstance(t, PointerType | StackType)

    def is_enum(self, t: Type) -> bool:
        t = self.resolve(t)
        return isinstance(t, NominalType) and isinstance(
            self.module.type_decls.get(t.name), EnumDecl)

    def size_of(self, t: ll.Type, target_data: object) -> int:
        return int(t.get_abi_size(target_data))  # type: ignore[arg-type]
