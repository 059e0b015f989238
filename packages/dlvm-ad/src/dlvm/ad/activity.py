"""Activity analysis: which values vary with the differentiated arguments.

Only varied values need derivatives; everything else is a constant to AD.
"""

from __future__ import annotations

from dlvm.ir import Function, Instruction, Module, Value
from dlvm.ir.core import iter_nested
from dlvm.ir.types import TensorType, TupleType, Type

from .errors import DifferentiationError
from .invariance import invariant_shifts
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
    """The values that depend on `wrt` through differentiable data flow (a fixpoint).

    A stack onto which a varied value is pushed is *active*: it is in the set, and
    float values popped from it are varied (a generated gradient's tape is one). A shift
    that only shift-invariant results use (softmax's maximum, `invariance.py`) has a zero
    derivative: it is a constant to AD.
    """
    constant = invariant_shifts(fn, module)
    varied: set[Value] = set(wrt)
    changed = True
    while changed:
        changed = False
        for block in fn.blocks:
            for inst in block.instructions:
                if inst.opcode == "store" and inst.value in varied:
                    raise DifferentiationError(
                        f"{inst.location or '@' + str(fn.name)}: a value that depends on the "
                        "differentiated arguments is stored to memory; derivatives through "
                        "memory are not supported")
                if inst.opcode == "push" and inst.value in varied and inst.stack not in varied:
                    varied.add(inst.stack)  # an active stack: its pops carry derivatives
                    changed = True
                if inst not in varied and inst.opcode not in NONDIFFERENTIABLE and \
                        inst not in constant and \
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
