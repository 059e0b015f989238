"""Dominator and post-dominator trees (Cooper, Harvey and Kennedy, "A Simple,
Fast Dominance Algorithm", 2001).

The iterative algorithm is short and, on the shallow CFGs compilers see,
as fast as Lengauer-Tarjan. Each tree also numbers its nodes in preorder so
that `dominates` is O(1), which the verifier relies on: it asks once for
every operand of every instruction.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from ..core import Argument, Block, Function, GlobalVariable, Instruction, LiteralValue, Value
from .cfg import ControlFlowGraph, depth_first

N = TypeVar("N", bound=Hashable)


class _Tree(Generic[N]):
    """The dominator tree of the nodes of a graph reachable from `root`."""

    def __init__(
        self,
        root: N,
        successors: Callable[[N], list[N]],
        predecessors: Callable[[N], list[N]],
    ) -> None:
        self.root = root
        self._predecessors = predecessors
        postorder, _ = depth_first(root, successors)
        self.order: list[N] = postorder[::-1]  # reverse post-order
        self._number = {n: i for i, n in enumerate(self.order)}
        self.parent: dict[N, N | None] = self._immediate_dominators()
        self.children: dict[N, list[N]] = {n: [] for n in self.order}
        for n in self.order[1:]:
            parent = self.parent[n]
            assert parent is not None
            self.children[parent].append(n)
        self._enter: dict[N, int] = {}
        self._last: dict[N, int] = {}  # the largest preorder number in the subtree
        self.depth: dict[N, int] = {}
        self._number_preorder()
        self._frontier: dict[N, list[N]] | None = None

    def _immediate_dominators(self) -> dict[N, N | None]:
        """Iterate idom(n) = intersection of the processed predecessors' dominators."""
        number = self._number
        idom: dict[N, N] = {self.root: self.root}

        def intersect(a: N, b: N) -> N:
            # Walk up from the node later in RPO until both fingers meet.
            while a is not b:
                while number[a] > number[b]:
                    a = idom[a]
                while number[b] > number[a]:
                    b = idom[b]
            return a

        changed = True
        while changed:
            changed = False
            for n in self.order[1:]:
                new: N | None = None
                for p in self._predecessors(n):
                    if p in idom:  # reachable from the root and already processed
                        new = p if new is None else intersect(p, new)
                if new is not None and idom.get(n) is not new:
                    idom[n] = new
                    changed = True
        result: dict[N, N | None] = dict(idom)
        result[self.root] = None
        return result

    def _number_preorder(self) -> None:
        counter = 0
        stack: list[tuple[N, int]] = [(self.root, 0)]
        while stack:
            node, depth = stack.pop()
            if node in self._enter:  # second visit: the subtree is done
                self._last[node] = counter - 1
                continue
            self._enter[node] = counter
            self.depth[node] = depth
            counter += 1
            stack.append((node, depth))
            stack.extend((c, depth + 1) for c in reversed(self.children[node]))

    def contains(self, n: N) -> bool:
        return n in self._enter

    def dominates(self, a: N, b: N) -> bool:
        if a is b:
            return True
        ea, eb = self._enter.get(a), self._enter.get(b)
        if ea is None or eb is None:
            return False
        return ea <= eb <= self._last[a]

    def preorder(self) -> Iterator[N]:
        stack = [self.root]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(self.children[node]))

    def common_ancestor(self, a: N, b: N) -> N | None:
        if not (self.contains(a) and self.contains(b)):
            return None
        while self.depth[a] > self.depth[b]:
            a = self.parent[a]  # type: ignore[assignment]
        while self.depth[b] > self.depth[a]:
            b = self.parent[b]  # type: ignore[assignment]
        while a is not b:
            a, b = self.parent[a], self.parent[b]  # type: ignore[assignment]
        return a

    def frontier(self, n: N) -> list[N]:
        if self._frontier is None:
            self._frontier = self._frontiers()
        return self._frontier.get(n, [])

    def _frontiers(self) -> dict[N, list[N]]:
        """Cooper-Harvey-Kennedy: walk up from each predecessor to the join's idom."""
        found: dict[N, dict[N, None]] = {n: {} for n in self.order}
        for n in self.order:
            preds = [p for p in self._predecessors(n) if p in self._enter]
            if len(preds) < 2 and n is not self.root:
                continue  # a single predecessor is n's idom: nothing to record
            stop = self.parent[n]
            for runner in preds:
                r: N | None = runner
                while r is not None and r is not stop:
                    found[r][n] = None
                    r = self.parent[r]
        return {n: sorted(fs, key=self._number.__getitem__) for n, fs in found.items() if fs}


