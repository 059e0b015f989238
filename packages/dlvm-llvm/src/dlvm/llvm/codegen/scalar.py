"""The scalar body of element-wise instructions: one lowering rule per opcode.

`SCALAR[opcode](e, inst, args)` returns the LLVM value of one element of `inst`'s result
from its operands' elements. The same table builds kernels on every target: `e`, a
`ScalarEmitter`, knows the builder, the math library of the target (polynomials on the CPU,
libdevice on NVIDIA GPUs) and how to report a run-time error without leaving the loop (so
the loop still vectorizes): a rule raises a flag, and the loop checks it once at its end.

Semantics are numpy's, as the interpreter's: integers wrap at their storage width, integer
division truncates toward zero and fails on zero, unsigned integers (`uN`) divide, compare,
widen and convert as unsigned (LLVM's integers have no sign: the rule asks the operand's
data type), `min`/`max` propagate NaN, comparisons with
NaN are false except `notEqual`, float→int casts truncate (saturating where numpy's result
is undefined). A plugin adds a rule for its own element-wise instruction to this table with
`dlvm.llvm.scalar_rule` (`rules.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir as ll

from dlvm.ir import Instruction
from dlvm.ir.runtime import numpy_dtype
from dlvm.ir.types import BF16, DataType, TensorType
from dlvm.ir.types import F32 as F32_DTYPE

from .bfloat import widen
from .emit import declare
from .layout import F32, I1, scalar_type
from .rounding import rounded


@dataclass
class ScalarEmitter:
    """What a rule may use: `b`, llvmlite's `IRBuilder` at the element being computed;
    `math(name, *xs)`, a function of the target's math library (`exp`, `log`, `tanh`,
    `erf`, `pow`, `sin`, …); `intrinsic(name, *xs)`, an LLVM intrinsic of the operands' type
    (`fabs`, `sqrt`, `floor`, `minimum`, …); `error_if(cond, inst, message)`, a run-time
    error; `operand_dtype(inst, field)` and `result_dtype(inst)`, DLVM data types."""

    b: ll.IRBuilder
    math_call: Callable[[ll.IRBuilder, str, Sequence[ll.Value]], ll.Value]
    site: Callable[[Instruction, str], int]
    dtype_of: Callable[[Any], DataType]
    flags: list[tuple[int, ll.Value]] = field(default_factory=list)

    def error_if(self, cond: ll.Value, inst: Instruction, message: str) -> None:
        """Report `message` at `inst` if `cond` holds for any element."""
        self.flags.append((self.site(inst, message), cond))

    def intrinsic(self, name: str, *args: ll.Value) -> ll.Value:
        t = args[0].type
        fn = declare(self.b.module, f"llvm.{name}.{type_suffix(t)}", t, [t] * len(args))
        return self.b.call(fn, list(args))

    def math(self, name: str, *args: ll.Value) -> ll.Value:
        """A math function; half precision is computed in single precision."""
        if isinstance(args[0].type, ll.HalfType):
            wide = [self.b.fpext(a, F32) for a in args]
            return self.b.fptrunc(self.math_call(self.b, name, wide), args[0].type)
        return self.math_call(self.b, name, args)

    def operand_dtype(self, inst: Instruction, field_name: str = "x") -> DataType:
        return self.dtype_of(inst.fields[field_name])

    def result_dtype(self, inst: Instruction) -> DataType:
        t = self.dtype_of(inst)
        return t


def type_suffix(t: ll.Type) -> str:
    if isinstance(t, ll.IntType):
        return f"i{t.width}"
    return {ll.HalfType: "f16", ll.FloatType: "f32", ll.DoubleType: "f64"}[type(t)]


def const(t: ll.Type, v: float | int | bool) -> ll.Constant:
    if isinstance(t, ll.IntType):
        return ll.Constant(t, int(v))
    return ll.Constant(t, float(v))


Rule = Callable[[ScalarEmitter, Instruction, list[ll.Value]], ll.Value]
SCALAR: dict[str, Rule] = {}


def rule(*names: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for n in names:
            SCALAR[n] = fn
        return fn

    return register


def is_float(v: ll.Value) -> bool:
    return isinstance(v.type, ll.HalfType | ll.FloatType | ll.DoubleType)


def is_unsigned(e: ScalarEmitter, inst: Instruction, field_name: str) -> bool:
    """Whether operand `field_name` of `inst` (its first operand, for a built-in function
    called with arguments) is a `uN`: LLVM's registers do not say."""
    operand = inst.fields.get(field_name)
    if operand is None:
        operand = inst.operands[0]
    return e.dtype_of(operand).is_unsigned


# ---------------------------------------------------------------- unary

MATH_UNARY = ("exp", "log", "tanh", "erf", "erfc", "sin", "cos", "tan", "asin", "acos", "atan",
              "sinh", "cosh", "lgamma", "digamma")
