"""Tensor instructions: reductions, `dot`, shape manipulation, `convolve`, `random`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..core import BuiltinRef, Instruction, Module
from ..opdef import define
from ..runtime import ExecutionError, format_np_shape, numpy_dtype, sum_dtype
from ..types import I64, FunctionType, TensorType, Type, broadcast_dims, scalar
from .common import (
    check_axes,
    dims_equal,
    fail,
    merge_dim,
    numeric_tensor,
    resolved,
    result_array,
    scalar_of,
    static_shape,
    tensor_type,
)

# ---------------------------------------------------------------- combinators

# Associative, commutative combinators with a numpy ufunc for folding.
UFUNC_COMBINATORS: dict[str, tuple[np.ufunc, str]] = {
    "add": (np.add, "numeric"),
    "multiply": (np.multiply, "numeric"),
    "min": (np.minimum, "numeric"),
    "max": (np.maximum, "numeric"),
    "and": (np.logical_and, "bool"),
    "or": (np.logical_or, "bool"),
}
BUILTIN_COMBINATORS = {"min": "min", "max": "max"}


def check_combinator(comb: Any, x: TensorType, m: Module | None) -> None:
    """A combinator folds two scalars of x's data type into one."""
    if isinstance(comb, str):
        entry = UFUNC_COMBINATORS.get(comb)
        if entry is None:
            fail(f"'{comb}' is not a reduction combinator (use add, multiply, min, max, and, or, "
                 "a builtin or a function)")
        domain = entry[1]
        if (domain == "bool") != x.dtype.is_bool:
            fail(f"combinator '{comb}' does not apply to data type '{x.dtype}'")
        return
    if isinstance(comb, BuiltinRef):
        if comb.name not in BUILTIN_COMBINATORS:
            fail(f"builtin \"{comb.name}\" is not a binary builtin usable as a combinator")
        if not x.dtype.is_numeric:
            fail(f"combinator builtin \"{comb.name}\" needs a numeric data type")
        return
    ft = resolved(comb.type, m)
    s = scalar(x.dtype)
    if not isinstance(ft, FunctionType) or ft.arguments != (s, s) or ft.result != s:
        fail(f"combinator function must have type '({s}, {s}) -> {s}', found '{comb.type}'")


def combinator_ufunc(comb: Any) -> np.ufunc | None:
    if isinstance(comb, str):
        return UFUNC_COMBINATORS[comb][0]
    if isinstance(comb, BuiltinRef):
        return UFUNC_COMBINATORS[BUILTIN_COMBINATORS[comb.name]][0]
    return None


def fold(comb: Any, frame: Any, x: np.ndarray, axes: tuple[int, ...], init: np.ndarray,
         dtype: np.dtype[Any]) -> np.ndarray:
    """init ⊕ x[…] folded over `axes`."""
    uf = combinator_ufunc(comb)
    if uf is not None:
        wide = sum_dtype(dtype) if uf is np.add else None
        with np.errstate(all="ignore"):
            return np.asarray(uf.reduce(x, axis=axes, initial=init.item(), dtype=wide)
                              ).astype(dtype)
    fn = frame.get(comb)
    keep = [a for a in range(x.ndim) if a not in axes]
    moved = np.transpose(x, keep + list(axes)).reshape(
        [x.shape[a] for a in keep] + [-1])
    out = np.empty(moved.shape[:-1], dtype)
    for idx in np.ndindex(out.shape):
        acc = init
        for e in moved[idx]:
            acc = frame.call_function(fn, [np.asarray(acc, dtype), np.asarray(e, dtype)])
        out[idx] = acc
    return out


def _call2(comb: Any, frame: Any) -> Callable[[Any, Any], Any]:
    uf = combinator_ufunc(comb)
    if uf is not None:
        return uf
    fn = frame.get(comb)
    return np.vectorize(lambda a, b: frame.call_function(fn, [np.asarray(a), np.asarray(b)]))


# ---------------------------------------------------------------- scan, reduce


def _scan_rule(inst: Instruction, m: Module | None) -> Type:
    x = tensor_type(inst.x, m)
    check_combinator(inst.combinator, x, m)
    check_axes(inst.dims, x.rank)
    return x


def _scan_eval(inst: Instruction, frame: Any) -> Any:
    x = frame.get(inst.x)
    uf = combinator_ufunc(inst.combinator)
    for axis in inst.dims:
        if uf is not None:
            x = uf.accumulate(x, axis=axis)
        else:
            f = _call2(inst.combinator, frame)
            x = np.moveaxis(x, axis, 0).copy()
            for i in range(1, x.shape[0]):
                x[i] = f(x[i - 1], x[i])
            x = np.moveaxis(x, 0, axis)
    return result_array(inst, x)


