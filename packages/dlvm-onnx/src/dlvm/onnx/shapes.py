"""The shapes a model declares — of its inputs, outputs and intermediate values (value_info),
of its initializers and constants — checked where they are read.

A size is a `dim_value` of 0 or more; a `dim_param` (a name such as `batch`) or a dimension
without either is dynamic, `_` in DLVM. A negative size, or a shape of more elements than
DLVM's largest size (2^63 − 1), is refused with one line naming the value. ONNX Runtime runs a
negative `dim_value` as if it were dynamic; DLVM refuses it rather than guess what was meant.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

import onnx
import onnx.numpy_helper
from dlvm.ir import FrontendError
from dlvm.ir.types import MAX_SIZE

from .errors import Invalid

Dims = tuple[int | None, ...]


def size_problem(dims: Iterable[int | None]) -> str | None:
    """Why sizes cannot be a tensor's (None when they can)."""
    dims = list(dims)
    bad = next((d for d in dims if d is not None and d < 0), None)
    if bad is not None:
        return f"a negative size {bad}"
    count = math.prod(d for d in dims if d is not None)
    if count > MAX_SIZE:
        return f"{count} elements, beyond the largest size ({MAX_SIZE})"
    return None


def declared_dims(info: onnx.ValueInfoProto, what: str, source: str) -> Dims | None:
    """The sizes a tensor's value info declares (None where dynamic); None for no shape."""
    t = info.type.tensor_type
    if not info.type.HasField("tensor_type") or not t.HasField("shape"):
        return None
    dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)
    problem = size_problem(dims)
    if problem is not None:
        hint = " (a dynamic size is a name, dim_param)" if "negative" in problem else ""
        raise FrontendError(f"{source}: error: {what} '{info.name}' of shape "
                            f"{shape_text(dims)} has {problem}{hint}")
    return dims


def shape_text(dims: Dims) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in dims) + "]"


def input_dims(info: onnx.ValueInfoProto, source: str) -> Dims:
    """A graph input's sizes: it must have a shape (DLVM's types have a rank)."""
    dims = declared_dims(info, "input", source)
    if dims is None:
        raise FrontendError(f"{source}: error: input '{info.name}' has no shape (DLVM needs "
                            "its rank; give its dimensions, a name for each dynamic one)")
    return dims


def check_graph(graph: onnx.GraphProto, source: str) -> None:
    """Every shape the graph declares, before ONNX's checker (whose words name neither the
    value nor the problem as well): its inputs have one, and inputs, outputs, value_info,
    initializers and Constant nodes' values have sizes."""
    initialized = {t.name for t in graph.initializer}
    for info in graph.input:
        if info.name not in initialized and info.type.HasField("tensor_type"):
            input_dims(info, source)
    for what, infos in (("input", graph.input), ("output", graph.output),
                        ("value", graph.value_info)):
        for info in infos:
            declared_dims(info, what, source)
    tensors = [(f"initializer '{t.name}'", t) for t in graph.initializer]
    tensors += [(f"node '{node.name or node.output[0]}' (Constant): its value", a.t)
                for node in graph.node if node.op_type == "Constant"
                for a in node.attribute if a.name == "value"]
    for label, tensor in tensors:
        problem = size_problem(tensor.dims)
        if problem is not None:
            raise FrontendError(f"{source}: error: {label} has {problem}")


def tensor_array(tensor: onnx.TensorProto, label: str) -> np.ndarray:
    """A tensor's values (an initializer's, a Constant's), once its shape is known to be a
    tensor's and its data to fit it; else `Invalid`, its words starting with `label`."""
    problem = size_problem(tensor.dims)
    if problem is not None:
        raise Invalid(f"{label} has {problem}")
    try:
        return onnx.numpy_helper.to_array(tensor)
    except Exception as e:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise Invalid(f"{label} cannot be read: its data does not fit its type and shape "
                      f"{list(tensor.dims)} ({first})") from None
