"""`inline`: replace calls by the callee's body.

A direct call `apply @g(…)` is inlined when @g is a definition of this module that is not
recursive (no cycle through @g in the graph of direct calls), not a `!kernel` (fusion made it
on purpose), and either marked `!inline` or at most `threshold` instructions long (not counting
terminators). Functions are processed callees first, so a callee's own calls are already
inlined when it is copied; the copied calls are not looked at again, so inlining ends.
Functions are never removed: a user may still call them.

A single-block callee whose parameters and result have exactly the call's types is copied in
place of the call. Otherwise the caller's block is split at the call:

    'b(…):                              'b(…):
        %r = apply @g(%x) -> T              branch 'g.entry(%x)      // or the entry inlined
        rest…                           'g.entry(%p: P): …  return %v  →  branch 'g.cont(%v)
                                        'g.cont(%r: T):
                                            rest…

Values reach the callee's parameters and leave through its result by block arguments of the
same types, so the interpreter checks their static dimensions as the call did; the entry
block's arguments are only substituted away when the types are equal. The call's result type
must equal the callee's, or the call is left alone (users would parse with other types).
Callee names that clash with the caller's get a numeric suffix; blocks are prefixed with the
callee's name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from dlvm.ir import (
    AggregateLiteral,
    Argument,
    Block,
    BranchTarget,
    Builder,
    Function,
    Instruction,
    LiteralValue,
    Module,
    Pass,
    PassContext,
    TupleType,
    Value,
)
from dlvm.ir.core import copy_field


@dataclass
class Inlining(Pass):
    name = "inline"
    summary = "inline !inline functions and small callees"

    threshold: int = 20

    def run(self, module: Module, ctx: PassContext) -> bool:
        graph = call_graph(module)
        components = strongly_connected(module.functions, graph)
        recursive = {fn for scc in components for fn in scc
                     if len(scc) > 1 or fn in graph[fn]}
        inlined = 0
        for scc in components:  # callees before callers
            for fn in scc:
                calls = [i for i in fn.instructions() if i.opcode == "apply"]
                caller = _Caller(fn)
                for call in calls:
                    if self.should_inline(fn, call, recursive):
                        inline_call(call, caller)
                        inlined += 1
                caller.finish()
        ctx.stat("calls inlined", inlined)
        return bool(inlined)

    def should_inline(self, fn: Function, call: Instruction, recursive: set[Function]) -> bool:
        callee = call.fields.get("callee")
        if not (isinstance(callee, Function) and callee.module is fn.module and callee.blocks
                and callee.declaration is None and callee not in recursive
                and "kernel" not in callee.attributes):
            return False
        if call.type != callee.type_.result:
            return False
        return "inline" in callee.attributes or size(callee) <= self.threshold


def size(fn: Function) -> int:
    """Instructions of `fn`, terminators not counted."""
    return sum(len(b.instructions) - 1 for b in fn.blocks)


def direct_callees(fn: Function) -> list[Function]:
    callees = (i.fields.get("callee") for i in fn.instructions() if i.opcode == "apply")
    return list(dict.fromkeys(c for c in callees if isinstance(c, Function)))


def call_graph(module: Module) -> dict[Function, list[Function]]:
    """Each function's direct callees within the module."""
    return {fn: [c for c in direct_callees(fn) if c.module is module] for fn in module.functions}


def strongly_connected(nodes: list[Function], graph: dict[Function, list[Function]]
                       ) -> list[list[Function]]:
    """Tarjan's SCCs, iteratively; each component comes after the components it reaches."""
    index: dict[Function, int] = {}
    low: dict[Function, int] = {}
    stack: list[Function] = []
    on_stack: set[Function] = set()
    out: list[list[Function]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            for succ in it:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(graph[succ])))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    scc = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        scc.append(member)
                        if member is node:
                            break
                    out.append(scc)
    return out


# ---------------------------------------------------------------- copying the callee


class _Caller:
    """What inlining into one function keeps between calls: the names in use, and the
    replacements of call results, made in one sweep at the end (each call's result is
    replaced by a value of exactly its type, so nothing in between depends on them)."""

    def __init__(self, fn: Function) -> None:
        self.function = fn
        self.names = {a.name for b in fn.blocks for a in b.arguments}
        self.names |= {i.name for i in fn.instructions()}
        self.block_names = {b.name for b in fn.blocks}
        self.counters: dict[str, int] = {}
        self.results: dict[Value, Value] = {}

    def fresh(self, name: str | None, taken: set[str | None] | None = None) -> str | None:
        """`name`, or `name.N` with the first free N when it is taken (x.1 gives x.2)."""
        if name is None:
            return None
        taken = self.names if taken is None else taken
        base = re.sub(r"\.\d+$", "", name)
        new = name
        while new in taken:
            self.counters[base] = n = self.counters.get(base, 0) + 1
            new = f"{base}.{n}"
        taken.add(new)
        return new

    def release(self, name: str | None) -> None:
        """`name` is free again (its suffix too, if it was the last one given)."""
        self.names.discard(name)
        if name is not None:
            base = re.sub(r"\.\d+$", "", name)
            if name == f"{base}.{self.counters.get(base)}":
                self.counters[base] -= 1

    def fresh_block(self, name: str | None) -> str | None:
        return self.fresh(name, self.block_names)

    def finish(self) -> None:
        """Replace the uses of every inlined call's result."""
        if not self.results:
            return

        def resolve(v: Value) -> Value:
            while not isinstance(v, LiteralValue) and v in self.results:
                v = self.results[v]
            return v

        for inst in self.function.instructions():
            inst.map_operands(resolve)


