"""`algebra-simplify`: algebraic identities that are exact for IEEE floats, to a fixed point.

Each rule rewrites one instruction, looking through the definitions of its operands, into an
existing value or a few new instructions. A rule fires only where it gives the same result
for every input — NaN and ±∞ included — and the same result type, so that users keep
verifying and the interpreter's results stay identical. Three kinds of exactness:

- *exact*: bit-for-bit identical (`x·1 → x`, `−(−x) → x`, `x^2 → x·x`, shape-cast pairs);
- *nsz* ("no signed zeros"): identical except that a zero result may have the other sign,
  as LLVM's `nsz` flag allows (`x + 0.0 → x` gives −0.0 where IEEE gives +0.0 for x = −0.0).
  These run by default, because differentiation emits `add 0.0, x` everywhere; the option
  `signed_zeros=true` turns them off;
- *fast math*: only correct in real arithmetic (`exp(log x) → x`, division reassociation);
  they run only with `fast_math=true`.

Rewritten instructions, and the instructions only they used, are erased; other dead code is
left to `dce`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlvm.ir import (
    AggregateLiteral,
    Builder,
    BuiltinRef,
    FieldKey,
    Function,
    FunctionPass,
    Instruction,
    LiteralValue,
    Module,
    PassContext,
    ScalarLiteral,
    TensorType,
    Type,
    TypeRuleError,
    Value,
)
from dlvm.ir.analysis import UseDefInfo
from dlvm.ir.core import ZERO, erase_instructions
from dlvm.ir.instructions.elementwise import BOOLEAN_BINARY, COMPARE, NUMERIC_BINARY
from dlvm.ir.instructions.tensor import is_reversal, permutation
from dlvm.ir.patterns import literal_of, splat_value
from dlvm.ir.types import DataType, scalar

from ..rewrite import is_pure

Scalar = bool | int | float

EXACT, NSZ, FAST = "exact", "nsz", "fast-math"
MAX_SWEEPS = 64

# ---------------------------------------------------------------- literals


def is_negative_zero(c: Scalar, dt: DataType) -> bool:
    return dt.is_float and c == 0 and math.copysign(1.0, float(c)) < 0


def constant(value: Scalar, t: Type) -> LiteralValue:
    """A scalar or splat literal of type `t`; floats print as floats (`1.0`, not `1`)."""
    if isinstance(t, TensorType) and t.dtype.is_float and not isinstance(value, bool):
        value = float(value)
    return LiteralValue(ScalarLiteral(value), t)


# ---------------------------------------------------------------- the matching context


@dataclass
class Site:
    """One instruction being simplified, with what rules need to look around it."""

    inst: Instruction
    module: Module
    usedef: UseDefInfo
    created: list[Instruction]

    def tensor(self, v: Value) -> TensorType | None:
        t = self.module.resolve(v.type)
        return t if isinstance(t, TensorType) else None

    @property
    def dtype(self) -> DataType | None:
        t = self.tensor(self.inst)
        return t.dtype if t is not None else None

    def same_type(self, v: Value, other: Value | None = None) -> bool:
        """`v` has exactly the type of `other` (default: the instruction's result)."""
        other = self.inst if other is None else other
        return self.module.resolve(v.type) == self.module.resolve(other.type)

    def static(self, *vs: Value) -> bool:
        return all((t := self.tensor(v)) is not None and t.is_static for v in vs)

    def const(self, v: Value) -> Scalar | None:
        return splat_value(v, self.module)

    def defined_by(self, v: Value, *opcodes: str) -> Instruction | None:
        """The instruction defining `v` when it is one of `opcodes`."""
        if isinstance(v, Instruction) and v.opcode in opcodes:
            return v
        return None

    def single_use(self, v: Value) -> bool:
        return self.usedef.uses_count(v) == 1

    def build(self, opcode: str, *args: Any, **fields: Any) -> Instruction:
        """A new instruction before the one being simplified (erased again on rollback)."""
        b = Builder(self.module)
        b.position_before(self.inst)
        inst = b.create(opcode, *args, **fields)
        self.created.append(inst)
        return inst

    def discard(self, inst: Instruction) -> None:
        """Erase an instruction this site built that turned out not to fit."""
        self.created.remove(inst)
        inst.erase()


RuleFn = Callable[[Site], Value | None]


@dataclass(frozen=True)
class Rule:
    """A rewrite of instructions with one of `opcodes`; `apply` returns the replacement."""

    name: str
    opcodes: tuple[str, ...]
    apply: RuleFn
    exactness: str = EXACT
    needs_constant: bool = False  # applies only when `lhs` or `rhs` is a literal
    # applies only when `lhs` or `rhs` is the result of an instruction with one of these
    operand_opcodes: frozenset[str] | None = None


# ---------------------------------------------------------------- constant operand identities


@dataclass(frozen=True)
class Identity:
    """`x ⊕ c → result`, for a constant operand `c` on one of `sides` of an `opcode`.

    `check(c, dtype)` returns the exactness of the identity for that constant, or None
    when it does not apply. `result` is "x", "negate" (−x), "constant" (c itself) or "one".
    """

    name: str
    opcode: str
    sides: tuple[str, ...]
    check: Callable[[Scalar, DataType], str | None]
    result: str


BOTH, LEFT, RIGHT = ("lhs", "rhs"), ("lhs",), ("rhs",)


def _plus_zero(c: Scalar, dt: DataType) -> str | None:
    # c is a zero: +(−0.0) is exact for every x; +(+0.0) only loses the sign of −0.0
    if dt.is_bool or c != 0:
        return None
    return EXACT if not dt.is_float or is_negative_zero(c, dt) else NSZ


def _minus_zero(c: Scalar, dt: DataType) -> str | None:
    # x − (+0) = x + (−0) exactly; x − (−0.0) = x + 0 only loses the sign of −0.0
    if dt.is_bool or c != 0:
        return None
    return NSZ if is_negative_zero(c, dt) else EXACT


def _equals(value: Scalar, *, kinds: str = "int float") -> Callable[[Scalar, DataType], str | None]:
    def check(c: Scalar, dt: DataType) -> str | None:
        if dt.kind not in kinds.split() or isinstance(c, bool) != dt.is_bool:
            return None
        return EXACT if c == value else None
    return check


def _zero(c: Scalar, dt: DataType) -> str | None:
    return EXACT if dt.is_numeric and c == 0 else None


IDENTITIES: tuple[Identity, ...] = (
    # x + (−0.0) = x exactly; x + 0 = x except −0.0 + 0 = +0.0 (nsz); integers exact
    Identity("add-zero", "add", BOTH, _plus_zero, "x"),
    # x − 0 = x + (−0) = x exactly; x − (−0.0) = x + 0 (nsz)
    Identity("subtract-zero", "subtract", RIGHT, _minus_zero, "x"),
    # (−0.0) − x = −x exactly; 0 − x = −x except 0 − (+0) = +0 (nsz)
    Identity("zero-minus", "subtract", LEFT, _plus_zero, "negate"),
    # x · 1 = x (multiplying by 1 is exact in IEEE arithmetic)
    Identity("multiply-one", "multiply", BOTH, _equals(1), "x"),
    # x · (−1) = −x (only the sign bit changes; integers wrap the same way)
    Identity("multiply-minus-one", "multiply", BOTH, _equals(-1), "negate"),
    # x / 1 = x
    Identity("divide-one", "divide", RIGHT, _equals(1), "x"),
    # x / (−1) = −x for floats (only the sign bit changes)
    Identity("divide-minus-one", "divide", RIGHT, _equals(-1, kinds="float"), "negate"),
    # x ^ 1 = x (IEEE pow(x, 1) = x for every x)
    Identity("power-one", "power", RIGHT, _equals(1), "x"),
    # x ^ 0 = 1 for every x, NaN included (IEEE pow(x, ±0) = 1); integers: 0^0 = 1 too
    Identity("power-zero", "power", RIGHT, _zero, "one"),
    # integers only: x · 0 = 0 (floats: ∞·0 = NaN, −1·0 = −0.0)
    Identity("multiply-zero-int", "multiply", BOTH, _equals(0, kinds="int"), "constant"),
    # x ∧ true = x, x ∨ false = x
    Identity("and-true", "and", BOTH, _equals(True, kinds="bool"), "x"),
    Identity("or-false", "or", BOTH, _equals(False, kinds="bool"), "x"),
    # x ∧ false = false, x ∨ true = true
    Identity("and-false", "and", BOTH, _equals(False, kinds="bool"), "constant"),
    Identity("or-true", "or", BOTH, _equals(True, kinds="bool"), "constant"),
)


def _identity_rule(idt: Identity, exactness: str) -> Rule:
    def apply(s: Site) -> Value | None:
        dt = s.dtype
        if dt is None or s.tensor(s.inst.lhs) is None or s.tensor(s.inst.rhs) is None:
            return None
        for side in idt.sides:
            c_value = s.inst.fields[side]
            x = s.inst.fields["rhs" if side == "lhs" else "lhs"]
            c = s.const(c_value)
            if c is None or idt.check(c, s.tensor(c_value).dtype) != exactness:  # type: ignore[union-attr]
                continue
            out = _identity_result(s, idt.result, x, c_value, c)
            if out is not None:
                return out
        return None

    return Rule(idt.name, (idt.opcode,), apply, exactness, needs_constant=True)


def _identity_result(s: Site, result: str, x: Value, c_value: Value, c: Scalar) -> Value | None:
    if result in ("x", "negate"):
        # the constant must not widen x: a static shape that broadcasts into x's type
        if not s.static(c_value) or not s.same_type(x):
            return None
        return x if result == "x" else s.build("negate", x)
    # a splat of the result type: everything static, so no run-time shape check is lost
    if not s.static(s.inst, x, c_value):
        return None
    return constant(1 if result == "one" else c, s.inst.type)


# ---------------------------------------------------------------- other rules


def same_operands(s: Site) -> Value | None:
    """x ∧ x = x, x ∨ x = x, min(x, x) = x, max(x, x) = x (NaN stays NaN)."""
    x = s.inst.lhs
    return x if x is s.inst.rhs and s.same_type(x) else None


def subtract_self_int(s: Site) -> Value | None:
    """Integers: x − x = 0 (for floats ∞ − ∞ is NaN)."""
    x = s.inst.lhs
    dt = s.dtype
    if x is not s.inst.rhs or dt is None or not dt.is_int or not s.static(s.inst):
        return None
    return constant(0, s.inst.type)


def divide_power_of_two(s: Site) -> Value | None:
    """x / 2ᵏ = x · 2⁻ᵏ for floats: both are the correctly rounded x·2⁻ᵏ when 2⁻ᵏ is
    representable (normal or subnormal), so the results are bit-identical."""
    dt, c = s.dtype, s.const(s.inst.rhs)
    if dt is None or not dt.is_float or c is None or isinstance(c, bool):
        return None
    np_t = {16: np.float16, 32: np.float32, 64: np.float64}[dt.bits]
    with np.errstate(all="ignore"):
        d = np_t(c)
        inv = np_t(1) / d
    if not (np.isfinite(d) and np.isfinite(inv) and d != 0 and inv != 0):
        return None
    mantissa, _ = math.frexp(abs(float(d)))
    if mantissa != 0.5 or abs(float(d)) == 1.0 or float(inv) * float(d) != 1.0:
        return None
    if not s.static(s.inst.rhs):
        return None
    rhs_t = s.tensor(s.inst.rhs)
    assert rhs_t is not None
    return s.build("multiply", s.inst.lhs, constant(float(inv), rhs_t))


def power_two(s: Site) -> Value | None:
    """x ^ 2 = x · x (pow is exact here: both are the correctly rounded x²)."""
    c, x = s.const(s.inst.rhs), s.inst.lhs
    if c is None or isinstance(c, bool) or c != 2 or not s.static(s.inst.rhs):
        return None
    return s.build("multiply", x, x) if s.same_type(x) else None


def power_minus_one(s: Site) -> Value | None:
    """Floats: x ^ (−1) = 1 / x (both the correctly rounded reciprocal, ±0 → ±∞)."""
    c, x, dt = s.const(s.inst.rhs), s.inst.lhs, s.dtype
    if dt is None or not dt.is_float or c is None or c != -1 or not s.static(s.inst.rhs):
        return None
    return s.build("divide", constant(1.0, scalar(dt)), x) if s.same_type(x) else None


def select_same(s: Site) -> Value | None:
    """select x, x by m = x, when the mask does not widen x."""
    x, mask = s.inst.lhs, s.inst.mask
    if x is not s.inst.rhs or not s.same_type(x):
        return None
    return x if _fits(s, mask, x) else None


def select_constant_mask(s: Site) -> Value | None:
    """select x, y by true = x; select x, y by false = y (when the others do not widen it)."""
    m = s.const(s.inst.mask)
    if m is None or not s.static(s.inst.mask):
        return None
    keep, drop = (s.inst.lhs, s.inst.rhs) if m else (s.inst.rhs, s.inst.lhs)
    if not s.same_type(keep) or not s.static(drop):
        return None
    return keep if _fits(s, s.inst.mask, keep) and _fits(s, drop, keep) else None


def _fits(s: Site, v: Value, into: Value) -> bool:
    """Broadcasting `v` with `into` gives `into`'s shape at run time too."""
    a, b = s.tensor(v), s.tensor(into)
    if a is None or b is None:
        return False
    if not a.shape:
        return True
    return a.rank == b.rank and all(
        da == 1 or (da is not None and da == db) for da, db in zip(a.shape, b.shape, strict=True))


def involution(opcode: str) -> RuleFn:
    """f(f(x)) = x for f = negate (wrapping integers too), not, transpose."""
    def apply(s: Site) -> Value | None:
        inner = s.defined_by(s.inst.x, opcode)
        if inner is None:
            return None
        if opcode == "transpose" and not _orders_cancel(inner, s.inst):
            return None
        x = inner.x
        return x if s.same_type(x) else None
    apply.__doc__ = f"{opcode}({opcode} x) = x"
    return apply


def _orders_cancel(first: Instruction, second: Instruction) -> bool:
    """Whether transposing by `first`'s order, then by `second`'s, is the identity."""
    t = first.type
    if not isinstance(t, TensorType):
        return False
    a, b = permutation(first, t.rank), permutation(second, t.rank)
    return [a[k] for k in b] == list(range(t.rank))


def transpose_identity(s: Site) -> Value | None:
    """transpose x along 0, 1, …, n−1 = x"""
    perm = s.inst.perm
    if perm is None or list(perm) != list(range(len(perm))):
        return None
    return s.inst.x if s.same_type(s.inst.x) else None


def transpose_low_rank(s: Site) -> Value | None:
    """transpose x = x for a scalar or a vector (reversing ≤ 1 dimension)."""
    t = s.tensor(s.inst.x)
    return s.inst.x if t is not None and t.rank <= 1 and s.same_type(s.inst.x) else None


def reverse_reverse(s: Site) -> Value | None:
    """reverse (reverse x along D) along D = x."""
    inner = s.defined_by(s.inst.x, "reverse")
    if inner is None or sorted(inner.dims) != sorted(s.inst.dims):
        return None
    return inner.x if s.same_type(inner.x) else None


def dot_of_transposes(s: Site) -> Value | None:
    """dot(aᵀ, bᵀ) = (dot(b, a))ᵀ for matrices — the same products and sums — done when
    both transposes have no other use, so one transpose replaces two."""
    ta = s.defined_by(s.inst.lhs, "transpose")
    tb = s.defined_by(s.inst.rhs, "transpose")
    if ta is None or tb is None or ta is tb or not (s.single_use(ta) and s.single_use(tb)):
        return None
    a, b = s.tensor(ta.x), s.tensor(tb.x)
    if a is None or b is None or a.rank != 2 or b.rank != 2 or \
            not (is_reversal(ta, 2) and is_reversal(tb, 2)):
        return None
    return s.build("transpose", s.build("dot", tb.x, ta.x))


def squeeze_of_pad(s: Site) -> Value | None:
    """squeezeShape (padShape x at k) at k = x."""
    inner = s.defined_by(s.inst.x, "padShape")
    if inner is None or inner.axis != s.inst.axis:
        return None
    return inner.x if s.same_type(inner.x) else None


def pad_of_squeeze(s: Site) -> Value | None:
    """padShape (squeezeShape x at k) at k = x, when x's dimension k is statically 1."""
    inner = s.defined_by(s.inst.x, "squeezeShape")
    if inner is None or inner.axis != s.inst.axis:
        return None
    return inner.x if s.same_type(inner.x) else None


def shape_cast_identity(s: Site) -> Value | None:
    """shapeCast x to shape(x) = x (a row-major reshape to the same shape)."""
    x, t = s.inst.x, s.tensor(s.inst.x)
    if t is None or tuple(s.inst.shape) != t.shape or t.shape.count(None) > 1:
        return None
    return x if s.same_type(x) else None


def shape_cast_chain(s: Site) -> Value | None:
    """shapeCast (reshape x) to S = shapeCast x to S: reshapes keep the row-major order.

    `reshape` is a shapeCast, padShape or squeezeShape with a static result, and S or x is
    static, so the element count the dropped cast checked at run time is still checked.
    """
    inner = s.defined_by(s.inst.x, "shapeCast", "padShape", "squeezeShape")
    if inner is None or not s.static(inner):
        return None
    x = inner.x
    if not (s.static(s.inst) or s.static(x)):
        return None
    return s.build("shapeCast", x, shape=tuple(s.inst.shape))


def bit_cast(s: Site) -> Value | None:
    """bitCast x to type(x) = x; bitCast (bitCast x to S) to T = bitCast x to T (the bytes
    are reinterpreted, never converted), for static tensors."""
    x = s.inst.x
    if s.same_type(x):
        return x
    inner = s.defined_by(x, "bitCast")
    if inner is None or not s.static(inner.x, inner, s.inst):
        return None
    return inner.x if s.same_type(inner.x) else s.build("bitCast", inner.x, target=s.inst.target)


def cast_to_same(s: Site) -> Value | None:
    """dataTypeCast x to dtype(x) = x."""
    return s.inst.x if s.same_type(s.inst.x) else None


def cast_round_trip(s: Site) -> Value | None:
    """dataTypeCast (dataTypeCast x to B) to dtype(x) = x when every value of x's type is
    one of B's (bf16 → f32 → bf16, i8 → i32 → i8): the widening kept each value."""
    inner = s.defined_by(s.inst.x, "dataTypeCast")
    if inner is None or not s.same_type(inner.x):
        return None
    source = s.module.resolve(inner.x.type)
    wide = s.module.resolve(inner.type)
    if isinstance(source, TensorType) and isinstance(wide, TensorType) and \
            source.dtype.can_widen_to(wide.dtype):
        return inner.x
    return None


# combinator → (check of its neutral element c for dtype) for reduce along size-1 dims
def _neutral(comb: Any, c: Scalar, dt: DataType) -> str | None:
    if isinstance(comb, BuiltinRef) and comb.name in ("min", "max"):
        name = comb.name
    elif isinstance(comb, str):
        name = comb
    else:
        return None  # a function combinator: its neutral element is unknown
    if name == "add":
        return _plus_zero(c, dt)
    if name == "multiply":
        return _equals(1)(c, dt)
    if name in ("and", "or"):
        return _equals(name == "and", kinds="bool")(c, dt)
    if dt.is_bool or isinstance(c, bool):
        return None
    if dt.is_float:
        return EXACT if float(c) == (math.inf if name == "min" else -math.inf) else None
    bound = 2 ** (dt.bits - 1)
    return EXACT if c == (bound - 1 if name == "min" else -bound) else None


def reduce_unit_dims(exactness: str) -> RuleFn:
    def apply(s: Site) -> Value | None:
        """reduce x by ⊕ init e along D = x without the dimensions D, when every dimension
        in D is 1 and e is ⊕'s neutral element: each result is e ⊕ x[…] = x[…]."""
        x, t, dt = s.inst.x, s.tensor(s.inst.x), s.dtype
        c = s.const(s.inst.init)
        if t is None or dt is None or c is None:
            return None
        dims = range(t.rank) if s.inst.dims is None else s.inst.dims
        if any(t.shape[d] != 1 for d in dims) or _neutral(s.inst.combinator, c, dt) != exactness:
            return None
        out: Value = x
        for d in sorted(dims, reverse=True):
            out = s.build("squeezeShape", out, axis=d)
        return out
    return apply


ELEMENTWISE_BINARY = (*NUMERIC_BINARY, *BOOLEAN_BINARY, *COMPARE)


def _unit_reshape_source(s: Site, v: Value) -> Value | None:
    """The scalar that `v` is reshaped from, when `v` only has dimensions of size 1."""
    t = s.tensor(v)
    if t is None or not t.rank or any(d != 1 for d in t.shape):
        return None
    while (d := s.defined_by(v, "padShape", "squeezeShape", "shapeCast")) is not None:
        v = d.x
        t = s.tensor(v)
        if t is None or any(dim != 1 for dim in t.shape):
            return None
        if not t.rank:
            return v
    return None


def _zero_broadcast_source(s: Site, v: Value, exactness: str) -> Value | None:
    """x, when `v` is `x + z` for a static splat zero z (the differentiation pass's way of
    broadcasting x to a shape)."""
    d = s.defined_by(v, "add")
    if d is None:
        return None
    for zero, x in ((d.lhs, d.rhs), (d.rhs, d.lhs)):
        c, zt = s.const(zero), s.tensor(zero)
        if c is None or zt is None or not zt.is_static:
            continue
        if _plus_zero(c, zt.dtype) == exactness:
            return x
    return None


def broadcast_operand(exactness: str) -> RuleFn:
    def apply(s: Site) -> Value | None:
        """f(x + 0, y) = f(x, y) and f(reshape(scalar x) to <1 x …>, y) = f(x, y) for an
        element-wise f, when broadcasting against y alone gives the same result type."""
        for side, other in (("lhs", "rhs"), ("rhs", "lhs")):
            v = s.inst.fields[side]
            src = _zero_broadcast_source(s, v, exactness)
            if src is None and exactness == EXACT:
                src = _unit_reshape_source(s, v)
            if src is None:
                continue
            new = s.build(s.inst.opcode, **{side: src, other: s.inst.fields[other]})
            if s.same_type(new):
                return new
            s.discard(new)
        return None
    return apply


def _constant_keys(keys: list[Any], literals: bool = True) -> list[int | FieldKey] | None:
    """The keys as constants; `literals`: also read literal indices (`3: i64`), which the
    type rule does not range-check."""
    out: list[int | FieldKey] = []
    for k in keys:
        if isinstance(k, int | FieldKey):
            out.append(k)
        elif literals and isinstance(k, LiteralValue) and isinstance(k.literal, ScalarLiteral):
            out.append(int(k.literal.value))
        else:
            return None
    return out


def _element(s: Site, agg: Value, key: int | FieldKey) -> Value | None:
    """Element `key` of a literal aggregate `agg`, or the row of a splat (None: unknown)."""
    lit = literal_of(agg)
    if lit is None:
        return None
    inner, t = lit.literal, s.module.resolve(lit.type)
    if isinstance(inner, AggregateLiteral) and inner.kind in ("tuple", "array", "tensor"):
        if isinstance(key, int) and 0 <= key < len(inner.elements):
            return inner.elements[key]
    elif isinstance(inner, AggregateLiteral) and inner.kind == "struct":
        if isinstance(key, FieldKey) and key.name in inner.keys:
            return inner.elements[inner.keys.index(key.name)]
    elif isinstance(t, TensorType) and t.rank and t.is_static and isinstance(key, int):
        splat = isinstance(inner, ScalarLiteral) or inner == ZERO
        if splat and 0 <= key < (t.shape[0] or 0):
            return LiteralValue(inner, t.with_shape(t.shape[1:]))
    return None


def extract_forward(s: Site) -> Value | None:
    """extract k, … from a literal aggregate = its element k (then the other keys);
    extract K from (insert e to a at K) = e, and = extract K from a for a disjoint K′."""
    keys = _constant_keys(list(s.inst.keys))
    if not keys:
        return None
    ins = s.defined_by(s.inst.value, "insert")
    if ins is not None:
        at = _constant_keys(list(ins.keys), literals=False)
        if at is None or _constant_keys(list(s.inst.keys), literals=False) is None:
            return None
        if at == keys:
            return ins.element
        n = min(len(at), len(keys))
        if at[:n] != keys[:n]:
            return s.build("extract", ins.destination, keys=list(s.inst.keys))
        return None
    elem = _element(s, s.inst.value, keys[0])
    if elem is None or len(keys) == 1:
        return elem
    return s.build("extract", elem, keys=list(s.inst.keys)[1:])


# ---------------------------------------------------------------- fast-math rules (inexact)


def exp_log(outer: str, inner: str) -> RuleFn:
    def apply(s: Site) -> Value | None:
        d = s.defined_by(s.inst.x, inner)
        return d.x if d is not None and s.same_type(d.x) else None
    apply.__doc__ = f"{outer}({inner} x) = x (not exact: rounding, and log of x < 0 is NaN)"
    return apply


def float_only(fn: RuleFn) -> RuleFn:
    def apply(s: Site) -> Value | None:
        dt = s.dtype
        return fn(s) if dt is not None and dt.is_float else None
    apply.__doc__ = fn.__doc__
    return apply


def self_subtract_float(s: Site) -> Value | None:
    """x − x = 0 (∞ − ∞ and NaN − NaN are NaN)."""
    if s.inst.lhs is not s.inst.rhs or not s.static(s.inst):
        return None
    return constant(0.0, s.inst.type)


def self_divide_float(s: Site) -> Value | None:
    """x / x = 1 (0/0, ∞/∞ and NaN/NaN are NaN)."""
    if s.inst.lhs is not s.inst.rhs or not s.static(s.inst):
        return None
    return constant(1.0, s.inst.type)


def multiply_zero_float(s: Site) -> Value | None:
    """x · 0 = 0 (∞·0 and NaN·0 are NaN, −1·0 is −0.0)."""
    for c_value in (s.inst.lhs, s.inst.rhs):
        c = s.const(c_value)
        if c is not None and c == 0 and s.static(s.inst.lhs, s.inst.rhs):
            return constant(0.0, s.inst.type)
    return None


def divide_reassociation(s: Site) -> Value | None:
    """(x/y)/(z/a) = (x·a)/(y·z); (x/y)/z = x/(y·z); x/(y/z) = (x·z)/y (rounding differs)."""
    num = s.defined_by(s.inst.lhs, "divide")
    den = s.defined_by(s.inst.rhs, "divide")
    num = num if num is not None and s.single_use(num) else None
    den = den if den is not None and s.single_use(den) else None
    if num is not None and den is not None:
        return s.build("divide", s.build("multiply", num.lhs, den.rhs),
                       s.build("multiply", num.rhs, den.lhs))
    if num is not None:
        return s.build("divide", num.lhs, s.build("multiply", num.rhs, s.inst.rhs))
    if den is not None:
        return s.build("divide", s.build("multiply", s.inst.lhs, den.rhs), den.lhs)
    return None


def exp_quotient(s: Site) -> Value | None:
    """eˣ / eʸ = e^(x−y); x / eʸ = x · e^(−y) (rounding and overflow differ)."""
    den = s.defined_by(s.inst.rhs, "exp")
    if den is None or not s.single_use(den):
        return None
    num = s.defined_by(s.inst.lhs, "exp")
    if num is not None and s.single_use(num):
        return s.build("exp", s.build("subtract", num.x, den.x))
    return s.build("multiply", s.inst.lhs, s.build("exp", s.build("negate", den.x)))


def exp_power(s: Site) -> Value | None:
    """(eˣ)ʸ = e^(x·y) (rounding and overflow differ)."""
    base = s.defined_by(s.inst.lhs, "exp")
    if base is None or not s.single_use(base):
        return None
    return s.build("exp", s.build("multiply", base.x, s.inst.rhs))


# ---------------------------------------------------------------- the table


def _rules() -> tuple[Rule, ...]:
    rules: list[Rule] = []
    for idt in IDENTITIES:
        rules += [_identity_rule(idt, EXACT), _identity_rule(idt, NSZ)]
    rules += [
        Rule("same-operands", ("and", "or", "min", "max"), same_operands),
        Rule("subtract-self-int", ("subtract",), subtract_self_int),
        Rule("divide-power-of-two", ("divide",), divide_power_of_two),
        Rule("power-two", ("power",), power_two),
        Rule("power-minus-one", ("power",), power_minus_one),
        Rule("select-same", ("select",), select_same),
        Rule("select-constant-mask", ("select",), select_constant_mask),
        Rule("double-negate", ("negate",), involution("negate")),
        Rule("double-not", ("not",), involution("not")),
        Rule("double-transpose", ("transpose",), involution("transpose")),
        Rule("transpose-vector", ("transpose",), transpose_low_rank),
        Rule("transpose-identity", ("transpose",), transpose_identity),
        Rule("double-reverse", ("reverse",), reverse_reverse),
        Rule("dot-of-transposes", ("dot",), dot_of_transposes),
        Rule("squeeze-of-pad", ("squeezeShape",), squeeze_of_pad),
        Rule("pad-of-squeeze", ("padShape",), pad_of_squeeze),
        Rule("shape-cast-identity", ("shapeCast",), shape_cast_identity),
        Rule("shape-cast-chain", ("shapeCast",), shape_cast_chain),
        Rule("bit-cast", ("bitCast",), bit_cast),
        Rule("cast-to-same-type", ("dataTypeCast",), cast_to_same),
        Rule("cast-round-trip", ("dataTypeCast",), cast_round_trip),
        Rule("reduce-unit-dims", ("reduce",), reduce_unit_dims(EXACT)),
        Rule("reduce-unit-dims", ("reduce",), reduce_unit_dims(NSZ), NSZ),
        Rule("extract-forward", ("extract",), extract_forward),
        Rule("broadcast-operand", ELEMENTWISE_BINARY, broadcast_operand(EXACT),
             operand_opcodes=frozenset({"add", "padShape", "squeezeShape", "shapeCast"})),
        Rule("broadcast-operand", ELEMENTWISE_BINARY, broadcast_operand(NSZ), NSZ,
             operand_opcodes=frozenset({"add"})),
        # fast math: true in real arithmetic only
        Rule("exp-of-log", ("exp",), exp_log("exp", "log"), FAST),
        Rule("log-of-exp", ("log",), exp_log("log", "exp"), FAST),
        Rule("subtract-self", ("subtract",), float_only(self_subtract_float), FAST),
        Rule("divide-self", ("divide",), float_only(self_divide_float), FAST),
        Rule("multiply-zero", ("multiply",), float_only(multiply_zero_float), FAST),
        Rule("divide-reassociation", ("divide",), float_only(divide_reassociation), FAST),
        Rule("exp-quotient", ("divide",), float_only(exp_quotient), FAST),
        Rule("exp-power", ("power",), float_only(exp_power), FAST),
    ]
    return tuple(rules)


RULES = _rules()


# ---------------------------------------------------------------- the pass


@dataclass
class AlgebraSimplification(FunctionPass):
    """Rewrite by the rule table until nothing applies.

    Options: `signed_zeros=true` also keeps the sign of zero results (drops the nsz
    rules); `fast_math=true` adds identities that hold only in real arithmetic.
    """

    name = "algebra-simplify"
    summary = "algebraic identities exact for floats (x+0, x·1, exp(log x), …)"

    fast_math: bool = False
    signed_zeros: bool = False

    def active_rules(self) -> dict[str, list[Rule]]:
        allowed = {EXACT} | ({FAST} if self.fast_math else set())
        if not self.signed_zeros:
            allowed.add(NSZ)
        table: dict[str, list[Rule]] = {}
        for rule in RULES:
            if rule.exactness in allowed:
                for op in rule.opcodes:
                    table.setdefault(op, []).append(rule)
        return table

    def run_on_function(self, fn: Function, ctx: PassContext) -> bool:
        module = fn.module
        if module is None:
            return False
        table = self.active_rules()
        changed = False
        for _ in range(MAX_SWEEPS):
            if not sweep(fn, module, table, ctx):
                break
            changed = True
        return changed


def sweep(fn: Function, module: Module, table: dict[str, list[Rule]], ctx: PassContext) -> int:
    """One pass over the function: simplify each instruction, then erase what died."""
    usedef = UseDefInfo(fn)
    mapping: dict[Value, Value] = {}
    for block in list(fn.blocks):
        for inst in list(block.instructions):
            if mapping:
                inst.replace_uses(mapping)
            rule, new = simplify(inst, module, usedef, table)
            if rule is not None and new is not None:
                mapping[inst] = resolve(mapping, new)
                ctx.stat(f"rewrites ({rule.name})")
    if not mapping:
        return 0
    for old in mapping:
        mapping[old] = resolve(mapping, mapping[old])
    for inst in fn.instructions():
        inst.replace_uses(mapping)
    rewritten = [i for i in mapping if isinstance(i, Instruction)]
    ctx.stat("instructions erased", erase_dead(fn, rewritten))
    return len(mapping)


def simplify(inst: Instruction, module: Module, usedef: UseDefInfo,
             table: dict[str, list[Rule]]) -> tuple[Rule | None, Value | None]:
    """The first rule that rewrites `inst` into a value of the same type, and that value."""
    rules = table.get(inst.opcode)
    if not rules:
        return None, None
    site = Site(inst, module, usedef, [])
    fields = inst.fields
    constant_operand: bool | None = None  # what the rules' prerequisites ask, found once
    operand_opcodes: set[str] | None = None
    for rule in rules:
        if rule.needs_constant:
            if constant_operand is None:
                constant_operand = (literal_of(fields.get("lhs")) is not None
                                    or literal_of(fields.get("rhs")) is not None)
            if not constant_operand:
                continue
        if rule.operand_opcodes is not None:
            if operand_opcodes is None:
                operand_opcodes = {v.opcode for v in (fields.get("lhs"), fields.get("rhs"))
                                   if isinstance(v, Instruction)}
            if rule.operand_opcodes.isdisjoint(operand_opcodes):
                continue
        try:
            new = rule.apply(site)
        except TypeRuleError:
            new = None
        if new is not None and new is not inst and site.same_type(new):
            return rule, new
        for created in reversed(site.created):  # roll back a rule that did not fit
            created.erase()
        site.created.clear()
    return None, None


def resolve(mapping: dict[Value, Value], v: Value) -> Value:
    """Follow replacements made earlier in the sweep to the value that stays."""
    for _ in range(len(mapping) + 1):
        if v not in mapping or isinstance(v, LiteralValue):
            return v
        v = mapping[v]
    return v


def erase_dead(fn: Function, dead: list[Instruction]) -> int:
    """Erase the rewritten instructions and the pure ones only they used."""
    usedef = UseDefInfo(fn)
    counts = {v: usedef.uses_count(v) for v in usedef.used_values()}
    work, erased = list(dead), set()
    while work:
        inst = work.pop()
        if inst.block is None or inst in erased or counts.get(inst, 0) or not is_pure(inst):
            continue
        erased.add(inst)
        for v in _instruction_operands(inst):
            counts[v] -= 1
            if counts[v] == 0:
                work.append(v)
    erase_instructions(erased)
    return len(erased)


def _instruction_operands(inst: Instruction) -> Iterator[Instruction]:
    for v in inst.operands:
        if isinstance(v, Instruction):
            yield v
