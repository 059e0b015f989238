"""Linear quantization: `QuantizeLinear`, `DequantizeLinear` and the integer products
(`MatMulInteger`, `ConvInteger`, `QLinearMatMul`, `QLinearConv`).

A quantized tensor q stands for scale · (q − zero_point). Scales and zero points are scalars
(per tensor), vectors along `axis` (per axis) or blocks of `block_size` along `axis`; each is
shaped to broadcast against the data first. The integer products are exact: the operands,
less their zero points, are multiplied in float64 (exact below 2^53) and the sum converted to
int32, as ONNX's int32 accumulation gives it. Rounding is to the nearest even (`rint`), and
results saturate at the quantized type's range, as ONNX's reference runtime does.
"""

from __future__ import annotations

import numpy as np

from dlvm.ir import Value
from dlvm.ir.runtime import numpy_dtype
from dlvm.ir.types import F32, F64, I32, U8, DataType

from .context import DTYPES, NodeContext
from .errors import Invalid, Unsupported
from .ops import binary, converts, matmul, spatial_padding

QUANTIZED = ("int8", "uint8", "int16", "uint16", "int32", "uint32")


def shaped(c: NodeContext, param: Value, x: Value, axis: int, block: int) -> Value:
    """A scale or zero point shaped to broadcast against x: a scalar as it is, a vector
    along `axis`, or blocks of `block` elements along `axis` each repeated to x's size."""
    t, xt = c.type_of(param), c.type_of(x)
    rank = xt.rank
    if t.rank == 0 or (t.rank == 1 and t.shape[0] == 1 and not block):
        return single(c, param)
    axis = c.axis(axis, rank)
    if not block:
        if t.rank != 1:
            raise Invalid(f"a per-axis scale or zero point must be a vector, found {t}")
        return c.b.shapeCast(param, [t.shape[0] if k == axis else 1 for k in range(rank)])
    size, blocks = xt.shape[axis], t.shape[axis]
    if size is None or blocks is None or t.rank != rank:
        raise Unsupported("blocked quantization with dynamic sizes")
    if -(-size // block) != blocks:
        raise Invalid(f"{blocks} blocks of {block} do not cover {size} elements")
    # repeat each block's value `block` times: a product with a 0/1 matrix [blocks x size]
    spread = np.zeros((blocks, size), numpy_dtype(t.dtype) if t.dtype.is_float else np.float64)
    for j in range(size):
        spread[j // block, j] = 1
    value = param if t.dtype.is_float else c.b.dataTypeCast(param, F64)
    order = [k for k in range(rank) if k != axis] + [axis]
    moved = c.b.transpose(value, order) if order != list(range(rank)) else value
    out = matmul(c, moved, c.literal(spread))
    back = [order.index(k) for k in range(rank)]
    return c.b.transpose(out, back) if back != list(range(rank)) else out


def single(c: NodeContext, v: Value) -> Value:
    """A one-element vector as a scalar (ONNX allows either for a per-tensor parameter)."""
    t = c.type_of(v)
    return c.b.shapeCast(v, []) if t.rank == 1 and t.shape[0] == 1 else v


def as_float(c: NodeContext, v: Value, dt: DataType) -> Value:
    return v if c.type_of(v).dtype == dt else c.b.dataTypeCast(v, dt)


def wider_float(*dts: DataType) -> DataType:
    """numpy's promotion of floats: the widest (float16 with float32 is float32)."""
    return max(dts, key=lambda d: (d.bits, d.kind == "float"))


def saturated(c: NodeContext, v: Value, to: DataType) -> Value:
    """v (integral floats) clipped to `to`'s range and converted"""
    info = np.iinfo(numpy_dtype(to))
    lo, hi = c.number(int(info.min), v), c.number(int(info.max), v)
    return c.b.dataTypeCast(c.b.max(c.b.min(v, hi), lo), to)


def axis_and_block(c: NodeContext) -> tuple[int, int]:
    """`axis` (checked where a parameter is per axis) and `block_size`"""
    return int(c.attr("axis", 1)), int(c.attr("block_size", 0))


@converts("QuantizeLinear")
def _quantize(c: NodeContext) -> list[Value]:
    """y = saturate(rint(x / scale) + zero_point)"""
    x, scale = c.value(0), c.value(1)
    zp = c.value(2) if c.has(2) else None
    named = c.attr("output_dtype", 0)
    to = c.type_of(zp).dtype if zp is not None else DTYPES.get(named) if named else U8
    if to is None or str(numpy_dtype(to)) not in QUANTIZED:
        raise Unsupported(f"QuantizeLinear to {to or named} (integer targets only)")
    if c.attr("precision", 0):
        raise Unsupported("QuantizeLinear with a precision attribute")
    axis, block = axis_and_block(c)
    dt = wider_float(c.type_of(x).dtype, c.type_of(scale).dtype)
    q = c.b.rint(c.b.divide(as_float(c, x, dt), as_float(c, shaped(c, scale, x, axis, block),
                                                          dt)))
    if zp is not None:
        wide = F64 if dt.bits < 32 or to.bits > 16 else dt  # zero points exactly
        q = c.b.add(as_float(c, q, wide), as_float(c, shaped(c, zp, x, axis, block), wide))
    return [saturated(c, q, to)]


@converts("DequantizeLinear")
def _dequantize(c: NodeContext) -> list[Value]:
    """y = (x − zero_point) · scale, in float32 (or the scale's wider type)"""
    x, scale = c.value(0), c.value(1)
    if not c.type_of(x).dtype.is_int:
        raise Unsupported(f"DequantizeLinear of {c.type_of(x).dtype} (integers only)")
    axis, block = axis_and_block(c)
    dt = wider_float(F32, c.type_of(scale).dtype)
    dx = as_float(c, x, F32)
    if c.has(2):
        dx = c.b.subtract(dx, as_float(c, shaped(c, c.value(2), x, axis, block), F32))
    y = c.b.multiply(as_float(c, dx, dt), as_float(c, shaped(c, scale, x, axis, block), dt))
    named = c.attr("output_dtype", 0)
    to = DTYPES.get(named) if named else c.type_of(scale).dtype
    if to is None:
        raise Unsupported(f"DequantizeLinear to element type {named}")
    return [as_float(c, y, to)]


def centered(c: NodeContext, q: Value, zp: Value | None, per: int | None = None) -> Value:
    """q − zero_point in float64 (exact); a vector zero point applies along axis `per`"""
    out = as_float(c, q, F64)
    if zp is None:
        return out
    z = single(c, as_float(c, zp, F64))
    zt = c.type_of(z)
    if zt.rank == 1 and per is not None:
        z = c.b.shapeCast(z, [zt.shape[0] if k == per else 1 for k in range(c.rank(q))])
    return binary(c, "subtract", out, z)


def optional(c: NodeContext, i: int) -> Value | None:
    return c.value(i) if c.has(i) else None


@converts("MatMulInteger")
def _matmul_integer(c: NodeContext) -> list[Value]:
    """(A − a_zero_point) · (B − b_zero_point), accumulated in int32; a vector zero point
    of A is per row, of B per column"""
    a, b = c.value(0), c.value(1)
    ca = centered(c, a, optional(c, 2), c.rank(a) - 2 if c.rank(a) > 1 else None)
    cb = centered(c, b, optional(c, 3), c.rank(b) - 1)
    return [c.b.dataTypeCast(matmul(c, ca, cb), I32)]


def scale_product(c: NodeContext, *scales: Value, divide_by: Value) -> Value:
    """s₁·s₂/s_y in the scales' own type, then float64 (numpy's int32 × float promotion)"""
    out = binary(c, "divide", binary(c, "multiply", single(c, scales[0]), single(c, scales[1])),
                 single(c, divide_by))
    return as_float(c, out, F64)


def requantized(c: NodeContext, acc: Value, factor: Value, y_zp: Value | None,
                fallback: DataType) -> Value:
    """saturate(rint(acc · factor + y_zero_point)) in y_zero_point's type"""
    d = binary(c, "multiply", acc, factor)
    if y_zp is not None:
        d = binary(c, "add", d, single(c, as_float(c, y_zp, F64)))
    to = c.type_of(y_zp).dtype if y_zp is not None else fallback
    return saturated(c, c.b.rint(d), to)


@converts("QLinearMatMul")
def _qlinear_matmul(c: NodeContext) -> list[Value]:
    """quantize((A − a_zp)·(B − b_zp) · a_scale·b_scale / y_scale + y_zp), the product exact"""
    a, a_scale, b, b_scale, y_scale = (c.value(k) for k in (0, 1, 3, 4, 6))
    for s in (a_scale, b_scale, y_scale):
        if (c.type_of(s).count or 0) > 1:
            raise Unsupported("QLinearMatMul with per-row or per-column scales")
    acc = matmul(c, centered(c, a, optional(c, 2)), centered(c, b, optional(c, 5)))
    factor = scale_product(c, a_scale, b_scale, divide_by=y_scale)
    return [requantized(c, acc, factor, optional(c, 7), c.type_of(a).dtype)]


def integer_convolution(c: NodeContext, x: Value, x_zp: Value | None, w: Value,
                        w_zp: Value | None) -> Value:
    """conv(x − x_zp, w − w_zp) in float64 (exact); a vector w_zp is per output channel"""
    n = c.rank(x) - 2
    kernel = list(c.attr("kernel_shape", c.type_of(w).shape[2:]))
    if None in kernel:
        raise Unsupported("an integer convolution with a kernel of dynamic shape")
    strides = list(c.attr("strides", [1] * n))
    dilations = list(c.attr("dilations", [1] * n))
    padding = spatial_padding(c, x, kernel, strides, dilations)
    cx, cw = centered(c, x, x_zp), centered(c, w, w_zp, 0)
    return c.b.convolve(cx, cw, strides, padding, None, dilations, c.attr("group", 1))


@converts("ConvInteger")
def _conv_integer(c: NodeContext) -> list[Value]:
    """Conv of (x − x_zero_point) by (w − w_zero_point), accumulated in int32"""
    out = integer_convolution(c, c.value(0), optional(c, 2), c.value(1), optional(c, 3))
    return [c.b.dataTypeCast(out, I32)]


@converts("QLinearConv")
def _qlinear_conv(c: NodeContext) -> list[Value]:
    """quantize(conv(x − x_zp, w − w_zp) · x_scale·w_scale / y_scale + y_zp), a vector
    w_scale per output channel, plus an int32 bias B in the accumulator's units"""
    x, x_scale, w, w_scale, y_scale = (c.value(k) for k in (0, 1, 3, 4, 6))
    acc = integer_convolution(c, x, optional(c, 2), w, optional(c, 5))
    rank = c.rank(x)
    if c.has(8):
        bias = as_float(c, c.value(8), F64)
        acc = c.b.add(acc, c.b.shapeCast(bias, [1, c.type_of(bias).shape[0], *[1] * (rank - 2)]))
    wt = c.type_of(w_scale)
    if wt.rank == 1 and (wt.shape[0] or 0) > 1:
        w_scale = c.b.shapeCast(w_scale, [1, wt.shape[0], *[1] * (rank - 2)])
    factor = scale_product(c, x_scale, w_scale, divide_by=y_scale)
    return [requantized(c, acc, factor, optional(c, 7), c.type_of(x).dtype)]
