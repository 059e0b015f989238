"""`bf16` on the LLVM targets: 16-bit patterns in memory and registers, arithmetic in f32.

llvmlite has no `bfloat` type, and a CPU without bf16 instructions would make LLVM call
`__truncsfbf2`, which MCJIT leaves unresolved. So a `bf16` value is held as its bits (`i16`),
and `legalized` rewrites, on a copy of the module, every instruction that computes with bf16
into the same instruction on f32, its bf16 operands widened and its bf16 result rounded back
(`dlvm.ir.precision.recompute`) — what `ml_dtypes` does for the interpreter: each operation
computed in float32 and rounded once to the nearest bf16, ties to even. The passes that run
next fuse the casts into the kernels around them. What moves bf16 values without computing
(layout, shape casts, `select`, literals, calls, branches, memory) handles the bits as they
are; `dataTypeCast` converts them with integer operations (`widen`, `narrow`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from llvmlite import ir as ll

import dlvm.ir as ir
from dlvm.ir import Builder, Instruction, Value
from dlvm.ir.precision import module_mentions, recompute
from dlvm.ir.types import BF16, F32, F64, DataType

I16 = ll.IntType(16)
I32 = ll.IntType(32)
FLOAT = ll.FloatType()


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


def legalized(module: ir.Module, keep: frozenset[str] = frozenset()) -> ir.Module:
    """`module`, or a copy with its bf16 arithmetic done in f32 (see the module docstring),
    except for the instructions named in `keep`, which the target computes on bf16 itself
    (`dot` on a GPU: tensor cores take bf16 and sum in f32)."""
    if not module_mentions(module, BF16):
        return module
    copy = ir.clone(module)

    def compute_of(inst: Instruction) -> DataType | None:
        if inst.opcode in keep:
            return None
        return F64 if inst.opcode == "random" else F32

    for fn in copy.functions:
        recompute(fn, copy, BF16, compute_of, top_of_range)
    return copy


def top_of_range(b: Builder, inst: Instruction, out: Value) -> Value:
    """`random` is drawn in f64 and rounded once, as the interpreter does; a draw that
    rounds up to the upper bound is the lower one."""
    if inst.opcode != "random":
        return out
    lower, upper = inst.lower, inst.upper  # f64 now
    at_top = b.greaterThanOrEqual(b.dataTypeCast(out, F64), upper)
    return b.select(b.dataTypeCast(lower, BF16), out, at_top)
