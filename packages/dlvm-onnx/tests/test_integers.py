"""Unsigned integers and bfloat16 in ONNX models, the bitwise operators (BitShift, BitCast,
BitwiseAnd/Or/Xor/Not) and linear quantization (QuantizeLinear, DequantizeLinear and the
integer products), against ONNX Runtime.

Quantization is checked where rounding matters: values drawn on a scale where many land on
halves of a step (rounded to even) and beyond the quantized range (saturated).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper

from dlvm.onnx.testing import Case, In, check, graph, i64, op, refusal

ort = pytest.importorskip("onnxruntime")

U8, U16, U32, U64 = np.uint8, np.uint16, np.uint32, np.uint64


def u(*shape: int, dtype: type = U8) -> In:
    """unsigned values: −6…6 drawn, so the negative ones wrap to the top of the range"""
    return In(shape, "int", dtype)


def shift_amounts(*shape: int, dtype: type = U8) -> In:
    return In(shape, "int", dtype)  # −6…6 as unsigned: huge amounts, all bits shifted out


BITS = [
    op("BitShift", u(3, 4), shift_amounts(3, 4), direction="LEFT"),
    op("BitShift", u(3, 4, dtype=U16), np.array([1, 15, 16, 3], U16), direction="RIGHT"),
    op("BitShift", u(5, dtype=U32), np.array(31, U32), direction="LEFT"),
    op("BitShift", u(5, dtype=U64), np.array(63, U64), direction="RIGHT"),
    op("BitwiseAnd", u(3, 4), u(4)),
    op("BitwiseOr", u(2, 3, 4, dtype=U64), u(3, 4, dtype=U64)),
    op("BitwiseXor", In((3, 4), "int", np.int32), In((4,), "int", np.int32)),
    op("BitwiseNot", u(3, 4, dtype=U16), opset=18),
    op("BitCast", In((2, 3)), to=6, opset=26),  # float32 → int32
    op("BitCast", In((4,), "int", np.int16), to=4, opset=26),  # int16 → uint16
    op("BitCast", In((3,), "bool", np.bool_), to=2, opset=26),  # bool → uint8
]
for case in BITS:
    if case.opset > 24:  # newer than ONNX Runtime's kernels
        case.oracle = "reference"

UNSIGNED = [
    op("Add", u(3, 4), u(3, 4)),
    op("Sub", u(3, 4, dtype=U32), u(4, dtype=U32)),
    op("Div", u(3, 4, dtype=U16), np.array([1, 2, 200, 65535], U16)),
    op("Mod", u(3, 4), np.array([3, 7, 255, 1], U8)),
    op("Max", u(3, 4, dtype=U64), u(3, 4, dtype=U64)),
    op("Less", u(3, 4, dtype=U32), u(3, 4, dtype=U32)),
    op("ReduceMax", u(3, 4), i64(1)),
    op("Cast", u(3, 4), to=1),  # uint8 → float
    op("Cast", In((3, 4), "positive"), to=2),  # float → uint8
]

QUANTIZE = [
    op("QuantizeLinear", In((3, 4)), np.array(0.25, np.float32), np.array(128, U8)),
    op("QuantizeLinear", In((3, 4)), np.array(0.02, np.float32), np.array(-3, np.int8)),
    op("QuantizeLinear", In((2, 3, 4)), np.array([0.1, 0.5, 0.02], np.float32),
       np.array([0, 3, 250], U8), axis=1),
    op("QuantizeLinear", In((3, 4)), np.array([[0.1, 0.5], [0.2, 0.05], [1.0, 0.25]],
                                              np.float32),
       np.array([[1, -2], [0, 3], [5, 0]], np.int8), axis=1, block_size=2, opset=21),
    op("QuantizeLinear", In((3, 4)), np.array(0.001, np.float32), np.array(7, np.int16),
       opset=21),
    op("QuantizeLinear", In((5,)), np.array(0.25, np.float32)),  # uint8, no zero point
    op("DequantizeLinear", u(3, 4), np.array(0.5, np.float32), np.array(128, U8)),
    op("DequantizeLinear", In((2, 3, 4), "int", np.int8), np.array([0.1, 0.5, 2.0],
                                                                   np.float32),
       np.array([0, -1, 3], np.int8), axis=1),
    op("DequantizeLinear", In((3, 4), "int", np.int32), np.array(0.125, np.float32)),
    op("DequantizeLinear", u(3, 4, dtype=U16), np.array(0.5, np.float32),
       np.array(7, U16), opset=21),
]

PRODUCTS = [
    op("MatMulInteger", u(3, 4), u(4, 2), np.array(3, U8), np.array(250, U8)),
    op("MatMulInteger", In((2, 3, 4), "int", np.int8), In((4, 5), "int", np.int8)),
    op("ConvInteger", u(1, 2, 5, 5), u(3, 2, 3, 3), np.array(2, U8), pads=[1, 1, 1, 1]),
    op("QLinearMatMul", u(3, 4), np.array(0.05, np.float32), np.array(5, U8),
       u(4, 2), np.array(0.02, np.float32), np.array(250, U8),
       np.array(0.1, np.float32), np.array(100, U8)),
    op("QLinearMatMul", In((2, 3, 4), "int", np.int8), np.array(0.05, np.float32),
       np.array(1, np.int8), In((4, 2), "int", np.int8), np.array(0.02, np.float32),
       np.array(-1, np.int8), np.array(0.01, np.float32), np.array(3, np.int8)),
    op("QLinearConv", u(1, 2, 5, 5), np.array(0.05, np.float32), np.array(5, U8),
       u(3, 2, 3, 3), np.array([0.02, 0.04, 0.01], np.float32), np.array([250, 2, 0], U8),
       np.array(0.1, np.float32), np.array(100, U8), np.array([5, -7, 100], np.int32),
       pads=[1, 1, 1, 1]),
]

DYNAMIC = graph("DynamicQuantizeLinear-then-dequantize", [
    helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"]),
    helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"]),
], {"x": In((3, 4))})

CASES: list[Case] = [*BITS, *UNSIGNED, *QUANTIZE, *PRODUCTS, DYNAMIC]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_operator(case: Case) -> None:
    check(case)


def test_bfloat16_inputs_and_outputs() -> None:
    """A model of bfloat16 tensors, each operation rounded to bfloat16: within two of its
    ulps of the reference, on every target."""
    bf = ml_dtypes.bfloat16
    case = graph("bfloat16-Add-Tanh-MatMul", [
        helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Tanh", ["s"], ["t"]),
        helper.make_node("MatMul", ["t", "w"], ["y"])],
        {"a": In((3, 4), dtype=bf), "b": In((4,), dtype=bf), "w": In((4, 2), dtype=bf)})
    case.oracle = "reference"
    case.tol = (2.0**-6, 1e-2)
    check(case)


def test_quantizing_to_a_float_type_is_refused() -> None:
    case = op("QuantizeLinear", In((3,)), np.array(0.5, np.float32), output_dtype=10,
              opset=21)
    assert "QuantizeLinear to f16 (integer targets only)" in refusal(case)


def test_bitshift_needs_a_direction() -> None:
    case = op("BitShift", u(3), u(3), direction="UP")
    assert "BitShift's direction must be LEFT or RIGHT, found 'UP'" in refusal(case)
