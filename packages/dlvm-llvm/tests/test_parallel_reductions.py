"""Reductions along the outermost dimension (full reductions included) split over the thread
pool: each chunk folds into a private partial result and the partials are combined in chunk
order. Differential against the interpreter, below and above the size from which a region
is split, at 1, 2 and 8 threads (8: more threads than this machine's cores); float sums
within the float-sum bound of test_float_sums.py (|result − exact| ≤ ½ ulp(result) +
n·2^-53·Σ|xᵢ|, doubled here for the float64 reference's own error)."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.llvm.codegen.regions import PARALLEL_MIN

THREADS = (1, 2, 8)
# the split paths: at one thread a region is the loop nest every other test compiles
SPLIT = (2, 8)
SMALL = 96  # outer size of a region below PARALLEL_MIN elements
LARGE = PARALLEL_MIN // 8 * 2  # outer size of a <_ x 8> region twice PARALLEL_MIN elements

REDUCTIONS = """
func @whole: (<_ x 8 x T>, T) -> T {
'entry(%x: <_ x 8 x T>, %init: T):
  %r = reduce %x: <_ x 8 x T> by C init %init: T
  return %r: T
}
func @along0: (<_ x 8 x T>, T) -> <8 x T> {
'entry(%x: <_ x 8 x T>, %init: T):
  %r = reduce %x: <_ x 8 x T> by C init %init: T along 0
  return %r: <8 x T>
}
func @along0_3d: (<_ x 4 x 2 x T>, T) -> <4 x 2 x T> {
'entry(%x: <_ x 4 x 2 x T>, %init: T):
  %r = reduce %x: <_ x 4 x 2 x T> by C init %init: T along 0
  return %r: <4 x 2 x T>
}
func @whole_3d: (<_ x 4 x 2 x T>, T) -> T {
'entry(%x: <_ x 4 x 2 x T>, %init: T):
  %r = reduce %x: <_ x 4 x 2 x T> by C init %init: T
  return %r: T
}
"""

FUSED = """
!kernel
func @k: (<_ x 8 x T>, <1 x 8 x T>) -> (<_ x 8 x T>, <8 x T>, T, <_ x T>) {
'entry(%x: <_ x 8 x T>, %b: <1 x 8 x T>):
  %y = multiply %x: <_ x 8 x T>, %b: <1 x 8 x T>
  %c = reduce %y: <_ x 8 x T> by add init 0: T along 0
  %s = reduce %y: <_ x 8 x T> by add init 0: T
  %r = reduce %y: <_ x 8 x T> by add init 0: T along 1
  return (%y: <_ x 8 x T>, %c: <8 x T>, %s: T, %r: <_ x T>): (<_ x 8 x T>, <8 x T>, T, <_ x T>)
}
func @fused: (<_ x 8 x T>, <1 x 8 x T>) -> (<_ x 8 x T>, <8 x T>, T, <_ x T>) {
'entry(%x: <_ x 8 x T>, %b: <1 x 8 x T>):
  %o = apply @k(%x: <_ x 8 x T>, %b: <1 x 8 x T>) -> (<_ x 8 x T>, <8 x T>, T, <_ x T>)
  return %o: (<_ x 8 x T>, <8 x T>, T, <_ x T>)
}
!kernel
func @with_scalar: (<_ x 8 x T>, T) -> (T, T) {
'entry(%x: <_ x 8 x T>, %a: T):
  %h = multiply %a: T, 2: T
  %s = reduce %x: <_ x 8 x T> by add init 0: T
  return (%h: T, %s: T): (T, T)
}
func @scalar_beside: (<_ x 8 x T>, T) -> (T, T) {
'entry(%x: <_ x 8 x T>, %a: T):
  %o = apply @with_scalar(%x: <_ x 8 x T>, %a: T) -> (T, T)
  return %o: (T, T)
}
"""

UNBROADCAST = """
func @columns_like: (<_ x 8 x T>, <1 x 8 x T>) -> <1 x 8 x T> {
'entry(%x: <_ x 8 x T>, %like: <1 x 8 x T>):
  %r = unbroadcast %x: <_ x 8 x T> like %like: <1 x 8 x T>
  return %r: <1 x 8 x T>
}
"""

FLOATS = ("f16", "f32", "f64")
INTS = ("i32", "i64")
NUMPY = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32,
         "i64": np.int64, "bool": np.bool_}


@cache
def executables(text: str, threads: int) -> tuple[Any, Any]:
    """(llvm-cpu at `threads`, interp) of a program."""
    return (ir.compile(ir.parse(text), "llvm-cpu", cache=False, threads=threads),
            ir.compile(ir.parse(text), "interp"))


def reductions(dtype: str, combinator: str) -> str:
    return REDUCTIONS.replace("T", dtype).replace("by C", f"by {combinator}")


def data(dtype: str, combinator: str, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Values whose fold is exact where the combinator allows (products of ±1 and a few
    powers of two; small integers), so that only float sums need a bound."""
    rng = np.random.default_rng(seed)
    t = NUMPY[dtype]
    if dtype == "bool":
        return rng.random(shape) < (0.999 if combinator == "and" else 0.001)
    if combinator == "multiply":
        x = rng.choice([1, -1], size=shape)
        flat = x.reshape(-1)
        if flat.size:
            picks = rng.choice(flat.size, size=min(flat.size, 40), replace=False)
            flat[picks[:20]] *= 2
            if np.issubdtype(t, np.floating):
                flat[picks[20:]] = flat[picks[20:]] * 0.5
        return x.astype(t)
    if np.issubdtype(t, np.integer):
        return rng.integers(-1000, 1000, size=shape).astype(t)
    return rng.standard_normal(shape).astype(t)


