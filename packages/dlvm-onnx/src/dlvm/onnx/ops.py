"""ONNX operators as DLVM instructions: one converter per op type, each with the math it
computes. Broadcasting is numpy's: the operand of lower rank gets leading 1-dimensions
(`padShape`), then DLVM broadcasts size-1 dimensions.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dlvm.ir import Value, constant
from dlvm.ir.runtime import numpy_dtype
from dlvm.ir.types import BOOL, I8, I64, TensorType, scalar

from .context import DTYPES, NodeContext, ShapeVector
from .errors import Invalid, Unsupported
from .indices import axis as checked_axis
from .indices import index, reshape_rules

Converter = Callable[[NodeContext], list[Value]]
CONVERTERS: dict[str, Converter] = {}


def converts(*op_types: str) -> Callable[[Converter], Converter]:
    def register(fn: Converter) -> Converter:
        for t in op_types:
            CONVERTERS[t] = fn
        return fn
    return register


# ------------------------------------------------------------------ helpers


def broadcast(c: NodeContext, x: Value, y: Value) -> tuple[Value, Value]:
    rx, ry = c.rank(x), c.rank(y)
    while 0 < rx < ry:
        x, rx = c.b.padShape(x, 0), rx + 1
    while 0 < ry < rx:
        y, ry = c.b.padShape(y, 0), ry + 1
    return x, y


def binary(c: NodeContext, opcode: str, x: Value, y: Value) -> Value:
    x, y = broadcast(c, x, y)
    return c.b.create(opcode, x, y)


def move_to_front(c: NodeContext, x: Value, axis: int) -> Value:
    rank = c.rank(x)
    if axis == 0:
        return x
    order = [axis, *[k for k in range(rank) if k != axis]]
    return c.b.transpose(x, order)


def move_back(c: NodeContext, x: Value, axis: int) -> Value:
    rank = c.rank(x)
    if axis == 0:
        return x
    order = [*range(1, axis + 1), 0, *range(axis + 1, rank)]
    return c.b.transpose(x, order)


def keep_axes(c: NodeContext, x: Value, axes: list[int]) -> Value:
    for a in sorted(axes):
        x = c.b.padShape(x, a)
    return x


def count(c: NodeContext, x: Value, axes: list[int]) -> Value:
    """The number of elements along `axes`, in x's data type (known at run time)."""
    t = c.type_of(x)
    sizes = [t.shape[a] for a in axes]
    if all(s is not None for s in sizes):
        return c.number(math.prod(sizes), x)  # type: ignore[arg-type]
    shape = c.b.shape(x)
    n: Value = constant(1, scalar(I64))
    for a in axes:
        n = c.b.multiply(n, c.b.extract(shape, [a]))
    return c.b.dataTypeCast(n, t.dtype)


def reduce_to(c: NodeContext, x: Value, combinator: str, init: float, axes: list[int],
              keepdims: bool) -> Value:
    """x folded along `axes` (none: x itself), which stay as 1-dimensions with `keepdims`"""
    out = c.b.reduce(x, combinator, c.number(init, x), sorted(axes)) if axes else x
    return keep_axes(c, out, axes) if keepdims and axes else out


def reduce_axes(c: NodeContext, x: Value, from_input: bool) -> list[int]:
    rank = c.rank(x)
    axes = (c.ints(1, "axes") if c.has(1) else None) if from_input else c.attr("axes")
    if not axes:
        if c.attr("noop_with_empty_axes", 0):
            return []
        return list(range(rank))
    return sorted({c.axis(a, rank) for a in axes})


# ------------------------------------------------------------------ element-wise

for _op, _opcode in {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide",
                     "Pow": "power", "Max": "max", "Min": "min", "Equal": "equal",
                     "Less": "lessThan", "Greater": "greaterThan",
                     "LessOrEqual": "lessThanOrEqual", "GreaterOrEqual": "greaterThanOrEqual",
                     "And": "and", "Or": "or"}.items():
    def _binary(c: NodeContext, opcode: str = _opcode) -> list[Value]:
        """x ∘ y with numpy broadcasting (Max and Min: of any number of inputs)"""
        if c.node.op_type in ("Max", "Min") and len(c.inputs) != 2:
            out = c.value(0)
            for i in range(1, len(c.inputs)):
                out = binary(c, opcode, out, c.value(i))
            return [out]
        x, y = c.value(0), c.value(1)
        if c.node.op_type == "Div" and not c.type_of(x).dtype.is_float:
            return [binary(c, "truncateDivide", x, y)]  # integer division truncates
        if c.node.op_type == "Pow" and c.type_of(y).dtype != c.type_of(x).dtype:
            y = c.b.dataTypeCast(y, c.type_of(x).dtype)
        return [binary(c, opcode, x, y)]
    converts(_op)(_binary)

