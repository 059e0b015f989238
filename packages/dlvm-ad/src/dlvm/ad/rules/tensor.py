"""Derivative rules of the tensor instructions: reductions, `dot`, layout, shape casts,
`convolve` and `reduceWindow`.

Every adjoint contribution is built in the operand's own shape. Conventions:

- **Ties** of `max`/`min` (in `reduce` and `reduceWindow`) **split** the adjoint evenly
  among every entry equal to the result, the init value included (the tangent is the
  mean of the tied entries' tangents, consistently).
- `reduce … by multiply` is **zero-safe**: the product of the other entries is computed
  from the number of zeros and the product of the non-zero entries, never as `prod/x` at
  a zero.
- Gathers whose positions only the run time knows (a dynamic dimension, a middle axis)
  contract with a **one-hot mask** built from `i64` index vectors (an axis moved elsewhere
  is a `transpose`):
  `select` and additions of exact zeros, so the result is exact, at the cost of a
  temporary one dimension larger.
- Adjoints of `convolve` and `reduceWindow` are transposed convolutions; they need a
  static kernel (window) shape, and static spatial sizes where a stride or an input
  dilation is not 1. `reduceWindow` by `max`/`min` extracts the windows with a one-hot
  kernel. Function combinators, `scan` by anything but `add`, `reduceWindow` by
  `multiply`, and `bitCast` between different data types are not differentiable: their
  rules raise `DifferentiationError`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dlvm.ir import BuiltinRef, KeywordLiteral, LiteralValue, ScalarLiteral, Value, constant
from dlvm.ir.instructions.tensor import window_output, window_pads
from dlvm.ir.types import I64, TensorType, scalar

from ..errors import DifferentiationError
from . import adjoint, tangent

if TYPE_CHECKING:
    from dlvm.ir import Instruction

    from ..context import AdjointContext, RuleContext, TangentContext

Contributions = list[tuple[Value, Value]]
Size = int | Value  # a static size, or an i64 scalar computed at run time
Pads = list[tuple[int, int]]

# ------------------------------------------------------------------ helpers


def _unsupported(inst: Instruction, why: str) -> DifferentiationError:
    return DifferentiationError(f"'{inst.opcode}' is not differentiable here: {why}")


def _active(c: RuleContext, v: Value) -> bool:
    """Whether operand `v` can receive an adjoint: not a literal, floating point, wanted."""
    return not isinstance(v, LiteralValue) and c.type_of(v).dtype.is_float and c.wants(v)


def _p(c: RuleContext, v: Value) -> Value:
    """The primal value of operand `v` (constant literals stand for themselves)."""
    if isinstance(v, LiteralValue) and isinstance(v.literal, ScalarLiteral | KeywordLiteral):
        return v
    return c.primal(v)


def _t(c: TangentContext, v: Value) -> Value | None:
    return None if isinstance(v, LiteralValue) else c.tangent(v)


def _plus(c: RuleContext, a: Value | None, b: Value | None) -> Value | None:
    """`a + b` of optional values (None: zero)."""
    if a is None or b is None:
        return a if b is None else b
    return c.b.add(a, b)


def _zero(c: RuleContext, like: Value) -> Value:
    return c.const(0.0, like)


def _one(c: RuleContext, like: Value) -> Value:
    return c.const(1.0, like)


def _indicator(c: RuleContext, mask: Value, like: Value) -> Value:
    """1 where `mask`, else 0, in `like`'s data type."""
    return c.b.select(_one(c, like), _zero(c, like), mask)


def _i64(n: int) -> Value:
    return constant(n, scalar(I64))


def _sum(c: RuleContext, v: Value, dims: Sequence[int]) -> Value:
    """`v` summed over `dims` (nothing to do for no dimensions)."""
    if not dims:
        return v
    return c.b.reduce(v, "add", _zero(c, v), list(dims))


def _prod(c: RuleContext, v: Value, dims: Sequence[int]) -> Value:
    """`v` multiplied over `dims`."""
    if not dims:
        return v
    return c.b.reduce(v, "multiply", _one(c, v), list(dims))


def _sum_all(c: RuleContext, v: Value) -> Value:
    return _sum(c, v, range(c.type_of(v).rank))


def _pad(c: RuleContext, v: Value, dims: Sequence[int]) -> Value:
    """`v`, reduced over `dims`, with those dimensions back as size 1."""
    for d in sorted(dims):
        v = c.b.padShape(v, d)
    return v


def _expand(c: RuleContext, v: Value, dims: Sequence[int], like: Value) -> Value:
    """`v`, reduced over `dims`, broadcast back to primal `like`'s shape."""
    return c.broadcast_to(_pad(c, v, dims), like)


