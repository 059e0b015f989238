"""`cfg-canonicalize`: one exit block, and loops with a preheader, one latch and dedicated exits.

    'a(): return %x          'a(): branch 'exit(%x)
    'b(): return %y    →     'b(): branch 'exit(%y)
                             'exit(%exit_value: T): return %exit_value

For every natural loop, innermost first:
  - preheader: a block `'<header>_preheader` that only branches to the header and is the
    header's only predecessor from outside the loop (LICM hoists into it);
  - unique latch: several back edges are funnelled through one `'<header>_latch` block;
  - dedicated exits: an exit block that is also reached from outside the loop gets a block
    `'<header>_exit` that only the loop branches to.
New blocks take the argument types of the block they forward to, so they fit any edge
(branchEnum's too), and every value check at a block argument happens as before. Unlike the
original, blocks are not split to have at most two predecessors (no `_join` blocks): the
reverse-mode AD of this project does not need it. A function with one `return` keeps it where
it is. Irreducible cycles are not natural loops and are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlvm.ir import (
    Argument,
    Block,
    BranchTarget,
    Builder,
    Function,
    FunctionPass,
    Instruction,
    PassContext,
    TupleType,
)
from dlvm.ir.analysis import ControlFlowGraph, Loop, LoopInfo
from dlvm.ir.core import UniqueNames

# ---------------------------------------------------------------- helpers (licm uses them too)


class BlockNames:
    """The names of a function's blocks, collected once for a pass that adds a block per
    loop (collecting them for each new block would take time quadratic in the blocks)."""

    def __init__(self, fn: Function) -> None:
        self.names = UniqueNames((b.name for b in fn.blocks), separator=".")

    def unique(self, base: str | None) -> str | None:
        """`base`, or `base.1`, `base.2`, … when a block already has that name."""
        return None if base is None else self.names(base)

    def release(self, name: str | None) -> None:
        """A block of that name was removed again."""
        if name is not None:
            self.names.taken.discard(name)


def unique_block_name(fn: Function, base: str | None) -> str | None:
    """`base`, or `base.1`, `base.2`, … when a block of `fn` already has that name."""
    return BlockNames(fn).unique(base)


def forwarding_block(fn: Function, name: str | None, target: Block, index: int,
                     names: BlockNames | None = None) -> Block:
    """A new block at `index` whose arguments mirror `target`'s and which only branches there.

    `names`: the function's block names, when the caller adds many blocks."""
    names = names or BlockNames(fn)
    block = Block(names.unique(name), [Argument(a.type) for a in target.arguments])
    fn.insert_block(index, block)
    b = Builder(fn.module)
    b.position_at_end(block)
    b.create("branch", BranchTarget(target, list(block.arguments)))
    return block


def redirect(fn: Function, sources: list[Block], old: Block, new: Block) -> int:
    """Make every edge from `sources` to `old` go to `new` (with the same values)."""
    moved = 0
    for source in sources:
        term = source.terminator
        assert term is not None
        for t in term.targets:
            if t.block is old:
                t.block = new
                moved += 1
    fn.invalidate()  # targets are edited in place, which does not invalidate by itself
    return moved


def _suffixed(block: Block, suffix: str) -> str | None:
    return f"{block.name}{suffix}" if block.name else None


def make_preheader(fn: Function, loop: Loop, cfg: ControlFlowGraph | None = None,
                   names: BlockNames | None = None) -> Block:
    """Give `loop` a preheader: every edge from outside now enters through one new block.

    `cfg` may be a snapshot taken before other loops got preheaders: that changes no edge
    into this header. For a loop headed by the entry block, the new block becomes the entry.
    """
    header = loop.header
    cfg = cfg or fn.analysis(ControlFlowGraph)
    outside = [p for p in cfg.predecessors(header) if p not in loop.blocks]
    pre = forwarding_block(fn, _suffixed(header, "_preheader"), header, header.index(), names)
    redirect(fn, outside, header, pre)
    return pre


# ---------------------------------------------------------------- the pass


@dataclass
class CFGCanonicalization(FunctionPass):
    name = "cfg-canonicalize"
    summary = "loop preheaders, single exit blocks and dedicated loop exits"

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        changed = merge_returns(fn, ctx)
        while _canonicalize_loops(fn, ctx):
            changed = True
        return changed


def merge_returns(fn: Function, ctx: PassContext) -> bool:
    """Replace several `return`s by branches to one `'exit(%exit_value: T)` block."""
    returns = [b.terminator for b in fn.blocks
               if b.terminator is not None and b.terminator.opcode == "return"]
    if len(returns) < 2:
        return False
    assert fn.module is not None
    result = fn.type_.result
    void = fn.module.resolve(result) == TupleType(())
    names = {a.name for b in fn.blocks for a in b.arguments} | {
        i.name for i in fn.instructions()}
    value_name, n = "exit_value", 0
    while value_name in names:
        n += 1
        value_name = f"exit_value.{n}"
    arguments = [] if void else [Argument(result, value_name)]
    exit_block = Block(unique_block_name(fn, "exit"), arguments)
    fn.append_block(exit_block)
    b = Builder(fn.module)
    b.position_at_end(exit_block)
    if void:
        b.create("return", None)
    else:
        b.create("return", exit_block.arguments[0])
    for ret in returns:
        assert isinstance(ret, Instruction) and ret.block is not None
        block, value = ret.block, ret.fields.get("value")
        ret.erase()
        b.position_at_end(block)
        b.create("branch", BranchTarget(exit_block, [] if void else [value]))
    ctx.stat("returns merged", len(returns))
    return True


def _canonicalize_loops(fn: Function, ctx: PassContext) -> bool:
    """Fix one property for all loops from one snapshot of the loops; False when canonical.

    The properties are fixed in turn (preheaders, then latches, then exits), each in one
    sweep: the fixes of one kind for different loops move different edges. Every fix only
    adds a block, so the loops are recomputed for the next sweep.
    """
    info: LoopInfo = fn.analysis(LoopInfo)
    loops = list(reversed(info.loops))  # reversed preorder: every loop after its subloops
    cfg = info.cfg
    names = BlockNames(fn)
    if need := [lp for lp in loops if lp.preheader is None]:
        for loop in need:
            make_preheader(fn, loop, cfg, names)
        ctx.stat("preheaders created", len(need))
        return True
    if need := [lp for lp in loops if len(lp.latches) > 1]:
        for loop in need:
            latches = loop.latches
            index = max(b.index() for b in latches) + 1
            latch = forwarding_block(fn, _suffixed(loop.header, "_latch"), loop.header, index,
                                     names)
            redirect(fn, latches, loop.header, latch)
        ctx.stat("latches created", len(need))
        return True
    created = 0
    for loop in loops:
        for block in loop.exit_blocks:
            preds = cfg.predecessors(block)
            inside = [p for p in preds if p in loop.blocks]
            if len(inside) == len(preds):
                continue
            index = max(block.index(), 1)  # an edge back to the entry: keep the entry first
            new = forwarding_block(fn, _suffixed(loop.header, "_exit"), block, index, names)
            if redirect(fn, inside, block, new):
                created += 1
            else:  # a subloop's dedicated exit already took these edges
                fn.remove_block(new)
                names.release(new.name)
    ctx.stat("dedicated exits created", created)
    return bool(created)
