"""An ONNX model as a DLVM module.

    @forward(inputs…, %params: $<model>_params) -> outputs   the graph; initializers are
                                                              the parameters' tuple
    @init_params() -> $<model>_params                         their values (dense literals)
    @main(inputs…) -> outputs                                 forward(inputs, init_params())

With `freeze`, `@main` alone, with the initializers as constants. For a classifier (one input,
one output of class scores [batch x classes]) the module also gets `@loss` (the mean
cross-entropy against one-hot targets), its gradient `@loss_grad` with respect to the
parameters, `@predict` and `@train_step` (one SGD step) with the parameters one by one: what
`dlvm run` fine-tunes. Nodes whose inputs are all known at import are evaluated then (shape
arithmetic, constants); sizes that are dynamic travel as shape vectors.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

import dlvm.ir as ir
import onnx
import onnx.external_data_helper
import onnx.numpy_helper
import onnx.version_converter
from dlvm.ir import Builder, DerivativeDecl, Diagnostic, Value
from dlvm.ir.core import UniqueNames
from dlvm.ir.files import MAX_TEXT_BYTES, read_input
from dlvm.ir.types import I64, AliasDecl, FunctionType, NominalType, TensorType, TupleType, Type
from onnx.reference import ReferenceEvaluator

from . import indices
from .context import DTYPES, NodeContext, ShapeVector, array_literal, dtype_of
from .errors import Invalid, TooLarge, Unsupported
from .functions import expand, function_body
from .ops import CONVERTERS, DOMAINS
from .reductions import hardmax_flattened
from .shapes import check_graph, input_dims, tensor_array

MIN_OPSET = 13
UPGRADE_OPSET = 17  # where models of older opsets are converted to
# protobuf's limit: a larger model keeps its weights in external data files
MAX_MODEL_BYTES = 2 * 1024**3
# the most elements a node evaluated at import may make (64 Mi: 256 MiB of float32)
MAX_FOLDED_ELEMENTS = 2**26
FLOATS = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16)
# inputs that are statistics or settings, not weights to train
FIXED_INPUTS = {"BatchNormalization": (3, 4), "OneHot": (1,),  # OneHot: its depth
                "Resize": (1, 2), "Range": (0, 1, 2)}  # roi and scales; the bounds
SHAPE_OPS = ("Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Cast", "Identity", "Add",
             "Sub", "Mul", "Div", "Reshape", "Equal", "Where")
DATA_OPS = ("Reshape", "Equal", "Where")  # with a tensor among their inputs: a conversion


def sanitize(name: str) -> str:
    """An ONNX name as a DLVM value name: letters, digits, `_` and `.`, not leading digits."""
    out = re.sub(r"[^A-Za-z0-9_.]+", "_", name).strip("_.")
    if not out or not (out[0].isalpha() or out[0] == "_"):
        out = f"v_{out}" if out else "v"
    return out


class Poisoned:
    """The output of a node that could not be converted (its users are skipped)."""


POISON = Poisoned()


class Importer:
    def __init__(self, model: onnx.ModelProto, *, freeze: bool = False,
                 name: str | None = None, source: str = "<onnx>",
                 dims: dict[str, int] | None = None) -> None:
        self.source = source
        self.notes: list[str] = []  # what was done to the model on the way (`--verbose`)
        if dims:
            model = with_dims(model, dims, source)
        model = self.checked(self.upgraded(model))
        self.opset = default_opset(model)
        self.model = model
        self.graph = model.graph
        self.freeze = freeze
        self.name = sanitize(name or self.graph.name or "model")
        self.module = ir.Module(self.name, "raw")
        try:
            self.initializers = {t.name: tensor_array(t, f"initializer '{t.name}'")
                                 for t in self.graph.initializer}
        except Invalid as e:
            raise ir.FrontendError(f"{source}: error: {e}") from None
        self.errors: list[Diagnostic] = []

    def upgraded(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """A model of an opset before `MIN_OPSET` converted by ONNX's version converter to
        `UPGRADE_OPSET` (only upward, which is reliable; downgrades are not), with the IR
        version raised to 4 where the converter made initializers that are not graph inputs
        (IR versions before 4 require that they are)."""
        opset = default_opset(model)
        if opset >= MIN_OPSET or not imports_default_domain(model):
            return model
        if opset < 7:
            model = prelu_slopes_broadcast(model)
        model = hardmax_flattened(model, opset, self.source)
        try:
            converted = onnx.version_converter.convert_version(model, UPGRADE_OPSET)
        except Exception as e:
            raise ir.FrontendError(f"{self.source}: error: the model uses opset {opset}, and "
                                   f"ONNX's version converter cannot raise it to "
                                   f"{UPGRADE_OPSET}: {first_line(e)}") from None
        converted.ir_version = max(converted.ir_version, 4)
        self.notes.append(f"{self.source}: note: opset {opset} converted to opset "
                          f"{UPGRADE_OPSET} by onnx.version_converter")
        return converted

    def checked(self, model: onnx.ModelProto) -> onnx.ModelProto:
        """The model with the shapes ONNX infers, once ONNX's checker accepts it and its
        declared shapes are sizes. Where the checker refuses a model because a node's
        inference failed, the node's error is the one reported: it says what is wrong."""
        check_graph(model.graph, self.source)  # as declared: inference derives the rest
        inference_error = None
        try:
            model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        except Exception as e:
            inference_error = first_line(e)
            with contextlib.suppress(Exception):  # what can be inferred helps the shapes
                model = onnx.shape_inference.infer_shapes(model)
        try:
            onnx.checker.check_model(model)
        except Exception as e:
            why = first_line(e)
            if inference_error and "required but missing" in why:  # a type not inferred
                why = inference_error
            raise ir.FrontendError(f"{self.source}: error: not a valid ONNX model: {why}"
                                   ) from None
        return model

    # ------------------------------------------------------------ the module

    def run(self) -> ir.Module:
        inputs = self.inputs()
        in_types = [self.input_type(i) for i in inputs]
        names = UniqueNames()
        arg_names = [names(sanitize(i.name)) for i in inputs]
        named = [] if self.freeze else self.parameters()
        params = [p for p, _ in named]
        param_names = [n for _, n in named]
        names.taken |= set(param_names)
        params_type: Type | None = None
        if params:
            alias = f"{self.name}_params"
            self.module.add_type(AliasDecl(alias, TupleType(tuple(
                TensorType(self.initializers[p].shape, dtype_of(self.initializers[p]))
                for p in params))))
            params_type = NominalType(alias)
        b = Builder(self.module)
        fn_name = "forward" if params else "main"
        types = [*in_types, *([params_type] if params_type else [])]
        arg_names_all = [*arg_names, *([names("params")] if params_type else [])]
        placeholder = TupleType(())
        fn = b.function(fn_name, types, placeholder, arg_names_all)
        env: dict[str, Any] = dict(self.initializers)
        for i, a in zip(inputs, fn.blocks[0].arguments, strict=False):
            env[i.name] = a
        for k, (p, n) in enumerate(zip(params, param_names, strict=True)):
            env[p] = b.extract(fn.blocks[0].arguments[-1], [k], name=n)
        for node in self.graph.node:
            self.convert(node, env, b, names)
        if self.errors:
            raise ir.DiagnosticError(self.errors)
        outputs = [self.output_value(o.name, env, b) for o in self.graph.output]
        result = outputs[0] if len(outputs) == 1 else b.tuple(outputs)
        b.ret(result)
        fn.type = FunctionType(tuple(types), result.type)
        if params_type is not None:
            self.wrappers(fn, params, param_names, params_type, arg_names)
        return self.module

    def inputs(self) -> list[onnx.ValueInfoProto]:
        return [i for i in self.graph.input if i.name not in self.initializers]

    def parameters(self) -> list[tuple[str, str]]:
        """(initializer, value name) of each parameter: the names `@predict`, `@train_step`
        and `dlvm run`'s checkpoints use, which `dlvm onnx update` maps back."""
        names = UniqueNames(sanitize(i.name) for i in self.inputs())
        return [(p, names(sanitize(p))) for p in self.trainable()]

    def trainable(self) -> list[str]:
        """Float initializers that nodes read as data (not statistics such as a batch
        norm's running mean), in the file's order."""
        fixed = {node.input[i] for node in self.graph.node
                 for i in FIXED_INPUTS.get(node.op_type, ()) if i < len(node.input)}
        used = {x for node in self.graph.node for x in node.input}
        return [t.name for t in self.graph.initializer
                if t.data_type in FLOATS and t.name in used and t.name not in fixed]

    def input_type(self, info: onnx.ValueInfoProto) -> TensorType:
        t = info.type.tensor_type
        dt = DTYPES.get(t.elem_type)
        if dt is None or not info.type.HasField("tensor_type"):
            raise ir.FrontendError(f"{self.source}: error: input '{info.name}' has a type DLVM "
                                   "does not import (tensors of float, int or bool elements)")
        return TensorType(input_dims(info, self.source), dt)

    def output_value(self, name: str, env: dict[str, Any], b: Builder) -> Value:
        v = env.get(name)
        if isinstance(v, Value):
            return v
        if isinstance(v, np.ndarray):
            try:
                return array_literal(b, v)
            except Unsupported as e:
                raise ir.FrontendError(f"{self.source}: error: output '{name}' is a constant "
                                       f"of an {e}, which DLVM does not have") from None
        raise ir.FrontendError(f"{self.source}: error: output '{name}' is not computed by the "
                               "graph")

    # ------------------------------------------------------------ nodes

    def convert(self, node: onnx.NodeProto, env: dict[str, Any], b: Builder,
                names: UniqueNames) -> None:
        label = f"node '{node.name or node.output[0]}' ({node.op_type})"
        inputs = [env.get(x) if x else None for x in node.input]
        if any(x is POISON for x in inputs):
            for o in node.output:
                env[o] = POISON
            return
        missing = [x for x, v in zip(node.input, inputs, strict=True) if x and v is None]
        if missing:
            self.errors.append(Diagnostic(f"{self.source}: {label}: input '{missing[0]}' is "
                                          "not defined before it"))
            for o in node.output:
                env[o] = POISON
            return
        if self.expandable(node, inputs):
            body = function_body(node, self.opset, [self.tensor_type(x) for x in inputs])
            if body is not None:
                for inner in expand(node, body):
                    self.convert(inner, env, b, names)
                return
        try:
            domain = "" if node.domain == "ai.onnx" else node.domain
            if domain != DOMAINS.get(node.op_type, ""):
                if domain:
                    raise Unsupported(f"operators of the domain '{node.domain}'")
                raise Unsupported("no conversion for this operator")
            indices.check(node, [self.shape(x) for x in inputs],
                          [x if isinstance(x, np.ndarray) else None for x in inputs], self.opset)
            results = self.evaluate(node, inputs, b)
        except Invalid as e:
            self.errors.append(Diagnostic(f"{self.source}: {label}: {e}"))
            for o in node.output:
                env[o] = POISON
            return
        except (Unsupported, ir.TypeRuleError) as e:
            known = node.op_type in CONVERTERS or node.op_type in ("Constant", "Shape")
            why = str(e) if known or isinstance(e, TooLarge) else \
                "no conversion for this operator"
            self.errors.append(Diagnostic(f"{self.source}: {label}: {why}"))
            for o in node.output:
                env[o] = POISON
            return
        for o, v in zip(node.output, results, strict=False):
            if not o:
                continue
            if isinstance(v, ir.Instruction) and v.name is None and v.block is not None:
                v.name = names(sanitize(o))
            env[o] = v

    def expandable(self, node: onnx.NodeProto, inputs: list[Any]) -> bool:
        """Whether `node` is converted through its operator's ONNX function body: it has no
        converter, and is not folded at import (inputs all constant)."""
        if node.op_type in CONVERTERS or node.op_type in ("Constant", "Shape", "ConstantOfShape"):
            return False
        return not all(isinstance(x, np.ndarray) for x in inputs if x is not None)

    def tensor_type(self, x: Any) -> TensorType | None:
        """The type of a node's input, where it is a tensor."""
        if isinstance(x, np.ndarray):
            return TensorType(x.shape, dtype_of(x))
        if isinstance(x, ShapeVector):
            return TensorType(x.dims.shape, I64)
        if isinstance(x, Value):
            t = self.module.resolve(x.type)
            return t if isinstance(t, TensorType) else None
        return None

    def shape(self, x: Any) -> tuple[int | None, ...] | None:
        """The shape of a node's input where it is known (None: absent)."""
        if isinstance(x, np.ndarray):
            return x.shape
        if isinstance(x, ShapeVector):
            return x.dims.shape
        if isinstance(x, Value):
            t = self.module.resolve(x.type)
            return t.shape if isinstance(t, TensorType) else None
        return None

    def evaluate(self, node: onnx.NodeProto, inputs: list[Any], b: Builder) -> list[Any]:
        op = node.op_type
        if op == "Constant":
            return [constant_value(node)]
        if op == "Shape":
            return [self.shape_of(node, inputs[0])]
        present = [x for x in inputs if x is not None]
        # ONNX's reference RNN, GRU and LSTM ignore sequence_lens, clip and activations
        if all(isinstance(x, np.ndarray) for x in present) and op not in ("RNN", "GRU", "LSTM"):
            return self.fold(node, inputs)
        if any(isinstance(x, ShapeVector) for x in present) and op in SHAPE_OPS and not (
                op in DATA_OPS and any(isinstance(x, Value) for x in present)):
            return [shape_arithmetic(node, inputs)]
        c = NodeContext(node, inputs, b, self.opset, self.module)
        converter = CONVERTERS.get(op)
        if converter is None and op != "ConstantOfShape":
            raise Unsupported("no conversion for this operator")
        if op == "Expand" and len(inputs) > 1 and isinstance(inputs[1], ShapeVector):
            return [c.broadcast_to(c.value(0), *c.target_shape(1, "the shape"))]
        if op == "ConstantOfShape" and isinstance(inputs[0], ShapeVector):
            value = c.attr("value")
            fill = np.zeros(1, np.float32) if value is None else onnx.numpy_helper.to_array(
                value).reshape(-1)
            return [c.broadcast_to(c.literal(fill[0]), *c.target_shape(0, "the shape"))]
        if converter is None:
            raise Unsupported("no conversion for this operator")
        return converter(c)

    def shape_of(self, node: onnx.NodeProto, x: Any) -> Any:
        if isinstance(x, np.ndarray):
            dims: list[int | None] = list(x.shape)
        elif isinstance(x, Value):
            t = self.module.resolve(x.type)
            assert isinstance(t, TensorType)
            dims = list(t.shape)
        elif isinstance(x, ShapeVector):
            dims = list(x.dims.shape)  # a vector's own shape is known at import
        else:
            raise Unsupported("the shape of an absent input")
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        origins = [(x, k) if d is None and isinstance(x, Value) else None
                   for k, d in enumerate(dims)]
        window = slice(attrs.get("start", 0), attrs.get("end"))
        dims, origins = dims[window], origins[window]
        if all(d is not None for d in dims):
            return np.array(dims, np.int64)
        return ShapeVector(np.array(dims, dtype=object), object_array(origins))

    def fold(self, node: onnx.NodeProto, inputs: list[Any]) -> list[Any]:
        """A node of constant inputs, computed now by ONNX's reference implementation (unless
        it would make a tensor of more than `MAX_FOLDED_ELEMENTS`)."""
        made = indices.folded_elements(node, inputs)
        if made is not None and made > MAX_FOLDED_ELEMENTS:
            raise TooLarge(f"evaluating it at import would make a constant of {made} "
                           f"elements (at most {MAX_FOLDED_ELEMENTS})")
        names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
        outs = [f"out{i}" for i in range(len(node.output))]
        copy = onnx.helper.make_node(node.op_type, names, outs, domain=node.domain)
        copy.attribute.extend(node.attribute)
        graph = onnx.helper.make_graph(
            [copy], "fold",
            [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(
                x.dtype), x.shape) for n, x in zip(names, inputs, strict=True) if n],
            [onnx.helper.make_empty_tensor_value_info(o) for o in outs])
        model = onnx.helper.make_model(graph, opset_imports=[
            onnx.helper.make_opsetid("", self.opset)])
        try:
            results = ReferenceEvaluator(model).run(
                None, {n: x for n, x in zip(names, inputs, strict=True) if n})
        except Exception as e:
            raise Unsupported(f"evaluating it on constants failed: {first_line(e)}"
                              ) from None
        return [np.asarray(r) for r in results]

    # ------------------------------------------------------------ wrappers

    def wrappers(self, forward: ir.Function, params: list[str], param_names: list[str],
                 params_type: Type, arg_names: list[str]) -> None:
        b = Builder(self.module)
        b.function("init_params", [], params_type)
        values = [array_literal(b, self.initializers[p], name=n)
                  for p, n in zip(params, param_names, strict=True)]
        b.ret(b.literal(ir.AggregateLiteral("tuple", tuple(values)), params_type))
        init = self.module.function("init_params")
        assert init is not None
        in_types = list(forward.type_.arguments[:-1])
        main = b.function("main", in_types, forward.type_.result, arg_names)
        args = list(main.blocks[0].arguments)
        p = b.call(init, [], name="params")
        b.ret(b.call(forward, [*args, p], name="outputs"))
        result = self.module.resolve(forward.type_.result)
        if len(in_types) == 1 and isinstance(result, TensorType) and result.rank == 2 and \
                result.dtype.is_float:
            self.classifier(forward, params_type, param_names, in_types[0], result,
                            arg_names[0])

    def classifier(self, forward: ir.Function, params_type: Type, param_names: list[str],
                   x_type: Type, scores: TensorType, x_name: str) -> None:
        """@loss (mean cross-entropy of the scores against one-hot targets; the scores are
        logits, or probabilities when the graph ends in Softmax), its gradient, @predict
        and @train_step."""
        b = Builder(self.module)
        names = UniqueNames([x_name])
        target = names("target")
        fn = b.function("loss", [x_type, scores, params_type], TensorType((), scores.dtype),
                        [x_name, target, names("params")])
        x, t, p = fn.blocks[0].arguments
        y = b.call(forward, [x, p], name=names("scores"))
        last = next((n for n in self.graph.node if self.graph.output[0].name in n.output), None)
        zero = ir.constant(0.0, TensorType((), scores.dtype))
        if last is not None and last.op_type == "Softmax":
            logp = b.log(y)
        else:
            top = b.padShape(b.reduce(y, "max", ir.constant(-math.inf, zero.type), [1]), 1)
            z = b.subtract(y, top)
            logp = b.subtract(z, b.padShape(b.log(b.reduce(b.exp(z), "add", zero, [1])), 1))
        total = b.reduce(b.multiply(logp, t), "add", zero)
        rows = b.dataTypeCast(b.extract(b.shape(y), [0]), scores.dtype)
        b.ret(b.negate(b.divide(total, rows), name=names("xent")))
        grad_type = FunctionType(fn.type_.arguments, TupleType((params_type, zero.type)))
        b.declare("loss_grad", grad_type, DerivativeDecl("gradient", fn, None, (2,), (0,), False))
        alias = self.module.type_decls[f"{self.name}_params"]
        assert isinstance(alias, AliasDecl) and isinstance(alias.target, TupleType)
        p_types = list(alias.target.elements)
        names = UniqueNames([*param_names, x_name])
        pred = b.function("predict", [*p_types, x_type], scores, [*param_names, x_name])
        packed = b.literal(ir.AggregateLiteral("tuple", tuple(pred.blocks[0].arguments[:-1])),
                           params_type, name=names("params"))
        b.ret(b.call(forward, [pred.blocks[0].arguments[-1], packed], name=names("scores")))
        names = UniqueNames([*param_names, x_name])
        target, lr_name = names("target"), names("lr")
        step = b.function("train_step", [*p_types, x_type, scores, zero.type],
                          TupleType((*p_types, zero.type)),
                          [*param_names, x_name, target, lr_name])
        args = step.blocks[0].arguments
        ps, x, t, lr = args[:-3], args[-3], args[-2], args[-1]
        packed = b.literal(ir.AggregateLiteral("tuple", tuple(ps)), params_type,
                           name=names("params"))
        grad = self.module.function("loss_grad")
        assert grad is not None
        g = b.call(grad, [x, t, packed], name=names("grads"))
        dp = b.extract(g, [0], name=names("d_params"))
        loss = b.extract(g, [1], name=names("xent"))
        updated = [b.subtract(pk, b.multiply(b.extract(dp, [i]), lr), name=names(f"{n}_next"))
                   for i, (pk, n) in enumerate(zip(ps, param_names, strict=True))]
        b.ret(b.tuple([*updated, loss]))


