"""`licm`: hoist loop-invariant pure instructions into the loop's preheader.

    'header(%i: i64):                       'header_preheader():
        %w2 = multiply %w, %w          →        %w2 = multiply %w, %w
        …                                       branch 'header(0: i64)

An instruction is invariant when each operand is defined outside the loop or is itself hoisted.
Loops are processed innermost first, so code hoisted out of an inner loop into its preheader
(which lies in the outer loop) can move on out of the outer loop.

Only instructions without effects move: `pure` instructions and calls of effect-free functions
(by the `SideEffects` analysis; a reduction whose combinator is a function counts as a call).

Hoisting runs an instruction even when the loop body would not have run it (a loop that exits
at once, a branch not taken), so an instruction that may fail at run time — integer division
or `modulo` (by zero), integer `power` (negative exponent), a dynamic index, anything on a type
with a dynamic dimension (shape checks), `slice` and the reshaping casts, calls (which may also
never return) — is hoisted only from the header, and only when every instruction before it in
the header that could fail or has effects is hoisted too. The header runs whenever the
preheader does, so such an instruction then fails exactly when, and in the order, it did.

Preheaders: when the header has no preheader (a unique outside predecessor that branches only
to the header), one is created — but only when there is something to hoist, so the pass
changes nothing on loops it cannot improve (`cfg-simplify` removes empty preheaders).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from dlvm.ir import (
    Argument,
    ArrayType,
    Block,
    Function,
    FunctionPass,
    Instruction,
    Module,
    NominalType,
    PassContext,
    TensorType,
    TupleType,
    Type,
    Value,
)
from dlvm.ir.analysis import Loop, LoopInfo, SideEffects
from dlvm.ir.types import EnumDecl, StructDecl

from .cfg_canonicalize import BlockNames, make_preheader

# Pure instructions that cannot fail when every type involved is static (the type rules then
# check shapes, constant indices and broadcasting); see `may_fail` for the exceptions.
NEVER_FAIL_WHEN_STATIC = frozenset({
    "literal", "extract", "insert", "transpose", "reverse", "rank", "shape", "unitCount",
    "padShape", "dot", "concatenate", "reduce", "reduceWindow", "scan", "convolve",
    "unbroadcast", "builtin",
})
SAFE_BUILTINS = frozenset({"softmax", "min", "max", "mean"})


@dataclass
class LoopInvariantCodeMotion(FunctionPass):
    name = "licm"
    summary = "hoist loop-invariant pure code to the preheader"

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        assert fn.module is not None
        module = fn.module
        effects: SideEffects = module.analysis(SideEffects)  # moving code changes no effects
        info: LoopInfo = fn.analysis(LoopInfo)
        # Preheaders first, from one snapshot, for the loops with something to hoist.
        need = [lp for lp in reversed(info.loops)
                if lp.preheader is None and plan(lp, effects, module)]
        names = BlockNames(fn)
        for loop in need:
            make_preheader(fn, loop, info.cfg, names)
        if need:
            ctx.stat("preheaders created", len(need))
            info = fn.analysis(LoopInfo)
        changed = bool(need)
        # Moving instructions leaves the CFG and so the loops as they are: one LoopInfo serves.
        for header in [lp.header for lp in reversed(info.loops)]:  # subloops before loops
            loop = info.loop_for(header)
            assert loop is not None and loop.header is header
            moved = plan(loop, effects, module)
            if not moved:
                continue
            if loop.preheader is None:  # possible only once inner loops were hoisted (rare)
                make_preheader(fn, loop, names=names)
                ctx.stat("preheaders created")
                info = fn.analysis(LoopInfo)
                loop = info.loop_for(header)
                assert loop is not None
            preheader = loop.preheader
            assert preheader is not None and preheader.terminator is not None
            for inst in moved:
                inst.erase()
                preheader.insert_before(preheader.terminator, inst)
            ctx.stat("instructions hoisted", len(moved))
            changed = True
        return changed


def plan(loop: Loop, effects: SideEffects, module: Module) -> list[Instruction]:
    """The invariant instructions of `loop` that can move to its preheader, in order."""
    moved: list[Instruction] = []
    chosen: set[Instruction] = set()
    for block in loop.block_list:  # reverse post-order: definitions before their uses
        in_header_prefix = block is loop.header
        for inst in block.instructions[:-1]:
            free = effect_free(inst, effects)
            failing = may_fail(inst, module)
            ok = free and invariant(inst, loop, chosen) and (in_header_prefix or not failing)
            if ok:
                chosen.add(inst)
                moved.append(inst)
            elif not free or failing:
                in_header_prefix = False
    return moved


def effect_free(inst: Instruction, effects: SideEffects) -> bool:
    """Pure, or an effect-free call; never a terminator."""
    if inst.is_terminator or not (inst.has_trait("pure") or inst.opcode == "apply"):
        return False
    return not effects.instruction_has_effects(inst)


def invariant(inst: Instruction, loop: Loop, hoisted: set[Instruction]) -> bool:
    """Every operand is defined outside `loop`, or is an instruction being hoisted."""
    return all(_outside(v, loop.blocks, hoisted) for v in inst.operands)


def _outside(v: Value, blocks: set[Block], hoisted: set[Instruction]) -> bool:
    if isinstance(v, Instruction):
        return v in hoisted or v.block not in blocks
    if isinstance(v, Argument):
        return v.block not in blocks
    return True  # literals, functions, globals


def may_fail(inst: Instruction, module: Module) -> bool:
    """Whether executing `inst` might stop the program (or never return)."""
    op = inst.opcode
    if not (inst.has_trait("elementwise") or op in NEVER_FAIL_WHEN_STATIC):
        return True  # calls, slice, shape casts, and instructions with effects
    if inst.has_trait("may_trap_on_integers") and not all(
            isinstance(t, TensorType) and t.dtype.is_float
            for t in (module.resolve(v.type) for v in inst.operands)):
        return True  # x / 0, x mod 0, x ^ -1 on integers
    if op in ("extract", "insert") and any(isinstance(k, Value) for k in inst.fields["keys"]):
        return True  # a dynamic index may be out of range
    if op == "builtin" and inst.fields.get("builtin") not in SAFE_BUILTINS:
        return True
    if any(kind == "combinator" and isinstance(inst.fields.get(name), Function)
           for name, kind in inst.op.fields):
        return True  # `reduce … by @f` calls @f
    types = [inst.type, *(v.type for v in inst.operands)]
    return not all(static(t, module) for t in types)


def static(t: Type, module: Module, seen: frozenset[str] = frozenset()) -> bool:
    """Whether no tensor inside a value of type `t` has a dynamic dimension."""
    known = static_structure(t)
    if known is not None:
        return known
    if isinstance(t, NominalType):
        if t.name in seen:
            return True
        decl = module.type_decls.get(t.name)
        inner = seen | {t.name}
        if isinstance(decl, StructDecl):
            return all(static(ft, module, inner) for _, ft in decl.fields)
        if isinstance(decl, EnumDecl):
            return all(static(ct, module, inner) for _, cts in decl.cases for ct in cts)
        resolved = module.resolve(t)
        return resolved is t or static(resolved, module, inner)
    if isinstance(t, TensorType):
        return t.is_static
    if isinstance(t, TupleType):
        return all(static(e, module, seen) for e in t.elements)
    if isinstance(t, ArrayType):
        return static(t.element, module, seen)
    return True  # functions, pointers, boxes, the stack: no shape to check


@functools.lru_cache(maxsize=4096)
def static_structure(t: Type) -> bool | None:
    """`static` for a type that names no declared type, once per type (types are immutable:
    a tuple of a thousand parameters is walked once, not once per `extract`); None when the
    answer depends on the module's declarations (unless a dynamic tensor settles it)."""
    if isinstance(t, NominalType):
        return None
    if isinstance(t, TensorType):
        return t.is_static
    parts = t.elements if isinstance(t, TupleType) else (
        (t.element,) if isinstance(t, ArrayType) else ())
    answers = [static_structure(e) for e in parts]
    if False in answers:
        return False
    return None if None in answers else True
