"""Reductions, scans, arg-reductions, TopK and losses.

Composite reductions (ReduceL1, ReduceLogSumExp, …) are a pointwise step around `reduce`; with
`noop_with_empty_axes` and no axes only the pointwise steps remain, as ONNX specifies. The
largest element is found as numpy's argmax finds it: `equal(x, max)` against an index range (a
literal, or counted with `scan` for a dynamic size), then the smallest such index (`reduce … by
min`); a NaN counts as the largest and the smallest, as `max` and `min` propagate it. TopK
repeats that k times among the elements not taken yet (NaN ranks above every number there, as
in ONNX's reference and ONNX Runtime). A gathered element is `reduce … by add` of
`select(x, −0, mask)` with one-hot masks `equal(indices, range)` (exact: one term and zeros),
which differentiates. Where ONNX wants an index in range or two sizes equal that are known only
at run time, they are looked up with `extract`, which is a run-time error otherwise (never a
silent wrap or broadcast).
"""

from __future__ import annotations

import math

import numpy as np

import dlvm.ir as ir
import onnx
from dlvm.ir import Value, constant
from dlvm.ir.types import BOOL, I64, DataType, scalar

from .context import NUMPY, NodeContext, along, i64, positions, same_sizes, size_of
from .errors import Invalid, Unsupported
from .ops import converts, count, keep_axes, reduce_axes, slice_axis

NONE = 2**63 - 1  # "no index": larger than every index, so `min` passes it over
TOPK_ROUNDS = 128  # TopK picks one element per round: at most this many
TRIANGLE = 256  # the longest axis whose running product is one of a triangle of terms


# ------------------------------------------------------------------ helpers



def lowest(dt: DataType) -> float | int:
    return -math.inf if dt.is_float else int(np.iinfo(NUMPY[dt]).min)


def highest(dt: DataType) -> float | int:
    return math.inf if dt.is_float else int(np.iinfo(NUMPY[dt]).max)


def zero_of(dt: DataType) -> Value:
    """The identity of a sum that keeps every term as it is (−0 for floats: x + −0 is x)."""
    return constant(-0.0 if dt.is_float else 0, scalar(dt))


def numeric(c: NodeContext, x: Value) -> DataType:
    dt = c.type_of(x).dtype
    if dt == BOOL:
        raise Unsupported(f"{c.node.op_type} of booleans")
    return dt


def floating(c: NodeContext, x: Value) -> DataType:
    dt = c.type_of(x).dtype
    if not dt.is_float:
        raise Unsupported(f"{c.node.op_type} of element type {dt} (floats only)")
    return dt




def nonempty(c: NodeContext, x: Value, axis: int, vector: Value) -> Value | None:
    """An i64 zero that is a run-time error when x's dynamic size along `axis` is 0 (its
    index vector has no element 0); a static 0 is refused now."""
    n = c.type_of(x).shape[axis]
    if n == 0:
        raise Invalid(f"{c.node.op_type} along axis {axis}, which is empty")
    return c.b.extract(vector, [i64(0)]) if n is None else None


def first_index(c: NodeContext, hits: Value, grid: Value, axis: int,
                last: bool = False) -> Value:
    """The first (last) index along `axis` where `hits` holds, kept as a 1-dimension
    (none: `NONE`, or −1 for the last)."""
    b = c.b
    if last:
        found = b.reduce(b.select(grid, i64(-1), hits), "max", i64(-1), [axis])
    else:
        found = b.reduce(b.select(grid, i64(NONE), hits), "min", i64(NONE), [axis])
    return b.padShape(found, axis)


def extremes(c: NodeContext, x: Value, axis: int, fold: str) -> Value:
    """[x is the largest (fold max) or smallest (min) along `axis`]; where there is a NaN,
    the NaNs (`max` and `min` propagate it: no element equals it)."""
    b = c.b
    dt = c.type_of(x).dtype
    init = lowest(dt) if fold == "max" else highest(dt)
    top = b.padShape(b.reduce(x, fold, constant(init, scalar(dt)), [axis]), axis)
    hits = b.equal(x, top)
    return b.or_(hits, b.notEqual(x, x)) if dt.is_float else hits


