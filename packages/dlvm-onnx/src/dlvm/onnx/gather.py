"""Indexing with indices known only at run time: gathers, scatters and one-hot encodings, composed
from comparisons with index ranges so that they differentiate.

An index range is 0 … n−1 along an axis (a literal, or counted with `scan` for a dynamic
size); a one-hot mask is `equal(indices[…, newaxis], range)`. A gather folds the data where
the mask holds, `reduce … by add` of `select(x, −0, mask)` (exact: one term and zeros), or
multiplies the mask, as numbers, with the data as a table [n x rest] (a matrix product, or a
1×1 convolution when the indices have several dynamic dimensions): the adjoint of that product
is the scatter-add an embedding table needs to fine-tune. A product would turn an infinite or
NaN element of the table into NaN in every row (0·∞), so a float table not known to be finite
is multiplied with those elements as zeros, and a second product of codes for them puts them
back. Negative indices count from the end; an index out of range is a run-time error, as in
ONNX Runtime: the largest and the smallest are looked up in the range with `extract`, which
checks. Where ONNX wants two sizes equal that are known only at run time, they are checked
the same way, so that broadcasting never stands in for them.
"""

from __future__ import annotations

import math

import numpy as np

from dlvm.ir import Value, constant
from dlvm.ir.types import BOOL, F64, I8, I64, DataType, TensorType, scalar

from .context import NUMPY, NodeContext, Size, along, i64, positions, same_sizes, size_of
from .errors import Invalid, Unsupported
from .ops import converts, keep_axes, move_to_front, slice_axis

REDUCTIONS = ("none", "add", "mul", "max", "min")
FOLDS = {"add": "add", "mul": "multiply", "max": "max", "min": "min"}


# ------------------------------------------------------------------ sizes and indices


def dims(c: NodeContext, v: Value) -> tuple[int | None, ...]:
    return c.type_of(v).shape


def as_value(n: Size) -> Value:
    return i64(n) if isinstance(n, int) else n


def index_input(c: NodeContext, i: int) -> Value:
    """Input i, integer indices, as i64."""
    v = c.value(i)
    dt = c.type_of(v).dtype
    if not dt.is_int:
        raise Unsupported(f"indices of element type {dt} (integers are)")
    return v if dt == I64 else c.b.dataTypeCast(v, I64)


def index_range(c: NodeContext, x: Value, axis: int) -> Value:
    """0 … n−1 (i64) for x's size n along `axis`: a literal, or counted at run time."""
    n = dims(c, x)[axis]
    if n == 0:
        raise Unsupported(f"indexing axis {axis}, which is empty")
    return positions(c, x, axis)


def wrapped(c: NodeContext, idx: Value, n: Size) -> Value:
    """idx + n where idx < 0: ONNX's negative indices count from the end."""
    b = c.b
    return b.select(b.add(idx, as_value(n)), idx, b.lessThan(idx, i64(0)))


def checked(c: NodeContext, idx: Value, rng: Value) -> Value:
    """idx unchanged, but a run-time error ("index out of bounds") when an element is outside
    the range `rng`: its largest and smallest elements are looked up in it."""
    b = c.b
    if c.rank(idx) == 0:
        hi, lo = b.max(idx, i64(0)), b.min(idx, i64(0))
    else:
        hi, lo = b.reduce(idx, "max", i64(0)), b.reduce(idx, "min", i64(0))
    zero = b.add(b.subtract(b.extract(rng, [hi]), hi), b.subtract(b.extract(rng, [lo]), lo))
    return b.add(idx, zero)


def in_range(c: NodeContext, idx: Value, x: Value, axis: int) -> tuple[Value, Value]:
    """Indices into x along `axis`, wrapped and checked, and that axis's index range."""
    rng = index_range(c, x, axis)
    return checked(c, wrapped(c, idx, size_of(c, x, axis)), rng), rng


def guard(c: NodeContext, idx: Value, zero: Value | None) -> Value:
    return idx if zero is None else c.b.add(idx, zero)


def component(c: NodeContext, idx: Value, t: int) -> Value:
    """indices[…, t]: element t of each index tuple."""
    return c.b.extract(move_to_front(c, idx, c.rank(idx) - 1), [t])


# ------------------------------------------------------------------ masks and folds


def pad_end(c: NodeContext, v: Value, count: int) -> Value:
    for _ in range(count):
        v = c.b.padShape(v, c.rank(v))
    return v