def _fit(c: RuleContext, v: Value, operand: Value) -> Value:
    """`v` cast to `operand`'s type where it only knows less of the shape."""
    want, got = c.type_of(operand), c.type_of(v)
    if got == want or got.rank != want.rank or sum(d is None for d in want.shape) > 1:
        return v
    if any(w is not None and g is None for w, g in zip(want.shape, got.shape, strict=True)):
        return c.b.shapeCast(v, want.shape)
    return v


def _reduced_dims(c: RuleContext, inst: Instruction) -> list[int]:
    return list(range(c.type_of(inst.x).rank)) if inst.dims is None else list(inst.dims)


def _combinator(inst: Instruction) -> str:
    comb = inst.combinator
    if isinstance(comb, str):
        return comb
    if isinstance(comb, BuiltinRef):
        return comb.name
    raise _unsupported(inst, "a function combinator has no derivative rule")


# ------------------------------------------------------------------ index vectors, one-hot


def _static_iota(c: RuleContext, n: int) -> Value:
    """<0, 1, …, n−1> as an i64 vector."""
    ones = constant(1, TensorType((n,), I64))
    return c.b.subtract(c.b.scan(ones, "add", [0]), 1)


def _ones_vector(c: RuleContext, t: Value, axis: int) -> Value:
    """An i64 vector of ones, as long as dimension `axis` of value `t` at run time."""
    one = _i64(1)
    ones = c.b.select(one, one, c.b.equal(t, t))
    rank = c.type_of(t).rank
    if rank == 1:
        return ones
    return c.b.reduce(ones, "max", _i64(0), [d for d in range(rank) if d != axis])


def _iota(c: RuleContext, t: Value, axis: int) -> Value:
    """The indices <0, 1, …> of dimension `axis` of value `t`, as an i64 vector."""
    n = c.type_of(t).shape[axis]
    if n is not None:
        return _static_iota(c, n)
    return c.b.subtract(c.b.scan(_ones_vector(c, t, axis), "add", [0]), 1)


def _size(c: RuleContext, t: Value, axis: int) -> Size:
    """Dimension `axis` of value `t`: an int, or an i64 scalar when dynamic."""
    n = c.type_of(t).shape[axis]
    return n if n is not None else c.b.reduce(_ones_vector(c, t, axis), "add", _i64(0), [0])


def _add_size(c: RuleContext, a: Size, b: Size) -> Size:
    if isinstance(a, int) and isinstance(b, int):
        return a + b
    if isinstance(a, int) and a == 0:
        return b
    return c.b.add(_i64(a) if isinstance(a, int) else a, _i64(b) if isinstance(b, int) else b)


def _mul_size(c: RuleContext, a: Size, b: Size) -> Size:
    if isinstance(a, int) and isinstance(b, int):
        return a * b
    return c.b.multiply(_i64(a) if isinstance(a, int) else a,
                        _i64(b) if isinstance(b, int) else b)


def _place(c: RuleContext, v: Value, axis: int, rank: int) -> Value:
    """Vector `v` as a rank-`rank` tensor whose only non-1 dimension is `axis`."""
    for _ in range(axis):
        v = c.b.padShape(v, 0)
    for r in range(axis + 1, rank):
        v = c.b.padShape(v, r)
    return v


def _remap(c: RuleContext, y: Value, src: int, pos: int, out_iota: Value,
           start: Size = 0) -> Value:
    """out[…k…] = y[…(k + start)…] (zero out of range): dimension `src` of `y` replaced by
    one indexed by `out_iota`, at position `pos` of the result (a one-hot contraction)."""
    rank = c.type_of(y).rank
    ins, old = (pos, src + 1) if pos <= src else (pos + 1, src)
    iy = _place(c, _iota(c, y, src), old, rank + 1)
    io = out_iota if isinstance(start, int) and start == 0 else c.b.add(
        out_iota, _i64(start) if isinstance(start, int) else start)
    mask = c.b.equal(iy, _place(c, io, ins, rank + 1))
    picked = c.b.select(c.b.padShape(y, ins), _zero(c, y), mask)
    return c.b.reduce(picked, "add", _zero(c, y), [old])


def _move_axis(c: RuleContext, y: Value, src: int, dst: int) -> Value:
    """`y` with dimension `src` moved to position `dst`: a transposition (a copy, where a
    one-hot contraction would cost a factor of the dimension's size)."""
    if src == dst:
        return y
    order = [k for k in range(c.type_of(y).rank) if k != src]
    order.insert(dst, src)
    return c.b.transpose(y, order)


def _swap01(c: RuleContext, y: Value) -> Value:
    """`y` with its first two dimensions swapped (a shape cast when one of them is 1)."""
    shape = c.type_of(y).shape
    target = (shape[1], shape[0], *shape[2:])
    if 1 in shape[:2] and sum(d is None for d in target) <= 1:
        return c.b.shapeCast(y, target)
    return _move_axis(c, y, 1, 0)