def arg_extreme(c: NodeContext, x: Value, axis: int, fold: str, last: bool = False) -> Value:
    """The index of the first (last) largest or smallest element along `axis`, kept as a
    1-dimension: numpy's argmax and argmin."""
    vector = positions(c, x, axis)
    check = nonempty(c, x, axis, vector)
    grid = along(c, vector, axis, c.rank(x))
    idx = first_index(c, extremes(c, x, axis, fold), grid, axis, last)
    return idx if check is None else c.b.add(idx, check)


def pick(c: NodeContext, x: Value, mask: Value, axis: int) -> Value:
    """x's one element along `axis` where the one-hot mask holds (kept as a 1-dimension)."""
    dt = c.type_of(x).dtype
    picked = c.b.reduce(c.b.select(x, zero_of(dt), mask), "add", zero_of(dt), [axis])
    return c.b.padShape(picked, axis)


# ------------------------------------------------------------------ reductions


def reduction(c: NodeContext) -> tuple[Value, list[int], bool]:
    """The input, the axes it is reduced along (opset 18: an input) and keepdims."""
    x = c.value(0)
    return x, reduce_axes(c, x, c.opset >= 18), bool(c.attr("keepdims", 1))


def summed(c: NodeContext, x: Value, axes: list[int], keep: bool) -> Value:
    """Σ x along `axes` (none: x itself)."""
    if not axes:
        return x
    out = c.b.reduce(x, "add", c.number(0, x), axes)
    return keep_axes(c, out, axes) if keep else out


def magnitude(c: NodeContext, x: Value) -> Value:
    """|x| = x·sign(x)"""
    return c.b.multiply(x, c.b.sign(x))


@converts("ReduceSumSquare")
def _reduce_sum_square(c: NodeContext) -> list[Value]:
    """Σ x² along axes"""
    x, axes, keep = reduction(c)
    numeric(c, x)
    return [summed(c, c.b.multiply(x, x), axes, keep)]


@converts("ReduceL1")
def _reduce_l1(c: NodeContext) -> list[Value]:
    """Σ |x| along axes"""
    x, axes, keep = reduction(c)
    numeric(c, x)
    return [summed(c, magnitude(c, x), axes, keep)]


@converts("ReduceL2")
def _reduce_l2(c: NodeContext) -> list[Value]:
    """√(Σ x²) along axes"""
    x, axes, keep = reduction(c)
    floating(c, x)
    return [c.b.sqrt(summed(c, c.b.multiply(x, x), axes, keep))]


@converts("ReduceLogSum")
def _reduce_log_sum(c: NodeContext) -> list[Value]:
    """log Σ x along axes"""
    x, axes, keep = reduction(c)
    floating(c, x)
    return [c.b.log(summed(c, x, axes, keep))]


@converts("ReduceLogSumExp")
def _reduce_log_sum_exp(c: NodeContext) -> list[Value]:
    """m + log Σ exp(x − m) along axes, m the maximum (0 where it is infinite)"""
    x, axes, keep = reduction(c)
    floating(c, x)
    b = c.b
    top = b.reduce(x, "max", c.number(-math.inf, x), axes) if axes else x
    # an infinite maximum (or none: an empty set) is not subtracted: x − m would be NaN
    finite = b.equal(b.subtract(top, top), c.number(0, x))
    m = b.select(top, c.number(0, x), finite)
    wide = keep_axes(c, m, axes)
    total = summed(c, b.exp(b.subtract(x, wide)), axes, keep)
    return [b.add(b.log(total), wide if keep else m)]


# ------------------------------------------------------------------ arg-reductions