@dataclass
class _Copy:
    """The callee's blocks copied into the caller (not yet inserted)."""

    entry: list[Instruction]  # the entry block's instructions, when it is inlined in place
    blocks: list[Block]  # the other blocks (all of them when the entry is not inlined)
    returns: list[Instruction]


def _copy_body(caller: _Caller, callee: Function, arguments: dict[Value, Value],
               entry_in_place: bool) -> _Copy:
    values: dict[Value, Value] = dict(arguments)
    blocks: dict[Block, Block] = {}
    pairs: list[tuple[Instruction, Instruction]] = []
    entry: list[Instruction] = []
    new_blocks: list[Block] = []
    for old in callee.blocks:
        new: Block | None = None
        if not (entry_in_place and old is callee.entry):
            base = f"{callee.name}.{old.name}" if callee.name and old.name else old.name
            new = Block(caller.fresh_block(base),
                        [Argument(a.type, caller.fresh(a.name)) for a in old.arguments])
            values.update(zip(old.arguments, new.arguments, strict=True))
            blocks[old] = new
            new_blocks.append(new)
        for inst in old.instructions:
            copy = Instruction(inst.op, {}, inst.type, caller.fresh(inst.name), inst.location)
            values[inst] = copy
            pairs.append((inst, copy))
            if new is None:
                entry.append(copy)
            else:
                new.append(copy)
    for inst, copy in pairs:  # after all values exist: uses may precede definitions in layout
        copy.fields = {k: copy_field(v, values, blocks) for k, v in inst.fields.items()}
    returns = [copy for _, copy in pairs if copy.opcode == "return"]
    return _Copy(entry, new_blocks, returns)


# ---------------------------------------------------------------- inlining one call


def _is_void(t: Any, module: Module) -> bool:
    return module.resolve(t) == TupleType(())


def inline_call(call: Instruction, caller: _Caller) -> None:
    """Replace `call` by a copy of its callee's body (its result's uses: in `caller.finish`)."""
    block = call.block
    assert block is not None and block.function is caller.function
    fn, callee = caller.function, call.fields["callee"]
    module = fn.module
    assert isinstance(callee, Function) and module is not None
    params, args = callee.entry.arguments, call.fields["args"]
    same_types = all(p.type == a.type for p, a in zip(params, args, strict=True))
    entry_has_preds = any(callee.entry in b.successors for b in callee.blocks)
    in_place = same_types and not entry_has_preds
    body = _copy_body(caller, callee, dict(zip(params, args, strict=True)) if in_place else {},
                      in_place)
    void = _is_void(call.type, module)
    unit = LiteralValue(AggregateLiteral("tuple", ()), call.type)

    # A single block returning a value of the call's type: no control flow to add.
    if in_place and not body.blocks:
        (ret,) = body.returns
        value = ret.fields.get("value")
        if value is None or value.type == call.type:
            for inst in body.entry[:-1]:
                block.insert_before(call, inst)
            result = unit if value is None or void else value
            call.erase()
            if isinstance(result, Instruction) and result.block is block and call.name:
                caller.release(result.name)
                result.name = call.name  # the computed value keeps the call's name
            caller.results[call] = result
            return

    # Split the block: the rest goes to a continuation whose argument is the result.
    index = call.index()
    rest = block.instructions[index + 1:]
    del block.instructions[index:]  # the call and the rest, moved in bulk (long blocks)
    call.block = None
    position = block.index() + 1
    for i, new in enumerate(body.blocks):
        fn.insert_block(position + i, new)
    cont = Block(caller.fresh_block(f"{callee.name}.cont" if callee.name else "cont"))
    fn.insert_block(position + len(body.blocks), cont)
    if not void:
        cont.add_argument(Argument(call.type, call.name))
    cont.instructions = rest
    for inst in rest:
        inst.block = cont
    fn.invalidate()
    b = Builder(module)
    if in_place:
        for inst in body.entry:
            block.append(inst)
    else:
        b.position_at_end(block)
        b.create("branch", BranchTarget(body.blocks[0], list(args)))
    for ret in body.returns:
        assert ret.block is not None
        value = ret.fields.get("value")
        b.position_at_end(ret.block)
        ret.erase()
        b.create("branch", BranchTarget(cont, [] if void else [value]))
    caller.results[call] = unit if void else cont.arguments[0]
