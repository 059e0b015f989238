"""Unsigned integers (`u8`, `u16`, `u32`, `u64`): numpy's semantics on every target.

They wrap at their width, divide and compare as unsigned, widen with zeros, convert to and
from floats as unsigned; a literal must fit in [0, 2^N − 1]. Expected values are written by
hand (or by Python integers), not by the numpy function the interpreter calls.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.runtime import ExecutionError, convert_argument, int_range
from dlvm.ir.testing import run, run1
from dlvm.ir.types import U8, U16, U32, U64, TensorType, parse_data_type

pytestmark = pytest.mark.usefixtures("spec_target")

ARITHMETIC = """
module "u"
stage raw

func @f: (<4 x u8>, <4 x u8>) -> (<4 x u8>, <4 x u8>, <4 x u8>, <4 x u8>, <4 x u8>, <4 x u8>,
                                 <4 x u8>, <4 x u8>, <4 x u8>) {
'entry(%x: <4 x u8>, %y: <4 x u8>):
    %add = add %x: <4 x u8>, %y: <4 x u8>
    %sub = subtract %x: <4 x u8>, %y: <4 x u8>
    %mul = multiply %x: <4 x u8>, %y: <4 x u8>
    %div = divide %x: <4 x u8>, %y: <4 x u8>
    %fdiv = floorDivide %x: <4 x u8>, %y: <4 x u8>
    %mod = modulo %x: <4 x u8>, %y: <4 x u8>
    %min = min %x: <4 x u8>, %y: <4 x u8>
    %max = max %x: <4 x u8>, %y: <4 x u8>
    %sign = sign %x: <4 x u8>
    return (%add: <4 x u8>, %sub: <4 x u8>, %mul: <4 x u8>, %div: <4 x u8>, %fdiv: <4 x u8>,
            %mod: <4 x u8>, %min: <4 x u8>, %max: <4 x u8>, %sign: <4 x u8>
           ): (<4 x u8>, <4 x u8>, <4 x u8>, <4 x u8>, <4 x u8>, <4 x u8>, <4 x u8>,
               <4 x u8>, <4 x u8>)
}
"""


def test_u8_arithmetic_wraps_and_divides_as_unsigned() -> None:
    x, y = [200, 3, 255, 0], [100, 7, 128, 9]
    outs = run(ARITHMETIC, "f", np.array(x, np.uint8), np.array(y, np.uint8))
    expected = [
        [(a + b) % 256 for a, b in zip(x, y, strict=True)],
        [(a - b) % 256 for a, b in zip(x, y, strict=True)],
        [(a * b) % 256 for a, b in zip(x, y, strict=True)],
        [a // b for a, b in zip(x, y, strict=True)],
        [a // b for a, b in zip(x, y, strict=True)],
        [a % b for a, b in zip(x, y, strict=True)],
        [min(a, b) for a, b in zip(x, y, strict=True)],
        [max(a, b) for a, b in zip(x, y, strict=True)],
        [1 if a else 0 for a in x],
    ]
    for out, want in zip(outs, expected, strict=True):
        assert out.dtype == np.uint8
        assert out.tolist() == want


COMPARE = """
module "u"
stage raw

func @f: (<3 x u32>, <3 x u32>) -> (<3 x bool>, <3 x bool>, <3 x bool>) {
'entry(%x: <3 x u32>, %y: <3 x u32>):
    %lt = lessThan %x: <3 x u32>, %y: <3 x u32>
    %ge = greaterThanOrEqual %x: <3 x u32>, %y: <3 x u32>
    %eq = equal %x: <3 x u32>, %y: <3 x u32>
    return (%lt: <3 x bool>, %ge: <3 x bool>, %eq: <3 x bool>): (<3 x bool>, <3 x bool>, <3 x bool>)
}
"""


def test_u32_compares_values_above_the_signed_range() -> None:
    big = 2**31 + 5  # negative if read as i32
    lt, ge, eq = run(COMPARE, "f", np.array([big, 1, 7], np.uint32),
                     np.array([1, big, 7], np.uint32))
    assert lt.tolist() == [False, True, False]
    assert ge.tolist() == [True, False, True]
    assert eq.tolist() == [False, False, True]


CASTS = """
module "u"
stage raw

