"""Staged operations: one function per DLVM instruction a model needs, and composites.

Each takes staged values (or numbers and arrays, which become constants) and emits the
instruction into the function being staged. Binary operations broadcast as numpy does: a
lower-rank operand is lifted with `padShape` at 0 (DLVM's own broadcasting needs equal
ranks), so `x @ w + b` works as well as the seed's `x • w + b.rankLifted()`.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

import dlvm.ir as ir
from dlvm.ir import DataType

from .staging import Rep, Stage, as_rep, current_stage, staging_error


def _stage(*xs: Any) -> Stage:
    for x in xs:
        if isinstance(x, Rep):
            return x.stage
    stage = current_stage()
    if stage is None:
        raise staging_error("NNKit operations write staged code: use them inside a function "
                            "staged by nn.lambda_ or @nn.function, and call that function "
                            "on arrays")
    return stage


def _operand(x: Any, what: str) -> Rep:
    """`x` as a value of the function being staged (an array becomes a constant)."""
    return as_rep(x, _stage(x), what)


def _pair(op: str, a: Any, b: Any) -> tuple[Rep, Rep, Stage]:
    stage = _stage(a, b)
    x = a if isinstance(a, Rep) else None
    y = b if isinstance(b, Rep) else None
    if x is None and isinstance(a, int | float) and y is not None:
        return _constant(a, y), y, stage
    if y is None and isinstance(b, int | float) and x is not None:
        return x, _constant(b, x), stage
    x = as_rep(a, stage, f"the left operand of '{op}'")
    y = as_rep(b, stage, f"the right operand of '{op}'")
    # numpy's rank promotion: lift the lower-rank operand (a scalar broadcasts as it is)
    while x.rank and y.rank and x.rank < y.rank:
        x = pad_shape(x, 0)
    while x.rank and y.rank and y.rank < x.rank:
        y = pad_shape(y, 0)
    return x, y, stage


def _constant(value: float, like: Rep) -> Rep:
    """A number as a scalar of `like`'s element type."""
    t = ir.TensorType((), like.dtype)
    v: bool | int | float = value
    if like.dtype.is_float:
        v = float(value)
    elif like.dtype.is_bool:
        v = bool(value)
    else:
        v = int(value)
    return Rep(ir.constant(v, t), like.spec.__class__(like.dtype, ()), like.stage)


def _binary(method: str, a: Any, b: Any) -> Rep:
    x, y, stage = _pair(method, a, b)
    return stage.emit(method, x.value, y.value)


def _unary(method: str, x: Any) -> Rep:
    stage = _stage(x)
    return stage.emit(method, as_rep(x, stage, f"the operand of '{method}'").value)


# ---------------------------------------------------------------- element-wise


def add(a: Any, b: Any) -> Rep:
    """a + b"""
    return _binary("add", a, b)


def subtract(a: Any, b: Any) -> Rep:
    """a − b"""
    return _binary("subtract", a, b)


def multiply(a: Any, b: Any) -> Rep:
    """a · b (element-wise)"""
    return _binary("multiply", a, b)


def divide(a: Any, b: Any) -> Rep:
    """a / b"""
    return _binary("divide", a, b)


def power(a: Any, b: Any) -> Rep:
    """aᵇ"""
    return _binary("power", a, b)


def maximum(a: Any, b: Any) -> Rep:
    """the larger of a and b, element-wise"""
    return _binary("max", a, b)


def minimum(a: Any, b: Any) -> Rep:
    """the smaller of a and b, element-wise"""
    return _binary("min", a, b)


def less(a: Any, b: Any) -> Rep:
    return _binary("lessThan", a, b)


def less_equal(a: Any, b: Any) -> Rep:
    return _binary("lessThanOrEqual", a, b)


def greater(a: Any, b: Any) -> Rep:
    return _binary("greaterThan", a, b)


def greater_equal(a: Any, b: Any) -> Rep:
    return _binary("greaterThanOrEqual", a, b)


def equal(a: Any, b: Any) -> Rep:
    return _binary("equal", a, b)