@converts("ArgMax", "ArgMin")
def _arg_max(c: NodeContext) -> list[Value]:
    """first (select_last_index: last) index of the maximum (ArgMin: minimum) along axis
    (int64), as numpy's argmax: the smallest index where x = max(x)"""
    x = c.value(0)
    numeric(c, x)
    axis = c.axis(c.attr("axis", 0), c.rank(x))
    fold = "max" if c.node.op_type == "ArgMax" else "min"
    idx = arg_extreme(c, x, axis, fold, bool(c.attr("select_last_index", 0)))
    return [idx if c.attr("keepdims", 1) else c.b.squeezeShape(idx, axis)]


@converts("Hardmax")
def _hardmax(c: NodeContext) -> list[Value]:
    """1 at the first maximum along axis, 0 elsewhere"""
    if c.opset < 13:
        raise Unsupported("Hardmax before opset 13 (it flattens)")
    x = c.value(0)
    numeric(c, x)
    axis = c.axis(c.attr("axis", -1), c.rank(x))
    if c.type_of(x).shape[axis] == 0:
        return [x]
    idx = arg_extreme(c, x, axis, "max")
    grid = along(c, positions(c, x, axis), axis, c.rank(x))
    return [c.b.select(c.number(1, x), c.number(0, x), c.b.equal(grid, idx))]


def hardmax_flattened(model: onnx.ModelProto, opset: int, source: str) -> onnx.ModelProto:
    """Before opset 13, Hardmax flattens its input to rows at `axis` (default 1), and ONNX's
    version converter takes Hardmax-13, along one axis, as the same operator: each Hardmax of
    an older model written as Flatten, Hardmax of the rows, and Reshape back to the shape."""
    if not any(n.op_type == "Hardmax" for n in model.graph.node):
        return model
    if opset < 5:
        raise ir.FrontendError(f"{source}: error: Hardmax in a model of opset {opset} (DLVM "
                               "converts it from opset 5, where Reshape takes a shape input)")
    out = onnx.ModelProto()
    out.CopyFrom(model)
    nodes = []
    for node in model.graph.node:
        if node.op_type != "Hardmax":
            nodes.append(node)
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        x, y = node.input[0], node.output[0]
        shape, rows, hot = f"{y}.shape", f"{y}.rows", f"{y}.hardmax"
        nodes += [onnx.helper.make_node("Shape", [x], [shape]),
                  onnx.helper.make_node("Flatten", [x], [rows], axis=axis),
                  onnx.helper.make_node("Hardmax", [rows], [hot], node.name, axis=1),
                  onnx.helper.make_node("Reshape", [hot, shape], [y])]
    del out.graph.node[:]
    out.graph.node.extend(nodes)
    return out


@converts("LpNormalization")
def _lp_normalization(c: NodeContext) -> list[Value]:
    """x / ‖x‖ₚ along axis (p = 1: Σ|x|, p = 2: √Σx²); 0 where the norm is 0"""
    x = c.value(0)
    floating(c, x)
    axis = c.axis(c.attr("axis", -1), c.rank(x))
    p = c.attr("p", 2)
    if p not in (1, 2):
        raise Invalid(f"p={p} (ONNX allows 1 and 2)")
    b = c.b
    if p == 1:
        norm = summed(c, magnitude(c, x), [axis], True)
    else:
        norm = b.sqrt(summed(c, b.multiply(x, x), [axis], True))
    zero = b.equal(norm, c.number(0, x))
    # divided by 1 where the norm is 0, so that no NaN reaches the derivative
    quotient = b.divide(x, b.select(c.number(1, x), norm, zero))
    return [b.select(c.number(0, x), quotient, zero)]


# ------------------------------------------------------------------ scans


