"""dlvm-llvm: DLVM modules as native code through LLVM (the `llvm-cpu` target).

    import dlvm.ir as ir
    exe = ir.compile(module, target="llvm-cpu")   # differentiation and O3 first, if asked
    loss = exe["loss"](w, x, y)

The lowering (`function.py`, `kernel.py`, the `lower_*` modules and the scalar table in
`scalar.py`) is shared with the GPU target; `jit.py` runs LLVM and keeps the code cache.
Plugins give their instructions native code with `scalar_rule` and `lowering_rule`
(`rules.py`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from dlvm.ir.lazy import lazy_exports

if TYPE_CHECKING:
    from .function import CompileError, CompileUnit, FunctionLowering
    from .lowering import LOWER
    from .rules import lowering_rule, scalar_rule
    from .scalar import SCALAR, ScalarEmitter
    from .target import LLVMCPUTarget
    from .threads import get_num_threads, set_num_threads

# Loaded on first use: every `dlvm` command imports the plugin module beside this one, and
# LLVM need not load for a command that compiles nothing. Any name read from here comes
# with DLVM's complete rule tables (`lowering.py`).
__getattr__ = lazy_exports(__name__, {
    "LOWER": ".lowering", "CompileError": ".function", "CompileUnit": ".function",
    "FunctionLowering": ".function", "lowering_rule": ".rules", "scalar_rule": ".rules",
    "SCALAR": ".scalar", "ScalarEmitter": ".scalar", "LLVMCPUTarget": ".target",
    "get_num_threads": ".threads", "set_num_threads": ".threads",
}, before=lambda: importlib.import_module(".lowering", __name__))

__all__ = ["LOWER", "SCALAR", "CompileError", "CompileUnit", "FunctionLowering",
           "LLVMCPUTarget", "ScalarEmitter", "get_num_threads", "lowering_rule",
           "scalar_rule", "set_num_threads"]
