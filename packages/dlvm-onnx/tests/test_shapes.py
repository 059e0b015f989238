"""The shapes a model declares — of its inputs, outputs, intermediate values, initializers and
constants — are sizes: a negative one or one of more elements than DLVM's largest size is
refused with one line naming the value, and a named or empty dimension is dynamic (`_`).

ONNX Runtime runs a negative `dim_value` as if it were dynamic; DLVM refuses it instead of
guessing (a model that means a dynamic size names it, with `dim_param`).
"""

from __future__ import annotations

from collections.abc import Callable

import onnx
import pytest
from onnx import TensorProto, helper

import dlvm.ir as ir
import dlvm.onnx

HUGE = 2**32


def relu_model(x: list[int | str | None] | None = (4, 3),  # type: ignore[assignment]
               y: list[int | str | None] | None = None) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, x)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, y if y is not None else x)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def with_value_info(dims: list[int]) -> onnx.ModelProto:
    model = relu_model()
    model.graph.value_info.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, dims))
    return model


def with_initializer(tensor: onnx.TensorProto) -> onnx.ModelProto:
    model = relu_model()
    model.graph.node.append(helper.make_node("Add", ["y", tensor.name], ["z"]))
    model.graph.initializer.append(tensor)
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("z", TensorProto.FLOAT,
                                                                 [4, 3]))
    return model


def with_constant(tensor: onnx.TensorProto) -> onnx.ModelProto:
    model = relu_model()
    model.graph.node.append(helper.make_node("Constant", [], ["k"], name="the_constant",
                                             value=tensor))
    model.graph.node.append(helper.make_node("Add", ["y", "k"], ["z"]))
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("z", TensorProto.FLOAT,
                                                                 [4, 3]))
    return model


def bad_tensor(name: str, dims: list[int], values: list[float]) -> onnx.TensorProto:
    tensor = onnx.TensorProto(name=name, data_type=TensorProto.FLOAT)
    tensor.dims.extend(dims)
    tensor.float_data.extend(values)
    return tensor


REFUSED: list[tuple[str, Callable[[], onnx.ModelProto], str]] = [
    ("input-negative", lambda: relu_model([-5, 4]),
     "input 'x' of shape [-5, 4] has a negative size -5 (a dynamic size is a name"),
    ("input-too-many-elements", lambda: relu_model([HUGE, HUGE]),
     f"input 'x' of shape [{HUGE}, {HUGE}] has {HUGE * HUGE} elements, beyond the largest"),
    ("input-without-shape", lambda: relu_model(None, [4, 3]),
     "input 'x' has no shape (DLVM needs its rank"),
    ("output-negative", lambda: relu_model([4, 3], [4, -1]),
     "output 'y' of shape [4, -1] has a negative size -1"),
    ("value_info-negative", lambda: with_value_info([4, -3]),
     "value 'y' of shape [4, -3] has a negative size -3"),
    ("initializer-negative", lambda: with_initializer(bad_tensor("w", [-1, 3], [1.0] * 3)),
     "initializer 'w' has a negative size -1"),
    ("initializer-too-many-elements",
     lambda: with_initializer(bad_tensor("w", [HUGE, HUGE], [1.0])),
     "initializer 'w' has 18446744073709551616 elements"),
    ("initializer-short-of-data", lambda: with_initializer(bad_tensor("w", [4, 3], [1.0] * 5)),
     "float_data size (5) is too small for the declared shape"),  # ONNX's checker's words
    ("constant-negative", lambda: with_constant(bad_tensor("", [-4, 3], [1.0] * 12)),
     "node 'the_constant' (Constant): its value has a negative size -4"),
]


@pytest.mark.parametrize("make, words", [(m, w) for _, m, w in REFUSED],
                         ids=[i for i, _, _ in REFUSED])
def test_a_shape_that_is_not_sizes_is_refused(make: Callable[[], onnx.ModelProto],
                                              words: str) -> None:
    with pytest.raises(ir.DlvmError) as info:
        dlvm.onnx.load(make())
    message = str(info.value)
    assert words in message and len(message.splitlines()) == 1, message


def test_named_and_empty_dimensions_are_dynamic() -> None:
    model = relu_model(["batch", None, 0, 4])
    module = dlvm.onnx.load(model)
    assert "<_ x _ x 0 x 4 x f32>" in str(module)