for _op, _opcode in {"Neg": "negate", "Sqrt": "sqrt", "Exp": "exp", "Log": "log",
                     "Erf": "erf", "Tanh": "tanh", "Sin": "sin", "Cos": "cos",
                     "Floor": "floor", "Ceil": "ceil", "Sign": "sign", "Not": "not"}.items():
    def _unary(c: NodeContext, opcode: str = _opcode) -> list[Value]:
        return [c.b.create(opcode, c.value(0))]
    converts(_op)(_unary)


@converts("Abs")
def _abs(c: NodeContext) -> list[Value]:
    """|x| = x·sign(x)"""
    x = c.value(0)
    return [c.b.multiply(x, c.b.sign(x))]


@converts("Reciprocal")
def _reciprocal(c: NodeContext) -> list[Value]:
    x = c.value(0)
    return [c.b.divide(c.number(1, x), x)]


@converts("Sigmoid")
def _sigmoid(c: NodeContext) -> list[Value]:
    """σ(x) = 1 / (1 + e^−x)"""
    x = c.value(0)
    one = c.number(1, x)
    return [c.b.divide(one, c.b.add(one, c.b.exp(c.b.negate(x))))]


@converts("Relu")
def _relu(c: NodeContext) -> list[Value]:
    """max(x, 0)"""
    x = c.value(0)
    return [c.b.max(x, c.number(0, x))]


@converts("LeakyRelu")
def _leaky_relu(c: NodeContext) -> list[Value]:
    """x if x ≥ 0 else α·x (α = 0.01)"""
    x = c.value(0)
    alpha = c.attr("alpha", 0.01)
    return [c.b.select(x, c.b.multiply(x, c.number(alpha, x)),
                       c.b.greaterThanOrEqual(x, c.number(0, x)))]


@converts("Gelu")
def _gelu(c: NodeContext) -> list[Value]:
    """x·Φ(x) = ½x(1 + erf(x/√2)); approximate="tanh": ½x(1 + tanh(√(2/π)(x + 0.044715x³)))"""
    x = c.value(0)
    b = c.b
    half = b.multiply(x, c.number(0.5, x))
    if c.attr("approximate", "none") == "tanh":
        cube = b.multiply(b.multiply(x, x), x)
        inner = b.multiply(b.add(x, b.multiply(cube, c.number(0.044715, x))),
                           c.number(math.sqrt(2 / math.pi), x))
        return [b.multiply(half, b.add(c.number(1, x), b.tanh(inner)))]
    return [b.multiply(half, b.add(c.number(1, x),
                                   b.erf(b.multiply(x, c.number(1 / math.sqrt(2), x)))))]


@converts("Where")
def _where(c: NodeContext) -> list[Value]:
    """x where condition, else y (all three broadcast)"""
    cond, x, y = c.value(0), c.value(1), c.value(2)
    rank = max(c.rank(cond), c.rank(x), c.rank(y))
    vals = []
    for v in (cond, x, y):
        r = c.rank(v)
        while 0 < r < rank:
            v, r = c.b.padShape(v, 0), r + 1
        vals.append(v)
    return [c.b.select(vals[1], vals[2], vals[0])]


@converts("Cast")
def _cast(c: NodeContext) -> list[Value]:
    to = DTYPES.get(c.attr("to"))
    if to is None:
        raise Unsupported(f"Cast to element type {c.attr('to')}")
    x = c.value(0)
    return [x if c.type_of(x).dtype == to else c.b.dataTypeCast(x, to)]


