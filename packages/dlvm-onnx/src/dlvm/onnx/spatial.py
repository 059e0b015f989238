"""Spatial and layout operators: padding, resizing, transposed convolution, pooling variants,
rearrangements, and tensors made from shapes.

Elements are picked by constant positions with slices, reversals and concatenations (never by
multiplying with 0/1 matrices, which would turn an infinity into NaN), so that every
rearrangement is exact for every element type and differentiable.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import product

import numpy as np

from dlvm.ir import Value, constant
from dlvm.ir.types import BOOL, I64, DataType, TensorType, scalar

from .context import DTYPES, NUMPY, NodeContext, along, i64, positions
from .errors import Invalid, Unsupported
from .indices import equal_parts
from .ops import (
    channel_vector,
    converts,
    move_back,
    move_to_front,
    slice_axis,
    spatial_padding,
)

Dims = tuple[int | None, ...]


# ------------------------------------------------------------------ helpers


def dims(c: NodeContext, x: Value) -> Dims:
    return c.type_of(x).shape



def scalar_of(dt: DataType, v: float | int | bool) -> Value:
    """`v` as a scalar operand of data type `dt`."""
    if dt == BOOL:
        return constant(bool(v), scalar(BOOL))
    return constant(float(v) if dt.is_float else int(v), scalar(dt))


def lowest(dt: DataType) -> float | int:
    return -math.inf if dt.is_float else int(np.iinfo(NUMPY[dt]).min)


def known(sizes: Sequence[int | None]) -> int | None:
    """The product of sizes, None when one of them is dynamic."""
    return None if None in sizes else math.prod(sizes)  # type: ignore[arg-type]


def reshaped(c: NodeContext, x: Value, shape: Sequence[int | None]) -> Value | None:
    """x as `shape` (same elements in row-major order); None when `shape` has more than one
    dynamic size, which `shapeCast` cannot take."""
    if sum(d is None for d in shape) > 1:
        return None
    return x if tuple(shape) == dims(c, x) else c.b.shapeCast(x, tuple(shape))


def unit_along(c: NodeContext, x: Value, axis: int) -> Value:
    """A tensor of x's sizes but 1 along `axis` (its values do not matter)."""
    size = dims(c, x)[axis]
    if size is not None and size > 0:
        return slice_axis(c, x, axis, 0, 1)
    dt = c.type_of(x).dtype
    fold, unit = ("or", False) if dt == BOOL else ("add", 0)
    return c.b.padShape(c.b.reduce(x, fold, scalar_of(dt, unit), [axis]), axis)


def filled(c: NodeContext, x: Value, axis: int, n: int, value: Value) -> Value:
    """A block of x's sizes but n along `axis`, every element `value` (a scalar of x's data
    type): a literal where the other sizes are static, else a `select` of the value by a mask
    of x's shape (both branches the value, so x's elements, NaN included, do not matter)."""
    shape = list(dims(c, x))
    shape[axis] = n
    if None not in shape:
        mask = c.b.literal(True, TensorType(tuple(shape), BOOL))
    else:
        unit = unit_along(c, x, axis)
        mask = c.b.equal(unit, unit)
        if n != 1:
            ones = [1] * len(shape)
            ones[axis] = n
            mask = c.b.and_(mask, c.b.literal(True, TensorType(tuple(ones), BOOL)))
    return c.b.select(value, value, mask)


def empty_along(c: NodeContext, x: Value, axis: int) -> Value:
    """x with none of its elements along `axis` (size 0 there)."""
    dt = c.type_of(x).dtype
    return filled(c, x, axis, 0, scalar_of(dt, False if dt == BOOL else 0))


def concat(c: NodeContext, parts: list[Value], axis: int) -> Value:
    return parts[0] if len(parts) == 1 else c.b.concatenate(parts, axis)


def repeated(c: NodeContext, x: Value, axis: int, r: int) -> Value:
    """x concatenated r ≥ 1 times along `axis` (by doubling: log r concatenations)."""
    parts, power = [], x
    while r:
        if r & 1:
            parts.append(power)
        r >>= 1
        if r:
            power = c.b.concatenate([power, power], axis)
    return concat(c, parts, axis)


def interleaved(c: NodeContext, x: Value, axis: int, r: int) -> Value:
    """Each element of x along `axis` repeated r times in place (numpy.repeat)."""
    if r == 1:
        return x
    shape = dims(c, x)
    size = shape[axis]
    grid = repeated(c, c.b.padShape(x, axis + 1), axis + 1, r)
    merged = reshaped(c, grid, [*shape[:axis], None if size is None else size * r,
                                *shape[axis + 1:]])
    if merged is not None:
        return merged
    assert size is not None
    return concat(c, [repeated(c, slice_axis(c, x, axis, i, i + 1), axis, r)
                      for i in range(size)], axis)


def strided(c: NodeContext, x: Value, axis: int, start: int, step: int, n: int) -> Value:
    """x[start : start + step·(n−1) + 1 : step] along `axis` (step ≥ 1, n ≥ 1): the range
    made n·step long and reshaped to n × step, of which the first column is taken."""
    if start == 0 and (n == 1 or step == 1) and dims(c, x)[axis] == n:
        return x
    part = slice_axis(c, x, axis, start, start + step * (n - 1) + 1)
    if n == 1 or step == 1:
        return part
    whole = c.b.concatenate([part, slice_axis(c, part, axis, 0, step - 1)], axis)
    shape = dims(c, whole)
    grid = reshaped(c, whole, [*shape[:axis], n, step, *shape[axis + 1:]])
    if grid is None:
        return concat(c, [slice_axis(c, x, axis, start + i * step, start + i * step + 1)
                          for i in range(n)], axis)
    return c.b.squeezeShape(slice_axis(c, grid, axis + 1, 0, 1), axis + 1)


def runs(idx: Sequence[int]) -> list[tuple[int, int, int, int]]:
    """Positions as (first, step, count, repeat) pieces: `count` positions first, first +
    step, … each repeated `repeat` times in a row."""
    blocks: list[list[int]] = []  # [value, how many times in a row]
    for i in idx:
        if blocks and blocks[-1][0] == i:
            blocks[-1][1] += 1
        else:
            blocks.append([i, 1])
    out: list[tuple[int, int, int, int]] = []
    k = 0
    while k < len(blocks):
        first, rep = blocks[k]
        step, count = 1, 1
        if k + 1 < len(blocks) and blocks[k + 1][1] == rep:
            step = blocks[k + 1][0] - first
            while k + count < len(blocks) and blocks[k + count][1] == rep and \
                    blocks[k + count][0] - blocks[k + count - 1][0] == step:
                count += 1
        out.append((first, step, count, rep))
        k += count
    return out


