"""Reference interpreter: element-wise instructions (unary, binary, compare, select, casts).

Every expected value is computed by hand or with the `math` module, never by
the numpy function the implementation calls.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import run, run1

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")


def check(out: np.ndarray, expected: object, dtype: object, rtol: float = 0.0,
          atol: float = 0.0) -> None:
    """Equal within `rtol` and `atol`; exactly by default, for results that IEEE arithmetic
    gives exactly (small integers and halves, rounding, sign changes)."""
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    exp = np.asarray(expected, dtype=np.float64 if out.dtype.kind == "f" else None)
    assert out.shape == exp.shape, (out.shape, exp.shape)
    if out.dtype.kind == "f":
        np.testing.assert_allclose(out.astype(np.float64), exp, rtol=rtol, atol=atol)
    else:
        assert out.tolist() == exp.tolist()


# ---------------------------------------------------------------- unary ops

UNARY_FLOAT_OPS = [
    "negate", "sign", "square", "sqrt", "rsqrt", "exp", "log", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "round", "rint", "ceil", "floor", "lgamma",
    "digamma", "erf", "erfc",
]

# One function per float type, applying each unary op to the same <4 x fT> argument
# and returning all 24 results in the order of UNARY_FLOAT_OPS.
UNARY_SRC = """
module "unary"
stage raw

func @u32: (<4 x f32>) -> (<4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
                          <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
                          <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
                          <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>) {
'entry(%x: <4 x f32>):
    %v0 = negate %x: <4 x f32>
    %v1 = sign %x: <4 x f32>
    %v2 = square %x: <4 x f32>
    %v3 = sqrt %x: <4 x f32>
    %v4 = rsqrt %x: <4 x f32>
    %v5 = exp %x: <4 x f32>
    %v6 = log %x: <4 x f32>
    %v7 = sin %x: <4 x f32>
    %v8 = cos %x: <4 x f32>
    %v9 = tan %x: <4 x f32>
    %v10 = asin %x: <4 x f32>
    %v11 = acos %x: <4 x f32>
    %v12 = atan %x: <4 x f32>
    %v13 = sinh %x: <4 x f32>
    %v14 = cosh %x: <4 x f32>
    %v15 = tanh %x: <4 x f32>
    %v16 = round %x: <4 x f32>
    %v17 = rint %x: <4 x f32>
    %v18 = ceil %x: <4 x f32>
    %v19 = floor %x: <4 x f32>
    %v20 = lgamma %x: <4 x f32>
    %v21 = digamma %x: <4 x f32>
    %v22 = erf %x: <4 x f32>
    %v23 = erfc %x: <4 x f32>
    %t = literal (%v0: <4 x f32>, %v1: <4 x f32>, %v2: <4 x f32>, %v3: <4 x f32>, %v4: <4 x f32>,
                  %v5: <4 x f32>, %v6: <4 x f32>, %v7: <4 x f32>, %v8: <4 x f32>, %v9: <4 x f32>,
                  %v10: <4 x f32>, %v11: <4 x f32>, %v12: <4 x f32>, %v13: <4 x f32>,
                  %v14: <4 x f32>, %v15: <4 x f32>, %v16: <4 x f32>, %v17: <4 x f32>,
                  %v18: <4 x f32>, %v19: <4 x f32>, %v20: <4 x f32>, %v21: <4 x f32>,
                  %v22: <4 x f32>, %v23: <4 x f32>): (
           <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
           <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
           <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
           <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>)
    return %t: (<4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
                <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
                <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
                <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>)
}

