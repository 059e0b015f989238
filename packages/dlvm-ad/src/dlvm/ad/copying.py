"""Copying a function's instructions into generated code, through a value and block map."""

from __future__ import annotations

from typing import Any

from dlvm.ir import Block, Instruction, LiteralValue, Value
from dlvm.ir.core import BranchTarget


def map_value(v: Value, values: dict[Value, Value]) -> Value:
    if isinstance(v, LiteralValue):
        lit = v.literal.map_values(lambda e: map_value(e, values))
        return v if lit == v.literal else LiteralValue(lit, v.type)
    return values.get(v, v)


def _copy(obj: Any, values: dict[Value, Value], blocks: dict[Block, Block]) -> Any:
    if isinstance(obj, Value):
        return map_value(obj, values)
    if isinstance(obj, BranchTarget):
        return BranchTarget(blocks.get(obj.block, obj.block), [_copy(a, values, blocks)
                                                              for a in obj.args])
    if isinstance(obj, list):
        return [_copy(x, values, blocks) for x in obj]
    if isinstance(obj, tuple):
        return tuple(_copy(x, values, blocks) for x in obj)
    return obj


def copy_instruction(inst: Instruction, values: dict[Value, Value],
                     blocks: dict[Block, Block] | None = None, *, named: bool = True
                     ) -> Instruction:
    """A detached copy of `inst` whose operands and targets go through the maps."""
    fields = {k: _copy(v, values, blocks or {}) for k, v in inst.fields.items()}
    return Instruction(inst.op, fields, inst.type, inst.name if named else None, inst.location)
