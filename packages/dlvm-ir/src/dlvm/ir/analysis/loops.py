"""Natural loops, nested into a forest (the approach of LLVM's LoopInfo).

A back edge is an edge whose target dominates its source; the target is a
loop header. All back edges into one header make one loop. Cycles without a
dominating header (irreducible control flow) are not loops here.
"""

from __future__ import annotations

from ..core import Block, Function
from .cfg import ControlFlowGraph, unique
from .dominance import DominatorTree


class Loop:
    """A natural loop: a header and the blocks that reach a latch without passing it."""

    def __init__(self, header: Block, cfg: ControlFlowGraph) -> None:
        self.header = header
        self.blocks: set[Block] = {header}
        self.parent: Loop | None = None
        self.subloops: list[Loop] = []
        self._cfg = cfg

    def __repr__(self) -> str:
        return f"<Loop {self.header.name or '?'} depth={self.depth} blocks={len(self.blocks)}>"

    def __contains__(self, block: Block) -> bool:
        return block in self.blocks

    def _ordered(self, blocks: set[Block]) -> list[Block]:
        return sorted(blocks, key=self._cfg.rpo_index.__getitem__)

    @property
    def depth(self) -> int:
        """1 for an outermost loop, one more for each enclosing loop."""
        depth, loop = 1, self.parent
        while loop is not None:
            depth, loop = depth + 1, loop.parent
        return depth

    @property
    def block_list(self) -> list[Block]:
        """The blocks in reverse post-order (the header first)."""
        return self._ordered(self.blocks)

    @property
    def latches(self) -> list[Block]:
        """Blocks in the loop that branch back to the header."""
        return [p for p in self._cfg.predecessors(self.header) if p in self.blocks]

    @property
    def exiting_blocks(self) -> list[Block]:
        """Blocks in the loop with a successor outside it."""
        return [
            b for b in self.block_list if any(s not in self.blocks for s in self._cfg.successors(b))
        ]

    @property
    def exit_blocks(self) -> list[Block]:
        """Blocks outside the loop that a loop block branches to."""
        return unique(
            s for b in self.block_list for s in self._cfg.successors(b) if s not in self.blocks
        )

    @property
    def preheader(self) -> Block | None:
        """The only predecessor from outside, if its only successor is the header.

        That is where loop-invariant code can be hoisted to without adding a block.
        """
        outside = [p for p in self._cfg.predecessors(self.header) if p not in self.blocks]
        if len(outside) != 1 or self._cfg.successors(outside[0]) != [self.header]:
            return None
        return outside[0]


class LoopInfo:
    """The loop forest of a function; `loop_for` gives a block's innermost loop."""

    def __init__(self, fn: Function) -> None:
        self.function = fn
        self.cfg: ControlFlowGraph = fn.analysis(ControlFlowGraph)
        self.dom: DominatorTree = fn.analysis(DominatorTree)
        self._innermost: dict[Block, Loop] = {}
        discovered: list[Loop] = []
        # Inner headers are dominated by outer ones, so walking the dominator tree
        # backwards finds inner loops first; an outer loop then adopts them whole.
        for header in reversed(list(self.dom.preorder())):
            loop = self._discover(header)
            if loop is not None:
                discovered.append(loop)
        order = self.cfg.rpo_index
        for loop in discovered:
            loop.subloops.sort(key=lambda sub: order[sub.header])
        self.top_level: list[Loop] = sorted(
            (lp for lp in discovered if lp.parent is None), key=lambda lp: order[lp.header]
        )
        self.loops: list[Loop] = self._preorder()
        for loop in reversed(self.loops):  # inner first: add subloop blocks to parents
            if loop.parent is not None:
                loop.parent.blocks |= loop.blocks

    def _discover(self, header: Block) -> Loop | None:
        """Walk backwards from the latches to the header, claiming unowned blocks."""
        latches = [p for p in self.cfg.predecessors(header) if self.dom.dominates(header, p)]
        if not latches:
            return None
        loop = Loop(header, self.cfg)
        self._innermost[header] = loop
        work = [b for b in latches if b is not header]
        while work:
            block = work.pop()
            owner = self._innermost.get(block)
            if owner is None:
                self._innermost[block] = loop
                loop.blocks.add(block)
                work.extend(self.cfg.predecessors(block))
                continue
            while owner.parent is not None:
                owner = owner.parent
            if owner is not loop:  # an inner loop found earlier: adopt it, skip its body
                owner.parent = loop
                loop.subloops.append(owner)
                work.extend(self.cfg.predecessors(owner.header))
        return loop

    def _preorder(self) -> list[Loop]:
        out: list[Loop] = []
        stack = list(reversed(self.top_level))
        while stack:
            loop = stack.pop()
            out.append(loop)
            stack.extend(reversed(loop.subloops))
        return out

    def loop_for(self, block: Block) -> Loop | None:
        """The innermost loop containing `block`, or None."""
        return self._innermost.get(block)

    def depth(self, block: Block) -> int:
        """Loop nesting depth of `block` (0 outside loops)."""
        loop = self._innermost.get(block)
        return loop.depth if loop is not None else 0

    def is_header(self, block: Block) -> bool:
        loop = self._innermost.get(block)
        return loop is not None and loop.header is block