def _reshape_like(c: RuleContext, v: Value, x: Value) -> Value:
    """`v`'s elements in row-major order, in primal `x`'s shape (known at run time)."""
    shape = c.type_of(x).shape
    if sum(d is None for d in shape) <= 1:
        return c.b.shapeCast(v, shape)
    # Several dynamic dimensions: gather flat[linear index] through a one-hot mask.
    xp, rank = _p(c, x), len(shape)
    flat = c.b.shapeCast(v, (None,))
    linear: Value | None = None
    stride: Size = 1
    for k in reversed(range(rank)):
        term = _place(c, _iota(c, xp, k), k, rank)
        if not (isinstance(stride, int) and stride == 1):
            term = c.b.multiply(term, _i64(stride) if isinstance(stride, int) else stride)
        linear = term if linear is None else c.b.add(linear, term)
        stride = _mul_size(c, stride, _size(c, xp, k))
    assert linear is not None
    mask = c.b.equal(c.b.padShape(linear, rank), _place(c, _iota(c, flat, 0), rank, rank + 1))
    picked = c.b.select(_place(c, flat, rank, rank + 1), _zero(c, v), mask)
    return c.b.reduce(picked, "add", _zero(c, v), [rank])


# ------------------------------------------------------------------ reduce, scan


def _others_product(c: RuleContext, x: Value, dims: Sequence[int]) -> Value:
    """Π of the other entries of each entry's reduction group, exact at zeros: with z zeros
    and P the product of the non-zero entries, P/xᵢ if z = 0; at a zero, P if z = 1; else 0."""
    zero, one = _zero(c, x), _one(c, x)
    if not dims:
        return one
    is_zero = c.b.equal(x, zero)
    nonzero = c.b.select(one, x, is_zero)
    p = _pad(c, _prod(c, nonzero, dims), dims)
    zeros = _pad(c, _sum(c, _indicator(c, is_zero, x), dims), dims)
    at_zero = c.b.select(p, zero, c.b.equal(zeros, one))
    elsewhere = c.b.select(c.b.divide(p, nonzero), zero, c.b.equal(zeros, zero))
    return c.b.select(at_zero, elsewhere, is_zero)


def _extremes(c: RuleContext, inst: Instruction) -> tuple[Value, Value, Value]:
    """For `reduce` by max/min: (mask of the entries equal to the result, number of tied
    entries per result element (init included), mask of the result elements tied with init)."""
    dims = _reduced_dims(c, inst)
    x, r = _p(c, inst.x), c.primal(inst)
    mask = c.b.equal(x, _pad(c, r, dims))
    init_tie = c.b.equal(_p(c, inst.init), r)
    count = c.b.add(_sum(c, _indicator(c, mask, x), dims), _indicator(c, init_tie, x))
    return mask, count, init_tie


@adjoint("reduce")
def _reduce_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """add: dx = bcast(dy), dinit = Σdy · multiply: dx = dy·init·Π_{j≠i}x_j, dinit = Σdy·Πx ·
    max/min: dx = bcast(dy/ties)·[x = r], dinit = Σ dy/ties·[init = r]"""
    op, dims, x, init = _combinator(inst), _reduced_dims(c, inst), inst.x, inst.init
    want_x, want_init = _active(c, x), _active(c, init)
    out: Contributions = []
    if op == "add":
        if want_x:
            out.append((x, _fit(c, _expand(c, dy, dims, x), x)))
        if want_init:
            out.append((init, _sum_all(c, dy)))
    elif op == "multiply":
        xp = _p(c, x)
        if want_x:
            g = c.b.multiply(_pad(c, dy, dims), _others_product(c, xp, dims))
            out.append((x, _fit(c, c.b.multiply(g, _p(c, init)), x)))
        if want_init:
            out.append((init, _sum_all(c, c.b.multiply(dy, _prod(c, xp, dims)))))
    elif op in ("max", "min"):
        mask, count, init_tie = _extremes(c, inst)
        g = c.b.divide(dy, count)
        if want_x:
            out.append((x, _fit(c, c.b.select(_pad(c, g, dims), _zero(c, dy), mask), x)))
        if want_init:
            out.append((init, _sum_all(c, c.b.select(g, _zero(c, dy), init_tie))))
    else:
        raise _unsupported(inst, f"reduction by '{op}'")
    return out


