"""Activity analysis: which values vary with the differentiated arguments.

Only varied values need derivatives; everything else is a constant to AD.
"""

from __future__ import annotations

from dlvm.ir import Function, Instruction, Module, Value
from dlvm.ir.core import iter_nested
from dlvm.ir.types import TensorType, TupleType, Type

from .rules import NONDIFFERENTIABLE


def carries_derivative(t: Type, module: Module) -> bool:
    """Float tensors, and tuples holding one."""
    t = module.resolve(t)
    if isinstance(t, TensorType):
        return t.dtype.is_float
    if isinstance(t, TupleType):
        return any(carries_derivative(e, module) for e in t.elements)
    return False


def uses(inst: Instruction) -> list[Value]:
    """Every value an instruction reads, including values nested in literal operands."""
    out: list[Value] = []
    for v in inst.operands:
        out.append(v)
        out.extend(iter_nested(v))
    return out


def varied_values(fn: Function, wrt: list[Value], module: Module) -> set[Value]:
    """The values that depend on `wrt` through differentiable data flow (a fixpoint)."""
    varied: set[Value] = set(wrt)
    changed = True
    while changed:
        changed = False
        for block in fn.blocks:
            for inst in block.instructions:
                if inst not in varied and inst.opcode not in NONDIFFERENTIABLE and \
                        carries_derivative(inst.type, module) and \
                        any(v in varied for v in uses(inst)):
                    varied.add(inst)
                    changed = True
                for target in inst.targets:
                    for arg, param in zip(target.args, target.block.arguments, strict=False):
                        if arg in varied and param not in varied and \
                                carries_derivative(param.type, module):
                            varied.add(param)
                            changed = True
    return varied
