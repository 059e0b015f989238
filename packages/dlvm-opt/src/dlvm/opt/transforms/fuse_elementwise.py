"""`fuse-elementwise`: outline regions of element-wise code into `!kernel` functions.

    %z = dot %x, %w                          %z = dot %x, %w
    %a = add %z, %bias              →        %h = apply @f_kernel0(%z, %bias) -> T
    %h = tanh %a
                                             !kernel
                                             func @f_kernel0: (T, B) -> T {
                                             'entry(%z: T, %bias: B):
                                                 %a = add %z: T, %bias: B
                                                 %h = tanh %a: T
                                                 return %h: T
                                             }

A *region* is a connected set (by def-use edges) of instructions of one block, each with the
`elementwise` trait (unary, binary — broadcasting operands included —, compare, `select`,
`dataTypeCast`), plus *trailing reductions*: a `reduce` with an opcode or builtin combinator
joins the region of its operand when that operand has no other use. A reduction is a sink:
its result is an input of whatever uses it, never a way into the region.

Regions grow greedily, in block order, one def-use edge at a time. Two parts merge only when
no path leads from one to the other through code outside both — else the call would have to
run both before and after that code. The paths follow data edges, the order of the block's
non-pure instructions (writes, calls, the terminator), and keep each instruction that may fail
at run time (integer division, dynamic shapes: `licm.may_fail`) between the same two non-pure
instructions, so no effect moves across a failure. Parts are compared as condensed nodes, so a
path through another region counts too, and the condensed graph stays acyclic.

Each region with at least `min_size` instructions and a value used outside becomes a kernel
`@<function>_kernel<N>` (N the first free number in the module), placed after its function.
Its parameters are the region's inputs in order of first use; its result is the region's value
used outside it, or a tuple of them that the caller takes apart with `extract`. The block is
then scheduled topologically, each node as early as its key allows: an instruction's key is its
position, a region's the position of its last instruction or, for a *dot epilogue* (a region
taking the result of a `dot` that only the region uses: bias, activation), just after the
`dot`. So the original order is kept wherever the new dependences allow it.

Kernels are never fused again (the pass skips `!kernel` functions) and `apply` is not
element-wise, so a second run finds nothing new. Instructions are moved, never changed, so
the interpreter computes the same results.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections import defaultdict
from dataclasses import dataclass

from dlvm.ir import (
    AggregateLiteral,
    Argument,
    Block,
    Builder,
    BuiltinRef,
    Function,
    Instruction,
    LiteralValue,
    Module,
    Pass,
    PassContext,
    TupleType,
    Value,
)

from ..rewrite import is_pure, users, uses_of
from .licm import may_fail


@dataclass
class ElementwiseFusion(Pass):
    name = "fuse-elementwise"
    summary = "outline element-wise regions into !kernel functions"

    min_size: int = 2

    def run(self, module: Module, ctx: PassContext) -> bool:
        names = KernelNames({g.name for g in [*module.globals, *module.functions] if g.name})
        formed = fused = 0
        for fn in list(module.functions):
            if not fn.blocks or "kernel" in fn.attributes:
                continue
            kernels = outline_function(fn, module, names, self.min_size)
            formed += len(kernels)
            fused += sum(len(k.blocks[0].instructions) - 1 for k in kernels)
        ctx.stat("kernels formed", formed)
        ctx.stat("instructions fused", fused)
        return formed > 0


# ---------------------------------------------------------------- candidates


def is_fusable_reduction(inst: Instruction) -> bool:
    """A `reduce` a loop nest can fold: its combinator is an opcode or a builtin, not a call."""
    return inst.opcode == "reduce" and isinstance(inst.combinator, str | BuiltinRef)


def is_candidate(inst: Instruction) -> bool:
    return inst.has_trait("elementwise") or is_fusable_reduction(inst)


def may_join(user: Instruction, operand: Instruction,
             uses: dict[Value, list[Instruction]]) -> bool:
    """Whether the def-use edge operand → user may put both in one region."""
    if operand.opcode == "reduce":  # a reduction ends its region
        return False
    if user.opcode == "reduce":  # trailing: reduces a value nothing else needs
        return user.x is operand and uses.get(operand) == [user]
    # a scalar used by tensor code enters the tensor's region as an input: joining them
    # would chain every tensor computation that shares the scalar (the step size of an
    # optimizer, say) into one region over shapes that have no common iteration space
    return rank_of(operand) == rank_of(user)


def rank_of(v: Value) -> int | None:
    return getattr(v.type, "rank", None)


# ---------------------------------------------------------------- regions of one block


class BlockGraph:
    """A block's dependence graph (see `block_graph`), its candidates merged into regions by
    union-find.

    For each region's root it keeps the members (`members`, in no order until `regions`),
    the first and last member's index (`lo`, `hi`), and the condensed graph: the roots of the
    regions it feeds (`succ_roots`) and that feed it (`pred_roots`). A merge relabels the
    neighbours of the region with fewer of them, so the search for an outside path visits
    regions, never their members, and all merges together cost O(n log n)."""

    def __init__(self, insts: list[Instruction], succ: list[list[int]]) -> None:
        n = len(insts)
        self.insts = insts
        self.succ = succ
        self.parent = list(range(n))
        self.members: dict[int, list[int]] = {i: [i] for i in range(n)}
        self.lo = list(range(n))
        self.hi = list(range(n))
        self.succ_roots: list[set[int]] = [set(ss) for ss in succ]
        self.pred_roots: list[set[int]] = [set() for _ in range(n)]
        for j, ss in enumerate(succ):
            for i in ss:
                self.pred_roots[i].add(j)

    def find(self, i: int) -> int:
        parent = self.parent
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def merge(self, a: int, b: int) -> bool:
        """Merge the regions of a and b unless some outside path links them."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return True
        if self.linked_outside(ra, rb) or self.linked_outside(rb, ra):
            return False
        succ_roots, pred_roots = self.succ_roots, self.pred_roots
        if len(succ_roots[ra]) + len(pred_roots[ra]) < len(succ_roots[rb]) + len(pred_roots[rb]):
            ra, rb = rb, ra  # rb, with fewer neighbours, is relabelled ra
        self.parent[rb] = ra
        big, small = self.members.pop(ra), self.members.pop(rb)
        if len(big) < len(small):
            big, small = small, big
        big.extend(small)
        self.members[ra] = big
        self.lo[ra] = min(self.lo[ra], self.lo[rb])
        self.hi[ra] = max(self.hi[ra], self.hi[rb])
        for p in pred_roots[rb]:
            succ_roots[p].discard(rb)
            if p != ra:
                succ_roots[p].add(ra)
        for q in succ_roots[rb]:
            pred_roots[q].discard(rb)
            if q != ra:
                pred_roots[q].add(ra)
        succ_roots[ra] |= succ_roots[rb]
        pred_roots[ra] |= pred_roots[rb]
        for edges in (succ_roots[ra], pred_roots[ra]):
            edges.discard(ra)
            edges.discard(rb)
        succ_roots[rb] = pred_roots[rb] = set()
        return True

    def linked_outside(self, src: int, dst: int) -> bool:
        """Whether a path leaves region `src` and reaches region `dst` through other nodes.

        The path runs through regions other than `src` and `dst` that start before `dst`'s
        last instruction (edges go forward, so the others are pruned) and ends with an edge
        from a region that feeds `dst` (a *target*): there is none when `dst` is fed by
        `src` alone. Two searches meet in the middle, one forwards from `src`, one backwards
        from the targets, level by level, the smaller frontier taking the next step: a path
        is found when they meet, and there is none once either has nothing left to visit."""
        targets = self.pred_roots[dst]
        if len(targets) <= (src in targets):
            return False
        last, lo = self.hi[dst], self.lo
        succ_roots, pred_roots = self.succ_roots, self.pred_roots
        ahead = [r for r in succ_roots[src] if r != dst and lo[r] <= last]
        behind = [t for t in targets if t != src]
        reached, reaching = set(ahead), set(behind)  # from src; to a target
        if not reached.isdisjoint(reaching):
            return True
        while ahead and behind:
            if len(ahead) <= len(behind):
                step: list[int] = []
                for r in ahead:
                    for q in succ_roots[r]:
                        if q not in reached and q != src and q != dst and lo[q] <= last:
                            if q in reaching:
                                return True
                            reached.add(q)
                            step.append(q)
                ahead = step
            else:
                step = []
                for r in behind:
                    for q in pred_roots[r]:
                        if q == src:
                            return True
                        if q not in reaching and q != dst and lo[q] <= last:
                            if q in reached:
                                return True
                            reaching.add(q)
                            step.append(q)
                behind = step
        return False

    def regions(self, min_size: int) -> list[list[int]]:
        """The regions worth outlining: member indices in order, the regions in order."""
        out = []
        for r, m in self.members.items():
            if is_candidate(self.insts[r]) and len(m) >= max(min_size, 1) and any(
                    self.insts[i].has_trait("elementwise") for i in m):
                out.append(sorted(m))
        return sorted(out)