@tangent("reduce")
def _reduce_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """add: ṙ = Σẋ + i̇nit · multiply: ṙ = i̇nit·Πx + init·Σ ẋ·Π_{j≠i}x_j ·
    max/min: ṙ = (Σ ẋ·[x = r] + i̇nit·[init = r]) / ties"""
    op, dims = _combinator(inst), _reduced_dims(c, inst)
    tx, ti = _t(c, inst.x), _t(c, inst.init)
    if tx is None and ti is None:
        return None
    if op == "add":
        sx = None if tx is None else _sum(c, tx, dims)
        if sx is None:
            assert ti is not None
            return c.broadcast_to(ti, inst)
        return _plus(c, sx, ti)
    if op == "multiply":
        xp = _p(c, inst.x)
        ti_part = None if ti is None else c.b.multiply(ti, _prod(c, xp, dims))
        tx_part = None if tx is None else c.b.multiply(
            _sum(c, c.b.multiply(tx, _others_product(c, xp, dims)), dims), _p(c, inst.init))
        return _plus(c, tx_part, ti_part)
    if op in ("max", "min"):
        mask, count, init_tie = _extremes(c, inst)
        zero = _zero(c, inst)
        tx_part = None if tx is None else _sum(c, c.b.select(tx, zero, mask), dims)
        ti_part = None if ti is None else c.b.select(ti, zero, init_tie)
        total = _plus(c, tx_part, ti_part)
        assert total is not None
        return c.b.divide(total, count)
    raise _unsupported(inst, f"reduction by '{op}'")


@adjoint("scan")
def _scan_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = reverse cumulative sum of dy = rev(cumsum(rev(dy)))"""
    if _combinator(inst) != "add":
        raise _unsupported(inst, "only 'scan … by add' has a derivative rule")
    dims = list(inst.dims)
    rev = c.b.reverse(c.b.scan(c.b.reverse(dy, dims), "add", dims), dims)
    return [(inst.x, _fit(c, rev, inst.x))]


@tangent("scan")
def _scan_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = cumsum(ẋ)"""
    if _combinator(inst) != "add":
        raise _unsupported(inst, "only 'scan … by add' has a derivative rule")
    t = _t(c, inst.x)
    return None if t is None else c.b.scan(t, "add", list(inst.dims))


# ------------------------------------------------------------------ dot


def _matrix_transpose(c: RuleContext, v: Value) -> Value:
    """The (batched) transpose of the last two dimensions."""
    rank = c.type_of(v).rank
    return c.b.transpose(v) if rank == 2 else _move_axis(c, v, rank - 1, rank - 2)


@adjoint("dot")
def _dot_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """vectors: da = dy·b, db = dy·a · matrices (batched): da = dy·bᵀ, db = aᵀ·dy"""
    a, b = inst.lhs, inst.rhs
    vectors = c.type_of(a).rank == 1
    out: Contributions = []
    if _active(c, a):
        bp = _p(c, b)
        da = c.b.multiply(dy, bp) if vectors else c.b.dot(dy, _matrix_transpose(c, bp))
        out.append((a, _fit(c, da, a)))
    if _active(c, b):
        ap = _p(c, a)
        db = c.b.multiply(dy, ap) if vectors else c.b.dot(_matrix_transpose(c, ap), dy)
        out.append((b, _fit(c, db, b)))
    return out


@tangent("dot")
def _dot_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = ȧ·b + a·ḃ"""
    ta, tb = _t(c, inst.lhs), _t(c, inst.rhs)
    return _plus(c, None if ta is None else c.b.dot(ta, _p(c, inst.rhs)),
                 None if tb is None else c.b.dot(_p(c, inst.lhs), tb))


# ------------------------------------------------------------------ layout


def _inverse_order(inst: Instruction) -> list[int] | None:
    """The order that undoes a `transpose`'s (None: a reversal, its own inverse)."""
    if inst.perm is None:
        return None
    inverse = [0] * len(inst.perm)
    for i, k in enumerate(inst.perm):
        inverse[k] = i
    return inverse


@adjoint("transpose")
def _transpose_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = dy permuted back (P⁻¹)"""
    return [(inst.x, _fit(c, c.b.transpose(dy, _inverse_order(inst)), inst.x))]


@tangent("transpose")
def _transpose_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = ẋ permuted (P)"""
    t = _t(c, inst.x)
    return None if t is None else c.b.transpose(t, inst.perm)


@adjoint("reverse")
def _reverse_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = reverse(dy)"""
    return [(inst.x, _fit(c, c.b.reverse(dy, list(inst.dims)), inst.x))]


@tangent("reverse")
def _reverse_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = reverse(ẋ)"""
    t = _t(c, inst.x)
    return None if t is None else c.b.reverse(t, list(inst.dims))