func @u64: (<4 x f64>) -> (<4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>,
                          <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>,
                          <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>,
                          <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>) {
'entry(%x: <4 x f64>):
    %v0 = negate %x: <4 x f64>
    %v1 = sign %x: <4 x f64>
    %v2 = square %x: <4 x f64>
    %v3 = sqrt %x: <4 x f64>
    %v4 = rsqrt %x: <4 x f64>
    %v5 = exp %x: <4 x f64>
    %v6 = log %x: <4 x f64>
    %v7 = sin %x: <4 x f64>
    %v8 = cos %x: <4 x f64>
    %v9 = tan %x: <4 x f64>
    %v10 = asin %x: <4 x f64>
    %v11 = acos %x: <4 x f64>
    %v12 = atan %x: <4 x f64>
    %v13 = sinh %x: <4 x f64>
    %v14 = cosh %x: <4 x f64>
    %v15 = tanh %x: <4 x f64>
    %v16 = round %x: <4 x f64>
    %v17 = rint %x: <4 x f64>
    %v18 = ceil %x: <4 x f64>
    %v19 = floor %x: <4 x f64>
    %v20 = lgamma %x: <4 x f64>
    %v21 = digamma %x: <4 x f64>
    %v22 = erf %x: <4 x f64>
    %v23 = erfc %x: <4 x f64>
    %t = literal (%v0: <4 x f64>, %v1: <4 x f64>, %v2: <4 x f64>, %v3: <4 x f64>, %v4: <4 x f64>,
                  %v5: <4 x f64>, %v6: <4 x f64>, %v7: <4 x f64>, %v8: <4 x f64>, %v9: <4 x f64>,
                  %v10: <4 x f64>, %v11: <4 x f64>, %v12: <4 x f64>, %v13: <4 x f64>,
                  %v14: <4 x f64>, %v15: <4 x f64>, %v16: <4 x f64>, %v17: <4 x f64>,
                  %v18: <4 x f64>, %v19: <4 x f64>, %v20: <4 x f64>, %v21: <4 x f64>,
                  %v22: <4 x f64>, %v23: <4 x f64>): (
           <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>,
           <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>,
           <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>,
           <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>)
    return %t: (<4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>,
                <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>,
                <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>,
                <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>, <4 x f64>)
}
"""

# In the domain of every op (asin/acos need |x| <= 1; log, sqrt, lgamma, digamma x > 0).
UNARY_X = [0.25, 0.5, 0.75, 1.0]

EULER_GAMMA = 0.57721566490153286061
# Closed forms of the digamma function at the quarter points.
_PSI_BASE = {
    0.25: -EULER_GAMMA - math.pi / 2 - 3 * math.log(2),
    0.5: -EULER_GAMMA - 2 * math.log(2),
    0.75: -EULER_GAMMA + math.pi / 2 - 3 * math.log(2),
    1.0: -EULER_GAMMA,
}


def digamma_ref(x: float) -> float:
    """ψ(x) for a multiple x of 1/4 that is not a pole (0, -1, -2, …), from the closed
    forms at 1/4, 1/2, 3/4 and 1 and the recurrence ψ(x+1) = ψ(x) + 1/x."""
    n = math.floor(x)
    frac = x - n
    if frac == 0:
        frac, n = 1.0, n - 1
    acc = _PSI_BASE[frac]
    # walk from frac to x = frac + n
    y = frac
    while n > 0:
        acc += 1 / y
        y += 1
        n -= 1
    while n < 0:
        y -= 1
        acc -= 1 / y
        n += 1
    return acc


def round_half_away(v: float) -> float:
    return math.copysign(math.floor(abs(v) + 0.5), v) if abs(v) < 2**52 else v


def sign_ref(v: float) -> float:
    return (v > 0) - (v < 0)


UNARY_REF = {
    "negate": lambda v: -v,
    "sign": sign_ref,
    "square": lambda v: v * v,
    "sqrt": math.sqrt,
    "rsqrt": lambda v: 1 / math.sqrt(v),
    "exp": math.exp,
    "log": math.log,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "sinh": math.sinh,
    "cosh": math.cosh,
    "tanh": math.tanh,
    "round": round_half_away,
    "rint": lambda v: float(round(v)),  # Python's round is half-to-even
    "ceil": lambda v: float(math.ceil(v)),
    "floor": lambda v: float(math.floor(v)),
    "lgamma": math.lgamma,
    "digamma": digamma_ref,
    "erf": math.erf,
    "erfc": math.erfc,
}


def test_digamma_reference_is_right() -> None:
    # ψ(2) = 1 - EULER_GAMMA and ψ(-0.5) = ψ(1.5) (the reflection term vanishes at half integers)
    assert digamma_ref(2.0) == pytest.approx(1 - EULER_GAMMA, rel=1e-15)
    assert digamma_ref(-0.5) == pytest.approx(0.03648997397857652, rel=1e-12)


@pytest.mark.parametrize("op", UNARY_FLOAT_OPS)
@pytest.mark.parametrize(("fn", "dtype", "rtol"), [("u32", np.float32, 2e-6),
                                                   ("u64", np.float64, 1e-13)])
def test_unary_float(op: str, fn: str, dtype: type, rtol: float) -> None:
    outs = run(UNARY_SRC, fn, np.array(UNARY_X, dtype))
    assert len(outs) == len(UNARY_FLOAT_OPS)
    out = outs[UNARY_FLOAT_OPS.index(op)]
    expected = [UNARY_REF[op](v) for v in UNARY_X]
    check(out, expected, dtype, rtol=rtol, atol=rtol * 1e-2)


SIGNED_SRC = """
func @f: (<8 x f64>) -> (<8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>,
                        <8 x f64>) {
'entry(%x: <8 x f64>):
    %v0 = sign %x: <8 x f64>
    %v1 = round %x: <8 x f64>
    %v2 = rint %x: <8 x f64>
    %v3 = ceil %x: <8 x f64>
    %v4 = floor %x: <8 x f64>
    %v5 = negate %x: <8 x f64>
    %v6 = square %x: <8 x f64>
    %t = literal (%v0: <8 x f64>, %v1: <8 x f64>, %v2: <8 x f64>, %v3: <8 x f64>,
                  %v4: <8 x f64>, %v5: <8 x f64>, %v6: <8 x f64>): (
        <8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>)
    return %t: (<8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>, <8 x f64>)
}
"""


def test_unary_rounding_and_sign_on_negative_values() -> None:
    x = [-2.5, -1.5, -0.5, 0.0, 0.5, 1.5, 2.5, 3.7]
    sign, rnd, rint, ceil, floor, neg, sq = run(SIGNED_SRC, "f", np.array(x))
    check(sign, [-1, -1, -1, 0, 1, 1, 1, 1], np.float64)
    check(rnd, [-3, -2, -1, 0, 1, 2, 3, 4], np.float64)  # halves away from zero
    check(rint, [-2, -2, 0, 0, 0, 2, 2, 4], np.float64)  # halves to even
    check(ceil, [-2, -1, 0, 0, 1, 2, 3, 4], np.float64)
    check(floor, [-3, -2, -1, 0, 0, 1, 2, 3], np.float64)
    check(neg, [2.5, 1.5, 0.5, 0.0, -0.5, -1.5, -2.5, -3.7], np.float64)
    check(sq, [6.25, 2.25, 0.25, 0.0, 0.25, 2.25, 6.25, 3.7 * 3.7], np.float64, rtol=1e-15)


LGAMMA_SRC = """
func @f: (<6 x f64>) -> <6 x f64> {
'entry(%x: <6 x f64>):
    %r = lgamma %x: <6 x f64>
    return %r: <6 x f64>
}
func @g: (<3 x f32>) -> <3 x f32> {
'entry(%x: <3 x f32>):
    %r = lgamma %x: <3 x f32>
    return %r: <3 x f32>
}
"""


def test_lgamma_of_negative_non_integers() -> None:
    # log|Γ(x)| is defined for negative non-integers
    x = [-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]
    check(run1(LGAMMA_SRC, "f", np.array(x)), [math.lgamma(v) for v in x], np.float64,
          rtol=1e-13)


def test_lgamma_at_the_poles_is_infinite() -> None:
    # Γ has poles at 0, -1, -2, …: log|Γ| is +inf there (math.lgamma raises instead)
    out = run1(LGAMMA_SRC, "f", np.array([0.0, -1.0, -2.0, 1.0, 2.0, 3.0]))
    assert out.dtype == np.float64
    assert out[:3].tolist() == [math.inf, math.inf, math.inf]
    np.testing.assert_allclose(out[3:], [0.0, 0.0, math.log(2.0)], rtol=1e-15, atol=1e-15)
    out32 = run1(LGAMMA_SRC, "g", np.array([0.0, -3.0, 1.0], np.float32))
    assert out32.dtype == np.float32 and out32[:2].tolist() == [math.inf, math.inf]
    assert abs(float(out32[2])) < 1e-7


def test_round_is_exact_near_half_and_for_large_values() -> None:
    # floor(|x| + 0.5) is inexact here: 0.49999999999999994 + 0.5 rounds up to 1.0 and
    # 2**52 + 1 + 0.5 rounds to 2**52 + 2.
    src = """