def take(c: NodeContext, x: Value, axis: int, idx: Sequence[int]) -> Value:
    """x's elements at the constant positions `idx` along `axis` (numpy.take), built from
    slices of runs of evenly spaced positions, reversed where they descend."""
    size = dims(c, x)[axis]
    idx = [int(i) for i in idx]
    if size is not None and idx == list(range(size)):
        return x
    if not idx:
        return empty_along(c, x, axis)
    pieces = runs(idx)
    if axis and len(pieces) > 1:  # the axis in front once, not for each slice
        return move_back(c, take(c, move_to_front(c, x, axis), 0, idx), axis)
    parts = []
    for first, step, count, rep in pieces:
        if step > 0:
            piece = strided(c, x, axis, first, step, count)
        else:
            last = first + step * (count - 1)
            piece = c.b.reverse(strided(c, x, axis, last, -step, count), [axis])
        parts.append(interleaved(c, piece, axis, rep))
    return concat(c, parts, axis)




def diagonal_offsets(c: NodeContext, x: Value) -> Value:
    """column − row (i64) for the last two axes of x, as a matrix."""
    rank = c.rank(x)
    rows = c.b.padShape(positions(c, x, rank - 2), 1)
    cols = c.b.padShape(positions(c, x, rank - 1), 0)
    return c.b.subtract(cols, rows)


def scalar_input(c: NodeContext, i: int, dt: DataType, what: str) -> Value:
    """Input i, one element, as a scalar of data type `dt`."""
    v = c.value(i)
    t = c.type_of(v)
    if t.dtype != dt:
        raise Invalid(f"{what} (input {i}) of element type {t.dtype}, not {dt}")
    if t.rank:
        if any(d not in (1, None) for d in t.shape):
            raise Invalid(f"{what} (input {i}) must hold one element, its shape is "
                          f"{list(t.shape)}")
        v = c.b.shapeCast(v, ())
    return v


# ------------------------------------------------------------------ padding


PAD_MODES = ("constant", "reflect", "edge", "wrap")


@converts("Pad")
def _pad(c: NodeContext) -> list[Value]:
    """x extended along each axis by a constant, its edge, its reflection or a wrap-around

    Negative pads crop first, as ONNX Runtime does; the positions of numpy.pad otherwise."""
    mode = c.attr("mode", "constant")
    if mode not in PAD_MODES:
        raise Unsupported(f"Pad mode {mode!r}")
    x = c.value(0)
    rank = c.rank(x)
    pads = c.ints(1, "pads")
    axes = [c.axis(a, rank) for a in c.ints(3, "axes")] if c.has(3) else list(range(rank))
    if len(pads) != 2 * len(axes):
        raise Invalid(f"{len(pads)} pads for {len(axes)} axes (two each)")
    dt = c.type_of(x).dtype
    value = scalar_input(c, 2, dt, "the constant value") if c.has(2) and mode == "constant" \
        else scalar_of(dt, 0)
    for k, axis in enumerate(axes):
        x = pad_axis(c, x, axis, pads[k], pads[k + len(axes)], mode, value)
    return [x]


def pad_axis(c: NodeContext, x: Value, axis: int, low: int, high: int, mode: str,
             value: Value) -> Value:
    size = dims(c, x)[axis]
    if low < 0 or high < 0:  # crop, then pad what is left (as ONNX Runtime does)
        if size is None:
            raise Unsupported(f"negative pads along the dynamic axis {axis}")
        x = take(c, x, axis, range(max(-low, 0), size - max(-high, 0)))
        low, high, size = max(low, 0), max(high, 0), dims(c, x)[axis]
    if low == high == 0:
        return x
    if mode == "constant":
        parts = [filled(c, x, axis, low, value)] if low else []
        parts.append(x)
        if high:
            parts.append(filled(c, x, axis, high, value))
        return concat(c, parts, axis)
    if size == 0:
        raise Invalid(f"{mode} padding of axis {axis}, which is empty")
    if size is not None:  # numpy.pad's positions, even for pads longer than the axis
        return take(c, x, axis, np.pad(np.arange(size), (low, high), mode=mode).tolist())
    return pad_dynamic(c, x, axis, low, high, mode)


def pad_dynamic(c: NodeContext, x: Value, axis: int, low: int, high: int, mode: str
                ) -> Value:
    """Edge, reflect or wrap padding of an axis of dynamic size: its ends are slices of x
    and of x reversed (pads beyond the size are a run-time error)."""
    b = c.b
    rev = b.reverse(x, [axis])
    parts = []
    if low:
        if mode == "edge":
            parts.append(repeated(c, slice_axis(c, x, axis, 0, 1), axis, low))
        elif mode == "reflect":
            parts.append(b.reverse(slice_axis(c, x, axis, 1, low + 1), [axis]))
        else:
            parts.append(b.reverse(slice_axis(c, rev, axis, 0, low), [axis]))
    parts.append(x)
    if high:
        if mode == "edge":
            parts.append(repeated(c, slice_axis(c, rev, axis, 0, 1), axis, high))
        elif mode == "reflect":
            parts.append(slice_axis(c, rev, axis, 1, high + 1))
        else:
            parts.append(slice_axis(c, x, axis, 0, high))
    return concat(c, parts, axis)


# ------------------------------------------------------------------ slices and copies


@converts("Slice")
def _slice(c: NodeContext) -> list[Value]:
    """x[start:end:step] along each given axis, the bounds clamped as Python clamps them"""
    x = c.value(0)
    rank = c.rank(x)
    starts, ends = c.ints(1, "starts"), c.ints(2, "ends")
    axes = c.ints(3, "axes") if c.has(3) else list(range(len(starts)))
    steps = c.ints(4, "steps") if c.has(4) else [1] * len(starts)
    for start, end, a, step in zip(starts, ends, axes, steps, strict=True):
        axis = c.axis(a, rank)
        size = dims(c, x)[axis]
        if size is None:  # all of it, or a range checked at run time
            if step != 1:
                raise Unsupported(f"Slice with step {step} of a dynamic dimension")
            if start == 0 and end >= 2**62:
                continue
            if not 0 <= start < end < 2**62:
                raise Unsupported(f"Slice [{start}:{end}] of a dynamic dimension")
            x = slice_axis(c, x, axis, start, end)
            continue
        x = take(c, x, axis, range(*slice(start, end, step).indices(size)))
    return [x]


@converts("Split")
def _split(c: NodeContext) -> list[Value]:
    """x cut along `axis` into consecutive parts of the given sizes (some may be empty)

    Without sizes: equal parts, the last one smaller (ONNX's rule)."""
    x = c.value(0)
    axis = c.axis(c.attr("axis", 0), c.rank(x))
    size = dims(c, x)[axis]
    if size is None:
        raise Unsupported("Split along a dynamic dimension")
    if c.has(1):
        sizes = c.ints(1, "split")
    elif c.attr("split") is not None:
        sizes = list(c.attr("split"))
    else:
        sizes = equal_parts(size, int(c.attr("num_outputs", len(c.node.output))))
    out, start = [], 0
    for s in sizes:
        out.append(take(c, x, axis, range(start, start + s)))
        start += s
    return out


