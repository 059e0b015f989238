"""Copying a function's instructions into generated code, through a value and block map."""

from __future__ import annotations

from dlvm.ir import Block, Instruction, LiteralValue, Value
from dlvm.ir.core import copy_field


def map_value(v: Value, values: dict[Value, Value]) -> Value:
    if isinstance(v, LiteralValue):
        lit = v.literal.map_values(lambda e: map_value(e, values))
        return v if lit == v.literal else LiteralValue(lit, v.type)
    return values.get(v, v)


def copy_instruction(inst: Instruction, values: dict[Value, Value],
                     blocks: dict[Block, Block] | None = None, *, named: bool = True
                     ) -> Instruction:
    """A detached copy of `inst` whose operands and targets go through the maps."""
    fields = {k: copy_field(v, values, blocks or {}) for k, v in inst.fields.items()}
    return Instruction(inst.op, fields, inst.type, inst.name if named else None, inst.location)
