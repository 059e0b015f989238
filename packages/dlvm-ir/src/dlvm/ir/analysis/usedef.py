"""Who uses each value in a function.

Instructions record what they use, not who uses them, so passes that
replace or delete values ask this analysis instead of scanning the function
each time. Literals are not tracked: they have no identity, being compared
by value.
"""

from __future__ import annotations

from ..core import Function, Instruction, LiteralValue, Value


class UseDefInfo:
    """Users of every argument, instruction, function and global used in a function."""

    def __init__(self, fn: Function) -> None:
        self.function = fn
        users: dict[Value, dict[Instruction, None]] = {}
        uses: dict[Value, int] = {}
        for block in fn.blocks:
            for inst in block.instructions:
                for v in inst.operands:
                    if isinstance(v, LiteralValue):
                        continue
                    seen = users.get(v)
                    if seen is None:
                        users[v] = {inst: None}
                        uses[v] = 1
                    else:
                        seen[inst] = None
                        uses[v] += 1
        self._users = users
        self._uses = uses

    def users(self, value: Value) -> list[Instruction]:
        """Distinct instructions using `value`, in block then instruction order."""
        return list(self._users.get(value, ()))

    def uses_count(self, value: Value) -> int:
        """How many operand slots hold `value` (`add %x, %x` counts twice)."""
        return self._uses.get(value, 0)

    def is_used(self, value: Value) -> bool:
        return value in self._uses

    def used_values(self) -> list[Value]:
        """Every tracked value with at least one use, in order of first use."""
        return list(self._uses)
