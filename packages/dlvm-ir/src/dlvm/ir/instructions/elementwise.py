"""Element-wise instructions: unary maps, binary zips, compares, `select`, casts.

Binary operands broadcast DLVM's way (a scalar with anything, or equal
ranks with size-1 dimensions); see `types.broadcast_shapes`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core import Instruction, Module
from ..opdef import define
from ..runtime import ExecutionError, format_np_shape, is_float_dtype, numpy_dtype
from ..types import BOOL, TensorType, Type, broadcast_shapes
from .common import (
    bool_tensor,
    fail,
    float_tensor,
    integer_tensor,
    numeric_tensor,
    result_array,
    tensor_type,
)

_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _lgamma_scalar(x: float) -> float:
    """log |Γ(x)|, +∞ at the poles 0, −1, −2, … and on overflow."""
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


_lgamma = np.vectorize(_lgamma_scalar, otypes=[np.float64])


def _digamma(x: np.ndarray) -> np.ndarray:
    """ψ(x) by the recurrence ψ(x) = ψ(x+1) − 1/x and the asymptotic series."""
    x = np.asarray(x, dtype=np.float64)
    reflect = x < 0.5
    y = np.where(reflect, 1.0 - x, x)
    acc = np.zeros_like(y)
    while np.any(y < 10.0):
        small = y < 10.0
        acc = acc - np.where(small, 1.0 / y, 0.0)
        y = np.where(small, y + 1.0, y)
    inv = 1.0 / y
    inv2 = inv * inv
    series = np.log(y) - 0.5 * inv - inv2 * (
        1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132)))
    )
    result = acc + series
    with np.errstate(all="ignore"):
        return np.where(reflect, result - np.pi / np.tan(np.pi * x), result)


def _round_half_away(x: np.ndarray) -> np.ndarray:
    """Halves away from zero, exactly: x − trunc(x) is exact, unlike |x| + 0.5."""
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


# name → (numpy function, operand domain, summary)
UNARY: dict[str, tuple[Callable[[Any], Any], str, str]] = {
    "negate": (np.negative, "numeric", "−x"),
    "sign": (np.sign, "numeric", "−1, 0 or 1 by the sign of x"),
    "square": (np.square, "numeric", "x²"),
    "sqrt": (np.sqrt, "float", "√x"),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), "float", "1/√x"),
    "exp": (np.exp, "float", "eˣ"),
    "log": (np.log, "float", "natural logarithm"),
    "sin": (np.sin, "float", "sine"),
    "cos": (np.cos, "float", "cosine"),
    "tan": (np.tan, "float", "tangent"),
    "asin": (np.arcsin, "float", "arc sine"),
    "acos": (np.arccos, "float", "arc cosine"),
    "atan": (np.arctan, "float", "arc tangent"),
    "sinh": (np.sinh, "float", "hyperbolic sine"),
    "cosh": (np.cosh, "float", "hyperbolic cosine"),
    "tanh": (np.tanh, "float", "hyperbolic tangent"),
    "round": (_round_half_away, "float", "nearest integer, halves away from zero"),
    "rint": (np.rint, "float", "nearest integer, halves to even"),
    "ceil": (np.ceil, "float", "smallest integer ≥ x"),
    "floor": (np.floor, "float", "largest integer ≤ x"),
    "lgamma": (_lgamma, "float", "log |Γ(x)|"),
    "digamma": (_digamma, "float", "ψ(x) = d/dx log Γ(x)"),
    "erf": (_erf, "float", "error function"),
    "erfc": (_erfc, "float", "complementary error function, 1 − erf(x)"),
    "not": (np.logical_not, "bool", "logical not"),
    "bitNot": (np.invert, "integer", "every bit of x flipped (−x − 1 for iN)"),
}

_DOMAIN_CHECK = {"float": float_tensor, "numeric": numeric_tensor, "bool": bool_tensor,
                 "integer": integer_tensor}


def _divides_by_zero(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether an element is divided by zero (an empty result divides none)."""
    return bool(np.size(a) and np.any(b == 0))


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if _divides_by_zero(a, b):
        raise ExecutionError("integer division by zero")
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q)


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return _int_div(a, b)
    return np.true_divide(a, b)


