"""Element-wise operators beyond ops.py's tables: activations, trigonometry, tests, casts and
bitwise operators.

Functions that lose precision when written naively are composed with the usual numerical
care, so that results stay close to numpy's for every input: eˣ − 1 through tanh (no
cancellation near 0), ln(1 + u) by Goldberg's correction, softplus and the logistic function
through e^−|x| (never overflowing). Where a branch is taken by `select`, the branch not taken
is computed on inputs clamped to the range where it is finite, so that its derivative — zero
there, but multiplied by its own — is never ∞·0 = NaN.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from dlvm.ir import Value
from dlvm.ir.runtime import numpy_dtype
from dlvm.ir.types import F16, F32, F64, DataType

from .context import NodeContext
from .errors import Invalid, Unsupported
from .ops import binary, broadcast, converts

# ------------------------------------------------------------------ helpers


def absolute(c: NodeContext, x: Value) -> Value:
    """|x|, whose derivative at 0 is +1 — as that of max(x, 0), whose tie goes to x: the
    compositions below then have the right derivative at 0 (softplus'(0) = ½)."""
    return c.b.select(x, c.b.negate(x), c.b.greaterThanOrEqual(x, c.number(0, x)))


def odd(c: NodeContext, x: Value, magnitude: Value) -> Value:
    """sign(x)·magnitude for an odd function of slope 1 at 0: x itself at ±0 (its sign
    kept, and its derivative 1 there)."""
    zero = c.number(0, x)
    return c.b.select(x, c.b.multiply(magnitude, c.b.sign(x)), c.b.equal(x, zero))


def expm1(c: NodeContext, y: Value) -> Value:
    """eʸ − 1, exact near 0: 2t/(1 − t) with t = tanh(y/2) for |y| < 1 (where 1 − t > ½),
    eʸ − 1 beyond (no cancellation there)."""
    b = c.b
    one = c.number(1, y)
    near_y = b.max(b.min(y, one), c.number(-1, y))
    t = b.tanh(b.multiply(near_y, c.number(0.5, y)))
    near = b.divide(b.multiply(t, c.number(2, y)), b.subtract(one, t))
    far = b.subtract(b.exp(y), one)
    return b.select(near, far, b.lessThan(absolute(c, y), one))


def log1p(c: NodeContext, u: Value) -> Value:
    """ln(1 + u), exact near 0: below 1, Goldberg's ln(w)·u/(w − 1) with w = 1 + u (u
    itself where w rounds to 1); above, ln(1 + u)."""
    b = c.b
    one = c.number(1, u)
    below = b.min(u, one)
    w = b.add(below, one)
    d = b.subtract(w, one)
    exact = b.equal(d, c.number(0, u))
    ratio = b.divide(below, b.select(one, d, exact))
    near = b.select(below, b.multiply(b.log(w), ratio), exact)
    return b.select(near, b.log(b.add(u, one)), b.lessThan(u, one))


def logistic(c: NodeContext, z: Value) -> Value:
    """σ(z) = 1/(1 + e^−z), through e = e^−|z| ≤ 1: 1/(1 + e) for z ≥ 0, e/(1 + e) below."""
    b = c.b
    e = b.exp(b.negate(absolute(c, z)))
    total = b.add(e, c.number(1, z))
    return b.select(b.divide(c.number(1, z), total), b.divide(e, total),
                    b.greaterThanOrEqual(z, c.number(0, z)))


def softplus(c: NodeContext, x: Value) -> Value:
    """ln(1 + eˣ) = max(x, 0) + ln(1 + e^−|x|)"""
    b = c.b
    return b.add(b.max(x, c.number(0, x)), log1p(c, b.exp(b.negate(absolute(c, x)))))


def widened(c: NodeContext, x: Value, fn: Callable[[Value], Value]) -> Value:
    """fn(x), computed in f32 for f16 (whose range its intermediate squares would leave)."""
    if c.type_of(x).dtype != F16:
        return fn(x)
    return c.b.dataTypeCast(fn(c.b.dataTypeCast(x, F32)), F16)


def floating(c: NodeContext, x: Value) -> Value:
    """x, refused unless of a floating-point type (ONNX's checker sees to it; an input
    typed otherwise by a malformed model is refused rather than converted wrongly)."""
    if not c.type_of(x).dtype.is_float:
        raise Unsupported(f"{c.node.op_type} of {c.type_of(x).dtype} elements")
    return x


def beyond_squares(c: NodeContext, x: Value) -> float:
    """Where x² + 1 is x² to the type's precision and ln(2x) is the inverse hyperbolics'
    value: 2¹² for f32, 2²⁸ for f64."""
    return 2.0**28 if c.type_of(x).dtype == F64 else 2.0**12


# ------------------------------------------------------------------ instructions

for _op, _opcode in {"Tan": "tan", "Sinh": "sinh", "Cosh": "cosh", "Asin": "asin",
                     "Acos": "acos", "Atan": "atan", "Round": "rint"}.items():
    def _unary(c: NodeContext, opcode: str = _opcode) -> list[Value]:
        """the instruction of that name (Round: rint, halves to even)"""
        return [c.b.create(opcode, floating(c, c.value(0)))]
    converts(_op)(_unary)


@converts("IsNaN")
def _is_nan(c: NodeContext) -> list[Value]:
    """x ≠ x"""
    x = floating(c, c.value(0))
    return [c.b.notEqual(x, x)]


@converts("IsInf")
def _is_inf(c: NodeContext) -> list[Value]:
    """x = +∞ (detect_positive), x = −∞ (detect_negative), or either"""
    x = floating(c, c.value(0))
    b = c.b
    found = [b.equal(x, c.number(v, x)) for v, on in ((math.inf, c.attr("detect_positive", 1)),
                                                      (-math.inf, c.attr("detect_negative", 1)))
             if on]
    if not found:  # nothing detected: false everywhere (NaN included)
        return [b.lessThan(x, c.number(-math.inf, x))]
    return [found[0] if len(found) == 1 else b.or_(found[0], found[1])]


@converts("Xor")
def _xor(c: NodeContext) -> list[Value]:
    """a ≠ b for booleans, numpy broadcasting"""
    return [binary(c, "notEqual", c.value(0), c.value(1))]


# ------------------------------------------------------------------ activations


def alpha(c: NodeContext, default: float) -> float:
    return float(c.attr("alpha", default))


@converts("Elu")
def _elu(c: NodeContext) -> list[Value]:
    """elu(x) = x if x > 0 else α(eˣ − 1)  (α = 1)"""
    x = floating(c, c.value(0))
    b = c.b
    zero = c.number(0, x)
    negative = b.multiply(expm1(c, b.min(x, zero)), c.number(alpha(c, 1.0), x))
    return [b.select(x, negative, b.greaterThan(x, zero))]


@converts("Selu")
def _selu(c: NodeContext) -> list[Value]:
    """selu(x) = γ·(x if x > 0 else α(eˣ − 1))  (α ≈ 1.6733, γ ≈ 1.0507)"""
    x = floating(c, c.value(0))
    b = c.b
    zero = c.number(0, x)
    a = c.number(alpha(c, 1.67326319217681884765625), x)
    gamma = c.number(c.attr("gamma", 1.05070102214813232421875), x)
    negative = b.multiply(expm1(c, b.min(x, zero)), a)
    return [b.multiply(b.select(x, negative, b.greaterThan(x, zero)), gamma)]


@converts("Celu")
def _celu(c: NodeContext) -> list[Value]:
    """celu(x) = max(0, x) + min(0, α(e^(x/α) − 1))  (α = 1)"""
    x = floating(c, c.value(0))
    a = alpha(c, 1.0)
    if a == 0:
        raise Unsupported("Celu with alpha=0")
    b = c.b
    zero = c.number(0, x)
    # for x > 0 the second term is 0, for x ≤ 0 the first, whatever α's sign
    inner = b.divide(b.min(x, zero), c.number(a, x))
    negative = b.multiply(expm1(c, inner), c.number(a, x))
    return [b.select(x, negative, b.greaterThan(x, zero))]


@converts("Softplus")
def _softplus(c: NodeContext) -> list[Value]:
    """softplus(x) = ln(1 + eˣ) = max(x, 0) + ln(1 + e^−|x|)"""
    return [softplus(c, floating(c, c.value(0)))]


@converts("Softsign")
def _softsign(c: NodeContext) -> list[Value]:
    """softsign(x) = x / (1 + |x|)"""
    x = floating(c, c.value(0))
    return [c.b.divide(x, c.b.add(absolute(c, x), c.number(1, x)))]


def hard_sigmoid(c: NodeContext, x: Value, a: float, beta: float) -> Value:
    """max(0, min(1, αx + β))"""
    b = c.b
    line = b.add(b.multiply(x, c.number(a, x)), c.number(beta, x))
    return b.max(b.min(line, c.number(1, x)), c.number(0, x))


@converts("HardSigmoid")
def _hard_sigmoid(c: NodeContext) -> list[Value]:
    """hardsigmoid(x) = max(0, min(1, αx + β))  (α = 0.2, β = 0.5)"""
    x = floating(c, c.value(0))
    return [hard_sigmoid(c, x, alpha(c, 0.2), float(c.attr("beta", 0.5)))]


@converts("HardSwish")
def _hard_swish(c: NodeContext) -> list[Value]:
    """hardswish(x) = x · max(0, min(1, x/6 + ½))"""
    x = floating(c, c.value(0))
    return [c.b.multiply(x, hard_sigmoid(c, x, 1 / 6, 0.5))]


@converts("ThresholdedRelu")
def _thresholded_relu(c: NodeContext) -> list[Value]:
    """x if x > α else 0  (α = 1)"""
    x = floating(c, c.value(0))
    return [c.b.select(x, c.number(0, x), c.b.greaterThan(x, c.number(alpha(c, 1.0), x)))]


@converts("Swish")
def _swish(c: NodeContext) -> list[Value]:
    """swish(x) = x·σ(αx)  (α = 1)"""
    x = floating(c, c.value(0))
    return [c.b.multiply(x, logistic(c, c.b.multiply(x, c.number(alpha(c, 1.0), x))))]


@converts("Mish")
def _mish(c: NodeContext) -> list[Value]:
    """mish(x) = x·tanh(ln(1 + eˣ))"""
    x = floating(c, c.value(0))
    return [c.b.multiply(x, c.b.tanh(softplus(c, x)))]


@converts("PRelu")
def _prelu(c: NodeContext) -> list[Value]:
    """x if x ≥ 0 else slope·x (the slope broadcast to x's shape)"""
    x, slope = c.value(0), c.value(1)
    if c.rank(slope) > c.rank(x):
        raise Invalid("PRelu's slope has a higher rank than X")
    x, slope = broadcast(c, x, slope)
    for d, s in zip(c.type_of(x).shape, c.type_of(slope).shape, strict=True):
        if s not in (1, d) and d is not None:  # unidirectional: X's shape is the output's
            raise Invalid(f"PRelu's slope of shape {list(c.type_of(slope).shape)} does not "
                          f"broadcast to X's {list(c.type_of(x).shape)}")
    b = c.b
    return [b.select(x, b.multiply(x, slope), b.greaterThanOrEqual(x, c.number(0, x)))]


def shrink_integers(c: NodeContext, x: Value, lambd: float, bias: float) -> Value:
    """Shrink of integers, exactly: x > λ ⇔ x > ⌊λ⌋, x < −λ ⇔ x < ⌈−λ⌉ (thresholds outside
    the type's range: always or never), the bias subtracted as an integer."""
    dt = c.type_of(x).dtype
    info = np.iinfo(numpy_dtype(dt))
    if bias != int(bias) or not info.min <= bias <= info.max:
        raise Unsupported(f"Shrink of {dt} elements with bias={bias} (not an integer of "
                          "that type)")
    b = c.b

    def above(t: float) -> Value:  # x > t
        low = math.floor(t)
        if low >= info.max:
            return b.greaterThan(x, c.number(info.max, x))  # never
        if low < info.min:
            return b.greaterThanOrEqual(x, c.number(info.min, x))  # always
        return b.greaterThan(x, c.number(low, x))

    def below(t: float) -> Value:  # x < t
        high = math.ceil(t)
        if high <= info.min:
            return b.lessThan(x, c.number(info.min, x))  # never
        if high > info.max:
            return b.lessThanOrEqual(x, c.number(info.max, x))  # always
        return b.lessThan(x, c.number(high, x))

    zero = c.number(0, x)
    inner = b.select(b.subtract(x, c.number(bias, x)), zero, above(lambd))
    return b.select(b.add(x, c.number(bias, x)), inner, below(-lambd))


@converts("Shrink")
def _shrink(c: NodeContext) -> list[Value]:
    """x + bias if x < −λ, x − bias if x > λ, else 0  (λ = 0.5, bias = 0)"""
    x = c.value(0)
    lambd, bias = float(c.attr("lambd", 0.5)), float(c.attr("bias", 0.0))
    if not c.type_of(x).dtype.is_float:
        return [shrink_integers(c, x, lambd, bias)]
    b = c.b
    inner = b.select(b.subtract(x, c.number(bias, x)), c.number(0, x),
                     b.greaterThan(x, c.number(lambd, x)))
    return [b.select(b.add(x, c.number(bias, x)), inner,
                     b.lessThan(x, c.number(-lambd, x)))]


def bound(c: NodeContext, i: int, default: float) -> Value | None:
    """Clip's input i (a bound) as a scalar: absent, the type's lowest or highest finite
    value for floats (ONNX's numeric_limits: ±∞ become them), None for integers."""
    x = c.value(0)
    if not c.has(i):
        if not c.type_of(x).dtype.is_float:
            return None
        return c.number(default * float(np.finfo(f"float{c.type_of(x).dtype.bits}").max), x)
    v = c.value(i)
    t = c.type_of(v)
    if t.rank == 0:
        return v
    if any(d != 1 for d in t.shape):
        raise Unsupported(f"Clip with a bound (input {i}) that is not a scalar")
    return c.b.shapeCast(v, ())


@converts("Clip")
def _clip(c: NodeContext) -> list[Value]:
    """min(max(x, lo), hi): hi where lo > hi; an absent bound is the type's lowest or highest
    finite value (integers: none)"""
    x = c.value(0)
    lo, hi = bound(c, 1, -1.0), bound(c, 2, 1.0)
    if lo is not None:
        x = c.b.max(x, lo)
    if hi is not None:
        x = c.b.min(x, hi)
    return [x]


# ------------------------------------------------------------------ inverse hyperbolics


@converts("Asinh")
def _asinh(c: NodeContext) -> list[Value]:
    """asinh(x) = sign(x)·ln(|x| + √(x² + 1)), as ln(1 + u) of u = |x| + x²/(1 + √(1 + x²))
    (exact near 0); beyond 2¹² (f64: 2²⁸) ln|x| + ln 2"""
    def fn(x: Value) -> Value:
        b = c.b
        one = c.number(1, x)
        size = absolute(c, x)
        far = beyond_squares(c, x)
        near_size = b.min(size, c.number(far, x))
        square = b.multiply(near_size, near_size)
        u = b.add(near_size, b.divide(square, b.add(one, b.sqrt(b.add(square, one)))))
        large = b.add(b.log(b.max(size, c.number(far, x))), c.number(math.log(2), x))
        return odd(c, x, b.select(log1p(c, u), large, b.lessThan(size, c.number(far, x))))
    return [widened(c, floating(c, c.value(0)), fn)]


@converts("Acosh")
def _acosh(c: NodeContext) -> list[Value]:
    """acosh(x) = ln(x + √(x² − 1)), as ln(1 + u) of u = t + √t·√(t + 2), t = x − 1 (exact
    near 1); beyond 2¹² (f64: 2²⁸) ln x + ln 2; NaN below 1"""
    def fn(x: Value) -> Value:
        b = c.b
        far = beyond_squares(c, x)
        t = b.subtract(b.min(x, c.number(far, x)), c.number(1, x))
        u = b.add(t, b.multiply(b.sqrt(t), b.sqrt(b.add(t, c.number(2, x)))))  # t < 0: NaN
        large = b.add(b.log(b.max(x, c.number(far, x))), c.number(math.log(2), x))
        return b.select(log1p(c, u), large, b.lessThan(x, c.number(far, x)))
    return [widened(c, floating(c, c.value(0)), fn)]


@converts("Atanh")
def _atanh(c: NodeContext) -> list[Value]:
    """atanh(x) = ½·ln((1 + x)/(1 − x)) = sign(x)·½·ln(1 + 2|x|/(1 − |x|)) (exact near 0;
    ±∞ at ±1, NaN beyond)"""
    def fn(x: Value) -> Value:
        b = c.b
        size = absolute(c, x)
        u = b.divide(b.multiply(size, c.number(2, x)), b.subtract(c.number(1, x), size))
        return odd(c, x, b.multiply(log1p(c, u), c.number(0.5, x)))
    return [widened(c, floating(c, c.value(0)), fn)]


# ------------------------------------------------------------------ arithmetic


@converts("Sum", "Mean")
def _sum(c: NodeContext) -> list[Value]:
    """x₁ + … + xₙ (Mean: divided by n), numpy broadcasting across all inputs"""
    xs = [c.value(i) for i in range(len(c.inputs)) if c.has(i)]
    out = xs[0]
    for x in xs[1:]:
        out = binary(c, "add", out, x)
    if c.node.op_type == "Mean" and len(xs) > 1:
        out = c.b.divide(out, c.number(len(xs), out))
    return [out]


@converts("Mod")
def _mod(c: NodeContext) -> list[Value]:
    """a mod b: the sign of b (numpy's mod); fmod=1: the sign of a (C's fmod)"""
    a, d = broadcast(c, c.value(0), c.value(1))
    b = c.b
    r = b.modulo(a, d)
    if c.attr("fmod", 0):
        return [r]
    zero = c.number(0, r)
    flip = b.and_(b.notEqual(r, zero),
                  b.notEqual(b.lessThan(r, zero), b.lessThan(d, zero)))
    out = b.select(b.add(r, d), r, flip)
    if c.type_of(r).dtype.is_float:  # a zero takes the divisor's sign (numpy's rule)
        out = b.select(b.multiply(b.sign(d), zero), out, b.equal(r, zero))
    return [out]


# ------------------------------------------------------------------ bitwise


def integer_type(c: NodeContext, x: Value) -> DataType:
    dt = c.type_of(x).dtype
    if not dt.is_int:
        raise Unsupported(f"{c.node.op_type} of {dt} elements")
    return dt


BIT_OPS = {"BitwiseAnd": "bitAnd", "BitwiseOr": "bitOr", "BitwiseXor": "bitXor"}


@converts("BitwiseAnd", "BitwiseOr", "BitwiseXor")
def _bitwise(c: NodeContext) -> list[Value]:
    """a & b, a | b, a ^ b of integers, numpy broadcasting"""
    a, d = c.value(0), c.value(1)
    dt = integer_type(c, a)
    if c.type_of(d).dtype != dt:
        raise Unsupported(f"{c.node.op_type} of {dt} and {c.type_of(d).dtype}")
    return [binary(c, BIT_OPS[c.node.op_type], a, d)]


@converts("BitwiseNot")
def _bitwise_not(c: NodeContext) -> list[Value]:
    """~x"""
    x = c.value(0)
    integer_type(c, x)
    return [c.b.bitNot(x)]


@converts("BitShift")
def _bit_shift(c: NodeContext) -> list[Value]:
    """x << y or x >> y of unsigned integers (ONNX's only BitShift types), numpy
    broadcasting"""
    x, y = c.value(0), c.value(1)
    dt = integer_type(c, x)
    if c.type_of(y).dtype != dt:
        raise Unsupported(f"BitShift of {dt} by {c.type_of(y).dtype}")
    direction = c.attr("direction", "")
    if direction not in ("LEFT", "RIGHT"):
        raise Invalid(f"BitShift's direction must be LEFT or RIGHT, found '{direction}'")
    return [binary(c, "shiftLeft" if direction == "LEFT" else "shiftRight", x, y)]

