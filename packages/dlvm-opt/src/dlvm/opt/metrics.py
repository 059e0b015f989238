"""How much a function computes, counted so that optimization levels compare fairly.

Fusion moves instructions into `!kernel` functions and adds glue (the `apply` and the
`extract`s of its results), so a plain instruction count of the caller is not enough:
`operations` counts what computes, kernels' bodies included and glue excluded.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlvm.ir import Module

from .transforms.fuse_elementwise import kernel_called


@dataclass(frozen=True)
class Size:
    instructions: int  # in the function itself, as printed
    operations: int  # computing instructions, kernels' bodies included, glue and returns not
    kernels: int  # distinct `!kernel` functions it applies


def size(module: Module, name: str) -> Size:
    """The `Size` of `@name` in `module`."""
    fn = module.function(name)
    if fn is None:
        raise KeyError(name)
    insts = list(fn.instructions())
    calls = {inst: k for inst in insts if (k := kernel_called(inst)) is not None}
    glue = sum(1 for inst in insts if inst in calls or (
        inst.opcode == "extract" and inst.fields.get("value") in calls))
    bodies = sum(len(k.blocks[0].instructions) - 1 for k in calls.values())
    return Size(len(insts), len(insts) - glue + bodies, len(set(calls.values())))