for _name in MATH_UNARY:
    # f(x) through the target's math library
    SCALAR[_name] = (lambda n: lambda e, inst, a: e.math(n, a[0]))(_name)

INTRINSIC_UNARY = {"sqrt": "sqrt", "round": "round", "rint": "rint", "ceil": "ceil",
                   "floor": "floor"}
for _name, _intr in INTRINSIC_UNARY.items():
    SCALAR[_name] = (lambda n: lambda e, inst, a: e.intrinsic(n, a[0]))(_intr)


@rule("negate")
def _negate(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # −x
    x = a[0]
    return e.b.fneg(x) if is_float(x) else e.b.sub(const(x.type, 0), x)


@rule("square")
def _square(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # x·x
    x = a[0]
    return e.b.fmul(x, x) if is_float(x) else e.b.mul(x, x)


@rule("rsqrt")
def _rsqrt(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # 1/√x (two roundings, as numpy computes it)
    return e.b.fdiv(const(a[0].type, 1.0), e.intrinsic("sqrt", a[0]))


@rule("sign")
def _sign(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # −1, 0 or 1 (NaN stays NaN)
    x, b = a[0], e.b
    t = x.type
    if is_float(x):
        pos = b.fcmp_ordered(">", x, const(t, 0))
        neg = b.fcmp_ordered("<", x, const(t, 0))
        return b.select(pos, const(t, 1), b.select(neg, const(t, -1), x))
    if is_unsigned(e, inst, "x"):
        return b.zext(b.icmp_unsigned("!=", x, const(t, 0)), t)
    return b.sub(b.zext(b.icmp_signed(">", x, const(t, 0)), t),
                 b.zext(b.icmp_signed("<", x, const(t, 0)), t))


@rule("not")
def _not(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # ¬x
    return e.b.xor(a[0], ll.Constant(I1, 1))


# ---------------------------------------------------------------- binary arithmetic


@rule("add")
def _add(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # a + b
    return e.b.fadd(*a) if is_float(a[0]) else e.b.add(*a)


@rule("subtract")
def _subtract(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # a − b
    return e.b.fsub(*a) if is_float(a[0]) else e.b.sub(*a)


@rule("multiply")
def _multiply(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # a · b
    return e.b.fmul(*a) if is_float(a[0]) else e.b.mul(*a)


def safe_divisor(e: ScalarEmitter, inst: Instruction, x: ll.Value, y: ll.Value,
                 what: str) -> tuple[ll.Value, ll.Value]:
    """(divisor, minus-one flag): zero raises `what`; a signed −1 is handled apart, since
    MIN / −1 overflows (numpy wraps it)."""
    b, t = e.b, y.type
    zero = b.icmp_signed("==", y, const(t, 0))
    e.error_if(zero, inst, what)
    if is_unsigned(e, inst, "rhs"):
        return b.select(zero, const(t, 1), y), ll.Constant(I1, 0)
    minus_one = b.icmp_signed("==", y, const(t, -1))
    return b.select(b.or_(zero, minus_one), const(t, 1), y), minus_one


def int_truncated_divide(e: ScalarEmitter, inst: Instruction, x: ll.Value,
                         y: ll.Value) -> ll.Value:
    d, minus_one = safe_divisor(e, inst, x, y, "integer division by zero")
    if is_unsigned(e, inst, "rhs"):
        return e.b.udiv(x, d)
    return e.b.select(minus_one, e.b.sub(const(x.type, 0), x), e.b.sdiv(x, d))


@rule("divide")
def _divide(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # a / b (integers: truncated toward zero)
    return e.b.fdiv(*a) if is_float(a[0]) else int_truncated_divide(e, inst, *a)


@rule("truncateDivide")
def _truncate_divide(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # trunc(a / b)
    if is_float(a[0]):
        return e.intrinsic("trunc", e.b.fdiv(*a))
    return int_truncated_divide(e, inst, *a)


@rule("floorDivide")
def _floor_divide(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # ⌊a / b⌋, computed as numpy does (from fmod, so that it is exact)
    x, y = a
    b, t = e.b, x.type
    if not is_float(x) and is_unsigned(e, inst, "rhs"):
        return int_truncated_divide(e, inst, x, y)  # ⌊a / b⌋ = trunc(a / b) when a, b ≥ 0
    if not is_float(x):
        q = int_truncated_divide(e, inst, x, y)
        d, _ = safe_divisor(e, inst, x, y, "integer division by zero")
        r = b.srem(x, d)
        adjust = b.and_(b.icmp_signed("!=", r, const(t, 0)),
                        b.icmp_signed("!=", b.icmp_signed("<", r, const(t, 0)),
                                      b.icmp_signed("<", y, const(t, 0))))
        return b.sub(q, b.zext(adjust, t))
    mod = b.frem(x, y)
    div = b.fdiv(b.fsub(x, mod), y)
    wrong_sign = b.and_(b.fcmp_ordered("!=", mod, const(t, 0)),
                        b.icmp_unsigned("!=", b.fcmp_ordered("<", y, const(t, 0)),
                                        b.fcmp_ordered("<", mod, const(t, 0))))
    div = b.select(wrong_sign, b.fsub(div, const(t, 1)), div)
    floor = e.intrinsic("floor", div)
    floor = b.select(b.fcmp_ordered(">", b.fsub(div, floor), const(t, 0.5)),
                     b.fadd(floor, const(t, 1)), floor)
    zero = b.fcmp_ordered("==", div, const(t, 0))
    floor = b.select(zero, e.intrinsic("copysign", const(t, 0), b.fdiv(x, y)), floor)
    return b.select(b.fcmp_ordered("==", y, const(t, 0)), b.fdiv(x, y), floor)


@rule("modulo")
def _modulo(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # remainder of truncated division (the sign of a), as C's fmod
    x, y = a
    if is_float(x):
        return e.b.frem(x, y)
    d, minus_one = safe_divisor(e, inst, x, y, "integer modulo by zero")
    if is_unsigned(e, inst, "rhs"):
        return e.b.urem(x, d)
    return e.b.select(minus_one, const(x.type, 0), e.b.srem(x, d))


@rule("min")
def _min(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # the smaller (NaN if either is NaN)
    return min_max(e, "min", a[0], a[1], is_unsigned(e, inst, "lhs"))


@rule("max")
def _max(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # the larger (NaN if either is NaN)
    return min_max(e, "max", a[0], a[1], is_unsigned(e, inst, "lhs"))


def min_max(e: ScalarEmitter, which: str, x: ll.Value, y: ll.Value, unsigned: bool
            ) -> ll.Value:
    """`min`/`max` of x and y: floats through the target's math library (NaN if either is
    NaN), integers by LLVM's signed or unsigned intrinsic."""
    if is_float(x):
        return e.math("minimum" if which == "min" else "maximum", x, y)
    return e.intrinsic(("u" if unsigned else "s") + which, x, y)


@rule("power")
def _power(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # aᵇ; integers by repeated squaring, wrapping like numpy, refusing b < 0
    x, y = a
    if is_float(x):
        return e.math("pow", x, y)
    b, t = e.b, x.type
    n = y
    if not is_unsigned(e, inst, "rhs"):
        e.error_if(b.icmp_signed("<", y, const(t, 0)), inst,
                   "integer power with a negative exponent")
        n = b.select(b.icmp_signed("<", y, const(t, 0)), const(t, 0), y)
    result = const(t, 1)
    base = x
    for _ in range(t.width):  # unrolled: branch-free, so the loop around it vectorizes
        bit = b.trunc(b.and_(n, const(t, 1)), I1)
        result = b.select(bit, b.mul(result, base), result)
        base = b.mul(base, base)
        n = b.lshr(n, const(t, 1))
    return result


# ---------------------------------------------------------------- bitwise (integers)


@rule("bitNot")
def _bit_not(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # every bit flipped
    return e.b.xor(a[0], const(a[0].type, -1))


# a ∧ b, a ∨ b of booleans and a & b, a | b, a ^ b of integers: LLVM's bitwise operations
# (on `i1`, the logical ones)
BITWISE = {"and": "and_", "or": "or_", "bitAnd": "and_", "bitOr": "or_", "bitXor": "xor"}
for _name, _method in BITWISE.items():
    SCALAR[_name] = (lambda m: lambda e, inst, a: getattr(e.b, m)(*a))(_method)


def shift_in_range(e: ScalarEmitter, y: ll.Value) -> ll.Value:
    """Whether 0 ≤ b < the storage width (LLVM's shifts are poison outside; numpy's shift
    every bit out). A negative iN amount is a huge unsigned one: one compare says both."""
    return e.b.icmp_unsigned("<", y, const(y.type, y.type.width))


@rule("shiftLeft")
def _shift_left(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # a · 2ᵇ (0 once every bit is shifted out)
    x, y = a
    inside = shift_in_range(e, y)
    safe = e.b.select(inside, y, const(y.type, 0))
    return e.b.select(inside, e.b.shl(x, safe), const(x.type, 0))


@rule("shiftRight")
def _shift_right(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # ⌊a / 2ᵇ⌋ for iN (sign bits shifted in), a / 2ᵇ for uN (zeros)
    x, y = a
    b, t = e.b, x.type
    inside = shift_in_range(e, y)
    safe = b.select(inside, y, const(y.type, 0))
    if is_unsigned(e, inst, "lhs"):
        return b.select(inside, b.lshr(x, safe), const(t, 0))
    beyond = b.ashr(x, const(t, t.width - 1))  # all sign bits
    return b.select(inside, b.ashr(x, safe), beyond)


# ---------------------------------------------------------------- booleans and compares


COMPARES = {"lessThan": "<", "lessThanOrEqual": "<=", "greaterThan": ">",
            "greaterThanOrEqual": ">=", "equal": "==", "notEqual": "!="}


def _compare(op: str) -> Rule:
    def lower(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
        x, y = a
        if is_float(x):  # ordered (false on NaN), except ≠ which is true on NaN
            return (e.b.fcmp_unordered(op, x, y) if op == "!=" else
                    e.b.fcmp_ordered(op, x, y))
        if x.type == I1 or is_unsigned(e, inst, "lhs"):
            return e.b.icmp_unsigned(op, x, y)
        return e.b.icmp_signed(op, x, y)

    return lower


for _name, _op in COMPARES.items():
    SCALAR[_name] = _compare(_op)


@rule("select")
def _select(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # mask ? lhs : rhs
    lhs, rhs, mask = a
    return e.b.select(mask, lhs, rhs)


# ---------------------------------------------------------------- casts


@rule("dataTypeCast")
def _cast(e: ScalarEmitter, inst: Instruction, a: list[ll.Value]) -> ll.Value:
    # convert: float→int truncates (saturating), anything→bool tests ≠ 0
    x, b = a[0], e.b
    target: DataType = inst.dtype
    source = e.operand_dtype(inst, "x")
    if source == target:
        return x
    if source == BF16:  # its bits as the f32 it is, then converted from f32
        x = widen(b, x)
    if target == BF16:  # converted to f32 (as ml_dtypes does, from f64 too), then rounded
        wide = x if x.type == F32 else _cast_value(e, x, source, F32_DTYPE)
        return e.math("to_bf16", wide)
    return _cast_value(e, x, F32_DTYPE if source == BF16 else source, target)


def _cast_value(e: ScalarEmitter, x: ll.Value, source: DataType, target: DataType
                ) -> ll.Value:
    b = e.b
    to = scalar_type(target)
    if x.type == to:
        return x
    if target.is_bool:
        return (b.fcmp_unordered("!=", x, const(x.type, 0)) if is_float(x) else
                b.icmp_signed("!=", x, const(x.type, 0)))
    from_unsigned = x.type == I1 or source.is_unsigned
    if target.is_float:
        if is_float(x):
            return b.fpext(x, to) if float_bits(x.type) < float_bits(to) else rounded(b, x, to)
        return b.uitofp(x, to) if from_unsigned else b.sitofp(x, to)
    # to an integer
    if is_float(x):
        sign = "u" if target.is_unsigned else "s"
        fn = declare(b.module, f"llvm.fpto{sign}i.sat.{type_suffix(to)}.{type_suffix(x.type)}",
                     to, [x.type])
        return b.call(fn, [x])
    if x.type.width >= to.width:
        return b.trunc(x, to)
    return b.zext(x, to) if from_unsigned else b.sext(x, to)


def float_bits(t: ll.Type) -> int:
    return {ll.HalfType: 16, ll.FloatType: 32, ll.DoubleType: 64}[type(t)]


# ---------------------------------------------------------------- reductions


def combine(e: ScalarEmitter, combinator: str, acc: ll.Value, x: ll.Value,
            reassociate: bool = True) -> ll.Value:
    """acc ⊕ x for a reduction combinator (`reassoc` lets a float sum vectorize)."""
    b = e.b
    flags = ["reassoc"] if reassociate else []
    if combinator == "add":
        return b.fadd(acc, x, flags=flags) if is_float(x) else b.add(acc, x)
    if combinator == "multiply":
        return b.fmul(acc, x, flags=flags) if is_float(x) else b.mul(acc, x)
    if combinator in ("min", "max", "umin", "umax"):
        which = combinator.removeprefix("u")
        return min_max(e, which, acc, x, combinator != which)
    if combinator == "and":
        return b.and_(acc, x)
    if combinator == "or":
        return b.or_(acc, x)
    raise ValueError(f"no combinator '{combinator}'")


def identity(combinator: str, dtype: DataType) -> float | int | bool:
    """x ⊕ identity = x: what a skipped element contributes."""
    if combinator == "add":
        return 0
    if combinator == "multiply":
        return 1
    if combinator in ("and", "or"):
        return combinator == "and"
    if dtype.is_float:
        return math.inf if combinator == "min" else -math.inf
    info = np.iinfo(numpy_dtype(dtype))
    return int(info.max) if combinator in ("min", "umin") else int(info.min)


def tensor_dtype(t: Any) -> DataType:
    assert isinstance(t, TensorType)
    return t.dtype
