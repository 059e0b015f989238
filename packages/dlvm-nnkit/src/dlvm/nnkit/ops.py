"""Staged operations: one function per DLVM instruction a model needs, and composites.

Each takes staged tensors (or numbers and arrays, which become constants) and emits the
instruction into the function being staged. Binary operations broadcast as numpy does: a
lower-rank operand is lifted with `padShape` at 0 (DLVM's own broadcasting needs equal
ranks), so `x @ w + b` works as well as the seed's `x • w + b.rankLifted()`; and their
operands promote to one element type as numpy's do (see `promotion`). Every argument is
checked, and a wrong one is a one-line error at the user's line.
"""

from __future__ import annotations

import builtins
import sys
from collections.abc import Sequence
from numbers import Real
from typing import Any

import dlvm.ir as ir
from dlvm.ir import DataType

from . import promotion, tensor
from .checks import (
    bad,
    check_axes,
    check_axis,
    check_dtype,
    check_int,
    check_sequence,
    wrong,
)
from .errors import type_error, value_error
from .staging import Stage, as_rep, current_stage
from .tensor import StagedTensor
from .types import TensorSpec

Rep = StagedTensor
COMBINATORS = ("add", "multiply", "max", "min")  # what `reduce` folds with


def _stage(*xs: Any) -> Stage:
    for x in xs:
        if isinstance(x, StagedTensor):
            return x.stage
    stage = current_stage()
    if stage is None:
        raise type_error("NNKit operations write staged code: use them inside a function "
                         "staged by nn.lambda_ or @nn.function, and call that function "
                         "on arrays")
    return stage


def _operand(x: Any, what: str) -> Rep:
    """`x` as a value of the function being staged (an array becomes a constant)."""
    return as_rep(x, _stage(x), what)


def _cast_to(x: Rep, dtype: DataType) -> Rep:
    return x if x.dtype == dtype else x.stage.emit("dataTypeCast", x.value, dtype)


def _pair(op: str, a: Any, b: Any, *, floats: bool = False) -> tuple[Rep, Rep, Stage]:
    """The operands of a binary operation, of one element type (numpy's promotion; with
    `floats`, a float type, as for true division) and of one rank."""
    stage = _stage(a, b)
    x = None if promotion.is_weak(a) else as_rep(a, stage, f"the left operand of '{op}'")
    y = None if promotion.is_weak(b) else as_rep(b, stage, f"the right operand of '{op}'")
    if x is None and y is None:  # two Python numbers: each its default type
        x = _number(a, promotion.weak_default(a), stage)
        y = _number(b, promotion.weak_default(b), stage)
    if x is None:
        assert y is not None
        dtype = promotion.with_weak(y.dtype, a, f"the left operand of '{op}'")
    elif y is None:
        dtype = promotion.with_weak(x.dtype, b, f"the right operand of '{op}'")
    else:
        dtype = promotion.strong(x.dtype, y.dtype)
    if floats:
        dtype = promotion.true_division(dtype)
    x = _cast_to(x, dtype) if x is not None else _number(a, dtype, stage)
    y = _cast_to(y, dtype) if y is not None else _number(b, dtype, stage)
    # numpy's rank promotion: lift the lower-rank operand (a scalar broadcasts as it is)
    while x.rank and y.rank and x.rank < y.rank:
        x = pad_shape(x, 0)
    while x.rank and y.rank and y.rank < x.rank:
        y = pad_shape(y, 0)
    return x, y, stage


def _number(value: bool | int | float, dtype: DataType, stage: Stage) -> Rep:
    """A Python number as a scalar constant of `dtype`."""
    v: bool | int | float = float(value) if dtype.is_float else (
        bool(value) if dtype.is_bool else int(value))
    spec = _scalar_spec(dtype)
    return Rep(ir.constant(v, spec.ir()), spec, stage)


def _scalar_spec(dtype: DataType) -> Any:
    return TensorSpec(dtype, ())


def _constant(value: float, like: Rep) -> Rep:
    """A number as a scalar of `like`'s element type."""
    return _number(value, like.dtype, like.stage)