def kernel_called(inst: Instruction) -> Function | None:
    """The `!kernel` that `inst` calls, if it is such a call."""
    callee = inst.fields.get("callee") if inst.opcode == "apply" else None
    return callee if isinstance(callee, Function) and "kernel" in callee.attributes else None


def has_effects(inst: Instruction) -> bool:
    """Non-pure, except a kernel's call: it only computes, like the code it replaced."""
    return not is_pure(inst) and kernel_called(inst) is None


def fails(inst: Instruction, module: Module) -> bool:
    """Whether `inst` may stop the program; a kernel's call when an instruction of it may."""
    kernel = kernel_called(inst)
    if kernel is None:
        return may_fail(inst, module)
    return any(fails(k, module) for k in kernel.blocks[0].instructions[:-1])


def block_graph(block: Block, module: Module) -> BlockGraph:
    """Data edges, the order of effects, and each instruction that may fail kept between the
    same two effects (so that a write, a call or the terminator never crosses a failure).

    An instruction followed by no effect but the block's last instruction gets no edge to
    it: nothing follows the last instruction, so such an edge links no two regions and
    moves nothing, and whether the instruction may fail need not be worked out."""
    insts = block.instructions
    pos: dict[Value, int] = {inst: i for i, inst in enumerate(insts)}
    succ: list[list[int]] = [[] for _ in insts]
    for i, inst in enumerate(insts):
        fed: set[int] = set()
        for v in inst.operands:  # nested values included
            if isinstance(v, LiteralValue):
                continue
            j = pos.get(v)
            if j is not None and j not in fed:
                fed.add(j)
                succ[j].append(i)
    effectful = [has_effects(inst) for inst in insts]
    effects = [i for i, e in enumerate(effectful) if e]
    for a, b in itertools.pairwise(effects):
        succ[a].append(b)
    last = len(insts) - 1
    for i, inst in enumerate(insts):
        if effectful[i]:
            continue
        k = bisect.bisect(effects, i)
        if k == 0 and (not effects or effects[0] == last):
            continue
        if fails(inst, module):
            if k > 0:
                succ[effects[k - 1]].append(i)
            if k < len(effects):
                succ[i].append(effects[k])
    return BlockGraph(list(insts), succ)