@converts("CastLike")
def _cast_like(c: NodeContext) -> list[Value]:
    """x converted to the element type of the second input (`Cast` with `to` from it)"""
    x, like = c.value(0), c.value(1)
    to = c.type_of(like).dtype
    if c.attr("saturate", 1) != 1:
        raise Unsupported("CastLike with saturate=0 (float8 targets)")
    return [x if c.type_of(x).dtype == to else c.b.dataTypeCast(x, to)]


@converts("Identity")
def _identity(c: NodeContext) -> list[Value]:
    """the input unchanged"""
    return [c.value(0)]


@converts("BitCast")
def _bit_cast(c: NodeContext) -> list[Value]:
    """the bits of each element read as another type of the same width"""
    x = c.value(0)
    to = DTYPES.get(c.attr("to"))
    if to is None:
        raise Unsupported(f"BitCast to element type {c.attr('to')}")
    t = c.type_of(x)
    width = 8 if t.dtype == BOOL else t.dtype.bits
    if to.bits != width or to == BOOL:
        raise Invalid(f"BitCast from {t.dtype} to {to}: the widths differ")
    if t.dtype == BOOL:  # a byte of 0 or 1: the same number as an 8-bit integer
        return [c.b.dataTypeCast(x, to)]
    return [c.b.bitCast(x, t.with_dtype(to))]


@converts("Dropout")
def _dropout(c: NodeContext) -> list[Value]:
    """inference (or a ratio of 0): the input unchanged, and a mask that keeps everything"""
    training = c.const(2) if c.has(2) else np.array(False)
    ratio = c.const(1) if c.has(1) else np.array(c.attr("ratio", 0.5))
    if training is None or (training.any() and (ratio is None or ratio.any())):
        raise Unsupported("Dropout in training mode with a ratio above 0 (a random mask "
                          "that ONNX leaves to each runtime)")
    x = c.value(0)
    if len(c.node.output) < 2 or not c.node.output[1]:
        return [x]
    yes = constant(True, scalar(BOOL))
    return [x, c.b.select(yes, yes, c.b.notEqual(x, x))]  # x's shape, all true


# ------------------------------------------------------------------ linear algebra


def swap_last(c: NodeContext, x: Value) -> Value:
    """x with its last two dimensions swapped (a stack of transposed matrices)"""
    rank = c.rank(x)
    return c.b.transpose(x, [*range(rank - 2), rank - 1, rank - 2])


def stretch_batch(c: NodeContext, x: Value, like: Value) -> Value:
    """x with its batch dimensions of size 1 (or dynamic) broadcast to the static ones of
    `like` (`dot` does not broadcast them): x + 0 of the batch shape"""
    t = c.type_of(x)
    dims: list[int | None] = [1] * t.rank
    for i, (p, q) in enumerate(zip(t.shape[:-2], c.type_of(like).shape[:-2], strict=True)):
        if p == 1 and q is None:
            raise Unsupported("MatMul broadcasting a batch of 1 against a dynamic batch")
        if p in (1, None) and q not in (1, None):
            dims[i] = q
    if dims == [1] * t.rank:
        return x
    return c.b.add(x, c.b.literal(0.0 if t.dtype.is_float else 0, TensorType(tuple(dims),
                                                                              t.dtype)))


def one_matrix(c: NodeContext, x: Value) -> Value | None:
    """x without its batch dimensions when they are all 1"""
    if any(d != 1 for d in c.type_of(x).shape[:-2]):
        return None
    while c.rank(x) > 2:
        x = c.b.squeezeShape(x, 0)
    return x