def with_dims(model: onnx.ModelProto, dims: dict[str, int], source: str) -> onnx.ModelProto:
    """The model with each dimension named in `dims` given that size (inputs, outputs and
    value_info); a name the model does not use, or a size below 1, is refused."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    used: set[str] = set()
    for info in [*out.graph.input, *out.graph.output, *out.graph.value_info]:
        if not info.type.HasField("tensor_type"):
            continue
        for d in info.type.tensor_type.shape.dim:
            if d.HasField("dim_param") and d.dim_param in dims:
                used.add(d.dim_param)
                size = dims[d.dim_param]
                d.Clear()
                d.dim_value = size
    for name, size in dims.items():
        if name not in used:
            raise ir.FrontendError(f"{source}: error: the model has no dimension named "
                                   f"'{name}'")
        if not isinstance(size, int) or size < 1:
            raise ir.FrontendError(f"{source}: error: dimension '{name}' must be a size ≥ 1, "
                                   f"found {size!r}")
    return out


def imports_default_domain(model: onnx.ModelProto) -> bool:
    return any(o.domain in ("", "ai.onnx") for o in model.opset_import)


def default_opset(model: onnx.ModelProto) -> int:
    """The model's opset of ONNX's default domain (the newest, for a model that uses only
    other domains: it has no operator of the default one to convert)."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                onnx.defs.onnx_opset_version())