def find_regions(block: Block, module: Module, uses: dict[Value, list[Instruction]],
                 min_size: int) -> tuple[BlockGraph, list[list[int]]]:
    """The block's graph and its regions worth outlining (member indices, in order)."""
    graph = block_graph(block, module)
    pos: dict[Value, int] = {inst: i for i, inst in enumerate(graph.insts)}
    for i, inst in enumerate(graph.insts):
        if not is_candidate(inst):
            continue
        for v in inst.operands:
            j = pos.get(v)
            if j is not None and is_candidate(graph.insts[j]) and \
                    may_join(inst, graph.insts[j], uses):
                graph.merge(j, i)
    return graph, graph.regions(min_size)


# ---------------------------------------------------------------- outlining


@dataclass
class Region:
    members: list[Instruction]
    inputs: list[Value]
    outputs: list[Instruction]


def describe_region(insts: list[Instruction], uses: dict[Value, list[Instruction]]) -> Region:
    inside = set(insts)
    inputs: dict[Value, None] = {}  # in order of first use
    for inst in insts:
        for v in uses_of(inst):
            if isinstance(v, Argument | Instruction) and v not in inside:
                inputs[v] = None
    outputs = [i for i in insts if any(u not in inside for u in uses.get(i, ()))]
    return Region(insts, list(inputs), outputs)


def epilogue_of(region: Region, uses: dict[Value, list[Instruction]]) -> Instruction | None:
    """The last `dot` of the block whose result only this region uses, if any."""
    inside = set(region.members)
    block = region.members[0].block
    dots = [v for v in region.inputs if isinstance(v, Instruction) and v.opcode == "dot"
            and v.block is block and all(u in inside for u in uses.get(v, ()))]
    return max(dots, key=lambda d: d.index(), default=None)


