"""dlvm-llvm-gpu's registrations: the target `nvptx`."""

from __future__ import annotations

from dlvm.ir.plugin import RegisterTarget, hookimpl


@hookimpl
def register_targets(register: RegisterTarget) -> None:
    # below llvm-cpu: a GPU is used when asked for (`--target nvptx`), never by surprise
    register("nvptx", "dlvm.llvm_gpu.target:NVPTXTarget",
             "NVIDIA GPUs: PTX through LLVM's NVPTX back end, launched with cuda-python",
             priority=5)