def one_hot(c: NodeContext, idx: Value, rng: Value, pos: int) -> Value:
    """[idx = k] for each k of the range, along a new axis at `pos` (bool)."""
    return c.b.equal(c.b.padShape(idx, pos), along(c, rng, pos, c.rank(idx) + 1))


def neutral(dt: DataType, fold: str) -> bool | int | float:
    """The fold's identity for dt: a float sum's is −0 (x + −0 is x, −0 included)."""
    if dt == BOOL:
        if fold != "add":
            raise Unsupported(f"the reduction {fold} of booleans")
        return False
    if dt.is_float:
        return {"add": -0.0, "mul": 1.0, "max": -math.inf, "min": math.inf}[fold]
    info = np.iinfo(NUMPY[dt])
    return {"add": 0, "mul": 1, "max": int(info.min), "min": int(info.max)}[fold]


def identity(dt: DataType, fold: str) -> Value:
    return constant(neutral(dt, fold), scalar(dt))


def fold(c: NodeContext, x: Value, mask: Value, axes: list[int], how: str = "add") -> Value:
    """x folded (add, mul, max, min; booleans: or) over `axes` where the mask holds."""
    dt = c.type_of(x).dtype
    e = identity(dt, how)
    picked = c.b.select(x, e, mask)
    if not axes:
        return picked
    return c.b.reduce(picked, "or" if dt == BOOL else FOLDS[how], e, axes)


# ------------------------------------------------------------------ gathering


def take(c: NodeContext, x: Value, axis: int, idx: Value, rng: Value,
         finite: bool = False) -> Value:
    """x[…, idx, …] along `axis` (checked indices; that dimension replaced by idx's
    shape): a product with x as a table where the shapes allow it, else a folded mask.
    `finite`: x is known to have no infinity or NaN."""
    rows = take_rows(c, x, axis, idx, rng, finite)
    return rows if rows is not None else take_by_mask(c, x, axis, idx, rng)


def take_by_mask(c: NodeContext, x: Value, axis: int, idx: Value, rng: Value) -> Value:
    q, r = c.rank(idx), c.rank(x)
    xs = x
    for _ in range(q):
        xs = c.b.padShape(xs, axis)  # [a…, 1…, n, b…]
    mask = one_hot(c, idx, rng, q)  # [I…, n]
    for _ in range(axis):
        mask = c.b.padShape(mask, 0)
    return fold(c, xs, pad_end(c, mask, r - 1 - axis), [axis + q])


def take_rows(c: NodeContext, x: Value, axis: int, idx: Value, rng: Value,
              finite: bool) -> Value | None:
    """x[…, idx, …] as mask · table, x's other dimensions flattened into the table's
    columns; None where a reshape would need several dynamic sizes."""
    shape = dims(c, x)
    rest = [d for k, d in enumerate(shape) if k != axis]
    n, lead = shape[axis], dims(c, idx)
    width = None if None in rest else math.prod(rest)  # type: ignore[arg-type]
    if len(rest) > 1 and ((n is None) + (width is None) > 1 or
                          sum(d is None for d in (*lead, *rest)) > 1):
        return None
    if plan(lead, n, width if len(rest) else 1) is None:
        return None
    table = move_to_front(c, x, axis)
    if not rest:
        table = c.b.padShape(table, 1)
    elif len(rest) > 1:
        table = c.b.shapeCast(table, (n, width))
    out = product(c, one_hot(c, idx, rng, len(lead)), table, finite)
    q = len(lead)
    if not rest:
        return c.b.squeezeShape(out, q)
    if len(rest) > 1:
        out = c.b.shapeCast(out, (*lead, *rest))
    if axis == 0 or q == 0:
        return out
    return c.b.transpose(out, [*range(q, q + axis), *range(q), *range(q + axis, q + len(rest))])


def plan(lead: tuple[int | None, ...], n: int | None, width: int | None) -> str | None:
    """How a one-hot [lead… x n] multiplies a table [n x width]: a matrix product, one after
    flattening the lead, a 1×1 convolution (static kernel), or not at all."""
    if len(lead) <= 1:
        return "dot"
    dynamic = sum(d is None for d in lead)
    if (dynamic > 0) + (n is None) <= 1 and dynamic + (width is None) <= 1:
        return "flat"
    if n is not None and width is not None:
        return "convolve"
    return None