# ---------------------------------------------------------------- dominators


class DominatorTree:
    """Which blocks dominate which, over the blocks reachable from the entry.

    Unreachable blocks are outside the tree: they dominate and are dominated by
    nothing but themselves, and their `idom` is None.
    """

    def __init__(self, fn: Function) -> None:
        self.function = fn
        self.cfg: ControlFlowGraph = fn.analysis(ControlFlowGraph)
        self._tree: _Tree[Block] | None = None
        if fn.blocks:
            self._tree = _Tree(fn.entry, self.cfg.successors, self.cfg.predecessors)
        # Position of each instruction in its block, for same-block dominance in O(1).
        self._position: dict[Instruction, int] = {
            inst: i for b in self.cfg.rpo for i, inst in enumerate(b.instructions)
        }

    @property
    def root(self) -> Block | None:
        return self._tree.root if self._tree else None

    def is_reachable(self, block: Block) -> bool:
        return self._tree is not None and self._tree.contains(block)

    def idom(self, block: Block) -> Block | None:
        """The immediate dominator; None for the entry and unreachable blocks."""
        return self._tree.parent.get(block) if self._tree else None

    def dominates(self, a: Block, b: Block) -> bool:
        """Whether every path from the entry to `b` goes through `a` (reflexive)."""
        if a is b:
            return True
        return self._tree is not None and self._tree.dominates(a, b)

    def properly_dominates(self, a: Block, b: Block) -> bool:
        return a is not b and self.dominates(a, b)

    def children(self, block: Block) -> list[Block]:
        """Blocks immediately dominated by `block`, in reverse post-order."""
        return list(self._tree.children.get(block, ())) if self._tree else []

    def depth(self, block: Block) -> int | None:
        """Distance from the entry in the tree (0 for the entry; None if unreachable)."""
        return self._tree.depth.get(block) if self._tree else None

    def common_dominator(self, a: Block, b: Block) -> Block | None:
        """The nearest block dominating both, or None if either is unreachable."""
        return self._tree.common_ancestor(a, b) if self._tree else None

    def dominance_frontier(self, block: Block) -> list[Block]:
        """Blocks where `block`'s dominance ends (where SSA needs a block argument).

        Computed for all blocks on the first request; ordered by reverse post-order.
        """
        return list(self._tree.frontier(block)) if self._tree else []

    def preorder(self) -> Iterator[Block]:
        """The tree from the entry, parents before children."""
        return self._tree.preorder() if self._tree else iter(())

    def value_dominates(self, definition: Value, user: Instruction) -> bool:
        """Whether `definition` is available at `user`.

        A branch argument is used at its terminator, so `user` is that terminator.
        Functions, globals and literals are available everywhere; an argument of
        block B everywhere B dominates; an instruction after itself in its block,
        and in the blocks its block properly dominates.
        """
        if isinstance(definition, Instruction):  # the common case first, inlined
            block, used_in = definition.block, user.block
            if block is None or used_in is None:
                return False
            if block is not used_in:
                return self.properly_dominates(block, used_in)
            position = self._position
            i, j = position.get(definition), position.get(user)
            return (definition.index() if i is None else i) < (user.index() if j is None else j)
        if isinstance(definition, Function | GlobalVariable | LiteralValue):
            return True
        if user.block is None:
            return False
        if isinstance(definition, Argument):
            return definition.block is not None and self.dominates(definition.block, user.block)
        return False  # an unresolved placeholder

    def _instruction_dominates(self, definition: Instruction, user: Instruction) -> bool:
        block = definition.block
        if block is None or user.block is None:
            return False
        if block is not user.block:
            return self.properly_dominates(block, user.block)
        return self._index(definition) < self._index(user)

    def _index(self, inst: Instruction) -> int:
        i = self._position.get(inst)
        return i if i is not None else inst.index()


