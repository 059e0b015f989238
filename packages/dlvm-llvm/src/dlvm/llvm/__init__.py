"""dlvm-llvm: DLVM modules as native code through LLVM (the `llvm-cpu` target).

    import dlvm.ir as ir
    exe = ir.compile(module, target="llvm-cpu")   # differentiation and O3 first, if asked
    loss = exe["loss"](w, x, y)

The lowering (`function.py`, `kernel.py`, the `lower_*` modules and the scalar table in
`scalar.py`) is shared with the GPU target; `jit.py` runs LLVM and keeps the code cache.
"""

from __future__ import annotations

from . import (  # the lowering rules register themselves in the opcode tables
    kernel,
    lower_aggregate,
    lower_control,
    lower_memory,
    lower_tensor,
)
from .function import LOWER, CompileError, CompileUnit
from .scalar import SCALAR
from .target import LLVMCPUTarget

del kernel, lower_aggregate, lower_control, lower_memory, lower_tensor

__all__ = ["LOWER", "SCALAR", "CompileError", "CompileUnit", "LLVMCPUTarget"]
