"""LLVM's NVPTX back end: optimizing kernels, linking libdevice, emitting PTX.

Kernels are optimized with LLVM's O3 pipeline for `nvptx64-nvidia-cuda` and the chosen
architecture; the math functions they call come from NVIDIA's libdevice bitcode, linked in
and internalized so that only what a kernel uses stays (NVVMReflect resolves its
`__nvvm_reflect` queries during the pipeline). PTX ISA 8.0 is pinned (8.6 for sm_100),
which every driver from CUDA 12.0 on loads.

LLVM aborts the whole process on an intrinsic the NVPTX back end cannot select; the kernels
here use only what it selects (the tests compile every instruction for every architecture
in a child process, so that such an abort is a failed test rather than a dead one).

libdevice is looked for in `$CUDA_HOME` / `$CUDA_PATH`, NVIDIA's `nvidia-nvvm` wheel (the
`libdevice` extra), beside `ptxas` on the PATH, and in /usr/local/cuda.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import threading
from functools import cache
from pathlib import Path

import llvmlite.binding as llvm

TRIPLE = "nvptx64-nvidia-cuda"
# what LLVM's NVPTX back end and CUDA 13's ptxas both support (CUDA 13 dropped sm_70)
ARCHS = ("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100")
DEFAULT_ARCH = "sm_80"
# PTX ISA 8.0 (loaded by every driver from CUDA 12.0 on); sm_100 needs 8.6


def ptx_features(arch: str) -> str:
    return "+ptx86" if arch == "sm_100" else "+ptx80"
_lock = threading.Lock()


class PTXError(RuntimeError):
    """PTX that could not be made, or that ptxas rejected."""


@cache
def initialize() -> None:
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()


def check_arch(arch: str) -> str:
    if arch not in ARCHS:
        raise PTXError(f"unknown GPU architecture '{arch}' (known: {', '.join(ARCHS)})")
    return arch


def has_native_bf16(arch: str) -> bool:
    """Whether `arch` (sm_80 and later) converts f32 to bf16 in one instruction."""
    return int(arch.removeprefix("sm_").rstrip("af")) >= 80


def nearest_arch(arch: str) -> str:
    """The newest known architecture a device of `arch` runs (PTX is forward compatible)."""
    if arch in ARCHS:
        return arch
    try:
        number = int(arch.removeprefix("sm_").rstrip("af"))
    except ValueError:
        raise PTXError(f"unknown GPU architecture '{arch}'") from None
    fitting = [a for a in ARCHS if int(a[3:]) <= number]
    if not fitting:
        raise PTXError(f"GPU architecture '{arch}' is older than {ARCHS[0]}, the oldest "
                       "supported")
    return fitting[-1]


def target_machine(arch: str) -> llvm.TargetMachine:
    initialize()
    target = llvm.Target.from_triple(TRIPLE)
    return target.create_target_machine(cpu=check_arch(arch), features=ptx_features(arch), opt=3,
                                        codemodel="default")


# ---------------------------------------------------------------- libdevice


def libdevice_candidates() -> list[Path]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    out = [Path(r) / "nvvm" / "libdevice" / "libdevice.10.bc" for r in roots if r]
    with contextlib.suppress(Exception):  # an old pathfinder, or not found: try the rest
        from cuda.pathfinder import find_bitcode_lib  # type: ignore[attr-defined]

        out.append(Path(find_bitcode_lib("device")))
    ptxas = shutil.which("ptxas")
    if ptxas:
        out.append(Path(ptxas).resolve().parent.parent / "nvvm" / "libdevice" /
                   "libdevice.10.bc")
    out.append(Path("/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"))
    return out


@cache
def libdevice_path() -> Path | None:
    """Where libdevice is, or None."""
    for p in libdevice_candidates():
        if p.is_file():
            return p
    return None


@cache
def _libdevice_bitcode() -> bytes | None:
    path = libdevice_path()
    return path.read_bytes() if path is not None else None


# ---------------------------------------------------------------- compiling


def optimize(text: str, arch: str, kernels: list[str]) -> llvm.ModuleRef:
    """Parse kernels' LLVM IR, link libdevice when they call it, and optimize."""
    with _lock:
        tm = target_machine(arch)
        mod = llvm.parse_assembly(with_reflect_flag(text))
        mod.triple = TRIPLE
        mod.data_layout = str(tm.target_data)
        if any(f.is_declaration and f.name.startswith("__nv_") for f in mod.functions):
            bitcode = _libdevice_bitcode()
            if bitcode is None:
                raise PTXError("kernels call libdevice, which was not found")
            lib = llvm.parse_bitcode(bitcode)
            lib.triple = mod.triple
            lib.data_layout = mod.data_layout
            mod.link_in(lib)
        keep = set(kernels)
        for f in mod.functions:
            if not f.is_declaration and f.name not in keep:
                f.linkage = "internal"
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        return mod


def emit_ptx(text: str, arch: str, kernels: list[str]) -> str:
    """PTX assembly for the kernels in LLVM IR `text`."""
    mod = optimize(text, arch, kernels)
    with _lock:
        return target_machine(arch).emit_assembly(mod)


def with_reflect_flag(module_text: str) -> str:
    """Module text with the flag libdevice reads for flushing subnormals (off: IEEE)."""
    if "nvvm-reflect-ftz" in module_text:
        return module_text
    return (module_text + "\n!llvm.module.flags = !{!9000}\n"
            '!9000 = !{i32 4, !"nvvm-reflect-ftz", i32 0}\n')


# ---------------------------------------------------------------- ptxas


def ptxas_path() -> str | None:
    return shutil.which("ptxas")


def ptxas_check(ptx: str, arch: str) -> str:
    """Assemble `ptx` with NVIDIA's ptxas (when installed) and return its report; raise
    PTXError with its messages when it rejects the code."""
    exe = ptxas_path()
    if exe is None:
        raise PTXError("ptxas is not on the PATH")
    with tempfile.TemporaryDirectory(prefix="dlvm-ptx-") as d:
        src = Path(d) / "kernel.ptx"
        src.write_text(ptx)
        out = subprocess.run([exe, f"-arch={arch}", "-v", str(src), "-o",
                              str(Path(d) / "kernel.cubin")],
                             capture_output=True, text=True, timeout=300, check=False)
    if out.returncode != 0:
        raise PTXError(f"ptxas rejected the PTX for {arch}:\n{out.stderr.strip()}")
    return out.stderr
