"""The boundary between Python and native code: an entry function per specialization.

    i32 @dlvm.entry.N(ptr ctx, ptr args, ptr results)

Each argument is flattened (tuples depth-first) into *leaves*, each a numpy array (0-d for
a scalar), passed as the array object itself: the entry function reads the address of its
elements and its sizes from the object (`arrays.py`). `results` is an array of 8-byte slots
that Python reads: a scalar takes one slot, holding the value in its own type (a bool as a
byte); a tensor of rank r its buffer, the address of its elements, and its r sizes.

The entry function wraps the caller's arrays as tensors it borrows for the call (so it never
frees or updates them in place, and copies one that memory keeps past the call), calls the
function, and on success writes the result out; Python then owns the result's buffers. Only
tensors (and tuples of them) cross the boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir as ll

from dlvm.ir.types import ArrayType, TensorType, TupleType, Type

from . import arrays
from .emit import alloca, byte_offset, gep, i32, i64
from .function import CompileError, CompileUnit, make_tensor
from .layout import I1, I8, I32, I64, PTR, scalar_type
from .specialize import Spec
from .support import CTX_DEPTH, CTX_SITE


@dataclass(frozen=True)
class Leaf:
    """One tensor of a flattened argument list or result."""

    type: TensorType
    slot: int


def flatten(t: Type, module: object, what: str) -> list[TensorType]:
    """The tensors of a type, tuples and arrays depth-first."""
    t = module.resolve(t)  # type: ignore[attr-defined]
    if isinstance(t, TensorType):
        return [t]
    if isinstance(t, TupleType):
        return [x for e in t.elements for x in flatten(e, module, what)]
    if isinstance(t, ArrayType):
        return [x for _ in range(t.count) for x in flatten(t.element, module, what)]
    raise CompileError(f"{what} has type '{t}', which cannot cross between Python and "
                       "native code (only tensors and tuples of them can)")


def layout_leaves(types: list[TensorType], result: bool) -> tuple[list[Leaf], int]:
    leaves, slot = [], 0
    for t in types:
        leaves.append(Leaf(t, slot))
        slot += 1 if t.rank == 0 else (2 if result else 1) + t.rank
    return leaves, slot


@dataclass
class EntryABI:
    symbol: str
    args: list[Leaf]
    arg_slots: int
    results: list[Leaf]
    result_slots: int
    result_is_tuple: bool


def build_entry(unit: CompileUnit, spec: Spec) -> EntryABI:
    module = unit.module
    fn = spec.fn
    arg_types = [flatten(t, module, f"argument {k} of '@{fn.name}'")
                 for k, t in enumerate(spec.args)]
    result_t = spec.result if spec.result is not None else fn.type_.result
    result_types = flatten(result_t, module, f"the result of '@{fn.name}'")
    args, arg_slots = layout_leaves([x for ts in arg_types for x in ts], result=False)
    results, result_slots = layout_leaves(result_types, result=True)
    symbol = unit.fresh(f"dlvm.entry.{unit.llmod.name}")
    offsets = arrays.layout()
    entry = ll.Function(unit.llmod, ll.FunctionType(I32, [PTR, PTR] + [PTR] * len(args)),
                        symbol)
    b = ll.IRBuilder(entry.append_basic_block("entry"))
    ctx, result_ptr, *objects = entry.args
    b.store(i64(0), unit.rt.slot(b, ctx, CTX_DEPTH))
    b.store(i64(0), unit.rt.slot(b, ctx, CTX_SITE))
    leaves = iter(args)

    def build(t: Type) -> ll.Value:
        t = module.resolve(t)
        if isinstance(t, TensorType):
            leaf = next(leaves)
            obj = objects[args.index(leaf)]
            data = b.load(byte_offset(b, obj, offsets.data), typ=PTR)
            if t.rank == 0:
                st = scalar_type(t.dtype)
                v = b.load(data, typ=I8 if st == I1 else st)
                return b.trunc(v, I1) if st == I1 else v
            sizes = b.load(byte_offset(b, obj, offsets.dims), typ=PTR)
            dims = [i64(d) if d is not None else b.load(gep(b, I64, sizes, i64(k)), typ=I64)
                    for k, d in enumerate(leaf.type.shape)]
            return make_tensor(b, unit.rt.borrowed, data, dims)
        lt = unit.layout.lower(t)
        value: ll.Value = ll.Constant(lt, None)
        parts = t.elements if isinstance(t, TupleType) else [t.element] * t.count  # type: ignore[union-attr]
        for k, e in enumerate(parts):
            value = b.insert_value(value, build(e), k)
        return value

    values = [build(t) for t in spec.args]
    llfn = unit.function(spec)
    out = alloca(b, unit.layout.lower(fn.type_.result))
    status = b.call(llfn, [ctx, out, *values])
    ok = b.icmp_signed("==", status, i32(0))
    with b.if_then(ok):
        result = b.load(out, typ=unit.layout.lower(fn.type_.result))
        out_leaves = iter(results)

        def store(v: ll.Value, t: Type) -> None:
            t = module.resolve(t)
            if isinstance(t, TensorType):
                leaf = next(out_leaves)
                slot = gep(b, I64, result_ptr, i64(leaf.slot))
                if t.rank == 0:
                    b.store(b.zext(v, I8) if v.type == I1 else v, slot)
                    return
                b.store(b.extract_value(v, 0), slot)
                b.store(b.extract_value(v, 1), gep(b, I64, result_ptr, i64(leaf.slot + 1)))
                for k in range(t.rank):
                    b.store(b.extract_value(v, [2, k]),
                            gep(b, I64, result_ptr, i64(leaf.slot + 2 + k)))
                return
            parts = t.elements if isinstance(t, TupleType) else [t.element] * t.count  # type: ignore[union-attr]
            for k, e in enumerate(parts):
                store(b.extract_value(v, k), e)

        store(result, fn.type_.result)
    b.ret(status)
    is_tuple = isinstance(module.resolve(fn.type_.result), TupleType)
    return EntryABI(symbol, args, arg_slots, results, result_slots, is_tuple)


__all__ = ["EntryABI", "Leaf", "build_entry", "flatten"]
