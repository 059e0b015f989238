"""Rounding a float to a narrower float type in generated code, once and to nearest."""

from __future__ import annotations

from llvmlite import ir as ll

from .emit import declare
from .layout import F32, I32


def rounded(b: ll.IRBuilder, x: ll.Value, to: ll.Type) -> ll.Value:
    """`x` rounded once to the narrower float type `to` (to nearest, ties to even), as numpy
    rounds. A double becomes a half through single precision rounded to odd (the low bit
    records an inexact first step), which rounds exactly once since 24 ≥ 2·11 + 2 bits: the
    CPU back end would otherwise call a library function, `__truncdfhf2`, that the JIT does
    not link (and the process would crash)."""
    if x.type == to:
        return x
    if not (isinstance(to, ll.HalfType) and isinstance(x.type, ll.DoubleType)):
        return b.fptrunc(x, to)
    single = b.fptrunc(x, F32)
    back = b.fpext(single, x.type)
    bits = b.bitcast(single, I32)
    fabs = declare(b.module, "llvm.fabs.f64", x.type, [x.type])
    rounded_away = b.fcmp_ordered(">", b.call(fabs, [back]), b.call(fabs, [x]))
    toward_zero = b.select(rounded_away, b.sub(bits, ll.Constant(I32, 1)), bits)
    inexact = b.fcmp_unordered("!=", back, x)
    odd = b.select(inexact, b.or_(toward_zero, ll.Constant(I32, 1)), bits)
    return b.fptrunc(b.bitcast(odd, F32), to)