def _binary(method: str, a: Any, b: Any, *, floats: bool = False) -> Rep:
    x, y, stage = _pair(method, a, b, floats=floats)
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
    """a / b, true division (integers divide in float64, as in numpy)"""
    return _binary("divide", a, b, floats=True)


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
    """`a` where `mask` holds, else `b` (numpy's `where(mask, a, b)`; a mask that is not
    bool holds where it is not zero)."""
    x, y, stage = _pair("select", a, b)
    m = as_rep(mask, stage, "the mask of 'select'")
    if not m.dtype.is_bool:
        m = _cast_to(m, promotion.BOOL)
    while m.rank < x.rank:
        m = pad_shape(m, 0)
    return stage.emit("select", x.value, y.value, m.value)


def where(mask: Any, a: Any, b: Any) -> Rep:
    return select(mask, a, b)


def cast(x: Any, dtype: DataType) -> Rep:
    """each element converted to `dtype`"""
    x = _operand(x, "the operand of 'cast'")
    return _cast_to(x, check_dtype(dtype, "the element type of 'cast'"))


# ---------------------------------------------------------------- linear algebra, layout


def dot(a: Any, b: Any) -> Rep:
    """matrix product (batched over leading dimensions), or the dot product of vectors; a
    stack of matrices times one matrix multiplies every row of the stack by it (numpy's
    `matmul`), as one product of the rows"""
    stage = _stage(a, b)
    left = as_rep(a, stage, "the left operand of 'dot'")
    right = as_rep(b, stage, "the right operand of 'dot'")
    if left.rank > 2 and right.rank == 2 and list(left.shape).count(None) <= 1:
        rows = reshape(left, [None, left.shape[-1]])
        product = stage.emit("dot", rows.value, right.value)
        return reshape(product, [*left.shape[:-1], right.shape[-1]])
    return stage.emit("dot", left.value, right.value)


def transpose(x: Any, axes: Sequence[int] | None = None) -> Rep:
    """the dimensions in reverse order, or in the order `axes` (numpy's `transpose`:
    dimension i of the result is dimension axes[i] of x)"""
    x = _operand(x, "the operand of 'transpose'")
    if axes is None:
        return x.stage.emit("transpose", x.value)
    order = [check_axis(a, x.rank, f"axis {k} of 'transpose'")
             for k, a in enumerate(check_sequence(axes, "the axes of 'transpose'",
                                                  "a permutation of the dimensions"))]
    if sorted(order) != list(range(x.rank)):
        raise bad("the axes of 'transpose'", f"a permutation of 0…{x.rank - 1}", list(axes))
    return x.stage.emit("transpose", x.value, order)


def pad_shape(x: Any, axis: int = 0) -> Rep:
    """a dimension of size 1 inserted at `axis` (the seed's `rankLifted()` at 0)"""
    x = _operand(x, "the operand of 'pad_shape'")
    at = check_axis(axis, x.rank + 1, "the axis of 'pad_shape'")
    return x.stage.emit("padShape", x.value, at)


rank_lifted = pad_shape


def squeeze(x: Any, axis: int = 0) -> Rep:
    """the dimension of size 1 at `axis` removed"""
    x = _operand(x, "the operand of 'squeeze'")
    return x.stage.emit("squeezeShape", x.value, check_axis(axis, x.rank,
                                                            "the axis of 'squeeze'"))


def reshape(x: Any, shape: Sequence[int | None] | int) -> Rep:
    """the same elements in another shape (sizes ≥ 0, None for a size known at run time)"""
    x = _operand(x, "the operand of 'reshape'")
    sizes = (shape,) if isinstance(shape, int) and not isinstance(shape, bool) else \
        check_sequence(shape, "the shape of 'reshape'", "a tuple of sizes (None: unknown)")
    dims = [None if d is None else check_int(d, f"size {k} of the shape of 'reshape'",
                                             minimum=0) for k, d in enumerate(sizes)]
    return x.stage.emit("shapeCast", x.value, dims)


