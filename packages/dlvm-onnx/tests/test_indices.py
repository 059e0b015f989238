"""Indices, axes and target shapes that nodes take from attributes and constants, held to
ONNX's rules: a model that ONNX Runtime refuses for one of them is refused at import with one
line naming the node — whichever way the node would be imported (converted, evaluated on
constants, or computed on shapes) and even when it has no conversion at all.

The models declare the types of their outputs, so that ONNX's checker lets them through and
the importer's own checks are what refuses them. What ONNX Runtime accepts at the edges
(negative indices from the end, Slice's clamping, an axis named twice where that is allowed)
is compared with it in test_operators.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import dlvm.ir as ir
import dlvm.onnx

ort = pytest.importorskip("onnxruntime")

INT_MAX = np.iinfo(np.int64).max


def i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


@dataclass
class Bad:
    """A model that breaks a rule at its node `the_node`, and the words that say which."""

    id: str
    nodes: list[onnx.NodeProto]
    words: str
    x: list[int | str] = field(default_factory=lambda: [4, 3])
    consts: dict[str, np.ndarray] = field(default_factory=dict)
    outputs: dict[str, int] = field(default_factory=lambda: {"y": 2})  # name: rank
    opset: int = 18

    def model(self) -> onnx.ModelProto:
        outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                 [f"{name}_{k}" for k in range(rank)])
                   for name, rank in self.outputs.items()]
        graph = helper.make_graph(
            self.nodes, "bad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, self.x)],
            outputs, [onnx.numpy_helper.from_array(v, k) for k, v in self.consts.items()])
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])


def node(op_type: str, inputs: list[str], outputs: tuple[str, ...] = ("y",),
         **attrs: Any) -> onnx.NodeProto:
    return helper.make_node(op_type, inputs, list(outputs), name="the_node", **attrs)


def one(op_type: str, words: str, *consts: np.ndarray | None, rank: int = 2,
        outputs: int = 1, x: list[int | str] | None = None, id: str | None = None,
        opset: int = 18, **attrs: Any) -> Bad:
    """One node reading x and the constants c1, c2, … (None: an input left out)."""
    names = ["x"] + [f"c{i}" if c is not None else "" for i, c in enumerate(consts, 1)]
    outs = ("y",) if outputs == 1 else tuple(f"y{k}" for k in range(outputs))
    label = id or f"{op_type}-{words.split()[0]}"
    return Bad(label, [node(op_type, names, outs, **attrs)], words, x or [4, 3],
               {f"c{i}": c for i, c in enumerate(consts, 1) if c is not None},
               dict.fromkeys(outs, rank), opset)


n = helper.make_node
BAD = [
    # indices
    one("Gather", "index 7 is out of range for axis 0 of size 4 (ONNX allows -4 to 3)",
        i64(7), id="Gather-past-the-end"),
    one("Gather", "index -5 is out of range for axis 0 of size 4", i64(-5),
        id="Gather-before-the-start"),
    one("Gather", "index 3 is out of range for axis 1 of size 3", np.array(3, np.int64),
        rank=1, axis=1, id="Gather-scalar-index-axis-1"),
    one("Gather", "axis 2 is out of range for rank 2", i64(0), axis=2, id="Gather-axis"),
    Bad("Gather-of-constants", [node("Gather", ["w", "i"], ("g",)), n("Add", ["x", "g"], ["y"])],
        "index 7 is out of range", consts={"w": np.ones((4, 3), np.float32), "i": i64(7)}),
    Bad("Gather-of-a-shape", [n("Shape", ["x"], ["s"]), node("Gather", ["s", "i"], ("g",)),
                              n("Reshape", ["x", "g"], ["y"])],
        "index 2 is out of range for axis 0 of size 2", x=["batch", 3],
        consts={"i": i64(2)}, outputs={"y": 1}),
    one("GatherElements", "index 5 is out of range for axis 1 of size 3",
        np.array([[0], [5], [1], [2]], np.int64), axis=1),
    one("GatherND", "index 3 is out of range for axis 1 of size 3",
        np.array([[0, 3]], np.int64), rank=1),
    # axes
    one("Softmax", "axis 2 is out of range for rank 2 (ONNX allows -2 to 1)", axis=2),
    one("LogSoftmax", "axis -3 is out of range for rank 2", axis=-3),
    one("Flatten", "axis 3 is out of range for rank 2 (ONNX allows -2 to 2)", axis=3),
    one("LayerNormalization", "axis 2 is out of range", np.ones(3, np.float32), axis=2),
    one("Concat", "axis -3 is out of range for rank 2", np.ones((4, 3), np.float32), axis=-3),
    one("Concat", "inputs of ranks 2 and 1", np.ones(3, np.float32), axis=0,
        id="Concat-ranks"),
    one("Concat", "inputs of sizes 3 and 2 along axis 1", np.ones((2, 2), np.float32),
        axis=0, id="Concat-sizes"),
    one("ReduceSum", "axis 2 is out of range for rank 2", i64(2)),
    one("ReduceMean", "axis -3 is out of range for rank 2", i64(-3)),
    one("ReduceMax", "axis 2 is out of range for rank 2", axes=[2], opset=13,
        id="ReduceMax-attribute"),
    one("ArgMax", "axis 5 is out of range for rank 2", axis=5),
    one("Squeeze", "axis 0 has size 4, not 1", i64(0), rank=1),
    one("Squeeze", "axis 2 is out of range for rank 2", i64(2), rank=1, id="Squeeze-axis"),
    one("Unsqueeze", "axis 3 is out of range for rank 3", i64(3), rank=3),
    one("Unsqueeze", "refer to axis 0 more than once", i64(0, -4), rank=4,
        id="Unsqueeze-twice"),
    one("Transpose", "perm [0, 0] is not a permutation", perm=[0, 0]),
    one("Transpose", "perm [1, 0, 2] is not a permutation of the 2 axes", perm=[1, 0, 2],
        id="Transpose-rank"),
    # Slice: starts and ends are clamped, the rest is checked
    one("Slice", "a step cannot be 0", i64(0), i64(2), i64(0), i64(0)),
    one("Slice", "refer to axis 0 more than once", i64(0, 1), i64(2, 2), i64(0, -2),
        id="Slice-twice"),
    one("Slice", "axis 2 is out of range for rank 2", i64(0), i64(2), i64(2),
        id="Slice-axis"),
    one("Slice", "starts, ends, axes and steps of different lengths", i64(0, 0), i64(2),
        id="Slice-lengths"),
    # Split
    one("Split", "split sizes [1, 2] add up to 3, not to the size 4 of axis 0", i64(1, 2),
        outputs=2),
    one("Split", "split sizes [5, -1] must not be negative", i64(5, -1), outputs=2,
        id="Split-negative"),
    one("Split", "3 split sizes [1, 1, 2] for 2 outputs", i64(1, 1, 2), outputs=2,
        id="Split-count"),
    one("Split", "both the split sizes and num_outputs are given", i64(2, 2), outputs=2,
        num_outputs=2, id="Split-both"),
    one("Split", "5 cannot be split into 4 parts of 2", outputs=4, num_outputs=4, x=[5, 3],
        id="Split-num_outputs"),
    # target shapes
    one("Reshape", "the shape [-1, -1] has more than one -1", i64(-1, -1)),
    one("Reshape", "the shape [-2, -6] has a size below -1", i64(-2, -6), id="Reshape-below"),
    one("Reshape", "copies (0) a dimension past the input's rank 2", i64(12, 1, 0), rank=3,
        id="Reshape-zero"),
    one("Reshape", "the shape [-1, 5] does not fit 12 elements", i64(-1, 5),
        id="Reshape-misfit"),
    one("Reshape", "the shape [2, 2] holds 4 elements, the input 12", i64(2, 2),
        id="Reshape-count"),
    one("Reshape", "does not fit the static sizes", i64(0, 5, -1), x=["batch", 12], rank=3,
        id="Reshape-dynamic-misfit"),
    one("Expand", "the shape [5, 3] does not broadcast with the input's [4, 3]", i64(5, 3)),
    one("Expand", "the shape [-2, 3] has a negative size -2", i64(-2, 3),
        id="Expand-negative"),
    one("Tile", "repeats [-1, 2] must not be negative", i64(-1, 2)),
    one("Pad", "3 pads for 2 axes", i64(1, 1, 1)),
    one("Pad", "remove more than the 4 elements of axis 0", i64(-3, 0, -2, 0),
        id="Pad-crop"),
    Bad("ConstantOfShape-negative", [node("ConstantOfShape", ["s"], ("k",)),
                                     n("Add", ["x", "k"], ["y"])],
        "the shape [-1, 3] has a negative size -1", consts={"s": i64(-1, 3)}),
    # windows
    one("Conv", "strides [0] must be positive", np.ones((2, 4, 1), np.float32), rank=3,
        x=[1, 4, 3], strides=[0]),
    one("Conv", "pads [-1, 0] must not be negative", np.ones((2, 4, 1), np.float32), rank=3,
        x=[1, 4, 3], pads=[-1, 0], id="Conv-pads"),
    one("Conv", "4 input channels, but the kernel takes 4 per group × 3 groups",
        np.ones((3, 4, 1), np.float32), rank=3, x=[1, 4, 3], group=3, id="Conv-group"),
    one("MaxPool", "kernel_shape [0] must be positive", rank=3, x=[1, 4, 3],
        kernel_shape=[0]),
]


@pytest.mark.parametrize("bad", BAD, ids=lambda b: b.id)
def test_a_rule_broken_at_a_node_is_refused_naming_it(bad: Bad) -> None:
    model = bad.model()
    with pytest.raises(ir.DlvmError) as info:
        dlvm.onnx.load(model)
    message = str(info.value)
    assert "node 'the_node'" in message and bad.words in message, message
    assert len(message.splitlines()) == 1
    with pytest.raises(Exception):  # noqa: B017 - ONNX Runtime refuses it too, its own way
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        feeds = {"x": np.ones([2 if isinstance(d, str) else d for d in bad.x], np.float32)}
        session.run(None, feeds)


def test_every_broken_node_is_reported_at_once() -> None:
    model = Bad("two", [helper.make_node("Gather", ["x", "i"], ["g"], name="first"),
                        helper.make_node("Transpose", ["g"], ["y"], name="second", perm=[0, 0])],
                "", consts={"i": i64(9)}).model()
    model.graph.node[1].input[0] = "x"
    with pytest.raises(ir.DlvmError) as info:
        dlvm.onnx.load(model)
    lines = str(info.value).splitlines()
    assert len(lines) == 2
    assert "node 'first' (Gather): index 9" in lines[0]
    assert "node 'second' (Transpose): perm [0, 0]" in lines[1]


def test_a_model_whose_inference_fails_says_which_node_and_why() -> None:
    """Without declared output types, ONNX's own inference finds the broken node first; its
    words are reported rather than the checker's (a missing output type)."""
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["x"], ["y"], name="the_node", axis=2)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(ir.DlvmError, match=r"the_node.*'axis' must be in \[-2 , 1\]"):
        dlvm.onnx.load(model)