def prelu_slopes_broadcast(model: onnx.ModelProto) -> onnx.ModelProto:
    """Before opset 7, PRelu's slope of shape [C] applied to the channels (axis 1); from
    opset 7 it broadcasts from the right, and the version converter does not reshape it. A
    slope given as an initializer becomes [C, 1, …] for an input of known rank."""
    inits = {t.name: t for t in model.graph.initializer}
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in [
        *inferred.graph.input, *inferred.graph.value_info] if v.type.HasField("tensor_type")
        and v.type.tensor_type.HasField("shape")}
    out = onnx.ModelProto()
    out.CopyFrom(model)
    for node in out.graph.node:
        if node.op_type != "PRelu" or len(node.input) < 2 or node.input[1] not in inits:
            continue
        slope = onnx.numpy_helper.to_array(inits[node.input[1]])
        rank = ranks.get(node.input[0], 0)
        if slope.ndim == 1 and slope.size > 1 and rank > 2:
            reshaped = onnx.numpy_helper.from_array(
                slope.reshape((slope.size,) + (1,) * (rank - 2)), node.input[1])
            for t in out.graph.initializer:
                if t.name == node.input[1]:
                    t.CopyFrom(reshaped)
            for v in out.graph.input:  # before IR 4 an initializer is a graph input too
                if v.name == node.input[1] and v.type.HasField("tensor_type"):
                    v.type.tensor_type.shape.ClearField("dim")
                    for d in reshaped.dims:
                        v.type.tensor_type.shape.dim.add().dim_value = d
    return out