def take(x: Any, index: Any) -> Rep:
    """the row `index` (a Python int or a staged i64 scalar) of `x`"""
    x = _operand(x, "the operand of 'take'")
    if not x.rank:
        raise type_error(f"'take' needs rows, and {x.described()} has none")
    if isinstance(index, StagedTensor):
        return x.stage.emit("extract", x.value, [as_rep(index, x.stage,
                                                        "the index of 'take'").value])
    if isinstance(index, bool) or not isinstance(index, int):
        raise wrong("the index of 'take'", "an integer or a staged i64 scalar", index)
    rows = x.shape[0]
    if rows is None and index < 0:
        raise bad("the index of 'take'", f"≥ 0 ({x.described()} has rows of a size not "
                  "known while staging)", index)
    if rows is not None and not -rows <= index < rows:
        raise bad("the index of 'take'", f"a row of {x.described()} (-{rows} to {rows - 1})",
                  index)
    return x.stage.emit("extract", x.value, [index + rows if index < 0 else index])


def concatenate(xs: Sequence[Any], axis: int = 0) -> Rep:
    """the tensors of `xs` joined along `axis`"""
    items = check_sequence(xs, "the operands of 'concatenate'", "a list or tuple of tensors")
    if not items:
        raise wrong("the operands of 'concatenate'", "at least one tensor", xs)
    stage = _stage(*items)
    reps = [as_rep(x, stage, f"operand {k} of 'concatenate'") for k, x in enumerate(items)]
    at = check_axis(axis, reps[0].rank, "the axis of 'concatenate'")
    return stage.emit("concatenate", [r.value for r in reps], at)


def reverse(x: Any, axis: int | Sequence[int]) -> Rep:
    """the elements in reverse order along `axis`"""
    x = _operand(x, "the operand of 'reverse'")
    axes = check_axes(axis, x.rank, "the axis of 'reverse'")
    if axes is None:
        raise wrong("the axis of 'reverse'", "an axis or a tuple of axes", axis)
    return x.stage.emit("reverse", x.value, axes)


def slice_rows(x: Any, lower: int, upper: int) -> Rep:
    """rows `lower` to `upper` of `x`, both included (DLVM's `slice`)"""
    x = _operand(x, "the operand of 'slice_rows'")
    low = check_int(lower, "the lower row of 'slice_rows'", minimum=0)
    high = check_int(upper, "the upper row of 'slice_rows'", minimum=low)
    return x.stage.emit("slice", x.value, low, high)


def _ints(value: Any, what: str, minimum: int) -> list[int] | None:
    if value is None:
        return None
    items = check_sequence(value, what, "a tuple of integers, one per spatial dimension")
    return [check_int(v, f"{what}[{k}]", minimum=minimum) for k, v in enumerate(items)]


def _pads(value: Any, what: str) -> list[tuple[int, int]] | None:
    if value is None:
        return None
    items = check_sequence(value, what, "a tuple of (before, after) pairs, one per spatial "
                           "dimension")
    pairs = []
    for k, pair in enumerate(items):
        ends = check_sequence(pair, f"{what}[{k}]", "a (before, after) pair")
        if len(ends) != 2:
            raise wrong(f"{what}[{k}]", "a (before, after) pair", pair)
        low, high = (check_int(v, f"{what}[{k}]", minimum=0) for v in ends)
        pairs.append((low, high))
    return pairs


def convolve(x: Any, kernel: Any, strides: Sequence[int] | None = None,
             padding: Sequence[tuple[int, int]] | None = None,
             dilation: Sequence[int] | None = None, groups: int | None = None) -> Rep:
    """N-d convolution (cross-correlation) of `x` [N, C, spatial…] by `kernel`
    [O, C/groups, window…]; `dilation` spreads the kernel's taps"""
    stage = _stage(x, kernel)
    x = as_rep(x, stage, "the input of 'convolve'")
    kernel = as_rep(kernel, stage, "the kernel of 'convolve'")
    steps = _ints(strides, "the strides of 'convolve'", 1)
    pads = _pads(padding, "the padding of 'convolve'")
    spread = _ints(dilation, "the dilation of 'convolve'", 1)
    count = None if groups is None else check_int(groups, "the groups of 'convolve'",
                                                  minimum=1)
    return x.stage.emit("convolve", x.value, kernel.value, steps or None, pads or None, None,
                        spread or None, count)


