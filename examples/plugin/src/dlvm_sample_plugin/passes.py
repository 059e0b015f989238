"""The pass `sample-double-negation`: `negate (negate x)` becomes `x`."""

from __future__ import annotations

from dataclasses import dataclass

from dlvm.ir import Function, FunctionPass, Instruction, PassContext, Value


def is_negate(v: Value) -> bool:
    return isinstance(v, Instruction) and v.opcode == "negate"


@dataclass
class DoubleNegation(FunctionPass):
    """Rewrites every use of `negate (negate x)` to use `x`, and erases the negates left dead.

    A pass is a dataclass whose fields are its options (this one has none; a field
    `limit: int = 3` would be set by `sample-double-negation{limit=5}`). A `FunctionPass`
    runs on each function with a body and says whether it changed it; the pass manager
    then verifies the module and drops the cached analyses.
    """

    name = "sample-double-negation"
    summary = "remove negate(negate x)"

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        # the outer negate of each pair -> the value that the inner one negates
        replacement: dict[Value, Value] = {
            inst: inst.x.x for inst in fn.instructions()
            if inst.opcode == "negate" and is_negate(inst.x)}
        if not replacement:
            return False
        for inst in fn.instructions():
            inst.replace_uses(replacement)
        for outer in replacement:
            assert isinstance(outer, Instruction)
            outer.erase()
        used = {v for inst in fn.instructions() for v in inst.operands}
        for outer in replacement:
            inner = outer.x  # an erased instruction keeps its operands
            if inner.block is not None and inner not in used:
                inner.erase()
        ctx.stat("double negations removed", len(replacement))  # shown by `dlvm opt --stats`
        return True
