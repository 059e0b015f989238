"""Reference interpreter: tensor instructions.

reduce, scan, reduceWindow, dot, concatenate, transpose, reverse, slice, the shape
casts, bitCast, convolve, random and the metadata getters, checked against
hand-computed values and naive loop implementations written here.
"""

from __future__ import annotations

import itertools
import math
import struct

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import run, run1

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")


def same(out: np.ndarray, expected: object, dtype: object, rtol: float = 0.0) -> None:
    """Equal within `rtol`; exactly by default, for values that are moved, not computed, or
    exact in any order of operations (small integers and halves)."""
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    exp = np.asarray(expected)
    assert out.shape == exp.shape, (out.shape, exp.shape)
    if rtol:
        np.testing.assert_allclose(out.astype(np.float64), exp.astype(np.float64), rtol=rtol)
    else:
        assert out.tolist() == exp.tolist()


X234 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


def sum_over(x: np.ndarray, axes: tuple[int, ...], init: float) -> np.ndarray:
    """Explicit loop sum of `x` over `axes`, starting from `init`."""
    keep = [a for a in range(x.ndim) if a not in axes]
    out = np.full([x.shape[a] for a in keep], init, np.float64)
    for idx in itertools.product(*(range(s) for s in x.shape)):
        out[tuple(idx[a] for a in keep)] += float(x[idx])
    return out


# ---------------------------------------------------------------- reduce

REDUCE_SRC = """
func @all: (<2 x 3 x 4 x f32>) -> f32 {
'entry(%x: <2 x 3 x 4 x f32>):
    %r = reduce %x: <2 x 3 x 4 x f32> by add init 0: f32
    return %r: f32
}
func @along0: (<2 x 3 x 4 x f32>) -> <3 x 4 x f32> {
'entry(%x: <2 x 3 x 4 x f32>):
    %r = reduce %x: <2 x 3 x 4 x f32> by add init 0: f32 along 0
    return %r: <3 x 4 x f32>
}
func @along1: (<2 x 3 x 4 x f32>) -> <2 x 4 x f32> {
'entry(%x: <2 x 3 x 4 x f32>):
    %r = reduce %x: <2 x 3 x 4 x f32> by add init 0: f32 along 1
    return %r: <2 x 4 x f32>
}
func @along02: (<2 x 3 x 4 x f32>) -> <3 x f32> {
'entry(%x: <2 x 3 x 4 x f32>):
    %r = reduce %x: <2 x 3 x 4 x f32> by add init 0: f32 along 0, 2
    return %r: <3 x f32>
}
func @along20: (<2 x 3 x 4 x f32>) -> <3 x f32> {
'entry(%x: <2 x 3 x 4 x f32>):
    %r = reduce %x: <2 x 3 x 4 x f32> by add init 0: f32 along 2, 0
    return %r: <3 x f32>
}
func @init10: (<2 x 3 x 4 x f32>) -> <2 x 4 x f32> {
'entry(%x: <2 x 3 x 4 x f32>):
    %r = reduce %x: <2 x 3 x 4 x f32> by add init 10: f32 along 1
    return %r: <2 x 4 x f32>
}
func @product: (<2 x 3 x i32>) -> <2 x i32> {
'entry(%x: <2 x 3 x i32>):
    %r = reduce %x: <2 x 3 x i32> by multiply init 2: i32 along 1
    return %r: <2 x i32>
}
func @minimum: (<2 x 3 x i64>) -> <3 x i64> {
'entry(%x: <2 x 3 x i64>):
    %r = reduce %x: <2 x 3 x i64> by min init 100: i64 along 0
    return %r: <3 x i64>
}
func @maximum: (<2 x 3 x f64>) -> <2 x f64> {
'entry(%x: <2 x 3 x f64>):
    %r = reduce %x: <2 x 3 x f64> by max init -1000.0: f64 along 1
    return %r: <2 x f64>
}
func @builtin_max: (<2 x 3 x f32>) -> <3 x f32> {
'entry(%x: <2 x 3 x f32>):
    %r = reduce %x: <2 x 3 x f32> by builtin "max" init 0: f32 along 0
    return %r: <3 x f32>
}
func @builtin_min: (<2 x 3 x f32>) -> f32 {
'entry(%x: <2 x 3 x f32>):
    %r = reduce %x: <2 x 3 x f32> by builtin "min" init 0: f32
    return %r: f32
}
func @all_true: (<2 x 3 x bool>) -> <2 x bool> {
'entry(%x: <2 x 3 x bool>):
    %r = reduce %x: <2 x 3 x bool> by and init true: bool along 1
    return %r: <2 x bool>
}
func @any_true: (<2 x 3 x bool>) -> <3 x bool> {
'entry(%x: <2 x 3 x bool>):
    %r = reduce %x: <2 x 3 x bool> by or init false: bool along 0
    return %r: <3 x bool>
}
func @all_true_everything: (<2 x 3 x bool>) -> bool {
'entry(%x: <2 x 3 x bool>):
    %r = reduce %x: <2 x 3 x bool> by and init true: bool
    return %r: bool
}
func @combine: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    %s = add %a: f32, %b: f32
    %p = multiply %a: f32, %b: f32
    %r = add %s: f32, %p: f32
    return %r: f32
}
func @by_function: (<2 x 3 x f32>) -> <2 x f32> {
'entry(%x: <2 x 3 x f32>):
    %r = reduce %x: <2 x 3 x f32> by @combine: (f32, f32) -> f32 init 1: f32 along 1
    return %r: <2 x f32>
}
func @dynamic: (<_ x 3 x f32>) -> <3 x f32> {
'entry(%x: <_ x 3 x f32>):
    %r = reduce %x: <_ x 3 x f32> by add init 0.5: f32 along 0
    return %r: <3 x f32>
}
func @f16_sum: (<4 x f16>) -> f16 {
'entry(%x: <4 x f16>):
    %r = reduce %x: <4 x f16> by add init 0: f16
    return %r: f16
}
func @i8_sum: (<3 x i8>) -> i8 {
'entry(%x: <3 x i8>):
    %r = reduce %x: <3 x i8> by add init 0: i8
    return %r: i8
}
"""


@pytest.mark.parametrize(("fn", "axes", "init"), [
    ("all", (0, 1, 2), 0.0), ("along0", (0,), 0.0), ("along1", (1,), 0.0),
    ("along02", (0, 2), 0.0), ("along20", (0, 2), 0.0), ("init10", (1,), 10.0),
])
def test_reduce_add(fn: str, axes: tuple[int, ...], init: float) -> None:
    same(run1(REDUCE_SRC, fn, X234), sum_over(X234, axes, init), np.float32, rtol=1e-7)


def test_reduce_add_all_hand_value() -> None:
    assert run1(REDUCE_SRC, "all", X234).tolist() == 276.0  # 0 + 1 + … + 23


