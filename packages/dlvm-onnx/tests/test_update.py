"""`dlvm onnx update`'s parameters: an array that is not real numbers of the initializer's
shape — complex (its imaginary part would be dropped), strings (they would be parsed), booleans,
objects, records, dates, NaN, values a float32 cannot hold — is refused with one line, and
the output is not written."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import dlvm.ir as ir
from dlvm.onnx.parameters import read_parameters
from dlvm.onnx.writeback import update_model

OLD = np.arange(6, dtype=np.float32).reshape(2, 3)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """y = x · w, with the parameter w."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        [onnx.numpy_helper.from_array(OLD, "w")])
    path = tmp_path_factory.mktemp("model") / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    return path


NOT_REAL = [
    ("complex", OLD.astype(np.complex64) + 1j, "holds complex numbers (complex64)"),
    ("strings", OLD.astype(str), "holds strings"),
    ("bytes", OLD.astype(bytes), "holds byte strings"),
    ("booleans", OLD > 2, "holds booleans (bool)"),
    ("records", np.zeros((2, 3), [("a", np.float32)]), "holds records"),
    ("dates", np.zeros((2, 3), "datetime64[s]"), "holds dates"),
    ("NaN", np.where(OLD > 2, np.nan, OLD), "holds NaN or infinite values"),
    ("beyond-float32", OLD.astype(np.float64) * 1e300, "values beyond the range of float32"),
    ("inexact-integers", np.full((2, 3), 2**40 + 1, np.int64),
     "integers that float32 cannot hold exactly"),
    ("shape", np.zeros((3, 2), np.float32), "'w' has shape (3, 2), the model's (2, 3)"),
]


@pytest.mark.parametrize("array, words", [(a, w) for _, a, w in NOT_REAL],
                         ids=[i for i, _, _ in NOT_REAL])
def test_an_array_that_is_not_real_numbers_of_the_shape_is_refused(
        model: Path, tmp_path: Path, array: np.ndarray, words: str) -> None:
    np.savez(tmp_path / "p.npz", w=array)
    with pytest.raises(ir.DlvmError) as info:
        update_model(str(model), str(tmp_path / "p.npz"), str(tmp_path / "t.onnx"))
    assert words in str(info.value) and len(str(info.value).splitlines()) == 1
    assert not (tmp_path / "t.onnx").exists()


def test_an_array_of_objects_is_refused_without_unpickling(tmp_path: Path) -> None:
    np.savez(tmp_path / "p.npz", w=np.array([[object()] * 3] * 2, dtype=object))
    with pytest.raises(ir.DlvmError, match="'w' holds Python objects"):
        read_parameters(str(tmp_path / "p.npz"), {"w": OLD})


@pytest.mark.parametrize("content, words", [
    (b"not a zip", "it is not an .npz archive"),
    (None, "it is a single array (.npy), not an .npz archive"),
])
def test_a_file_that_is_not_an_archive_is_refused(tmp_path: Path, content: bytes | None,
                                                  words: str) -> None:
    path = tmp_path / "p.npz"
    if content is None:
        np.save(tmp_path / "p.npy", OLD)
        (tmp_path / "p.npy").rename(path)
    else:
        path.write_bytes(content)
    with pytest.raises(ir.DlvmError, match=re.escape(words)):
        read_parameters(str(path), {"w": OLD})


def test_real_numbers_are_cast_to_the_initializers_type(model: Path, tmp_path: Path) -> None:
    new = np.arange(6, dtype=np.int64).reshape(2, 3) * 2
    np.savez(tmp_path / "p.npz", w=new)
    update_model(str(model), str(tmp_path / "p.npz"), str(tmp_path / "t.onnx"))
    stored = onnx.numpy_helper.to_array(onnx.load(tmp_path / "t.onnx").graph.initializer[0])
    assert stored.dtype == np.float32
    np.testing.assert_array_equal(stored, new)