def contract(c: NodeContext, onehot: Value, table: Value) -> Value:
    """Σₖ onehot[…, k]·table[k, :]"""
    b = c.b
    shape = dims(c, onehot)
    lead, n, width = shape[:-1], shape[-1], dims(c, table)[1]
    q = len(lead)
    how = plan(lead, n, width)
    if q == 0:
        return b.squeezeShape(b.dot(b.padShape(onehot, 0), table), 0)
    if how == "dot":
        return b.dot(onehot, table)
    if how == "flat":
        rows = None if None in lead else math.prod(lead)  # type: ignore[arg-type]
        out = b.dot(b.shapeCast(onehot, (rows, n)), table)
        return b.shapeCast(out, (*lead, width))
    x = b.transpose(onehot, [0, q, *range(1, q)])  # [I0 x n x I1 …]: batch, channels, space
    kernel = pad_end(c, b.transpose(table), q - 1)  # [width x n x 1 …]
    return b.transpose(b.convolve(x, kernel), [0, *range(2, q + 1), 1])


def product(c: NodeContext, mask: Value, table: Value, finite: bool) -> Value:
    """mask · table for a one-hot mask [I… x n] and a table [n x width], exactly: booleans
    as 0/1, and a float table's infinities and NaNs put back from a product of codes."""
    b = c.b
    dt = c.type_of(table).dtype
    if dt == BOOL:
        out = product(c, mask, b.dataTypeCast(table, I8), True)
        return b.notEqual(out, constant(0, scalar(I8)))
    onehot = b.dataTypeCast(mask, dt)
    if not dt.is_float or finite:
        return contract(c, onehot, table)

    def num(v: float) -> Value:
        return constant(v, scalar(dt))

    specials = ((math.inf, 1.0), (-math.inf, 2.0), (math.nan, 3.0))
    code = num(0.0)
    for value, k in specials:
        hit = b.notEqual(table, table) if math.isnan(value) else b.equal(table, num(value))
        code = b.select(num(k), code, hit)
    clean = b.select(table, num(0.0), b.equal(code, num(0.0)))
    out = contract(c, onehot, clean)
    got = contract(c, onehot, code)
    for value, k in specials:
        out = b.select(num(value), out, b.equal(got, num(k)))
    return out


def known_finite(c: NodeContext, i: int) -> bool:
    x = c.const(i)
    return x is not None and (x.dtype.kind != "f" or bool(np.isfinite(x).all()))


def gather_at_run_time(c: NodeContext) -> list[Value]:
    """Gather with indices computed at run time (ops.py's Gather converter calls it)."""
    x = c.value(0)
    axis = c.axis(c.attr("axis", 0), c.rank(x))
    idx, rng = in_range(c, index_input(c, 1), x, axis)
    return [take(c, x, axis, idx, rng, known_finite(c, 0))]


@converts("GatherElements")
def _gather_elements(c: NodeContext) -> list[Value]:
    """y[p] = x[p with its `axis` coordinate replaced by indices[p]]"""
    x, idx = c.value(0), index_input(c, 1)
    r = c.rank(x)
    axis = c.axis(c.attr("axis", 0), r)
    if c.rank(idx) != r:
        raise Invalid(f"indices of rank {c.rank(idx)} for data of rank {r}")
    x, zero = fit_window(c, x, idx, axis)
    idx, rng = in_range(c, guard(c, idx, zero), x, axis)
    mask = one_hot(c, idx, rng, r)  # [i… x n]
    xs = c.b.padShape(c.b.transpose(x, [*range(axis), *range(axis + 1, r), axis]), axis)
    return [fold(c, xs, mask, [r])]


def fit_window(c: NodeContext, x: Value, idx: Value, axis: int) -> tuple[Value, Value | None]:
    """x cut to idx's sizes along the other axes, where ONNX lets indices be smaller (known
    sizes), and a check that dynamic ones are equal."""
    pairs: list[tuple[Size, Size]] = []
    for k, (p, q) in enumerate(zip(dims(c, x), dims(c, idx), strict=True)):
        if k == axis:
            continue
        if p is not None and q is not None:
            if q > p:
                raise Invalid(f"indices of size {q} along axis {k}, where the data has {p}")
            if q < p:
                x = slice_axis(c, x, k, 0, q)
        else:
            pairs.append((size_of(c, x, k), size_of(c, idx, k)))
    return x, same_sizes(c, pairs, "the data and the indices along an axis other than axis")


