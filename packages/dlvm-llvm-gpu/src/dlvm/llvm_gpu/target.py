"""The `nvptx` target: DLVM modules on NVIDIA GPUs.

`compile` returns an executable whose calls run as launch plans (`plan.py`) on a GPU through
cuda-python, or — with `device="host"` — on the CPU with the very same kernels compiled for
it. `emit` writes the module's kernels as PTX (or as the LLVM IR it comes from) without
needing a GPU; since kernels are compiled for the shapes a call brings, `_` dimensions are
emitted at `dynamic_size`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir as ll

import dlvm.ir as ir
from dlvm.ir import Function, Instruction, LiteralValue
from dlvm.ir.core import ScalarLiteral
from dlvm.ir.runtime import ExecutionError
from dlvm.ir.target import check_option, flatten_results
from dlvm.ir.types import TensorType, Type
from dlvm.llvm.codegen.bfloat import legalized
from dlvm.llvm.codegen.optimize import optimized
from dlvm.llvm.codegen.rules import load_plugin_rules
from dlvm.llvm.codegen.specialize import Specializer

from . import nvptx
from .device import Device, GPUError
from .kernels import (
    HostFlavour,
    KernelError,
    NVPTXFlavour,
    RegionBuilder,
    gemm_module,
    is_kernel_instruction,
    region_operands,
    symbol,
)
from .lowering import lowering_of
from .plan import LaunchPlan, to_host, tuple_elements

DEVICES = ("cuda", "host")
# computed on bf16 as it is: the GEMM library (tensor cores) or `gemm_module`, summing in f32
BF16_ON_DEVICE = frozenset({"dot"})


def make_device(kind: str, ordinal: int = 0, tensor_cores: bool = False) -> Device:
    """The device for `kind`: a GPU (`cuda`) or the host emulation (`host`)."""
    if kind == "host":
        from .emulate import HostDevice

        return HostDevice()
    from .cuda import CudaDevice, available

    ok, reason = available(ordinal)
    if not ok:
        raise ir.DlvmError(f"target 'nvptx': {reason} (device='host' runs the same launch "
                           "plans on the CPU)")
    return CudaDevice(ordinal, tensor_cores)


class NVPTXExecutable(ir.Executable):
    """Calls run on the device; `call` returns numpy arrays, `call_device` device arrays."""

    def __init__(self, module: ir.Module, device: Device, plan: LaunchPlan) -> None:
        self.module = module
        self.device = device
        self.plan = plan

    def call(self, name: str, *args: Any) -> tuple[np.ndarray, ...]:
        return flatten_results(to_host(self.plan.call(name.removeprefix("@"), list(args))))

    def call_device(self, name: str, *args: Any) -> Any:
        """The function's result as it is on the device (device arrays, tuples of them)."""
        return self.plan.call(name.removeprefix("@"), list(args))

    def signature(self, name: str) -> ir.FunctionType:
        fn = self.module.function(name.removeprefix("@"))
        if fn is None:
            raise ExecutionError(f"no function '@{name}'")
        return fn.type_


@dataclass
class NVPTXTarget(ir.Target):
    """NVIDIA GPUs.

    `device`: `cuda` (a GPU, through the driver) or `host` (the launch plans on the CPU, for
    machines without one); `ordinal`: which GPU; `arch`: the architecture PTX is emitted for
    (default: the GPU's, or sm_80 for `emit` without one); `passes`: the pipeline run first,
    on a copy (default `O3`, which fuses element-wise code into kernels; skipped, with a
    warning, when dlvm-opt is not installed); `dynamic_size`: the size `emit` gives `_`
    dimensions; `replay`: whether a call with the signature of an earlier one replays its
    launches (`replay.py`) instead of walking the IR again; `tensor_cores`: TF32 math for
    float32 GEMMs and float16 GEMMs through cuBLAS (float32 sums), both on tensor cores;
    `seed`, `max_steps`, `timeout`:
    as for `interp` (they bound walks; a replay is a finite list).
    """

    name = "nvptx"
    emits = ("llvm", "ptx")
    device: str = "cuda"
    ordinal: int = 0
    arch: str = ""
    passes: str = "O3"
    dynamic_size: int = 32
    replay: bool = True
    tensor_cores: bool = False
    seed: int = 0
    max_steps: int | None = None
    timeout: float | None = None

    def __post_init__(self) -> None:
        check_option("device", self.device, str)
        if self.device not in DEVICES:
            raise ir.DlvmError(f"target option 'device' must be one of {', '.join(DEVICES)}, "
                               f"found '{self.device}'")
        check_option("ordinal", self.ordinal, int, minimum=0)
        check_option("arch", self.arch, str)
        if self.arch:
            try:
                nvptx.check_arch(self.arch)
            except nvptx.PTXError as e:
                raise ir.DlvmError(f"target option 'arch': {e}") from None
        check_option("passes", self.passes, str)
        check_option("dynamic_size", self.dynamic_size, int, minimum=1)
        check_option("replay", self.replay, bool)
        check_option("tensor_cores", self.tensor_cores, bool)
        check_option("seed", self.seed, int, minimum=0)
        check_option("max_steps", self.max_steps, int, minimum=1, optional=True)
        check_option("timeout", self.timeout, float, minimum=0, optional=True)

    @staticmethod
    def availability() -> str | None:
        """None when a GPU can be used, else why not (shown by `dlvm plugins`)."""
        from .cuda import available

        ok, reason = available()
        return None if ok else reason

    def prepare(self, module: ir.Module) -> ir.Module:
        """The module as code generation sees it: verified, differentiated where it declares
        derivatives, and optimized — on a copy —, with the rules of the plugin instructions
        it uses loaded."""
        from dlvm.ir.api import has_gradient_declarations

        ir.verify(module)
        if has_gradient_declarations(module) and ir.registry().has("pass", "differentiation"):
            module = ir.clone(module)
            ir.run_passes(module, "differentiation")
        module = optimized(legalized(module, keep=BF16_ON_DEVICE), self.passes, self.name)
        load_plugin_rules(module)
        return module

    def compile(self, module: ir.Module) -> ir.Executable:
        module = self.prepare(module)
        try:
            device = make_device(self.device, self.ordinal, self.tensor_cores)
        except GPUError as e:
            raise ir.DlvmError(f"target 'nvptx': {e}") from None
        if self.device == "host":
            flavour: Any = HostFlavour()
        else:
            flavour = NVPTXFlavour(libdevice=nvptx.libdevice_path() is not None,
                                   native_bf16=nvptx.has_native_bf16(device.arch))
        plan = LaunchPlan(module, device, flavour, seed=self.seed, max_steps=self.max_steps,
                          timeout=self.timeout, replay=self.replay)
        return NVPTXExecutable(module, device, plan)

    def emit(self, module: ir.Module, what: str) -> str | bytes:
        if what not in self.emits:
            return super().emit(module, what)
        arch = self.arch or nvptx.DEFAULT_ARCH
        llmod, kernels = kernels_of(self.prepare(module), self.dynamic_size,
                                    nvptx.libdevice_path() is not None,
                                    nvptx.has_native_bf16(arch))
        try:
            if what == "llvm":
                return str(nvptx.optimize(str(llmod), arch, kernels))
            return nvptx.emit_ptx(str(llmod), arch, kernels)
        except nvptx.PTXError as e:
            raise ir.DlvmError(f"target 'nvptx': {e}") from None


