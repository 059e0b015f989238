"""Bitwise instructions on signed and unsigned integers, on every target.

Expected values are Python's integer operators on the two's-complement bits, written out by
hand for the shifts that move every bit out.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import run

pytestmark = pytest.mark.usefixtures("spec_target")

SIGNED = """
module "bits"
stage raw

func @f: (<6 x i8>, <6 x i8>) -> (<6 x i8>, <6 x i8>, <6 x i8>, <6 x i8>, <6 x i8>, <6 x i8>) {
'entry(%x: <6 x i8>, %y: <6 x i8>):
    %and = bitAnd %x: <6 x i8>, %y: <6 x i8>
    %or = bitOr %x: <6 x i8>, %y: <6 x i8>
    %xor = bitXor %x: <6 x i8>, %y: <6 x i8>
    %not = bitNot %x: <6 x i8>
    %shl = shiftLeft %x: <6 x i8>, %y: <6 x i8>
    %shr = shiftRight %x: <6 x i8>, %y: <6 x i8>
    return (%and: <6 x i8>, %or: <6 x i8>, %xor: <6 x i8>, %not: <6 x i8>, %shl: <6 x i8>,
            %shr: <6 x i8>): (<6 x i8>, <6 x i8>, <6 x i8>, <6 x i8>, <6 x i8>, <6 x i8>)
}
"""


def wrap8(v: int) -> int:
    return (v + 128) % 256 - 128


def test_signed_bits_and_arithmetic_shifts() -> None:
    x = [-8, 5, -128, 3, -1, 100]
    y = [2, 9, -1, 7, 0, 3]
    band, bor, bxor, bnot, shl, shr = run(SIGNED, "f", np.array(x, np.int8),
                                          np.array(y, np.int8))
    pairs = list(zip(x, y, strict=True))
    assert band.tolist() == [a & b for a, b in pairs]
    assert bor.tolist() == [a | b for a, b in pairs]
    assert bxor.tolist() == [a ^ b for a, b in pairs]
    assert bnot.tolist() == [~a for a in x]
    # amounts 9 and −1 are outside [0, 8): every bit shifted out
    assert shl.tolist() == [wrap8(-8 << 2), 0, 0, wrap8(3 << 7), -1, wrap8(100 << 3)]
    assert shr.tolist() == [-8 >> 2, 0, -1, 3 >> 7, -1, 100 >> 3]


UNSIGNED = """
module "bits"
stage raw

func @f: (<4 x u64>, <4 x u64>) -> (<4 x u64>, <4 x u64>, <4 x u64>) {
'entry(%x: <4 x u64>, %y: <4 x u64>):
    %shl = shiftLeft %x: <4 x u64>, %y: <4 x u64>
    %shr = shiftRight %x: <4 x u64>, %y: <4 x u64>
    %not = bitNot %x: <4 x u64>
    return (%shl: <4 x u64>, %shr: <4 x u64>, %not: <4 x u64>): (<4 x u64>, <4 x u64>, <4 x u64>)
}
"""


def test_unsigned_shifts_are_logical() -> None:
    top = 2**63
    x = [top, top + 1, 2**64 - 1, 5]
    y = [1, 63, 64, 0]
    shl, shr, bnot = run(UNSIGNED, "f", np.array(x, np.uint64), np.array(y, np.uint64))
    assert shl.tolist() == [0, top, 0, 5]
    assert shr.tolist() == [2**62, 1, 0, 5]
    assert bnot.tolist() == [2**64 - 1 - v for v in x]


@pytest.mark.interp_only("a type rule, the same for every target")
def test_bitwise_instructions_take_integers_only() -> None:
    text = """module "m"
stage raw

func @f: (<2 x f32>) -> <2 x f32> {
'entry(%x: <2 x f32>):
    %y = bitAnd %x: <2 x f32>, %x: <2 x f32>
    return %y: <2 x f32>
}
"""
    with pytest.raises(ir.DlvmError, match=r"must have an integer data type \(iN or uN\)"):
        ir.verify(ir.parse(text))