@converts("GatherND")
def _gather_nd(c: NodeContext) -> list[Value]:
    """y[b…, j…] = x[b…, indices[b…, j…, 0], …, indices[b…, j…, k−1]] (b: batch_dims)"""
    x, idx = c.value(0), index_input(c, 1)
    batch, r = int(c.attr("batch_dims", 0)), c.rank(x)
    k = dims(c, idx)[-1] if c.rank(idx) else None
    if k is None:
        raise Unsupported("GatherND with a dynamic (or no) index tuple size")
    if not 0 <= batch < min(r, c.rank(idx)) or not 1 <= k <= r - batch:
        raise Invalid(f"index tuples of {k} for data of rank {r} with batch_dims {batch}")
    zero = same_sizes(c, [(size_of(c, x, a), size_of(c, idx, a)) for a in range(batch)],
                       "the batch dimensions of the data and the indices")
    idx = guard(c, idx, zero)
    comps = [in_range(c, component(c, idx, t), x, batch + t) for t in range(k)]
    if batch == 0:
        flat = flat_rows(c, x, comps)
        if flat is not None:
            return [flat]
    lead = c.rank(idx) - 1  # batch…, j…
    mask: Value | None = None
    for t, (comp, rng) in enumerate(comps):
        m = c.b.equal(pad_end(c, comp, k), along(c, rng, lead + t, lead + k))
        mask = m if mask is None else c.b.and_(mask, m)
    assert mask is not None
    xs = x
    for _ in range(lead - batch):
        xs = c.b.padShape(xs, batch)  # [b…, 1 (j)…, n…, rest…]
    return [fold(c, xs, pad_end(c, mask, r - batch - k), [*range(lead, lead + k)])]


def flat_rows(c: NodeContext, x: Value, comps: list[tuple[Value, Value]]) -> Value | None:
    """GatherND without batch dimensions as a Gather of rows: of x itself for one index per
    tuple, else of x with its first k (static) dimensions flattened, by the row number."""
    if len(comps) == 1:
        idx, rng = comps[0]
        return take(c, x, 0, idx, rng, known_finite(c, 0))
    shape = dims(c, x)
    k = len(comps)
    sizes, rest = shape[:k], shape[k:]
    if None in sizes or sum(d is None for d in rest) > 1:
        return None
    rows = math.prod(sizes)  # type: ignore[arg-type]
    row: Value | None = None
    for t, (idx, _) in enumerate(comps):
        stride = math.prod(sizes[t + 1:])  # type: ignore[arg-type]
        term = c.b.multiply(idx, i64(stride)) if stride != 1 else idx
        row = term if row is None else c.b.add(row, term)
    assert row is not None
    table = c.b.shapeCast(x, (rows, *rest))
    return take(c, table, 0, row, c.literal(np.arange(rows, dtype=np.int64)),
                known_finite(c, 0))


# ------------------------------------------------------------------ scattering


def reduction(c: NodeContext, x: Value) -> str:
    how = c.attr("reduction", "none")
    if how not in REDUCTIONS:
        raise Unsupported(f"reduction {how!r}")
    if how != "none" and c.type_of(x).dtype == BOOL:
        raise Unsupported(f"reduction {how!r} of booleans")
    return how


def combine(c: NodeContext, x: Value, updates: Value, mask: Value, over: list[int],
            how: str, positions: list[Value], keep: list[int]) -> Value:
    """x with the updates where the mask holds folded into it over the update axes `over`:
    by `how`, or (none) replaced by the last of them in row-major order. `positions` are the
    index ranges of the update axes (each as a tensor of the mask's rank), `keep` where the
    folded axes stay as 1-dimensions to broadcast with x."""
    b = c.b
    if how != "none":
        total = keep_axes(c, fold(c, updates, mask, over, how), keep) if over else \
            fold(c, updates, mask, over, how)
        opcode = {"add": "add", "mul": "multiply", "max": "max", "min": "min"}[how]
        return b.create(opcode, x, total)
    chosen = mask
    best: Value | None = None
    for pos in positions:  # the largest position along each axis in turn: the last match
        best = b.reduce(b.select(pos, i64(-1), chosen), "max", i64(-1), over)
        chosen = b.and_(chosen, b.equal(pos, keep_axes(c, best, keep)))
    value = fold(c, updates, chosen, over)
    if best is None:  # a single update: no axes to fold
        return b.select(value, x, mask)
    return b.select(keep_axes(c, value, keep), x,
                    keep_axes(c, b.greaterThanOrEqual(best, i64(0)), keep))