def first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


def constant_value(node: onnx.NodeProto) -> np.ndarray:
    attr = node.attribute[0] if node.attribute else None
    if attr is None:
        raise Unsupported("a Constant without a value")
    value = onnx.helper.get_attribute_value(attr)
    if attr.name == "value":
        return tensor_array(value, "its value")
    if attr.name in ("value_float", "value_int"):
        return np.array(value, np.float32 if attr.name == "value_float" else np.int64)
    if attr.name in ("value_floats", "value_ints"):
        return np.array(value, np.float32 if attr.name == "value_floats" else np.int64)
    raise Unsupported(f"a Constant given by '{attr.name}'")


COMPUTED = "computed"  # a size computed from a dynamic one (2·batch): not a copy of it


def shape_arithmetic(node: onnx.NodeProto, inputs: list[Any]) -> Any:
    """Shape vectors (dynamic sizes are None) through the few operators that build a
    Reshape's target: indexing, (un)squeezing, concatenation, slicing, casts, arithmetic."""
    dims = arithmetic_on(node, [x.dims if isinstance(x, ShapeVector) else (
        np.asarray(x).astype(object) if x is not None else None) for x in inputs], inputs)
    origins = None
    if node.op_type in STRUCTURAL:  # the same moves on where dynamic sizes come from
        origins = arithmetic_on(node, [origins_of(x) for x in inputs], inputs)
    elif node.op_type == "Where":  # chosen by the condition the sizes gave
        cond = np.asarray(shape_arithmetic_condition(inputs[0]))
        cond, a, b = np.broadcast_arrays(cond, origins_of(inputs[1]), origins_of(inputs[2]))
        origins = np.where(cond.astype(bool), a, b)
    out = np.asarray(dims, dtype=object)
    if all(v is not None and v is not COMPUTED for v in out.reshape(-1)):
        return out.astype(np.bool_ if node.op_type == "Equal" else np.int64)
    return ShapeVector(out, None if origins is None else as_object(origins))


