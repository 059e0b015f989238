"""`cse`: reuse an equal pure computation that dominates, across blocks.

A scoped hash table follows the dominator tree in preorder: entering a block opens
a scope, leaving it closes the scope, so an instruction finds exactly the equal
instructions of the blocks that dominate it (and earlier in its own block).
Duplicates in sibling blocks are kept, since neither dominates the other.

Two instructions are equal when they have the same opcode, result type and fields,
where values compare by identity and literals by value (`1: f32` equals `1.0: f32`
and `zero: f32` equals `0: f32`, but `0.0` differs from `-0.0`, which gives other
results). The operands of a commutative binary instruction (`add`, `multiply`,
`equal`, …: the "commutative" trait) compare as an unordered pair.

Only instructions with the "pure" trait take part, and among them none that calls
a function (a `reduce by @f`): such a function may draw random numbers, which makes
two equal calls differ.
"""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from dlvm.ir import (
    AggregateLiteral,
    Block,
    BranchTarget,
    DenseLiteral,
    Function,
    FunctionPass,
    Instruction,
    KeywordLiteral,
    LiteralValue,
    PassContext,
    ScalarLiteral,
    TensorType,
    Value,
)
from dlvm.ir.analysis import DominatorTree
from dlvm.ir.analysis.side_effects import called_values
from dlvm.ir.core import erase_instructions


@dataclass
class CommonSubexpressionElimination(FunctionPass):
    name = "cse"
    summary = "reuse an equal pure computation that dominates (commutativity-aware)"

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        dom: DominatorTree = fn.analysis(DominatorTree)
        replaced = eliminate(fn, dom)
        ctx.stat("instructions removed", replaced)
        return bool(replaced)


# ---------------------------------------------------------------- equality keys


def scalar_key(value: bool | int | float, t: Any) -> Hashable:
    """A scalar by value in the literal's data type; signed zeros differ, NaNs agree."""
    dtype = t.dtype if isinstance(t, TensorType) else None
    if dtype is not None and dtype.is_float:
        x = float(value)
        return ("nan",) if math.isnan(x) else (x, math.copysign(1.0, x))
    if dtype is not None and dtype.is_bool:
        return bool(value)
    return value if isinstance(value, int) else (value, math.copysign(1.0, value))


def literal_key(v: LiteralValue) -> Hashable:
    """Equal keys for literals that are equal by value (and of the same type)."""
    lit = v.literal
    if isinstance(lit, ScalarLiteral):
        return ("scalar", v.type, scalar_key(lit.value, v.type))
    if isinstance(lit, KeywordLiteral):
        if lit.keyword == "zero" and isinstance(v.type, TensorType):
            return ("scalar", v.type, scalar_key(0, v.type))  # zero: T is the splat 0: T
        return ("keyword", v.type, lit.keyword)
    if isinstance(lit, DenseLiteral):
        return ("dense", v.type, lit.data)
    assert isinstance(lit, AggregateLiteral)
    return ("aggregate", v.type, lit.kind, lit.keys, tuple(value_key(e) for e in lit.elements))


def value_key(v: Value) -> Hashable:
    return literal_key(v) if isinstance(v, LiteralValue) else ("value", id(v))


def field_key(x: Any) -> Hashable:
    """A hashable stand-in for a field: values by identity, literals by value."""
    if isinstance(x, Value):
        return value_key(x)
    if isinstance(x, list | tuple):
        return tuple(field_key(e) for e in x)
    if isinstance(x, BranchTarget):
        return ("target", id(x.block), field_key(x.args))
    if isinstance(x, dict):
        return tuple(sorted((k, field_key(e)) for k, e in x.items()))
    return x  # ints, types, strings, FieldKey, BuiltinRef: hashable by value


def instruction_key(inst: Instruction) -> Hashable:
    """Instructions with equal keys compute equal values."""
    fields = inst.fields
    if inst.has_trait("commutative") and set(fields) == {"lhs", "rhs"}:
        a, b = value_key(fields["lhs"]), value_key(fields["rhs"])
        return (inst.opcode, inst.type, "commutative", frozenset({a, b}))  # a ∘ b = b ∘ a
    return (inst.opcode, inst.type,
            tuple((name, field_key(fields.get(name))) for name, _ in inst.op.fields))


def is_candidate(inst: Instruction) -> bool:
    """Pure, and calls no function (a function may be nondeterministic)."""
    return inst.has_trait("pure") and not inst.is_terminator and not called_values(inst)


# ---------------------------------------------------------------- the walk


def eliminate(fn: Function, dom: DominatorTree) -> int:
    """Walk the dominator tree with a scoped table; replace and erase duplicates."""
    table: dict[Hashable, Instruction] = {}
    mapping: dict[Value, Value] = {}
    duplicates: list[Instruction] = []
    # (block, undo log) frames; a None block closes the scope whose log follows it.
    stack: list[tuple[Block | None, list[Hashable]]] = []
    if dom.root is not None:
        stack.append((dom.root, []))
    while stack:
        block, log = stack.pop()
        if block is None:
            for key in log:
                del table[key]
            continue
        opened: list[Hashable] = []
        for inst in block.instructions:
            if mapping:
                inst.replace_uses(mapping)
            if not is_candidate(inst):
                continue
            key = instruction_key(inst)
            found = table.get(key)
            if found is not None:
                mapping[inst] = found
                duplicates.append(inst)
            else:
                table[key] = inst
                opened.append(key)
        stack.append((None, opened))
        stack.extend((child, []) for child in reversed(dom.children(block)))
    if mapping:
        for inst in fn.instructions():  # unreachable blocks too
            inst.replace_uses(mapping)
    erase_instructions(duplicates)
    return len(duplicates)