def test_a_division_by_zero_in_shape_arithmetic_is_refused() -> None:
    """`Shape → Gather → Div 0 → Reshape` on a dynamic batch: a clear error of the node,
    not Python's ZeroDivisionError (ONNX Runtime is not asked: integer division by zero
    may stop its process)."""
    nodes = [n("Shape", ["x"], ["s"]), n("Div", ["s", "zero"], ["q"], name="the_node"),
             n("Reshape", ["x", "q"], ["y"])]
    bad = Bad("div", nodes, "", x=["batch", 3], consts={"zero": i64(1, 0)})
    with pytest.raises(ir.DlvmError, match=r"the_node.*a division by zero"):
        dlvm.onnx.load(bad.model())


BIG = 10**5  # BIG × BIG float32: 40 GB, were it made
TOO_LARGE = [
    ("ConstantOfShape", [node("ConstantOfShape", ["s"], ("k",))], {"s": i64(BIG, BIG)}),
    ("Expand", [node("Expand", ["one", "s"], ("k",))],
     {"one": np.ones((1, 1), np.float32), "s": i64(BIG, BIG)}),
    ("Tile", [node("Tile", ["one", "r"], ("k",))],
     {"one": np.ones((1, 1), np.float32), "r": i64(BIG, BIG)}),
    ("Pad", [node("Pad", ["one", "p"], ("k",))],
     {"one": np.ones((1, 1), np.float32), "p": i64(BIG, BIG, 0, 0)}),
    ("Range", [node("Range", ["a", "b", "d"], ("k",))],
     {"a": np.array(0, np.float32), "b": np.array(1e10, np.float32),
      "d": np.array(1, np.float32)}),
]


@pytest.mark.parametrize("nodes, consts", [(n_, c) for _, n_, c in TOO_LARGE],
                         ids=[i for i, _, _ in TOO_LARGE])
def test_a_constant_too_large_to_make_at_import_is_refused_before_it_is_made(
        nodes: list[onnx.NodeProto], consts: dict[str, np.ndarray]) -> None:
    bad = Bad("big", [*nodes, n("Add", ["x", "k"], ["y"])], "", x=[1], consts=consts,
              outputs={"y": 2})
    with pytest.raises(ir.DlvmError, match=r"the_node.*would make a constant of \d+ elements"):
        dlvm.onnx.load(bad.model(), freeze=True)  # the float initializers as constants
