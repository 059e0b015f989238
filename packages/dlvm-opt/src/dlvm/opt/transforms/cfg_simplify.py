"""`cfg-simplify`: remove dead blocks, fold branches, merge straight-line blocks, skip trampolines.

The rules, applied until none applies (each makes the CFG strictly smaller or moves an edge
past a trampoline, so the loop ends):
  1. unreachable blocks are removed;
  2. `conditional true then 'a(…) else 'b(…)` → `branch 'a(…)` (and false → 'b), and
     `conditional %c then 'a(%x) else 'a(%x)` → `branch 'a(%x)`;
  3. a block whose only predecessor ends in `branch` to it is merged into that predecessor,
     its arguments replaced by the values passed;
  4. an edge to a trampoline (a block holding only `branch 'c(…)`) goes straight to 'c, the
     trampoline's arguments replaced by the edge's values (following chains of trampolines);
     a block whose arguments are used past its own branch is no trampoline, since the
     blocks it dominates read them;
  5. a block argument that receives the same value %v on every edge (or itself, on back
     edges) is replaced by %v and removed.

A block argument is replaced by a value only when the value has exactly the argument's type:
the interpreter checks a value's static dimensions when it is passed to a block, and the
printer writes each use with its value's type, so a different (compatible) type would both
drop a check and change how the users parse. Edges of `branchEnum` bind arguments to the
case's values and are never rewritten. The entry block is never merged away or bypassed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dlvm.ir import (
    Argument,
    Block,
    BranchTarget,
    Builder,
    Function,
    FunctionPass,
    Instruction,
    LiteralValue,
    PassContext,
    ScalarLiteral,
    Value,
)
from dlvm.ir.analysis import ControlFlowGraph, DominatorTree, UseDefInfo

REWRITABLE = ("branch", "conditional")  # terminators whose edges carry explicit values


@dataclass
class CFGSimplification(FunctionPass):
    name = "cfg-simplify"
    summary = "merge straight-line blocks, fold constant branches, drop dead blocks"

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        steps: list[Callable[[Function, PassContext], bool]] = [
            remove_unreachable, fold_branches, merge_blocks, bypass_trampolines,
            remove_uniform_arguments]
        changed = False
        while any(step(fn, ctx) for step in steps):  # restart from the top after any change
            changed = True
        return changed


# ---------------------------------------------------------------- helpers


def same_value(a: Value, b: Value) -> bool:
    """The same SSA value, or equal literals."""
    return a is b or (isinstance(a, LiteralValue) and a == b)


def resolve(mapping: dict[Value, Value], v: Value) -> Value:
    """`v` after the replacements of `mapping`, which may chain (a → b, b → c)."""
    while not isinstance(v, LiteralValue) and v in mapping:
        v = mapping[v]
    return v


def substitute(fn: Function, mapping: dict[Value, Value]) -> None:
    """Replace, in one sweep over `fn`, every use of a key of `mapping` by its value."""
    if mapping:
        for inst in fn.instructions():
            inst.map_operands(lambda v: resolve(mapping, v))


def _replace_terminator(term: Instruction, target: BranchTarget) -> None:
    block = term.block
    assert block is not None and block.function is not None
    term.erase()
    b = Builder(block.function.module)
    b.position_at_end(block)
    b.create("branch", target)


# ---------------------------------------------------------------- 1. unreachable blocks


def remove_unreachable(fn: Function, ctx: PassContext) -> bool:
    cfg: ControlFlowGraph = fn.analysis(ControlFlowGraph)
    dead = [b for b in fn.blocks if not cfg.is_reachable(b)]
    for block in dead:
        fn.remove_block(block)
    ctx.stat("unreachable blocks removed", len(dead))
    return bool(dead)


# ---------------------------------------------------------------- 2. branch folding


def _taken(term: Instruction) -> BranchTarget | None:
    """The only target a `conditional` can take, if it is known."""
    cond, then, else_ = term.fields["condition"], term.fields["then"], term.fields["else"]
    if isinstance(cond, LiteralValue) and isinstance(cond.literal, ScalarLiteral):
        return then if cond.literal.value else else_  # c ? a : b with c known
    if then.block is else_.block and len(then.args) == len(else_.args) and all(
            same_value(x, y) for x, y in zip(then.args, else_.args, strict=True)):
        return then  # c ? a(x) : a(x) = a(x)
    return None


def fold_branches(fn: Function, ctx: PassContext) -> bool:
    folded = 0
    for block in fn.blocks:
        term = block.terminator
        if term is not None and term.opcode == "conditional":
            target = _taken(term)
            if target is not None:
                _replace_terminator(term, target)
                folded += 1
    ctx.stat("branches folded", folded)
    return bool(folded)


# ---------------------------------------------------------------- 3. block merging


def merge_blocks(fn: Function, ctx: PassContext) -> bool:
    """Merge every block whose only predecessor branches to it alone (chains in one sweep).

    Moving a block's code into its predecessor moves its out-edges along and changes no
    block's number of predecessors, so one CFG snapshot serves the whole sweep.
    """
    cfg: ControlFlowGraph = fn.analysis(ControlFlowGraph)
    into: dict[Block, Block] = {}  # merged block → the block now holding its code
    mapping: dict[Value, Value] = {}
    for block in cfg.rpo[1:]:  # never the entry
        preds = cfg.predecessors(block)
        if len(preds) != 1:
            continue
        pred = preds[0]
        while pred in into:
            pred = into[pred]
        term = pred.terminator
        if pred is block or term is None or term.opcode != "branch":
            continue
        values = term.fields["destination"].args
        if any(a.type != v.type for a, v in zip(block.arguments, values, strict=True)):
            continue
        mapping.update(zip(block.arguments, values, strict=True))
        term.erase()
        for inst in list(block.instructions):
            block.remove(inst)
            pred.append(inst)
        into[block] = pred
    for block in into:
        fn.remove_block(block)
    substitute(fn, mapping)
    ctx.stat("blocks merged", len(into))
    return bool(into)


# ---------------------------------------------------------------- 4. trampolines


def _trampoline_step(fn: Function, target: BranchTarget, uses: UseDefInfo
                     ) -> BranchTarget | None:
    """Where an edge to a trampoline can go instead, or None if its block is no trampoline."""
    block = target.block
    if block is fn.entry or len(block.instructions) != 1:
        return None
    term = block.instructions[0]
    if term.opcode != "branch":
        return None
    if any(user is not term for a in block.arguments for user in uses.users(a)):
        return None  # its arguments are read after it: bypassing it would leave them unset
    dest = term.fields["destination"]
    if dest.block is block:
        return None  # an empty infinite loop
    if any(a.type != v.type for a, v in zip(block.arguments, target.args, strict=True)):
        return None
    mapping: dict[Value, Value] = dict(zip(block.arguments, target.args, strict=True))
    return BranchTarget(dest.block, [mapping.get(v, v) for v in dest.args])


def _bypass(fn: Function, target: BranchTarget, uses: UseDefInfo) -> BranchTarget | None:
    """The end of the chain of trampolines starting at `target`, None if it is not one.

    A cycle of trampolines (an empty infinite loop) is left where it is.
    """
    seen = {target.block}
    current, step = target, _trampoline_step(fn, target, uses)
    while step is not None:
        if step.block in seen:
            return None
        seen.add(step.block)
        current, step = step, _trampoline_step(fn, step, uses)
    return current if current is not target else None


def bypass_trampolines(fn: Function, ctx: PassContext) -> bool:
    bypassed = 0
    # found once: a use that bypassing adds is of a value some other branch reads already
    uses = UseDefInfo(fn)
    for block in fn.blocks:
        term = block.terminator
        if term is None or term.opcode not in REWRITABLE:
            continue
        for target in term.targets:
            new = _bypass(fn, target, uses)
            if new is not None:
                target.block, target.args = new.block, new.args
                bypassed += 1
    if bypassed:
        fn.invalidate()  # targets were edited in place
    ctx.stat("edges bypassing trampolines", bypassed)
    return bool(bypassed)


# ---------------------------------------------------------------- 5. uniform arguments


def _uniform_value(arg: Argument, incoming: list[Value], dom: DominatorTree) -> Value | None:
    """The one value passed to `arg` (ignoring `arg` itself), if it dominates the block."""
    values: list[Value] = []
    for v in incoming:
        if v is not arg and not any(same_value(v, w) for w in values):
            values.append(v)
    if len(values) != 1 or values[0].type != arg.type:
        return None
    value, block = values[0], arg.block
    assert block is not None
    if isinstance(value, Argument) and value.block is block:
        return None
    return value if dom.value_dominates(value, block.instructions[0]) else None


def remove_uniform_arguments(fn: Function, ctx: PassContext) -> bool:
    """Drop block arguments that receive one value on every edge, in one sweep.

    Removing arguments leaves the CFG as it is, so one snapshot of it and of the dominator
    tree serves the whole sweep; replacements chain through `mapping`.
    """
    cfg: ControlFlowGraph = fn.analysis(ControlFlowGraph)
    dom: DominatorTree = fn.analysis(DominatorTree)
    edges: dict[Block, list[BranchTarget]] = {}
    fixed: set[Block] = set()  # blocks some branchEnum enters: their arguments are bound
    for pred in cfg.rpo:
        term = pred.terminator
        for t in term.targets if term is not None else []:
            edges.setdefault(t.block, []).append(t)
            if term.opcode not in REWRITABLE:
                fixed.add(t.block)
    mapping: dict[Value, Value] = {}
    removed = 0
    for block in cfg.rpo[1:]:
        incoming = edges.get(block, [])
        if block in fixed or not incoming:
            continue
        drop: list[int] = []
        for i, arg in enumerate(block.arguments):
            value = _uniform_value(arg, [resolve(mapping, e.args[i]) for e in incoming], dom)
            if value is not None:
                mapping[arg] = value
                drop.append(i)
        if not drop:
            continue
        for e in incoming:
            e.args = [v for i, v in enumerate(e.args) if i not in drop]
        for i in reversed(drop):
            block.remove_argument(block.arguments[i])
        removed += len(drop)
    substitute(fn, mapping)
    ctx.stat("block arguments removed", removed)
    return bool(removed)