func @f: (<3 x f64>) -> <3 x f64> {
'entry(%x: <3 x f64>):
    %r = round %x: <3 x f64>
    return %r: <3 x f64>
}
"""
    x = np.array([0.49999999999999994, 2.0**52 + 1, -(2.0**52 + 1)])
    out = run1(src, "f", x)
    assert out.tolist() == [0.0, 2.0**52 + 1, -(2.0**52 + 1)]


DIGAMMA_SRC = """
func @f: (<10 x f64>) -> <10 x f64> {
'entry(%x: <10 x f64>):
    %r = digamma %x: <10 x f64>
    return %r: <10 x f64>
}
func @g: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %r = digamma %x: <4 x f32>
    return %r: <4 x f32>
}
"""


def test_digamma_negative_large_and_f32() -> None:
    x = [-2.5, -1.75, -0.5, -0.25, 0.25, 3.0, 5.5, 10.0, 30.25, 100.0]
    out = run1(DIGAMMA_SRC, "f", np.array(x))
    check(out, [digamma_ref(v) for v in x], np.float64, rtol=1e-12, atol=1e-13)
    x32 = [-3.5, 0.75, 7.0, 12.25]
    out32 = run1(DIGAMMA_SRC, "g", np.array(x32, np.float32))
    check(out32, [digamma_ref(v) for v in x32], np.float32, rtol=1e-5)


SPECIAL_SRC = """
func @f: (<5 x f64>) -> (<5 x f64>, <5 x f64>, <5 x f64>) {
'entry(%x: <5 x f64>):
    %v0 = lgamma %x: <5 x f64>
    %v1 = erf %x: <5 x f64>
    %v2 = erfc %x: <5 x f64>
    %t = literal (%v0: <5 x f64>, %v1: <5 x f64>, %v2: <5 x f64>): (<5 x f64>, <5 x f64>, <5 x f64>)
    return %t: (<5 x f64>, <5 x f64>, <5 x f64>)
}
"""


def test_lgamma_erf_erfc_against_math() -> None:
    x = [-3.3, 0.1, 0.5, 4.0, 12.5]
    lg, erf, erfc = run(SPECIAL_SRC, "f", np.array(x))
    check(lg, [math.lgamma(v) for v in x], np.float64, rtol=1e-13)
    check(erf, [math.erf(v) for v in x], np.float64, rtol=1e-13)
    check(erfc, [math.erfc(v) for v in x], np.float64, rtol=1e-13, atol=1e-300)
    # known constants: lgamma(1/2) = log √π, lgamma(4) = log 6
    assert lg[2] == pytest.approx(math.log(math.sqrt(math.pi)), rel=1e-14)
    assert lg[3] == pytest.approx(math.log(6.0), rel=1e-14)


INT_UNARY_SRC = """
func @f: (<4 x i32>) -> (<4 x i32>, <4 x i32>, <4 x i32>) {
'entry(%x: <4 x i32>):
    %v0 = negate %x: <4 x i32>
    %v1 = sign %x: <4 x i32>
    %v2 = square %x: <4 x i32>
    %t = literal (%v0: <4 x i32>, %v1: <4 x i32>, %v2: <4 x i32>): (<4 x i32>, <4 x i32>, <4 x i32>)
    return %t: (<4 x i32>, <4 x i32>, <4 x i32>)
}
func @n: (<4 x bool>) -> <4 x bool> {
'entry(%m: <4 x bool>):
    %r = not %m: <4 x bool>
    return %r: <4 x bool>
}
"""


def test_unary_numeric_on_integers_and_not() -> None:
    neg, sign, sq = run(INT_UNARY_SRC, "f", np.array([-3, 0, 2, 7], np.int32))
    check(neg, [3, 0, -2, -7], np.int32)
    check(sign, [-1, 0, 1, 1], np.int32)
    check(sq, [9, 0, 4, 49], np.int32)
    check(run1(INT_UNARY_SRC, "n", np.array([True, False, False, True])),
          [False, True, True, False], np.bool_)


# ---------------------------------------------------------------- binary ops

BINARY_OPS = ["add", "subtract", "multiply", "divide", "min", "max", "truncateDivide",
              "floorDivide", "modulo", "power"]

BINARY_F32_SRC = """
func @f: (<4 x f32>, <4 x f32>) -> (<4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
                                    <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>) {
'entry(%a: <4 x f32>, %b: <4 x f32>):
    %v0 = add %a: <4 x f32>, %b: <4 x f32>
    %v1 = subtract %a: <4 x f32>, %b: <4 x f32>
    %v2 = multiply %a: <4 x f32>, %b: <4 x f32>
    %v3 = divide %a: <4 x f32>, %b: <4 x f32>
    %v4 = min %a: <4 x f32>, %b: <4 x f32>
    %v5 = max %a: <4 x f32>, %b: <4 x f32>
    %v6 = truncateDivide %a: <4 x f32>, %b: <4 x f32>
    %v7 = floorDivide %a: <4 x f32>, %b: <4 x f32>
    %v8 = modulo %a: <4 x f32>, %b: <4 x f32>
    %v9 = power %a: <4 x f32>, %b: <4 x f32>
    %t = literal (%v0: <4 x f32>, %v1: <4 x f32>, %v2: <4 x f32>, %v3: <4 x f32>, %v4: <4 x f32>,
                  %v5: <4 x f32>, %v6: <4 x f32>, %v7: <4 x f32>, %v8: <4 x f32>,
                  %v9: <4 x f32>): (
        <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
        <4 x f32>, <4 x f32>)
    return %t: (<4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>, <4 x f32>,
                <4 x f32>, <4 x f32>, <4 x f32>)
}
"""

BINARY_I32_SRC = """
func @f: (<4 x i32>, <4 x i32>) -> (<4 x i32>, <4 x i32>, <4 x i32>, <4 x i32>, <4 x i32>,
                                    <4 x i32>, <4 x i32>, <4 x i32>, <4 x i32>) {
'entry(%a: <4 x i32>, %b: <4 x i32>):
    %v0 = add %a: <4 x i32>, %b: <4 x i32>
    %v1 = subtract %a: <4 x i32>, %b: <4 x i32>
    %v2 = multiply %a: <4 x i32>, %b: <4 x i32>
    %v3 = divide %a: <4 x i32>, %b: <4 x i32>
    %v4 = min %a: <4 x i32>, %b: <4 x i32>
    %v5 = max %a: <4 x i32>, %b: <4 x i32>
    %v6 = truncateDivide %a: <4 x i32>, %b: <4 x i32>
    %v7 = floorDivide %a: <4 x i32>, %b: <4 x i32>
    %v8 = modulo %a: <4 x i32>, %b: <4 x i32>
    %t = literal (%v0: <4 x i32>, %v1: <4 x i32>, %v2: <4 x i32>, %v3: <4 x i32>,
                  %v4: <4 x i32>, %v5: <4 x i32>, %v6: <4 x i32>, %v7: <4 x i32>,
                  %v8: <4 x i32>): (<4 x i32>, <4 x i32>, <4 x i32>, <4 x i32>, <4 x i32>,
                                    <4 x i32>, <4 x i32>, <4 x i32>, <4 x i32>)
    return %t: (<4 x i32>, <4 x i32>, <4 x i32>, <4 x i32>, <4 x i32>, <4 x i32>, <4 x i32>,
                <4 x i32>, <4 x i32>)
}
func @power: (<4 x i32>, <4 x i32>) -> <4 x i32> {
'entry(%a: <4 x i32>, %b: <4 x i32>):
    %r = power %a: <4 x i32>, %b: <4 x i32>
    return %r: <4 x i32>
}
func @power64: (i64) -> i64 {
'entry(%b: i64):
    %r = power 3: i64, %b: i64
    return %r: i64
}
"""

F_A = [7.5, -7.5, 7.5, -7.5]
F_B = [2.0, 2.0, -2.0, -2.0]
FLOAT_EXPECTED = {
    "add": [9.5, -5.5, 5.5, -9.5],
    "subtract": [5.5, -9.5, 9.5, -5.5],
    "multiply": [15.0, -15.0, -15.0, 15.0],
    "divide": [3.75, -3.75, -3.75, 3.75],
    "min": [2.0, -7.5, -2.0, -7.5],
    "max": [7.5, 2.0, 7.5, -2.0],
    "truncateDivide": [3.0, -3.0, -3.0, 3.0],
    "floorDivide": [3.0, -4.0, -4.0, 3.0],
    "modulo": [1.5, -1.5, 1.5, -1.5],  # fmod: the sign of the dividend
    "power": [56.25, 56.25, 1 / 56.25, 1 / 56.25],
}

I_A = [7, -7, 7, -7]
I_B = [2, 2, -2, -2]
INT_EXPECTED = {
    "add": [9, -5, 5, -9],
    "subtract": [5, -9, 9, -5],
    "multiply": [14, -14, -14, 14],
    "divide": [3, -3, -3, 3],  # truncates toward zero
    "min": [2, -7, -2, -7],
    "max": [7, 2, 7, -2],
    "truncateDivide": [3, -3, -3, 3],
    "floorDivide": [3, -4, -4, 3],
    "modulo": [1, -1, 1, -1],
}


@pytest.mark.parametrize("op", BINARY_OPS)
def test_binary_f32(op: str) -> None:
    outs = run(BINARY_F32_SRC, "f", np.array(F_A, np.float32), np.array(F_B, np.float32))
    check(outs[BINARY_OPS.index(op)], FLOAT_EXPECTED[op], np.float32, rtol=1e-6)


@pytest.mark.parametrize("op", BINARY_OPS[:-1])
def test_binary_i32(op: str) -> None:
    outs = run(BINARY_I32_SRC, "f", np.array(I_A, np.int32), np.array(I_B, np.int32))
    assert len(outs) == 9
    check(outs[BINARY_OPS.index(op)], INT_EXPECTED[op], np.int32)


def test_integer_power() -> None:
    a = np.array([2, 3, -2, 5], np.int32)
    b = np.array([10, 0, 3, 1], np.int32)
    check(run1(BINARY_I32_SRC, "power", a, b), [1024, 1, -8, 5], np.int32)
    check(run1(BINARY_I32_SRC, "power64", np.int64(39)), 3**39, np.int64)


def test_integer_power_with_negative_exponent_is_an_error() -> None:
    with pytest.raises(ir.ExecutionError):
        run(BINARY_I32_SRC, "power", np.array([2, 2, 2, 2], np.int32),
            np.array([1, 1, -1, 1], np.int32))


INT_DIV_SRC = """
func @divide: (<3 x i32>, <3 x i32>) -> <3 x i32> {
'entry(%a: <3 x i32>, %b: <3 x i32>):
    %r = divide %a: <3 x i32>, %b: <3 x i32>
    return %r: <3 x i32>
}
func @truncateDivide: (<3 x i32>, <3 x i32>) -> <3 x i32> {
'entry(%a: <3 x i32>, %b: <3 x i32>):
    %r = truncateDivide %a: <3 x i32>, %b: <3 x i32>
    return %r: <3 x i32>
}
func @floorDivide: (<3 x i32>, <3 x i32>) -> <3 x i32> {
'entry(%a: <3 x i32>, %b: <3 x i32>):
    %r = floorDivide %a: <3 x i32>, %b: <3 x i32>
    return %r: <3 x i32>
}
func @modulo: (<3 x i32>, <3 x i32>) -> <3 x i32> {
'entry(%a: <3 x i32>, %b: <3 x i32>):
    %r = modulo %a: <3 x i32>, %b: <3 x i32>
    return %r: <3 x i32>
}
func @scalar_divide: (i64) -> i64 {
'entry(%b: i64):
    %r = divide 10: i64, %b: i64
    return %r: i64
}
"""


@pytest.mark.parametrize("fn", ["divide", "truncateDivide", "floorDivide", "modulo"])
def test_integer_division_by_zero_is_an_error(fn: str) -> None:
    a = np.array([1, 2, 3], np.int32)
    # fine without a zero divisor
    assert run1(INT_DIV_SRC, fn, a, np.array([1, 1, 1], np.int32)).tolist() == (
        [0, 0, 0] if fn == "modulo" else [1, 2, 3])
    with pytest.raises(ir.ExecutionError):
        run(INT_DIV_SRC, fn, a, np.array([1, 0, 1], np.int32))


def test_scalar_integer_division_by_zero_is_an_error() -> None:
    assert run1(INT_DIV_SRC, "scalar_divide", np.int64(-3)).tolist() == -3
    with pytest.raises(ir.ExecutionError):
        run(INT_DIV_SRC, "scalar_divide", np.int64(0))


FLOAT_DIV_SRC = """
func @f: (<3 x f64>, <3 x f64>) -> <3 x f64> {
'entry(%a: <3 x f64>, %b: <3 x f64>):
    %r = divide %a: <3 x f64>, %b: <3 x f64>
    return %r: <3 x f64>
}
"""


def test_float_division_by_zero_is_ieee() -> None:
    out = run1(FLOAT_DIV_SRC, "f", np.array([1.0, -1.0, 0.0]), np.zeros(3))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2])


BOOL_SRC = """
func @f: (<4 x bool>, <4 x bool>) -> (<4 x bool>, <4 x bool>) {
'entry(%a: <4 x bool>, %b: <4 x bool>):
    %v0 = and %a: <4 x bool>, %b: <4 x bool>
    %v1 = or %a: <4 x bool>, %b: <4 x bool>
    %t = literal (%v0: <4 x bool>, %v1: <4 x bool>): (<4 x bool>, <4 x bool>)
    return %t: (<4 x bool>, <4 x bool>)
}
func @s: (<4 x bool>) -> <4 x bool> {
'entry(%a: <4 x bool>):
    %r = and %a: <4 x bool>, true: bool
    %s = or %r: <4 x bool>, false: bool
    return %s: <4 x bool>
}
"""


def test_and_or_truth_table() -> None:
    a = np.array([False, False, True, True])
    b = np.array([False, True, False, True])
    conj, disj = run(BOOL_SRC, "f", a, b)
    check(conj, [False, False, False, True], np.bool_)
    check(disj, [False, True, True, True], np.bool_)
    check(run1(BOOL_SRC, "s", a), [False, False, True, True], np.bool_)


# ---------------------------------------------------------------- broadcasting

BROADCAST_SRC = """
func @scalar_rhs: (<2 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>):
    %r = multiply %x: <2 x 3 x f32>, 2: f32
    return %r: <2 x 3 x f32>
}
func @scalar_lhs: (<2 x 3 x f32>, f32) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>, %s: f32):
    %r = subtract %s: f32, %x: <2 x 3 x f32>
    return %r: <2 x 3 x f32>
}
func @outer: (<4 x 1 x f32>, <1 x 5 x f32>) -> <4 x 5 x f32> {
'entry(%a: <4 x 1 x f32>, %b: <1 x 5 x f32>):
    %r = add %a: <4 x 1 x f32>, %b: <1 x 5 x f32>
    return %r: <4 x 5 x f32>
}
func @row: (<2 x 3 x f32>, <1 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>, %y: <1 x 3 x f32>):
    %0.0 = add %x: <2 x 3 x f32>, %y: <1 x 3 x f32>
    return %0.0: <2 x 3 x f32>
}
func @row_lhs: (<1 x 3 x i32>, <2 x 3 x i32>) -> <2 x 3 x i32> {
'entry(%y: <1 x 3 x i32>, %x: <2 x 3 x i32>):
    %r = subtract %y: <1 x 3 x i32>, %x: <2 x 3 x i32>
    return %r: <2 x 3 x i32>
}
func @cmp: (<2 x 3 x f32>, f32) -> <2 x 3 x bool> {
'entry(%x: <2 x 3 x f32>, %t: f32):
    %r = greaterThan %x: <2 x 3 x f32>, %t: f32
    return %r: <2 x 3 x bool>
}
func @dynamic: (<_ x 3 x f32>, <1 x 3 x f32>) -> <_ x 3 x f32> {
'entry(%x: <_ x 3 x f32>, %y: <1 x 3 x f32>):
    %r = add %x: <_ x 3 x f32>, %y: <1 x 3 x f32>
    return %r: <_ x 3 x f32>
}
func @dynamic2: (<_ x f32>, <_ x f32>) -> <_ x f32> {
'entry(%x: <_ x f32>, %y: <_ x f32>):
    %r = multiply %x: <_ x f32>, %y: <_ x f32>
    return %r: <_ x f32>
}
"""


def test_broadcast_scalar_with_tensor() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check(run1(BROADCAST_SRC, "scalar_rhs", x), [[0, 2, 4], [6, 8, 10]], np.float32)
    check(run1(BROADCAST_SRC, "scalar_lhs", x, np.float32(10)),
          [[10, 9, 8], [7, 6, 5]], np.float32)


def test_broadcast_column_with_row() -> None:
    a = np.array([[0], [10], [20], [30]], np.float32)
    b = np.array([[1, 2, 3, 4, 5]], np.float32)
    expected = [[10 * i + j for j in range(1, 6)] for i in range(4)]
    check(run1(BROADCAST_SRC, "outer", a, b), expected, np.float32)


def test_broadcast_size_one_dimension() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    y = np.array([[10, 20, 30]], np.float32)
    check(run1(BROADCAST_SRC, "row", x, y), [[11, 22, 33], [14, 25, 36]], np.float32)
    yi = np.array([[10, 20, 30]], np.int32)
    xi = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    check(run1(BROADCAST_SRC, "row_lhs", yi, xi), [[9, 18, 27], [6, 15, 24]], np.int32)


def test_broadcast_compare_with_scalar() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    check(run1(BROADCAST_SRC, "cmp", x, np.float32(3)),
          [[False, False, False], [True, True, True]], np.bool_)


def test_broadcast_with_dynamic_dimensions() -> None:
    y = np.array([[1, 2, 3]], np.float32)
    for n in (1, 4):
        x = np.ones((n, 3), np.float32)
        check(run1(BROADCAST_SRC, "dynamic", x, y), [[2, 3, 4]] * n, np.float32)
    check(run1(BROADCAST_SRC, "dynamic2", np.array([1, 2, 3], np.float32),
               np.array([4, 5, 6], np.float32)), [4, 10, 18], np.float32)
    with pytest.raises(ir.ExecutionError):
        run(BROADCAST_SRC, "dynamic2", np.ones(3, np.float32), np.ones(4, np.float32))


# ---------------------------------------------------------------- compares, select

COMPARE_OPS = ["lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual", "equal",
               "notEqual"]

COMPARE_SRC = """
func @f: (<3 x f32>, <3 x f32>) -> (<3 x bool>, <3 x bool>, <3 x bool>, <3 x bool>,
                                    <3 x bool>, <3 x bool>) {
'entry(%a: <3 x f32>, %b: <3 x f32>):
    %v0 = lessThan %a: <3 x f32>, %b: <3 x f32>
    %v1 = lessThanOrEqual %a: <3 x f32>, %b: <3 x f32>
    %v2 = greaterThan %a: <3 x f32>, %b: <3 x f32>
    %v3 = greaterThanOrEqual %a: <3 x f32>, %b: <3 x f32>
    %v4 = equal %a: <3 x f32>, %b: <3 x f32>
    %v5 = notEqual %a: <3 x f32>, %b: <3 x f32>
    %t = literal (%v0: <3 x bool>, %v1: <3 x bool>, %v2: <3 x bool>, %v3: <3 x bool>,
                  %v4: <3 x bool>, %v5: <3 x bool>): (
           <3 x bool>, <3 x bool>, <3 x bool>, <3 x bool>, <3 x bool>, <3 x bool>)
    return %t: (<3 x bool>, <3 x bool>, <3 x bool>, <3 x bool>, <3 x bool>, <3 x bool>)
}
"""
COMPARE_I64_SRC = COMPARE_SRC.replace("f32", "i64")

COMPARE_EXPECTED = {  # a = [1, 2, 3], b = [2, 2, 2]
    "lessThan": [True, False, False],
    "lessThanOrEqual": [True, True, False],
    "greaterThan": [False, False, True],
    "greaterThanOrEqual": [False, True, True],
    "equal": [False, True, False],
    "notEqual": [True, False, True],
}


@pytest.mark.parametrize("op", COMPARE_OPS)
@pytest.mark.parametrize(("src", "dtype"), [(COMPARE_SRC, np.float32),
                                            (COMPARE_I64_SRC, np.int64)])
def test_compare(op: str, src: str, dtype: type) -> None:
    outs = run(src, "f", np.array([1, 2, 3], dtype), np.array([2, 2, 2], dtype))
    check(outs[COMPARE_OPS.index(op)], COMPARE_EXPECTED[op], np.bool_)


SELECT_SRC = """
func @f: (<4 x f32>, <4 x f32>, <4 x bool>) -> <4 x f32> {
'entry(%a: <4 x f32>, %b: <4 x f32>, %m: <4 x bool>):
    %r = select %a: <4 x f32>, %b: <4 x f32> by %m: <4 x bool>
    return %r: <4 x f32>
}
func @scalar: (f32, <4 x f32>, <4 x bool>) -> <4 x f32> {
'entry(%a: f32, %b: <4 x f32>, %m: <4 x bool>):
    %r = select %a: f32, %b: <4 x f32> by %m: <4 x bool>
    return %r: <4 x f32>
}
func @mask_bcast: (<2 x 3 x i32>, <2 x 3 x i32>, <2 x 1 x bool>) -> <2 x 3 x i32> {
'entry(%a: <2 x 3 x i32>, %b: <2 x 3 x i32>, %m: <2 x 1 x bool>):
    %r = select %a: <2 x 3 x i32>, %b: <2 x 3 x i32> by %m: <2 x 1 x bool>
    return %r: <2 x 3 x i32>
}
func @relu: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %m = greaterThan %x: <4 x f32>, 0: f32
    %r = select %x: <4 x f32>, 0: f32 by %m: <4 x bool>
    return %r: <4 x f32>
}
func @dyn: (<_ x f32>, <_ x f32>, <_ x bool>) -> <_ x f32> {
'entry(%a: <_ x f32>, %b: <_ x f32>, %m: <_ x bool>):
    %r = select %a: <_ x f32>, %b: <_ x f32> by %m: <_ x bool>
    return %r: <_ x f32>
}
"""


def test_select() -> None:
    a = np.array([1, 2, 3, 4], np.float32)
    b = np.array([-1, -2, -3, -4], np.float32)
    m = np.array([True, False, False, True])
    check(run1(SELECT_SRC, "f", a, b, m), [1, -2, -3, 4], np.float32)
    check(run1(SELECT_SRC, "scalar", np.float32(9), b, m), [9, -2, -3, 9], np.float32)
    ai = np.arange(6, dtype=np.int32).reshape(2, 3)
    bi = -ai - 1
    check(run1(SELECT_SRC, "mask_bcast", ai, bi, np.array([[False], [True]])),
          [[-1, -2, -3], [3, 4, 5]], np.int32)
    check(run1(SELECT_SRC, "relu", np.array([-1, 0.5, 0, 2], np.float32)), [0, 0.5, 0, 2],
          np.float32)


def test_select_dynamic_shape_mismatch_is_an_execution_error() -> None:
    check(run1(SELECT_SRC, "dyn", np.ones(2, np.float32), np.zeros(2, np.float32),
               np.array([True, False])), [1, 0], np.float32)
    with pytest.raises(ir.ExecutionError):
        run(SELECT_SRC, "dyn", np.ones(3, np.float32), np.ones(4, np.float32),
            np.ones(3, bool))


# ---------------------------------------------------------------- dataTypeCast

CAST_SRC = """
func @f32_to_i32: (<6 x f32>) -> <6 x i32> {
'entry(%x: <6 x f32>):
    %r = dataTypeCast %x: <6 x f32> to i32
    return %r: <6 x i32>
}
func @bool_to_f32: (<3 x bool>) -> <3 x f32> {
'entry(%x: <3 x bool>):
    %r = dataTypeCast %x: <3 x bool> to f32
    return %r: <3 x f32>
}
func @i32_to_f64: (<3 x i32>) -> <3 x f64> {
'entry(%x: <3 x i32>):
    %r = dataTypeCast %x: <3 x i32> to f64
    return %r: <3 x f64>
}
func @f32_to_bool: (<4 x f32>) -> <4 x bool> {
'entry(%x: <4 x f32>):
    %r = dataTypeCast %x: <4 x f32> to bool
    return %r: <4 x bool>
}
func @i32_to_i64: (<2 x i32>) -> <2 x i64> {
'entry(%x: <2 x i32>):
    %r = dataTypeCast %x: <2 x i32> to i64
    return %r: <2 x i64>
}
func @f16_to_f64: (f16) -> f64 {
'entry(%x: f16):
    %r = dataTypeCast %x: f16 to f64
    return %r: f64
}
"""


def test_data_type_cast() -> None:
    x = np.array([1.7, -1.7, 2.5, -0.5, 0.0, 100.99], np.float32)
    check(run1(CAST_SRC, "f32_to_i32", x), [1, -1, 2, 0, 0, 100], np.int32)  # truncation
    check(run1(CAST_SRC, "bool_to_f32", np.array([True, False, True])), [1.0, 0.0, 1.0],
          np.float32)
    check(run1(CAST_SRC, "i32_to_f64", np.array([-3, 0, 2**31 - 1], np.int32)),
          [-3.0, 0.0, 2147483647.0], np.float64)
    check(run1(CAST_SRC, "f32_to_bool", np.array([0.0, -0.5, 2.0, -0.0], np.float32)),
          [False, True, True, False], np.bool_)
    check(run1(CAST_SRC, "i32_to_i64", np.array([-(2**31), 5], np.int32)), [-(2**31), 5],
          np.int64)
    check(run1(CAST_SRC, "f16_to_f64", np.float16(0.1)), float(np.float16(0.1)), np.float64)


# ---------------------------------------------------------------- dtype preservation

DTYPE_SRC = """
func @f16: (<2 x f16>) -> <2 x f16> {
'entry(%x: <2 x f16>):
    %v0 = multiply %x: <2 x f16>, 3: f16
    %v1 = exp %v0: <2 x f16>
    %v2 = divide %v1: <2 x f16>, 2.0: f16
    return %v2: <2 x f16>
}
func @f32: (<2 x f32>) -> <2 x f32> {
'entry(%x: <2 x f32>):
    %v0 = multiply %x: <2 x f32>, 3: f32
    %v1 = exp %v0: <2 x f32>
    %v2 = divide %v1: <2 x f32>, 2.0: f32
    return %v2: <2 x f32>
}
func @f64: (<2 x f64>) -> <2 x f64> {
'entry(%x: <2 x f64>):
    %v0 = multiply %x: <2 x f64>, 3: f64
    %v1 = exp %v0: <2 x f64>
    %v2 = divide %v1: <2 x f64>, 2.0: f64
    return %v2: <2 x f64>
}
func @i8: (<2 x i8>) -> <2 x i8> {
'entry(%x: <2 x i8>):
    %v0 = multiply %x: <2 x i8>, 3: i8
    %v1 = negate %v0: <2 x i8>
    %v2 = divide %v1: <2 x i8>, 2: i8
    return %v2: <2 x i8>
}
func @i32: (<2 x i32>) -> <2 x i32> {
'entry(%x: <2 x i32>):
    %v0 = multiply %x: <2 x i32>, 3: i32
    %v1 = negate %v0: <2 x i32>
    %v2 = divide %v1: <2 x i32>, 2: i32
    return %v2: <2 x i32>
}
func @i64: (<2 x i64>) -> <2 x i64> {
'entry(%x: <2 x i64>):
    %v0 = multiply %x: <2 x i64>, 3: i64
    %v1 = negate %v0: <2 x i64>
    %v2 = divide %v1: <2 x i64>, 2: i64
    return %v2: <2 x i64>
}
func @i8_wrap: (i8, i8) -> i8 {
'entry(%a: i8, %b: i8):
    %r = add %a: i8, %b: i8
    return %r: i8
}
func @f16_scalar: (f16) -> f16 {
'entry(%x: f16):
    %r = sqrt %x: f16
    return %r: f16
}
"""


@pytest.mark.parametrize(("fn", "dtype"), [("f16", np.float16), ("f32", np.float32),
                                           ("f64", np.float64)])
def test_float_dtype_is_preserved(fn: str, dtype: type) -> None:
    out = run1(DTYPE_SRC, fn, np.array([0.0, 0.5], dtype))
    expected = [0.5, math.exp(1.5) / 2]
    check(out, expected, dtype, rtol=2e-3 if dtype is np.float16 else 1e-6)


@pytest.mark.parametrize(("fn", "dtype"), [("i8", np.int8), ("i32", np.int32),
                                           ("i64", np.int64)])
def test_int_dtype_is_preserved(fn: str, dtype: type) -> None:
    out = run1(DTYPE_SRC, fn, np.array([1, -5], dtype))
    check(out, [-1, 7], dtype)  # -3/2 → -1, 15/2 → 7 (toward zero)


def test_small_types_keep_their_width() -> None:
    check(run1(DTYPE_SRC, "i8_wrap", np.int8(100), np.int8(100)), -56, np.int8)
    check(run1(DTYPE_SRC, "f16_scalar", np.float16(4)), 2.0, np.float16)


def test_arguments_are_converted_to_the_ir_dtype() -> None:
    # Python lists and float64 arrays become the parameter's data type
    out = run1(DTYPE_SRC, "f32", [0.0, 0.5])
    assert out.dtype == np.float32
    out = run1(DTYPE_SRC, "i32", np.array([1, -5], np.int64))
    assert out.dtype == np.int32 and out.tolist() == [-1, 7]


INT_LITERAL_SRC = """
func @f: () -> <2 x i8> {
'entry():
    %r = literal <-128: i8, 127: i8>: <2 x i8>
    return %r: <2 x i8>
}
"""


def test_integer_literals_at_the_limits_of_their_type() -> None:
    check(run1(INT_LITERAL_SRC, "f"), [-128, 127], np.int8)


@pytest.mark.interp_only("how the interpreter wraps a literal out of range")
def test_integer_literal_out_of_the_signed_range() -> None:
    # `200: i8` does not fit the signed i8 the interpreter uses: the verifier must
    # reject it, or the program must run (with the wrapped bit pattern, -56).
    # A raw numpy OverflowError is neither.
    src = """
func @f: () -> i8 {
'entry():
    %r = add 200: i8, 1: i8
    return %r: i8
}
"""
    try:
        m = ir.parse(src)
        ir.verify(m)
    except ir.DiagnosticError:
        return
    out = ir.compile(m, "interp").call("f")[0]
    assert out.dtype == np.int8 and out.tolist() == -55


SIGNED_ZEROS = """
module "z"
stage raw

func @zeros: () -> (<2 x f32>, <2 x f32>, <2 x f32>) {
'entry():
    %a = literal 0.0: <2 x f32>
    %b = literal -0.0: <2 x f32>
    %c = literal 0.0: <2 x f32>
    return (%a: <2 x f32>, %b: <2 x f32>, %c: <2 x f32>): (<2 x f32>, <2 x f32>, <2 x f32>)
}
"""


def test_splat_literals_keep_the_sign_of_zero() -> None:
    """`0.0` and `-0.0` are equal numbers but different literals: each splat keeps its sign."""
    a, b, c = run(SIGNED_ZEROS, "zeros")
    assert not np.signbit(a).any()
    assert np.signbit(b).all()
    assert not np.signbit(c).any()
