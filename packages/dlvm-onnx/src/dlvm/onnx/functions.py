"""Operators that ONNX defines as functions of other operators, expanded into those.

An operator with no converter of its own (`SwiGLU`, `CausalConvWithState`, `CenterCropPad`,
`HannWindow`, …) may have a body in its schema: a fixed `FunctionProto`, or one the schema
builds for the node's attributes and input types (a context-dependent function). The body's
nodes replace the node, as ONNX's reference runtime runs them: the function's inputs and
outputs become the node's, its other values get names of their own under the node's, and an
attribute that refers to one of the function's (`ref_attr_name`) takes the node's value, or the
function's default, or is left out. Bodies with subgraphs (`Scan`, `Loop`, `If`) are expanded
too; their nodes are then refused one by one, naming the operator that stops them.
"""

from __future__ import annotations

import onnx
import onnx.defs
from dlvm.ir.types import TensorType
from onnx import helper

from .context import DTYPES

ONNX_TYPES = {dt: code for code, dt in DTYPES.items()}


def type_proto(t: TensorType | None) -> onnx.TypeProto:
    """What the schema's function builder needs to know of an input: element type and
    shape (dynamic sizes unnamed); an absent or non-tensor input as an empty type."""
    if t is None or t.dtype not in ONNX_TYPES:
        return onnx.TypeProto()
    return helper.make_tensor_type_proto(ONNX_TYPES[t.dtype], list(t.shape))


def function_body(node: onnx.NodeProto, opset: int, input_types: list[TensorType | None]
                  ) -> onnx.FunctionProto | None:
    """The body ONNX gives `node`'s operator at `opset`, or None when it has none."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except onnx.defs.SchemaError:
        return None
    data: bytes | None = None
    if schema.has_function and any(v <= opset for v in schema.function_opset_versions):
        data = schema.get_function_with_opset_version(opset)
    elif schema.has_context_dependent_function and any(
            v <= opset for v in schema.context_dependent_function_opset_versions):
        try:
            data = schema.get_context_dependent_function_with_opset_version(
                opset, node.SerializeToString(),
                [type_proto(t).SerializeToString() for t in input_types])
        except Exception:  # the builder rejects the node: no body for it
            return None
    if not data:
        return None
    body = onnx.FunctionProto()
    body.ParseFromString(data)
    # the schema's defaults, for attributes the body refers to but the node leaves out
    declared = {a.name for a in body.attribute_proto}
    for name, attr in schema.attributes.items():
        if name not in declared and attr.default_value.type != onnx.AttributeProto.UNDEFINED:
            default = body.attribute_proto.add()
            default.CopyFrom(attr.default_value)
            default.name = name
    return body if body.node else None


def expand(node: onnx.NodeProto, body: onnx.FunctionProto) -> list[onnx.NodeProto]:
    """`body`'s nodes in place of `node`, with names of their own under the node's."""
    prefix = f"{node.name or node.output[0]}__"
    names: dict[str, str] = {"": ""}
    for k, x in enumerate(body.input):
        names[x] = node.input[k] if k < len(node.input) else ""
    for k, x in enumerate(body.output):
        names[x] = node.output[k] if k < len(node.output) else prefix + x

    def name(x: str) -> str:
        return names.get(x, prefix + x)

    given = {a.name: a for a in node.attribute}
    defaults = {a.name: a for a in body.attribute_proto}
    nodes = []
    for inner in body.node:
        out = onnx.NodeProto()
        out.CopyFrom(inner)
        out.name = prefix + (inner.name or inner.output[0])
        del out.input[:]
        out.input.extend(name(x) for x in inner.input)
        del out.output[:]
        out.output.extend(name(x) for x in inner.output)
        del out.attribute[:]
        for a in inner.attribute:
            if not a.ref_attr_name:
                out.attribute.append(a)
                continue
            source = given.get(a.ref_attr_name) or defaults.get(a.ref_attr_name)
            if source is not None:
                value = onnx.AttributeProto()
                value.CopyFrom(source)
                value.name = a.name
                out.attribute.append(value)
        nodes.append(out)
    return nodes