def shape_arithmetic_condition(x: Any) -> Any:
    return x.dims if isinstance(x, ShapeVector) else np.asarray(x)


STRUCTURAL = ("Cast", "Identity", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice",
              "Reshape")


def origins_of(x: Any) -> Any:
    """Where each entry of a shape vector's dynamic sizes comes from (None: a known size)."""
    if x is None:
        return None
    if isinstance(x, ShapeVector):
        return x.origins if x.origins is not None else np.full(x.dims.shape, None, object)
    return np.full(np.shape(x), None, object)


def as_object(x: Any) -> np.ndarray:
    """An object array as it is; one element picked out of one (a tuple) as a 0-d array."""
    if isinstance(x, np.ndarray):
        return x
    out = np.empty((), dtype=object)
    out[()] = x
    return out


def object_array(items: list[Any]) -> np.ndarray:
    out = np.empty(len(items), dtype=object)
    out[:] = items  # tuples as entries, not as rows
    return out


def arithmetic_on(node: onnx.NodeProto, arrays: list[Any], inputs: list[Any]) -> Any:
    """The node's operation on object arrays (of sizes, or of their origins)."""
    op = node.op_type
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    x: Any = arrays[0]
    if op in ("Cast", "Identity"):
        out = x
    elif op == "Gather":
        if attrs.get("axis", 0) != 0 or not isinstance(inputs[1], np.ndarray):
            raise Unsupported("Gather of a shape along an axis other than 0")
        out = x[inputs[1].astype(np.int64)]
    elif op == "Unsqueeze":
        rank = x.ndim + len(constant_ints(inputs, 1, "axes"))
        out = np.expand_dims(x, tuple(indices.axes(constant_ints(inputs, 1, "axes"), rank)))
    elif op == "Squeeze":
        axes = constant_ints(inputs, 1, "axes") if len(inputs) > 1 and inputs[1] is not None \
            else [k for k, d in enumerate(x.shape) if d == 1]
        out = np.squeeze(x, tuple(set(indices.axes(axes, x.ndim, unique=False))))
    elif op == "Concat":
        out = np.concatenate([a.reshape(-1) for a in arrays if a is not None])
    elif op == "Slice":
        out = x[slicer(inputs, x.ndim)]
    elif op == "Equal":  # a size is never negative: equal to −1 (Reshape's "infer") or not
        a, b = np.broadcast_arrays(arrays[0], arrays[1])
        out = np.array([size_equal(p, q) for p, q in zip(a.reshape(-1), b.reshape(-1),
                                                         strict=True)],
                       dtype=object).reshape(a.shape)
    elif op == "Where":
        cond, a, b = np.broadcast_arrays(*arrays[:3])
        if any(c is None or c is COMPUTED for c in cond.reshape(-1)):
            raise Unsupported("Where on a condition computed from dynamic sizes")
        out = np.where(cond.astype(bool), a, b)
    elif op == "Reshape":
        if not isinstance(inputs[0], ShapeVector):
            raise Unsupported("Reshape to a shape with dynamic sizes")
        target = constant_ints(inputs, 1, "shape")
        dims = [x.shape[k] if d == 0 and not attrs.get("allowzero", 0) else d
                for k, d in enumerate(target)]
        out = x.reshape(dims)
    else:
        a, b = np.broadcast_arrays(arrays[0], arrays[1])
        fn = {"Add": lambda p, q: p + q, "Sub": lambda p, q: p - q,
              "Mul": lambda p, q: p * q, "Div": truncate_divide}[op]
        out = np.array([COMPUTED if p is None or q is None or p is COMPUTED or q is COMPUTED
                        else fn(p, q)
                        for p, q in zip(a.reshape(-1), b.reshape(-1), strict=True)],
                       dtype=object).reshape(a.shape)
    return out