def test_reduce_other_combinators() -> None:
    xi = np.array([[1, 2, 3], [-1, 4, 5]], np.int32)
    same(run1(REDUCE_SRC, "product", xi), [2 * 6, 2 * -20], np.int32)
    xl = np.array([[7, 200, -3], [8, 101, 4]], np.int64)
    same(run1(REDUCE_SRC, "minimum", xl), [7, 100, -3], np.int64)
    xd = np.array([[-5.0, -2.0, -9.0], [-3000.0, -2000.0, -1001.0]])
    same(run1(REDUCE_SRC, "maximum", xd), [-2.0, -1000.0], np.float64)
    xf = np.array([[-1, 5, 2], [-3, 4, 7]], np.float32)
    same(run1(REDUCE_SRC, "builtin_max", xf), [0, 5, 7], np.float32)
    same(run1(REDUCE_SRC, "builtin_min", xf), -3.0, np.float32)


def test_reduce_boolean() -> None:
    m = np.array([[True, True, True], [True, False, True]])
    same(run1(REDUCE_SRC, "all_true", m), [True, False], np.bool_)
    same(run1(REDUCE_SRC, "any_true", np.array([[False, True, False], [False, True, False]])),
         [False, True, False], np.bool_)
    assert run1(REDUCE_SRC, "all_true_everything", m).tolist() is False
    assert run1(REDUCE_SRC, "all_true_everything", np.ones((2, 3), bool)).tolist() is True


def test_reduce_by_function() -> None:
    # a ∘ b = a + b + ab = (1 + a)(1 + b) - 1, so the fold is (1 + init)·Π(1 + xᵢ) - 1
    x = np.array([[1, 2, 3], [0, -0.5, 1]], np.float32)
    expected = [2 * (2 * 3 * 4) - 1, 2 * (1 * 0.5 * 2) - 1]
    same(run1(REDUCE_SRC, "by_function", x), expected, np.float32, rtol=1e-7)


def test_reduce_dynamic_dimension() -> None:
    for n in (0, 1, 3):
        x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
        expected = [0.5 + sum(float(x[i, j]) for i in range(n)) for j in range(3)]
        same(run1(REDUCE_SRC, "dynamic", x), expected, np.float32)


def test_reduce_keeps_small_dtypes() -> None:
    same(run1(REDUCE_SRC, "f16_sum", np.array([0.5, 0.25, 1, 2], np.float16)), 3.75,
         np.float16)
    same(run1(REDUCE_SRC, "i8_sum", np.array([100, 100, 1], np.int8)), -55, np.int8)


# ---------------------------------------------------------------- scan

SCAN_SRC = """
func @add0: (<3 x 2 x f32>) -> <3 x 2 x f32> {
'entry(%x: <3 x 2 x f32>):
    %r = scan %x: <3 x 2 x f32> by add along 0
    return %r: <3 x 2 x f32>
}
func @add1: (<3 x 2 x f32>) -> <3 x 2 x f32> {
'entry(%x: <3 x 2 x f32>):
    %r = scan %x: <3 x 2 x f32> by add along 1
    return %r: <3 x 2 x f32>
}
func @add01: (<3 x 2 x f32>) -> <3 x 2 x f32> {
'entry(%x: <3 x 2 x f32>):
    %r = scan %x: <3 x 2 x f32> by add along 0, 1
    return %r: <3 x 2 x f32>
}
func @mul: (<4 x i32>) -> <4 x i32> {
'entry(%x: <4 x i32>):
    %r = scan %x: <4 x i32> by multiply along 0
    return %r: <4 x i32>
}
func @running_max: (<5 x f64>) -> <5 x f64> {
'entry(%x: <5 x f64>):
    %r = scan %x: <5 x f64> by builtin "max" along 0
    return %r: <5 x f64>
}
func @running_min: (<5 x i64>) -> <5 x i64> {
'entry(%x: <5 x i64>):
    %r = scan %x: <5 x i64> by min along 0
    return %r: <5 x i64>
}
func @any_so_far: (<4 x bool>) -> <4 x bool> {
'entry(%x: <4 x bool>):
    %r = scan %x: <4 x bool> by or along 0
    return %r: <4 x bool>
}
func @combine: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    %s = add %a: f32, %b: f32
    %p = multiply %a: f32, %b: f32
    %r = add %s: f32, %p: f32
    return %r: f32
}
func @by_function: (<2 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>):
    %r = scan %x: <2 x 3 x f32> by @combine: (f32, f32) -> f32 along 1
    return %r: <2 x 3 x f32>
}
func @dynamic: (<_ x f32>) -> <_ x f32> {
'entry(%x: <_ x f32>):
    %r = scan %x: <_ x f32> by add along 0
    return %r: <_ x f32>
}
"""


def test_scan() -> None:
    x = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    same(run1(SCAN_SRC, "add0", x), [[1, 2], [4, 6], [9, 12]], np.float32)
    same(run1(SCAN_SRC, "add1", x), [[1, 3], [3, 7], [5, 11]], np.float32)
    # along both: out[i, j] = sum of x[:i+1, :j+1]
    same(run1(SCAN_SRC, "add01", x), [[1, 3], [4, 10], [9, 21]], np.float32)
    same(run1(SCAN_SRC, "mul", np.array([2, -3, 4, 1], np.int32)), [2, -6, -24, -24], np.int32)
    same(run1(SCAN_SRC, "running_max", np.array([1.0, 3.0, 2.0, 5.0, -1.0])),
         [1.0, 3.0, 3.0, 5.0, 5.0], np.float64)
    same(run1(SCAN_SRC, "running_min", np.array([4, 6, 2, 3, 1], np.int64)), [4, 4, 2, 2, 1],
         np.int64)
    same(run1(SCAN_SRC, "any_so_far", np.array([False, False, True, False])),
         [False, False, True, True], np.bool_)


def test_scan_by_function() -> None:
    x = np.array([[1, 2, 3], [0, 1, -0.5]], np.float32)
    # prefix of (1 + a)(1 + b) - 1: 1, 2·3 - 1 = 5, 2·3·4 - 1 = 23
    same(run1(SCAN_SRC, "by_function", x), [[1, 5, 23], [0, 1, 0]], np.float32)


def test_scan_dynamic() -> None:
    same(run1(SCAN_SRC, "dynamic", np.array([1, 1, 1, 1, 1], np.float32)), [1, 2, 3, 4, 5],
         np.float32)
    same(run1(SCAN_SRC, "dynamic", np.zeros(0, np.float32)), np.zeros(0), np.float32)


# ---------------------------------------------------------------- reduceWindow


