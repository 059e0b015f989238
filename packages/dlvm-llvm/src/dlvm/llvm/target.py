"""The `llvm-cpu` target: DLVM modules as native code for the host CPU, through LLVM."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import dlvm.ir as ir
from dlvm.ir.plugin import PluginWarning
from dlvm.ir.target import check_option

from .codegen import half_products, jit
from .codegen.bfloat import legalized
from .codegen.function import CompileUnit, instruction_at
from .codegen.optimize import optimized
from .codegen.rules import load_plugin_rules
from .runtime import threads
from .runtime.executable import LLVMExecutable


def default_threads() -> int:
    """The threads an executable compiled with `threads=0` is built for: the CPUs the process
    may use, or the budget if it is larger. The native pool caps each job at the budget of
    the moment, so set_num_threads can later lower it, or raise it up to this number,
    without a rebuild."""
    return max(threads.get_num_threads(), threads.usable_cpus())


@dataclass
class LLVMCPUTarget(ir.Target):
    """Native code for the host CPU.

    `passes`: the pipeline run before code generation, on a copy (default `O3`, which fuses
    element-wise code into kernels; "" for none; skipped, with a warning, when dlvm-opt is
    not installed);
    `threads`: cores that large kernels split over (default 0: the process's budget,
    `dlvm.llvm.set_num_threads` or `DLVM_NUM_THREADS`, else the CPUs it may use; a number
    lowers the budget for this executable's kernels, it never raises it; GEMMs follow the
    process's budget);
    `opt_level`: LLVM's optimization level 0–3; `cache`: keep compiled code on disk
    (`$DLVM_CACHE_DIR`); `specialize`: a build per argument shapes (else one build with the
    functions' own `_` dimensions); `max_specializations`: builds per function before
    falling back to that one; `seed`: the seed of `random`; `timeout`: seconds a call may
    run (loops and calls check the clock every few thousand iterations; kernels, which
    always end, do not).
    """

    name = "llvm-cpu"
    emits = ("llvm", "asm", "obj")
    passes: str = "O3"
    threads: int = 0
    opt_level: int = 3
    cache: bool = True
    specialize: bool = True
    max_specializations: int = 8
    seed: int = 0
    timeout: float | None = None

    def __post_init__(self) -> None:
        check_option("passes", self.passes, str)
        check_option("threads", self.threads, int, minimum=0)
        check_option("opt_level", self.opt_level, int, minimum=0)
        if self.opt_level > 3:
            raise ir.DlvmError(f"target option 'opt_level' must be at most 3, found "
                               f"{self.opt_level}")
        check_option("cache", self.cache, bool)
        check_option("specialize", self.specialize, bool)
        check_option("max_specializations", self.max_specializations, int, minimum=1)
        check_option("seed", self.seed, int, minimum=0)
        check_option("timeout", self.timeout, float, minimum=0, optional=True)

    def prepare(self, module: ir.Module) -> ir.Module:
        """The module as code generation sees it: verified, and optimized on a copy (with the
        rules of the plugin instructions it uses loaded)."""
        ir.verify(module)
        module = optimized(half_products.in_f32(legalized(module)), self.passes, self.name)
        load_plugin_rules(module)
        return module

    def compile(self, module: ir.Module) -> ir.Executable:
        module = self.prepare(module)
        return LLVMExecutable(module, threads=self.threads or default_threads(),
                              opt_level=self.opt_level, cache=self.cache,
                              specialize=self.specialize,
                              max_specializations=self.max_specializations, seed=self.seed,
                              timeout=self.timeout)

    def emit(self, module: ir.Module, what: str) -> str | bytes:
        """Every function of the module (with its own types) as optimized LLVM IR, assembly
        for the host, or an object file. Assembly or an object file that calls back into
        Python (for an instruction without a lowering rule) comes with a warning: the
        symbols it calls exist only inside a DLVM process."""
        if what not in self.emits:
            return super().emit(module, what)
        module = self.prepare(module)
        unit = CompileUnit(module, module.name or "module", export=True)
        for fn in module.functions:
            if fn.blocks and "kernel" not in fn.attributes:
                unit.function(unit.specializer.spec(fn))
        unit.lower_all()
        if what in CALLBACK_WARNED:
            warn_callbacks(unit, CALLBACK_WARNED[what])
        return jit.emit(str(unit.llmod), what, self.opt_level)


CALLBACK_WARNED = {"asm": "assembly", "obj": "object file"}  # code to link elsewhere


def warn_callbacks(unit: CompileUnit, kind: str) -> None:
    """Say what the emitted code runs by calling back into Python: instructions without a
    lowering rule (`dlvm_evaluate`)."""
    if unit.fallbacks:
        opcodes = dict.fromkeys(instruction_at(unit.module, place).opcode
                                for place in unit.fallbacks)
        names = ", ".join(f"'{op}'" for op in opcodes)
        have = "have" if len(opcodes) > 1 else "has"
        warnings.warn(f"target 'llvm-cpu': the {kind} calls back into Python for {names}, "
                      f"which {have} no lowering rule, through the symbol 'dlvm_evaluate', "
                      "undefined outside a DLVM process (a plugin gives its instruction "
                      "native code with dlvm.llvm.scalar_rule or lowering_rule)",
                      PluginWarning, stacklevel=3)