@adjoint("concatenate")
def _concatenate_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dxᵢ = dy[offsetᵢ : offsetᵢ + sizeᵢ] along the axis"""
    axis = inst.axis
    out: Contributions = []
    offset: Size = 0
    for i, x in enumerate(inst.xs):
        n = c.type_of(x).shape[axis]
        if _active(c, x) and n != 0:
            if axis == 0 and isinstance(offset, int) and n is not None:
                dx = c.b.slice(dy, offset, offset + n - 1)
            else:
                dx = _remap(c, dy, axis, axis, _iota(c, _p(c, x), axis), offset)
            out.append((x, _fit(c, dx, x)))
        if i + 1 < len(inst.xs):
            offset = _add_size(c, offset, n if n is not None else _size(c, _p(c, x), axis))
    return out


@tangent("concatenate")
def _concatenate_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = concatenate(ẋᵢ) (zeros for constant operands)"""
    ts = [_t(c, x) for x in inst.xs]
    if all(t is None for t in ts):
        return None
    parts = [c.zeros(x) if t is None else t for x, t in zip(inst.xs, ts, strict=True)]
    return c.b.concatenate(parts, inst.axis)


def _zero_rows(c: RuleContext, x: Value, n: int) -> Value:
    """Zeros shaped like `n` rows of primal `x` (whose dimension 0 is static)."""
    t = c.type_of(x)
    if all(d is not None for d in t.shape[1:]):
        return constant(0.0, t.with_shape((n, *t.shape[1:])))
    return c.b.slice(c.zeros(x), 0, n - 1)


@adjoint("slice")
def _slice_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = dy padded with zero rows back to x's dimension 0"""
    x, lo, hi = inst.x, inst.lower, inst.upper
    rows = c.type_of(x).shape[0]
    if rows is None:
        dx = _remap(c, dy, 0, 0, _iota(c, _p(c, x), 0), -lo)
    else:
        parts = [_zero_rows(c, x, lo)] if lo > 0 else []
        parts.append(dy)
        if hi < rows - 1:
            parts.append(_zero_rows(c, x, rows - 1 - hi))
        dx = c.b.concatenate(parts, 0) if len(parts) > 1 else dy
    return [(x, _fit(c, dx, x))]


@tangent("slice")
def _slice_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = ẋ[lower … upper]"""
    t = _t(c, inst.x)
    return None if t is None else c.b.slice(t, inst.lower, inst.upper)


# ------------------------------------------------------------------ shape casts


@adjoint("padShape")
def _pad_shape_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = squeeze(dy)"""
    return [(inst.x, _fit(c, c.b.squeezeShape(dy, inst.axis), inst.x))]


@tangent("padShape")
def _pad_shape_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = pad(ẋ)"""
    t = _t(c, inst.x)
    return None if t is None else c.b.padShape(t, inst.axis)


@adjoint("squeezeShape")
def _squeeze_shape_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = pad(dy)"""
    return [(inst.x, _fit(c, c.b.padShape(dy, inst.axis), inst.x))]


@tangent("squeezeShape")
def _squeeze_shape_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = squeeze(ẋ)"""
    t = _t(c, inst.x)
    return None if t is None else c.b.squeezeShape(t, inst.axis)


@adjoint("shapeCast")
def _shape_cast_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = reshape(dy, shape of x)"""
    return [(inst.x, _reshape_like(c, dy, inst.x))]


