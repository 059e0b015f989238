"""Shapes computed from dynamic sizes at import: a shape vector remembers which tensor's
dimension each dynamic size is, so `Expand` to it broadcasts at run time; the `Equal`/`Where`
pattern exporters write around `Expand` targets works on shape vectors; and named
dimensions may be given a size (`dims`), as ONNX Runtime's free dimension overrides do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import dlvm.ir as ir
import dlvm.onnx
from dlvm.onnx.testing import Case, check, dyn, graph, i64

n = helper.make_node

CASES: list[Case] = [
    graph("Expand-to-a-dynamic-shape", [
        n("Shape", ["x"], ["s"]),
        n("Expand", ["c", "s"], ["y"])],
        {"x": dyn(3, 4)}, {"c": np.arange(12, dtype=np.float32).reshape(1, 3, 4)}),
    graph("Expand-booleans-to-a-dynamic-shape", [
        n("Shape", ["x"], ["s"]),
        n("Greater", ["c", "zero"], ["m"]),
        n("Expand", ["m", "s"], ["y"])],
        {"x": dyn(4)}, {"c": np.array([[1, -1, 2, -2]], np.float32),
                        "zero": np.array(0, np.float32)}),
    graph("Expand-with-the-Equal-Where-pattern", [  # how PyTorch writes tensor.expand
        n("Shape", ["x"], ["s0"]),
        n("Gather", ["s0", "zero"], ["b"], axis=0),
        n("Unsqueeze", ["b", "zero1"], ["b1"]),
        n("Concat", ["b1", "four"], ["target"], axis=0),
        n("Reshape", ["target", "minus1"], ["flat"]),
        n("Shape", ["flat"], ["len"]),
        n("ConstantOfShape", ["len"], ["ones"], value=onnx.numpy_helper.from_array(
            np.array([1], np.int64))),
        n("Mul", ["ones", "minus1"], ["neg"]),
        n("Equal", ["flat", "neg"], ["eq"]),
        n("Where", ["eq", "ones", "flat"], ["shape"]),
        n("Expand", ["c", "shape"], ["y"])],
        {"x": dyn(3)}, {"c": np.array([[1, 2, 3, 4]], np.float32), "zero": np.array(0),
                        "zero1": i64(0), "four": i64(4), "minus1": i64(-1)}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_operator(case: Case) -> None:
    check(case)


def sequence_model() -> onnx.ModelProto:
    g = helper.make_graph(
        [n("Shape", ["x"], ["s"]),
         n("Slice", ["table", "zero", "s1", "one"], ["rows"]),  # table[:, :seq]
         n("Add", ["x", "rows"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq"])],
        [onnx.numpy_helper.from_array(np.arange(16, dtype=np.float32)[None], "table"),
         onnx.numpy_helper.from_array(i64(0), "zero"),
         onnx.numpy_helper.from_array(i64(1), "one")])
    g.node.insert(1, n("Slice", ["s", "one", "two"], ["s1"]))
    g.initializer.append(onnx.numpy_helper.from_array(i64(2), "two"))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_a_named_dimension_given_a_size() -> None:
    """A slice as long as a dynamic sequence is refused with the sequence dynamic, and
    imported once `dims` gives the sequence a size."""
    with pytest.raises(ir.DlvmError, match="known at import"):
        dlvm.onnx.load(sequence_model())
    module = dlvm.onnx.load(sequence_model(), dims={"seq": 5})
    x = np.ones((3, 5), np.float32)
    np.testing.assert_array_equal(ir.compile(module, "interp")["main"](x), x + np.arange(5))
    assert "<_ x 5 x f32>" in str(module)


@pytest.mark.parametrize(("dims", "words"), [({"time": 5}, "no dimension named 'time'"),
                                             ({"seq": 0}, "must be a size")])
def test_a_bad_dimension_size_is_refused(dims: dict[str, int], words: str) -> None:
    with pytest.raises(ir.DlvmError, match=words):
        dlvm.onnx.load(sequence_model(), dims=dims)


def test_the_command_gives_dimensions_sizes(tmp_path: Path) -> None:
    path = tmp_path / "seq.onnx"
    onnx.save(sequence_model(), path)
    done = subprocess.run([sys.executable, "-m", "dlvm.cli", "onnx", "import", str(path),
                           "--dim", "seq=5"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "<_ x 5 x f32>" in done.stdout
    bad = subprocess.run([sys.executable, "-m", "dlvm.cli", "onnx", "import", str(path),
                          "--dim", "seq"], capture_output=True, text=True)
    assert bad.returncode != 0 and "expected NAME=SIZE, found 'seq'" in bad.stderr
    assert "Traceback" not in bad.stderr