func @f: (<3 x u64>, <3 x u8>, <3 x f64>, <3 x i8>) -> (<3 x f64>, <3 x i64>, <3 x u8>, <3 x u16>) {
'entry(%big: <3 x u64>, %small: <3 x u8>, %real: <3 x f64>, %signed: <3 x i8>):
    %f = dataTypeCast %big: <3 x u64> to f64
    %w = dataTypeCast %small: <3 x u8> to i64
    %t = dataTypeCast %real: <3 x f64> to u8
    %s = dataTypeCast %signed: <3 x i8> to u16
    return (%f: <3 x f64>, %w: <3 x i64>, %t: <3 x u8>, %s: <3 x u16>
           ): (<3 x f64>, <3 x i64>, <3 x u8>, <3 x u16>)
}
"""


def test_casts_widen_with_zeros_and_convert_as_unsigned() -> None:
    big = [2**64 - 1, 2**63, 12]
    f, w, t, s = run(CASTS, "f", np.array(big, np.uint64), np.array([255, 128, 1], np.uint8),
                     np.array([200.75, 3.5, 0.0]), np.array([-1, 5, -128], np.int8))
    assert f.tolist() == [float(v) for v in big]
    assert w.tolist() == [255, 128, 1]
    assert t.tolist() == [200, 3, 0]
    assert s.tolist() == [(-1) % 2**16, 5, (-128) % 2**16]


REDUCE = """
module "u"
stage raw

func @f: (<2 x 3 x u16>) -> (<2 x u16>, <3 x u16>, u16) {
'entry(%x: <2 x 3 x u16>):
    %mx = reduce %x: <2 x 3 x u16> by max init 0: u16 along 1
    %mn = reduce %x: <2 x 3 x u16> by min init 65535: u16 along 0
    %s = reduce %x: <2 x 3 x u16> by add init 0: u16
    return (%mx: <2 x u16>, %mn: <3 x u16>, %s: u16): (<2 x u16>, <3 x u16>, u16)
}
"""


def test_reductions_order_as_unsigned() -> None:
    x = [[40000, 3, 65535], [1, 50000, 2]]
    mx, mn, s = run(REDUCE, "f", np.array(x, np.uint16))
    assert mx.tolist() == [65535, 50000]
    assert mn.tolist() == [1, 3, 2]
    assert int(s) == sum(sum(r) for r in x) % 2**16


POWER = """
module "u"
stage raw

func @f: (<3 x u32>, <3 x u32>) -> <3 x u32> {
'entry(%x: <3 x u32>, %y: <3 x u32>):
    %p = power %x: <3 x u32>, %y: <3 x u32>
    return %p: <3 x u32>
}
"""


def test_power_takes_any_unsigned_exponent() -> None:
    out = run1(POWER, "f", np.array([2, 3, 7], np.uint32), np.array([31, 2, 0], np.uint32))
    assert out.tolist() == [2**31, 9, 1]


DIVIDE_BY_ZERO = """
module "u"
stage raw

func @f: (<2 x u8>, <2 x u8>) -> <2 x u8> {
'entry(%x: <2 x u8>, %y: <2 x u8>):
    %q = divide %x: <2 x u8>, %y: <2 x u8>
    return %q: <2 x u8>
}
"""


def test_unsigned_division_by_zero_is_an_error() -> None:
    with pytest.raises(ExecutionError, match="division by zero"):
        run(DIVIDE_BY_ZERO, "f", np.array([1, 2], np.uint8), np.array([1, 0], np.uint8))


LITERAL_MODULE = """module "m"
stage raw

func @f: (u8) -> u8 {
'entry(%x: u8):
    %y = add %x: u8, 7: u8
    return %y: u8
}
"""


@pytest.mark.interp_only("parsing and argument conversion are the same for every target")
def test_names_ranges_and_literals() -> None:
    assert [parse_data_type(n) for n in ("u8", "u16", "u32", "u64")] == [U8, U16, U32, U64]
    assert parse_data_type("u7") is None and parse_data_type("u128") is None
    assert [str(t) for t in (U8, U64)] == ["u8", "u64"]
    assert int_range(U8) == (0, 255) and int_range(U64) == (0, 2**64 - 1)
    for literal in ("-1", "256"):
        text = LITERAL_MODULE.replace("7: u8", f"{literal}: u8")
        with pytest.raises(ir.DlvmError, match=f"integer literal {literal} does not fit in 'u8'"):
            ir.verify(ir.parse(text))


@pytest.mark.interp_only("argument conversion is the same for every target")
def test_arguments_are_checked_against_the_unsigned_range() -> None:
    t = TensorType((2,), U8)
    assert convert_argument(np.array([0, 255]), t).dtype == np.uint8
    with pytest.raises(ExecutionError, match="the value -1 does not fit in u8"):
        convert_argument(np.array([-1, 3]), t)
    with pytest.raises(ExecutionError, match="the value 256 does not fit in u8"):
        convert_argument(np.array([256, 3]), t)
    with pytest.raises(ExecutionError, match="could lose values"):
        convert_argument(np.array([1.5, 3.0]), t)
