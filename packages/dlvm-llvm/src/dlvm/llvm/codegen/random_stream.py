"""`random`'s counter-based stream in LLVM IR, for the CPU and the GPU alike.

The same arithmetic as `dlvm.ir.random_stream` (which the interpreter runs): element `i` of
the stream of `key` is SplitMix64's finalizer of `key + (i + 1)·γ`, and its bits become a
value in [lower, upper) of the result's data type. Float steps are separate `fmul` and
`fadd` without fast-math flags, so no back end fuses them into a multiply-add (NVPTX writes
them as `mul.rn`/`add.rn`, which `ptxas` keeps apart): every target rounds as numpy does.
"""

from __future__ import annotations

from llvmlite import ir as ll

from dlvm.ir.random_stream import GAMMA, MIX1, MIX2
from dlvm.ir.types import DataType

from .emit import declare
from .layout import F64, I1, I64, scalar_type
from .rounding import rounded


def _u64(x: int) -> ll.Constant:
    return ll.Constant(I64, x - (1 << 64) if x >= 1 << 63 else x)


def mix(b: ll.IRBuilder, z: ll.Value) -> ll.Value:
    """SplitMix64's finalizer."""
    z = b.xor(z, b.lshr(z, ll.Constant(I64, 30)))
    z = b.mul(z, _u64(MIX1))
    z = b.xor(z, b.lshr(z, ll.Constant(I64, 27)))
    z = b.mul(z, _u64(MIX2))
    return b.xor(z, b.lshr(z, ll.Constant(I64, 31)))


def element_bits(b: ll.IRBuilder, key: ll.Value, index: ll.Value) -> ll.Value:
    """The 64 bits of element `index` of the stream of `key`."""
    return mix(b, b.add(key, b.mul(b.add(index, ll.Constant(I64, 1)), _u64(GAMMA))))


def widened(b: ll.IRBuilder, v: ll.Value, dtype: DataType) -> ll.Value:
    """A bound as float64 (floats) or int64 (integers), where the arithmetic happens."""
    if dtype.is_float:
        return v if dtype.bits == 64 else b.fpext(v, F64)
    if dtype.bits == 64:
        return v
    return b.zext(v, I64) if dtype.is_unsigned else b.sext(v, I64)


def bad_range(b: ll.IRBuilder, lower: ll.Value, upper: ll.Value, dtype: DataType
              ) -> ll.Value:
    """Whether [lower, upper) is empty (or, for floats, wider than float64 holds)."""
    if not dtype.is_float:
        return (b.icmp_unsigned if dtype.is_unsigned else b.icmp_signed)(">=", lower, upper)
    lo, hi = widened(b, lower, dtype), widened(b, upper, dtype)
    span = b.fsub(hi, lo)
    fabs = declare(b.module, "llvm.fabs.f64", F64, [F64])
    finite = b.fcmp_ordered("<", b.call(fabs, [span]), ll.Constant(F64, float("inf")))
    return b.not_(b.and_(b.fcmp_ordered("<", lower, upper), finite))


def value_from_bits(b: ll.IRBuilder, bits: ll.Value, lower: ll.Value, upper: ll.Value,
                    dtype: DataType) -> ll.Value:
    """The value of `dtype` in [lower, upper) that `bits` stand for (bounds of `dtype`)."""
    lo, hi = widened(b, lower, dtype), widened(b, upper, dtype)
    if dtype.is_float:
        u = b.fmul(b.uitofp(b.lshr(bits, ll.Constant(I64, 11)), F64),
                   ll.Constant(F64, 2.0 ** -53))
        v = b.fadd(lo, b.fmul(b.fsub(hi, lo), u))
        out = rounded(b, v, scalar_type(dtype))
        return b.select(b.fcmp_ordered(">=", out, upper), lower, out)
    span = b.sub(hi, lo)
    # an empty range is reported where the caller checks `bad_range`; a kernel computes
    # the value anyway, and must not divide by zero (a trap on the CPU)
    span = b.select(b.icmp_unsigned("==", span, ll.Constant(I64, 0)), ll.Constant(I64, 1), span)
    v = b.add(b.urem(bits, span), lo)
    st = scalar_type(dtype)
    if st == I1:
        return b.trunc(v, I1)
    return v if dtype.bits == 64 else b.trunc(v, st)
