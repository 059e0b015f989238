"""`literal-broadcast-promotion`: splat tensor literals in element-wise operands become scalars.

    %ones = literal 1: <1 x 10 x f32>
    %y = add %x: <1 x 10 x f32>, %ones: <1 x 10 x f32>
becomes
    %y = add %x: <1 x 10 x f32>, 1: f32

A scalar broadcasts against anything, so a splat operand can be replaced by its scalar
whenever broadcasting without it gives the instruction the same result type: the result is
the same, and a target no longer materializes the splat. The `literal` instruction itself is
left for `dce`. Unlike the original, a literal that is not a splat is never replaced, and
"changed" is reported only when an operand was actually replaced.
"""

from __future__ import annotations

from dataclasses import dataclass

from dlvm.ir import (
    AggregateLiteral,
    Function,
    FunctionPass,
    Instruction,
    KeywordLiteral,
    Literal,
    LiteralValue,
    Module,
    PassContext,
    ScalarLiteral,
    TensorType,
    TypeRuleError,
    Value,
)
from dlvm.ir.instructions.elementwise import BOOLEAN_BINARY, COMPARE, NUMERIC_BINARY
from dlvm.ir.types import scalar

# opcode → the operand fields that broadcast
BROADCASTING: dict[str, tuple[str, ...]] = {
    **{op: ("lhs", "rhs") for op in (*NUMERIC_BINARY, *BOOLEAN_BINARY, *COMPARE)},
    "select": ("lhs", "rhs", "mask"),
}


def splat_scalar(v: Value, module: Module) -> LiteralValue | None:
    """`c: T` when `v` is a splat `c: <shape x T>` with a static shape (an operand literal
    or the result of a `literal` instruction); None otherwise."""
    lit = v.fields.get("value") if isinstance(v, Instruction) and v.opcode == "literal" else v
    if not isinstance(lit, LiteralValue):
        return None
    t = module.resolve(lit.type)
    if not isinstance(t, TensorType) or not t.rank or not t.is_static:
        return None
    element = _uniform(lit.literal)
    if element is None:
        return None
    if isinstance(element, KeywordLiteral):  # zero
        element = ScalarLiteral(False if t.dtype.is_bool else 0.0 if t.dtype.is_float else 0)
    return LiteralValue(element, scalar(t.dtype))


def _uniform(lit: Literal) -> Literal | None:
    """The one scalar literal every element of a tensor literal equals, if there is one."""
    if isinstance(lit, ScalarLiteral):
        return lit
    if isinstance(lit, KeywordLiteral):
        return lit if lit.keyword == "zero" else None
    if isinstance(lit, AggregateLiteral) and lit.kind == "tensor" and lit.elements:
        scalars = []
        for e in lit.elements:
            u = _uniform(e.literal) if isinstance(e, LiteralValue) else None
            if u is None:
                return None
            scalars.append(u)
        return scalars[0] if len({_identity(u) for u in scalars}) == 1 else None
    return None


def _identity(lit: Literal) -> object:
    """Equal only for literals of the same value (−0.0 ≠ 0.0, NaN = NaN, 1 ≠ true)."""
    if isinstance(lit, ScalarLiteral):
        v = lit.value
        if isinstance(v, bool):
            return ("bool", v)
        return ("float", v.hex()) if isinstance(v, float) else ("int", v)
    return ("keyword", lit)


@dataclass
class LiteralBroadcastPromotion(FunctionPass):
    """Replace splat operands of broadcasting instructions by scalar literals."""

    name = "literal-broadcast-promotion"
    summary = "turn splat tensor literals into broadcast scalars"

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        module = fn.module
        if module is None:
            return False
        promoted = sum(promote(inst, module) for inst in fn.instructions()
                       if inst.opcode in BROADCASTING)
        ctx.stat("operands promoted", promoted)
        return promoted > 0


def promote(inst: Instruction, module: Module) -> int:
    """Promote the splat operands of one instruction; returns how many were replaced."""
    count = 0
    for field in BROADCASTING[inst.opcode]:
        old = inst.fields[field]
        new = splat_scalar(old, module)
        if new is None:
            continue
        inst.fields[field] = new
        if keeps_type(inst, module):
            count += 1
        else:
            inst.fields[field] = old
    return count


def keeps_type(inst: Instruction, module: Module) -> bool:
    """The instruction's type rule still gives exactly its result type."""
    try:
        return module.resolve(inst.op.infer(inst, module)) == module.resolve(inst.type)
    except TypeRuleError:
        return False
