"""Derivative rules of the element-wise instructions: unary maps, binary zips, `select`, casts.

Each unary rule is one entry of `UNARY_SCALES`: the map `g ↦ g·f′(x)`, which is both the
adjoint (g = the result's adjoint) and the tangent (g = the operand's tangent). Operands
that are literals or not floating point get no adjoint contribution.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from dlvm.ir import Builder, LiteralValue, ScalarLiteral, Value, constant

from . import adjoint, tangent

if TYPE_CHECKING:
    from dlvm.ir import Instruction

    from ..context import AdjointContext, RuleContext, TangentContext

Thunk = Callable[[], Value]
# (builder, g, x, y) ↦ g·f′(x), with thunks for the primal operand x and result y = f(x)
Scale = Callable[[Builder, Value, Thunk, Thunk], Value]
Contributions = list[tuple[Value, Value]]

_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

UNARY_SCALES: dict[str, Scale] = {
    "negate": lambda b, g, x, y: b.negate(g),                                   # −1
    "square": lambda b, g, x, y: b.multiply(g, b.multiply(x(), 2.0)),           # 2x
    "sqrt": lambda b, g, x, y: b.divide(b.multiply(g, 0.5), y()),               # 1/(2√x)
    "rsqrt": lambda b, g, x, y: b.multiply(g, b.multiply(b.divide(y(), x()), -0.5)),  # −x^−3/2/2
    "exp": lambda b, g, x, y: b.multiply(g, y()),                               # eˣ
    "log": lambda b, g, x, y: b.divide(g, x()),                                 # 1/x
    "sin": lambda b, g, x, y: b.multiply(g, b.cos(x())),                        # cos x
    "cos": lambda b, g, x, y: b.negate(b.multiply(g, b.sin(x()))),              # −sin x
    "tan": lambda b, g, x, y: b.multiply(g, b.add(b.square(y()), 1.0)),         # 1 + tan²x
    "asin": lambda b, g, x, y: b.multiply(g, b.rsqrt(b.subtract(1.0, b.square(x())))),  # 1/√(1−x²)
    "acos": lambda b, g, x, y: b.negate(
        b.multiply(g, b.rsqrt(b.subtract(1.0, b.square(x()))))),              # −1/√(1−x²)
    "atan": lambda b, g, x, y: b.divide(g, b.add(b.square(x()), 1.0)),          # 1/(1+x²)
    "sinh": lambda b, g, x, y: b.multiply(g, b.cosh(x())),                      # cosh x
    "cosh": lambda b, g, x, y: b.multiply(g, b.sinh(x())),                      # sinh x
    "tanh": lambda b, g, x, y: b.multiply(g, b.subtract(1.0, b.square(y()))),   # 1 − tanh²x
    "lgamma": lambda b, g, x, y: b.multiply(g, b.digamma(x())),                 # ψ(x)
    "erf": lambda b, g, x, y: b.multiply(
        g, b.multiply(b.exp(b.negate(b.square(x()))), _TWO_OVER_SQRT_PI)),      # 2/√π·e^−x²
    "erfc": lambda b, g, x, y: b.multiply(
        g, b.multiply(b.exp(b.negate(b.square(x()))), -_TWO_OVER_SQRT_PI)),     # −2/√π·e^−x²
}

# Piecewise constant: the derivative is zero (where it exists).
ZERO_DERIVATIVE = ("sign", "round", "rint", "ceil", "floor")


def _active(c: RuleContext, v: Value) -> bool:
    """Whether operand `v` can receive an adjoint: not a literal, floating point, wanted."""
    return not isinstance(v, LiteralValue) and c.type_of(v).dtype.is_float and c.wants(v)


def _plus(c: RuleContext, a: Value | None, b: Value | None) -> Value | None:
    """`a + b` of optional tangents (None: zero)."""
    if a is None or b is None:
        return a if b is None else b
    return c.b.add(a, b)


def _or_zero(t: Value | None) -> Value | float:
    return 0.0 if t is None else t


def _minus_one(c: RuleContext, v: Value) -> Value:
    """`v − 1`, folded when `v` is a scalar literal."""
    if isinstance(v, LiteralValue) and isinstance(v.literal, ScalarLiteral):
        return constant(v.literal.value - 1, v.type)
    return c.b.subtract(v, 1.0)


# ------------------------------------------------------------------ unary


def _unary_adjoint(scale: Scale) -> Callable[[AdjointContext, Instruction, Value], Contributions]:
    def rule(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
        """dx = dy·f′(x)"""
        return [(inst.x, scale(c.b, dy, lambda: c.primal(inst.x), lambda: c.primal(inst)))]

    return rule


def _unary_tangent(scale: Scale) -> Callable[[TangentContext, Instruction], Value | None]:
    def rule(c: TangentContext, inst: Instruction) -> Value | None:
        """ṫ = ẋ·f′(x)"""
        t = c.tangent(inst.x)
        if t is None:
            return None
        return scale(c.b, t, lambda: c.primal(inst.x), lambda: c.primal(inst))

    return rule


for _op, _scale in UNARY_SCALES.items():
    adjoint(_op)(_unary_adjoint(_scale))
    tangent(_op)(_unary_tangent(_scale))


@adjoint(*ZERO_DERIVATIVE)
def _zero_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = 0"""
    return []