def matmul(c: NodeContext, a: Value, b: Value) -> Value:
    """numpy.matmul: vectors are promoted and dropped again; stacks broadcast"""
    ra, rb = c.rank(a), c.rank(b)
    if ra == 1 and rb == 1:
        return c.b.dot(a, b)
    if ra == 1:
        return c.b.squeezeShape(matmul(c, c.b.padShape(a, 0), b), rb - 2)
    if rb == 1:
        return c.b.squeezeShape(matmul(c, a, c.b.padShape(b, 1)), ra - 1)
    if ra > 2 and rb == 2:  # a stack times a matrix: one product of the rows
        ta = c.type_of(a)
        shape = (*ta.shape[:-1], c.type_of(b).shape[-1])
        if sum(d is None for d in shape) > 1:  # rows not flattened into one: b per batch
            sizes = [*ta.shape[:-2], 1, 1]  # a's batch dimensions; b's own as they are
            origins = [(a, k) if d is None else None for k, d in enumerate(sizes)]
            return c.b.dot(a, c.broadcast_to(b, sizes, origins))
        out = c.b.dot(c.b.shapeCast(a, (None, ta.shape[-1])), b)
        return c.b.shapeCast(out, shape)
    if ra == 2 and rb > 2:  # a matrix times a stack: a·b = (bᵀ·aᵀ)ᵀ
        return swap_last(c, matmul(c, swap_last(c, b), c.b.transpose(a)))
    a, b = broadcast(c, a, b)  # stacks: leading 1-dimensions, then batches of 1 stretched
    if c.rank(a) > 2 and (m := one_matrix(c, b)) is not None:
        return matmul(c, a, m)
    if c.rank(b) > 2 and (m := one_matrix(c, a)) is not None:
        return matmul(c, m, b)
    return c.b.dot(stretch_batch(c, a, b), stretch_batch(c, b, a))


@converts("MatMul")
def _matmul(c: NodeContext) -> list[Value]:
    return [matmul(c, c.value(0), c.value(1))]


@converts("Gemm")
def _gemm(c: NodeContext) -> list[Value]:
    """α·A'·B' + β·C, where X' is X or Xᵀ"""
    a, b_ = c.value(0), c.value(1)
    if c.attr("transA", 0):
        a = c.b.transpose(a)
    if c.attr("transB", 0):
        b_ = c.b.transpose(b_)
    out: Value = c.b.dot(a, b_)
    alpha, beta = c.attr("alpha", 1.0), c.attr("beta", 1.0)
    if alpha != 1.0:
        out = c.b.multiply(out, c.number(alpha, out))
    if c.has(2):
        bias = c.value(2)
        if beta != 1.0:
            bias = c.b.multiply(bias, c.number(beta, bias))
        out = binary(c, "add", out, bias)
    return [out]


# ------------------------------------------------------------------ normalization


@converts("Softmax", "LogSoftmax")
def _softmax(c: NodeContext) -> list[Value]:
    """exp(x − max) / Σ exp(x − max) along `axis` (log: (x − max) − log Σ exp(x − max))"""
    x = c.value(0)
    rank = c.rank(x)
    if c.opset < 13:
        raise Unsupported(f"{c.node.op_type} before opset 13 (it flattens)")
    axis = c.axis(c.attr("axis", -1), rank)
    b = c.b
    top = b.padShape(b.reduce(x, "max", c.number(-math.inf, x), [axis]), axis)
    z = b.subtract(x, top)
    e = b.exp(z)
    s = b.padShape(b.reduce(e, "add", c.number(0, x), [axis]), axis)
    if c.node.op_type == "LogSoftmax":
        return [b.subtract(z, b.log(s))]
    return [b.divide(e, s)]


def channel_vector(c: NodeContext, v: Value, rank: int) -> Value:
    """A per-channel vector [C] as [1 x C x 1 …] for an NC… tensor"""
    out = c.b.padShape(v, 0)
    for _ in range(rank - 2):
        out = c.b.padShape(out, c.rank(out))
    return out


# ------------------------------------------------------------------ convolution and pooling


def spatial_padding(c: NodeContext, x: Value, kernel: list[int], strides: list[int],
                    dilations: list[int]) -> list[tuple[int, int]]:
    """ONNX `pads` [x1_begin, …, x1_end, …] or `auto_pad`, as (low, high) per dimension."""
    n = len(kernel)
    auto = c.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", "VALID"):
        pads = c.attr("pads", [0] * 2 * n) if auto == "NOTSET" else [0] * 2 * n
        return [(pads[i], pads[i + n]) for i in range(n)]
    shape = c.type_of(x).shape[2:]
    out = []
    for i, s in enumerate(shape):
        if s is None:
            raise Unsupported(f"auto_pad={auto} over a dynamic spatial dimension")
        extent = (kernel[i] - 1) * dilations[i] + 1
        total = max((math.ceil(s / strides[i]) - 1) * strides[i] + extent - s, 0)
        low = total // 2 if auto == "SAME_UPPER" else total - total // 2
        out.append((low, total - low))
    return out