define("scan", "$x by $combinator:combinator along $dims:ints", _scan_rule, traits=("pure",),
       evaluate=_scan_eval, category="reduction",
       summary="inclusive prefix reduction along the listed dimensions")


def _reduce_rule(inst: Instruction, m: Module | None) -> Type:
    x = tensor_type(inst.x, m)
    check_combinator(inst.combinator, x, m)
    init = scalar_of(inst.init, m, "init value")
    if init.dtype != x.dtype:
        fail(f"init value has data type '{init.dtype}', expected '{x.dtype}'")
    dims = range(x.rank) if inst.dims is None else inst.dims
    check_axes(dims, x.rank)
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in dims), x.dtype)


def _reduce_eval(inst: Instruction, frame: Any) -> Any:
    x = frame.get(inst.x)
    dims = tuple(range(x.ndim)) if inst.dims is None else tuple(inst.dims)
    init = frame.get(inst.init)
    return result_array(inst, fold(inst.combinator, frame, x, dims, init, x.dtype))


define("reduce", "$x by $combinator:combinator init $init [along $dims:ints]", _reduce_rule,
       traits=("pure", "reduction"), evaluate=_reduce_eval, category="reduction",
       summary="fold the listed dimensions (all when `along` is absent) starting from init")


def window_output(size: int | None, window: int, stride: int, padding: str) -> int | None:
    if size is None:
        return None
    if padding == "none":
        return max((size - window) // stride + 1, 0)
    if padding == "half":
        return (size - 1) // stride + 1
    return (size + window - 2) // stride + 1


def window_pads(size: int, window: int, stride: int, padding: str) -> tuple[int, int]:
    if padding == "none":
        return 0, 0
    if padding == "full":
        return window - 1, window - 1
    out = (size - 1) // stride + 1
    total = max((out - 1) * stride + window - size, 0)
    return total // 2, total - total // 2


def _reduce_window_rule(inst: Instruction, m: Module | None) -> Type:
    x = tensor_type(inst.x, m)
    check_combinator(inst.combinator, x, m)
    init = scalar_of(inst.init, m, "init value")
    if init.dtype != x.dtype:
        fail(f"init value has data type '{init.dtype}', expected '{x.dtype}'")
    if len(inst.dims) != x.rank or len(inst.strides) != x.rank:
        fail(f"reduceWindow needs {x.rank} window dimensions and strides (one per dimension)")
    if any(d < 1 for d in inst.dims) or any(s < 1 for s in inst.strides):
        fail("window dimensions and strides must be positive")
    return x.with_shape(tuple(
        window_output(s, d, st, inst.padding)
        for s, d, st in zip(x.shape, inst.dims, inst.strides, strict=True)))


def _reduce_window_eval(inst: Instruction, frame: Any) -> Any:
    x = frame.get(inst.x)
    init = frame.get(inst.init)
    pads = [window_pads(s, d, st, inst.padding)
            for s, d, st in zip(x.shape, inst.dims, inst.strides, strict=True)]
    xp = np.pad(x, pads, constant_values=init) if any(p != (0, 0) for p in pads) else x
    out_shape = static_shape(inst.type.shape, "reduceWindow") if inst.type.is_static else tuple(
        window_output(s, d, st, inst.padding)
        for s, d, st in zip(x.shape, inst.dims, inst.strides, strict=True))
    if any(d > s for d, s in zip(inst.dims, xp.shape, strict=True)) or 0 in out_shape:
        return result_array(inst, np.zeros(out_shape, x.dtype))
    windows = sliding_window_view(xp, tuple(inst.dims))
    windows = windows[tuple(slice(None, None, s) for s in inst.strides)]
    axes = tuple(range(x.ndim, 2 * x.ndim))
    return result_array(inst, fold(inst.combinator, frame, windows, axes, init, x.dtype))


define("reduceWindow",
       "$x by $combinator:combinator init $init dims $dims:ints strides $strides:ints "
       "padding $padding:padding_mode",
       _reduce_window_rule, traits=("pure",), evaluate=_reduce_window_eval,
       category="reduction", summary="pooling: fold each window (padded with init)")

# ---------------------------------------------------------------- dot


def _dot_rule(inst: Instruction, m: Module | None) -> Type:
    a = numeric_tensor(inst.lhs, m, "left operand")
    b = numeric_tensor(inst.rhs, m, "right operand")
    if a.dtype != b.dtype:
        fail(f"operands have different data types '{a.dtype}' and '{b.dtype}'")
    if a.rank == 1 and b.rank == 1:
        if not dims_equal(a.shape[0], b.shape[0]):
            fail(f"vectors '{a}' and '{b}' have different lengths")
        return scalar(a.dtype)
    if a.rank < 2 or a.rank != b.rank:
        fail(f"dot needs two vectors or two tensors of equal rank ≥ 2, found '{a}' and '{b}'")
    batch = []
    for x, y in zip(a.shape[:-2], b.shape[:-2], strict=True):
        if not dims_equal(x, y):
            fail(f"batch dimensions of '{a}' and '{b}' differ")
        batch.append(merge_dim(x, y))
    if not dims_equal(a.shape[-1], b.shape[-2]):
        fail(f"cannot multiply '{a}' by '{b}': inner dimensions {a.shape[-1]} and "
             f"{b.shape[-2]} differ".replace("None", "_"))
    return TensorType((*batch, a.shape[-2], b.shape[-1]), a.dtype)


def _dot_eval(inst: Instruction, frame: Any) -> Any:
    a, b = frame.get(inst.lhs), frame.get(inst.rhs)
    try:
        return result_array(inst, np.dot(a, b) if a.ndim == 1 else np.matmul(a, b))
    except ValueError as e:
        raise ExecutionError(f"dot: {e}") from None


define("dot", "$lhs , $rhs", _dot_rule, traits=("pure",), evaluate=_dot_eval,
       aliases=("matrixMultiply",), category="linear algebra",
       summary="matrix product (batched over leading dimensions), or vector dot product")

# ---------------------------------------------------------------- layout


def _concatenate_rule(inst: Instruction, m: Module | None) -> Type:
    types = [tensor_type(v, m) for v in inst.xs]
    first = types[0]
    axis = inst.axis
    if not 0 <= axis < max(first.rank, 1) or first.rank == 0:
        fail(f"axis {axis} is out of range for rank {first.rank}")
    total: int | None = 0
    shape = list(first.shape)
    for t in types:
        if t.dtype != first.dtype or t.rank != first.rank:
            fail(f"cannot concatenate '{first}' with '{t}'")
        for i, (x, y) in enumerate(zip(shape, t.shape, strict=True)):
            if i != axis:
                if not dims_equal(x, y):
                    fail(f"cannot concatenate '{first}' with '{t}' along {axis}: "
                         f"dimension {i} differs")
                shape[i] = merge_dim(x, y)
        total = None if total is None or t.shape[axis] is None else total + t.shape[axis]
    shape[axis] = total
    return first.with_shape(tuple(shape))


def _concatenate_eval(inst: Instruction, frame: Any) -> Any:
    xs = [frame.get(v) for v in inst.xs]
    for i, x in enumerate(xs[1:], 1):
        if any(a != b for d, (a, b) in enumerate(zip(xs[0].shape, x.shape, strict=True))
               if d != inst.axis):
            raise ExecutionError(f"cannot concatenate {format_np_shape(xs[0].shape)} with "
                                 f"{format_np_shape(x.shape)} (operand {i}) along {inst.axis}")
    return result_array(inst, np.concatenate(xs, axis=inst.axis))


define("concatenate", "$xs:uses along $axis:int", _concatenate_rule, traits=("pure",),
       evaluate=_concatenate_eval, category="layout", summary="join tensors along an axis")


def permutation(inst: Instruction, rank: int) -> list[int]:
    """A `transpose`'s order of dimensions: the one written after `along`, or all of
    them reversed."""
    perm = getattr(inst, "perm", None)
    return list(perm) if perm is not None else list(reversed(range(rank)))


def is_reversal(inst: Instruction, rank: int) -> bool:
    """Whether a `transpose` reverses its operand's dimensions (a matrix transpose at rank 2)."""
    return permutation(inst, rank) == list(reversed(range(rank)))


def _transpose_rule(inst: Instruction, m: Module | None) -> Type:
    x = tensor_type(inst.x, m)
    if inst.perm is not None:
        if len(inst.perm) != x.rank:
            fail(f"the order lists {len(inst.perm)} dimensions, the operand has {x.rank}")
        check_axes(inst.perm, x.rank)
    return x.with_shape(tuple(x.shape[k] for k in permutation(inst, x.rank)))


def _transpose_eval(inst: Instruction, f: Any) -> Any:
    return result_array(inst, np.transpose(f.get(inst.x), inst.perm))


define("transpose", "$x [along $perm:ints]", _transpose_rule, traits=("pure",),
       evaluate=_transpose_eval, category="layout",
       summary="permute the dimensions: result dimension i is dimension perm[i] of the "
               "operand (all reversed when `along` is absent)")


def _reverse_rule(inst: Instruction, m: Module | None) -> Type:
    x = tensor_type(inst.x, m)
    check_axes(inst.dims, x.rank)
    return x


define("reverse", "$x along $dims:ints", _reverse_rule, traits=("pure",),
       evaluate=lambda inst, f: result_array(inst, np.flip(f.get(inst.x), axis=tuple(inst.dims))),
       category="layout", summary="reverse element order along the listed dimensions")


def _slice_rule(inst: Instruction, m: Module | None) -> Type:
    x = tensor_type(inst.x, m)
    lo, hi = inst.lower, inst.upper
    if x.rank == 0:
        fail("cannot slice a scalar")
    if lo < 0 or hi < lo:
        fail(f"slice bounds {lo} upto {hi} are not a valid closed range")
    if x.shape[0] is not None and hi >= x.shape[0]:
        fail(f"slice bounds {lo} upto {hi} are out of range for dimension 0 of '{x}'")
    return x.with_shape((hi - lo + 1, *x.shape[1:]))


def _slice_eval(inst: Instruction, frame: Any) -> Any:
    x = frame.get(inst.x)
    if inst.upper >= x.shape[0]:
        raise ExecutionError(f"slice upto {inst.upper} is out of range for dimension 0 of size "
                             f"{x.shape[0]}")
    return result_array(inst, x[inst.lower: inst.upper + 1])


define("slice", "$x from $lower:int upto $upper:int", _slice_rule, traits=("pure",),
       evaluate=_slice_eval, category="layout",
       summary="the closed range [lower, upper] of dimension 0")


def _pad_rule(inst: Instruction, m: Module | None) -> Type:
    x = tensor_type(inst.x, m)
    if not 0 <= inst.axis <= x.rank:
        fail(f"padShape index {inst.axis} is out of range for rank {x.rank}")
    return x.with_shape((*x.shape[: inst.axis], 1, *x.shape[inst.axis:]))


define("padShape", "$x at $axis:int", _pad_rule, traits=("pure", "cast"),
       evaluate=lambda inst, f: result_array(inst, np.expand_dims(f.get(inst.x), inst.axis)),
       category="shape cast", summary="insert a dimension of size 1")


def _squeeze_rule(inst: Instruction, m: Module | None) -> Type:
    x = tensor_type(inst.x, m)
    if not 0 <= inst.axis < x.rank:
        fail(f"squeezeShape index {inst.axis} is out of range for rank {x.rank}")
    if x.shape[inst.axis] not in (1, None):
        fail(f"squeezeShape needs dimension {inst.axis} of '{x}' to be 1")
    return x.with_shape(x.shape[: inst.axis] + x.shape[inst.axis + 1:])


def _squeeze_eval(inst: Instruction, frame: Any) -> Any:
    x = frame.get(inst.x)
    if x.shape[inst.axis] != 1:
        raise ExecutionError(f"squeezeShape: dimension {inst.axis} has size {x.shape[inst.axis]}")
    return result_array(inst, np.squeeze(x, inst.axis))


define("squeezeShape", "$x at $axis:int", _squeeze_rule, traits=("pure", "cast"),
       evaluate=_squeeze_eval, category="shape cast", summary="remove a dimension of size 1")


def _shape_cast_rule(inst: Instruction, m: Module | None) -> Type:
    x = tensor_type(inst.x, m)
    target = TensorType(tuple(inst.shape), x.dtype)
    if x.count is not None and target.count is not None and x.count != target.count:
        fail(f"cannot shapeCast '{x}' ({x.count} elements) to '{target}' "
             f"({target.count} elements)")
    return target


def _shape_cast_eval(inst: Instruction, frame: Any) -> Any:
    x = frame.get(inst.x)
    shape = [-1 if d is None else d for d in inst.shape]
    try:
        return result_array(inst, x.reshape(shape))
    except ValueError:
        raise ExecutionError(f"shapeCast: cannot reshape {x.shape} to {inst.type}") from None


define("shapeCast", "$x to $shape:shape", _shape_cast_rule, traits=("pure", "cast"),
       evaluate=_shape_cast_eval, category="shape cast",
       summary="reinterpret the shape, keeping the element count and order")


def _bit_cast_rule(inst: Instruction, m: Module | None) -> Type:
    src, dst = resolved(inst.x.type, m), resolved(inst.target, m)
    if isinstance(src, TensorType) and isinstance(dst, TensorType):
        a, b = src.count, dst.count
        if a is not None and b is not None and a * src.dtype.bits != b * dst.dtype.bits:
            fail(f"bitCast from '{src}' to '{dst}' changes the size in bits")
    return inst.target


def _bit_cast_eval(inst: Instruction, frame: Any) -> Any:
    x = frame.get(inst.x)
    t = inst.type
    if isinstance(t, TensorType) and isinstance(x, np.ndarray):
        shape = [-1 if d is None else d for d in t.shape]
        try:
            # the row-major bytes, whatever the shape (numpy views the last axis only)
            return np.ascontiguousarray(x).reshape(-1).view(numpy_dtype(t.dtype)).reshape(shape)
        except ValueError:
            raise ExecutionError(f"bitCast: cannot reinterpret {x.shape} as {t}") from None
    return x


define("bitCast", "$x to $target:type", _bit_cast_rule, traits=("pure", "cast"),
       evaluate=_bit_cast_eval, category="shape cast",
       summary="reinterpret the bits as another type of the same size")

# ---------------------------------------------------------------- tensor metadata

define("rank", "of $x", lambda inst, m: (tensor_type(inst.x, m), scalar(I64))[1],
       traits=("pure",), evaluate=lambda inst, f: np.asarray(np.ndim(f.get(inst.x)), np.int64),
       category="metadata", summary="the number of dimensions")
define("shape", "of $x",
       lambda inst, m: TensorType((tensor_type(inst.x, m).rank,), I64), traits=("pure",),
       evaluate=lambda inst, f: np.asarray(np.shape(f.get(inst.x)), np.int64),
       category="metadata", summary="the dimensions, as an i64 vector")
define("unitCount", "of $x", lambda inst, m: (tensor_type(inst.x, m), scalar(I64))[1],
       traits=("pure",), evaluate=lambda inst, f: np.asarray(np.size(f.get(inst.x)), np.int64),
       category="metadata", summary="the number of elements")

# ---------------------------------------------------------------- random


def _random_rule(inst: Instruction, m: Module | None) -> Type:
    lo = scalar_of(inst.lower, m, "lower bound")
    hi = scalar_of(inst.upper, m, "upper bound")
    if lo.dtype != hi.dtype or not lo.dtype.is_numeric:
        fail(f"bounds must be scalars of one numeric data type, found '{lo}' and '{hi}'")
    return TensorType(tuple(inst.shape), lo.dtype)


def _random_eval(inst: Instruction, frame: Any) -> Any:
    """The next elements of the frame's counter-based stream (`dlvm.ir.random_stream`)."""
    shape = static_shape(inst.type.shape, "random")
    lo, hi = frame.get(inst.lower), frame.get(inst.upper)
    if not lo < hi:
        raise ExecutionError(f"random needs lower < upper, found the empty range "
                             f"[{lo}, {hi})")
    try:
        out = frame.rng.draw(shape, lo, hi, np.asarray(lo).dtype)
    except ValueError as e:
        raise ExecutionError(f"random from {lo} upto {hi}: {e}") from None
    return result_array(inst, out)


define("random", "$shape:shape from $lower upto $upper", _random_rule, evaluate=_random_eval,
       category="random", summary="uniform random tensor in [lower, upper)")

# ---------------------------------------------------------------- convolve


def _conv_rule(inst: Instruction, m: Module | None) -> Type:
    x = numeric_tensor(inst.x, m, "input")
    k = numeric_tensor(inst.kernel, m, "kernel")
    if x.dtype != k.dtype:
        fail(f"input and kernel have different data types '{x.dtype}' and '{k.dtype}'")
    if x.rank < 3 or x.rank != k.rank:
        fail(f"convolve needs input and kernel of equal rank ≥ 3, found '{x}' and '{k}'")
    n = x.rank - 2
    strides = inst.strides or [1] * n
    pads = inst.padding or [(0, 0)] * n
    ld = inst.leftDilation or [1] * n
    rd = inst.rightDilation or [1] * n
    groups = 1 if inst.groups is None else inst.groups
    for name, lst in (("strides", strides), ("padding", pads), ("leftDilation", ld),
                      ("rightDilation", rd)):
        if len(lst) != n:
            fail(f"{name} needs {n} entries, one per spatial dimension")
    if any(s < 1 for s in strides):
        fail("strides must be positive")
    if any(lo < 0 or hi < 0 for lo, hi in pads):
        fail("padding must not be negative")
    if any(d < 1 for d in (*ld, *rd)):
        fail("dilations must be positive")
    cout, cin = k.shape[0], x.shape[1]
    if groups < 1 or (cout is not None and (groups > cout or cout % groups)):
        fail(f"groups {groups} must divide the {cout} output channels".replace("None", "_"))
    per_group = k.shape[1]
    if cin is not None and (cin % groups or (per_group is not None and cin // groups != per_group)):
        fail(f"kernel '{k}' needs {cin}/{groups} input channels per group")
    spatial = []
    for s, w, st, (lo, hi), a, b in zip(x.shape[2:], k.shape[2:], strides, pads, ld, rd,
                                        strict=True):
        if s is None or w is None:
            spatial.append(None)
            continue
        base = (s - 1) * a + 1 + lo + hi if s > 0 else lo + hi
        window = (w - 1) * b + 1
        spatial.append(0 if window > base else (base - window) // st + 1)
    batch = broadcast_dims(x.shape[0], x.shape[0])
    return TensorType((batch, cout, *spatial), x.dtype)  # type: ignore[arg-type]


def _dilate(a: np.ndarray, factors: list[int]) -> np.ndarray:
    if all(f == 1 for f in factors):
        return a
    shape = (*a.shape[:2], *((s - 1) * f + 1 if s else 0 for s, f in
                             zip(a.shape[2:], factors, strict=True)))
    out = np.zeros(shape, a.dtype)
    out[(slice(None), slice(None), *(slice(None, None, f) for f in factors))] = a
    return out


def _check_channels(cin: int, cout: int, per_group: int, groups: int) -> None:
    """The type rule's channel checks, for counts that were `_`."""
    for count, which in ((cout, "output"), (cin, "input")):
        if count % groups:
            raise ExecutionError(f"convolve: groups {groups} must divide the {count} {which} "
                                 "channels")
    if per_group != cin // groups:
        raise ExecutionError(f"convolve: the kernel has {per_group} input channels per group, "
                             f"the input {cin}/{groups}")


def _conv_eval(inst: Instruction, frame: Any) -> Any:
    x, k = frame.get(inst.x), frame.get(inst.kernel)
    n = x.ndim - 2
    strides = inst.strides or [1] * n
    pads = inst.padding or [(0, 0)] * n
    groups = inst.groups or 1
    _check_channels(x.shape[1], k.shape[0], k.shape[1], groups)
    xd = np.pad(_dilate(x, inst.leftDilation or [1] * n), [(0, 0), (0, 0), *pads])
    kd = _dilate(k, inst.rightDilation or [1] * n)
    out_spatial = [max((s - w) // st + 1, 0) if w <= s else 0
                   for s, w, st in zip(xd.shape[2:], kd.shape[2:], strides, strict=True)]
    cout = k.shape[0]
    if 0 in out_spatial:
        return result_array(inst, np.zeros((x.shape[0], cout, *out_spatial), x.dtype))
    win = sliding_window_view(xd, kd.shape[2:], axis=tuple(range(2, 2 + n)))
    win = win[(slice(None), slice(None), *(slice(None, None, s) for s in strides))]
    cin_g, cout_g = x.shape[1] // groups, cout // groups
    parts = []
    for g in range(groups):
        xw = win[:, g * cin_g:(g + 1) * cin_g]
        kg = kd[g * cout_g:(g + 1) * cout_g]
        r = np.tensordot(xw, kg, axes=([1, *range(2 + n, 2 + 2 * n)], [1, *range(2, 2 + n)]))
        parts.append(np.moveaxis(r, -1, 1))
    return result_array(inst, np.concatenate(parts, axis=1))


define("convolve",
       "$x kernel $kernel [strides $strides:ints] [padding $padding:pads] "
       "[leftDilation $leftDilation:ints] [rightDilation $rightDilation:ints] "
       "[groups $groups:int]",
       _conv_rule, traits=("pure",), evaluate=_conv_eval, category="linear algebra",
       summary="N-d convolution (cross-correlation) of [N, C, spatial…] by [O, C/g, window…]")
