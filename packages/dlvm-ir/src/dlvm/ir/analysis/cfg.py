"""The control-flow graph of a function, restricted to what the entry reaches.

Blocks that the entry cannot reach take no part in dominance or loops, so the
graph keeps only the reachable part: `blocks`, `predecessors`, `exits` and the
edge lists all ignore unreachable blocks. `successors` still answers for any
block, since a pass deleting dead blocks may want to look at them.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TypeVar

from ..core import Block, Function

N = TypeVar("N", bound=Hashable)


def unique(items: Iterable[N]) -> list[N]:
    """The items without duplicates, first occurrence kept (order is stable)."""
    return list(dict.fromkeys(items))


def depth_first(root: N, successors: Callable[[N], list[N]]) -> tuple[list[N], list[tuple[N, N]]]:
    """Postorder of the nodes reachable from `root`, and the retreating edges.

    Iterative, so 10,000-block functions do not hit Python's recursion limit.
    A retreating edge goes to a node still on the DFS stack (a self-loop too).
    """
    postorder: list[N] = []
    retreating: list[tuple[N, N]] = []
    visited: set[N] = {root}
    on_stack: set[N] = {root}
    stack: list[tuple[N, Iterator[N]]] = [(root, iter(successors(root)))]
    while stack:
        node, it = stack[-1]
        for succ in it:
            if succ not in visited:
                visited.add(succ)
                on_stack.add(succ)
                stack.append((succ, iter(successors(succ))))
                break
            if succ in on_stack:
                retreating.append((node, succ))
        else:
            stack.pop()
            on_stack.discard(node)
            postorder.append(node)
    return postorder, retreating


class ControlFlowGraph:
    """Successors, predecessors and traversal orders of a function's blocks."""

    def __init__(self, fn: Function) -> None:
        self.function = fn
        self._successors: dict[Block, list[Block]] = {}
        self._edge_count: dict[Block, int] = {}  # targets of each terminator, duplicates too
        self._predecessors: dict[Block, list[Block]] = {}
        self._incoming: dict[Block, int] = {}  # incoming edges, duplicates too
        self.postorder: list[Block] = []
        self.rpo: list[Block] = []
        self.back_edges: list[tuple[Block, Block]] = []
        if fn.blocks:
            self._build(fn)
        self.reachable: set[Block] = set(self.rpo)
        self.rpo_index: dict[Block, int] = {b: i for i, b in enumerate(self.rpo)}

    def _build(self, fn: Function) -> None:
        self.postorder, self.back_edges = depth_first(fn.entry, self.successors)
        self.rpo = self.postorder[::-1]
        self._predecessors = {b: [] for b in self.rpo}
        self._incoming = dict.fromkeys(self.rpo, 0)
        reachable = set(self.rpo)
        for b in (b for b in fn.blocks if b in reachable):  # layout order
            for s in self._targets(b):
                self._incoming[s] += 1
            for s in self.successors(b):
                self._predecessors[s].append(b)

    def _targets(self, block: Block) -> list[Block]:
        """The blocks a terminator branches to, duplicates kept, foreign blocks dropped."""
        # A block without a terminator (malformed) has no successors; the verifier
        # reports it. Targets in another function are reported there too.
        return [s for s in block.successors if s.function is self.function]

    @property
    def blocks(self) -> list[Block]:
        """The reachable blocks in reverse post-order (the entry first)."""
        return self.rpo

    def successors(self, block: Block) -> list[Block]:
        """Distinct successors in branch order."""
        succs = self._successors.get(block)
        if succs is None:
            targets = self._targets(block)
            self._edge_count[block] = len(targets)
            succs = self._successors[block] = unique(targets)
        return list(succs)

    def predecessors(self, block: Block) -> list[Block]:
        """Distinct reachable predecessors, in the function's block order."""
        return list(self._predecessors.get(block, ()))

    def is_reachable(self, block: Block) -> bool:
        return block in self.reachable

    @property
    def exits(self) -> list[Block]:
        """Reachable blocks that leave the function (returns, or no terminator at all)."""
        return [b for b in self.rpo if not self.successors(b)]

    @property
    def critical_edges(self) -> list[tuple[Block, Block]]:
        """Edges from a block with several targets to a block with several incoming edges.

        Edges are counted with multiplicity: `conditional %c then 'b(1) else 'b(2)` makes
        `(a, b)` critical, since values on one edge cannot be placed without splitting it.
        """
        return [
            (b, s)
            for b in self.rpo
            if self._edge_count.get(b, 0) > 1
            for s in self.successors(b)
            if self._incoming[s] > 1
        ]