@converts("ScatterElements")
def _scatter_elements(c: NodeContext) -> list[Value]:
    """y = x, then y[p with its `axis` coordinate replaced by indices[p]] ⊕= updates[p]
    (reduction none: replaced, by the last update of a position)"""
    x, idx, updates = c.value(0), index_input(c, 1), c.value(2)
    how = reduction(c, x)
    r = c.rank(x)
    axis = c.axis(c.attr("axis", 0), r)
    if c.rank(idx) != r or c.rank(updates) != r:
        raise Invalid(f"data, indices and updates of ranks {r}, {c.rank(idx)}, "
                      f"{c.rank(updates)} (they must be equal)")
    zero = same_sizes(c, [(size_of(c, idx, k), size_of(c, updates, k)) for k in range(r)],
                       "the indices and the updates")
    window, more = fit_window(c, x, idx, axis)
    idx = guard(c, guard(c, idx, zero), more)
    idx, rng = in_range(c, idx, x, axis)
    mask = one_hot(c, idx, rng, r)  # [i… x n]: update p lands on position k of the axis
    ups = c.b.padShape(updates, r)
    pos = along(c, index_range(c, idx, axis), axis, r + 1)
    order = [*range(axis), r - 1, *range(axis, r - 1)]  # the landing axis back in place
    if window is x:
        moved = c.b.transpose(x, [*range(axis), *range(axis + 1, r), axis])
        out = combine(c, c.b.padShape(moved, axis), ups, mask, [axis], how, [pos], [axis])
        return [c.b.transpose(c.b.squeezeShape(out, axis), order)]
    return [scatter_into_window(c, x, ups, mask, axis, how, pos, order)]


def scatter_into_window(c: NodeContext, x: Value, ups: Value, mask: Value, axis: int,
                        how: str, pos: Value, order: list[int]) -> Value:
    """ScatterElements with indices smaller than the data along other axes (static sizes):
    the updates folded over the window they cover, then spread over x with identities."""
    b = c.b
    shape = dims(c, x)
    if None in shape:
        raise Unsupported("ScatterElements with indices smaller than the data along another "
                          "axis, and dynamic sizes")
    dt = c.type_of(x).dtype
    over = [axis]
    if how == "none":
        best = b.reduce(b.select(pos, i64(-1), mask), "max", i64(-1), over)
        chosen = b.and_(mask, b.equal(pos, keep_axes(c, best, over)))
        value = b.transpose(fold(c, ups, chosen, over), order)
        hit = b.transpose(b.greaterThanOrEqual(best, i64(0)), order)
        return b.select(spread(c, value, shape, neutral(dt, "add")), x,
                        spread(c, hit, shape, False))
    total = spread(c, b.transpose(fold(c, ups, mask, over, how), order), shape,
                   neutral(dt, how))
    return b.create({"add": "add", "mul": "multiply", "max": "max", "min": "min"}[how],
                    x, total)


def spread(c: NodeContext, v: Value, shape: tuple[int | None, ...], fill: bool | int | float
           ) -> Value:
    """v (static sizes, at most `shape`'s) extended to `shape` with `fill` after its elements."""
    t = c.type_of(v)
    for k, want in enumerate(shape):
        have = dims(c, v)[k]
        if have is not None and want is not None and have < want:
            extra = tuple(want - have if j == k else d for j, d in enumerate(dims(c, v)))
            v = c.b.concatenate([v, c.b.literal(fill, TensorType(extra, t.dtype))], k)
    return v