def size_equal(p: Any, q: Any) -> Any:
    """p == q for entries of shape vectors (None: a dynamic size, which is ≥ 0)."""
    known = [v for v in (p, q) if v is not None and v is not COMPUTED]
    if len(known) == 2:
        return bool(known[0] == known[1])
    if known and int(known[0]) < 0:
        return False
    raise Unsupported("Equal of a dynamic size with a size")


def constant_ints(inputs: list[Any], i: int, what: str) -> list[int]:
    x = inputs[i] if i < len(inputs) else None
    if not isinstance(x, np.ndarray):
        raise Unsupported(f"{what} (input {i}) must be known at import")
    return [int(v) for v in x.reshape(-1)]


def slicer(inputs: list[Any], rank: int) -> tuple[slice, ...]:
    """Slice's starts, ends, axes and steps as numpy's index, which clamps as ONNX does."""
    starts, ends = constant_ints(inputs, 1, "starts"), constant_ints(inputs, 2, "ends")
    given = len(inputs) > 3 and inputs[3] is not None
    axes = indices.axes(constant_ints(inputs, 3, "axes"), rank) if given \
        else list(range(len(starts)))
    steps = constant_ints(inputs, 4, "steps") if len(inputs) > 4 and inputs[4] is not None \
        else [1] * len(starts)
    where = [slice(None)] * rank
    for start, end, a, step in zip(starts, ends, axes, steps, strict=True):
        where[a] = slice(start, end, step)
    return tuple(where)


