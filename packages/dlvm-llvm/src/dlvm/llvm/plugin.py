"""dlvm-llvm's registrations: the target `llvm-cpu`, the fastest when installed."""

from __future__ import annotations

from dlvm.ir.plugin import RegisterTarget, hookimpl


@hookimpl
def register_targets(register: RegisterTarget) -> None:
    register("llvm-cpu", "dlvm.llvm.target:LLVMCPUTarget",
             "native code for the host CPU through LLVM (vectorized kernels, BLAS for dot)",
             priority=10)
