"""`bf16` on the LLVM targets: 16-bit patterns in memory and registers, arithmetic in f32.

llvmlite has no `bfloat` type, and a CPU without bf16 instructions would make LLVM call
`__truncsfbf2`, which MCJIT leaves unresolved. So a `bf16` value is held as its bits (`i16`),
and `legalized` rewrites, on a copy of the module, every instruction that computes with bf16
(element-wise arithmetic, compares, reductions by a built-in combinator, `dot`, `convolve`,
`random`, built-in calls) into the same instruction on f32, its bf16 operands widened and
its bf16 result rounded back:

    %y = add %a: <4 x bf16>, %b: <4 x bf16>
becomes
    %a32 = dataTypeCast %a: <4 x bf16> to f32
    %b32 = dataTypeCast %b: <4 x bf16> to f32
    %y32 = add %a32: <4 x f32>, %b32: <4 x f32>
    %y = dataTypeCast %y32: <4 x f32> to bf16

— what `ml_dtypes` does for the interpreter: each operation computed in float32 and rounded
once to the nearest bf16, ties to even. The passes that run next fuse the casts into the
kernels around them. What moves bf16 values without computing (layout, shape casts,
`select`, literals, calls, branches, memory) handles the bits as they are; `dataTypeCast`
converts them with integer operations (`widen`, `narrow`).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from llvmlite import ir as ll

import dlvm.ir as ir
from dlvm.ir import Builder, Function, Instruction, LiteralValue, Value
from dlvm.ir.types import BF16, F32, F64, ArrayType, FunctionType, TensorType, TupleType, Type

I16 = ll.IntType(16)
I32 = ll.IntType(32)
FLOAT = ll.FloatType()
COMPUTING_CATEGORIES = ("reduction", "linear algebra", "random")


def bits_of(value: float) -> int:
    """The bf16 nearest `value` (ties to even), as its 16 bits."""
    return int(np.array(value, np.float32).astype(ml_dtypes.bfloat16).view(np.uint16))


def widen(b: ll.IRBuilder, bits: ll.Value) -> ll.Value:
    """The f32 of a bf16's bits: exact (the bits become the float's upper half)."""
    return b.bitcast(b.shl(b.zext(bits, I32), ll.Constant(I32, 16)), FLOAT)


def narrow(b: ll.IRBuilder, x: ll.Value) -> ll.Value:
    """An f32 rounded to the nearest bf16, ties to even, as bits: u + 0x7FFF + (bit 16 of u),
    then the upper half; a NaN stays a (quiet) NaN; overflow gives ±inf."""
    u = b.bitcast(x, I32)
    odd = b.and_(b.lshr(u, ll.Constant(I32, 16)), ll.Constant(I32, 1))
    rounded = b.lshr(b.add(u, b.add(ll.Constant(I32, 0x7FFF), odd)), ll.Constant(I32, 16))
    quiet = b.or_(b.lshr(u, ll.Constant(I32, 16)), ll.Constant(I32, 0x40))
    nan = b.fcmp_unordered("uno", x, x)
    return b.trunc(b.select(nan, quiet, rounded), I16)


# ---------------------------------------------------------------- the rewrite


def has_bf16(t: Type, module: ir.Module) -> bool:
    t = module.resolve(t)
    if isinstance(t, TensorType):
        return t.dtype == BF16
    if isinstance(t, TupleType):
        return any(has_bf16(e, module) for e in t.elements)
    if isinstance(t, ArrayType):
        return has_bf16(t.element, module)
    if isinstance(t, FunctionType):
        return any(has_bf16(e, module) for e in (*t.arguments, t.result))
    return False


def uses_bf16(module: ir.Module) -> bool:
    return any(has_bf16(fn.type, module) or any(
        has_bf16(a.type, module) for block in fn.blocks for a in block.arguments) or any(
        has_bf16(i.type, module) for i in fn.instructions()) for fn in module.functions)


def computes(inst: Instruction) -> bool:
    """Whether `inst` computes new values from its operands' (rather than moving them)."""
    op = inst.op
    if inst.opcode in ("select", "dataTypeCast"):
        return False
    if inst.opcode in ("reduce", "scan", "reduceWindow"):
        return not isinstance(inst.combinator, Function)  # a function takes bf16 as it is
    return "elementwise" in op.traits or op.category in COMPUTING_CATEGORIES or \
        inst.opcode == "builtin"


def legalized(module: ir.Module) -> ir.Module:
    """`module`, or a copy with its bf16 arithmetic done in f32 (see the module docstring)."""
    if not uses_bf16(module):
        return module
    copy = ir.clone(module)
    for fn in copy.functions:
        rewrite_function(fn, copy)
    return copy


def rewrite_function(fn: Function, module: ir.Module) -> None:
    rounded: dict[Value, Value] = {}  # a rewritten instruction → its result rounded to bf16
    made: set[Instruction] = set()  # the casts and checks the rewrite adds
    for block in fn.blocks:
        for inst in list(block.instructions):  # (what the rewrite adds is not visited)
            inst.replace_uses(rounded)
            if computes(inst) and (has_bf16(inst.type, module) or any(
                    has_bf16(v.type, module) for v in inst.operands)):
                before = set(block.instructions)
                result = rewrite(inst, module)
                made.update(i for i in block.instructions if i not in before)
                if result is not None:
                    rounded[inst] = result
    if rounded:  # uses that come before their definition in block order (loops)
        for block in fn.blocks:
            for inst in block.instructions:
                if inst not in made:
                    inst.replace_uses(rounded)


def rewrite(inst: Instruction, module: ir.Module) -> Value | None:
    """`inst` on f32 (f64 for `random`, whose draw is rounded once from float64, as the
    interpreter's); returns its result rounded back to bf16 (None if it gives no bf16)."""
    assert inst.block is not None
    wide = F64 if inst.opcode == "random" else F32
    b = Builder(module)
    b.position_before(inst)
    widened: dict[Value, Value] = {}

    def widen_operand(v: Any) -> Any:
        if not isinstance(v, Value):
            return v
        t = module.resolve(v.type)
        if not (isinstance(t, TensorType) and t.dtype == BF16):
            return v
        if isinstance(v, LiteralValue):
            return LiteralValue(v.literal, t.with_dtype(wide))
        if v not in widened:
            widened[v] = b.dataTypeCast(v, wide)
        return widened[v]

    inst.map_operands(widen_operand)
    old = module.resolve(inst.type)
    inst.type = inst.op.infer(inst, module)
    if not (isinstance(old, TensorType) and old.dtype == BF16):
        return None
    block = inst.block
    b.position_before(block.instructions[block.instructions.index(inst) + 1])
    out = b.dataTypeCast(inst, BF16)
    if inst.opcode == "random":  # a draw that rounds up to the upper bound is the lower one
        lower, upper = inst.lower, inst.upper
        at_top = b.greaterThanOrEqual(b.dataTypeCast(out, F64), upper)
        low = b.dataTypeCast(lower, BF16) if not isinstance(lower, LiteralValue) else \
            LiteralValue(lower.literal, module.resolve(lower.type).with_dtype(BF16))
        out = b.select(low, out, at_top)
    return out