@converts("ScatterND")
def _scatter_nd(c: NodeContext) -> list[Value]:
    """y = x, then y[indices[j]] ⊕= updates[j] for each index tuple j (reduction none:
    replaced, by the last update of a position)"""
    x, idx, updates = c.value(0), index_input(c, 1), c.value(2)
    how = reduction(c, x)
    r, lead = c.rank(x), c.rank(idx) - 1
    k = dims(c, idx)[-1] if c.rank(idx) else None
    if k is None:
        raise Unsupported("ScatterND with a dynamic (or no) index tuple size")
    if not 1 <= k <= r or c.rank(updates) != lead + r - k:
        raise Invalid(f"index tuples of {k} into data of rank {r} with updates of rank "
                      f"{c.rank(updates)} (it must be {lead + r - k})")
    pairs = [(size_of(c, idx, a), size_of(c, updates, a)) for a in range(lead)]
    pairs += [(size_of(c, x, k + a), size_of(c, updates, lead + a)) for a in range(r - k)]
    idx = guard(c, idx, same_sizes(c, pairs, "the updates and the indices or the data"))
    mask: Value | None = None
    for t in range(k):
        comp, rng = in_range(c, component(c, idx, t), x, t)
        m = c.b.equal(pad_end(c, comp, k), along(c, rng, lead + t, lead + k))
        mask = m if mask is None else c.b.and_(mask, m)
    assert mask is not None
    mask = pad_end(c, mask, r - k)  # [j… x n… x 1 (rest)…]
    ups = updates
    for _ in range(k):
        ups = c.b.padShape(ups, lead)  # [j… x 1 (n)… x rest…]
    over = list(range(lead))
    positions = [along(c, index_range(c, idx, a), a, lead + r) for a in range(lead)]
    xs = x
    for _ in range(lead):
        xs = c.b.padShape(xs, 0)
    out = combine(c, xs, ups, mask, over, how, positions, over)
    for _ in range(lead):
        out = c.b.squeezeShape(out, 0)
    return [out]


# ------------------------------------------------------------------ encodings and selections


@converts("OneHot")
def _one_hot(c: NodeContext) -> list[Value]:
    """on where indices (truncated; negative: + depth) = k along a new `axis` of size depth,
    off elsewhere, for values = [off, on]"""
    depth_in = c.const(1)
    if depth_in is None:
        raise Unsupported("depth (input 1) must be known at import: it is the output's size")
    if depth_in.size != 1:
        raise Invalid(f"depth of {depth_in.size} elements (it must have one)")
    depth = int(depth_in.reshape(-1)[0])
    if depth < 1:
        raise Unsupported(f"depth {depth} (an empty or negative size)")
    values = c.value(2)
    if c.rank(values) != 1 or dims(c, values)[0] not in (2, None):
        raise Invalid(f"values of shape {list(dims(c, values))} (it must be [off, on])")
    x = c.value(0)
    b = c.b
    axis = c.axis(c.attr("axis", -1), c.rank(x) + 1)
    dt = c.type_of(x).dtype
    valid: Value | None = None
    idx: Value
    if dt.is_float:  # ONNX Runtime truncates; outside (−depth−1, depth) nothing matches
        wide = x if dt == F64 else b.dataTypeCast(x, F64)
        valid = b.and_(b.greaterThan(wide, constant(-depth - 1.0, scalar(F64))),
                       b.lessThan(wide, constant(float(depth), scalar(F64))))
        idx = b.dataTypeCast(b.select(wide, constant(0.0, scalar(F64)), valid), I64)
    elif dt.is_int:
        idx = x if dt == I64 else b.dataTypeCast(x, I64)
    else:
        raise Unsupported(f"indices of element type {dt}")
    mask = one_hot(c, wrapped(c, idx, depth), c.literal(np.arange(depth, dtype=np.int64)),
                   axis)
    if valid is not None:
        mask = b.and_(mask, b.padShape(valid, axis))
    return [b.select(b.extract(values, [1]), b.extract(values, [0]), mask)]


@converts("Compress")
def _compress(c: NodeContext) -> list[Value]:
    """the slices of x along `axis` where the constant condition holds (no axis: of x
    flattened), as numpy.compress"""
    cond = c.const(1)
    if cond is None:
        raise Unsupported("the condition (input 1) must be known at import: a condition "
                          "computed at run time makes a shape that depends on data")
    if cond.ndim != 1:
        raise Invalid(f"a condition of rank {cond.ndim} (it must be 1)")
    x = c.value(0)
    axis = c.attr("axis")
    if axis is None:
        shape = dims(c, x)
        x = c.b.shapeCast(x, (None if None in shape else math.prod(shape),))  # type: ignore[arg-type]
        axis = 0
    else:
        axis = c.axis(axis, c.rank(x))
    size = dims(c, x)[axis]
    # as ONNX Runtime: a condition longer than the axis selects nothing past its end
    picked = [int(i) for i in np.flatnonzero(cond) if size is None or i < size]
    if not picked:
        raise Unsupported("Compress selecting nothing (an empty result)")
    runs: list[list[int]] = []
    for i in picked:
        if runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    if runs == [[0, size]]:
        return [x]
    parts = [slice_axis(c, x, axis, lo, hi) for lo, hi in runs]
    return [parts[0] if len(parts) == 1 else c.b.concatenate(parts, axis)]