@converts("Tile")
def _tile(c: NodeContext) -> list[Value]:
    """x repeated along each axis (numpy.tile)"""
    x = c.value(0)
    repeats = c.ints(1, "repeats")
    if len(repeats) != c.rank(x):
        raise Invalid(f"{len(repeats)} repeats for rank {c.rank(x)}")
    for axis, r in enumerate(repeats):
        if r < 0:
            raise Invalid(f"repeats {repeats} must not be negative")
        if r != 1:
            x = repeated(c, x, axis, r) if r else empty_along(c, x, axis)
    return [x]


# ------------------------------------------------------------------ tensors made from shapes


@converts("Trilu")
def _trilu(c: NodeContext) -> list[Value]:
    """x where column − row ≥ k (upper) or ≤ k (lower) in its last two axes, else 0"""
    x = c.value(0)
    rank = c.rank(x)
    if rank < 2:
        raise Invalid(f"Trilu of a tensor of rank {rank} (at least 2)")
    upper = bool(c.attr("upper", 1))
    shape = dims(c, x)[-2:]
    k_const = c.const(1) if c.has(1) else np.array(0, np.int64)
    if k_const is not None and None not in shape:
        k = int(np.asarray(k_const).reshape(-1)[0])
        n, m = shape
        offsets = np.arange(m)[None, :] - np.arange(n)[:, None]  # type: ignore[call-overload]
        keep_np = offsets >= k if upper else offsets <= k
        keep = c.b.literal(True, TensorType((n, m), BOOL)) if keep_np.all() else \
            c.literal(keep_np)
    else:
        k_value = i64(int(np.asarray(k_const).reshape(-1)[0])) if k_const is not None else \
            scalar_input(c, 1, I64, "k")
        offsets_v = diagonal_offsets(c, x)
        keep = c.b.greaterThanOrEqual(offsets_v, k_value) if upper else \
            c.b.lessThanOrEqual(offsets_v, k_value)
    while c.rank(keep) < rank:
        keep = c.b.padShape(keep, 0)
    dt = c.type_of(x).dtype
    return [c.b.select(x, scalar_of(dt, False if dt == BOOL else 0), keep)]


@converts("EyeLike")
def _eye_like(c: NodeContext) -> list[Value | np.ndarray]:
    """1 where column − row = k, else 0, in a matrix of x's shape"""
    x = c.value(0)
    if c.rank(x) != 2:
        raise Invalid(f"EyeLike of a tensor of rank {c.rank(x)} (it takes a matrix)")
    code = c.attr("dtype")
    dt = c.type_of(x).dtype if code is None else DTYPES.get(code)
    if dt is None:
        raise Unsupported(f"EyeLike of element type {code}")
    k = int(c.attr("k", 0))
    n, m = dims(c, x)
    if n is not None and m is not None:
        return [np.eye(n, m, k, dtype=NUMPY[dt])]
    hit = c.b.equal(diagonal_offsets(c, x), i64(k))
    return [c.b.select(scalar_of(dt, 1), scalar_of(dt, 0), hit)]


@converts("Size")
def _size(c: NodeContext) -> list[Value | np.ndarray]:
    """the number of elements of x (i64)"""
    x = c.value(0)
    n = known(dims(c, x))
    return [np.array(n, np.int64)] if n is not None else [c.b.unitCount(x)]


@converts("ConstantOfShape")
def _constant_of_shape(c: NodeContext) -> list[Value]:
    """a tensor of the given shape, every element `value` (its shape must be known)"""
    raise Unsupported("ConstantOfShape of a shape computed at run time from data (the "
                      "output's shape must be known at import)")


@converts("Range")
def _range(c: NodeContext) -> list[Value]:
    """start, start + delta, … up to limit (evaluated at import from constants)"""
    raise Unsupported("Range with start, limit or delta computed at run time (its length "
                      "must be known at import)")


# ------------------------------------------------------------------ rearrangements


def blocks_of(c: NodeContext, x: Value) -> tuple[int, int | None, int, int | None,
                                                 int | None]:
    """(block size, N, C, H, W) of an N×C×H×W input; the sizes a reshape of it may leave
    dynamic are N, H and W (one at a time)."""
    if c.rank(x) != 4:
        raise Invalid(f"{c.node.op_type} of a tensor of rank {c.rank(x)} (it takes N×C×H×W)")
    block = c.attr("blocksize")
    if block is None or block < 1:
        raise Invalid(f"blocksize {block} (a positive size is required)")
    n, ch, h, w = dims(c, x)
    if ch is None:
        raise Unsupported(f"{c.node.op_type} with a dynamic number of channels")
    return block, n, ch, h, w  # type: ignore[return-value]


def rearranged(c: NodeContext, x: Value, first: list[int | None], perm: list[int],
               last: list[int | None]) -> Value:
    grid = reshaped(c, x, first)
    if grid is None:
        raise Unsupported(f"{c.node.op_type} with more than one dynamic dimension")
    out = reshaped(c, c.b.transpose(grid, perm), last)
    assert out is not None
    return out