def not_equal(a: Any, b: Any) -> Rep:
    return _binary("notEqual", a, b)


def negate(x: Any) -> Rep:
    """−x"""
    return _unary("negate", x)


def tanh(x: Any) -> Rep:
    return _unary("tanh", x)


def exp(x: Any) -> Rep:
    return _unary("exp", x)


def log(x: Any) -> Rep:
    return _unary("log", x)


def sqrt(x: Any) -> Rep:
    return _unary("sqrt", x)


def sin(x: Any) -> Rep:
    return _unary("sin", x)


def cos(x: Any) -> Rep:
    return _unary("cos", x)


def erf(x: Any) -> Rep:
    return _unary("erf", x)


def square(x: Any) -> Rep:
    return _unary("square", x)


def select(mask: Any, a: Any, b: Any) -> Rep:
    """`a` where `mask` holds, else `b` (numpy's `where(mask, a, b)`)."""
    x, y, stage = _pair("select", a, b)
    m = as_rep(mask, stage, "the mask of 'select'")
    while m.rank < x.rank:
        m = pad_shape(m, 0)
    return stage.emit("select", x.value, y.value, m.value)


def where(mask: Any, a: Any, b: Any) -> Rep:
    return select(mask, a, b)


def cast(x: Any, dtype: DataType) -> Rep:
    """each element converted to `dtype`"""
    x = _operand(x, "the operand of 'cast'")
    return x.stage.emit("dataTypeCast", x.value, dtype)


# ---------------------------------------------------------------- linear algebra, layout


def dot(a: Any, b: Any) -> Rep:
    """matrix product (batched over leading dimensions), or the dot product of vectors"""
    stage = _stage(a, b)
    return stage.emit("dot", as_rep(a, stage, "the left operand of 'dot'").value,
                      as_rep(b, stage, "the right operand of 'dot'").value)


def transpose(x: Any) -> Rep:
    """the dimensions in reverse order"""
    x = _operand(x, "the operand of 'transpose'")
    return x.stage.emit("transpose", x.value)


def pad_shape(x: Any, axis: int = 0) -> Rep:
    """a dimension of size 1 inserted at `axis` (the seed's `rankLifted()` at 0)"""
    x = _operand(x, "the operand of 'pad_shape'")
    return x.stage.emit("padShape", x.value, axis)


rank_lifted = pad_shape


def squeeze(x: Any, axis: int = 0) -> Rep:
    """the dimension of size 1 at `axis` removed"""
    x = _operand(x, "the operand of 'squeeze'")
    return x.stage.emit("squeezeShape", x.value, axis)


def reshape(x: Any, shape: Sequence[int | None]) -> Rep:
    """the same elements in another shape"""
    x = _operand(x, "the operand of 'reshape'")
    return x.stage.emit("shapeCast", x.value, list(shape))


def take(x: Any, index: Any) -> Rep:
    """the row `index` (a Python int or a staged i64 scalar) of `x`"""
    x = _operand(x, "the operand of 'take'")
    if isinstance(index, int):
        return x.stage.emit("extract", x.value, [index])
    i = as_rep(index, x.stage, "the index of 'take'")
    return x.stage.emit("extract", x.value, [i.value])


def concatenate(xs: Sequence[Rep], axis: int = 0) -> Rep:
    stage = _stage(*xs)
    return stage.emit("concatenate", [as_rep(x, stage, "an operand of 'concatenate'").value
                                      for x in xs], axis)


def reverse(x: Any, axis: int | Sequence[int]) -> Rep:
    """the elements in reverse order along `axis`"""
    x = _operand(x, "the operand of 'reverse'")
    return x.stage.emit("reverse", x.value, [axis] if isinstance(axis, int) else list(axis))


def slice_rows(x: Any, lower: int, upper: int) -> Rep:
    """rows `lower` to `upper` of `x`, both included (DLVM's `slice`)"""
    x = _operand(x, "the operand of 'slice_rows'")
    return x.stage.emit("slice", x.value, lower, upper)


