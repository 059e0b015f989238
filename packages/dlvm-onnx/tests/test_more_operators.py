"""Operators of the other ONNX domains (the optimizers of `ai.onnx.preview.training`,
`Binarizer` and `ArrayFeatureExtractor` of `ai.onnx.ml`), the DFT, ReverseSequence, MaxUnpool,
Det, Dropout's mask, and operators that ONNX defines as functions (expanded into their bodies),
against ONNX Runtime or, where it has no kernel, ONNX's reference evaluator.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from dlvm.onnx.testing import LOOSE, Case, In, check, graph, i64, op, refusal

ort = pytest.importorskip("onnxruntime")

TRAINING = ("ai.onnx.preview.training", 1)
ML = ("ai.onnx.ml", 3)
R, T0, T3 = np.array(0.1, np.float32), np.array(0, np.int64), np.array(3, np.int64)


def optimizer(op_type: str, states: int, t: np.ndarray, **attrs: object) -> Case:
    """one update of two tensors (shapes 3 and 2 x 2) at update count t"""
    xs = [In((3,)), In((2, 2))]
    groups = xs * (2 + states)
    positive = [In(s.shape, "positive") for s in xs]
    args = [*xs, *xs, *(positive * states)]  # X, G, then states (Adagrad's H, Adam's H > 0)
    assert len(args) == len(groups)
    case = op(op_type, R, t, *args, outputs=len(args) - len(xs), domain=TRAINING,
              oracle="reference", tol=LOOSE, **attrs)
    case.id += f"-T{int(t)}"
    return case


TRAINING_CASES = [
    optimizer("Adagrad", 1, T3, decay_factor=0.1, epsilon=1e-5, norm_coefficient=0.01),
    optimizer("Momentum", 1, T0, alpha=0.9, beta=0.5, mode="standard", norm_coefficient=0.0),
    optimizer("Momentum", 1, T3, alpha=0.9, beta=0.5, mode="nesterov", norm_coefficient=0.1),
    optimizer("Adam", 2, T0, alpha=0.9, beta=0.999, epsilon=1e-6),
    optimizer("Adam", 2, T3, alpha=0.8, beta=0.9, epsilon=1e-3, norm_coefficient=0.01,
              norm_coefficient_post=0.1),
]

CLASSIC_ML = [
    op("Binarizer", In((3, 4)), threshold=0.2, domain=ML),
    op("ArrayFeatureExtractor", In((3, 5)), i64(4, 0, -1), domain=ML, oracle="reference"),
]

SPECTRAL = [
    op("DFT", In((2, 8, 1)), opset=17),  # real → complex, along axis 1
    op("DFT", In((2, 8, 2)), np.array(6, np.int64), inverse=1, opset=17),  # truncated to 6
    op("DFT", In((3, 6, 4, 1)), None, np.array(-2, np.int64), onesided=1, opset=20),
    op("DFT", In((2, 5, 2)), np.array(8, np.int64), np.array(1, np.int64), inverse=1,
       onesided=1, opset=20),  # irfft of a half spectrum: a real signal of 8
]
for case in SPECTRAL:
    case.tol = LOOSE

REARRANGED = [
    op("ReverseSequence", In((5, 3, 2)), i64(5, 1, 3), time_axis=0, batch_axis=1),
    op("ReverseSequence", In((3, 4)), i64(2, 4, 0), time_axis=1, batch_axis=0),
    op("Det", In((3, 3))),
    op("Det", In((2, 4, 4)), tol=LOOSE),
    op("Det", In((5, 2, 2))),
]

MAXPOOL_THEN_UNPOOL = graph("MaxPool-then-MaxUnpool", [
    helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
    helper.make_node("MaxUnpool", ["p", "i"], ["y"], kernel_shape=[2, 2], strides=[2, 2]),
], {"x": In((1, 2, 4, 6))})

DROPOUT = [
    op("Dropout", In((3, 4)), outputs=2),  # inference: y = x, a mask of all true
    graph("Dropout-training-with-ratio-0", [
        helper.make_node("Constant", [], ["r"], value=helper.make_tensor("r", 1, [], [0.0])),
        helper.make_node("Constant", [], ["t"], value=helper.make_tensor("t", 9, [], [True])),
        helper.make_node("Dropout", ["x", "r", "t"], ["y0", "y1"]),
    ], {"x": In((3, 4))}, outputs=("y0", "y1")),
]

# no converter of their own: ONNX's function bodies
FUNCTIONS = [
    op("CenterCropPad", In((5, 3, 2)), i64(4, 5), axes=[0, 1]),
    op("CausalConvWithState", In((1, 2, 6)), In((2, 1, 3)), outputs=2, opset=27,
       oracle="reference", tol=LOOSE, activation="silu"),
]

CASES: list[Case] = [*TRAINING_CASES, *CLASSIC_ML, *SPECTRAL, *REARRANGED, MAXPOOL_THEN_UNPOOL,
                     *DROPOUT, *FUNCTIONS]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_operator(case: Case) -> None:
    check(case)


def test_dropout_in_training_mode_is_refused() -> None:
    case = op("Dropout", In((3,)), np.array(0.5, np.float32), np.array(True), outputs=2)
    assert "Dropout in training mode with a ratio above 0" in refusal(case)


def test_det_of_large_matrices_is_refused() -> None:
    assert "Det of 5 x 5 matrices of f32 (floats up to 4 x 4)" in refusal(op("Det", In((5, 5))))


def test_a_function_body_stops_at_the_operator_it_lacks() -> None:
    """An operator expanded into its body is refused where the body is: the message names
    the inner node and its operator."""
    case = op("AffineGrid", In((2, 2, 3)), i64(2, 3, 4, 5), opset=20)
    assert "(If): no conversion for this operator" in refusal(case)
