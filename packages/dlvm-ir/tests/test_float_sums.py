"""Float sums on every target: `reduce … by add` and `unbroadcast` of float16 and float32
accumulate in float64 and round once (`dlvm.ir.runtime.sum_dtype`), so a long sum keeps
growing — float32 stops at 2^24 when it adds ones one by one — and every target is within
the same bound of the exact sum: |result − exact| ≤ ½ ulp(result) + n·2^-53·Σ|xᵢ|.

The sums that would stagnate in the data type itself are cheap to build: a large first term
(or init) followed by ones adds nothing in float32 one by one (2^24 + 1 rounds to 2^24),
whatever the order a target folds in. The 10^8-element sums build their ones from a
one-element argument (`x + 0.5` broadcast), which the compiled targets fuse into the
reduction without materializing them.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from dlvm.ir.parser import parse
from dlvm.ir.testing import compile_for_test, run1, target_under_test

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")

BIG = 2.0**24  # float32 adds nothing to it one by one: 2^24 + 1 rounds to 2^24

SUMS = """
func @along0: (<_ x 3 x f32>, f32) -> <3 x f32> {
'entry(%x: <_ x 3 x f32>, %init: f32):
  %r = reduce %x: <_ x 3 x f32> by add init %init: f32 along 0
  return %r: <3 x f32>
}
func @along1: (<3 x _ x f32>, f32) -> <3 x f32> {
'entry(%x: <3 x _ x f32>, %init: f32):
  %r = reduce %x: <3 x _ x f32> by add init %init: f32 along 1
  return %r: <3 x f32>
}
func @whole: (<_ x 3 x f32>, f32) -> f32 {
'entry(%x: <_ x 3 x f32>, %init: f32):
  %r = reduce %x: <_ x 3 x f32> by add init %init: f32
  return %r: f32
}
!kernel
func @sum_then_halve: (<_ x 3 x f32>) -> <3 x f32> {
'entry(%x: <_ x 3 x f32>):
  %r = reduce %x: <_ x 3 x f32> by add init 0: f32 along 0
  %h = multiply %r: <3 x f32>, 0.5: f32
  return %h: <3 x f32>
}
func @half_sums: (<_ x 3 x f32>) -> <3 x f32> {
'entry(%x: <_ x 3 x f32>):
  %h = apply @sum_then_halve(%x: <_ x 3 x f32>) -> <3 x f32>
  return %h: <3 x f32>
}
func @columns_like: (<_ x 3 x f32>, <1 x 3 x f32>) -> <1 x 3 x f32> {
'entry(%x: <_ x 3 x f32>, %like: <1 x 3 x f32>):
  %r = unbroadcast %x: <_ x 3 x f32> like %like: <1 x 3 x f32>
  return %r: <1 x 3 x f32>
}
func @rows_like: (<3 x _ x f32>, <3 x 1 x f32>) -> <3 x 1 x f32> {
'entry(%x: <3 x _ x f32>, %like: <3 x 1 x f32>):
  %r = unbroadcast %x: <3 x _ x f32> like %like: <3 x 1 x f32>
  return %r: <3 x 1 x f32>
}
func @all_like: (<_ x 3 x f32>, f32) -> f32 {
'entry(%x: <_ x 3 x f32>, %like: f32):
  %r = unbroadcast %x: <_ x 3 x f32> like %like: f32
  return %r: f32
}
func @half: (<_ x f16>, f16) -> f16 {
'entry(%x: <_ x f16>, %init: f16):
  %r = reduce %x: <_ x f16> by add init %init: f16
  return %r: f16
}
func @double: (<_ x f64>, f64) -> f64 {
'entry(%x: <_ x f64>, %init: f64):
  %r = reduce %x: <_ x f64> by add init %init: f64
  return %r: f64
}
"""


def big_then_ones(rows: int, cols: int = 3) -> np.ndarray:
    """Row 0 is 2^24, the others ones: the exact column sums are 2^24 + rows − 1."""
    x = np.ones((rows, cols), np.float32)
    x[0] = BIG
    return x


@pytest.mark.parametrize("rows", [3, 1001])
def test_a_sum_along_the_outer_axis_keeps_growing_past_2_to_the_24(rows: int) -> None:
    out = run1(SUMS, "along0", big_then_ones(rows), np.float32(0))
    assert out.dtype == np.float32 and out.tolist() == [BIG + rows - 1] * 3


def test_a_sum_along_the_inner_axis_keeps_growing_past_2_to_the_24() -> None:
    x = np.ascontiguousarray(big_then_ones(1001).T)
    assert run1(SUMS, "along1", x, np.float32(0)).tolist() == [BIG + 1000] * 3


def test_a_large_init_does_not_swallow_the_terms() -> None:
    ones = np.ones((1000, 3), np.float32)
    assert run1(SUMS, "along0", ones, np.float32(BIG)).tolist() == [BIG + 1000] * 3
    assert run1(SUMS, "along1", ones.T.copy(), np.float32(BIG)).tolist() == [BIG + 1000] * 3
    assert run1(SUMS, "whole", ones, np.float32(BIG)).tolist() == BIG + 3000


def test_a_sum_used_inside_a_kernel_keeps_growing() -> None:
    # the kernel's multiply reads the sum where it is computed (a region in two parts on
    # llvm-cpu, a fold inside the multiply's kernel on nvptx)
    assert run1(SUMS, "half_sums", big_then_ones(1001)).tolist() == [(BIG + 1000) / 2] * 3


@pytest.mark.parametrize("fn, like, expected", [
    ("columns_like", np.zeros((1, 3), np.float32), [[BIG + 1000] * 3]),
    ("all_like", np.float32(0), 3 * (BIG + 1000)),
])
def test_unbroadcast_sums_keep_growing(fn: str, like: np.ndarray, expected: object) -> None:
    assert run1(SUMS, fn, big_then_ones(1001), like).tolist() == expected


def test_unbroadcast_along_the_inner_axis_keeps_growing() -> None:
    x = np.ascontiguousarray(big_then_ones(1001).T)
    out = run1(SUMS, "rows_like", x, np.zeros((3, 1), np.float32))
    assert out.tolist() == [[BIG + 1000]] * 3


def test_a_float16_sum_keeps_growing_past_2048() -> None:
    # float16 adds nothing to 2048 one by one (its spacing there is 2)
    out = run1(SUMS, "half", np.ones(3000, np.float16), np.float16(0))
    assert out.dtype == np.float16 and out.tolist() == 3000
    assert run1(SUMS, "half", np.ones(100, np.float16), np.float16(2048)).tolist() == 2148


def test_a_float16_sum_past_its_range_is_infinite() -> None:
    assert run1(SUMS, "half", np.full(3, 30000, np.float16), np.float16(0)).tolist() == math.inf


def within_the_sum_bound(got: float, terms: np.ndarray, init: float, dtype: type) -> None:
    """|got − exact| ≤ ½ ulp(got) + n·2^-53·Σ|x|, the exact sum from `math.fsum`."""
    values = [float(init), *terms.astype(np.float64).ravel().tolist()]
    exact = math.fsum(values)
    bound = float(np.spacing(dtype(abs(got)))) / 2 + len(values) * 2.0**-53 * math.fsum(
        abs(v) for v in values)
    assert abs(got - exact) <= bound, (got, exact, bound)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_float_sums_are_within_the_bound_of_the_exact_sum(dtype: type) -> None:
    rng = np.random.default_rng(7)
    n = 20_000
    # terms of mixed signs and magnitudes: cancellation and a wide range
    scale = 1.0 if dtype is np.float16 else 1e4
    x = (rng.standard_normal(n) * scale ** rng.random(n)).astype(dtype)
    if dtype is np.float16:
        within_the_sum_bound(float(run1(SUMS, "half", x, dtype(3))), x, 3.0, dtype)
        return
    grid = x.reshape(-1, 4)[:, :3].copy()
    for fn, arg in (("along0", grid), ("along1", np.ascontiguousarray(grid.T))):
        out = run1(SUMS, fn, arg, dtype(0.25))
        for k in range(3):
            column = grid[:, k]
            within_the_sum_bound(float(out[k]), column, 0.25, dtype)
    within_the_sum_bound(float(run1(SUMS, "whole", grid, dtype(-2))), grid, -2.0, dtype)


def test_a_float64_sum_is_within_the_bound_of_the_exact_sum() -> None:
    rng = np.random.default_rng(8)
    x = rng.standard_normal(20_000) * 1e6
    within_the_sum_bound(float(run1(SUMS, "double", x, np.float64(1))), x, 1.0, np.float64)


# ---------------------------------------------------------------- 10^7 and 10^8 ones

def ones_text(n: int) -> str:
    return f"""module "ones"
stage optimizable
func @count: (<1 x f32>) -> f32 {{
'entry(%half: <1 x f32>):
  %ones = add %half: <1 x f32>, 0.5: <{n} x f32>
  %s = reduce %ones: <{n} x f32> by add init 0: f32
  return %s: f32
}}
"""


def count_ones(n: int) -> float:
    """A fresh executable (its cached literals go with it), called once."""
    exe = compile_for_test(parse(ones_text(n)))
    (out,) = exe.call("count", np.array([0.5], np.float32))
    assert out.dtype == np.float32
    return float(out)


def test_a_float32_sum_of_2e7_ones_is_2e7() -> None:
    assert count_ones(20_000_000) == 20_000_000


def test_a_float32_sum_of_1e8_ones_is_1e8() -> None:
    if target_under_test() == "interp" and not os.environ.get("DLVM_SLOW_TESTS"):
        pytest.skip("the interpreter materializes 10^8 floats twice (seconds, 0.8 GB): set "
                    "DLVM_SLOW_TESTS=1")
    assert count_ones(100_000_000) == 100_000_000
