"""Operators of ONNX's classic machine-learning domain (`ai.onnx.ml`) that are tensor
arithmetic: `Binarizer` and `ArrayFeatureExtractor`. (Tree ensembles, classifiers and
string-keyed maps are not converted.)"""

from __future__ import annotations

import numpy as np

from dlvm.ir import Value
from onnx import helper

from .context import NodeContext
from .errors import Unsupported
from .ops import CONVERTERS, converts

DOMAIN = "ai.onnx.ml"


@converts("Binarizer")
def _binarizer(c: NodeContext) -> list[Value]:
    """1 where x > threshold, else 0, in x's type"""
    x = c.value(0)
    above = c.b.greaterThan(x, c.number(c.attr("threshold", 0.0), x))
    return [c.b.select(c.number(1, x), c.number(0, x), above)]


@converts("ArrayFeatureExtractor")
def _array_feature_extractor(c: NodeContext) -> list[Value]:
    """x[…, indices] along the last axis (indices flattened); a vector x gives one row"""
    x = c.value(0)
    indices = c.const(1)
    if indices is None:
        raise Unsupported("ArrayFeatureExtractor with indices computed at run time")
    flat = np.asarray(indices, np.int64).reshape(-1)
    gather = helper.make_node("Gather", [c.node.input[0], c.node.input[1]], c.node.output,
                              axis=-1)
    inner = NodeContext(gather, [c.inputs[0], flat], c.b, c.opset, c.module)
    (out,) = CONVERTERS["Gather"](inner)
    if c.rank(x) == 1:
        out = c.b.padShape(out, 0)
    return [out]
