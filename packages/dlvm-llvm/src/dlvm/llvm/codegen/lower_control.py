"""Terminators and calls: `return`, `branch`, `conditional`, `branchEnum`, `apply`.

Each edge of a terminator gets an LLVM block of its own, where the references the successor
needs are retained and the ones it does not are released (`Ownership.edge_plan`); block
arguments become φ-nodes fed from those blocks. Values whose static dimensions the receiver
declares but the sender does not know are checked on the way, as the interpreter checks them.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir as ll

from dlvm.ir import Block, Function, Instruction, Value
from dlvm.ir.core import BranchTarget, DerivativeDecl
from dlvm.ir.types import FunctionType, PointerType, Type

from .emit import call_pointer, i32, i64
from .function import RULES, FunctionLowering, lowers
from .layout import I64, PTR
from .lower_aggregate import enum_layout
from .lower_memory import load_pointer
from .specialize import Spec
from .support import CTX_DEPTH

# ---------------------------------------------------------------- return


@lowers("return")
def lower_return(fl: FunctionLowering, inst: Instruction) -> None:
    b = fl.b
    v = inst.fields.get("value")
    if v is not None:
        for r in fl.own.consume_retains(inst):
            fl.retain(fl.value(r), fl.type(r))
        value = fl.value(v)
        fl.conform(value, fl.type(v), fl.fn.type_.result, f"the result of '@{fl.fn.name}'")
        b.store(value, fl.out)
    slot = fl.rt.slot(b, fl.ctx, CTX_DEPTH)
    b.store(b.sub(b.load(slot, typ=I64), i64(1)), slot)
    b.ret(i32(0))


# ---------------------------------------------------------------- branches


def edge(fl: FunctionLowering, block: Block, target: BranchTarget, held: set[Value],
         values: Sequence[ll.Value] | None = None,
         value_types: Sequence[Type] | None = None) -> ll.Block:
    """An LLVM block for one edge: adjust counts, check shapes, feed the φ-nodes."""
    b = fl.b
    edge_block = fl.llfn.append_basic_block(f"{fl.block_label(block)}.to."
                                            f"{fl.block_label(target.block)}")
    saved = b.block
    b.position_at_end(edge_block)
    retains, releases = fl.own.edge_plan(block, target, held)
    if fl.own.is_back_edge(block, target.block):
        fl.tick()
    for v in retains:
        fl.retain(fl.value(v), fl.type(v))
    args = list(values) if values is not None else [fl.value(a) for a in target.args]
    types = list(value_types) if value_types is not None else [fl.type(a) for a in target.args]
    name = fl.block_label(target.block)
    for k, (a, value, t) in enumerate(zip(target.block.arguments, args, types, strict=True)):
        fl.conform(value, t, a.type, f"argument {k} of block '{name} of '@{fl.fn.name}'")
    for v in releases:
        fl.release(fl.value(v), fl.type(v))
    for a, value in zip(target.block.arguments, args, strict=True):
        fl.phis[a].add_incoming(value, b.block)
    b.branch(fl.blocks[target.block])
    b.position_at_end(saved)
    return edge_block


@lowers("branch")
def lower_branch(fl: FunctionLowering, inst: Instruction) -> None:
    block = inst.block
    assert block is not None
    held = fl.own.held_at_terminator(block)
    fl.b.branch(edge(fl, block, inst.destination, held))


@lowers("conditional")
def lower_conditional(fl: FunctionLowering, inst: Instruction) -> None:
    block = inst.block
    assert block is not None
    held = fl.own.held_at_terminator(block)
    cond = fl.value(inst.condition)
    then = edge(fl, block, inst.then, held)
    other = edge(fl, block, inst.fields["else"], held)
    fl.b.cbranch(cond, then, other)


@lowers("branchEnum")
def lower_branch_enum(fl: FunctionLowering, inst: Instruction) -> None:

    block = inst.block
    assert block is not None
    b = fl.b
    held = fl.own.held_at_terminator(block)
    value = fl.value(inst.value)
    layout = enum_layout(fl, fl.type(inst.value))
    fl.fail_if(b.icmp_unsigned("==", value, ll.Constant(PTR, None)),
               "branchEnum on an undefined enum value")
    tag = b.load(layout.tag_pointer(b, value), typ=I64)
    covered = {case for case, _ in inst.cases}
    default = fl.llfn.append_basic_block("enum.uncovered")
    switch = b.switch(tag, default)
    for case, target in inst.cases:
        index = layout.index(case)
        payload_types = layout.case_types(case)
        saved = b.block
        load_block = fl.llfn.append_basic_block(f"case.{case}")
        b.position_at_end(load_block)
        payload = layout.load_payload(b, value, case)
        for v, t in zip(payload, payload_types, strict=True):
            fl.retain(v, t)
        b.branch(edge(fl, block, target, held, payload, payload_types))
        b.position_at_end(saved)
        switch.add_case(i64(index), load_block)
    b.position_at_end(default)
    uncovered = [c for c in layout.cases if c not in covered]
    if uncovered:
        for case in uncovered:
            with b.if_then(b.icmp_signed("==", tag, i64(layout.index(case)))):
                fl.fail(fl.site(f"branchEnum has no block for case '?{case}'"))
    b.unreachable() if not uncovered else fl.fail(fl.site("branchEnum on a corrupt enum value"))


# ---------------------------------------------------------------- calls


@lowers("apply")
def lower_apply(fl: FunctionLowering, inst: Instruction) -> ll.Value | None:
    callee = inst.callee
    b = fl.b
    result_type = fl.layout.lower(fl.type(inst))
    if isinstance(callee, Function):
        if not callee.blocks:
            message = (f"'@{callee.name}' is a gradient declaration: run the 'differentiation' "
                       "pass (dlvm-ad) first" if isinstance(callee.declaration, DerivativeDecl)
                       else f"'@{callee.name}' is an external declaration and has no body")
            fl.fail(fl.site(message))
            b.position_at_end(fl.llfn.append_basic_block("unreachable"))
            return ll.Constant(result_type, None)
        spec = fl.spec.callees.get(inst) or fl.unit.specializer.spec(callee)
        if "kernel" in callee.attributes and RULES.kernel_call is not None:
            fused = RULES.kernel_call(fl, inst, spec)
            if fused is not None:
                return fused
        return call_function(fl, inst, spec)
    else:
        target = fl.value(callee)
        ct = fl.type(callee)
        if isinstance(ct, PointerType):  # a pointer to a function value: load it first

            target = load_pointer(fl, target, ct)
            ct = fl.layout.resolve(ct.pointee)
        assert isinstance(ct, FunctionType)
        fl.fail_if(b.icmp_unsigned("==", target, ll.Constant(PTR, None)),
                   "call of a null function")
        ftype = ll.FunctionType(ll.IntType(32), [PTR, PTR, *[fl.layout.lower(t)
                                                            for t in ct.arguments]])
    return call_with(fl, inst, target, ftype)


def call_function(fl: FunctionLowering, inst: Instruction, spec: Spec) -> ll.Value:
    """A direct call of a function's specialization. The arguments' dimensions that the
    callee declares are checked here, so that an error names the call, as the interpreter's
    does (the callee checks them again when Python calls it)."""
    callee = inst.callee
    assert isinstance(callee, Function)
    for k, (a, t) in enumerate(zip(inst.args, callee.type_.arguments, strict=True)):
        fl.conform(fl.value(a), fl.type(a), t, f"argument {k} of '@{callee.name}'")
    target = fl.unit.function(spec)
    return call_with(fl, inst, target, target.function_type)


def call_with(fl: FunctionLowering, inst: Instruction, target: ll.Value,
              ftype: ll.FunctionType) -> ll.Value:
    b = fl.b
    result_type = fl.layout.lower(fl.type(inst))
    slot = fl.result_slot(result_type)
    args = [fl.value(a) for a in inst.args]
    status = call_pointer(b, target, ftype, [fl.ctx, slot, *args])
    fl.check(status)
    return b.load(slot, typ=result_type)
