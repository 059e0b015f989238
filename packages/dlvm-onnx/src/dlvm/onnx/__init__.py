"""ONNX import: models exported by PyTorch and other frameworks as DLVM modules, to run,
differentiate and fine-tune.

    import dlvm.onnx, dlvm.ir as ir
    module = dlvm.onnx.load("model.onnx")          # @forward, @init_params, @main, …
    y = ir.compile(module)["main"](x)
"""

from __future__ import annotations

from .importer import load
from .ops import CONVERTERS

__all__ = ["CONVERTERS", "load"]
