"""The derivative rules: one table of adjoint rules and one of tangent rules, keyed by opcode.

An **adjoint rule** `rule(c, inst, dy)` gets the primal instruction, the adjoint `dy`
of its result, and a context `c` whose builder `c.b` inserts into the reverse sweep.
It returns `[(operand, contribution), …]`: the driver accumulates each contribution
into the operand's adjoint (summing it over broadcast dimensions when its shape is
the result's), and skips operands that are literals or not differentiable.

A **tangent rule** `rule(c, inst)` returns the tangent of the result (None: zero)
from `c.tangent(operand)` (None: zero) and the primal values `c.primal(v)`.

Importing this package registers the built-in rules; a plugin that adds an
instruction registers its rules with `@adjoint("opcode")` / `@tangent("opcode")`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dlvm.ir import Instruction, Value

    from ..context import AdjointContext, TangentContext

    AdjointRule = Callable[[AdjointContext, Instruction, Value], list[tuple[Value, Value]]]
    TangentRule = Callable[[TangentContext, Instruction], Value | None]

ADJOINTS: dict[str, Any] = {}
TANGENTS: dict[str, Any] = {}

# Instructions whose results carry no derivative (integer, boolean, random or shape results,
# or piecewise constant);
# the driver treats their results as constants.
NONDIFFERENTIABLE: set[str] = {
    "equal", "notEqual", "lessThan", "lessThanOrEqual", "greaterThan", "greaterThanOrEqual",
    "and", "or", "not", "random", "rank", "shape", "unitCount",
    "floorDivide", "truncateDivide",  # piecewise constant: zero derivative almost everywhere
}


def adjoint(*opcodes: str) -> Callable[[Any], Any]:
    """Register an adjoint rule for the given opcodes."""

    def register(rule: Any) -> Any:
        for op in opcodes:
            ADJOINTS[op] = rule
        return rule

    return register


def tangent(*opcodes: str) -> Callable[[Any], Any]:
    """Register a tangent rule for the given opcodes."""

    def register(rule: Any) -> Any:
        for op in opcodes:
            TANGENTS[op] = rule
        return rule

    return register


def load_builtin_rules() -> None:
    from . import aggregate, elementwise, tensor  # noqa: F401


__all__ = ["ADJOINTS", "NONDIFFERENTIABLE", "TANGENTS", "adjoint", "load_builtin_rules",
           "tangent"]
