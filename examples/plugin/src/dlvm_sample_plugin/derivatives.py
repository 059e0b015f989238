"""dlvm-ad's rules for `softsign`, attached to it by opcode.

softsign′(x) = 1 / (1 + |x|)² = (1 − |y|)², with y = softsign(x): written with the result,
the rule needs neither a division nor an absolute value (|y| = y·sign(y)).
"""

from __future__ import annotations

from dlvm.ad import AdjointContext, RuleContext, TangentContext, adjoint, tangent
from dlvm.ir import Instruction, Value


def slope(c: RuleContext, inst: Instruction) -> Value:
    """(1 − |y|)², from the primal result y where the generated code is inserted."""
    y = c.primal(inst)
    return c.b.square(c.b.subtract(1.0, c.b.multiply(y, c.b.sign(y))))


@adjoint("softsign")
def softsign_adjoint(c: AdjointContext, inst: Instruction, dy: Value
                     ) -> list[tuple[Value, Value]]:
    """dx = dy·(1 − |y|)²"""
    return [(inst.x, c.b.multiply(dy, slope(c, inst)))]


@tangent("softsign")
def softsign_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ẏ = ẋ·(1 − |y|)²; a zero tangent (None) stays zero."""
    tx = c.tangent(inst.x)
    if tx is None:
        return None
    return c.b.multiply(tx, slope(c, inst))
