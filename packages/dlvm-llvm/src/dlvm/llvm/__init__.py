"""dlvm-llvm: DLVM modules as native code through LLVM (the `llvm-cpu` target).

    import dlvm.ir as ir
    exe = ir.compile(module, target="llvm-cpu")   # differentiation and O3 first, if asked
    loss = exe["loss"](w, x, y)

Two folders: `codegen/` turns DLVM functions into LLVM IR (`function.py`, the element-wise
regions of `regions.py`, the `lower_*` modules, and the scalar table of `scalar.py`, shared
with the GPU target) and object code (`jit.py`, which also keeps the code cache);
`runtime/` runs it (`executable.py` and its call path, the thread pool and its budget,
BLAS). Plugins give their instructions native code with `scalar_rule` and `lowering_rule`
(`codegen/rules.py`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from dlvm.ir.lazy import lazy_exports

if TYPE_CHECKING:
    from dlvm.llvm.codegen.function import CompileError, CompileUnit, FunctionLowering
    from dlvm.llvm.codegen.lowering import LOWER
    from dlvm.llvm.codegen.rules import lowering_rule, scalar_rule
    from dlvm.llvm.codegen.scalar import SCALAR, ScalarEmitter
    from dlvm.llvm.runtime.threads import get_num_threads, set_num_threads
    from dlvm.llvm.target import LLVMCPUTarget

# Loaded on first use: every `dlvm` command imports the plugin module beside this one, and
# LLVM need not load for a command that compiles nothing. Any name read from here comes
# with DLVM's complete rule tables (`lowering.py`).
__getattr__ = lazy_exports(__name__, {
    "LOWER": ".codegen.lowering", "CompileError": ".codegen.function",
    "CompileUnit": ".codegen.function", "FunctionLowering": ".codegen.function",
    "lowering_rule": ".codegen.rules", "scalar_rule": ".codegen.rules",
    "SCALAR": ".codegen.scalar", "ScalarEmitter": ".codegen.scalar",
    "LLVMCPUTarget": ".target", "get_num_threads": ".runtime.threads",
    "set_num_threads": ".runtime.threads",
}, before=lambda: importlib.import_module(".codegen.lowering", __name__))

__all__ = ["LOWER", "SCALAR", "CompileError", "CompileUnit", "FunctionLowering",
           "LLVMCPUTarget", "ScalarEmitter", "get_num_threads", "lowering_rule",
           "scalar_rule", "set_num_threads"]