@converts("Conv")
def _conv(c: NodeContext) -> list[Value]:
    """cross-correlation of NC… input with an OI… kernel, per group, plus a bias"""
    x, w = c.value(0), c.value(1)
    n = c.rank(x) - 2
    kernel = list(c.attr("kernel_shape", c.type_of(w).shape[2:]))
    strides = list(c.attr("strides", [1] * n))
    dilations = list(c.attr("dilations", [1] * n))
    padding = spatial_padding(c, x, kernel, strides, dilations)
    out = c.b.convolve(x, w, strides, padding, None, dilations, c.attr("group", 1))
    if c.has(2):
        out = c.b.add(out, channel_vector(c, c.value(2), n + 2))
    return [out]


@converts("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(c: NodeContext) -> list[Value]:
    """the mean (or max) over every spatial position, kept as 1×1…"""
    x = c.value(0)
    axes = list(range(2, c.rank(x)))
    if c.node.op_type == "GlobalMaxPool":
        return [reduce_to(c, x, "max", -math.inf, axes, True)]
    total = c.b.reduce(x, "add", c.number(0, x), axes)
    return [keep_axes(c, c.b.divide(total, count(c, x, axes)), axes)]


# ------------------------------------------------------------------ reductions


@converts("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd")
def _reduce(c: NodeContext) -> list[Value]:
    """Σ, mean, max (booleans: any), min (booleans: all) or Π of x along axes"""
    x = c.value(0)
    op = c.node.op_type
    from_input = (op == "ReduceSum" and c.opset >= 13) or c.opset >= 18
    axes = reduce_axes(c, x, from_input)
    keep = bool(c.attr("keepdims", 1))
    if op == "ReduceMean":
        total = reduce_to(c, x, "add", 0, axes, False)
        out = c.b.divide(total, count(c, x, axes)) if axes else x
        return [keep_axes(c, out, axes) if keep and axes else out]
    combinator, init = {"ReduceSum": ("add", 0), "ReduceMax": ("max", -math.inf),
                        "ReduceMin": ("min", math.inf), "ReduceProd": ("multiply", 1)}[op]
    if c.type_of(x).dtype == BOOL:  # max of booleans: any (empty: false); min: all (true)
        if op not in ("ReduceMax", "ReduceMin"):
            raise Unsupported(f"{op} of booleans")
        fold, unit = ("or", False) if op == "ReduceMax" else ("and", True)
        out = c.b.reduce(x, fold, constant(unit, scalar(BOOL)), axes) if axes else x
        return [keep_axes(c, out, axes) if keep and axes else out]
    if not c.type_of(x).dtype.is_float and op in ("ReduceMax", "ReduceMin"):
        info = np.iinfo(numpy_dtype(c.type_of(x).dtype))
        init = info.min if op == "ReduceMax" else info.max
    return [reduce_to(c, x, combinator, init, axes, keep)]


# ------------------------------------------------------------------ shapes and layout


def reshape_target(c: NodeContext, x: Value, target: list[int | None], allow_zero: bool
                   ) -> tuple[int | None, ...]:
    """ONNX Reshape's target: 0 copies the input's dimension, −1 is inferred; dynamic
    sizes (from a shape vector) become `_`."""
    shape = c.type_of(x).shape
    reshape_rules(target, shape, allow_zero)
    out: list[int | None] = []
    for i, d in enumerate(target):
        if d == 0 and not allow_zero:
            out.append(shape[i] if i < len(shape) else 0)
        else:
            out.append(d)
    computed = [d for d in out if isinstance(d, str)]  # sizes computed from dynamic ones
    out = [None if isinstance(d, str) else d for d in out]
    if -1 in out and computed:
        raise Unsupported(f"Reshape to {target}: −1 beside a size computed at run time")
    if -1 in out:
        if sum(d is None for d in shape) == sum(d is None for d in out):
            # the dynamic sizes are taken to be carried over: −1 is the static rest
            size = math.prod(d for d in shape if d is not None)
            known = math.prod(d for d in out if d not in (-1, None))  # type: ignore[misc]
            if known == 0 or size % known:
                raise Invalid(f"the shape {target} does not fit the static sizes of "
                              f"{list(shape)} ({size} elements besides the dynamic ones)")
            out[out.index(-1)] = size // known
        else:
            out[out.index(-1)] = None
    if sum(d is None for d in out) > 1:
        raise Unsupported(f"Reshape to {target} with several unknown sizes")
    return tuple(out)


@converts("Reshape")
def _reshape(c: NodeContext) -> list[Value]:
    x = c.value(0)
    shape_in = c.inputs[1]
    if isinstance(shape_in, ShapeVector):
        target = list(shape_in.dims)
        for k, d in enumerate(target):  # a size of x's own shape at its place: a copy
            if d is None and shape_in.origin(k) == (x, k):
                target[k] = 0
    else:
        target = [int(v) for v in c.ints(1, "the shape")]
    allow_zero = bool(c.attr("allowzero", 0))
    try:
        return [c.b.shapeCast(x, reshape_target(c, x, target, allow_zero))]
    except Unsupported:
        kept = reshape_behind_dynamic(c, x, target, allow_zero)
        if kept is None:
            raise
        return [kept]


def reshape_behind_dynamic(c: NodeContext, x: Value, target: list[int | None],
                           allow_zero: bool) -> Value | None:
    """A reshape that keeps x's leading dimensions — every dynamic one among them — and
    rearranges only the static ones behind them ([b, s, 2, 24] → [b, s, 48], [b, s, 768] →
    [b, s, 12, 64]), which `shapeCast` cannot write with two `_`: the trailing dimensions
    merged into one and split again, by slices and concatenations (row-major order, so
    exactly a reshape). None when the target is not of that form."""
    shape = c.type_of(x).shape
    p = 0
    while p < min(len(target), len(shape)) and (
            (target[p] == 0 and not allow_zero) or (shape[p] is not None and
                                                    target[p] == shape[p])):
        p += 1
    rest = target[p:]
    if any(d is None for d in shape[p:]) or any(not isinstance(d, int) or d == 0 or d < -1
                                                 for d in rest) or rest.count(-1) > 1:
        return None
    size = math.prod(shape[p:])  # type: ignore[arg-type]
    known = math.prod(d for d in rest if d != -1)  # type: ignore[misc]
    if size == 0 or known == 0 or size % known or (-1 not in rest and known != size):
        return None
    dims = [size // known if d == -1 else d for d in rest]
    merged = x
    while c.rank(merged) > p + 1:  # [… m, n] → [… m·n]
        last = c.rank(merged) - 1
        m = c.type_of(merged).shape[last - 1]
        rows = [c.b.squeezeShape(slice_axis(c, merged, last - 1, i, i + 1), last - 1)
                for i in range(m)]  # type: ignore[arg-type]
        merged = rows[0] if len(rows) == 1 else c.b.concatenate(rows, last - 1)
    if c.rank(merged) == p:  # nothing behind the kept dimensions: a size of 1
        merged = c.b.padShape(merged, p)
    for k, d in enumerate(dims[:-1]):  # [… d·n] → [… d, n]
        axis = p + k
        n = math.prod(dims[k + 1:])  # type: ignore[arg-type]
        parts = [c.b.padShape(slice_axis(c, merged, axis, i * n, (i + 1) * n), axis)
                 for i in range(d)]  # type: ignore[arg-type]
        merged = parts[0] if len(parts) == 1 else c.b.concatenate(parts, axis)
    return merged


@converts("Flatten")
def _flatten(c: NodeContext) -> list[Value]:
    """[d0 … d(a−1)] × [da …]: two dimensions"""
    x = c.value(0)
    t = c.type_of(x)
    axis = checked_axis(c.attr("axis", 1), t.rank, extra=1)  # −1 is the last, rank the end
    lead, rest = t.shape[:axis], t.shape[axis:]
    dims = [math.prod(lead) if None not in lead else None,  # type: ignore[arg-type]
            math.prod(rest) if None not in rest else None]  # type: ignore[arg-type]
    if dims.count(None) > 1:
        raise Unsupported("Flatten with dynamic dimensions on both sides")
    return [c.b.shapeCast(x, tuple(dims))]


@converts("Transpose")
def _transpose(c: NodeContext) -> list[Value]:
    x = c.value(0)
    perm = c.attr("perm")
    return [c.b.transpose(x, list(perm) if perm is not None else None)]


@converts("Concat")
def _concat(c: NodeContext) -> list[Value]:
    xs = [c.value(i) for i in range(len(c.inputs)) if c.has(i)]
    return [c.b.concatenate(xs, c.axis(c.attr("axis"), c.rank(xs[0])))]


def slice_axis(c: NodeContext, x: Value, axis: int, start: int, stop: int) -> Value:
    """x[…, start:stop, …] along `axis` (a static or checked range)"""
    front = move_to_front(c, x, axis)
    part = c.b.slice(front, start, stop - 1)
    return move_back(c, part, axis)


@converts("Squeeze")
def _squeeze(c: NodeContext) -> list[Value]:
    x = c.value(0)
    t = c.type_of(x)
    axes = c.ints(1, "axes") if c.has(1) else c.attr("axes")
    if axes is None:  # every dimension of size 1
        if None in t.shape:
            raise Unsupported("Squeeze without axes of a tensor with dynamic dimensions")
        axes = [i for i, d in enumerate(t.shape) if d == 1]
    for a in sorted({c.axis(a, t.rank) for a in axes}, reverse=True):  # one axis named twice
        x = c.b.squeezeShape(x, a)
    return [x]


@converts("Unsqueeze")
def _unsqueeze(c: NodeContext) -> list[Value]:
    x = c.value(0)
    axes = c.ints(1, "axes") if c.has(1) else list(c.attr("axes"))
    rank = c.rank(x) + len(axes)
    for a in sorted(c.axis(a, rank) for a in axes):
        x = c.b.padShape(x, a)
    return [x]


@converts("Gather")
def _gather(c: NodeContext) -> list[Value]:
    """x indexed along `axis` (that dimension replaced by the indices' shape: removed by a
    scalar index); indices computed at run time: Σₖ [indices = k]·x[k] (gather.py)"""
    x = c.value(0)
    indices = c.const(1)
    if indices is None:
        return gather.gather_at_run_time(c)
    t = c.type_of(x)
    axis = c.axis(c.attr("axis", 0), t.rank)
    size = t.shape[axis]
    flat = [int(i) for i in indices.reshape(-1)]
    if not flat:
        raise Unsupported("Gather of no indices")
    shape = (*t.shape[:axis], *indices.shape, *t.shape[axis + 1:])
    if (size is None and any(i < 0 for i in flat)) or \
            (indices.ndim > 1 and sum(d is None for d in shape) > 1):
        return gather.gather_at_run_time(c)  # wraps at run time; reshapes nothing
    if size is not None:  # in range (checked before); −1 is the last
        flat = [index(i, size, f"axis {axis}") for i in flat]
    front = move_to_front(c, x, axis)  # [d_axis, the others in order]
    if indices.ndim == 0:
        return [c.b.extract(front, [flat[0]])]
    rows = [c.b.slice(front, i, i) for i in flat]
    picked = move_back(c, rows[0] if len(rows) == 1 else c.b.concatenate(rows, 0), axis)
    if indices.ndim == 1:
        return [picked]
    return [c.b.shapeCast(picked, shape)]


@converts("Expand")
def _expand(c: NodeContext) -> list[Value]:
    """broadcast x to a shape"""
    x = c.value(0)
    shape = c.ints(1, "the shape")
    t = c.type_of(x)
    if t.dtype == BOOL:  # as 0/1 integers, then back
        one, zero = constant(1, scalar(I8)), constant(0, scalar(I8))
        wide = binary(c, "add", c.b.select(one, zero, x), c.b.literal(0, TensorType(tuple(
            shape), I8)))
        return [c.b.notEqual(wide, zero)]
    zeros = c.b.literal(0.0 if t.dtype.is_float else 0, TensorType(tuple(shape), t.dtype))
    return [binary(c, "add", x, zeros)]


# the other converter modules register themselves here (they import this module's helpers)
from . import (  # noqa: E402, F401
    classic_ml,
    gather,
    normalization,
    pointwise,
    quantization,
    rearranged,
    recurrent,
    reductions,
    spatial,
    spectral,
    training,
)

# operators of domains other than ONNX's default one, by the domain that defines them
DOMAINS = {**dict.fromkeys(("Adagrad", "Adam", "Momentum"), training.DOMAIN),
           **dict.fromkeys(("Binarizer", "ArrayFeatureExtractor"), classic_ml.DOMAIN)}