def convolve(x: Any, kernel: Any, strides: Sequence[int] | None = None,
             padding: Sequence[tuple[int, int]] | None = None,
             dilation: Sequence[int] | None = None, groups: int | None = None) -> Rep:
    """N-d convolution (cross-correlation) of `x` [N, C, spatial…] by `kernel`
    [O, C/groups, window…]; `dilation` spreads the kernel's taps"""
    stage = _stage(x, kernel)
    x = as_rep(x, stage, "the input of 'convolve'")
    kernel = as_rep(kernel, stage, "the kernel of 'convolve'")
    return x.stage.emit("convolve", x.value, kernel.value, list(strides) if strides else None,
                        list(padding) if padding else None, None,
                        list(dilation) if dilation else None, groups)


# ---------------------------------------------------------------- reductions


def _axes(x: Rep, axis: int | Sequence[int] | None) -> list[int] | None:
    if axis is None:
        return None
    axes = [axis] if isinstance(axis, int) else list(axis)
    return sorted(a + x.rank if a < 0 else a for a in axes)


def reduce(x: Any, combinator: str, init: float, axis: int | Sequence[int] | None = None
           ) -> Rep:
    """`x` folded by `combinator` (add, multiply, max, min) along `axis` (all: None)"""
    x = _operand(x, "the operand of 'reduce'")
    return x.stage.emit("reduce", x.value, combinator, _constant(init, x).value,
                        _axes(x, axis))


def sum(x: Any, axis: int | Sequence[int] | None = None) -> Rep:
    return reduce(x, "add", 0, axis)


def max(x: Any, axis: int | Sequence[int] | None = None) -> Rep:
    x = _operand(x, "the operand of 'max'")
    return reduce(x, "max", -float("inf") if x.dtype.is_float else _lowest(x.dtype), axis)


def mean(x: Any, axis: int | Sequence[int] | None = None) -> Rep:
    x = _operand(x, "the operand of 'mean'")
    total = sum(x, axis)
    axes = _axes(x, axis) or list(range(x.rank))
    known = [x.shape[a] for a in axes]
    if builtins.all(d is not None for d in known):
        count = 1
        for d in known:
            count *= d  # type: ignore[operator]
        return total / float(count)
    count_rep = x.stage.emit("unitCount", x.value) if axis is None else None
    if count_rep is None:
        raise staging_error("'mean' along dimensions of unknown size: divide a 'sum' "
                            "by the size instead")
    return total / cast(count_rep, x.dtype)


def _lowest(dtype: DataType) -> int:
    import numpy as np

    from dlvm.ir.runtime import numpy_dtype

    return int(np.iinfo(numpy_dtype(dtype)).min)


# ---------------------------------------------------------------- composites


def sigmoid(x: Any) -> Rep:
    """1 / (1 + e^−x)"""
    return 1.0 / (1.0 + exp(negate(x)))


def relu(x: Any) -> Rep:
    """max(x, 0)"""
    return maximum(x, 0.0)


def softmax(x: Any, axis: int = -1) -> Rep:
    """e^(x − max x) normalized along `axis` (the maximum subtracted for stability)"""
    x = _operand(x, "the operand of 'softmax'")
    a = axis + x.rank if axis < 0 else axis
    z = x - pad_shape(max(x, a), a)
    e = exp(z)
    return e / pad_shape(sum(e, a), a)


def log_softmax(x: Any, axis: int = -1) -> Rep:
    """x − max x − log Σ e^(x − max x) along `axis`"""
    x = _operand(x, "the operand of 'log_softmax'")
    a = axis + x.rank if axis < 0 else axis
    z = x - pad_shape(max(x, a), a)
    return z - pad_shape(log(sum(exp(z), a)), a)


def cross_entropy(logits: Any, labels: Any) -> Rep:
    """the mean over rows of −Σ labels · log_softmax(logits) (labels one-hot or soft)"""
    per_row = negate(sum(labels * log_softmax(logits, -1), -1))
    return mean(per_row)