@tangent("shapeCast")
def _shape_cast_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = reshape(ẋ)"""
    t = _t(c, inst.x)
    return None if t is None else c.b.shapeCast(t, tuple(inst.shape))


def _bit_cast_is_reshape(c: RuleContext, inst: Instruction) -> bool:
    """Whether the cast keeps the floating-point data type (a reshape); raises when it
    reinterprets floats as other floats; False when either side is not a float tensor."""
    src, dst = c.module.resolve(inst.x.type), c.module.resolve(inst.target)
    if not (isinstance(src, TensorType) and isinstance(dst, TensorType)):
        return False
    if not (src.dtype.is_float and dst.dtype.is_float):
        return False
    if src.dtype != dst.dtype:
        raise _unsupported(inst, f"reinterpreting '{src.dtype}' bits as '{dst.dtype}' has no "
                                 "derivative")
    return True


@adjoint("bitCast")
def _bit_cast_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """same float type: dx = reshape(dy); otherwise the bits carry no derivative"""
    if not _bit_cast_is_reshape(c, inst):
        return []
    return [(inst.x, _reshape_like(c, dy, inst.x))]


@tangent("bitCast")
def _bit_cast_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """same float type: ṙ = reshape(ẋ)"""
    if not _bit_cast_is_reshape(c, inst):
        return None
    t = _t(c, inst.x)
    return None if t is None else c.b.bitCast(t, inst.target)


# ------------------------------------------------------------------ convolution


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _or_none(values: Sequence[int], default: int = 1) -> list[int] | None:
    return None if all(v == default for v in values) else list(values)


def _input_adjoint(c: RuleContext, inst: Instruction, dy: Value, kt: Value, like: Value,
                   out: Sequence[int | None], t: Sequence[int], pads: Pads,
                   a: Sequence[int], b: Sequence[int], groups: int) -> Value:
    """The adjoint of a convolution's input: dy dilated by the strides, convolved with the
    transposed kernel `kt` (flipped, channels swapped) at stride `a` and kernel dilation `b`.
    Padding is W−1−lo below; where it would be negative, extra outputs are cropped."""
    sizes, window = c.type_of(like).shape[2:], c.type_of(kt).shape[2:]
    new_pads: Pads = []
    crops: list[int | None] = []
    for i, (s, w, o) in enumerate(zip(sizes, window, out, strict=True)):
        if w is None:
            raise _unsupported(inst, "the kernel (window) shape must be static")
        big = (w - 1) * b[i] + 1
        lo, hi = pads[i]
        low = big - 1 - lo
        if s is not None and o is not None:
            high = (s - 1) * a[i] + big - ((o - 1) * t[i] + 1) - low
        elif t[i] == 1 and a[i] == 1:
            high = big - 1 - hi
        else:
            raise _unsupported(inst, f"spatial dimension {i} is dynamic with a stride or an "
                                     "input dilation other than 1")
        front = _ceil_div(-low, a[i]) if low < 0 else 0
        back = _ceil_div(-high, a[i]) if high < 0 else 0
        new_pads.append((low + front * a[i], high + back * a[i]))
        crops.append(front if front or back else None)
    z = c.b.convolve(dy, kt, _or_none(a), new_pads, _or_none(t), _or_none(b),
                     None if groups == 1 else groups)
    for i, front in enumerate(crops):
        if front is not None:
            z = _remap(c, z, 2 + i, 2 + i, _iota(c, like, 2 + i), front)
    return z


def _conv_attributes(inst: Instruction, n: int
                     ) -> tuple[list[int], Pads, list[int], list[int], int]:
    return (list(inst.strides or [1] * n), [(lo, hi) for lo, hi in inst.padding or [(0, 0)] * n],
            list(inst.leftDilation or [1] * n), list(inst.rightDilation or [1] * n),
            inst.groups or 1)


def _transposed_kernel(c: RuleContext, inst: Instruction, k: Value, groups: int) -> Value:
    """<Cout x Cin/G x w…> → <Cin x Cout/G x w…>, flipped spatially, swapped per group."""
    shape = c.type_of(k).shape
    flipped = c.b.reverse(k, list(range(2, len(shape))))
    if groups == 1:
        return _swap01(c, flipped)
    if any(d is None for d in shape):
        raise _unsupported(inst, "a grouped convolution needs a static kernel shape")
    cout, cin_g, window = shape[0], shape[1], shape[2:]
    assert cout is not None and cin_g is not None
    split = c.b.shapeCast(flipped, (groups, cout // groups, cin_g, *window))
    return c.b.shapeCast(_move_axis(c, split, 2, 1), (groups * cin_g, cout // groups, *window))


def _kernel_adjoint(c: RuleContext, inst: Instruction, x: Value, dy: Value, k: Value,
                    out: Sequence[int | None]) -> Value:
    """dK[o, c, m] = Σ_{n,j} dy[n, o, j]·x′[n, c, j·t + m·b]: a convolution of xᵀ (batch and
    channels swapped) by dyᵀ, stride b, kernel dilation t, one per group."""
    n = c.type_of(x).rank - 2
    t, pads, a, b, groups = _conv_attributes(inst, n)
    sizes, window = c.type_of(x).shape[2:], c.type_of(k).shape[2:]
    new_pads: Pads = []
    extras: list[int] = []
    for i, (s, w, o) in enumerate(zip(sizes, window, out, strict=True)):
        if w is None:
            raise _unsupported(inst, "the kernel shape must be static")
        lo, hi = pads[i]
        big = (w - 1) * b[i] + 1
        if s is not None and o is not None:
            padded = (s - 1) * a[i] + 1 + lo + hi if s > 0 else lo + hi
            unused = padded - big - (o - 1) * t[i]  # trailing positions no window reaches
        elif t[i] == 1:
            unused = 0
        else:
            raise _unsupported(inst, f"spatial dimension {i} is dynamic with a stride other "
                                     "than 1")
        cut = min(hi, unused)
        new_pads.append((lo, hi - cut))
        extras.append((unused - cut) // b[i])
    xt, dyt = _swap01(c, x), _swap01(c, dy)

    def conv(xs: Value, ks: Value) -> Value:
        return c.b.convolve(xs, ks, _or_none(b), new_pads, _or_none(a), _or_none(t), None)

    if groups == 1:
        z = conv(xt, dyt)
    else:
        kshape = c.type_of(k).shape
        if kshape[0] is None or kshape[1] is None:
            raise _unsupported(inst, "a grouped convolution needs static channel counts")
        cin_g, cout_g = kshape[1], kshape[0] // groups
        z = c.b.concatenate([
            conv(c.b.slice(xt, g * cin_g, (g + 1) * cin_g - 1),
                 c.b.slice(dyt, g * cout_g, (g + 1) * cout_g - 1)) for g in range(groups)], 1)
    for i, extra in enumerate(extras):
        if extra:
            w = window[i]
            assert w is not None
            z = _remap(c, z, 2 + i, 2 + i, _static_iota(c, w))
    return _swap01(c, z)


def _conv_output(c: RuleContext, inst: Instruction) -> list[int | None]:
    return list(c.type_of(inst).shape[2:])


@adjoint("convolve")
def _convolve_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = conv(dilate(dy, t), flip(K)ᵀ), dK = conv(xᵀ, dyᵀ) (transposed convolutions)"""
    x, k = inst.x, inst.kernel
    n = c.type_of(x).rank - 2
    t, pads, a, b, groups = _conv_attributes(inst, n)
    out: Contributions = []
    if _active(c, x):
        kt = _transposed_kernel(c, inst, _p(c, k), groups)
        dx = _input_adjoint(c, inst, dy, kt, _p(c, x), _conv_output(c, inst), t, pads, a, b,
                            groups)
        out.append((x, _fit(c, dx, x)))
    if _active(c, k):
        dk = _kernel_adjoint(c, inst, _p(c, x), dy, _p(c, k), _conv_output(c, inst))
        out.append((k, _fit(c, dk, k)))
    return out