# ---------------------------------------------------------------- reductions


def reduce(x: Any, combinator: str, init: float, axis: int | Sequence[int] | None = None
           ) -> Rep:
    """`x` folded by `combinator` (add, multiply, max, min) along `axis` (all: None),
    starting from `init`"""
    x = _operand(x, "the operand of 'reduce'")
    if not isinstance(combinator, str):
        raise wrong("the combinator of 'reduce'", f"one of {', '.join(COMBINATORS)}",
                    combinator)
    if combinator not in COMBINATORS:
        raise bad("the combinator of 'reduce'", f"one of {', '.join(COMBINATORS)}",
                  combinator)
    axes = check_axes(axis, x.rank, "the axis of 'reduce'")
    return x.stage.emit("reduce", x.value, combinator, _initial(init, x).value, axes)


def _initial(init: Any, x: Rep) -> Rep:
    """The initial value of a reduction, a scalar of `x`'s type that holds `init`."""
    what = "the initial value of 'reduce'"
    if isinstance(init, bool) or not isinstance(init, Real):
        raise wrong(what, "a number", init)
    if x.dtype.is_float or x.dtype.is_bool:
        return _constant(float(init), x)
    if not float(init).is_integer():
        raise bad(what, f"an integer (the operand is of type {x.spec})", init)
    promotion.with_weak(x.dtype, int(init), what)  # in range, or an error
    return _constant(int(init), x)


def sum(x: Any, axis: int | Sequence[int] | None = None) -> Rep:
    x = _operand(x, "the operand of 'sum'")
    check_axes(axis, x.rank, "the axis of 'sum'")
    return reduce(x, "add", 0, axis)


def max(x: Any, axis: int | Sequence[int] | None = None) -> Rep:
    x = _operand(x, "the operand of 'max'")
    check_axes(axis, x.rank, "the axis of 'max'")
    lowest = -float("inf") if x.dtype.is_float else (False if x.dtype.is_bool else
                                                     _lowest(x.dtype))
    return reduce(x, "max", lowest, axis)


def mean(x: Any, axis: int | Sequence[int] | None = None) -> Rep:
    x = _operand(x, "the operand of 'mean'")
    axes = check_axes(axis, x.rank, "the axis of 'mean'")
    total = sum(x, axis)
    known = [x.shape[a] for a in (axes if axes is not None else range(x.rank))]
    if builtins.all(d is not None for d in known):
        count = 1
        for d in known:
            count *= d  # type: ignore[operator]
        return total / float(count)
    count_rep = x.stage.emit("unitCount", x.value) if axis is None else None
    if count_rep is None:
        raise value_error("'mean' along dimensions of unknown size: divide a 'sum' "
                          "by the size instead")
    return total / cast(count_rep, promotion.true_division(x.dtype))


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
    a = check_axis(axis, x.rank, "the axis of 'softmax'")
    z = x - pad_shape(max(x, a), a)
    e = exp(z)
    return e / pad_shape(sum(e, a), a)


def log_softmax(x: Any, axis: int = -1) -> Rep:
    """x − max x − log Σ e^(x − max x) along `axis`"""
    x = _operand(x, "the operand of 'log_softmax'")
    a = check_axis(axis, x.rank, "the axis of 'log_softmax'")
    z = x - pad_shape(max(x, a), a)
    return z - pad_shape(log(sum(exp(z), a)), a)


def cross_entropy(logits: Any, labels: Any) -> Rep:
    """the mean over rows of −Σ labels · log_softmax(logits) (labels one-hot or soft)"""
    logits = _operand(logits, "the logits of 'cross_entropy'")
    labels = as_rep(labels, logits.stage, "the labels of 'cross_entropy'")
    per_row = negate(sum(labels * log_softmax(logits, -1), -1))
    return mean(per_row)


tensor.OPERATIONS = sys.modules[__name__]  # the operators of staged tensors call these