def shifted(c: NodeContext, x: Value, axis: int, unit: float) -> Value:
    """x moved one place on along `axis`: `unit` first, the last element dropped."""
    n = c.type_of(x).shape[axis]
    if n is None:
        raise Unsupported(f"exclusive {c.node.op_type} along a dynamic dimension")
    if n == 0:
        return x
    first = slice_axis(c, x, axis, 0, 1)
    units = c.b.select(c.number(unit, x), c.number(unit, x), c.b.equal(first, first))
    if n == 1:
        return units
    return c.b.concatenate([units, slice_axis(c, x, axis, 0, n - 1)], axis)


def running_product(c: NodeContext, x: Value, axis: int) -> Value:
    """yᵢ = x₀·…·xᵢ along `axis`: for floats along a short static axis, the product of the
    terms xⱼ for j ≤ i (1 for the others), which differentiates (`reduce … by multiply`
    has a derivative, `scan` by multiply none); otherwise `scan`."""
    n = c.type_of(x).shape[axis]
    if not c.type_of(x).dtype.is_float or n is None or n > TRIANGLE:
        return c.b.scan(x, "multiply", [axis])
    lower = c.literal(np.tril(np.ones((n, n), np.bool_)))  # [i, j]: j ≤ i
    for _ in range(axis):
        lower = c.b.padShape(lower, 0)
    while c.rank(lower) < c.rank(x) + 1:
        lower = c.b.padShape(lower, c.rank(lower))
    terms = c.b.select(c.b.padShape(x, axis), c.number(1, x), lower)  # [… i, j …]
    return c.b.reduce(terms, "multiply", c.number(1, x), [axis + 1])


@converts("CumSum", "CumProd")
def _cumulative(c: NodeContext) -> list[Value]:
    """yᵢ = x₀ ⊕ … ⊕ xᵢ along axis, ⊕ = + or · (exclusive: to xᵢ₋₁; reverse: from the end)
    by `scan`, or for a product of floats the product of a triangle of terms"""
    x = c.value(0)
    numeric(c, x)
    given = c.ints(1, "axis")
    if len(given) != 1:
        raise Invalid(f"axis has {len(given)} elements (it is one)")
    axis = c.axis(given[0], c.rank(x))
    fold, unit = ("add", 0) if c.node.op_type == "CumSum" else ("multiply", 1)
    reverse = bool(c.attr("reverse", 0))
    if reverse:
        x = c.b.reverse(x, [axis])
    if c.attr("exclusive", 0):
        x = shifted(c, x, axis, unit)
    y = c.b.scan(x, "add", [axis]) if fold == "add" else running_product(c, x, axis)
    return [c.b.reverse(y, [axis]) if reverse else y]


# ------------------------------------------------------------------ top k


def next_extreme(c: NodeContext, x: Value, axis: int, grid: Value, taken: Value | None,
                 largest: bool) -> Value:
    """The index of the next element of TopK's order among those not `taken`, kept as a
    1-dimension: the first largest (a NaN first) or the first smallest (a NaN last)."""
    b = c.b
    dt = c.type_of(x).dtype
    free = None if taken is None else b.not_(taken)
    nan = b.notEqual(x, x) if dt.is_float else None
    if largest:  # `max` propagates a NaN, which then equals no element: the NaNs are hits
        pool = x if free is None else b.select(x, constant(lowest(dt), scalar(dt)), free)
        top = b.padShape(b.reduce(pool, "max", constant(lowest(dt), scalar(dt)), [axis]), axis)
        hits = b.equal(x, top) if nan is None else b.or_(b.equal(x, top), nan)
        return first_index(c, hits if free is None else b.and_(hits, free), grid, axis)
    numbers = free if nan is None else b.not_(nan) if free is None else b.and_(free,
                                                                              b.not_(nan))
    pool = x if numbers is None else b.select(x, constant(highest(dt), scalar(dt)), numbers)
    low = b.padShape(b.reduce(pool, "min", constant(highest(dt), scalar(dt)), [axis]), axis)
    hits = b.equal(x, low)
    idx = first_index(c, hits if numbers is None else b.and_(hits, numbers), grid, axis)
    if nan is None:
        return idx
    rest = first_index(c, nan if free is None else free, grid, axis)  # NaNs only left
    return b.select(rest, idx, b.equal(idx, i64(NONE)))


