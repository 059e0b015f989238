"""How each instruction runs on `nvptx`: one entry per opcode, as JAX registers a lowering
per primitive. `plan.LaunchPlan` dispatches through this table, and `coverage.py` prints
it beside the other targets.

An instruction without an entry runs as a *kernel region* when `kernels.py` can build one
for it (an element-wise instruction with a scalar rule — a plugin's too —, a reduction by a
built-in combinator, a layout instruction), and otherwise on the *host*: its numpy
semantics on host copies of its operands.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlvm.ir import Instruction
from dlvm.ir.opdef import OPS
from dlvm.llvm.codegen.scalar import SCALAR

from .kernels import LAYOUT_RULES, is_kernel_instruction


@dataclass(frozen=True)
class GPULowering:
    how: str  # "kernel region", "view", "library", "walk", "aggregate", "shape query", "host"
    method: str  # the `LaunchPlan` method that runs it
    summary: str


LOWERINGS: dict[str, GPULowering] = {}


def lowering(*opcodes: str, how: str, method: str, summary: str) -> None:
    entry = GPULowering(how, method, summary)
    for opcode in opcodes:
        LOWERINGS[opcode] = entry


REGION = GPULowering("kernel region", "run_single", "compiled for the shapes of each call into "
                     "kernels (one thread per output element, grid-stride loops)")
HOST = GPULowering("host", "run_host", "its numpy semantics on host copies of its operands")

lowering("apply", how="kernel region", method="run_apply",
         summary="a `!kernel` function: one region for its whole body; another callee: a "
         "walk of its blocks, tensors staying on the device")
lowering("padShape", "squeezeShape", "shapeCast", "slice", how="view", method="run_view",
         summary="the operand's memory under another shape (rows of it, for `slice`): no "
         "launch; inside a region, an index rule")
lowering("bitCast", how="view", method="run_bit_cast",
         summary="the operand's bytes under another data type and shape: no launch")
lowering("transpose", how="kernel region", method="run_transpose",
         summary="used only by `dot`: read transposed (a cuBLAS flag), no launch; else a "
         "region")
lowering("random", how="kernel region", method="run_single",
         summary="the counter-based stream of every target (the same numbers as on the "
         "CPU): a thread per element, then one thread advances the counter on the device")
lowering("dot", how="library", method="run_dot",
         summary="cuBLAS (strided batched GEMM) for f32 and f64, else a generated kernel")
lowering("branch", "conditional", "branchEnum", "return", "push", "createStack",
         "destroyStack", "literal", how="walk", method="run_raw",
         summary="control flow and the AD tape, on the host: device arrays pass through")
lowering("pop", how="walk", method="run_pop",
         summary="the tape's values come back as they went in (device arrays), shapes checked")
lowering("extract", "insert", how="aggregate", method="run_aggregate",
         summary="tuples, structs and arrays keep their device arrays; rows extracted from "
         "a device tensor are views; an insert into one runs on the host")
lowering("allocateBox", "allocateHeap", "allocateStack", "copy", "deallocate",
         "elementPointer", "load", "projectBox", "release", "retain", "store", "trap",
         how="walk", method="run_memory",
         summary="the interpreter's memory, whose cells hold device arrays as they are (a "
         "stored one is copied on the device); only a pointer into a tensor's elements "
         "brings its cell to the host")
lowering("rank", "shape", "unitCount", how="shape query", method="run_shape_query",
         summary="answered from the device array's shape: no launch, no copy")


def lowering_of(inst: Instruction) -> GPULowering:
    """How `inst` runs: its table entry, else a region when one can be built, else the
    host."""
    entry = LOWERINGS.get(inst.opcode)
    if entry is not None:
        return entry
    return REGION if is_kernel_instruction(inst) else HOST


def how_opcode_runs(opcode: str) -> str:
    """A line for the coverage table, from the opcode alone."""
    entry = LOWERINGS.get(opcode)
    if entry is not None:
        return entry.how
    if opcode in LAYOUT_RULES:
        return "kernel region"
    if opcode == "builtin":
        return "kernel region (a function with a scalar rule), else host"
    if opcode in ("reduce", "reduceWindow", "scan"):
        return "kernel region (a built-in combinator), else host"
    if opcode == "convolve":
        return "kernel region (floats: a thread per output element), else host"
    op = OPS.get(opcode)
    if op is not None and "reduction" in op.traits:
        return "kernel region"
    return "kernel region" if opcode in SCALAR else "host"