def mul(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a * b


@converts("DepthToSpace")
def _depth_to_space(c: NodeContext) -> list[Value]:
    """channels moved into b×b spatial blocks (a reshape, a transpose and a reshape)

    DCR reads the channels as (row, column, depth), CRD as (depth, row, column)."""
    x = c.value(0)
    block, n, ch, h, w = blocks_of(c, x)
    if ch % (block * block):
        raise Invalid(f"{ch} channels are not divisible by blocksize² {block * block}")
    depth = ch // (block * block)
    mode = c.attr("mode", "DCR")
    if mode == "DCR":
        first, perm = [n, block, block, depth, h, w], [0, 3, 4, 1, 5, 2]
    elif mode == "CRD":
        first, perm = [n, depth, block, block, h, w], [0, 1, 4, 2, 5, 3]
    else:
        raise Unsupported(f"DepthToSpace mode {mode!r}")
    return [rearranged(c, x, first, perm, [n, depth, mul(h, block), mul(w, block)])]


@converts("SpaceToDepth")
def _space_to_depth(c: NodeContext) -> list[Value]:
    """b×b spatial blocks moved into the channels (the inverse of DepthToSpace)"""
    x = c.value(0)
    block, n, ch, h, w = blocks_of(c, x)
    for d in (h, w):
        if d is not None and d % block:
            raise Invalid(f"a spatial size {d} not divisible by blocksize {block}")
    hb = None if h is None else h // block
    wb = None if w is None else w // block
    mode = c.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        raise Unsupported(f"SpaceToDepth mode {mode!r}")
    perm = [0, 3, 5, 1, 2, 4] if mode == "DCR" else [0, 1, 3, 5, 2, 4]
    return [rearranged(c, x, [n, ch, hb, block, wb, block], perm,
                       [n, ch * block * block, hb, wb])]


# ------------------------------------------------------------------ transposed convolution


def transposed_padding(c: NodeContext, x: Value, strides: list[int], extents: list[int],
                       output_padding: list[int]) -> list[tuple[int, int]]:
    """ConvTranspose's (begin, end) cut from the full output per spatial axis: `pads`, or
    from `output_shape` or `auto_pad` (SAME_UPPER cuts less at the begin); a negative end
    extends the output with zeros."""
    n = len(strides)
    auto = c.attr("auto_pad", "NOTSET")
    shape = c.attr("output_shape")
    if shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        out = []
        for i in range(n):
            size = dims(c, x)[2 + i]
            full = None if size is None else strides[i] * (size - 1) + output_padding[i] + \
                extents[i]
            if shape is not None:
                if full is None:
                    raise Unsupported("output_shape with a dynamic spatial dimension")
                total = full - list(shape)[-n:][i]
            else:  # the output is input × stride
                total = output_padding[i] + extents[i] - strides[i]
            if total < 0:
                if auto != "NOTSET" or total <= -strides[i]:
                    raise Unsupported(f"ConvTranspose's output_shape {list(shape or [])} is "
                                      f"larger than its full output (auto_pad {auto})")
                out.append((0, total))
                continue
            small = total // 2
            out.append((small, total - small) if auto == "SAME_UPPER" else
                       (total - small, small))
        return out
    if auto == "VALID":
        return [(0, 0)] * n
    if auto != "NOTSET":
        raise Unsupported(f"auto_pad={auto!r}")
    pads = list(c.attr("pads", [0] * 2 * n))
    return [(pads[i], pads[i + n]) for i in range(n)]


def swapped_kernel(c: NodeContext, w: Value, group: int) -> Value:
    """ConvTranspose's C × M/g × k… kernel as `convolve`'s M × C/g × k…, flipped spatially."""
    cin, per_group, *kernel = dims(c, w)
    if cin is None or per_group is None:
        raise Unsupported("ConvTranspose with a kernel of dynamic channel counts")
    if group < 1 or cin % group:
        raise Invalid(f"a kernel of {cin} input channels for group {group}")
    n = len(kernel)
    spatial = list(range(3, 3 + n))
    grouped = c.b.shapeCast(w, (group, cin // group, per_group, *kernel))
    swapped = c.b.transpose(grouped, [0, 2, 1, *spatial])
    flat = c.b.shapeCast(swapped, (group * per_group, cin // group, *kernel))
    return c.b.reverse(flat, [2 + i for i in range(n)])


@converts("ConvTranspose")
def _conv_transpose(c: NodeContext) -> list[Value]:
    """Conv's transpose: x dilated by the strides ⋆ the kernel flipped, channels swapped

    The dilated input is padded by the kernel's extent less `pads` (what the padding cuts
    beyond that is sliced off), and the bias is added per channel."""
    x, w = c.value(0), c.value(1)
    n = c.rank(x) - 2
    kernel = list(dims(c, w)[2:])
    if None in kernel or c.rank(w) != n + 2:
        raise Unsupported("ConvTranspose with a kernel of dynamic or mismatched shape")
    given = c.attr("kernel_shape")
    if given is not None and list(given) != kernel:
        raise Invalid(f"kernel_shape {list(given)} differs from the kernel's {kernel}")
    strides = list(c.attr("strides", [1] * n))
    dilations = list(c.attr("dilations", [1] * n))
    output_padding = list(c.attr("output_padding", [0] * n))
    group = int(c.attr("group", 1))
    if len(output_padding) != n or len(strides) != n or len(dilations) != n:
        raise Invalid(f"strides, dilations and output_padding need {n} values each")
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]  # type: ignore[operator]
    cuts = transposed_padding(c, x, strides, extents, output_padding)
    padding, crops = [], []
    for (low, high), e, extra in zip(cuts, extents, output_padding, strict=True):
        lo, hi = e - 1 - low, e - 1 - high + extra
        padding.append((max(lo, 0), max(hi, 0)))
        crops.append((max(-lo, 0), max(-hi, 0)))
    out = c.b.convolve(x, swapped_kernel(c, w, group), [1] * n, padding, strides, dilations,
                       group)
    for i, (lo, hi) in enumerate(crops):
        if lo or hi:
            size = dims(c, out)[2 + i]
            if size is None:
                raise Unsupported("ConvTranspose pads beyond the kernel's extent along a "
                                  "dynamic spatial dimension")
            out = take(c, out, 2 + i, range(lo, size - hi))
    if c.has(2):
        out = c.b.add(out, channel_vector(c, c.value(2), n + 2))
    return [out]


# ------------------------------------------------------------------ pooling


def pool_geometry(c: NodeContext, x: Value) -> tuple[list[int], list[int], list[int],
                                                     list[tuple[int, int]], list[int]]:
    """(kernel, strides, dilations, pads, extra): the padding (low, high) per spatial
    dimension and, with `ceil_mode`, the cells added at the high end so that the last,
    partial window is taken (ONNX's rule: a window that would start in the high padding is
    not)."""
    kernel = c.attr("kernel_shape")
    if kernel is None:
        raise Invalid("the attribute kernel_shape is required")
    kernel = list(kernel)
    n = len(kernel)
    if c.rank(x) != n + 2:
        raise Invalid(f"kernel_shape {kernel} for an input of rank {c.rank(x)}")
    strides = list(c.attr("strides", [1] * n))
    dilations = list(c.attr("dilations", [1] * n))
    auto = c.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER") and any(d != 1 for d in dilations):
        raise Unsupported(f"pooling with auto_pad={auto} and dilations")
    ceil = bool(c.attr("ceil_mode", 0))
    if ceil and auto != "NOTSET":
        raise Unsupported(f"ceil_mode with auto_pad={auto}")
    pads = spatial_padding(c, x, kernel, strides, dilations)
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    extra = [0] * n
    for i, s in enumerate(dims(c, x)[2:]):
        if s is None:
            if ceil:
                raise Unsupported("ceil_mode over a dynamic spatial dimension")
            continue
        low, high = pads[i]
        span = s + low + high - extents[i]
        if span < 0:
            raise Invalid(f"a window of {extents[i]} cells over {s + low + high} (the input "
                          "with its padding)")
        if ceil:
            out = -(-span // strides[i]) + 1
            if (out - 1) * strides[i] >= s + low:
                out -= 1
            extra[i] = max((out - 1) * strides[i] + extents[i] - (s + low + high), 0)
    return kernel, strides, dilations, pads, extra


def padded(c: NodeContext, x: Value, pads: list[tuple[int, int]], fill: Value) -> Value:
    """x with `fill` cells before and after each spatial dimension."""
    for i, (low, high) in enumerate(pads):
        if (low or high) and dims(c, x)[2 + i] is None:
            raise Unsupported("padded pooling over a dynamic spatial dimension")
        x = pad_axis(c, x, 2 + i, low, high, "constant", fill)
    return x


def window_sizes(c: NodeContext, xp: Value, extents: list[int], strides: list[int]
                 ) -> list[int | None]:
    return [None if s is None else (s - e) // t + 1
            for s, e, t in zip(dims(c, xp)[2:], extents, strides, strict=True)]


def windows(c: NodeContext, xp: Value, fold: str, init: Value, kernel: list[int],
            strides: list[int], dilations: list[int]) -> Value:
    """Each window of the padded xp folded by `fold` (max or add); dilated windows one axis
    at a time, as the fold of the strided slices at each offset."""
    if all(d == 1 for d in dilations):
        return c.b.reduceWindow(xp, fold, init, [1, 1, *kernel], [1, 1, *strides], "none")
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    outs = window_sizes(c, xp, extents, strides)
    for i, (k, t, d, o) in enumerate(zip(kernel, strides, dilations, outs, strict=True)):
        if o is None:
            raise Unsupported("dilated pooling over a dynamic spatial dimension")
        out = None
        for j in range(k):
            piece = strided(c, xp, 2 + i, j * d, t, o)
            out = piece if out is None else c.b.create(fold, out, piece)
        assert out is not None
        xp = out
    return xp


def ones_like(c: NodeContext, x: Value) -> Value:
    one = c.number(1, x)
    return c.b.select(one, one, c.b.equal(x, x))


@converts("MaxPool", "AveragePool", "LpPool")
def _pool(c: NodeContext) -> list[Value]:
    """max, mean or (Σ |x|ᵖ)^(1/p) over each window (dilated, padded, ceil_mode)

    The mean counts padding cells only with count_include_pad (never those ceil_mode adds);
    MaxPool's indices are the flat positions of the first maxima."""
    op = c.node.op_type
    x = c.value(0)
    dt = c.type_of(x).dtype
    if dt == BOOL or (op != "MaxPool" and not dt.is_float):
        raise Unsupported(f"{op} of element type {dt}")
    kernel, strides, dilations, pads, extra = pool_geometry(c, x)
    everything = [(lo, hi + e) for (lo, hi), e in zip(pads, extra, strict=True)]
    b = c.b
    if op == "MaxPool":
        floor = scalar_of(dt, lowest(dt))
        xp = padded(c, x, everything, floor)
        out = windows(c, xp, "max", floor, kernel, strides, dilations)
        if len(c.node.output) > 1 and c.node.output[1]:
            return [out, max_indices(c, xp, x, kernel, strides, dilations,
                                     [lo for lo, _ in pads])]
        return [out]
    zero = c.number(0, x)
    if op == "LpPool":
        p = c.attr("p", 2)
        magnitude = b.multiply(x, b.sign(x))
        powered = magnitude if p == 1 else b.multiply(magnitude, magnitude) if p == 2 else \
            b.power(magnitude, c.number(p, x))
        total = windows(c, padded(c, powered, everything, zero), "add", zero, kernel,
                        strides, dilations)
        root = total if p == 1 else b.sqrt(total) if p == 2 else \
            b.power(total, c.number(1 / p, x))
        return [root]
    total = windows(c, padded(c, x, everything, zero), "add", zero, kernel, strides,
                    dilations)
    include = bool(c.attr("count_include_pad", 0))
    if all(p == (0, 0) for p in everything) or (include and not any(extra)):
        return [b.divide(total, c.number(math.prod(kernel), x))]
    one = c.number(1, x)
    cells = ones_like(c, x)
    if include:  # the padding cells count, those added by ceil_mode do not
        cells = padded(c, cells, pads, one)
        cells = padded(c, cells, [(0, e) for e in extra], zero)
    else:
        cells = padded(c, cells, everything, zero)
    return [b.divide(total, windows(c, cells, "add", zero, kernel, strides, dilations))]


def max_indices(c: NodeContext, xp: Value, x: Value, kernel: list[int], strides: list[int],
                dilations: list[int], low: list[int]) -> Value:
    """MaxPool's second output: the flat index into x of each window's first maximum (the
    first cell of the window in row-major order, then any strictly greater one; padding
    cells never count). The offsets of the window are visited in order with masks known at
    import: where the offset is the window's first cell inside x, and where it may replace
    an earlier one."""
    spatial = dims(c, x)[2:]
    if None in spatial:
        raise Unsupported("MaxPool's indices over a dynamic spatial dimension")
    extents = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    outs = window_sizes(c, xp, extents, strides)
    order = "F" if c.attr("storage_order", 0) else "C"
    rank = c.rank(x)
    b = c.b
    have = np.zeros(outs, bool)  # type: ignore[arg-type]
    best: Value | None = None
    chosen: Value | None = None
    for offset in product(*[range(k) for k in kernel]):
        coords = np.meshgrid(*[np.arange(o) * t + j * d - lo for o, t, j, d, lo in zip(
            outs, strides, offset, dilations, low, strict=True)], indexing="ij")
        valid = np.logical_and.reduce([(p >= 0) & (p < s) for p, s in zip(
            coords, spatial, strict=True)])
        flat = np.ravel_multi_index([np.clip(p, 0, s - 1) for p, s in zip(  # type: ignore[type-var]
            coords, spatial, strict=True)], spatial, order=order).astype(np.int64)  # type: ignore[arg-type]
        first, later = valid & ~have, valid & have
        have |= valid
        if not valid.any():
            continue
        piece = xp
        for i, (o, t, j, d) in enumerate(zip(outs, strides, offset, dilations, strict=True)):
            piece = strided(c, piece, 2 + i, j * d, t, o)  # type: ignore[arg-type]
        if best is None or chosen is None:
            best, chosen = piece, c.literal(np.where(first, flat, -1))
            continue
        take_it = mask_literal(c, first, rank)
        if later.any():
            beats = b.and_(mask_literal(c, later, rank), b.greaterThan(piece, best))
            take_it = b.or_(take_it, beats) if first.any() else beats
        best = b.select(piece, best, take_it)
        chosen = b.select(along_rank(c, c.literal(flat), rank), along_rank(c, chosen, rank),
                          take_it)
    if not have.all():
        raise Invalid("a MaxPool window lies entirely in the padding")
    assert chosen is not None
    return b.add(along_rank(c, chosen, rank), channel_base(c, x, math.prod(spatial)))  # type: ignore[arg-type]


def mask_literal(c: NodeContext, mask: np.ndarray, rank: int) -> Value:
    return along_rank(c, c.literal(mask), rank)


def along_rank(c: NodeContext, v: Value, rank: int) -> Value:
    """v with leading 1-dimensions up to `rank`."""
    while c.rank(v) < rank:
        v = c.b.padShape(v, 0)
    return v


def channel_base(c: NodeContext, x: Value, cells: int) -> Value:
    """(n·C + c)·cells for each batch n and channel c of x, as i64 of shape [N, C, 1, …]."""
    rank = c.rank(x)
    channels = dims(c, x)[1]
    per = i64(channels) if channels is not None else c.b.extract(c.b.shape(x), [1])
    rows = c.b.multiply(along(c, positions(c, x, 0), 0, rank), per)
    flat = c.b.add(rows, along(c, positions(c, x, 1), 1, rank))
    return c.b.multiply(flat, i64(cells))


# ------------------------------------------------------------------ Einsum


def einsum_labels(equation: str, ranks: list[int]) -> tuple[list[list[str]], list[str]]:
    """Each operand's labels and the output's: letters, and for the dimensions an ellipsis
    stands for `…k`, numbered so that those of different operands align on the right."""
    equation = equation.replace(" ", "")
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise Invalid(f"the equation {equation!r} has {len(terms)} operands, the node "
                      f"{len(ranks)}")
    widths = []
    for term, rank in zip(terms, ranks, strict=True):
        letters = len(term.replace("...", ""))
        widths.append(rank - letters if "..." in term else 0)
        if widths[-1] < 0 or ("..." not in term and letters != rank):
            raise Invalid(f"the term {term!r} for an operand of rank {rank}")
    ellipsis = max(widths, default=0)

    def expand(term: str, width: int) -> list[str]:
        head, dots, tail = term.partition("...")
        for ch in head + tail:
            if not ch.isalpha():
                raise Invalid(f"the label {ch!r} in {equation!r}")
        middle = [f"…{ellipsis - width + k}" for k in range(width)] if dots else []
        return [*head, *middle, *tail]

    operands = [expand(t, w) for t, w in zip(terms, widths, strict=True)]
    if arrow:
        out = expand(rhs, ellipsis)
    else:
        counts = [lab for labels in operands for lab in labels if len(lab) == 1]
        out = [f"…{k}" for k in range(ellipsis)] + sorted(
            lab for lab in set(counts) if counts.count(lab) == 1)
    if len(set(out)) < len(out) or any(
            lab not in {x for labels in operands for x in labels} for lab in out):
        raise Invalid(f"the output of {equation!r} repeats a label or names one no operand "
                      "has")
    return operands, out


def diagonal(c: NodeContext, x: Value, labels: list[str]) -> tuple[Value, list[str]]:
    """x with each label that appears twice reduced to its diagonal."""
    while len(set(labels)) < len(labels):
        p = next(k for k, lab in enumerate(labels) if labels.count(lab) > 1)
        q = labels.index(labels[p], p + 1)
        n, m = dims(c, x)[p], dims(c, x)[q]
        if n is None or n != m:
            raise Unsupported(f"an Einsum diagonal of sizes {n} and {m}")
        eye = c.literal(np.eye(n, dtype=bool))
        rank = c.rank(x)
        mask = eye
        for k in range(rank):
            if k not in (p, q):
                mask = c.b.padShape(mask, k)
        dt = c.type_of(x).dtype
        picked = c.b.select(x, scalar_of(dt, 0), mask)  # the rest of each row is 0
        x = c.b.reduce(picked, "add", scalar_of(dt, 0), [q])
        labels = labels[:q] + labels[q + 1:]
    return x, labels


def summed_out(c: NodeContext, x: Value, labels: list[str], keep: set[str]
               ) -> tuple[Value, list[str]]:
    gone = [k for k, lab in enumerate(labels) if lab not in keep]
    if not gone:
        return x, labels
    dt = c.type_of(x).dtype
    return c.b.reduce(x, "add", scalar_of(dt, 0), gone), [
        lab for lab in labels if lab in keep]


def arranged(c: NodeContext, x: Value, labels: list[str], order: list[str]) -> Value:
    """x transposed to `order` (a subset of which are x's labels), with 1-dimensions for the
    labels x does not have."""
    mine = [lab for lab in order if lab in labels]
    perm = [labels.index(lab) for lab in mine]
    if perm != list(range(len(perm))):
        x = c.b.transpose(x, perm)
    for k, lab in enumerate(order):
        if lab not in labels:
            x = c.b.padShape(x, k)
    return x


def contracted(c: NodeContext, a: Value, la: list[str], b: Value, lb: list[str],
               needed: set[str]) -> tuple[Value, list[str]]:
    """Σ over the labels a and b share that are not `needed` of a·b: a batched `dot` when
    the sizes allow, else a broadcast product and a sum."""
    shared = [lab for lab in la if lab in lb]
    batch = [lab for lab in shared if lab in needed]
    inner = [lab for lab in shared if lab not in needed]
    fa = [lab for lab in la if lab not in lb]
    fb = [lab for lab in lb if lab not in la]
    size_a = dict(zip(la, dims(c, a), strict=True))
    size_b = dict(zip(lb, dims(c, b), strict=True))
    same = all(size_a[lab] is not None and size_a[lab] == size_b[lab] for lab in shared)
    if same and inner:
        group = [known([size_a[lab] for lab in g]) for g in (batch, fa, inner)]
        right = known([size_b[lab] for lab in fb])
        left = reshaped(c, arranged(c, a, la, batch + fa + inner), group)
        rhs = reshaped(c, arranged(c, b, lb, batch + inner + fb), [group[0], group[2], right])
        shape = [*(size_a[lab] for lab in batch + fa), *(size_b[lab] for lab in fb)]
        if left is not None and rhs is not None and sum(d is None for d in shape) <= 1:
            out = reshaped(c, c.b.dot(left, rhs), shape)
            assert out is not None
            return out, batch + fa + fb
    order = batch + fa + fb + inner
    product_ = c.b.multiply(arranged(c, a, la, order), arranged(c, b, lb, order))
    return summed_out(c, product_, order, set(batch + fa + fb))


@converts("Einsum")
def _einsum(c: NodeContext) -> list[Value]:
    """Σ over the labels not in the output of the product of the operands (Einstein sum)

    Diagonals and the labels of one operand alone first, then batched products (`dot`),
    one operand at a time."""
    equation = c.attr("equation")
    if equation is None:
        raise Invalid("the attribute equation is required")
    xs = [c.value(i) for i in range(len(c.inputs))]
    if any(c.type_of(x).dtype == BOOL for x in xs):
        raise Unsupported("Einsum of booleans")
    operands, out = einsum_labels(equation, [c.rank(x) for x in xs])
    terms = []
    for k, (x, labels) in enumerate(zip(xs, operands, strict=True)):
        x, labels = diagonal(c, x, labels)
        others = {lab for j, ls in enumerate(operands) if j != k for lab in ls}
        terms.append(summed_out(c, x, labels, others | set(out)))
    acc, labels = terms[0]
    for k in range(1, len(terms)):
        needed = set(out) | {lab for _, ls in terms[k + 1:] for lab in ls}
        acc, labels = contracted(c, acc, labels, *terms[k], needed)
    acc, labels = summed_out(c, acc, labels, set(out))
    return [arranged(c, acc, labels, out)]


# ------------------------------------------------------------------ Resize

Coefficients = Callable[[float, float], np.ndarray]
TRANSFORMS = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
              "asymmetric", "tf_crop_and_resize")
ROUNDINGS = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def nearest_coefficients(rounding: str) -> Coefficients:
    """ONNX's nearest neighbour as weights (0 or 1) of the inputs left and right of the
    coordinate, `ratio` ∈ (0, 1] past the left one."""
    def weights(ratio: float, scale: float) -> np.ndarray:
        if float(ratio).is_integer():
            return np.array([0.0, 1.0])
        right = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
                 "floor": False, "ceil": True}[rounding]
        return np.array([0.0, 1.0] if right else [1.0, 0.0])
    return weights


def linear_coefficients(antialias: bool) -> Coefficients:
    def weights(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([1 - ratio, ratio])
        scale = min(scale, 1.0)  # a wider triangle when downsampling
        start = int(np.floor(-1 / scale) + 1)
        args = (np.arange(start, 2 - start) - ratio) * scale
        w = np.clip(1 - np.abs(args), 0, 1)
        return w / w.sum()  # type: ignore[no-any-return]
    return weights


def cubic_coefficients(a: float, antialias: bool) -> Coefficients:
    def kernel(t: float) -> float:
        t = abs(t)
        if t <= 1:
            return ((a + 2) * t - (a + 3)) * t * t + 1
        if t < 2:
            return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
        return 0.0

    def weights(ratio: float, scale: float) -> np.ndarray:
        if not antialias:
            return np.array([kernel(ratio + 1), kernel(ratio), kernel(1 - ratio),
                             kernel(2 - ratio)])
        scale = min(scale, 1.0)
        start = int(np.floor(-2 / scale) + 1)
        w = np.array([kernel(scale * (i - ratio)) for i in range(start, 2 - start)])
        return w / w.sum()  # type: ignore[no-any-return]
    return weights


def source_coordinates(mode: str, out: int, size: int, scale: float,
                       roi: tuple[float, float] | None) -> np.ndarray:
    """The input coordinate of each output position (ONNX's reference, in float64)."""
    y = np.arange(out, dtype=np.float64)
    width = scale * size
    if mode == "align_corners":
        return np.zeros(out) if width == 1 else y * (size - 1) / (width - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        assert roi is not None
        x = np.full(out, (roi[1] - roi[0]) * (size - 1) / 2) if width == 1 else \
            y * (roi[1] - roi[0]) * (size - 1) / (width - 1)
        return x + roi[0] * (size - 1)  # type: ignore[no-any-return]
    if mode == "pytorch_half_pixel":
        return np.full(out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel":
        return (y + 0.5) / scale - 0.5  # type: ignore[no-any-return]
    offset = size / 2 * (1 - out / width)  # half_pixel_symmetric
    return offset + (y + 0.5) / scale - 0.5  # type: ignore[no-any-return]


def runtime_coordinates(mode: str, out: int, size: int, scale: float,
                        roi: tuple[float, float] | None) -> np.ndarray:
    """The same coordinates as ONNX Runtime computes them (float32, the integer lengths)."""
    f = np.float32
    y = np.arange(out, dtype=f)
    s = f(scale)
    with np.errstate(all="ignore"):
        if mode == "align_corners":
            return np.zeros(out, f) if out == 1 else y * f(size - 1) / f(out - 1)
        if mode == "asymmetric":
            return y / s
        if mode == "tf_crop_and_resize":
            assert roi is not None
            lo, hi = f(roi[0]), f(roi[1])
            if out == 1:
                return np.full(out, f(0.5) * (lo + hi) * f(size - 1), f)
            return lo * f(size - 1) + (y * (hi - lo) * f(size - 1)) / f(out - 1)
        if mode == "pytorch_half_pixel":
            return np.zeros(out, f) if out == 1 else (y + f(0.5)) / s - f(0.5)
        if mode == "half_pixel":
            return (y + f(0.5)) / s - f(0.5)
        width = s * f(size)
        offset = f(size) / f(2) * (f(1) - f(out) / width)
        return offset + (y + f(0.5)) / s - f(0.5)


def runtime_nearest(x: np.ndarray, rounding: str) -> np.ndarray:
    if rounding == "round_prefer_floor":
        ties = x == np.trunc(x) + np.float32(0.5)
        return np.where(ties, np.floor(x), np.sign(x) * np.floor(np.abs(x) + 0.5))
    if rounding == "round_prefer_ceil":
        return np.sign(x) * np.floor(np.abs(x) + 0.5)
    return np.floor(x) if rounding == "floor" else np.ceil(x)


def taps(size: int, out: int, scale: float, mode: str, roi: tuple[float, float] | None,
         weights: Coefficients, exclude: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per output position, the input positions (clamped to the axis) and weights of the
    inputs it interpolates, and whether it lies outside the crop (tf_crop_and_resize):
    ONNX's reference Resize along one axis."""
    x = source_coordinates(mode, out, size, scale, roi)
    outside = (x < 0) | (x > size - 1) if mode == "tf_crop_and_resize" else \
        np.zeros(out, bool)
    base = np.floor(x)
    ratios = np.where(x == base, 1.0, x - base)
    coeffs = np.array([weights(float(r), scale) for r in ratios]).reshape(out, -1)
    n = coeffs.shape[1]
    pad = -(-n // 2)
    shifted = x + pad
    p = np.floor(shifted).astype(np.int64)
    frac = shifted - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        offset = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    neighbours = (p + offset)[:, None] + np.arange(n)[None, :] - pad
    if exclude:
        coeffs = np.where((neighbours < 0) | (neighbours >= size), 0.0, coeffs)
        sums = coeffs.sum(axis=-1, keepdims=True)
        coeffs = coeffs / np.where(sums == 0, 1.0, sums)
    return np.clip(neighbours, 0, size - 1), coeffs, outside


def resize_plan(c: NodeContext, shape: Dims) -> list[tuple[int, int, float]]:
    """(axis, output size, scale) of each axis Resize changes, as ONNX's reference
    computes them (sizes: out/in, or one scale for all with keep_aspect_ratio_policy)."""
    rank = len(shape)
    axes = [c.axis(a, rank) for a in c.attr("axes", list(range(rank)))]
    scales = c.const(2) if c.has(2) else None
    sizes = c.const(3) if c.has(3) else None
    for i, what in ((2, "scales"), (3, "sizes")):
        if c.has(i) and c.const(i) is None:
            raise Unsupported(f"Resize with {what} computed at run time (the output's shape "
                              "must be known at import)")
    if scales is not None and scales.size == 0:
        scales = None
    if sizes is not None and sizes.size == 0:
        sizes = None
    if (scales is None) == (sizes is None):
        raise Invalid("Resize needs either scales or sizes (one of them)")
    given = (scales if scales is not None else sizes).reshape(-1)  # type: ignore[union-attr]
    if len(given) != len(axes):
        raise Invalid(f"{len(given)} scales or sizes for {len(axes)} axes")
    for a in axes:
        if shape[a] is None and not (scales is not None and
                                     float(scales.reshape(-1)[axes.index(a)]) == 1.0):
            raise Unsupported(f"Resize of the dynamic axis {a}")
    plan: list[tuple[int, int, float]] = []
    if scales is not None:
        for a, s in zip(axes, given, strict=True):
            if shape[a] is None:
                continue
            out = int(float(s) * shape[a])
            if out != int(np.float32(s) * np.float32(shape[a])):
                raise Unsupported(f"Resize by {float(s)} of a size {shape[a]}, whose output "
                                  "size float32 and float64 arithmetic disagree on")
            plan.append((a, out, float(s)))
        return plan
    ratios = {a: int(s) / shape[a] for a, s in zip(axes, given, strict=True)}  # type: ignore[operator]
    policy = c.attr("keep_aspect_ratio_policy", "stretch")
    if policy == "stretch":
        return [(a, int(s), ratios[a]) for a, s in zip(axes, given, strict=True)]
    if policy not in ("not_larger", "not_smaller"):
        raise Unsupported(f"keep_aspect_ratio_policy={policy!r}")
    one = (min if policy == "not_larger" else max)(ratios.values())
    return [(a, int(one * shape[a] + 0.5), one) for a in axes]  # type: ignore[operator]


@converts("Resize")
def _resize(c: NodeContext) -> list[Value]:
    """x resampled along each axis: the nearest input, or a linear or cubic interpolation

    Of the 2 (4, wider with antialias) inputs nearest to the coordinate that
    coordinate_transformation_mode maps each output position to, as ONNX's reference."""
    mode = c.attr("mode", "nearest")
    transform = c.attr("coordinate_transformation_mode", "half_pixel")
    rounding = c.attr("nearest_mode", "round_prefer_floor")
    antialias = bool(c.attr("antialias", 0))
    if mode not in ("nearest", "linear", "cubic"):
        raise Unsupported(f"Resize mode {mode!r}")
    if transform not in TRANSFORMS:
        raise Unsupported(f"coordinate_transformation_mode={transform!r}")
    if rounding not in ROUNDINGS:
        raise Unsupported(f"nearest_mode={rounding!r}")
    if mode == "nearest" and antialias:
        raise Unsupported("antialias with mode 'nearest'")
    x = c.value(0)
    dt = c.type_of(x).dtype
    if mode != "nearest" and not dt.is_float:
        raise Unsupported(f"{mode} Resize of element type {dt} (floats only)")
    shape = dims(c, x)
    rank = len(shape)
    roi = None
    if transform == "tf_crop_and_resize":
        roi = c.const(1) if c.has(1) else None
        if roi is None:
            raise Unsupported("tf_crop_and_resize with a roi not known at import")
        roi = roi.astype(np.float64).reshape(-1)
    weights = nearest_coefficients(rounding) if mode == "nearest" else \
        linear_coefficients(antialias) if mode == "linear" else \
        cubic_coefficients(float(c.attr("cubic_coeff_a", -0.75)), antialias)
    axes = [c.axis(a, rank) for a in c.attr("axes", list(range(rank)))]
    for axis, out, scale in resize_plan(c, shape):
        size = shape[axis]
        assert size is not None
        box = None
        if roi is not None:
            k = axes.index(axis)
            box = (float(roi[k]), float(roi[k + len(axes)]))
        if math.isclose(scale, 1.0) and out == size and (box is None or (
                math.isclose(box[0], 0.0) and math.isclose(box[1], 1.0))):
            continue  # as ONNX's reference: this axis stays as it is
        x = resized_axis(c, x, axis, out, scale, transform, box, weights, mode, rounding)
    return [x]


def resized_axis(c: NodeContext, x: Value, axis: int, out: int, scale: float, transform: str,
                 box: tuple[float, float] | None, weights: Coefficients, mode: str,
                 rounding: str) -> Value:
    size = dims(c, x)[axis]
    assert size is not None
    if out == 0:
        return empty_along(c, x, axis)
    positions_, coeffs, outside = taps(size, out, scale, transform, box, weights,
                                       bool(c.attr("exclude_outside", 0)))
    rank = c.rank(x)
    b = c.b
    runtime = runtime_coordinates(transform, out, size, scale, box)
    if transform == "tf_crop_and_resize" and not np.array_equal(
            outside, (runtime < 0) | (runtime > size - 1)):
        raise Unsupported("tf_crop_and_resize with a crop whose edge ONNX's reference and "
                          "ONNX Runtime place differently")
    if mode == "nearest":
        picked = positions_[np.arange(out), coeffs.argmax(axis=1)]
        if not np.array_equal(picked[~outside], np.clip(runtime_nearest(
                runtime, rounding), 0, size - 1).astype(np.int64)[~outside]):
            raise Unsupported(f"nearest Resize of {size} to {out} cells, whose neighbours "
                              "ONNX's reference and ONNX Runtime round differently")
        result = take(c, x, axis, picked.tolist())
    else:
        terms = []
        np_type = NUMPY[c.type_of(x).dtype]
        for t in range(coeffs.shape[1]):
            if not coeffs[:, t].any():
                continue
            piece = take(c, x, axis, positions_[:, t].tolist())
            w = coeffs[:, t].astype(np_type)
            terms.append(piece if (w == 1).all() else
                         b.multiply(piece, along(c, c.literal(w), axis, rank)))
        result = terms[0]
        for term in terms[1:]:
            result = b.add(result, term)
    if outside.any():
        value = c.number(c.attr("extrapolation_value", 0.0), x)
        result = b.select(value, result, along(c, c.literal(outside), axis, rank))
    return result