def top_k_count(c: NodeContext, n: int | None) -> int:
    """k (an attribute before opset 10, then a constant input of one element), checked."""
    if c.opset < 10:
        k = int(c.attr("k"))
    else:
        given = c.ints(1, "k")
        if len(given) != 1:
            raise Invalid(f"k has {len(given)} elements (it is one)")
        k = given[0]
    if k < 0 or (n is not None and k > n):
        raise Invalid(f"k={k} for {n} elements along the axis")
    if k == 0:
        raise Unsupported("TopK with k=0 (empty outputs)")
    if k > TOPK_ROUNDS:
        raise Unsupported(f"TopK with k={k} (at most {TOPK_ROUNDS}: one round per element)")
    return k


@converts("TopK")
def _top_k(c: NodeContext) -> list[Value]:
    """the k largest (largest=0: smallest) elements along axis in order, and their indices
    (int64): k rounds of picking the first extreme not taken yet (equal values: the lower
    index first; NaN ranks above every number)"""
    x = c.value(0)
    numeric(c, x)
    rank = c.rank(x)
    axis = c.axis(c.attr("axis", -1), rank)
    n = c.type_of(x).shape[axis]
    k = top_k_count(c, n)
    largest = bool(c.attr("largest", 1))  # sorted=0 leaves the order to us: sorted it is
    b = c.b
    vector = positions(c, x, axis)
    grid = along(c, vector, axis, rank)
    taken: Value | None = None
    values, indices = [], []
    for r in range(k):
        idx = next_extreme(c, x, axis, grid, taken, largest)
        if r == 0 and n is None:  # k ≤ n at run time: element k − 1 exists
            idx = b.add(idx, b.subtract(b.extract(vector, [i64(k - 1)]), i64(k - 1)))
        hit = b.equal(grid, idx)
        values.append(pick(c, x, hit, axis))
        indices.append(idx)
        taken = hit if taken is None else b.or_(taken, hit)
    if k == 1:
        return [values[0], indices[0]]
    return [b.concatenate(values, axis), b.concatenate(indices, axis)]


# ------------------------------------------------------------------ losses




def within(c: NodeContext, idx: Value, vector: Value) -> Value:
    """idx unchanged, but a run-time error where an element is not an index of `vector`
    (its largest and smallest elements are looked up in it)."""
    b = c.b
    hi, lo = b.reduce(idx, "max", i64(0)), b.reduce(idx, "min", i64(0))
    zero = b.add(b.subtract(b.extract(vector, [hi]), hi), b.subtract(b.extract(vector, [lo]),
                                                                       lo))
    return b.add(idx, zero)


def class_labels(c: NodeContext, scores: Value) -> tuple[Value, Value | None, Value]:
    """The labels (input 1) as i64, checked against the N × C × d… scores: the same N and
    d…, each in [0, C) unless it is ignore_index; [label ≠ ignore_index]; the class range."""
    b = c.b
    rank = c.rank(scores)
    if rank < 2:
        raise Invalid(f"input of rank {rank} (it is N × C × d1 × …)")
    labels = c.value(1)
    dt = c.type_of(labels).dtype
    if not dt.is_int:
        raise Unsupported(f"labels of element type {dt} (integers are)")
    if c.rank(labels) != rank - 1:
        raise Invalid(f"labels of rank {c.rank(labels)} for input of rank {rank} (one less)")
    labels = labels if dt == I64 else b.dataTypeCast(labels, I64)
    if c.type_of(scores).shape[1] == 0:
        raise Invalid("no classes (C = 0)")
    pairs = [(size_of(c, scores, 0), size_of(c, labels, 0))]
    pairs += [(size_of(c, scores, k + 1), size_of(c, labels, k)) for k in range(1, rank - 1)]
    if c.has(2):
        weight = c.value(2)
        if c.rank(weight) != 1:
            raise Invalid(f"weights of rank {c.rank(weight)} (a vector of C)")
        pairs.append((size_of(c, scores, 1), size_of(c, weight, 0)))
    check = same_sizes(c, pairs, "input and labels (or weights)")
    ignore = c.attr("ignore_index")
    kept = None if ignore is None else b.notEqual(labels, i64(int(ignore)))
    target = labels if kept is None else b.select(labels, i64(0), kept)
    classes = positions(c, scores, 1)
    target = within(c, target, classes)
    return (target if check is None else b.add(target, check)), kept, classes