# ---------------------------------------------------------------- post-dominators


class _VirtualExit:
    """The node every exit block flows into, so that several returns give one tree."""

    def __repr__(self) -> str:
        return "<virtual exit>"


Node = Block | _VirtualExit


class PostDominatorTree:
    """Which blocks post-dominate which: every path from `b` to an exit goes through `a`.

    Unlike the original DLVM, which built one tree per exit block, all exits
    (every reachable block whose terminator has no successors) flow into one
    virtual exit node, so a function with several returns has a single tree.
    The virtual exit is never returned: `ipdom` is None for a block whose
    immediate post-dominator is the virtual exit.

    As in LLVM, a region that reaches no exit (an endless loop) gets one of its
    blocks joined to the virtual exit too, so every reachable block is in the
    tree and no block seems to post-dominate a branch into an endless loop.
    Blocks the entry does not reach are outside the tree.
    """

    def __init__(self, fn: Function) -> None:
        self.function = fn
        self.cfg: ControlFlowGraph = fn.analysis(ControlFlowGraph)
        self.exit = _VirtualExit()
        self._exits = self._joined_to_exit()
        self._exit_set = set(self._exits)
        self._tree: _Tree[Node] = _Tree(
            self.exit, self._reverse_successors, self._reverse_predecessors
        )

    def _joined_to_exit(self) -> list[Block]:
        """The exit blocks, then one block of each region that cannot reach them."""
        joined = list(self.cfg.exits)
        covered: set[Block] = set()
        self._cover(joined, covered)
        for b in self.cfg.postorder:  # deep blocks first: in a loop, a latch before its header
            if b not in covered:
                joined.append(b)
                self._cover([b], covered)
        return joined

    def _cover(self, starts: list[Block], covered: set[Block]) -> None:
        """Add to `covered` every block from which one of `starts` can be reached."""
        work = [b for b in starts if b not in covered]
        covered.update(work)
        while work:
            for p in self.cfg.predecessors(work.pop()):
                if p not in covered:
                    covered.add(p)
                    work.append(p)

    def _reverse_successors(self, n: Node) -> list[Node]:
        if isinstance(n, _VirtualExit):
            return list(self._exits)
        return list(self.cfg.predecessors(n))

    def _reverse_predecessors(self, n: Node) -> list[Node]:
        if isinstance(n, _VirtualExit):
            return []
        preds: list[Node] = list(self.cfg.successors(n))
        if n in self._exit_set:
            preds.append(self.exit)
        return preds

    @property
    def roots(self) -> list[Block]:
        """Blocks with no block as immediate post-dominator (the exits, among others)."""
        return [b for b in self._tree.children[self.exit] if isinstance(b, Block)]

    def is_reachable(self, block: Block) -> bool:
        """Whether `block` is in the tree (whether the entry reaches it)."""
        return self._tree.contains(block)

    def ipdom(self, block: Block) -> Block | None:
        """The immediate post-dominator; None when it is the virtual exit or unknown."""
        parent = self._tree.parent.get(block)
        return parent if isinstance(parent, Block) else None

    def post_dominates(self, a: Block, b: Block) -> bool:
        """Reflexive; False for blocks outside the tree (except `a is b`)."""
        return a is b or self._tree.dominates(a, b)

    def properly_post_dominates(self, a: Block, b: Block) -> bool:
        return a is not b and self.post_dominates(a, b)

    def children(self, block: Block) -> list[Block]:
        return [c for c in self._tree.children.get(block, []) if isinstance(c, Block)]

    def post_dominance_frontier(self, block: Block) -> list[Block]:
        """Blocks on which `block` is control dependent."""
        return [b for b in self._tree.frontier(block) if isinstance(b, Block)]

    def preorder(self) -> Iterator[Block]:
        """The tree from the virtual exit (not yielded), parents before children."""
        return (n for n in self._tree.preorder() if isinstance(n, Block))