@tangent("convolve")
def _convolve_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = conv(ẋ, K) + conv(x, K̇)"""
    tx, tk = _t(c, inst.x), _t(c, inst.kernel)
    attrs = (inst.strides, inst.padding, inst.leftDilation, inst.rightDilation, inst.groups)
    return _plus(c, None if tx is None else c.b.convolve(tx, _p(c, inst.kernel), *attrs),
                 None if tk is None else c.b.convolve(_p(c, inst.x), tk, *attrs))


# ------------------------------------------------------------------ reduceWindow


def _window_pads(inst: Instruction, sizes: Sequence[int | None]) -> Pads:
    pads: Pads = []
    for s, d, t in zip(sizes, inst.dims, inst.strides, strict=True):
        if s is not None:
            pads.append(window_pads(s, d, t, inst.padding))
        elif inst.padding == "none":
            pads.append((0, 0))
        elif inst.padding == "full":
            pads.append((d - 1, d - 1))
        elif t == 1:
            pads.append(((d - 1) // 2, d - 1 - (d - 1) // 2))
        else:
            raise _unsupported(inst, "'padding half' of a dynamic dimension with a stride "
                                     "other than 1")
    return pads


def _as_image(c: RuleContext, v: Value) -> Value:
    """`v` as a convolution operand: <1 x 1 x v's shape>."""
    return c.b.padShape(c.b.padShape(v, 0), 0)


def _from_image(c: RuleContext, v: Value) -> Value:
    return c.b.squeezeShape(c.b.squeezeShape(v, 0), 0)


def _ones_like(c: RuleContext, x: Value) -> Value:
    t = c.type_of(x)
    if t.is_static:
        return constant(1.0, t)
    one = _one(c, x)
    return c.b.select(one, one, c.b.equal(x, x))


def _window_setup(c: RuleContext, inst: Instruction
                  ) -> tuple[list[int], list[int], Pads, list[int | None]]:
    combinator = _combinator(inst)
    if combinator not in ("add", "max", "min"):
        raise _unsupported(inst, f"only windows by add, max and min have derivative rules, "
                                 f"not '{combinator}'")
    sizes = list(c.type_of(inst.x).shape)
    out = [window_output(s, d, t, inst.padding)
           for s, d, t in zip(sizes, inst.dims, inst.strides, strict=True)]
    return list(inst.dims), list(inst.strides), _window_pads(inst, sizes), out


def _padding_cells(c: RuleContext, inst: Instruction) -> Value:
    """The number of padding (init) cells in each window."""
    x = _p(c, inst.x)
    real = c.b.reduceWindow(_ones_like(c, x), "add", _zero(c, x), list(inst.dims),
                            list(inst.strides), inst.padding)
    return c.b.subtract(c.const(float(math.prod(inst.dims)), x), real)


