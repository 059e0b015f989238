"""`dce`: aggressive dead-code elimination (mark what is live, sweep the rest).

Unlike a plain "remove what has no users" worklist, liveness starts from the
instructions that must run and flows backwards through operands, so dead cycles
through block arguments (a loop counter nobody reads) disappear too:

  1. blocks the entry cannot reach are removed;
  2. roots are live: terminators (their own operands, such as a condition or a
     returned value, not the values they pass to blocks) and instructions with
     effects — stores, stack pushes and pops, calls of functions that have effects
     (the `SideEffects` analysis) and `random`, which advances the generator state;
  3. a live instruction makes its operands live; a live block argument makes the
     value every incoming edge passes to it live;
  4. everything else goes: instructions that are not live, and arguments of
     non-entry blocks that are not live together with the matching operand on every
     incoming edge.

Entry-block arguments (the parameters) and the arguments of blocks reached by
`branchEnum` (bound to an enum case's values) are kept. Functions are never removed:
a user may call any of them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from dlvm.ir import (
    Argument,
    Block,
    BranchTarget,
    Function,
    FunctionPass,
    Instruction,
    PassContext,
    Value,
)
from dlvm.ir.analysis import ControlFlowGraph, SideEffects
from dlvm.ir.core import iter_nested

# Terminators whose targets pass explicit, removable values to block arguments.
EXPLICIT_EDGES = frozenset({"branch", "conditional"})
# Instructions without declared effects that must still run: `random` draws from the
# interpreter's generator, so removing one changes every later draw.
STATEFUL = frozenset({"random"})


@dataclass
class DeadCodeElimination(FunctionPass):
    name = "dce"
    summary = "remove instructions, block arguments and blocks whose results are never used"

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        blocks = remove_unreachable_blocks(fn)
        live = live_values(fn)
        args = remove_dead_arguments(fn, live)
        insts = remove_dead_instructions(fn, live)
        ctx.stat("unreachable blocks removed", blocks)
        ctx.stat("block arguments removed", args)
        ctx.stat("instructions removed", insts)
        return bool(blocks or args or insts)


# ---------------------------------------------------------------- helpers


def walk(obj: Any) -> Iterator[Value]:
    """Values in a field (lists, tuples and literal elements included)."""
    if isinstance(obj, Value):
        yield obj
        yield from iter_nested(obj)
    elif isinstance(obj, list | tuple):
        for x in obj:
            yield from walk(x)


def own_operands(inst: Instruction) -> Iterator[Value]:
    """The operands `inst` itself reads: all but the values it passes to blocks."""
    for name in inst.op.value_fields:
        if name not in inst.op.target_fields:
            yield from walk(inst.fields.get(name))


def incoming_edges(fn: Function) -> dict[Block, list[BranchTarget]]:
    """Every branch target in `fn`, grouped by the block it goes to."""
    edges: dict[Block, list[BranchTarget]] = {b: [] for b in fn.blocks}
    for block in fn.blocks:
        term = block.terminator
        for target in term.targets if term is not None else []:
            edges.setdefault(target.block, []).append(target)
    return edges


def pinned_blocks(fn: Function) -> set[Block]:
    """Blocks whose arguments cannot be removed: the entry, and `branchEnum` targets."""
    pinned = {fn.entry}
    for block in fn.blocks:
        term = block.terminator
        if term is not None and term.opcode not in EXPLICIT_EDGES:
            pinned.update(term.successors)
    return pinned


def is_removable(inst: Instruction, effects: SideEffects) -> bool:
    """Whether `inst` may be dropped when its result is unused."""
    if inst.is_terminator or inst.opcode in STATEFUL:
        return False
    return not effects.instruction_has_effects(inst)


# ---------------------------------------------------------------- the three steps


def remove_unreachable_blocks(fn: Function) -> int:
    cfg: ControlFlowGraph = fn.analysis(ControlFlowGraph)
    dead = [b for b in fn.blocks if not cfg.is_reachable(b)]
    for block in dead:
        fn.remove_block(block)
    return len(dead)


def live_values(fn: Function) -> set[Value]:
    """Instructions and block arguments whose values may matter (mark phase)."""
    assert fn.module is not None
    effects: SideEffects = fn.module.analysis(SideEffects)
    edges = incoming_edges(fn)
    live: set[Value] = set()
    work: list[Value] = []

    def mark(v: Value) -> None:
        if isinstance(v, Instruction | Argument) and v not in live:
            live.add(v)
            work.append(v)

    for block in pinned_blocks(fn):
        for arg in block.arguments:
            mark(arg)
    for inst in fn.instructions():
        if not is_removable(inst, effects):
            mark(inst)
    while work:
        v = work.pop()
        if isinstance(v, Instruction):
            for u in own_operands(v):
                mark(u)
            continue
        assert isinstance(v, Argument) and v.block is not None
        index = v.index()
        for target in edges.get(v.block, []):
            if index < len(target.args):  # branchEnum targets bind no explicit values
                for u in walk(target.args[index]):
                    mark(u)
    return live


def remove_dead_arguments(fn: Function, live: set[Value]) -> int:
    """Drop dead arguments of unpinned blocks and the values passed to them."""
    pinned = pinned_blocks(fn)
    edges = incoming_edges(fn)
    removed = 0
    for block in fn.blocks:
        if block in pinned:
            continue
        keep = [a in live for a in block.arguments]
        if all(keep):
            continue
        for target in edges[block]:
            target.args = [v for v, k in zip(target.args, keep, strict=True) if k]
        for arg, k in zip(list(block.arguments), keep, strict=True):
            if not k:
                block.remove_argument(arg)
                removed += 1
    return removed


def remove_dead_instructions(fn: Function, live: set[Value]) -> int:
    removed = 0
    for block in fn.blocks:
        kept = [i for i in block.instructions if i in live]
        if len(kept) == len(block.instructions):
            continue
        for inst in block.instructions:
            if inst not in live:
                inst.block = None
        removed += len(block.instructions) - len(kept)
        block.instructions[:] = kept
    if removed:
        fn.invalidate()
    return removed