def assert_sum_within_bound(got: np.ndarray, x: np.ndarray, init: float,
                            axis: int | None) -> None:
    wide = x.astype(np.float64)
    exact = np.sum(wide, axis=axis) + init
    magnitude = np.sum(np.abs(wide), axis=axis) + abs(init)
    n = x.size if axis is None else x.shape[axis]
    got = np.asarray(got)
    bound = 0.5 * np.spacing(np.abs(got)).astype(np.float64) + 2 * (n + 1) * 2.0**-53 * magnitude
    error = np.abs(got.astype(np.float64) - exact)
    assert np.all(error <= bound), (error.max(), bound.min())


def check(name: str, text: str, threads: int, args: list[object], dtype: str,
          combinator: str, axis: int | None) -> None:
    exe, ref = executables(text, threads)
    got, want = exe[name](*args), ref[name](*args)
    assert np.asarray(got).dtype == np.asarray(want).dtype
    assert np.shape(got) == np.shape(want)
    if combinator == "add" and dtype in FLOATS:
        assert_sum_within_bound(got, args[0], float(args[1]), axis)  # type: ignore[arg-type]
    else:
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(exe[name](*args), got)  # the same split: bit for bit


# Sums in every data type (float16/32 accumulate in float64); the other combinators in one
# float and one integer type: the split and the combining are the same code for each.
CASES = [*((d, "add") for d in (*FLOATS, *INTS)),
         *((d, c) for d in ("f32", "i64") for c in ("multiply", "min", "max"))]


@pytest.mark.parametrize("threads", SPLIT)
@pytest.mark.parametrize("outer", [SMALL, LARGE])
@pytest.mark.parametrize(("dtype", "combinator"), CASES)
def test_reductions_along_the_outermost_dimension(dtype: str, combinator: str, outer: int,
                                                  threads: int) -> None:
    text = reductions(dtype, combinator)
    init = NUMPY[dtype](1 if combinator == "multiply" else 3)
    x = data(dtype, combinator, (outer, 8))
    check("whole", text, threads, [x, init], dtype, combinator, None)
    check("along0", text, threads, [x, init], dtype, combinator, 0)
    x3 = x.reshape(outer, 4, 2)
    check("along0_3d", text, threads, [x3, init], dtype, combinator, 0)
    check("whole_3d", text, threads, [x3, init], dtype, combinator, None)


@pytest.mark.parametrize("threads", SPLIT)
@pytest.mark.parametrize("outer", [SMALL, LARGE])
@pytest.mark.parametrize("combinator", ["and", "or"])
def test_boolean_reductions(combinator: str, outer: int, threads: int) -> None:
    text = reductions("bool", combinator)
    for seed, init in ((0, True), (1, False)):
        x = data("bool", combinator, (outer, 8), seed)
        check("whole", text, threads, [x, np.bool_(init)], "bool", combinator, None)
        check("along0", text, threads, [x, np.bool_(init)], "bool", combinator, 0)
        everywhere = np.full((outer, 8), combinator == "and")
        check("whole", text, threads, [everywhere, np.bool_(init)], "bool", combinator, None)