@tangent(*ZERO_DERIVATIVE)
def _zero_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṫ = 0"""
    return None


def _no_trigamma(c: RuleContext, inst: Instruction, *_: object) -> None:
    from ..errors import DifferentiationError

    where = f"{inst.location}: " if inst.location else ""
    raise DifferentiationError(f"{where}'digamma' cannot be differentiated: its derivative, "
                               "trigamma, has no DLVM instruction")


adjoint("digamma")(_no_trigamma)
tangent("digamma")(_no_trigamma)

# ------------------------------------------------------------------ binary


@adjoint("add")
def _add_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """d(x + y) = dx + dy"""
    return [(v, dy) for v in (inst.lhs, inst.rhs) if _active(c, v)]


@tangent("add")
def _add_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """(x + y)˙ = ẋ + ẏ"""
    return _plus(c, c.tangent(inst.lhs), c.tangent(inst.rhs))


@adjoint("subtract")
def _subtract_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """d(x − y) = dx − dy"""
    out = [(inst.lhs, dy)] if _active(c, inst.lhs) else []
    if _active(c, inst.rhs):
        out.append((inst.rhs, c.b.negate(dy)))
    return out


@tangent("subtract")
def _subtract_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """(x − y)˙ = ẋ − ẏ"""
    tx, ty = c.tangent(inst.lhs), c.tangent(inst.rhs)
    if ty is None:
        return tx
    return c.b.negate(ty) if tx is None else c.b.subtract(tx, ty)


@adjoint("modulo")
def _modulo_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """fmod(x, y) = x − y·trunc(x/y): d fmod = dx − dy·trunc(x/y) (floats; a.e.)"""
    out = [(inst.lhs, dy)] if _active(c, inst.lhs) else []
    if _active(c, inst.rhs):
        q = c.b.truncateDivide(c.primal(inst.lhs), c.primal(inst.rhs))
        out.append((inst.rhs, c.b.negate(c.b.multiply(dy, q))))
    return out


@tangent("modulo")
def _modulo_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """fmod(x, y)˙ = ẋ − ẏ·trunc(x/y)"""
    tx, ty = c.tangent(inst.lhs), c.tangent(inst.rhs)
    if ty is None:
        return tx
    q = c.b.truncateDivide(c.primal(inst.lhs), c.primal(inst.rhs))
    minus = c.b.multiply(ty, q)
    return c.b.negate(minus) if tx is None else c.b.subtract(tx, minus)


@adjoint("multiply")
def _multiply_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """d(x·y) = dx·y + x·dy"""
    x, y = inst.lhs, inst.rhs
    out = [(x, c.b.multiply(dy, c.primal(y)))] if _active(c, x) else []
    if _active(c, y):
        out.append((y, c.b.multiply(dy, c.primal(x))))
    return out


@tangent("multiply")
def _multiply_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """(x·y)˙ = ẋ·y + x·ẏ"""
    tx, ty = c.tangent(inst.lhs), c.tangent(inst.rhs)
    return _plus(c, None if tx is None else c.b.multiply(tx, c.primal(inst.rhs)),
                 None if ty is None else c.b.multiply(c.primal(inst.lhs), ty))


@adjoint("divide")
def _divide_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """d(x/y) = dx/y − dy·x/y² = (dx − dy·(x/y))/y"""
    g = c.b.divide(dy, c.primal(inst.rhs))
    out = [(inst.lhs, g)] if _active(c, inst.lhs) else []
    if _active(c, inst.rhs):
        out.append((inst.rhs, c.b.negate(c.b.multiply(g, c.primal(inst)))))
    return out


@tangent("divide")
def _divide_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """(x/y)˙ = (ẋ − (x/y)·ẏ)/y"""
    tx, ty = c.tangent(inst.lhs), c.tangent(inst.rhs)
    if tx is None and ty is None:
        return None
    if ty is None:
        num = tx
    else:
        r_ty = c.b.multiply(c.primal(inst), ty)
        num = c.b.negate(r_ty) if tx is None else c.b.subtract(tx, r_ty)
    assert num is not None
    return c.b.divide(num, c.primal(inst.rhs))


def _power_dx(c: RuleContext, inst: Instruction, g: Value) -> Value:
    """g·y·x^(y−1)"""
    x, y = c.primal(inst.lhs), c.primal(inst.rhs)
    return c.b.multiply(c.b.multiply(g, y), c.b.power(x, _minus_one(c, y)))


def _power_dy(c: RuleContext, inst: Instruction, g: Value) -> Value:
    """g·log(x)·xʸ"""
    return c.b.multiply(c.b.multiply(g, c.b.log(c.primal(inst.lhs))), c.primal(inst))


@adjoint("power")
def _power_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """d(xʸ) = dx·y·x^(y−1) + dy·log(x)·xʸ"""
    out = [(inst.lhs, _power_dx(c, inst, dy))] if _active(c, inst.lhs) else []
    if _active(c, inst.rhs):
        out.append((inst.rhs, _power_dy(c, inst, dy)))
    return out


@tangent("power")
def _power_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """(xʸ)˙ = ẋ·y·x^(y−1) + ẏ·log(x)·xʸ"""
    tx, ty = c.tangent(inst.lhs), c.tangent(inst.rhs)
    return _plus(c, None if tx is None else _power_dx(c, inst, tx),
                 None if ty is None else _power_dy(c, inst, ty))


# ------------------------------------------------------------------ choices: min, max, select


def _routed(c: AdjointContext, lhs: Value, rhs: Value, mask: Value, dy: Value) -> Contributions:
    """dy to `lhs` where `mask`, to `rhs` elsewhere."""
    out = [(lhs, c.b.select(dy, 0.0, mask))] if _active(c, lhs) else []
    if _active(c, rhs):
        out.append((rhs, c.b.select(0.0, dy, mask)))
    return out


def _chosen_tangent(c: TangentContext, lhs: Value, rhs: Value, mask: Value) -> Value | None:
    """ẋ where `mask`, ẏ elsewhere."""
    tx, ty = c.tangent(lhs), c.tangent(rhs)
    if tx is None and ty is None:
        return None
    return c.b.select(_or_zero(tx), _or_zero(ty), mask)


# Ties go to the left operand: max picks x where x ≥ y, min where x ≤ y.
_CHOOSES_LHS = {"max": "greaterThanOrEqual", "min": "lessThanOrEqual"}


def _choice_mask(c: RuleContext, inst: Instruction) -> Value:
    compare = getattr(c.b, _CHOOSES_LHS[inst.opcode])
    return compare(c.primal(inst.lhs), c.primal(inst.rhs))


@adjoint("min", "max")
def _minmax_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """d max(x, y) = dx where x ≥ y, else dy (min: x ≤ y)"""
    return _routed(c, inst.lhs, inst.rhs, _choice_mask(c, inst), dy)


@tangent("min", "max")
def _minmax_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """max(x, y)˙ = ẋ where x ≥ y, else ẏ (min: x ≤ y)"""
    return _chosen_tangent(c, inst.lhs, inst.rhs, _choice_mask(c, inst))


@adjoint("select")
def _select_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """d select(x, y, m) = dx where m, else dy (m is not differentiable)"""
    return _routed(c, inst.lhs, inst.rhs, c.primal(inst.mask), dy)


@tangent("select")
def _select_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """select(x, y, m)˙ = select(ẋ, ẏ, m)"""
    return _chosen_tangent(c, inst.lhs, inst.rhs, c.primal(inst.mask))


# ------------------------------------------------------------------ casts


def _float_cast(c: RuleContext, inst: Instruction) -> bool:
    return c.type_of(inst.x).dtype.is_float and inst.dtype.is_float


@adjoint("dataTypeCast")
def _cast_adjoint(c: AdjointContext, inst: Instruction, dy: Value) -> Contributions:
    """dx = cast(dy, dtype(x)); none from or to a non-float type"""
    if not _float_cast(c, inst) or isinstance(inst.x, LiteralValue):
        return []
    return [(inst.x, c.b.dataTypeCast(dy, c.type_of(inst.x).dtype))]


@tangent("dataTypeCast")
def _cast_tangent(c: TangentContext, inst: Instruction) -> Value | None:
    """ṫ = cast(ẋ, dtype); none from or to a non-float type"""
    t = c.tangent(inst.x)
    if t is None or not _float_cast(c, inst):
        return None
    return c.b.dataTypeCast(t, inst.dtype)
