"""dlvm-llvm-gpu: DLVM on NVIDIA GPUs through LLVM's NVPTX back end (the `nvptx` target).

    import dlvm.ir as ir
    exe = ir.compile(module, target="nvptx")             # a GPU through cuda-python
    exe = ir.compile(module, target="nvptx", device="host")   # the same plan, emulated
    loss = exe["loss"](w, x, y)                          # numpy in, numpy out
    out = exe.call_device("predict", x_on_gpu)           # device arrays (DLPack) in and out

Kernels are written once (`kernels.py`, from dlvm-llvm's scalar table), compiled to PTX
(`nvptx.py`) and launched by a plan on the host (`plan.py`) on a `Device` (`cuda.py`, or
`emulate.py` without a GPU).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlvm.ir.lazy import lazy_exports

if TYPE_CHECKING:
    from .device import Device, DeviceArray, GPUError
    from .target import NVPTXTarget

# loaded on first use: every `dlvm` command imports the plugin module beside this one
__getattr__ = lazy_exports(__name__, {"Device": ".device", "DeviceArray": ".device",
                                      "GPUError": ".device", "NVPTXTarget": ".target"})

__all__ = ["Device", "DeviceArray", "GPUError", "NVPTXTarget"]
