"""Small tools every pass uses: users of values, replacing uses, erasing dead code.

Analyses (dominators, loops, use-def) come from `dlvm.ir.analysis` through
`fn.analysis(Kind)`, cached until the function changes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from dlvm.ir import Block, Function, Instruction, LiteralValue, Value
from dlvm.ir.core import iter_nested


def uses_of(inst: Instruction) -> Iterator[Value]:
    """Every value `inst` reads, including values nested in literal operands."""
    for v in inst.operands:
        yield v
        yield from iter_nested(v)


def users(fn: Function) -> dict[Value, list[Instruction]]:
    """value → the instructions of `fn` that use it (once per use)."""
    out: dict[Value, list[Instruction]] = defaultdict(list)
    for block in fn.blocks:
        for inst in block.instructions:
            for v in uses_of(inst):
                if not isinstance(v, LiteralValue):
                    out[v].append(inst)
    return out


def replace_all_uses(fn: Function, old: Value, new: Value) -> int:
    """Make every use of `old` in `fn` a use of `new`; returns the number of instructions."""
    count = 0
    mapping = {old: new}
    for block in fn.blocks:
        for inst in block.instructions:
            if inst.replace_uses(mapping):
                count += 1
    return count


def is_pure(inst: Instruction) -> bool:
    """No side effects and not a terminator: removable when unused, movable, mergeable."""
    return inst.has_trait("pure") and not inst.is_terminator


def erase_if_unused(inst: Instruction, fn: Function) -> bool:
    if is_pure(inst) and not users(fn).get(inst):
        inst.erase()
        return True
    return False


def instruction_count(fn: Function) -> int:
    return sum(len(b.instructions) for b in fn.blocks)


def block_of(value: Value) -> Block | None:
    return getattr(value, "block", None)