def truncate_divide(p: int, q: int) -> int:
    """ONNX's integer division: toward zero (Python's `//` floors)."""
    if q == 0:
        raise Invalid("a division by zero in a shape computation")
    quotient = abs(p) // abs(q)
    return quotient if (p < 0) == (q < 0) else -quotient


def read_model(path: str | Path) -> onnx.ModelProto:
    """The model in the file `path`, with the external data files its tensors name (beside
    it). A regular file may hold up to protobuf's 2 GiB; a pipe or device is read up to
    `MAX_TEXT_BYTES`."""
    source = str(path)
    limit = MAX_MODEL_BYTES if os.path.isfile(source) else MAX_TEXT_BYTES
    data = read_input(source, what="ONNX model", limit=limit)
    try:
        model = onnx.load_model_from_string(data)
    except Exception as e:
        raise ir.FrontendError(f"{source}: error: not an ONNX model ({type(e).__name__}: "
                               f"{first_line(e) if str(e) else 'unreadable'})") from None
    try:
        onnx.external_data_helper.load_external_data_for_model(
            model, os.path.dirname(os.path.abspath(source)))
    except Exception as e:
        raise ir.FrontendError(f"{source}: error: cannot read the model's external data: "
                               f"{first_line(e)}") from None
    return model


def load(model: str | Path | onnx.ModelProto, *, freeze: bool = False,
         name: str | None = None, notes: list[str] | None = None,
         dims: dict[str, int] | None = None) -> ir.Module:
    """A DLVM module from an ONNX file or `ModelProto` (see the module docstring); `notes`
    receives a line for each thing done to the model on the way (an opset upgraded);
    `dims` gives named dynamic dimensions (`dim_param`s) a size, as ONNX Runtime's free
    dimension overrides do: `{"seq": 128}` for a model run on sequences of one length."""
    source = "<model>"
    if not isinstance(model, onnx.ModelProto):
        source = str(model)
        model = read_model(source)
        name = name or Path(source).stem
    importer = Importer(model, freeze=freeze, name=name, source=source, dims=dims)
    if notes is not None:
        notes.extend(importer.notes)
    return importer.run()