def _truncate_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu":
        return _int_div(a, b)
    return np.trunc(np.true_divide(a, b))


def _floor_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and _divides_by_zero(a, b):
        raise ExecutionError("integer division by zero")
    return np.floor_divide(a, b)


def _modulo(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and _divides_by_zero(a, b):
        raise ExecutionError("integer modulo by zero")
    return np.fmod(a, b)


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and np.size(a) and np.any(b < 0):
        raise ExecutionError("integer power with a negative exponent")
    return np.power(a, b)


# name → (numpy function, commutative, summary)
NUMERIC_BINARY: dict[str, tuple[Callable[[Any, Any], Any], bool, str]] = {
    "add": (np.add, True, "a + b"),
    "subtract": (np.subtract, False, "a − b"),
    "multiply": (np.multiply, True, "a · b"),
    "divide": (_divide, False, "a / b (integers: truncated toward zero)"),
    "min": (np.minimum, True, "the smaller of a and b"),
    "max": (np.maximum, True, "the larger of a and b"),
    "truncateDivide": (_truncate_divide, False, "a / b rounded toward zero"),
    "floorDivide": (_floor_divide, False, "a / b rounded toward −∞"),
    "modulo": (_modulo, False, "remainder of truncated division (sign of a)"),
    "power": (_power, False, "aᵇ"),
}
# On integers: x / 0, x mod 0 and x ^ -1 stop the program.
INTEGER_TRAPS = frozenset({"divide", "truncateDivide", "floorDivide", "modulo", "power"})
BOOLEAN_BINARY: dict[str, tuple[Callable[[Any, Any], Any], bool, str]] = {
    "and": (np.logical_and, True, "logical and"),
    "or": (np.logical_or, True, "logical or"),
}
# A shift by an amount outside [0, N) moves every bit out: 0, or −1 for a negative iN shifted
# right (numpy's rule, and an operand of `uN` or `iN`, never poison as in LLVM).
BITWISE_BINARY: dict[str, tuple[Callable[[Any, Any], Any], bool, str]] = {
    "bitAnd": (np.bitwise_and, True, "bitwise and"),
    "bitOr": (np.bitwise_or, True, "bitwise or"),
    "bitXor": (np.bitwise_xor, True, "bitwise exclusive or"),
    "shiftLeft": (np.left_shift, False, "a · 2ᵇ, wrapping (bits shifted out are lost)"),
    "shiftRight": (np.right_shift, False,
                   "a shifted right b bits: arithmetic for iN (⌊a / 2ᵇ⌋), logical for uN"),
}
COMPARE: dict[str, tuple[Callable[[Any, Any], Any], bool, str]] = {
    "lessThan": (np.less, False, "a < b"),
    "lessThanOrEqual": (np.less_equal, False, "a ≤ b"),
    "greaterThan": (np.greater, False, "a > b"),
    "greaterThanOrEqual": (np.greater_equal, False, "a ≥ b"),
    "equal": (np.equal, True, "a = b"),
    "notEqual": (np.not_equal, True, "a ≠ b"),
}


def broadcast_types(a: TensorType, b: TensorType, what: str = "operands") -> tuple[int | None, ...]:
    shape = broadcast_shapes(a.shape, b.shape)
    if shape is None:
        fail(f"{what} of types '{a}' and '{b}' cannot be broadcast together")
    return shape


def _unary_rule(domain: str) -> Callable[[Instruction, Module | None], Type]:
    check = _DOMAIN_CHECK[domain]
    return lambda inst, m: check(inst.x, m)


def _unary_eval(fn: Callable[[Any], Any]) -> Callable[[Instruction, Any], Any]:
    def evaluate(inst: Instruction, frame: Any) -> Any:
        with np.errstate(all="ignore"):
            return result_array(inst, fn(frame.get(inst.x)))

    return evaluate


def _binary_rule(domain: str) -> Callable[[Instruction, Module | None], Type]:
    check = _DOMAIN_CHECK[domain]

    def rule(inst: Instruction, m: Module | None) -> Type:
        a = check(inst.lhs, m, "left operand")
        b = check(inst.rhs, m, "right operand")
        if a.dtype != b.dtype:
            fail(f"operands have different data types '{a.dtype}' and '{b.dtype}'")
        return TensorType(broadcast_types(a, b), a.dtype)

    return rule


def _compare_rule(inst: Instruction, m: Module | None) -> Type:
    a = tensor_type(inst.lhs, m, "left operand")
    b = tensor_type(inst.rhs, m, "right operand")
    if a.dtype != b.dtype:
        fail(f"operands have different data types '{a.dtype}' and '{b.dtype}'")
    return TensorType(broadcast_types(a, b), BOOL)


def check_broadcast(*xs: np.ndarray) -> None:
    """Raise unless the run-time shapes broadcast (dynamic dimensions may disagree)."""
    try:
        np.broadcast_shapes(*(x.shape for x in xs))
    except ValueError:
        shapes = " and ".join(format_np_shape(x.shape) for x in xs)
        raise ExecutionError(f"shapes {shapes} cannot be broadcast together") from None


def _binary_eval(fn: Callable[[Any, Any], Any]) -> Callable[[Instruction, Any], Any]:
    def evaluate(inst: Instruction, frame: Any) -> Any:
        a, b = frame.get(inst.lhs), frame.get(inst.rhs)
        check_broadcast(a, b)
        with np.errstate(all="ignore"):
            return result_array(inst, fn(a, b))

    return evaluate


for _name, (_fn, _domain, _summary) in UNARY.items():
    define(_name, "$x", _unary_rule(_domain), traits=("pure", "elementwise"),
           evaluate=_unary_eval(_fn), summary=_summary, category="unary", domain=_domain)

for _table, _domain, _category in (
    (NUMERIC_BINARY, "numeric", "binary"),
    (BOOLEAN_BINARY, "bool", "boolean"),
    (BITWISE_BINARY, "integer", "bitwise"),
):
    for _name, (_fn2, _comm, _summary) in _table.items():
        define(_name, "$lhs , $rhs", _binary_rule(_domain),
               traits=("pure", "elementwise", *(("commutative",) if _comm else ()),
                       *(("may_trap_on_integers",) if _name in INTEGER_TRAPS else ())),
               evaluate=_binary_eval(_fn2), summary=_summary, category=_category)

for _name, (_fn2, _comm, _summary) in COMPARE.items():
    define(_name, "$lhs , $rhs", _compare_rule,
           traits=("pure", "elementwise", *(("commutative",) if _comm else ())),
           evaluate=_binary_eval(_fn2), summary=_summary, category="compare")


def _select_rule(inst: Instruction, m: Module | None) -> Type:
    a = tensor_type(inst.lhs, m, "first operand")
    b = tensor_type(inst.rhs, m, "second operand")
    mask = bool_tensor(inst.mask, m, "mask")
    if a.dtype != b.dtype:
        fail(f"operands have different data types '{a.dtype}' and '{b.dtype}'")
    shape = broadcast_types(a, b)
    shape = broadcast_types(TensorType(shape, a.dtype), mask, "operands and mask")
    return TensorType(shape, a.dtype)


def _select_eval(inst: Instruction, frame: Any) -> Any:
    mask, a, b = frame.get(inst.mask), frame.get(inst.lhs), frame.get(inst.rhs)
    check_broadcast(mask, a, b)
    return result_array(inst, np.where(mask, a, b))


define("select", "$lhs , $rhs by $mask", _select_rule, traits=("pure", "elementwise"),
       evaluate=_select_eval, category="select",
       summary="element-wise choice: lhs where mask is true, else rhs")


def _cast_rule(inst: Instruction, m: Module | None) -> Type:
    return tensor_type(inst.x, m).with_dtype(inst.dtype)


def _cast_eval(inst: Instruction, frame: Any) -> Any:
    x = frame.get(inst.x)
    target = numpy_dtype(inst.dtype)
    if target.kind in "iu" and is_float_dtype(x.dtype):
        with np.errstate(all="ignore"):
            x = np.trunc(x)
    if target.kind == "b":
        return result_array(inst, x != 0)
    with np.errstate(all="ignore"):
        return result_array(inst, x.astype(target))


define("dataTypeCast", "$x to $dtype:dtype", _cast_rule, traits=("pure", "elementwise"),
       evaluate=_cast_eval, category="cast",
       summary="convert each element to another data type")
