"""Who owns each reference: the liveness of counted values, for reference counting.

Values that hold buffers (tensors of rank ≥ 1, enums, aggregates of them) are counted
(`Layout.managed`). Each instruction's result is *owned* by the function; so are block
arguments of non-entry blocks, whose branch hands a reference over. The entry block's
arguments are *borrowed*: the caller keeps them alive for the call.

A use either *borrows* its operand (most instructions read it) or *consumes* a reference
(`return`, branch arguments, `push`, `store`, and the elements an aggregate literal is built
from). After an instruction, each owned operand that is dead ("dying") is released —
unless the instruction took it over: a consuming use hands it on, and an element-wise kernel
may reuse its buffer for its result. A consuming use of a value that is still live, or
borrowed, or consumed twice, first retains it. On each edge of a terminator, owned values
that the successor does not need are released.

Only counted values are tracked, in one backward pass per block after a fixed point over the
blocks, so the analysis is linear in the function's size.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from dlvm.ir import Block, Function, Instruction, LiteralValue, Value
from dlvm.ir.analysis.dominance import DominatorTree
from dlvm.ir.core import BranchTarget, _walk, iter_nested

from .layout import Layout

CONSUMING = {"return": ("value",), "push": ("value",), "store": ("value",),
             "branch": ("destination",), "conditional": ("then", "else"),
             "branchEnum": ("cases",)}


def operand_values(inst: Instruction, fields: tuple[str, ...] | None = None) -> list[Value]:
    """The values `inst` uses in `fields` (all by default), literal elements included."""
    names = inst.op.value_fields if fields is None else fields
    return [v for f in names for v in _walk(inst.fields.get(f))]


def consumed_values(inst: Instruction) -> list[Value]:
    """The values whose references `inst` takes (see the module docstring)."""
    if inst.opcode == "literal":
        v = inst.value
        return list(iter_nested(v)) if isinstance(v, LiteralValue) else []
    fields = CONSUMING.get(inst.opcode)
    return operand_values(inst, fields) if fields else []


@dataclass
class Ownership:
    fn: Function
    layout: Layout
    counted: set[Value] = field(default_factory=set)
    borrowed: set[Value] = field(default_factory=set)
    live_in: dict[Block, set[Value]] = field(default_factory=dict)
    dying: dict[Instruction, set[Value]] = field(default_factory=dict)
    unused: list[Value] = field(default_factory=list)
    users: dict[Value, list[Instruction]] = field(default_factory=dict)
    entry_is_target: bool = False

    def __post_init__(self) -> None:
        fn, layout = self.fn, self.layout
        for block in fn.blocks:
            for a in block.arguments:
                if layout.managed(a.type):
                    self.counted.add(a)
            for inst in block.instructions:
                if layout.managed(inst.type):
                    self.counted.add(inst)
                for v in dict.fromkeys(operand_values(inst)):
                    self.users.setdefault(v, []).append(inst)
        if fn.blocks:
            # a branch back to the entry block hands references over like any branch, so
            # then the function retains its parameters and owns its entry arguments
            self.entry_is_target = any(fn.entry in b.successors for b in fn.blocks)
            if not self.entry_is_target:
                self.borrowed = {a for a in fn.entry.arguments if a in self.counted}
            self.solve()

    def is_counted(self, v: Value) -> bool:
        return v in self.counted

    def is_owned(self, v: Value) -> bool:
        return v in self.counted and v not in self.borrowed

    def uses(self, inst: Instruction) -> list[Value]:
        return [v for v in operand_values(inst) if v in self.counted]

    def solve(self) -> None:
        order = list(DominatorTree(self.fn).preorder())
        self.order = order
        live_in: dict[Block, set[Value]] = {b: set() for b in order}
        changed = True
        while changed:
            changed = False
            for block in reversed(order):
                live = self.live_out(block, live_in)
                for inst in reversed(block.instructions):
                    live.discard(inst)
                    live.update(self.uses(inst))
                live.difference_update(block.arguments)
                if live != live_in[block]:
                    live_in[block] = live
                    changed = True
        self.live_in = live_in
        for block in order:
            live = self.live_out(block, live_in)
            for inst in reversed(block.instructions):
                if inst in self.counted and inst not in live:
                    self.unused.append(inst)
                live.discard(inst)
                used = self.uses(inst)
                dying = {v for v in used if v not in live and v not in self.borrowed}
                if dying:
                    self.dying[inst] = dying
                live.update(used)
            for a in block.arguments:
                if a in self.counted and a not in live and a not in self.borrowed:
                    self.unused.append(a)

    @staticmethod
    def live_out(block: Block, live_in: dict[Block, set[Value]]) -> set[Value]:
        out: set[Value] = set()
        for succ in block.successors:
            out |= live_in.get(succ, set())
        return out

    # ------------------------------------------------------------ terminators

    def edge_plan(self, block: Block, target: BranchTarget, held: set[Value]
                  ) -> tuple[list[Value], list[Value]]:
        """(retains, releases) on the edge to `target`: `held` are the owned values alive
        just before the terminator; the edge passes `target.args` to the successor."""
        needs = self.live_in.get(target.block, set())
        passed = Counter(v for v in operand_values_of(target) if v in self.counted)
        retains: list[Value] = []
        releases: list[Value] = []
        for v, n in passed.items():
            have = 1 if v in held and v not in needs else 0
            retains.extend([v] * (n - have))
        for v in held:
            if v not in needs and v not in passed:
                releases.append(v)
        return retains, releases

    def is_back_edge(self, source: Block, target: Block) -> bool:
        """An edge to a block that dominates its source: a loop goes round."""
        if not hasattr(self, "_dominators"):
            self._dominators = DominatorTree(self.fn)
        return bool(self._dominators.dominates(target, source))

    def held_at_terminator(self, block: Block) -> set[Value]:
        term = block.terminator
        assert term is not None
        live = self.live_out(block, self.live_in)
        live |= {v for v in self.uses(term)}
        return {v for v in live if self.is_owned(v)}

    def consume_retains(self, inst: Instruction) -> list[Value]:
        """The consumed values of a non-branching instruction that need a retain first."""
        dying = self.dying.get(inst, set())
        counts = Counter(v for v in consumed_values(inst) if v in self.counted)
        out: list[Value] = []
        for v, n in counts.items():
            out.extend([v] * (n - (1 if v in dying else 0)))
        return out


def operand_values_of(target: BranchTarget) -> list[Value]:
    return list(_walk(target.args))
