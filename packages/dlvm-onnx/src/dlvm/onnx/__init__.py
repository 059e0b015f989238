"""ONNX import: models exported by PyTorch and other frameworks as DLVM modules, to run,
differentiate and fine-tune.

    import dlvm.onnx, dlvm.ir as ir
    module = dlvm.onnx.load("model.onnx")          # @forward, @init_params, @main, …
    y = ir.compile(module)["main"](x)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlvm.ir.lazy import lazy_exports

if TYPE_CHECKING:
    from .importer import load
    from .ops import CONVERTERS

# loaded on first use: every `dlvm` command imports the plugin module beside this one
__getattr__ = lazy_exports(__name__, {"load": ".importer", "CONVERTERS": ".ops"})

__all__ = ["CONVERTERS", "load"]