@pytest.mark.parametrize("dtype", FLOATS)
def test_thread_counts_agree_within_the_float_bound(dtype: str) -> None:
    text = reductions(dtype, "add")
    x = data(dtype, "add", (LARGE * 4, 8), seed=3)
    init = NUMPY[dtype](0)
    results = [executables(text, t)[0]["whole"](x, init) for t in THREADS]
    for got in results:
        assert_sum_within_bound(got, x, 0.0, None)
    columns = [executables(text, t)[0]["along0"](x, init) for t in THREADS]
    for got in columns:
        assert_sum_within_bound(got, x, 0.0, 0)


def test_a_float32_sum_that_stagnates_in_float32_keeps_growing() -> None:
    # 2^24 then ones: float32 adds nothing one by one; float64 partials do
    text = reductions("f32", "add")
    x = np.ones((LARGE * 4, 8), np.float32)
    for threads in THREADS:
        exe = executables(text, threads)[0]
        assert exe["whole"](x, np.float32(2.0**24)) == np.float32(2.0**24 + x.size)


@pytest.mark.parametrize("threads", SPLIT)
@pytest.mark.parametrize("outer", [SMALL, LARGE])
@pytest.mark.parametrize("dtype", ["f32", "f64", "i32", "i64"])
def test_fused_element_wise_and_reductions(dtype: str, outer: int, threads: int) -> None:
    text = FUSED.replace("T", dtype)
    exe, ref = executables(text, threads)
    x = data(dtype, "add", (outer, 8))
    b = data(dtype, "add", (1, 8), seed=1)
    y, c, s, r = exe["fused"](x, b)
    wy, wc, ws, wr = ref["fused"](x, b)
    np.testing.assert_array_equal(y, wy)
    if dtype.startswith("f"):
        product = x.astype(np.float64) * b
        assert_sum_within_bound(c, product.astype(NUMPY[dtype]), 0.0, 0)
        assert_sum_within_bound(s, product.astype(NUMPY[dtype]), 0.0, None)
        np.testing.assert_allclose(r, wr, rtol=1e-5 if dtype == "f32" else 1e-12, atol=1e-3)
    else:
        np.testing.assert_array_equal(c, wc)
        np.testing.assert_array_equal(s, ws)
        np.testing.assert_array_equal(r, wr)
    h, total = exe["scalar_beside"](x, NUMPY[dtype](5))
    wh, wtotal = ref["scalar_beside"](x, NUMPY[dtype](5))
    assert h == wh
    if dtype.startswith("f"):
        assert_sum_within_bound(total, x, 0.0, None)
    else:
        assert total == wtotal


@pytest.mark.parametrize("threads", SPLIT)
@pytest.mark.parametrize("outer", [SMALL, LARGE])
@pytest.mark.parametrize("dtype", FLOATS)
def test_unbroadcast_to_one_row(dtype: str, outer: int, threads: int) -> None:
    exe, ref = executables(UNBROADCAST.replace("T", dtype), threads)
    x = data(dtype, "add", (outer, 8))
    like = np.zeros((1, 8), NUMPY[dtype])
    got = exe["columns_like"](x, like)
    assert got.shape == (1, 8) and got.dtype == ref["columns_like"](x, like).dtype
    assert_sum_within_bound(got[0], x, 0.0, 0)


@pytest.mark.parametrize("threads", SPLIT)
@pytest.mark.parametrize(("dtype", "combinator"), [("f32", "add"), ("f16", "max"),
                                                   ("i64", "multiply"), ("i32", "min")])
def test_empty_tensors_give_the_init(dtype: str, combinator: str, threads: int) -> None:
    text = reductions(dtype, combinator)
    init = NUMPY[dtype](7)
    x = np.zeros((0, 8), NUMPY[dtype])
    check("whole", text, threads, [x, init], dtype, combinator, None)
    check("along0", text, threads, [x, init], dtype, combinator, 0)
    check("along0_3d", text, threads, [x.reshape(0, 4, 2), init], dtype, combinator, 0)
