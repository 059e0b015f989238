"""The spatial and layout operators (`dlvm.onnx.spatial`) against ONNX Runtime: padding,
resizing, transposed convolution, pooling with dilations and indices, rearrangements,
Einsum, and tensors made from shapes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import dlvm.ir as ir
import dlvm.onnx
from dlvm.onnx.testing import INT_MAX, LOOSE, Case, In, check, dyn, graph, i64, op, refusal, weights

ort = pytest.importorskip("onnxruntime")

A = In((2, 3, 4))
IMG = In((1, 2, 4, 5))
P = In((1, 2, 7, 8))
Q = In((1, 2, 5, 6))
F32 = np.float32


def f32(*values: float) -> np.ndarray:
    return np.array(values, F32)


PAD = [
    op("Pad", A, i64(1, 0, 2, 0, 1, 1)),
    op("Pad", A, i64(0, 2, 1, 1, 0, 2), np.array(1.5, F32)),
    op("Pad", A, i64(1, 1, 1, 1, 1, 1), In(())),  # the constant computed at run time
    *[op("Pad", In((3, 4, 5)), i64(1, 2, 1, 0, 1, 3), mode=m) for m in ("reflect", "edge")],
    op("Pad", A, i64(1, 2, 3, 2, 1, 3), mode="wrap", opset=19),
    op("Pad", A, i64(0, -1, 2, 1, 2, -1)),  # negative pads crop
    *[op("Pad", In((3, 5, 6)), i64(0, -1, 2, 1, 2, -1), mode=m, opset=19)
      for m in ("reflect", "wrap")],
    op("Pad", A, i64(1, 2), None, i64(-1)),  # axes
    op("Pad", In((3, 4), "int", np.int64), i64(1, 1, 0, 2), np.array(7, np.int64)),
    op("Pad", In((5,), "bool", np.bool_), i64(1, 2)),
    *[op("Pad", dyn(3, 4), i64(1, 0, 1, 2, 0, 1), mode=m) for m in ("constant", "edge")],
    op("Pad", dyn(3, 4), i64(1, 0, 1, 1, 0, 1), mode="wrap", opset=19),
    op("Pad", dyn(3, 4), i64(0, 1, 0, 0, 1, 2), mode="reflect"),  # along static axes
]

RESIZE = [
    op("Resize", IMG, None, None, i64(1, 2, 8, 10)),
    op("Resize", IMG, None, f32(1, 1, 2, 3)),
    op("Resize", In((1, 1, 5, 7)), None, f32(1, 1, 0.6, 0.5)),
    *[op("Resize", In((1, 1, 4, 6)), None, None, i64(1, 1, 7, 9), nearest_mode=r,
         coordinate_transformation_mode=t)
      for r, t in (("round_prefer_ceil", "asymmetric"), ("floor", "align_corners"),
                   ("ceil", "half_pixel"), ("round_prefer_floor", "pytorch_half_pixel"))],
    *[op("Resize", IMG, None, f32(1, 1, 2, 1.5), mode="linear",
         coordinate_transformation_mode=t)
      for t in ("half_pixel", "asymmetric", "pytorch_half_pixel")],
    op("Resize", IMG, None, None, i64(1, 2, 7, 3), mode="linear",
       coordinate_transformation_mode="align_corners"),
    op("Resize", In((1, 1, 8, 9)), None, None, i64(1, 1, 3, 4), mode="linear", antialias=1),
    op("Resize", IMG, None, f32(1, 1, 2, 2), mode="cubic", tol=LOOSE),
    op("Resize", In((1, 1, 9, 8)), None, f32(1, 1, 0.5, 0.75), mode="cubic", antialias=1,
       tol=LOOSE),
    op("Resize", IMG, None, f32(1, 1, 0.5, 1.5), mode="cubic", cubic_coeff_a=-0.5,
       exclude_outside=1, tol=LOOSE),
    op("Resize", In((1, 1, 6, 6)), f32(0, 0, 0.2, 0.3, 1, 1, 0.9, 1.2), None,
       i64(1, 1, 4, 5), mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
       extrapolation_value=3.0),
    op("Resize", IMG, None, f32(3, 2), axes=[3, 2]),
    op("Resize", IMG, None, None, i64(6, 9), axes=[2, 3], keep_aspect_ratio_policy="not_larger"),
    op("Resize", In((1, 1, 4, 5)), None, f32(1, 1, 1.5, 0.8), mode="linear",
       coordinate_transformation_mode="half_pixel_symmetric", opset=19),
    op("Resize", dyn(2, 4, 4), None, f32(1, 1, 2, 2), mode="linear"),
    op("Resize", In((1, 2, 3, 3), "int", np.int32), None, f32(1, 1, 2, 2)),
]

W3 = weights(2, 3, 3, 3)
CONV_TRANSPOSE = [
    op("ConvTranspose", IMG, W3, weights(3)),
    op("ConvTranspose", IMG, W3, strides=[2, 2], pads=[1, 0, 1, 1], output_padding=[1, 0]),
    op("ConvTranspose", IMG, W3, dilations=[2, 1], strides=[1, 2]),
    op("ConvTranspose", In((1, 4, 3, 3)), weights(4, 2, 3, 3), weights(4), group=2),
    *[op("ConvTranspose", IMG, W3, strides=[2, 2], auto_pad=a)
      for a in ("SAME_UPPER", "SAME_LOWER")],
    op("ConvTranspose", IMG, W3, strides=[3, 2], output_shape=[12, 10]),
    op("ConvTranspose", IMG, W3, pads=[3, 1, 2, 3]),  # cuts beyond the kernel's extent
    op("ConvTranspose", In((2, 3, 5)), weights(3, 2, 4), strides=[3], pads=[1, 2]),
    op("ConvTranspose", In((1, 2, 3, 2, 3)), weights(2, 2, 2, 2, 2), strides=[2, 1, 2]),
    op("ConvTranspose", dyn(2, 4, 4), W3, weights(3), strides=[2, 2], pads=[1, 1, 1, 1]),
    op("ConvTranspose", IMG, In((2, 3, 2, 2))),  # a kernel computed at run time
]

POOL = [
    op("MaxPool", P, kernel_shape=[3, 2], dilations=[2, 2]),
    op("MaxPool", P, kernel_shape=[2, 2], strides=[2, 1], dilations=[2, 3], pads=[1, 0, 1, 1]),
    op("MaxPool", Q, kernel_shape=[2, 3], strides=[2, 2], dilations=[2, 1], ceil_mode=1),
    op("MaxPool", In((1, 2, 6, 6), "int", np.int8), kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    *[op("AveragePool", P, kernel_shape=[3, 3], dilations=[2, 1], pads=[1, 1, 2, 0],
         count_include_pad=i, opset=19) for i in (0, 1)],
    op("AveragePool", P, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1,
       count_include_pad=1),
    op("LpPool", P, kernel_shape=[2, 3], tol=LOOSE),
    op("LpPool", P, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], p=1),
    op("LpPool", P, kernel_shape=[2, 2], dilations=[2, 2], p=3, tol=LOOSE),
    op("LpPool", P, kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, tol=LOOSE),
    op("LpPool", P, kernel_shape=[3, 3], auto_pad="SAME_UPPER", tol=LOOSE),
    # the indices of the maxima (row-major, or column-major with storage_order)
    op("MaxPool", Q, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], outputs=2),
    op("MaxPool", Q, kernel_shape=[2, 3], strides=[1, 2], storage_order=1, outputs=2),
    op("MaxPool", Q, kernel_shape=[2, 2], dilations=[2, 2], ceil_mode=1, strides=[2, 2],
       outputs=2),
    op("MaxPool", dyn(3, 5, 5), kernel_shape=[2, 2], outputs=2),
    op("MaxPool", In((2, 3, 9)), kernel_shape=[3], strides=[2], pads=[1, 1], outputs=2),
]

LAYOUT = [
    *[op("DepthToSpace", In((1, 8, 2, 3)), blocksize=2, mode=m) for m in ("DCR", "CRD")],
    op("DepthToSpace", dyn(9, 2, 2), blocksize=3),
    op("SpaceToDepth", In((1, 2, 4, 6)), blocksize=2),
    op("SpaceToDepth", dyn(3, 6, 3), blocksize=3),
    op("Tile", A, i64(2, 1, 3)),
    op("Tile", A, i64(1, 0, 2)),
    op("Tile", dyn(3), i64(3, 5)),
    op("Split", In((2, 6)), i64(2, 0, 4), axis=1, outputs=3),
    op("Split", In((7, 2)), outputs=3, num_outputs=3),
    op("Slice", In((10, 4)), i64(1, 0), i64(INT_MAX, 4), i64(0, 1), i64(3, 2)),
    op("Slice", A, i64(-1, 3), i64(-INT_MAX, 0), i64(1, 2), i64(-1, -2)),
    op("Slice", A, i64(3), i64(1), i64(2)),  # empty
    op("Slice", dyn(6), i64(5, 0), i64(0, 1), i64(1, 0), i64(-2, 1)),
]

SHAPES = [
    op("Trilu", In((4, 5))),
    op("Trilu", In((2, 4, 3)), np.array(-1, np.int64), upper=0),
    op("Trilu", In((3, 5)), np.array(2, np.int64)),
    op("Trilu", In((3, 4)), In((), "int", np.int64), upper=0),  # k computed at run time
    op("Trilu", dyn(5), np.array(1, np.int64)),
    op("Trilu", In((3, 3), "int", np.int64), upper=0),
    op("EyeLike", In((3, 4))),
    op("EyeLike", In((4, 3), "int", np.int32), k=-1, dtype=TensorProto.INT64),
    op("EyeLike", dyn(3), k=1),
    op("Size", A),
    op("Size", dyn(3, 4)),
    graph("Shape-ConstantOfShape",
          [helper.make_node("Shape", ["x"], ["s"]),
           helper.make_node("ConstantOfShape", ["s"], ["z"],
                            value=onnx.numpy_helper.from_array(f32(2.5))),
           helper.make_node("Add", ["x", "z"], ["y"])], {"x": dyn(3)}),
    graph("Range-Add", [helper.make_node("Range", ["a", "b", "d"], ["r"]),
                        helper.make_node("Add", ["x", "r"], ["y"])],
          {"x": In((2, 4))}, {k: np.array(v, F32) for k, v in (("a", 1), ("b", 3), ("d", 0.5))}),
]

EINSUM = [
    op("Einsum", In((3, 4)), In((4, 5)), equation="ij,jk->ik"),
    op("Einsum", In((2, 3, 4)), In((2, 4, 5)), equation="bij,bjk->bik"),
    op("Einsum", In((3, 4)), In((5, 4)), equation="ij,kj"),
    op("Einsum", In((3, 3)), equation="ii->i"),
    op("Einsum", In((3, 3)), equation="ii"),
    op("Einsum", In((2, 3, 4)), equation="...ij->...ji"),
    op("Einsum", In((5,)), In((5,)), equation="i,i"),
    op("Einsum", In((2, 3)), In((4, 3, 5)), In((2, 5)), equation="bn,anm,bm->ba"),
    op("Einsum", In((2, 1, 3, 4)), In((1, 5, 4, 2)), equation="...ij,...jk->...ik"),
    op("Einsum", In((3,)), In((4,)), equation="i,j->ij"),
    op("Einsum", In((2, 3), "int", np.int64), In((3, 2), "int", np.int64), equation="ij,jk"),
    op("Einsum", dyn(3), In((3, 4)), equation="bi,ij->bj"),
]

CASES: list[Case] = [*PAD, *RESIZE, *CONV_TRANSPOSE, *POOL, *LAYOUT, *SHAPES, *EINSUM]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_operator(case: Case) -> None:
    check(case)


# ------------------------------------------------------------------ what is refused


@pytest.mark.parametrize(("case", "why"), [
    (op("Resize", IMG, None, In((4,))), "scales computed at run time"),
    (op("Resize", IMG, None, f32(1, 1, 2, 2), mode="cubic", antialias=1,
        coordinate_transformation_mode="bogus"), "coordinate_transformation_mode"),
    (op("Resize", In((1, 1, 3, 3), "int", np.int32), None, f32(1, 1, 2, 2), mode="linear"),
     "floats only"),
    (op("Resize", IMG, None, f32(1, 1, 1, 1.4)), "float32 and float64 arithmetic disagree"),
    (op("Range", np.array(0, np.int64), In((), "int", np.int64), np.array(1, np.int64)),
     "its length must be known at import"),
    (op("Slice", dyn(6), i64(0), i64(4), i64(0), i64(2)), "step 2 of a dynamic dimension"),
    (op("Pad", dyn(3), i64(-1, 0, 0, 0)), "negative pads along the dynamic axis 0"),
    (op("ConvTranspose", IMG, W3, strides=[2, 2], output_shape=[12, 14], auto_pad="SAME_UPPER"),
     "larger than its full output"),
    (op("MaxPool", P, kernel_shape=[2, 2], dilations=[2, 2], auto_pad="SAME_UPPER"),
     "auto_pad=SAME_UPPER and dilations"),
    (op("Einsum", dyn(2), equation="ii->i"), "Einsum diagonal of sizes None and 2"),
], ids=lambda x: x.id if isinstance(x, Case) else "")
def test_refused(case: Case, why: str) -> None:
    assert why in refusal(case)


def test_constant_of_shape_of_data() -> None:
    """A shape read from a tensor's values (not from `Shape`) is refused, saying why."""
    model = graph("ConstantOfShape-data", [helper.make_node("ConstantOfShape", ["s"], ["y"])],
                  {"s": In((2,), "int", np.int64)}).model()
    with pytest.raises(ir.DlvmError, match="shape must be known at import"):
        dlvm.onnx.load(model)
