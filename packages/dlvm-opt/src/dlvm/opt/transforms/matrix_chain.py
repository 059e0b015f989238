"""`matrix-chain-reordering`: re-associate chains of matrix products in the cheapest order.

A product A·B of an m×k and a k×n matrix costs m·k·n multiply-adds, and the order in which a
chain A₁·A₂·…·Aₙ is multiplied can change the total by orders of magnitude. The pass
collects each tree of `dot`s whose inner products are used only once (by the next `dot`, in
the same block), finds the cheapest parenthesization with the classic O(n³) dynamic program
over the chain's dimensions, and rebuilds the tree in that order when it is strictly cheaper.
The top `dot` keeps its place and name; the inner ones are rebuilt just before it.

Only rank-2 products with static shapes take part: a chain with a dynamic dimension has no
known cost. Matrix multiplication is associative, so integer results are unchanged; floating
-point results change by rounding only, as with any reassociation of sums.

Statistics: `flops before` / `flops after` count 2·m·k·n per product (a multiply and an add)
over the chains that were reordered.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlvm.ir import Builder, Function, FunctionPass, Instruction, Module, PassContext, Value
from dlvm.ir.analysis import UseDefInfo
from dlvm.ir.core import erase_instructions
from dlvm.ir.types import TensorType

# A parenthesization: a leaf index, or a pair of sub-trees.
Tree = int | tuple["Tree", "Tree"]


def matrix_shape(v: Value, module: Module) -> tuple[int, int] | None:
    """(rows, columns) of a static matrix; None for anything else."""
    t = module.resolve(v.type)
    if isinstance(t, TensorType) and t.rank == 2 and t.is_static:
        return t.shape[0], t.shape[1]  # type: ignore[return-value]
    return None


def optimal_order(dims: list[int]) -> tuple[int, Tree]:
    """The cheapest parenthesization of matrices i×… with `dims[i]` × `dims[i+1]` shapes:
    (its multiply-add count, its tree). Ties keep the leftmost split."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(2, n + 1):
        for i in range(n - length + 1):
            j = i + length - 1
            cost[i][j] = -1
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] < 0 or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k

    def tree(i: int, j: int) -> Tree:
        if i == j:
            return i
        k = split[i][j]
        return (tree(i, k), tree(k + 1, j))

    return cost[0][n - 1], tree(0, n - 1)


def tree_cost(tree: Tree, dims: list[int]) -> tuple[int, int, int]:
    """(multiply-adds, first row index, last column index) of a parenthesization."""
    if isinstance(tree, int):
        return 0, tree, tree + 1
    lc, li, lk = tree_cost(tree[0], dims)
    rc, _, rj = tree_cost(tree[1], dims)
    return lc + rc + dims[li] * dims[lk] * dims[rj], li, rj


@dataclass
class Chain:
    """A tree of `dot`s under `top`: the inner products, the leaves in order, and the
    current parenthesization over the leaves' indices."""

    top: Instruction
    inner: list[Instruction]
    leaves: list[Value]
    tree: Tree


class ChainCollector:
    """Finds the product trees of one function."""

    def __init__(self, fn: Function, module: Module) -> None:
        self.module = module
        self.usedef = UseDefInfo(fn)

    def is_matrix_dot(self, v: Value) -> bool:
        return (isinstance(v, Instruction) and v.opcode == "dot"
                and all(matrix_shape(x, self.module) for x in (v, v.lhs, v.rhs)))

    def is_inner(self, v: Value, parent: Instruction) -> bool:
        """`v` is a product used only by `parent`, in its block: part of `parent`'s chain."""
        return (self.is_matrix_dot(v) and v.block is parent.block  # type: ignore[union-attr]
                and self.usedef.uses_count(v) == 1)

    def chain(self, top: Instruction) -> Chain:
        inner: list[Instruction] = []
        leaves: list[Value] = []

        def walk(v: Value, parent: Instruction | None) -> Tree:
            if parent is not None and not self.is_inner(v, parent):
                leaves.append(v)
                return len(leaves) - 1
            assert isinstance(v, Instruction)
            if parent is not None:
                inner.append(v)
            return (walk(v.lhs, v), walk(v.rhs, v))

        tree = walk(top, None)
        return Chain(top, inner, leaves, tree)

    def chains(self, fn: Function) -> list[Chain]:
        """Every maximal product tree with three or more matrices."""
        out = []
        for block in fn.blocks:
            for inst in block.instructions:
                if not self.is_matrix_dot(inst) or self._is_inside_chain(inst):
                    continue
                c = self.chain(inst)
                if len(c.leaves) >= 3:
                    out.append(c)
        return out

    def _is_inside_chain(self, inst: Instruction) -> bool:
        users = self.usedef.users(inst)
        return len(users) == 1 and self.is_inner(inst, users[0]) and self.is_matrix_dot(users[0])


@dataclass
class MatrixChainReordering(FunctionPass):
    """Reorder each chain of matrix products by the matrix-chain dynamic program."""

    name = "matrix-chain-reordering"
    summary = "reassociate chains of dot by the optimal-order DP"

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        module = fn.module
        if module is None:
            return False
        changed = False
        replaced: list[Instruction] = []
        for chain in ChainCollector(fn, module).chains(fn):
            changed |= reorder(chain, module, ctx, replaced)
        erase_instructions(replaced)  # at once: one by one is quadratic in a long block
        return changed


def chain_dims(chain: Chain, module: Module) -> list[int]:
    shapes = [matrix_shape(v, module) for v in chain.leaves]
    dims = [shapes[0][0]] + [s[1] for s in shapes]  # type: ignore[index]
    return dims


def reorder(chain: Chain, module: Module, ctx: PassContext,
            replaced: list[Instruction] | None = None) -> bool:
    """Rebuild `chain` in its optimal order when that is strictly cheaper. Its old inner
    products, which nothing else uses, are erased, or added to `replaced` for the caller
    to erase."""
    dims = chain_dims(chain, module)
    before, _, _ = tree_cost(chain.tree, dims)
    after, tree = optimal_order(dims)
    if after >= before:
        return False
    b = Builder(module)
    b.position_before(chain.top)
    lhs, rhs = (build(b, t, chain.leaves) for t in tree)  # type: ignore[union-attr]
    chain.top.fields["lhs"], chain.top.fields["rhs"] = lhs, rhs
    if replaced is None:
        erase_instructions(chain.inner)
    else:
        replaced.extend(chain.inner)
    ctx.stat("chains reordered")
    ctx.stat("flops before", 2 * before)
    ctx.stat("flops after", 2 * after)
    return True


def build(b: Builder, tree: Tree, leaves: list[Value]) -> Value:
    """The product of a sub-tree, built in post-order (left operand first)."""
    if isinstance(tree, int):
        return leaves[tree]
    lhs = build(b, tree[0], leaves)
    rhs = build(b, tree[1], leaves)
    return b.dot(lhs, rhs)
