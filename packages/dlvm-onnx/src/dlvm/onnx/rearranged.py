"""Operators that move elements to computed places, built on the run-time gathers and
scatters (gather.py): `ReverseSequence` (a gather of computed positions), `MaxUnpool` (a
scatter of the pooled values into zeros); and `Det`, by cofactor expansion."""

from __future__ import annotations

import itertools

import numpy as np

from dlvm.ir import Value
from dlvm.ir.types import I64
from onnx import helper

from .context import NodeContext, along, positions
from .errors import Invalid, Unsupported
from .ops import CONVERTERS, binary, converts

MAX_DET = 4  # Det of matrices up to 4 x 4: the 24 terms of the Leibniz formula


def run_converter(c: NodeContext, op: str, inputs: list[Value], **attrs: object) -> Value:
    """`op`'s converter on values of this node (its first output)."""
    node = helper.make_node(op, [f"{c.node.output[0]}_{k}" for k in range(len(inputs))],
                            list(c.node.output[:1]), **attrs)
    inner = NodeContext(node, list(inputs), c.b, c.opset, c.module)
    return CONVERTERS[op](inner)[0]


def zeros_like(c: NodeContext, x: Value, like: Value) -> Value:
    """zeros of `like`'s data type in x's shape"""
    zero = c.number(0, like)
    return c.b.select(zero, zero, c.b.notEqual(x, x))


@converts("ReverseSequence")
def _reverse_sequence(c: NodeContext) -> list[Value]:
    """the first sequence_lens[b] steps along `time_axis` of each batch entry b reversed:
    y[t, b] = x[lens[b] − 1 − t, b] where t < lens[b], else x[t, b]"""
    x, lens = c.value(0), c.value(1)
    r = c.rank(x)
    time, batch = c.attr("time_axis", 0), c.attr("batch_axis", 1)
    if {time, batch} != {0, 1} or r < 2:
        raise Invalid(f"ReverseSequence's time_axis and batch_axis must be 0 and 1, found "
                      f"{time} and {batch}")
    if not c.type_of(lens).dtype.is_int:
        raise Invalid("ReverseSequence's sequence_lens must be integers")
    b = c.b
    n = lens if c.type_of(lens).dtype == I64 else b.dataTypeCast(lens, I64)
    t = along(c, positions(c, x, time), time, r)
    n = along(c, n, batch, r)
    one = c.number(1, t)
    idx = b.select(b.subtract(b.subtract(n, one), t), t, b.lessThan(t, n))
    full = binary(c, "add", idx, zeros_like(c, x, idx))
    return [run_converter(c, "GatherElements", [x, full], axis=time)]


@converts("MaxUnpool")
def _max_unpool(c: NodeContext) -> list[Value]:
    """zeros of the unpooled shape with x's values at the flat positions `indices` (what
    MaxPool's second output gives); a larger `output_shape` pads it with zeros at the end"""
    x, idx = c.value(0), c.value(1)
    t = c.type_of(x)
    n = t.rank - 2
    kernel = list(c.attr("kernel_shape", []))
    strides = list(c.attr("strides", [1] * n))
    pads = list(c.attr("pads", [0] * 2 * n))
    if None in t.shape or len(kernel) != n:
        raise Unsupported("MaxUnpool of dynamic shapes")
    shape = [*t.shape[:2], *[(t.shape[2 + k] - 1) * strides[k] - pads[k] - pads[n + k]
                             + kernel[k] for k in range(n)]]
    wanted = shape
    if c.has(2):
        given = c.const(2)
        if given is None:
            raise Unsupported("MaxUnpool with an output_shape computed at run time")
        wanted = [int(d) for d in given]
        if len(wanted) != len(shape) or any(w < s for w, s in zip(wanted, shape, strict=True)):
            raise Invalid(f"MaxUnpool's output_shape {wanted} is smaller than the unpooled "
                          f"shape {shape}")
    total = int(np.prod(shape))
    count = int(np.prod(t.shape))
    b = c.b
    zeros = b.literal(0.0 if t.dtype.is_float else 0, t.with_shape((total,)))
    flat_idx = b.shapeCast(idx, [count])
    flat_x = b.shapeCast(x, [count])
    out = b.shapeCast(run_converter(c, "ScatterElements", [zeros, flat_idx, flat_x], axis=0),
                      shape)
    for axis, (w, s) in enumerate(zip(wanted, shape, strict=True)):
        if w > s:
            size = [*wanted[:axis], w - s, *shape[axis + 1:]]
            fill = b.literal(0.0 if t.dtype.is_float else 0, t.with_shape(tuple(size)))
            out = b.concatenate([out, fill], axis)
    return [out]


@converts("Det")
def _det(c: NodeContext) -> list[Value]:
    """det of each square matrix of the last two dimensions: Σ over permutations σ of
    sign(σ)·Πᵢ x[i, σ(i)] (the Leibniz formula, for up to 4 x 4)"""
    x = c.value(0)
    t = c.type_of(x)
    if t.rank < 2 or t.shape[-1] != t.shape[-2] or t.shape[-1] is None:
        raise Invalid(f"Det needs square matrices of known size, found {t}")
    size = t.shape[-1]
    if size > MAX_DET or not t.dtype.is_float:
        raise Unsupported(f"Det of {size} x {size} matrices of {t.dtype} (floats up to "
                          f"{MAX_DET} x {MAX_DET})")
    b = c.b
    r = t.rank
    lead = list(range(r - 2))
    front = b.transpose(x, [r - 2, r - 1, *lead]) if lead else x  # [n, n, batch…]

    def entry(i: int, j: int) -> Value:  # x[…, i, j]
        return b.extract(front, [i, j])

    total: Value | None = None
    for perm in itertools.permutations(range(size)):
        term = entry(0, perm[0])
        for i in range(1, size):
            term = b.multiply(term, entry(i, perm[i]))
        odd = sum(1 for i in range(size) for j in range(i + 1, size) if perm[i] > perm[j]) % 2
        if total is None:
            total = b.negate(term) if odd else term
        else:
            total = b.subtract(total, term) if odd else b.add(total, term)
    assert total is not None
    return [total]