# ---------------------------------------------------------------- every kernel of a module


def kernels_of(module: ir.Module, dynamic_size: int, libdevice: bool = True,
               native_bf16: bool = False) -> tuple[ll.Module, list[str]]:
    """One LLVM module with the kernels of every function of `module`, for its static
    shapes (`_` dimensions at `dynamic_size`), and the kernels' names."""
    llmod = ll.Module(name=module.name or "module")
    flavour = NVPTXFlavour(libdevice=libdevice, native_bf16=native_bf16)
    specializer = Specializer(module)
    names: list[str] = []
    counter = 0

    def sized(t: Type) -> Type:
        rt = module.resolve(t)
        if isinstance(rt, TensorType):
            return rt.with_shape(tuple(dynamic_size if d is None else d for d in rt.shape))
        return t

    def static(t: Type | None) -> TensorType | None:
        rt = module.resolve(t) if t is not None else None
        return rt if isinstance(rt, TensorType) and rt.is_static else None

    for fn in module.functions:
        if not fn.blocks or "kernel" in fn.attributes:
            continue
        spec = specializer.spec(fn, tuple(sized(t) for t in fn.type_.arguments))
        for block in fn.blocks:
            for inst in block.instructions:
                counter += 1
                base = f"{symbol(fn.name or 'f')}_{counter}"
                try:  # a region that cannot be a kernel is refused before it is written
                    names += _emit_instruction(llmod, flavour, specializer, spec, inst, base,
                                               static)
                except KernelError:
                    continue  # runs on the host: nothing to emit
    return llmod, names


def _emit_instruction(llmod: ll.Module, flavour: NVPTXFlavour, specializer: Specializer,
                      spec: Any, inst: Instruction, base: str, static: Any) -> list[str]:
    op = inst.opcode
    if op == "apply":
        callee = inst.fields.get("callee")
        if not (isinstance(callee, Function) and "kernel" in callee.attributes and
                len(callee.blocks) == 1):
            return []
        cspec = spec.callees.get(inst) or specializer.spec(
            callee, tuple(spec.type(a) for a in inst.args))
        body = callee.entry.instructions
        params = list(callee.entry.arguments)
        types: dict[Any, TensorType] = {}
        for v in [*params, *body[:-1]]:
            t = static(cspec.type(v))
            if t is None:
                return []
            types[v] = t
        outputs = tuple_elements(body[-1].fields.get("value"))
        if any(isinstance(o, LiteralValue) or o not in types for o in outputs):
            return []
        by_value = [types[p].rank == 0 and not types[p].dtype.is_bool for p in params]
        code = RegionBuilder(base + "_" + symbol(callee.name or "kernel"), body[:-1], params,
                             outputs, types, by_value, flavour, llmod).build()
        return code.kernel_names
    if op == "dot":
        a, b = static(spec.type(inst.lhs)), static(spec.type(inst.rhs))
        if a is None or b is None or a.rank < 2 or a.rank != b.rank:
            return []
        batch = int(np.prod(a.shape[:-2], dtype=np.int64)) if a.rank > 2 else 1
        m, k, n = int(a.shape[-2]), int(a.shape[-1]), int(b.shape[-1])  # type: ignore[arg-type]
        _, launch = gemm_module(base + "_gemm", a.dtype, batch, m, n, k, flavour, llmod)
        return [launch.name]
    if lowering_of(inst).how != "kernel region" or not is_kernel_instruction(inst):
        return []  # a view of its operand, or an instruction the host runs
    operands = [v for v in dict.fromkeys(region_operands(inst))
                if not (isinstance(v, LiteralValue) and isinstance(v.literal, ScalarLiteral))]
    types = {}
    for v in [*operands, inst]:
        t = static(spec.type(v))
        if t is None:
            return []
        types[v] = t
    by_value = [types[v].rank == 0 and not types[v].dtype.is_bool for v in operands]
    code = RegionBuilder(base + "_" + op, [inst], operands, [inst], types, by_value, flavour,
                         llmod).build()
    return code.kernel_names