def _window_extremes(c: RuleContext, inst: Instruction, pads: Pads
                     ) -> tuple[Value, Value, Value, Value]:
    """For max/min windows, as <1 x …> images: the one-hot window kernel E (the k-th
    element of each window is output channel k of conv(x, E)), the mask of window elements
    equal to the result, the number of ties (init included), and the init-tie mask."""
    dims, strides = list(inst.dims), list(inst.strides)
    x, r = _p(c, inst.x), c.primal(inst)
    size = math.prod(dims)
    iota = _static_iota(c, size)
    eye = _indicator(c, c.b.equal(_place(c, iota, 0, 2), _place(c, iota, 1, 2)), x)
    kernel = c.b.shapeCast(eye, (size, 1, *dims))
    pad_arg = pads if any(p != (0, 0) for p in pads) else None
    r4 = _as_image(c, r)
    mask = c.b.equal(c.b.convolve(_as_image(c, x), kernel, strides, pad_arg), r4)
    if pad_arg is not None:
        real = c.b.convolve(_as_image(c, _ones_like(c, x)), kernel, strides, pad_arg)
        mask = c.b.and_(mask, c.b.greaterThan(real, 0.5))
    init_tie = c.b.equal(_p(c, inst.init), r4)
    count = c.b.add(c.b.padShape(_sum(c, _indicator(c, mask, x), [1]), 1),
                    _indicator(c, init_tie, x))
    return kernel, mask, count, init_tie


@adjoint("reduceWindow")
def _reduce_window_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """add: dx = conv(dilate(dy), ones), dinit = Σ dy·(1 + padding cells) ·
    max/min: dx = Σ over windows of dy/ties·[x = r], dinit = Σ dy/ties·[init = r]"""
    dims, strides, pads, out_sizes = _window_setup(c, inst)
    x, init = inst.x, inst.init
    ones = [1] * len(dims)
    like = _as_image(c, _p(c, x))
    result: Contributions = []
    if _combinator(inst) == "add":
        if _active(c, x):
            kernel = constant(1.0, TensorType((1, 1, *dims), c.type_of(x).dtype))
            dx = _input_adjoint(c, inst, _as_image(c, dy), kernel, like, out_sizes, strides,
                                pads, ones, ones, 1)
            result.append((x, _fit(c, _from_image(c, dx), x)))
        if _active(c, init):
            weight = c.b.add(_padding_cells(c, inst), 1.0)
            result.append((init, _sum_all(c, c.b.multiply(dy, weight))))
        return result
    kernel, mask, count, init_tie = _window_extremes(c, inst, pads)
    g = c.b.divide(_as_image(c, dy), count)
    if _active(c, x):
        spread = c.b.select(g, _zero(c, dy), mask)
        size = math.prod(dims)
        kt = c.b.shapeCast(c.b.reverse(kernel, list(range(2, 2 + len(dims)))),
                           (1, size, *dims))
        dx = _input_adjoint(c, inst, spread, kt, like, out_sizes, strides, pads, ones, ones, 1)
        result.append((x, _fit(c, _from_image(c, dx), x)))
    if _active(c, init):
        result.append((init, _sum_all(c, c.b.select(g, _zero(c, dy), init_tie))))
    return result


@tangent("reduceWindow")
def _reduce_window_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """add: ṙ = windowsum(ẋ) + i̇nit·(1 + padding cells) ·
    max/min: ṙ = (Σ_window ẋ·[x = r] + i̇nit·[init = r]) / ties"""
    _, strides, pads, _ = _window_setup(c, inst)
    tx, ti = _t(c, inst.x), _t(c, inst.init)
    if tx is None and ti is None:
        return None
    if _combinator(inst) == "add":
        tx_part = None if tx is None else c.b.reduceWindow(
            tx, "add", _zero(c, tx), list(inst.dims), strides, inst.padding)
        ti_part = None if ti is None else c.b.multiply(
            ti, c.b.add(_padding_cells(c, inst), 1.0))
        return _plus(c, tx_part, ti_part)
    kernel, mask, count, init_tie = _window_extremes(c, inst, pads)
    zero = _zero(c, inst)
    pad_arg = pads if any(p != (0, 0) for p in pads) else None
    tx_part = None if tx is None else c.b.padShape(_sum(c, c.b.select(
        c.b.convolve(_as_image(c, tx), kernel, strides, pad_arg), zero, mask), [1]), 1)
    ti_part = None if ti is None else c.b.select(ti, zero, init_tie)
    total = _plus(c, tx_part, ti_part)
    assert total is not None
    return _from_image(c, c.b.divide(total, count))


@adjoint("unbroadcast")
def _unbroadcast_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = broadcast(dy) to x's shape (the sum's adjoint copies dy to every summand)"""
    return [(inst.x, c.broadcast_to(dy, inst.x))]


@tangent("unbroadcast")
def _unbroadcast_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṙ = unbroadcast(ẋ) like the same operand"""
    t = _t(c, inst.x)
    return None if t is None else c.b.unbroadcast(t, c.primal(inst.like))