def pool_ref(x: np.ndarray, op: str, init: float, dims: tuple[int, ...],
             strides: tuple[int, ...], padding: str) -> np.ndarray:
    """Naive window fold; padded positions hold `init`."""
    outs, los = [], []
    for s, d, st in zip(x.shape, dims, strides, strict=True):
        if padding == "none":
            out, lo = max((s - d) // st + 1, 0), 0
        elif padding == "half":
            out = (s - 1) // st + 1
            lo = max((out - 1) * st + d - s, 0) // 2
        else:
            out, lo = (s + d - 2) // st + 1, d - 1
        outs.append(out)
        los.append(lo)
    fold = {"add": lambda a, b: a + b, "max": max, "min": min,
            "mul": lambda a, b: a * b}[op]
    res = np.zeros(outs)
    for o in itertools.product(*(range(n) for n in outs)):
        acc = init
        for j in itertools.product(*(range(d) for d in dims)):
            p = [oi * st + ji - lo for oi, st, ji, lo in zip(o, strides, j, los, strict=True)]
            inside = all(0 <= pi < s for pi, s in zip(p, x.shape, strict=True))
            acc = fold(acc, float(x[tuple(p)]) if inside else init)
        res[o] = acc
    return res


def test_pool_ref_output_sizes() -> None:
    # none: (s-d)//st+1, half: (s-1)//st+1, full: (s+d-2)//st+1
    x = np.zeros((7,))
    assert pool_ref(x, "add", 0, (3,), (2,), "none").shape == (3,)
    assert pool_ref(x, "add", 0, (3,), (2,), "half").shape == (4,)
    assert pool_ref(x, "add", 0, (3,), (2,), "full").shape == (5,)


POOL_CASES = {
    # name: (combinator, init, dims, strides, padding, input shape)
    "none_add": ("add", 0.0, (2, 3), (1, 2), "none", (5, 7)),
    "half_add": ("add", 0.0, (2, 3), (1, 2), "half", (5, 7)),
    "full_add": ("add", 0.0, (2, 3), (1, 2), "full", (5, 7)),
    "none_max": ("max", -100.0, (3, 3), (2, 2), "none", (5, 7)),
    "half_max": ("max", -100.0, (3, 3), (2, 2), "half", (5, 7)),
    "full_max": ("max", -100.0, (3, 2), (3, 1), "full", (5, 7)),
    "half_init": ("add", 1.0, (4, 1), (1, 1), "half", (5, 7)),  # padding holds init
    "full_init": ("add", 0.5, (2, 2), (2, 3), "full", (5, 7)),
    "half_even": ("add", 0.0, (2, 2), (2, 2), "half", (5, 7)),
    "big_window": ("add", 0.0, (6, 8), (1, 1), "none", (5, 7)),  # window > input
    "min_1d": ("min", 50.0, (3,), (2,), "half", (8,)),
    "builtin_max_3d": ("max", 0.0, (1, 2, 2), (1, 2, 1), "half", (2, 3, 4)),
    "by_function": ("mul", 1.0, (2, 2), (1, 1), "none", (3, 4)),
}


def _pool_out_shape(name: str) -> tuple[int, ...]:
    op, init, dims, strides, padding, shape = POOL_CASES[name]
    return pool_ref(np.zeros(shape), op, init, dims, strides, padding).shape


POOL_SRC = """
type $X = <5 x 7 x f32>

func @mul: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
  %r = multiply %a: f32, %b: f32
  return %r: f32
}
func @none_add: ($X) -> <4 x 3 x f32> {
'entry(%x: $X):
  %r = reduceWindow %x: $X by add init 0: f32 dims 2, 3 strides 1, 2 padding none
  return %r: <4 x 3 x f32>
}
func @half_add: ($X) -> <5 x 4 x f32> {
'entry(%x: $X):
  %r = reduceWindow %x: $X by add init 0: f32 dims 2, 3 strides 1, 2 padding half
  return %r: <5 x 4 x f32>
}
func @full_add: ($X) -> <6 x 5 x f32> {
'entry(%x: $X):
  %r = reduceWindow %x: $X by add init 0: f32 dims 2, 3 strides 1, 2 padding full
  return %r: <6 x 5 x f32>
}
func @none_max: ($X) -> <2 x 3 x f32> {
'entry(%x: $X):
  %r = reduceWindow %x: $X by max init -100: f32 dims 3, 3 strides 2, 2 padding none
  return %r: <2 x 3 x f32>
}
func @half_max: ($X) -> <3 x 4 x f32> {
'entry(%x: $X):
  %r = reduceWindow %x: $X by max init -100: f32 dims 3, 3 strides 2, 2 padding half
  return %r: <3 x 4 x f32>
}
func @full_max: ($X) -> <3 x 8 x f32> {
'entry(%x: $X):
  %r = reduceWindow %x: $X by max init -100: f32 dims 3, 2 strides 3, 1 padding full
  return %r: <3 x 8 x f32>
}
func @half_init: ($X) -> <5 x 7 x f32> {
'entry(%x: $X):
  %r = reduceWindow %x: $X by add init 1: f32 dims 4, 1 strides 1, 1 padding half
  return %r: <5 x 7 x f32>
}
func @full_init: ($X) -> <3 x 3 x f32> {
'entry(%x: $X):
  %r = reduceWindow %x: $X by add init 0.5: f32 dims 2, 2 strides 2, 3 padding full
  return %r: <3 x 3 x f32>
}
func @half_even: ($X) -> <3 x 4 x f32> {
'entry(%x: $X):
  %r = reduceWindow %x: $X by add init 0: f32 dims 2, 2 strides 2, 2 padding half
  return %r: <3 x 4 x f32>
}
func @big_window: ($X) -> <0 x 0 x f32> {
'entry(%x: $X):
  %r = reduceWindow %x: $X by add init 0: f32 dims 6, 8 strides 1, 1 padding none
  return %r: <0 x 0 x f32>
}
func @min_1d: (<8 x f32>) -> <4 x f32> {
'entry(%x: <8 x f32>):
  %r = reduceWindow %x: <8 x f32> by min init 50: f32 dims 3 strides 2 padding half
  return %r: <4 x f32>
}
func @builtin_max_3d: (<2 x 3 x 4 x f32>) -> <2 x 2 x 4 x f32> {
'entry(%x: <2 x 3 x 4 x f32>):
  %r = reduceWindow %x: <2 x 3 x 4 x f32> by builtin "max" init 0: f32 dims 1, 2, 2 strides 1, 2, 1 padding half
  return %r: <2 x 2 x 4 x f32>
}
func @by_function: (<3 x 4 x f32>) -> <2 x 3 x f32> {
'entry(%x: <3 x 4 x f32>):
  %r = reduceWindow %x: <3 x 4 x f32> by @mul: (f32, f32) -> f32 init 1: f32 dims 2, 2 strides 1, 1 padding none
  return %r: <2 x 3 x f32>
}
func @dynamic: (<_ x 4 x f32>) -> <_ x 2 x f32> {
'entry(%x: <_ x 4 x f32>):
  %r = reduceWindow %x: <_ x 4 x f32> by add init 0: f32 dims 2, 2 strides 2, 2 padding half
  return %r: <_ x 2 x f32>
}
"""


@pytest.mark.parametrize("name", sorted(POOL_CASES))
def test_reduce_window(name: str) -> None:
    op, init, dims, strides, padding, shape = POOL_CASES[name]
    rng = np.random.default_rng(len(name))
    x = rng.integers(-9, 10, size=shape).astype(np.float32)
    if op == "mul":
        x = rng.choice(np.array([-2, -1, 0.5, 1, 2], np.float32), size=shape)
    expected = pool_ref(x, op, init, dims, strides, padding)
    out = run1(POOL_SRC, name, x)
    assert out.shape == _pool_out_shape(name)
    same(out, expected, np.float32, rtol=1e-6)


def test_reduce_window_hand_values() -> None:
    x = np.arange(8, dtype=np.float32)
    # windows of 3 at stride 2, total padding (4-1)·2+3-8 = 1 → 0 before, 1 after (= 50)
    same(run1(POOL_SRC, "min_1d", x), [0, 2, 4, 6], np.float32)
    y = np.arange(35, dtype=np.float32).reshape(5, 7)
    # half, window 4 x 1: total padding 3 → 1 row before and 2 after, holding the init 1
    out = run1(POOL_SRC, "half_init", y)
    assert out[0, 0] == 1 + (1 + 0 + 7 + 14)
    assert out[4, 0] == 1 + (21 + 28 + 1 + 1)


def test_reduce_window_dynamic() -> None:
    for n in (1, 4, 5):
        x = np.arange(4 * n, dtype=np.float32).reshape(n, 4)
        expected = pool_ref(x, "add", 0.0, (2, 2), (2, 2), "half")
        same(run1(POOL_SRC, "dynamic", x), expected, np.float32)


# ---------------------------------------------------------------- dot

DOT_SRC = """
func @mm: (<2 x 3 x f32>, <3 x 4 x f32>) -> <2 x 4 x f32> {
'entry(%a: <2 x 3 x f32>, %b: <3 x 4 x f32>):
    %r = dot %a: <2 x 3 x f32>, %b: <3 x 4 x f32>
    return %r: <2 x 4 x f32>
}
func @vv: (<3 x f64>, <3 x f64>) -> f64 {
'entry(%a: <3 x f64>, %b: <3 x f64>):
    %r = dot %a: <3 x f64>, %b: <3 x f64>
    return %r: f64
}
func @batched: (<2 x 2 x 3 x f32>, <2 x 3 x 2 x f32>) -> <2 x 2 x 2 x f32> {
'entry(%a: <2 x 2 x 3 x f32>, %b: <2 x 3 x 2 x f32>):
    %r = dot %a: <2 x 2 x 3 x f32>, %b: <2 x 3 x 2 x f32>
    return %r: <2 x 2 x 2 x f32>
}
func @int: (<2 x 2 x i32>, <2 x 2 x i32>) -> <2 x 2 x i32> {
'entry(%a: <2 x 2 x i32>, %b: <2 x 2 x i32>):
    %r = matrixMultiply %a: <2 x 2 x i32>, %b: <2 x 2 x i32>
    return %r: <2 x 2 x i32>
}
func @dynamic: (<_ x _ x f32>, <_ x _ x f32>) -> <_ x _ x f32> {
'entry(%a: <_ x _ x f32>, %b: <_ x _ x f32>):
    %r = dot %a: <_ x _ x f32>, %b: <_ x _ x f32>
    return %r: <_ x _ x f32>
}
"""


def matmul_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n, k = a.shape
    k2, m = b.shape
    assert k == k2
    return np.array([[sum(float(a[i, t]) * float(b[t, j]) for t in range(k)) for j in range(m)]
                     for i in range(n)])


def test_dot_matrix() -> None:
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    same(run1(DOT_SRC, "mm", a, b), matmul_ref(a, b), np.float32, rtol=1e-7)
    # row 0 of a is [0, 1, 2]: [0·(-5) + 1·(-1) + 2·3, …]
    assert run1(DOT_SRC, "mm", a, b)[0].tolist() == [5, 8, 11, 14]


def test_dot_vectors_and_batches() -> None:
    assert run1(DOT_SRC, "vv", np.array([1.0, 2.0, 3.0]), np.array([4.0, -5.0, 6.0])).tolist() \
        == 12.0
    a = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    b = np.arange(12, dtype=np.float32).reshape(2, 3, 2) * 0.5
    out = run1(DOT_SRC, "batched", a, b)
    same(out, [matmul_ref(a[i], b[i]) for i in range(2)], np.float32, rtol=1e-7)
    same(run1(DOT_SRC, "int", np.array([[1, 2], [3, 4]], np.int32),
              np.array([[5, 6], [7, 8]], np.int32)), [[19, 22], [43, 50]], np.int32)


def test_dot_dynamic() -> None:
    a = np.ones((3, 5), np.float32)
    b = np.ones((5, 2), np.float32)
    same(run1(DOT_SRC, "dynamic", a, b), np.full((3, 2), 5.0), np.float32)
    with pytest.raises(ir.ExecutionError):
        run(DOT_SRC, "dynamic", a, np.ones((4, 2), np.float32))


# ---------------------------------------------------------------- layout

LAYOUT_SRC = """
func @cat0: (<1 x 2 x f32>, <2 x 2 x f32>) -> <3 x 2 x f32> {
'entry(%a: <1 x 2 x f32>, %b: <2 x 2 x f32>):
    %r = concatenate %a: <1 x 2 x f32>, %b: <2 x 2 x f32> along 0
    return %r: <3 x 2 x f32>
}
func @cat1: (<2 x 1 x i32>, <2 x 2 x i32>, <2 x 1 x i32>) -> <2 x 4 x i32> {
'entry(%a: <2 x 1 x i32>, %b: <2 x 2 x i32>, %c: <2 x 1 x i32>):
    %r = concatenate %a: <2 x 1 x i32>, %b: <2 x 2 x i32>, %c: <2 x 1 x i32> along 1
    return %r: <2 x 4 x i32>
}
func @cat_dyn: (<_ x 2 x f32>, <_ x 2 x f32>) -> <_ x 2 x f32> {
'entry(%a: <_ x 2 x f32>, %b: <_ x 2 x f32>):
    %r = concatenate %a: <_ x 2 x f32>, %b: <_ x 2 x f32> along 0
    return %r: <_ x 2 x f32>
}
func @cat_dyn1: (<_ x 2 x f32>, <3 x _ x f32>) -> <3 x _ x f32> {
'entry(%a: <_ x 2 x f32>, %b: <3 x _ x f32>):
    %r = concatenate %a: <_ x 2 x f32>, %b: <3 x _ x f32> along 1
    return %r: <3 x _ x f32>
}
func @transpose2: (<2 x 3 x f32>) -> <3 x 2 x f32> {
'entry(%x: <2 x 3 x f32>):
    %r = transpose %x: <2 x 3 x f32>
    return %r: <3 x 2 x f32>
}
func @transpose3: (<2 x 3 x 4 x f32>) -> <4 x 3 x 2 x f32> {
'entry(%x: <2 x 3 x 4 x f32>):
    %r = transpose %x: <2 x 3 x 4 x f32>
    return %r: <4 x 3 x 2 x f32>
}
func @reverse0: (<3 x 2 x i64>) -> <3 x 2 x i64> {
'entry(%x: <3 x 2 x i64>):
    %r = reverse %x: <3 x 2 x i64> along 0
    return %r: <3 x 2 x i64>
}
func @reverse1: (<3 x 2 x i64>) -> <3 x 2 x i64> {
'entry(%x: <3 x 2 x i64>):
    %r = reverse %x: <3 x 2 x i64> along 1
    return %r: <3 x 2 x i64>
}
func @reverse01: (<3 x 2 x i64>) -> <3 x 2 x i64> {
'entry(%x: <3 x 2 x i64>):
    %r = reverse %x: <3 x 2 x i64> along 0, 1
    return %r: <3 x 2 x i64>
}
func @slice: (<5 x 2 x f32>) -> <3 x 2 x f32> {
'entry(%x: <5 x 2 x f32>):
    %r = slice %x: <5 x 2 x f32> from 1 upto 3
    return %r: <3 x 2 x f32>
}
func @slice_one: (<5 x f32>) -> <1 x f32> {
'entry(%x: <5 x f32>):
    %r = slice %x: <5 x f32> from 4 upto 4
    return %r: <1 x f32>
}
func @slice_dyn: (<_ x f32>) -> <2 x f32> {
'entry(%x: <_ x f32>):
    %r = slice %x: <_ x f32> from 2 upto 3
    return %r: <2 x f32>
}
"""


def test_concatenate() -> None:
    a = np.array([[1, 2]], np.float32)
    b = np.array([[3, 4], [5, 6]], np.float32)
    same(run1(LAYOUT_SRC, "cat0", a, b), [[1, 2], [3, 4], [5, 6]], np.float32)
    same(run1(LAYOUT_SRC, "cat1", np.array([[1], [2]], np.int32),
              np.array([[3, 4], [5, 6]], np.int32), np.array([[7], [8]], np.int32)),
         [[1, 3, 4, 7], [2, 5, 6, 8]], np.int32)


def test_concatenate_dynamic() -> None:
    out = run1(LAYOUT_SRC, "cat_dyn", np.zeros((0, 2), np.float32), np.ones((3, 2), np.float32))
    same(out, np.ones((3, 2)), np.float32)
    out = run1(LAYOUT_SRC, "cat_dyn1", np.zeros((3, 2), np.float32), np.ones((3, 1), np.float32))
    same(out, [[0, 0, 1]] * 3, np.float32)


def test_concatenate_dynamic_mismatch_is_an_execution_error() -> None:
    # %a is <_ x 2>, %b is <3 x _>: rows must agree at run time
    with pytest.raises(ir.ExecutionError):
        run(LAYOUT_SRC, "cat_dyn1", np.zeros((2, 2), np.float32), np.ones((3, 1), np.float32))


def test_transpose_reverses_all_dimensions() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    same(run1(LAYOUT_SRC, "transpose2", x), [[1, 4], [2, 5], [3, 6]], np.float32)
    out = run1(LAYOUT_SRC, "transpose3", X234)
    assert out.shape == (4, 3, 2)
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        assert out[k, j, i] == X234[i, j, k]


def test_reverse() -> None:
    x = np.array([[1, 2], [3, 4], [5, 6]], np.int64)
    same(run1(LAYOUT_SRC, "reverse0", x), [[5, 6], [3, 4], [1, 2]], np.int64)
    same(run1(LAYOUT_SRC, "reverse1", x), [[2, 1], [4, 3], [6, 5]], np.int64)
    same(run1(LAYOUT_SRC, "reverse01", x), [[6, 5], [4, 3], [2, 1]], np.int64)


def test_slice_is_a_closed_range_of_dimension_0() -> None:
    x = np.arange(10, dtype=np.float32).reshape(5, 2)
    same(run1(LAYOUT_SRC, "slice", x), [[2, 3], [4, 5], [6, 7]], np.float32)
    same(run1(LAYOUT_SRC, "slice_one", np.arange(5, dtype=np.float32)), [4], np.float32)
    same(run1(LAYOUT_SRC, "slice_dyn", np.arange(4, dtype=np.float32)), [2, 3], np.float32)
    with pytest.raises(ir.ExecutionError):
        run(LAYOUT_SRC, "slice_dyn", np.arange(3, dtype=np.float32))


# ---------------------------------------------------------------- shape casts

CAST_SRC = """
func @pad0: (<3 x f32>) -> <1 x 3 x f32> {
'entry(%x: <3 x f32>):
    %r = padShape %x: <3 x f32> at 0
    return %r: <1 x 3 x f32>
}
func @pad_end: (<3 x f32>) -> <3 x 1 x f32> {
'entry(%x: <3 x f32>):
    %r = padShape %x: <3 x f32> at 1
    return %r: <3 x 1 x f32>
}
func @pad_scalar: (f32) -> <1 x f32> {
'entry(%x: f32):
    %r = padShape %x: f32 at 0
    return %r: <1 x f32>
}
func @squeeze: (<2 x 1 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 1 x 3 x f32>):
    %r = squeezeShape %x: <2 x 1 x 3 x f32> at 1
    return %r: <2 x 3 x f32>
}
func @squeeze_dyn: (<_ x 3 x f32>) -> <3 x f32> {
'entry(%x: <_ x 3 x f32>):
    %r = squeezeShape %x: <_ x 3 x f32> at 0
    return %r: <3 x f32>
}
func @reshape: (<2 x 3 x f32>) -> <3 x 2 x f32> {
'entry(%x: <2 x 3 x f32>):
    %r = shapeCast %x: <2 x 3 x f32> to 3 x 2
    return %r: <3 x 2 x f32>
}
func @to_scalar: (<1 x 1 x i32>) -> i32 {
'entry(%x: <1 x 1 x i32>):
    %r = shapeCast %x: <1 x 1 x i32> to scalar
    return %r: i32
}
func @flatten_dyn: (<_ x 2 x 3 x f32>) -> <_ x 6 x f32> {
'entry(%x: <_ x 2 x 3 x f32>):
    %r = shapeCast %x: <_ x 2 x 3 x f32> to _ x 6
    return %r: <_ x 6 x f32>
}
func @to_static: (<_ x f32>) -> <2 x 2 x f32> {
'entry(%x: <_ x f32>):
    %r = shapeCast %x: <_ x f32> to 2 x 2
    return %r: <2 x 2 x f32>
}
func @bits: (<3 x f32>) -> <3 x i32> {
'entry(%x: <3 x f32>):
    %r = bitCast %x: <3 x f32> to <3 x i32>
    return %r: <3 x i32>
}
func @bits_back: (<3 x i32>) -> <3 x f32> {
'entry(%x: <3 x i32>):
    %r = bitCast %x: <3 x i32> to <3 x f32>
    return %r: <3 x f32>
}
func @split64: (f64) -> <2 x i32> {
'entry(%x: f64):
    %r = bitCast %x: f64 to <2 x i32>
    return %r: <2 x i32>
}
func @join32: (<2 x f32>) -> f64 {
'entry(%x: <2 x f32>):
    %r = bitCast %x: <2 x f32> to f64
    return %r: f64
}
"""


def test_pad_and_squeeze() -> None:
    x = np.array([1, 2, 3], np.float32)
    same(run1(CAST_SRC, "pad0", x), [[1, 2, 3]], np.float32)
    same(run1(CAST_SRC, "pad_end", x), [[1], [2], [3]], np.float32)
    same(run1(CAST_SRC, "pad_scalar", np.float32(7)), [7], np.float32)
    y = np.arange(6, dtype=np.float32).reshape(2, 1, 3)
    same(run1(CAST_SRC, "squeeze", y), [[0, 1, 2], [3, 4, 5]], np.float32)
    same(run1(CAST_SRC, "squeeze_dyn", np.array([[4, 5, 6]], np.float32)), [4, 5, 6],
         np.float32)


def test_squeeze_of_a_dynamic_dimension_that_is_not_1() -> None:
    with pytest.raises(ir.ExecutionError):
        run(CAST_SRC, "squeeze_dyn", np.ones((2, 3), np.float32))


def test_shape_cast_keeps_row_major_order() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    same(run1(CAST_SRC, "reshape", x), [[1, 2], [3, 4], [5, 6]], np.float32)
    same(run1(CAST_SRC, "to_scalar", np.array([[42]], np.int32)), 42, np.int32)
    z = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    same(run1(CAST_SRC, "flatten_dyn", z), [list(range(6)), list(range(6, 12))], np.float32)
    same(run1(CAST_SRC, "to_static", np.array([1, 2, 3, 4], np.float32)), [[1, 2], [3, 4]],
         np.float32)
    with pytest.raises(ir.ExecutionError):
        run(CAST_SRC, "to_static", np.ones(5, np.float32))


def _f32_bits(v: float) -> int:
    return struct.unpack("<i", struct.pack("<f", v))[0]


def test_bit_cast() -> None:
    x = [1.0, -2.0, 0.15625]
    same(run1(CAST_SRC, "bits", np.array(x, np.float32)), [_f32_bits(v) for v in x], np.int32)
    assert [_f32_bits(v) for v in x[:2]] == [0x3F800000, -0x40000000]
    same(run1(CAST_SRC, "bits_back", np.array([0x3F800000, 0x40490FDB, 0], np.int32)),
         [1.0, struct.unpack("<f", struct.pack("<i", 0x40490FDB))[0], 0.0], np.float32)
    lo, hi = struct.unpack("<2i", struct.pack("<d", 1.5))
    same(run1(CAST_SRC, "split64", np.float64(1.5)), [lo, hi], np.int32)
    a, b = struct.unpack("<2f", struct.pack("<d", -3.25))
    same(run1(CAST_SRC, "join32", np.array([a, b], np.float32)), -3.25, np.float64)


# ---------------------------------------------------------------- metadata

META_SRC = """
func @f: (<_ x 3 x _ x f32>) -> (i64, <3 x i64>, i64) {
'entry(%x: <_ x 3 x _ x f32>):
    %r = rank of %x: <_ x 3 x _ x f32>
    %s = shape of %x: <_ x 3 x _ x f32>
    %n = unitCount of %x: <_ x 3 x _ x f32>
    %t = literal (%r: i64, %s: <3 x i64>, %n: i64): (i64, <3 x i64>, i64)
    return %t: (i64, <3 x i64>, i64)
}
func @scalar: (f64) -> (i64, <0 x i64>, i64) {
'entry(%x: f64):
    %r = rank of %x: f64
    %s = shape of %x: f64
    %n = unitCount of %x: f64
    %t = literal (%r: i64, %s: <0 x i64>, %n: i64): (i64, <0 x i64>, i64)
    return %t: (i64, <0 x i64>, i64)
}
"""


def test_metadata() -> None:
    r, s, n = run(META_SRC, "f", np.zeros((2, 3, 5), np.float32))
    same(r, 3, np.int64)
    same(s, [2, 3, 5], np.int64)
    same(n, 30, np.int64)
    r, s, n = run(META_SRC, "f", np.zeros((0, 3, 1), np.float32))
    assert (r.tolist(), s.tolist(), n.tolist()) == (3, [0, 3, 1], 0)
    r, s, n = run(META_SRC, "scalar", np.float64(1))
    assert (r.tolist(), s.tolist(), n.tolist()) == (0, [], 1)
    assert s.dtype == np.int64


# ---------------------------------------------------------------- convolve


def conv_ref(x: np.ndarray, k: np.ndarray, strides: list[int], pads: list[tuple[int, int]],
             ld: list[int], rd: list[int], groups: int) -> np.ndarray:
    """Naive XLA-style convolution (cross-correlation) with dilations and groups."""
    n_batch, cin = x.shape[:2]
    cout = k.shape[0]
    spatial, window = x.shape[2:], k.shape[2:]
    outs = []
    for s, w, st, (lo, hi), a, b in zip(spatial, window, strides, pads, ld, rd, strict=True):
        base = (s - 1) * a + 1 + lo + hi
        win = (w - 1) * b + 1
        outs.append(0 if win > base else (base - win) // st + 1)
    cin_g, cout_g = cin // groups, cout // groups
    res = np.zeros((n_batch, cout, *outs))
    for nb, o in itertools.product(range(n_batch), range(cout)):
        g = o // cout_g
        for pos in itertools.product(*(range(v) for v in outs)):
            acc = 0.0
            for c in range(cin_g):
                for j in itertools.product(*(range(w) for w in window)):
                    src = []
                    for p, jj, st, (lo, _), a, b in zip(pos, j, strides, pads, ld, rd,
                                                        strict=True):
                        q = p * st + jj * b - lo  # position in the dilated input
                        if q % a:
                            break
                        src.append(q // a)
                    else:
                        if all(0 <= si < s for si, s in zip(src, spatial, strict=True)):
                            acc += float(x[(nb, g * cin_g + c, *src)]) * float(k[(o, c, *j)])
            res[(nb, o, *pos)] = acc
    return res


CONV_CASES = {
    # name: (x shape, k shape, strides, padding, leftDilation, rightDilation, groups)
    "plain1d": ((2, 3, 7), (4, 3, 3), [1], [(0, 0)], [1], [1], 1),
    "stride_pad1d": ((1, 2, 8), (3, 2, 3), [2], [(1, 2)], [1], [1], 1),
    "plain2d": ((2, 2, 5, 6), (3, 2, 3, 2), [1, 1], [(0, 0), (0, 0)], [1, 1], [1, 1], 1),
    "all2d": ((1, 4, 5, 4), (6, 2, 2, 3), [2, 1], [(1, 0), (2, 1)], [2, 1], [1, 2], 2),
    "depthwise2d": ((1, 3, 4, 4), (3, 1, 2, 2), [1, 1], [(1, 1), (1, 1)], [1, 1], [1, 1], 3),
    "dilated1d": ((1, 1, 6), (2, 1, 2), [1], [(0, 0)], [3], [2], 1),
    "conv3d": ((1, 2, 3, 4, 3), (2, 2, 2, 2, 2), [1, 2, 1], [(0, 0), (1, 0), (0, 1)],
               [1, 1, 1], [1, 1, 1], 1),
    "empty": ((1, 1, 2), (1, 1, 4), [1], [(0, 0)], [1], [1], 1),
}


CONV_SRC = """
func @plain1d: (<2 x 3 x 7 x f32>, <4 x 3 x 3 x f32>) -> <2 x 4 x 5 x f32> {
'entry(%x: <2 x 3 x 7 x f32>, %k: <4 x 3 x 3 x f32>):
  %r = convolve %x: <2 x 3 x 7 x f32> kernel %k: <4 x 3 x 3 x f32>
  return %r: <2 x 4 x 5 x f32>
}
func @stride_pad1d: (<1 x 2 x 8 x f32>, <3 x 2 x 3 x f32>) -> <1 x 3 x 5 x f32> {
'entry(%x: <1 x 2 x 8 x f32>, %k: <3 x 2 x 3 x f32>):
  %r = convolve %x: <1 x 2 x 8 x f32> kernel %k: <3 x 2 x 3 x f32> strides 2 padding (1, 2)
  return %r: <1 x 3 x 5 x f32>
}
func @plain2d: (<2 x 2 x 5 x 6 x f32>, <3 x 2 x 3 x 2 x f32>) -> <2 x 3 x 3 x 5 x f32> {
'entry(%x: <2 x 2 x 5 x 6 x f32>, %k: <3 x 2 x 3 x 2 x f32>):
  %r = convolve %x: <2 x 2 x 5 x 6 x f32> kernel %k: <3 x 2 x 3 x 2 x f32>
  return %r: <2 x 3 x 3 x 5 x f32>
}
func @all2d: (<1 x 4 x 5 x 4 x f32>, <6 x 2 x 2 x 3 x f32>) -> <1 x 6 x 5 x 3 x f32> {
'entry(%x: <1 x 4 x 5 x 4 x f32>, %k: <6 x 2 x 2 x 3 x f32>):
  %r = convolve %x: <1 x 4 x 5 x 4 x f32> kernel %k: <6 x 2 x 2 x 3 x f32> strides 2, 1 padding (1, 0), (2, 1) leftDilation 2, 1 rightDilation 1, 2 groups 2
  return %r: <1 x 6 x 5 x 3 x f32>
}
func @depthwise2d: (<1 x 3 x 4 x 4 x f32>, <3 x 1 x 2 x 2 x f32>) -> <1 x 3 x 5 x 5 x f32> {
'entry(%x: <1 x 3 x 4 x 4 x f32>, %k: <3 x 1 x 2 x 2 x f32>):
  %r = convolve %x: <1 x 3 x 4 x 4 x f32> kernel %k: <3 x 1 x 2 x 2 x f32> padding (1, 1), (1, 1) groups 3
  return %r: <1 x 3 x 5 x 5 x f32>
}
func @dilated1d: (<1 x 1 x 6 x f32>, <2 x 1 x 2 x f32>) -> <1 x 2 x 14 x f32> {
'entry(%x: <1 x 1 x 6 x f32>, %k: <2 x 1 x 2 x f32>):
  %r = convolve %x: <1 x 1 x 6 x f32> kernel %k: <2 x 1 x 2 x f32> leftDilation 3 rightDilation 2
  return %r: <1 x 2 x 14 x f32>
}
func @conv3d: (<1 x 2 x 3 x 4 x 3 x f32>, <2 x 2 x 2 x 2 x 2 x f32>) -> <1 x 2 x 2 x 2 x 3 x f32> {
'entry(%x: <1 x 2 x 3 x 4 x 3 x f32>, %k: <2 x 2 x 2 x 2 x 2 x f32>):
  %r = convolve %x: <1 x 2 x 3 x 4 x 3 x f32> kernel %k: <2 x 2 x 2 x 2 x 2 x f32> strides 1, 2, 1 padding (0, 0), (1, 0), (0, 1)
  return %r: <1 x 2 x 2 x 2 x 3 x f32>
}
func @empty: (<1 x 1 x 2 x f32>, <1 x 1 x 4 x f32>) -> <1 x 1 x 0 x f32> {
'entry(%x: <1 x 1 x 2 x f32>, %k: <1 x 1 x 4 x f32>):
  %r = convolve %x: <1 x 1 x 2 x f32> kernel %k: <1 x 1 x 4 x f32>
  return %r: <1 x 1 x 0 x f32>
}
func @int: (<1 x 1 x 4 x i32>, <1 x 1 x 2 x i32>) -> <1 x 1 x 3 x i32> {
'entry(%x: <1 x 1 x 4 x i32>, %k: <1 x 1 x 2 x i32>):
  %r = convolve %x: <1 x 1 x 4 x i32> kernel %k: <1 x 1 x 2 x i32>
  return %r: <1 x 1 x 3 x i32>
}
func @dynamic: (<_ x 1 x _ x f32>, <2 x 1 x 3 x f32>) -> <_ x 2 x _ x f32> {
'entry(%x: <_ x 1 x _ x f32>, %k: <2 x 1 x 3 x f32>):
  %r = convolve %x: <_ x 1 x _ x f32> kernel %k: <2 x 1 x 3 x f32> padding (1, 1)
  return %r: <_ x 2 x _ x f32>
}
"""


@pytest.mark.parametrize("name", sorted(CONV_CASES))
def test_convolve(name: str) -> None:
    xs, ks, strides, pads, ld, rd, groups = CONV_CASES[name]
    rng = np.random.default_rng(7)
    x = rng.integers(-4, 5, size=xs).astype(np.float32)
    k = rng.integers(-3, 4, size=ks).astype(np.float32)
    expected = conv_ref(x, k, strides, pads, ld, rd, groups)
    same(run1(CONV_SRC, name, x, k), expected, np.float32)


def test_convolve_hand_values() -> None:
    x = np.array([[[1, 2, 3, 4]]], np.int32)
    k = np.array([[[10, 1]]], np.int32)  # cross-correlation: no kernel flip
    same(run1(CONV_SRC, "int", x, k), [[[12, 23, 34]]], np.int32)
    x = np.array([[[1, 2]]], np.float32)
    k = np.ones((2, 1, 3), np.float32)
    same(run1(CONV_SRC, "dynamic", x, k), [[[3, 3], [3, 3]]], np.float32)


def test_convolve_dynamic() -> None:
    rng = np.random.default_rng(1)
    k = rng.integers(-3, 4, size=(2, 1, 3)).astype(np.float32)
    for n, s in ((1, 3), (2, 6)):
        x = rng.integers(-4, 5, size=(n, 1, s)).astype(np.float32)
        same(run1(CONV_SRC, "dynamic", x, k), conv_ref(x, k, [1], [(1, 1)], [1], [1], 1),
             np.float32)


# ---------------------------------------------------------------- random

RANDOM_SRC = """
func @uniform: () -> <200 x f32> {
'entry():
    %r = random 200 from -2.0: f32 upto 3.0: f32
    return %r: <200 x f32>
}
func @ints: () -> <4 x 50 x i32> {
'entry():
    %r = random 4 x 50 from 5: i32 upto 8: i32
    return %r: <4 x 50 x i32>
}
func @f64: () -> <2 x 3 x f64> {
'entry():
    %r = random 2 x 3 from 0: f64 upto 1: f64
    return %r: <2 x 3 x f64>
}
func @one: () -> f32 {
'entry():
    %r = random scalar from 10: f32 upto 11: f32
    return %r: f32
}
func @empty_ints: (i32, i32) -> <3 x i32> {
'entry(%lo: i32, %hi: i32):
    %r = random 3 from %lo: i32 upto %hi: i32
    return %r: <3 x i32>
}
func @reversed_floats: () -> <3 x f32> {
'entry():
    %r = random 3 from 5: f32 upto 1: f32
    return %r: <3 x f32>
}
func @two: () -> (<3 x f32>, <3 x f32>) {
'entry():
    %a = random 3 from 0: f32 upto 1: f32
    %b = random 3 from 0: f32 upto 1: f32
    %t = literal (%a: <3 x f32>, %b: <3 x f32>): (<3 x f32>, <3 x f32>)
    return %t: (<3 x f32>, <3 x f32>)
}
"""


def _random(fn: str, seed: int) -> tuple[np.ndarray, ...]:
    m = ir.parse(RANDOM_SRC)
    ir.verify(m)
    return ir.compile(m, "interp", seed=seed).call(fn)


@pytest.mark.interp_only("the interpreter's seeded random numbers")
def test_random_within_bounds_and_typed() -> None:
    (u,) = _random("uniform", 3)
    assert u.dtype == np.float32 and u.shape == (200,)
    assert u.min() >= -2.0 and u.max() < 3.0
    assert u.max() - u.min() > 2.5  # it is spread over the interval
    (i,) = _random("ints", 3)
    assert i.dtype == np.int32 and i.shape == (4, 50)
    assert set(i.ravel().tolist()) == {5, 6, 7}  # upper bound excluded
    (d,) = _random("f64", 3)
    assert d.dtype == np.float64 and d.shape == (2, 3) and ((d >= 0) & (d < 1)).all()
    (s,) = _random("one", 3)
    assert s.dtype == np.float32 and s.shape == () and 10 <= float(s) < 11


@pytest.mark.interp_only("the interpreter's seeded random numbers")
def test_random_is_reproducible_with_a_seed() -> None:
    for fn in ("uniform", "ints", "f64"):
        a, b, c = _random(fn, 3), _random(fn, 3), _random(fn, 4)
        assert a[0].tolist() == b[0].tolist()
        assert a[0].tolist() != c[0].tolist()


@pytest.mark.interp_only("the interpreter's seeded random numbers")
def test_two_random_instructions_differ() -> None:
    a, b = _random("two", 0)
    assert a.tolist() != b.tolist()
    a2, b2 = _random("two", 0)
    assert (a.tolist(), b.tolist()) == (a2.tolist(), b2.tolist())


@pytest.mark.interp_only("the interpreter's seeded random numbers")
def test_default_seed_is_deterministic() -> None:
    m = ir.parse(RANDOM_SRC)
    first = ir.compile(m, "interp").call("f64")[0]
    second = ir.compile(ir.parse(RANDOM_SRC), "interp").call("f64")[0]
    assert first.tolist() == second.tolist()
    assert not math.isnan(float(first.sum()))


@pytest.mark.interp_only("the interpreter's seeded random numbers")
def test_random_bounds_can_be_values() -> None:
    m = ir.parse(RANDOM_SRC)
    out = ir.compile(m, "interp", seed=1).call("empty_ints", np.int32(-3), np.int32(-2))[0]
    assert out.dtype == np.int32 and out.tolist() == [-3, -3, -3]


@pytest.mark.parametrize(("fn", "args"), [
    ("empty_ints", (np.int32(5), np.int32(5))),
    ("empty_ints", (np.int32(5), np.int32(1))),
    ("reversed_floats", ()),
])
@pytest.mark.interp_only("the interpreter's seeded random numbers")
def test_random_with_an_empty_range_is_an_execution_error(fn: str, args: tuple) -> None:
    m = ir.parse(RANDOM_SRC)
    with pytest.raises(ir.ExecutionError):
        ir.compile(m, "interp").call(fn, *args)


UNBROADCAST_SRC = """
module "unbroadcast"
stage raw

func @rows: (<_ x 3 x f32>, <_ x 1 x f32>) -> <_ x 1 x f32> {
'entry(%dy: <_ x 3 x f32>, %b: <_ x 1 x f32>):
    %r = unbroadcast %dy: <_ x 3 x f32> like %b: <_ x 1 x f32>
    return %r: <_ x 1 x f32>
}

func @both: (<_ x _ x f32>, <_ x _ x f32>) -> <_ x _ x f32> {
'entry(%dy: <_ x _ x f32>, %b: <_ x _ x f32>):
    %r = unbroadcast %dy: <_ x _ x f32> like %b: <_ x _ x f32>
    return %r: <_ x _ x f32>
}

func @to_scalar: (<2 x 3 x f32>, f32) -> f32 {
'entry(%dy: <2 x 3 x f32>, %b: f32):
    %r = unbroadcast %dy: <2 x 3 x f32> like %b: f32
    return %r: f32
}
"""


def test_unbroadcast_sums_the_broadcast_dimensions_known_at_run_time() -> None:
    dy = np.arange(6, dtype=np.float32).reshape(2, 3)
    same(run1(UNBROADCAST_SRC, "rows", dy, np.zeros((2, 1), np.float32)), [[3], [12]], np.float32)
    same(run1(UNBROADCAST_SRC, "both", dy, np.zeros((1, 3), np.float32)), [[3, 5, 7]], np.float32)
    same(run1(UNBROADCAST_SRC, "both", dy, np.zeros((1, 1), np.float32)), [[15]], np.float32)
    same(run1(UNBROADCAST_SRC, "both", dy, np.zeros((2, 3), np.float32)), dy, np.float32)
    same(run1(UNBROADCAST_SRC, "to_scalar", dy, np.float32(0)), 15, np.float32)
    with pytest.raises(ir.ExecutionError, match="does not broadcast"):
        run(UNBROADCAST_SRC, "both", dy, np.zeros((2, 2), np.float32))
