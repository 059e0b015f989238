"""Every operator in `dlvm.onnx.CONVERTERS` against ONNX Runtime.

Each case is a small model built with `onnx.helper` (one node, or a few): ONNX Runtime runs it,
`dlvm.onnx.load` imports it, and the interpreter and native code must agree with ONNX Runtime on
a few random inputs. Graph inputs are drawn per seed; inputs that the importer needs at import
(shapes, axes, indices) and some weights are initializers. A dynamic dimension is declared by
name and takes a different size with each seed (1 among them).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import dlvm.ir as ir
import dlvm.onnx
from dlvm.onnx.testing import INT_MAX, LOOSE, Case, In, check, dyn, graph, i64, op, refusal, weights

ort = pytest.importorskip("onnxruntime")

A, B = In((2, 3, 4)), In((3, 4))
BROADCASTS = [  # (left, right) shapes
    ((2, 3, 4), (2, 3, 4)), ((2, 3, 4), (4,)), ((2, 1, 4), (3, 1)), ((3, 4), ()), ((), (2, 3)),
    ((1, 3, 1), (2, 1, 5)),
]

ELEMENTWISE = [
    *[op(o, In(x), In(y)) for o in ("Add", "Sub", "Mul") for x, y in BROADCASTS],
    *[op(o, In(x), In(y)) for o in ("Max", "Min") for x, y in BROADCASTS[1:4]],
    *[op("Div", In(x), In(y, "nonzero")) for x, y in BROADCASTS[:4]],
    op("Add", In((2, 3), dtype=np.float64), In((3,), dtype=np.float64)),
    *[op(o, In((2, 3), "int", np.int64), In((3,), "nonzero", np.int64))
      for o in ("Add", "Sub", "Mul", "Div", "Max", "Min")],
    op("Div", In((3, 4), "int", np.int32), In((3, 4), "nonzero", np.int32)),
    op("Pow", In((2, 3), "positive"), In((2, 3))),
    op("Pow", In((2, 3), "positive"), In(())),
    op("Pow", In((2, 3)), np.array(2.0, np.float32)),
    op("Pow", In((2, 3)), np.array([3, 2, 1], np.int64)),
    op("Pow", In((2, 3), "int", np.int64), np.array(3, np.int64)),
    *[op(o, In(x, "int"), In(y, "int"))
      for o in ("Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual")
      for x, y in (((2, 3, 4), (2, 3, 4)), ((2, 1, 4), (3, 1)))],
    op("Equal", In((2, 3), "int", np.int64), In((), "int", np.int64)),
    op("Less", In((4,)), In((3, 1))),
    op("Max", In((2, 3)), In((3,)), In((2, 1))),
    op("Min", In((4,)), In((3, 1)), In(()), In((2, 1, 1))),
    op("Max", In((3,))),
    *[op(o, In((2, 3), "bool", np.bool_), In((3,), "bool", np.bool_)) for o in ("And", "Or")],
    op("Not", In((2, 3), "bool", np.bool_)),
    *[op(o, A) for o in ("Neg", "Exp", "Tanh", "Sin", "Cos", "Floor", "Ceil", "Sign",
                         "Abs", "Sigmoid", "Relu")],
    *[op(o, In((2, 3, 4), "positive")) for o in ("Sqrt", "Log", "Reciprocal")],
    op("Erf", A, tol=LOOSE),
    op("Abs", In((5,), "int", np.int64)),
    op("Neg", In((5,), "int", np.int32)),
    op("Sign", In((5,), "int", np.int64)),
    op("Relu", In((5,), "int", np.int64)),
    op("Exp", In((), "normal")),
    op("LeakyRelu", A),
    op("LeakyRelu", A, alpha=0.2),
    op("Gelu", A, opset=20, tol=LOOSE),
    op("Gelu", A, opset=20, approximate="none", tol=LOOSE),
    op("Gelu", A, opset=20, approximate="tanh", tol=LOOSE),
    op("Where", In((2, 3, 4), "bool", np.bool_), A, In((2, 3, 4))),
    op("Where", In((2, 1, 4), "bool", np.bool_), In((3, 4)), In(())),
    op("Where", In((4,), "bool", np.bool_), In((3, 1), "int", np.int64),
       In((2, 1, 1), "int", np.int64)),
    # a dynamic batch (of 1 with one seed: it must not be mistaken for a broadcast)
    op("Add", dyn(3), In((3,))),
    op("Mul", dyn(3), dyn(3)),
    op("Sub", dyn(2, 3), In((2, 1))),
    op("Div", In(()), dyn(4, kind="positive")),
    op("Max", dyn(1, 3), In((2, 1))),
    op("Relu", dyn(3, 4)),
    op("Sigmoid", dyn(3)),
    op("Greater", dyn(3), In((3,))),
    op("Where", dyn(3, kind="bool", dtype=np.bool_), dyn(3), In(())),
    op("Cast", dyn(3), to=TensorProto.INT32),
]

CASTS = [
    op("Cast", A, to=TensorProto.INT32, id="Cast-f32-i32"),
    op("CastLike", A, np.zeros(1, np.float64), id="CastLike-f32-f64"),
    op("CastLike", In((2, 3), "positive"), In((1,), "int", np.int32), id="CastLike-f32-i32"),
    op("CastLike", A, In((4,)), id="CastLike-f32-f32"),
    op("Cast", In((2, 3), "positive"), to=TensorProto.INT64, id="Cast-f32-i64"),
    op("Cast", In((2, 3), "int"), to=TensorProto.BOOL, id="Cast-f32-bool"),
    op("Cast", A, to=TensorProto.DOUBLE, id="Cast-f32-f64"),
    op("Cast", A, to=TensorProto.FLOAT, id="Cast-f32-f32"),
    op("Cast", In((2, 3), "bool", np.bool_), to=TensorProto.FLOAT, id="Cast-bool-f32"),
    op("Cast", In((2, 3), "int", np.int64), to=TensorProto.FLOAT, id="Cast-i64-f32"),
    op("Cast", In((2, 3), "int", np.int32), to=TensorProto.INT64, id="Cast-i32-i64"),
    op("Cast", In((2, 3), "int", np.int64), to=TensorProto.INT8, id="Cast-i64-i8"),
    op("Cast", In((2, 3), "int"), to=TensorProto.FLOAT16, id="Cast-f32-f16"),
    op("Identity", A),
    op("Identity", In((3,), "int", np.int64)),
    op("Dropout", A),
    op("Dropout", A, np.array(0.5, np.float32), id="Dropout-ratio"),
    op("Dropout", A, np.array(0.5, np.float32), np.array(False), id="Dropout-not-training"),
]

LINEAR = [
    *[op("MatMul", In(x), In(y)) for x, y in (
        ((4,), (4,)), ((4,), (4, 5)), ((3, 4), (4,)), ((3, 4), (4, 5)), ((2, 3, 4), (4, 5)),
        ((2, 3, 4), (2, 4, 5)), ((2, 3, 4), (4,)), ((4,), (2, 4, 5)), ((3, 4), (2, 4, 5)),
        ((1, 3, 4), (2, 4, 5)), ((2, 2, 3, 4), (2, 2, 4, 5)), ((2, 3, 3, 4), (4, 5)),
        ((2, 1, 3, 4), (1, 2, 4, 5)), ((2, 3, 4), (2, 2, 4, 5)), ((3, 4), (2, 2, 4, 5)),
        ((2, 1, 3, 4), (2, 4, 5)), ((1, 1, 3, 4), (2, 3, 4, 5)), ((2, 3, 3, 4), (1, 1, 4, 5)))],
    op("MatMul", In((3, 4), "int", np.int64), In((4, 2), "int", np.int64)),
    op("MatMul", dyn(3, 4), In((4, 5))),
    op("MatMul", dyn(2, 3, 4), In((4, 5))),
    op("MatMul", dyn(2, 3, 4), weights(4, 5)),
    op("MatMul", dyn(2, 3, 4), dyn(2, 4, 5)),
    op("MatMul", In((3, 4)), dyn(4, 5)),
    op("MatMul", In((3, 4)), dyn(2, 4, 5)),
    op("MatMul", In((1, 3, 4)), dyn(4, 5)),
    op("MatMul", dyn(3, 4), In((1, 4, 5))),
    op("MatMul", dyn(4), dyn(4, 5)),  # [b, 4]·[b, 4, 5]: the matrix repeated per batch
    op("MatMul", dyn(1, 3, 4), In((1, 1, 4, 5))),
    op("MatMul", dyn(3, 4), In((2, 4, 5)), seeds=(0, 1)),  # a batch of 2 or 1 (4 is wrong)
    op("Gemm", In((3, 4)), In((4, 5))),
    op("Gemm", In((4, 3)), In((4, 5)), transA=1),
    op("Gemm", In((3, 4)), In((5, 4)), transB=1),
    op("Gemm", In((4, 3)), In((5, 4)), In((5,)), transA=1, transB=1),
    op("Gemm", In((3, 4)), In((4, 5)), In((3, 5)), alpha=0.5, beta=2.0),
    op("Gemm", In((3, 4)), In((4, 5)), In(()), beta=-1.5),
    op("Gemm", In((3, 4)), In((4, 5)), In((3, 1)), alpha=2.0),
    op("Gemm", In((3, 4)), In((4, 5)), In((1, 5))),
    op("Gemm", In((3, 4)), weights(5, 4), weights(5), transB=1),
    op("Gemm", dyn(4), weights(5, 4), weights(5), transB=1),
    op("Gemm", dyn(4), weights(4, 5), weights(1, 5), alpha=0.25, beta=0.5),
]

NORMALIZATION = [
    *[op(o, A, **({} if axis is None else {"axis": axis}))
      for o in ("Softmax", "LogSoftmax") for axis in (None, 0, -2)],
    op("Softmax", A, axis=1),
    op("Softmax", A, opset=13),
    op("LogSoftmax", B, axis=0, opset=13),
    op("Softmax", dyn(5, 10)),
    op("LogSoftmax", dyn(2, 5), axis=0),
    *[op("BatchNormalization", In(shape), In((3,)), In((3,)), In((3,)),
         In((3,), "positive"), **attrs)
      for shape in ((2, 3, 4, 5), (2, 3, 5), (2, 3)) for attrs in ({}, {"epsilon": 0.1})],
    op("BatchNormalization", dyn(3, 4, 4), weights(3, seed=1), weights(3, seed=2),
       weights(3, seed=3), np.abs(weights(3, seed=4)) + 0.5),
    op("LayerNormalization", A, In((4,)), In((4,))),
    op("LayerNormalization", A, In((4,))),
    op("LayerNormalization", A, In((3, 4)), In((3, 4)), axis=1),
    op("LayerNormalization", A, In((3, 4)), In((4,)), axis=-2, epsilon=0.01),
    op("LayerNormalization", A, In((2, 3, 4)), axis=0),
    op("LayerNormalization", dyn(3, 8), weights(8), weights(8, seed=3)),
]

X4, W3 = In((2, 4, 7, 6)), weights(6, 4, 3, 3)
CONVOLUTION = [
    op("Conv", X4, In((6, 4, 3, 3))),
    op("Conv", X4, W3, weights(6), pads=[1, 1, 1, 1]),
    op("Conv", X4, W3, pads=[0, 1, 2, 0]),
    op("Conv", X4, W3, strides=[2, 2]),
    op("Conv", X4, W3, strides=[2, 1], pads=[1, 1, 1, 1], dilations=[1, 2]),
    op("Conv", X4, W3, dilations=[2, 2], kernel_shape=[3, 3]),
    op("Conv", X4, weights(6, 2, 3, 3), weights(6), group=2),
    op("Conv", X4, weights(4, 1, 3, 3), group=4, pads=[1, 1, 1, 1]),
    op("Conv", X4, weights(6, 4, 1, 1), weights(6)),
    *[op("Conv", X4, W3, strides=s, auto_pad=p, **d)
      for p in ("SAME_UPPER", "SAME_LOWER", "VALID")
      for s, d in (([1, 1], {}), ([2, 2], {}), ([2, 3], {}))],
    op("Conv", X4, weights(6, 4, 2, 2), auto_pad="SAME_LOWER"),
    op("Conv", X4, weights(6, 4, 2, 2), auto_pad="SAME_UPPER"),
    op("Conv", X4, W3, auto_pad="VALID", dilations=[2, 1]),
    op("Conv", In((2, 3, 9)), weights(4, 3, 3), weights(4), pads=[2, 1], strides=[2]),
    op("Conv", In((1, 2, 4, 5, 3)), weights(3, 2, 2, 3, 2), pads=[1, 0, 1, 0, 1, 1]),
    op("Conv", dyn(4, 7, 6), W3, weights(6), pads=[1, 1, 1, 1]),
]

P4 = In((2, 3, 7, 6))
POOLING = [
    *[op(o, P4, kernel_shape=[2, 2], strides=[2, 2]) for o in ("MaxPool", "AveragePool")],
    *[op(o, P4, kernel_shape=[3, 3]) for o in ("MaxPool", "AveragePool")],
    *[op(o, P4, kernel_shape=[3, 2], strides=[2, 1]) for o in ("MaxPool", "AveragePool")],
    op("MaxPool", P4, kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    op("MaxPool", P4, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1]),
    op("MaxPool", P4, kernel_shape=[2, 2], auto_pad="SAME_UPPER"),
    op("MaxPool", P4, kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
    op("MaxPool", P4, kernel_shape=[3, 3], auto_pad="VALID"),
    op("MaxPool", In((2, 3, 9)), kernel_shape=[3], strides=[2]),
    op("MaxPool", dyn(3, 7, 6), kernel_shape=[2, 2], strides=[2, 2]),
    *[op("AveragePool", P4, kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=c)
      for c in (0, 1)],
    *[op("AveragePool", P4, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1],
         count_include_pad=c) for c in (0, 1)],
    *[op("AveragePool", P4, kernel_shape=[2, 2], auto_pad="SAME_UPPER", count_include_pad=c)
      for c in (0, 1)],
    op("AveragePool", In((2, 3, 9)), kernel_shape=[4], strides=[2], pads=[1, 2]),
    op("AveragePool", dyn(3, 6, 6), kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    *[op(o, P4, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1) for o in ("MaxPool",
                                                                           "AveragePool")],
    op("MaxPool", P4, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1),
    op("AveragePool", P4, kernel_shape=[3, 3], pads=[2, 0, 0, 1]),  # any explicit pads
    op("MaxPool", P4, kernel_shape=[2, 2], auto_pad="SAME_LOWER"),
    op("MaxPool", dyn(3, 8, 8), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    *[op(o, x) for o in ("GlobalAveragePool", "GlobalMaxPool")
      for x in (P4, In((2, 3, 5)), dyn(3, 4, 4), In((1, 3, 4, 5), dynamic=(0, 2, 3)))],
]


def reductions() -> list[Case]:
    cases = []
    for o in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd"):
        for axes, keep in (([1], 1), ([0, -1], 0), (None, 0), (None, 1)):
            axes_in = None if axes is None else np.array(axes, np.int64)
            cases.append(op(o, A, axes_in, keepdims=keep))
        # opset 13: ReduceSum takes the axes as an input, the others as an attribute
        if o == "ReduceSum":
            cases.append(op(o, A, np.array([2, -3], np.int64), opset=13))
        else:
            cases.append(op(o, A, axes=[2, -3], opset=13))
        cases.append(op(o, A, keepdims=0, opset=13))
    cases += [
        op("ReduceSum", A, np.zeros(0, np.int64), noop_with_empty_axes=1),
        op("ReduceMean", A, noop_with_empty_axes=1),
        op("ReduceSum", A, np.zeros(0, np.int64)),
        op("ReduceMax", In((3, 4), "int", np.int64), np.array([1], np.int64)),
        op("ReduceMin", In((3, 4), "int", np.int32), keepdims=0),
        op("ReduceSum", In((3, 4), "int", np.int64), np.array([0], np.int64)),
        op("ReduceMean", dyn(3, 4), np.array([0], np.int64)),
        op("ReduceMean", dyn(3, 4), np.array([1, 2], np.int64), keepdims=0),
        op("ReduceMean", dyn(3, 4)),
        op("ReduceMax", dyn(3, 4), np.array([0], np.int64), keepdims=0),
        op("ReduceSum", dyn(3, 4), np.array([-1], np.int64)),
    ]
    return cases


SHAPES = [
    *[op("Reshape", A, i64(*s)) for s in (
        (0, -1), (-1,), (4, 0, 2), (2, -1, 2), (24,), (1, 24, 1), (-1, 1, 3), (2, 0, 0))],
    op("Reshape", In((1, 1)), np.zeros(0, np.int64)),
    op("Reshape", A, i64(3, 8), allowzero=1),
    op("Reshape", In((3, 4), "int", np.int64), i64(4, 3)),
    op("Reshape", dyn(3, 4), i64(0, -1)),
    op("Reshape", dyn(3, 4), i64(-1, 4)),
    op("Reshape", dyn(3, 4), i64(0, 2, 6)),
    op("Reshape", dyn(12), i64(-1, 3, 4)),
    *[op("Flatten", A, **({} if a is None else {"axis": a}))
      for a in (None, 0, 1, 2, 3, -1, -2, -3)],
    op("Flatten", dyn(3, 4)),
    op("Flatten", dyn(3, 4), axis=-1),
    op("Flatten", dyn(3, 4), axis=0),
    op("Transpose", A),
    *[op("Transpose", A, perm=p) for p in ([1, 0, 2], [2, 0, 1], [0, 1, 2])],
    op("Transpose", In((2, 3, 4, 5)), perm=[0, 2, 3, 1]),
    op("Transpose", dyn(3, 4), perm=[1, 2, 0]),
    op("Transpose", In((3, 4), "int", np.int64)),
    op("Concat", In((2, 3)), In((4, 3)), axis=0),
    op("Concat", In((2, 3, 4)), In((2, 1, 4)), In((2, 2, 4)), axis=1),
    op("Concat", In((2, 3, 4)), In((2, 3, 1)), axis=-1),
    op("Concat", In((2, 3, 4)), In((2, 3, 2)), axis=-1),
    op("Concat", In((3,)), weights(2), In((1,)), axis=0),
    op("Concat", dyn(3), dyn(2), axis=1),
    op("Concat", dyn(3), dyn(3), axis=0),
    op("Concat", In((2,), "int", np.int64), In((3,), "int", np.int64), axis=0),
    # Split: the sizes as an input (opset 13+), equal parts, num_outputs (18, last one smaller)
    op("Split", In((2, 6)), i64(2, 4), axis=1, outputs=2),
    op("Split", In((2, 6)), i64(2, 4), axis=1, outputs=2, opset=13),
    op("Split", In((2, 6)), i64(1, 2, 3), axis=-1, outputs=3),
    op("Split", In((6, 2)), outputs=3, opset=13),
    op("Split", In((2, 6, 3)), axis=1, outputs=2, opset=13),
    op("Split", In((6, 2)), outputs=3, num_outputs=3),
    op("Split", In((2, 7)), axis=1, outputs=3, num_outputs=3),
    op("Split", In((2, 4, 3)), axis=-2, outputs=2, num_outputs=2),
    op("Split", dyn(6), i64(3, 3), axis=1, outputs=2),
    # Slice: starts, ends[, axes[, steps]]
    op("Slice", A, i64(1), i64(3), i64(1)),
    op("Slice", A, i64(0, 1), i64(1, 3)),
    op("Slice", A, i64(-3, 1), i64(-1, INT_MAX), i64(-1, 1)),
    op("Slice", A, i64(-100), i64(100), i64(2)),
    op("Slice", A, i64(1, -2), i64(2, -1), i64(0, -2), i64(1, 1)),
    op("Slice", A, i64(2), i64(-1), i64(-1)),
    op("Slice", In((10,)), i64(3), i64(-3)),
    op("Slice", dyn(3, 4), i64(1), i64(3), i64(2)),
    op("Slice", dyn(3, 4), i64(0, 1), i64(INT_MAX, 3), i64(0, 1)),
    op("Slice", dyn(3), i64(0), i64(1), i64(0)),
    op("Squeeze", In((1, 3, 1, 4)), i64(0)),
    op("Squeeze", In((1, 3, 1, 4)), i64(-2)),
    op("Squeeze", In((1, 3, 1, 4)), i64(0, 2)),
    op("Squeeze", In((1, 3, 1, 4))),
    op("Squeeze", In((3, 1, 4)), i64(1), opset=13),
    op("Squeeze", dyn(1, 4), i64(1)),
    op("Unsqueeze", A, i64(0)),
    op("Unsqueeze", A, i64(-1)),
    op("Unsqueeze", A, i64(0, 3)),
    op("Unsqueeze", A, i64(4, 1)),
    op("Unsqueeze", A, i64(1, -1)),
    op("Unsqueeze", In(()), i64(0)),
    op("Unsqueeze", In((3,)), i64(0), opset=13),
    op("Unsqueeze", dyn(4), i64(1)),
    # Gather: constant indices, scalar or vector, on several axes
    op("Gather", A, np.array(1, np.int64)),
    op("Gather", A, np.array(-1, np.int64), axis=1),
    op("Gather", A, np.array(3, np.int32), axis=2),
    op("Gather", A, i64(1, 0, 1), axis=0),
    op("Gather", A, i64(2, -1), axis=1),
    op("Gather", A, i64(3, 0, -2, 1), axis=-1),
    op("Gather", A, np.array([[0, 2], [1, 1]], np.int64), axis=1),
    op("Gather", In((5,), "int", np.int64), i64(4, 0)),
    op("Gather", dyn(3, 4), i64(2, 0), axis=1),
    op("Gather", dyn(3, 4), np.array(1, np.int64), axis=2),
    op("Gather", dyn(3), np.array(0, np.int64), axis=0),
    # the edges of the ranges ONNX allows: −size is the first, size − 1 the last
    op("Gather", A, i64(-4, 3, -1, 0), axis=2),
    op("Gather", A, i64(-2, 1), axis=-3),
    # where ONNX clamps or takes an axis twice, as ONNX Runtime does
    op("Slice", A, np.array([-2**63], np.int64), i64(2), i64(1)),
    op("Slice", A, i64(1), i64(INT_MAX), i64(-1)),
    op("Squeeze", In((1, 3, 1, 4)), i64(0, -4)),
    op("ReduceMax", A, i64(0, -3)),
    op("Expand", In((3, 1)), i64(2, 3, 4)),
    op("Expand", In((4,)), i64(3, 4)),
    op("Expand", In((2, 1, 4)), i64(1, 3, 1)),
    op("Expand", In((2, 3)), i64(3)),
    op("Expand", In((3, 1), "int", np.int64), i64(3, 2)),
    op("Expand", dyn(1), i64(1, 3)),
]


n = helper.make_node
GRAPHS = [
    graph("Constant-value", [
        n("Constant", [], ["k"], value=onnx.numpy_helper.from_array(weights(3, 4))),
        n("Add", ["x", "k"], ["y"])], {"x": In((2, 3, 4))}),
    graph("Constant-value_float", [
        n("Constant", [], ["k"], value_float=2.5), n("Mul", ["x", "k"], ["y"])], {"x": B}),
    graph("Constant-value_ints-Reshape", [
        n("Constant", [], ["s"], value_ints=[-1, 6]), n("Reshape", ["x", "s"], ["y"])],
        {"x": A}),
    graph("Shape-Gather-Concat-Reshape", [  # how PyTorch flattens a batch
        n("Shape", ["x"], ["s"]),
        n("Gather", ["s", "zero"], ["b"], axis=0),
        n("Unsqueeze", ["b", "zero1"], ["b1"]),
        n("Concat", ["b1", "minus1"], ["target"], axis=0),
        n("Reshape", ["x", "target"], ["y"])],
        {"x": dyn(3, 4)},
        {"zero": np.array(0, np.int64), "zero1": i64(0), "minus1": i64(-1)}),
    graph("Shape-Slice-steps-Reshape", [  # the shape reversed: [4, 3, batch]
        n("Shape", ["x"], ["s"]),
        n("Slice", ["s", "start", "end", "axis", "step"], ["r"]),
        n("Reshape", ["x", "r"], ["y"])],
        {"x": dyn(3, 4)},
        {"start": i64(-1), "end": np.array([-2**63], np.int64), "axis": i64(0),
         "step": i64(-1)}),
    graph("Shape-Gather-Unsqueeze-axes-Concat-Reshape", [  # [batch, 12] from a scalar
        n("Shape", ["x"], ["s"]),
        n("Gather", ["s", "zero"], ["b"], axis=0),
        n("Unsqueeze", ["b", "zero1"], ["b1"]),
        n("Squeeze", ["b1", "zero1"], ["b0"]),
        n("Unsqueeze", ["b0", "minus1"], ["b2"]),
        n("Concat", ["b2", "twelve"], ["target"], axis=0),
        n("Reshape", ["x", "target"], ["y"])],
        {"x": dyn(3, 4)},
        {"zero": np.array(0, np.int64), "zero1": i64(0), "minus1": i64(-1),
         "twelve": i64(12)}),
    graph("Conv-Relu-MaxPool-Flatten-Gemm", [
        n("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
        n("Relu", ["c"], ["r"]),
        n("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        n("Flatten", ["p"], ["f"]),
        n("Gemm", ["f", "fc", "fcb"], ["y"], transB=1)],
        {"x": dyn(1, 6, 6)},
        {"w": weights(4, 1, 3, 3), "b": weights(4), "fc": weights(5, 36), "fcb": weights(5)},
        tol=LOOSE),
    graph("Split-outputs-used-apart", [
        n("Split", ["x"], ["a", "b"], axis=1, num_outputs=2),
        n("Sub", ["a", "b"], ["y"])], {"x": In((2, 6))}),
    graph("Equal-Where-Not", [
        n("Equal", ["x", "z"], ["e"]), n("Not", ["e"], ["ne"]),
        n("Where", ["ne", "x", "z"], ["y"])],
        {"x": In((3, 4), "int", np.int64), "z": In((4,), "int", np.int64)}),
    graph("two-outputs", [n("Relu", ["x"], ["y0"]), n("Neg", ["x"], ["y1"])],
          {"x": B}, outputs=("y0", "y1")),
]

CASES = [*ELEMENTWISE, *CASTS, *LINEAR, *NORMALIZATION, *CONVOLUTION, *POOLING,
         *reductions(), *SHAPES, *GRAPHS]


# ------------------------------------------------------------------ the comparison


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_operator(case: Case) -> None:
    check(case)


def test_frozen_weights() -> None:
    """With `freeze`, the initializers are constants of `@main` alone."""
    case = next(c for c in GRAPHS if c.id.startswith("Conv-Relu"))
    check(case, freeze=True)
    assert [f.name for f in dlvm.onnx.load(case.model(), freeze=True).functions] == ["main"]


def cases_of_every_module() -> list[Case]:
    """The `CASES` of this module and of every other test module of the package."""
    found = list(CASES)
    for path in sorted(Path(__file__).parent.glob("test_*.py")):
        if path.name == Path(__file__).name:
            continue
        spec = importlib.util.spec_from_file_location(f"onnx_tests_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        found += getattr(module, "CASES", [])
    return found


def test_every_converter_is_tested() -> None:
    tested = {node.op_type for case in cases_of_every_module() for node in case.nodes}
    assert set(dlvm.onnx.CONVERTERS) <= tested, set(dlvm.onnx.CONVERTERS) - tested


# ------------------------------------------------------------------ what is refused


def test_unknown_operators_are_reported_together() -> None:
    case = graph("two-unknown", [
        n("NonZero", ["x"], ["i"], name="first_one"),
        n("Unique", ["x"], ["m"], name="second_one"),
        n("Relu", ["m"], ["r"]),  # depends on an unconverted node: not reported again
        n("Add", ["r", "i"], ["y"])], {"x": In((3, 3))})
    message = refusal(case)
    assert "first_one" in message and "NonZero" in message
    assert "second_one" in message and "Unique" in message
    assert "Relu" not in message and "Add" not in message


@pytest.mark.parametrize("case, words", [
    (op("Slice", dyn(3), i64(1), i64(INT_MAX), i64(0)), ("Slice", "dynamic")),
    (op("Reshape", A, In((2,), "int", np.int64)), ("Reshape", "shape")),
    (op("Dropout", A, None, In((), "bool", np.bool_)), ("Dropout", "training")),
    (op("Dropout", A, None, np.array(True)), ("Dropout", "training")),
    (op("MatMul", In((1, 2, 3, 4)), dyn(2, 4, 5)), ("MatMul", "dynamic")),
], ids=lambda x: x.id if isinstance(x, Case) else "")
def test_what_is_not_supported_is_reported(case: Case, words: tuple[str, ...]) -> None:
    message = refusal(case)
    for word in words:
        assert word in message


def declared(node: onnx.NodeProto, x: list[int | str], y: list[int | str],
             **consts: np.ndarray) -> onnx.ModelProto:
    """A one-node model with the types of its input x and output y given (not inferred)."""
    graph = helper.make_graph(
        [node], "test", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y)],
        [onnx.numpy_helper.from_array(v, k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_squeeze_of_a_dynamic_shape_needs_axes() -> None:
    """Which dimensions are 1 is known only at run time: refused, not guessed."""
    model = declared(helper.make_node("Squeeze", ["x"], ["y"]), ["batch", 1, 3], [3])
    with pytest.raises(ir.DlvmError, match=r"Squeeze.*dynamic"):
        dlvm.onnx.load(model)


def test_inputs_that_do_not_fit_are_reported() -> None:
    """A model ONNX's checker accepts but whose shapes a converter cannot use: an error of
    that node, not an exception from the IR builder."""
    model = declared(helper.make_node("Squeeze", ["x", "axes"], ["y"], name="squeeze_a_2"),
                     [2, 3], [3], axes=i64(0))
    with pytest.raises(ir.DlvmError, match=r"squeeze_a_2.*Squeeze.*axis 0 has size 2, not 1"):
        dlvm.onnx.load(model)


def test_malformed_file(tmp_path: Any) -> None:
    """Random bytes, an empty file, a missing file: a DlvmError, not another exception."""
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(np.random.default_rng(0).integers(0, 256, 256, dtype=np.uint8).tobytes())
    with pytest.raises(ir.DlvmError, match=r"bad\.onnx"):
        dlvm.onnx.load(bad)
    with pytest.raises(ir.DlvmError, match="does not exist"):
        dlvm.onnx.load(tmp_path / "missing.onnx")
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(ir.DlvmError):
        dlvm.onnx.load(empty)


def test_a_size_computed_from_a_dynamic_one_is_not_taken_for_a_copy() -> None:
    """x.reshape(2·batch, −1) on [batch x 12]: −1 cannot be found at import (it is not the
    static rest of the shape), so the node is refused rather than given the wrong shape."""
    i64s = onnx.TensorProto.INT64
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["b"], axis=0),
             helper.make_node("Mul", ["b", "two"], ["b2"]),
             helper.make_node("Unsqueeze", ["b2", "ax"], ["b2u"]),
             helper.make_node("Concat", ["b2u", "minus"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape")]
    inits = [helper.make_tensor("zero", i64s, [], [0]), helper.make_tensor("two", i64s, [], [2]),
             helper.make_tensor("ax", i64s, [1], [0]),
             helper.make_tensor("minus", i64s, [1], [-1])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["b", 12])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ir.DlvmError, match=r"reshape.*computed at run time"):
        dlvm.onnx.load(model)
