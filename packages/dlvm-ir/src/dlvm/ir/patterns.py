"""Small helpers for passes that match IR: literals, producers and uses.

    from dlvm.ir.patterns import defined_by, has_uses, splat_value

    # negate (negate x) → x
    inner = defined_by(inst.x, "negate") if inst.opcode == "negate" else None
    # x * 1 → x
    if inst.opcode == "multiply" and splat_value(inst.rhs) == 1: ...

Literals are values, not identities (`1.0: f32` written twice is one value), so they are
matched by what they hold; instructions and arguments are matched by identity.
"""

from __future__ import annotations

from typing import Any

from .analysis.usedef import UseDefInfo
from .core import (
    AggregateLiteral,
    Function,
    Instruction,
    KeywordLiteral,
    LiteralValue,
    Module,
    ScalarLiteral,
    Value,
)
from .types import DataType, TensorType

Scalar = bool | int | float


def literal_of(v: Value) -> LiteralValue | None:
    """The literal `v` stands for: a literal operand (`1.0: f32`), or the result of a
    `literal` instruction; None for anything computed."""
    if isinstance(v, LiteralValue):
        return v
    if isinstance(v, Instruction) and v.opcode == "literal":
        value = v.fields.get("value")
        if isinstance(value, LiteralValue):
            return value
    return None


def splat_value(v: Value, module: Module | None = None) -> Scalar | None:
    """The number every element of `v` holds, when `v` is a literal whose elements are all
    equal (`2.0: f32`, `zero`, `<1.0: f32, 1.0: f32>`); None otherwise.

    `module` resolves named types (`type $T = <3 x f32>`); without it `v`'s own type is read.
    Elements are equal when they are the same value bit for bit (`scalar_key`): a literal
    holding both 0.0 and −0.0 is no splat. Compare the result with `==`, which holds between
    `1`, `1.0` and `True` alike.
    """
    lit = literal_of(v)
    if lit is None:
        return None
    t = module.resolve(lit.type) if module is not None else lit.type
    if not isinstance(t, TensorType):
        return None
    inner = lit.literal
    if isinstance(inner, ScalarLiteral):
        return inner.value
    if isinstance(inner, KeywordLiteral) and inner.keyword == "zero":
        return False if t.dtype.is_bool else 0.0 if t.dtype.is_float else 0
    if isinstance(inner, AggregateLiteral) and inner.kind == "tensor" and inner.elements:
        values = [splat_value(e, module) for e in inner.elements]
        if any(x is None for x in values):
            return None
        if len({scalar_key(x, t.dtype) for x in values if x is not None}) == 1:
            return values[0]
    return None


def scalar_key(x: Scalar, dtype: DataType) -> Any:
    """What makes two scalars of `dtype` the same value: bit for bit, so that −0.0 and 0.0
    differ (1/x tells them apart) and NaN is NaN (`==` says neither)."""
    if dtype.is_float:
        return float(x).hex()
    return bool(x) if dtype.is_bool else int(x)


def defined_by(v: Value, opcode: str) -> Instruction | None:
    """`v` itself when it is the result of an `opcode` instruction, else None: the step of
    a pattern that looks through an operand at what produced it."""
    if isinstance(v, Instruction) and v.opcode == opcode:
        return v
    return None


def users(fn: Function, v: Value) -> list[Instruction]:
    """The instructions of `fn` that use `v`, each once, in block order (from the cached
    `UseDefInfo` analysis, which any edit of `fn` drops)."""
    info: UseDefInfo = fn.analysis(UseDefInfo)
    return info.users(v)


def has_uses(fn: Function, v: Value) -> bool:
    """Whether any instruction of `fn` uses `v` (an unused pure instruction may go)."""
    info: UseDefInfo = fn.analysis(UseDefInfo)
    return info.is_used(v)


__all__ = ["Scalar", "defined_by", "has_uses", "literal_of", "scalar_key", "splat_value",
           "users"]