class KernelNames:
    """`@<function>_kernel<N>` with the first N free among the module's names. Names are
    only ever taken, so the search for a stem goes on from where it last stopped."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self.next: dict[str, int] = {}

    def new(self, fn: Function) -> str:
        stem = fn.name or "function"
        n = self.next.get(stem, 0)
        while f"{stem}_kernel{n}" in self.taken:
            n += 1
        self.next[stem] = n + 1
        self.taken.add(f"{stem}_kernel{n}")
        return f"{stem}_kernel{n}"


def make_kernel(region: Region, name: str, module: Module) -> Function:
    """A `!kernel` function computing the region's outputs from its inputs."""
    result = (region.outputs[0].type if len(region.outputs) == 1
              else TupleType(tuple(o.type for o in region.outputs)))
    b = Builder(module)
    kernel = b.function(name, [v.type for v in region.inputs], result,
                        [v.name for v in region.inputs], attributes=("kernel",))
    module.remove_function(kernel)  # the caller places it
    mapping: dict[Value, Value] = dict(zip(region.inputs, kernel.entry.arguments, strict=True))
    for inst in region.members:
        copy = Instruction(inst.op, {k: list(v) if isinstance(v, list) else v
                                     for k, v in inst.fields.items()}, inst.type, inst.name)
        copy.replace_uses(mapping)
        b.insert(copy)
        mapping[inst] = copy
    outs = [mapping[o] for o in region.outputs]
    if len(outs) == 1:
        b.ret(outs[0])
    else:
        b.ret(LiteralValue(AggregateLiteral("tuple", tuple(outs)), result))
    return kernel


Node = int | tuple[int]  # an instruction's index, or (k,) for region k


def schedule(graph: BlockGraph, regions: list[list[int]], keys: list[float]) -> list[Node]:
    """A topological order of the block with each region condensed to one node `(k,)`.

    Nodes come out as early as their order keys allow, so the original order is kept
    wherever the dependences permit it."""
    node: dict[int, Node] = {i: i for i in range(len(graph.insts))}
    key: dict[Node, float] = {i: float(i) for i in range(len(graph.insts))}
    for k, members in enumerate(regions):
        for i in members:
            del key[i]
            node[i] = (k,)
        key[(k,)] = keys[k]
    preds: dict[Node, set[Node]] = defaultdict(set)
    succs: dict[Node, set[Node]] = defaultdict(set)
    for i, ss in enumerate(graph.succ):
        for s in ss:
            if node[i] != node[s]:
                preds[node[s]].add(node[i])
                succs[node[i]].add(node[s])
    ready = [(key[n], str(n), n) for n in key if not preds[n]]
    heapq.heapify(ready)
    order: list[Node] = []
    while ready:
        _, _, n = heapq.heappop(ready)
        order.append(n)
        for s in succs[n]:
            preds[s].discard(n)
            if not preds[s]:
                heapq.heappush(ready, (key[s], str(s), s))
    assert len(order) == len(key), "fusion made the block cyclic"
    return order


def outline_function(fn: Function, module: Module, names: KernelNames,
                     min_size: int) -> list[Function]:
    """Outline the regions of every block of `fn`; returns the new kernels."""
    uses = users(fn)
    mapping: dict[Value, Value] = {}
    kernels: list[Function] = []
    for block in fn.blocks:
        graph, regions = find_regions(block, module, uses, min_size)
        if not regions:
            continue
        described = [describe_region([graph.insts[i] for i in m], uses) for m in regions]
        regions = [m for m, r in zip(regions, described, strict=True) if r.outputs]
        described = [r for r in described if r.outputs]  # dead regions are left to dce
        if not regions:
            continue
        keys = []
        for members, region in zip(regions, described, strict=True):
            dot = epilogue_of(region, uses)
            keys.append(dot.index() + 0.5 if dot is not None else float(members[-1]))
        order = schedule(graph, regions, keys)
        block.clear()
        b = Builder(module)
        b.position_at_end(block)
        for n in order:
            if isinstance(n, int):
                block.append(graph.insts[n])
                continue
            region = described[n[0]]
            kernel = make_kernel(region, names.new(fn), module)
            module.add_function(kernel, module.functions.index(fn) + 1 + len(kernels))
            kernels.append(kernel)
            mapping.update(call_kernel(b, kernel, region))
    for inst in fn.instructions():
        inst.replace_uses(mapping)
    return kernels


def call_kernel(b: Builder, kernel: Function, region: Region) -> dict[Value, Value]:
    """`apply @kernel(inputs…)`, taken apart when it returns a tuple; old value → new."""
    if len(region.outputs) == 1:
        out = region.outputs[0]
        return {out: b.call(kernel, region.inputs, name=out.name)}
    call = b.call(kernel, region.inputs)
    return {out: b.extract(call, keys=[k], name=out.name)
            for k, out in enumerate(region.outputs)}