def negative_log_likelihood(c: NodeContext, logp: Value) -> Value:
    """−logp[n, label, d…] (× weight[label]; 0 where the label is ignore_index), reduced as
    `reduction` says: none, sum, or mean (Σ loss / Σ weight[label], or the number kept)."""
    b = c.b
    dt = floating(c, logp)
    reduction = c.attr("reduction", "mean")
    if reduction not in ("none", "sum", "mean"):
        raise Invalid(f"reduction={reduction!r} (none, sum or mean)")
    rank = c.rank(logp)
    target, kept, classes = class_labels(c, logp)
    hot = b.equal(b.padShape(target, 1), along(c, classes, 1, rank))  # N × C × d…
    if kept is not None:
        hot = b.and_(hot, b.padShape(kept, 1))
    zero = zero_of(dt)
    loss = b.negate(b.reduce(b.select(logp, zero, hot), "add", zero, [1]))
    weights = None
    if c.has(2):
        w = c.value(2)
        if c.type_of(w).dtype != dt:
            raise Invalid(f"weights of element type {c.type_of(w).dtype} for input of {dt}")
        weights = b.reduce(b.select(along(c, w, 1, rank), zero, hot), "add", zero, [1])
        loss = b.multiply(loss, weights)
    if reduction == "none":
        return loss
    total = b.reduce(loss, "add", c.number(0, loss))
    if reduction == "sum":
        return total
    if weights is not None:
        return b.divide(total, b.reduce(weights, "add", c.number(0, loss)))
    if kept is not None:
        ones = b.select(c.number(1, loss), c.number(0, loss), kept)
        return b.divide(total, b.reduce(ones, "add", c.number(0, loss)))
    return b.divide(total, count(c, loss, list(range(rank - 1))))


@converts("NegativeLogLikelihoodLoss")
def _nll_loss(c: NodeContext) -> list[Value]:
    """−input[n, target, d…]·weight[target] (0 at ignore_index), then none, Σ or weighted mean
    (the target picked with a one-hot mask, so that it differentiates)"""
    return [negative_log_likelihood(c, c.value(0))]


@converts("SoftmaxCrossEntropyLoss")
def _softmax_cross_entropy(c: NodeContext) -> list[Value]:
    """NegativeLogLikelihoodLoss of log softmax(scores) along the classes, z − log Σ exp z
    with z = scores − max; the log-probabilities are the optional second output"""
    x = c.value(0)
    floating(c, x)
    if c.rank(x) < 2:
        raise Invalid(f"scores of rank {c.rank(x)} (they are N × C × d1 × …)")
    b = c.b
    top = b.padShape(b.reduce(x, "max", c.number(-math.inf, x), [1]), 1)
    z = b.subtract(x, top)
    logp = b.subtract(z, b.padShape(b.log(b.reduce(b.exp(z), "add", c.number(0, x), [1])), 1))
    loss = negative_log_likelihood(c, logp)
    wanted = len(c.node.output) > 1 and bool(c.node.output[1])
    return [loss, logp] if wanted else [loss]
