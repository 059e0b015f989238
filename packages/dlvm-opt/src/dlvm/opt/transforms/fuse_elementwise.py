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
from collections.abc import Iterable
from dataclasses import dataclass, field

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
        names = {g.name for g in [*module.globals, *module.functions] if g.name}
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
    return True


# ---------------------------------------------------------------- regions of one block


@dataclass
class BlockGraph:
    """A block's dependence graph (see `block_graph`), its candidates merged into regions by
    union-find; `members` maps each region's root to its instructions' indices, in order."""

    insts: list[Instruction]
    succ: list[list[int]]
    parent: list[int] = field(init=False)
    members: dict[int, list[int]] = field(init=False)

    def __post_init__(self) -> None:
        self.parent = list(range(len(self.insts)))
        self.members = {i: [i] for i in range(len(self.insts))}

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def merge(self, a: int, b: int) -> bool:
        """Merge the regions of a and b unless some outside path links them."""
        ra, rb = self.find(a), self.find(b)
        if ra == rb:
            return True
        if self.linked_outside(ra, rb) or self.linked_outside(rb, ra):
            return False
        self.parent[rb] = ra
        self.members[ra] = sorted(self.members[ra] + self.members.pop(rb))
        return True

    def linked_outside(self, src: int, dst: int) -> bool:
        """Whether a path leaves region `src` and reaches region `dst` through other nodes."""
        last = self.members[dst][-1]  # edges go forward in the block: prune past dst
        seen: set[int] = set()
        stack = [r for r in self.successor_regions(src) if r not in (src, dst)]
        while stack:
            r = stack.pop()
            if r in seen or self.members[r][0] > last:
                continue
            seen.add(r)
            for q in self.successor_regions(r):
                if q == dst:
                    return True
                if q != src:
                    stack.append(q)
        return False

    def successor_regions(self, root: int) -> Iterable[int]:
        return {self.find(s) for m in self.members[root] for s in self.succ[m]}


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
    same two effects (so that a write, a call or the terminator never crosses a failure)."""
    insts = block.instructions
    pos: dict[Value, int] = {inst: i for i, inst in enumerate(insts)}
    succ: list[list[int]] = [[] for _ in insts]
    for i, inst in enumerate(insts):
        for v in uses_of(inst):
            j = pos.get(v)
            if j is not None and i not in succ[j]:
                succ[j].append(i)
    effects = [i for i, inst in enumerate(insts) if has_effects(inst)]
    for a, b in itertools.pairwise(effects):
        succ[a].append(b)
    for i, inst in enumerate(insts):
        if not has_effects(inst) and fails(inst, module):
            k = bisect.bisect(effects, i)
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
    regions = [m for r, m in graph.members.items()
               if is_candidate(graph.insts[r]) and len(m) >= max(min_size, 1)
               and any(graph.insts[i].has_trait("elementwise") for i in m)]
    return graph, sorted(regions)


# ---------------------------------------------------------------- outlining


@dataclass
class Region:
    members: list[Instruction]
    inputs: list[Value]
    outputs: list[Instruction]


def describe_region(insts: list[Instruction], uses: dict[Value, list[Instruction]]) -> Region:
    inside = set(insts)
    inputs: list[Value] = []
    for inst in insts:
        for v in uses_of(inst):
            if isinstance(v, Argument | Instruction) and v not in inside and v not in inputs:
                inputs.append(v)
    outputs = [i for i in insts if any(u not in inside for u in uses.get(i, ()))]
    return Region(insts, inputs, outputs)


def epilogue_of(region: Region, uses: dict[Value, list[Instruction]]) -> Instruction | None:
    """The last `dot` of the block whose result only this region uses, if any."""
    inside = set(region.members)
    block = region.members[0].block
    dots = [v for v in region.inputs if isinstance(v, Instruction) and v.opcode == "dot"
            and v.block is block and all(u in inside for u in uses.get(v, ()))]
    return max(dots, key=lambda d: d.index(), default=None)


def kernel_name(fn: Function, taken: set[str]) -> str:
    stem = fn.name or "function"
    n = 0
    while f"{stem}_kernel{n}" in taken:
        n += 1
    taken.add(f"{stem}_kernel{n}")
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


def outline_function(fn: Function, module: Module, taken: set[str],
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
        for inst in list(block.instructions):
            block.remove(inst)
        b = Builder(module)
        b.position_at_end(block)
        for n in order:
            if isinstance(n, int):
                block.append(graph.insts[n])
                continue
            region = described[n[0]]
            kernel = make_kernel(region, kernel_name(fn, taken), module)
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
