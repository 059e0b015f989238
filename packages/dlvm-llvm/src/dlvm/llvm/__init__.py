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

from . import (  # the lowering rules register themselves in the opcode tables
    kernel,
    lower_aggregate,
    lower_control,
    lower_memory,
    lower_tensor,
)
from .function import LOWER, CompileError, CompileUnit, FunctionLowering
from .rules import lowering_rule, scalar_rule
from .scalar import SCALAR, ScalarEmitter
from .target import LLVMCPUTarget

del kernel, lower_aggregate, lower_control, lower_memory, lower_tensor

__all__ = ["LOWER", "SCALAR", "CompileError", "CompileUnit", "FunctionLowering",
           "LLVMCPUTarget", "ScalarEmitter", "lowering_rule", "scalar_rule"]
