"""Transcendental functions as LLVM IR that vectorizes: exp, log, tanh, erf, erfc, pow.

A call to libm is opaque to LLVM's loop vectorizer, so a loop over `tanh` would run one
element at a time. These functions are straight-line IR instead — range reduction, a
polynomial, and bit manipulation, with `select` where a branch would be — and they are
`alwaysinline`, so each loop that uses them vectorizes (as XLA and SLEEF do it).

Error bounds against numpy (measured by the tests over the whole float range, subnormals,
±inf and NaN included; "ulp" of the exact result):

| function | float32 | float64 |
|---|---|---|
| exp  | 1 ulp | 1 ulp |
| log  | 2 ulp | 1 ulp |
| tanh | 2 ulp | 2 ulp |
| erf  | 2 ulp | 2 ulp |
| erfc | 6 ulp | 6 ulp |
| pow  | 1 ulp (computed in double precision) | 4·(1 + abs(y·ln x)) ulp |

(float64 is measured against numpy's own functions, themselves within an ulp or so.)

- exp: x = n·ln 2 + r with |r| ≤ ln 2 / 2 (Cody–Waite, two-part ln 2), eʳ by its Taylor
  polynomial (degree 7 / 13), 2ⁿ applied in two halves so that subnormal results round once.
- log: x = 2ᵉ·m with m ∈ [√½, √2) (subnormals scaled first), log m = 2·atanh(s),
  s = (m−1)/(m+1), by its series in s² (5 / 11 terms).
- tanh: |x| < 0.55: x·P(x²); else sign(x)·(1 − 2/(e^{2|x|} + 1)).
- erf and erfc: |x| ≤ 1: x·P(x²); beyond, erfc(x) = e^{−x²}·h(x) with h fitted on pieces
  (and x·h(x) in 1/x² far out), e^{−x²} computed from x² split exactly into two parts.
- pow: e^{y·log |x|} (float32 in double precision) with IEEE's special cases and the sign
  of odd integer powers.

Coefficients are Chebyshev fits in 50-digit arithmetic (tools/fit_mathlib.py), each in the
variable t ∈ [−1, 1] of its interval. Functions without an approximation here (sin, cos,
tan, asin, acos, atan, sinh, lgamma) call the C library and do not vectorize; `digamma`
follows the interpreter's recurrence and series.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from llvmlite import ir as ll

from .bfloat import narrow
from .emit import declare, internal_function
from .layout import I32, I64

# name -> (interval low, interval high, coefficients from the highest degree, in t ∈ [-1, 1])
FITS: dict[str, tuple[float, float, tuple[float, ...]]] = {
    "tanh_small.f64": (0.0, 0.3025, (3.18507089955315e-13, -5.514439285359057e-12, 9.459777528378825e-11, -1.6378087674591469e-09, 2.8356914750053832e-08, -4.909556077709097e-07, 8.50027488849304e-06, -0.00014719356390129645, 0.002552253826878785, -0.04483394002786297, 0.9524575912557064,)),  # noqa: E501
    "tanh_small.f32": (0.0, 0.3025, (8.535839652400204e-06, -0.0001478093121342029, 0.002552244928266252, -0.0448337859623124, 0.9524575912557064,)),  # noqa: E501
    "erf_small.f64": (0.0, 1.0, (1.4543887079465116e-14, -3.8078824063194953e-13, 9.167619596865806e-12, -2.035228405815769e-10, 4.115800583208149e-09, -7.511569286591727e-08, 1.223382738359897e-06, -1.7537169441124866e-05, 0.00021751715604159932, -0.0022854855611441132, 0.019852496688983708, -0.1405360890227171, 0.9654687386698673,)),  # noqa: E501
    "erf_small.f32": (0.0, 1.0, (1.2306054785446075e-06, -1.7669068026125697e-05, 0.00021751354165582579, -0.0022854195448728494, 0.019852497140907616, -0.14053609727754268, 0.9654687386698673,)),  # noqa: E501
    "erfc_1_2.f64": (1.0, 2.0, (-2.653391343981901e-14, 2.0291817549924027e-13, -1.3992758101971656e-12, 1.0198183507810793e-11, -7.276757137420257e-11, 5.04660275957676e-10, -3.405755489104501e-09, 2.232841289840529e-08, -1.4191195815474282e-07, 8.723044760263366e-07, -5.171328643696019e-06, 2.9470857452441112e-05, -0.0001608111733745461, 0.0008360838095667819, -0.004116363162445329, 0.019037759963869347, -0.08181145886628004, 0.3215854164543175,)),  # noqa: E501
    "erfc_2_3.5.f64": (2.0, 3.5, (-5.385460413068287e-12, 3.2417475610132607e-11, -1.7015215137129228e-10, 9.830016377967729e-10, -5.602221787184144e-09, 3.108847874611232e-08, -1.6874296710210136e-07, 8.950228299200691e-07, -4.631705362630414e-06, 2.3347542710787384e-05, -0.0001144271539438872, 0.0005440864558202282, -0.0025035488002965733, 0.011114208555372547, -0.04742822817047613, 0.19366209627906866,)),  # noqa: E501
    "erfc_3.5_6.f64": (3.5, 6.0, (2.428731220603442e-13, -1.2196993078585577e-12, 4.909394868246539e-12, -2.4030969532872346e-11, 1.1864420691597732e-10, -5.68417156906027e-10, 2.6891792576672485e-09, -1.2581394720588665e-08, 5.8137222687597515e-08, -2.652091097325896e-07, 1.193833166581947e-06, -5.300367898784373e-06, 2.3197611048019317e-05, -0.00010002374614205948, 0.0004246296485367147, -0.0017736306582609063, 0.007283322451519282, -0.029379310747703943, 0.11630270721024731,)),  # noqa: E501
    "erfc_6_27.f64": (0.0013717421124828531, 0.027777777777777776, (-1.4861875691272763e-15, 1.3924849012887439e-14, -1.369083258898937e-13, 1.5298483143387272e-12, -1.8971705252184798e-11, 2.654879042678952e-10, -4.292664384850856e-09, 8.287606237859501e-08, -2.0081529600408564e-06, 6.64412838553075e-05, -0.0035699920043331104, 0.5601648868453484,)),  # noqa: E501
    "erfc_1_2.5.f32": (1.0, 2.5, (1.2334222839153408e-05, -5.200035697370019e-05, 0.0001839050055825453, -0.0007121763204173703, 0.002659473814845529, -0.009392258175429243, 0.031367019746247136, -0.09823215957447402, 0.2849722347374364,)),  # noqa: E501
    "erfc_2.5_10.f32": (0.01, 0.16, (9.07824465397742e-08, -3.4054996429561687e-07, 1.1807525876518211e-06, -5.457121437775669e-06, 2.8798323793551346e-05, -0.00017886864478525147, 0.0014217560788068306, -0.017012342214444576, 0.5427610928237309,)),  # noqa: E501
}

# per float type: (mantissa bits, exponent bias, integer type, exp clamp low/high,
# ln 2 high/low parts, Taylor degree of exp, atanh terms of log)
FORMATS = {
    "f32": (23, 127, I32, -104.0, 89.0, 0.693359375, -2.12194440e-4, 7, 5),
    "f64": (52, 1023, I64, -746.0, 710.0, 6.93147180369123816490e-01,
            1.90821492927058770002e-10, 13, 11),
}
LIBM = {"sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "lgamma"}
OWN = {"exp", "log", "tanh", "erf", "erfc", "pow", "digamma"}


def suffix(t: ll.Type) -> str:
    return "f64" if isinstance(t, ll.DoubleType) else "f32"


class MathLib:
    """The math functions of one LLVM module, defined on first use."""

    def __init__(self, module: ll.Module) -> None:
        self.module = module
        self.defined: dict[str, ll.Function] = {}

    def call(self, b: ll.IRBuilder, name: str, args: Sequence[ll.Value]) -> ll.Value:
        """`name(args…)` for float or double arguments; `to_bf16` rounds an f32 to the
        nearest bf16's bits (a target with a conversion instruction overrides it)."""
        t = args[0].type
        if name == "to_bf16":
            return narrow(b, args[0])
        if name in LIBM:
            libname = name if isinstance(t, ll.DoubleType) else name + "f"
            fn = declare(self.module, libname, t, [t] * len(args))
            return b.call(fn, list(args))
        key = f"dlvm.math.{name}.{suffix(t)}"
        fn = self.defined.get(key)
        if fn is None:
            fn, fb = internal_function(self.module, key, t, [t] * len(args), inline=True)
            self.defined[key] = fn
            result = getattr(self, "_" + name)(fb, *fn.args)
            fb.ret(result)
        return b.call(fn, list(args))

    # ------------------------------------------------------------ primitives

    def intrinsic(self, b: ll.IRBuilder, name: str, *args: ll.Value) -> ll.Value:
        t = args[0].type
        fn = declare(self.module, f"llvm.{name}.{suffix(t)}", t, [t] * len(args))
        return b.call(fn, list(args))

    def fma(self, b: ll.IRBuilder, x: ll.Value, y: ll.Value, z: ll.Value) -> ll.Value:
        return self.intrinsic(b, "fmuladd", x, y, z)

    @staticmethod
    def const(t: ll.Type, v: float) -> ll.Constant:
        return ll.Constant(t, v)

    def horner(self, b: ll.IRBuilder, coefficients: Sequence[float], x: ll.Value) -> ll.Value:
        t = x.type
        acc: ll.Value = self.const(t, coefficients[0])
        for c in coefficients[1:]:
            acc = self.fma(b, acc, x, self.const(t, c))
        return acc

    def fitted(self, b: ll.IRBuilder, name: str, v: ll.Value) -> ll.Value:
        """The fit `name` at `v` (mapped to t ∈ [-1, 1] on the fit's interval)."""
        lo, hi, coefficients = FITS[f"{name}.{suffix(v.type)}"]
        t = self.fma(b, v, self.const(v.type, 2 / (hi - lo)),
                     self.const(v.type, -(hi + lo) / (hi - lo)))
        return self.horner(b, coefficients, t)

    def select_nan(self, b: ll.IRBuilder, x: ll.Value, result: ll.Value) -> ll.Value:
        """NaN in, NaN out (range reductions can turn it into something else)."""
        return b.select(b.fcmp_unordered("uno", x, x), x, result)

    def pow2(self, b: ll.IRBuilder, n: ll.Value, t: ll.Type) -> ll.Value:
        """2ⁿ for an integer n in the normal exponent range."""
        mant, bias, it, *_ = FORMATS[suffix(t)]
        bits = b.shl(b.add(n, ll.Constant(it, bias)), ll.Constant(it, mant))
        return b.bitcast(bits, t)

    def split_square(self, b: ll.IRBuilder, x: ll.Value) -> tuple[ll.Value, ll.Value]:
        """x² as hi + lo exactly (hi = fl(x²), lo its rounding error)."""
        hi = b.fmul(x, x)
        fma = declare(self.module, f"llvm.fma.{suffix(x.type)}", x.type, [x.type] * 3)
        lo = b.call(fma, [x, x, b.fneg(hi)])
        return hi, lo

    def exp_neg_square(self, b: ll.IRBuilder, x: ll.Value) -> ll.Value:
        """e^(−x²), accurate although x² is not exact: e^(−hi)·(1 − lo)."""
        hi, lo = self.split_square(b, x)
        finite = b.fcmp_ordered("!=", hi, self.const(x.type, math.inf))
        lo = b.select(finite, lo, self.const(x.type, 0.0))  # inf − inf would be NaN
        e = self.call(b, "exp", [b.fneg(hi)])
        return b.fmul(e, b.fsub(self.const(x.type, 1.0), lo))

    # ------------------------------------------------------------ functions

    def _maximum(self, b: ll.IRBuilder, x: ll.Value, y: ll.Value) -> ll.Value:
        # x > y ? x : y, then x where x is NaN: NaN if either is (one max and one blend on
        # x86, where `llvm.maximum` also orders −0 below +0 in about ten instructions; DLVM
        # leaves the choice between equal zeros open, as numpy's loops do)
        return b.select(b.fcmp_unordered("uno", x, x), x,
                        b.select(b.fcmp_ordered(">", x, y), x, y))

    def _minimum(self, b: ll.IRBuilder, x: ll.Value, y: ll.Value) -> ll.Value:
        # x < y ? x : y, then x where x is NaN
        return b.select(b.fcmp_unordered("uno", x, x), x,
                        b.select(b.fcmp_ordered("<", x, y), x, y))

    def _exp(self, b: ll.IRBuilder, x: ll.Value) -> ll.Value:
        t = x.type
        _mant, _bias, it, lo, hi, ln2_hi, ln2_lo, degree, _ = FORMATS[suffix(t)]
        c = self.const
        xc = self.intrinsic(b, "maxnum", self.intrinsic(b, "minnum", x, c(t, hi)), c(t, lo))
        n = self.intrinsic(b, "rint", b.fmul(xc, c(t, 1 / math.log(2))))
        r = self.fma(b, b.fneg(n), c(t, ln2_hi), xc)
        r = self.fma(b, b.fneg(n), c(t, ln2_lo), r)
        p = self.horner(b, [1 / math.factorial(k) for k in range(degree, -1, -1)], r)
        ni = b.fptosi(n, it)
        n1 = b.ashr(ni, ll.Constant(it, 1))
        n2 = b.sub(ni, n1)
        result = b.fmul(b.fmul(p, self.pow2(b, n1, t)), self.pow2(b, n2, t))
        return self.select_nan(b, x, result)

    def _log(self, b: ll.IRBuilder, x: ll.Value) -> ll.Value:
        t = x.type
        mant, bias, it, *_rest = FORMATS[suffix(t)]
        terms = FORMATS[suffix(t)][8]
        c = self.const
        tiny = b.fcmp_ordered("<", x, c(t, 2.0 ** (1 - bias)))
        xs = b.select(tiny, b.fmul(x, c(t, 2.0 ** mant)), x)
        bits = b.bitcast(xs, it)
        e = b.sub(b.lshr(bits, ll.Constant(it, mant)), ll.Constant(it, bias))
        e = b.sub(e, b.select(tiny, ll.Constant(it, mant), ll.Constant(it, 0)))
        mbits = b.or_(b.and_(bits, ll.Constant(it, (1 << mant) - 1)),
                      ll.Constant(it, bias << mant))
        m = b.bitcast(mbits, t)  # in [1, 2)
        big = b.fcmp_ordered(">", m, c(t, math.sqrt(2.0)))
        m = b.select(big, b.fmul(m, c(t, 0.5)), m)
        e = b.add(e, b.zext(big, it))
        s = b.fdiv(b.fsub(m, c(t, 1.0)), b.fadd(m, c(t, 1.0)))
        z = b.fmul(s, s)
        series = self.horner(b, [1 / (2 * k + 1) for k in range(terms, 0, -1)], z)
        two_s = b.fmul(s, c(t, 2.0))
        log_m = self.fma(b, b.fmul(two_s, z), series, two_s)
        ef = b.sitofp(e, t)
        _, _, _, _, _, ln2_hi, ln2_lo, _, _ = FORMATS[suffix(t)]
        result = self.fma(b, ef, c(t, ln2_hi), self.fma(b, ef, c(t, ln2_lo), log_m))
        inf = c(t, math.inf)
        result = b.select(b.fcmp_ordered("==", x, inf), inf, result)
        result = b.select(b.fcmp_ordered("==", x, c(t, 0.0)), c(t, -math.inf), result)
        result = b.select(b.fcmp_ordered("<", x, c(t, 0.0)), c(t, math.nan), result)
        return self.select_nan(b, x, result)

    def _tanh(self, b: ll.IRBuilder, x: ll.Value) -> ll.Value:
        t = x.type
        c = self.const
        ax = self.intrinsic(b, "fabs", x)
        small = b.fmul(x, self.fitted(b, "tanh_small", b.fmul(x, x)))
        e = self.call(b, "exp", [b.fmul(ax, c(t, 2.0))])
        big = b.fsub(c(t, 1.0), b.fdiv(c(t, 2.0), b.fadd(e, c(t, 1.0))))
        big = self.intrinsic(b, "copysign", big, x)
        return b.select(b.fcmp_ordered("<", ax, c(t, 0.55)), small, big)

    def erfc_positive(self, b: ll.IRBuilder, ax: ll.Value) -> ll.Value:
        """erfc(|x|) for |x| ≥ 1: e^(−x²)·h(|x|), h by pieces."""
        t = ax.type
        c = self.const
        if suffix(t) == "f64":
            pieces = [("erfc_1_2", 2.0), ("erfc_2_3.5", 3.5), ("erfc_3.5_6", 6.0)]
        else:
            pieces = [("erfc_1_2.5", 2.5)]
        inv2 = b.fdiv(c(t, 1.0), b.fmul(ax, ax))
        h = b.fdiv(self.fitted(b, "erfc_6_27" if suffix(t) == "f64" else "erfc_2.5_10", inv2),
                   ax)
        for name, upper in reversed(pieces):
            h = b.select(b.fcmp_ordered("<", ax, c(t, upper)), self.fitted(b, name, ax), h)
        tail = b.fmul(self.exp_neg_square(b, ax), h)
        return b.select(b.fcmp_ordered("==", ax, c(t, math.inf)), c(t, 0.0), tail)

    def _erf(self, b: ll.IRBuilder, x: ll.Value) -> ll.Value:
        t = x.type
        c = self.const
        ax = self.intrinsic(b, "fabs", x)
        small = b.fmul(x, self.fitted(b, "erf_small", b.fmul(x, x)))
        big = b.fsub(c(t, 1.0), self.erfc_positive(b, ax))
        big = self.intrinsic(b, "copysign", big, x)
        limit = 6.0 if suffix(t) == "f64" else 4.0
        big = b.select(b.fcmp_ordered(">", ax, c(t, limit)), self.intrinsic(
            b, "copysign", c(t, 1.0), x), big)
        return self.select_nan(b, x, b.select(b.fcmp_ordered("<=", ax, c(t, 1.0)), small, big))

    def _erfc(self, b: ll.IRBuilder, x: ll.Value) -> ll.Value:
        t = x.type
        c = self.const
        ax = self.intrinsic(b, "fabs", x)
        small = b.fsub(c(t, 1.0), b.fmul(x, self.fitted(b, "erf_small", b.fmul(x, x))))
        tail = self.erfc_positive(b, ax)  # e^(−x²) takes it to 0 beyond the range
        big = b.select(b.fcmp_ordered("<", x, c(t, 0.0)), b.fsub(c(t, 2.0), tail), tail)
        return self.select_nan(b, x, b.select(b.fcmp_ordered("<=", ax, c(t, 1.0)), small, big))

    def _pow(self, b: ll.IRBuilder, x: ll.Value, y: ll.Value) -> ll.Value:
        t = x.type
        c = self.const
        ax = self.intrinsic(b, "fabs", x)
        if suffix(t) == "f32":  # in double precision, rounded once: within an ulp
            wide = [b.fpext(v, ll.DoubleType()) for v in (ax, y)]
            r = b.fptrunc(self.call(b, "exp", [b.fmul(wide[1], self.call(b, "log", [wide[0]]))]),
                          t)
        else:
            r = self.call(b, "exp", [b.fmul(y, self.call(b, "log", [ax]))])
        # a negative base: defined for integer exponents, negative for odd ones
        y_int = b.fcmp_ordered("==", self.intrinsic(b, "trunc", y), y)
        half = b.fmul(y, c(t, 0.5))
        y_odd = b.and_(y_int, b.fcmp_ordered("!=", self.intrinsic(b, "trunc", half), half))
        # a negative base: odd integer powers are negative; a finite one needs an integer y
        negative = b.fcmp_ordered("<", x, c(t, 0.0))
        finite = b.fcmp_ordered("!=", x, c(t, -math.inf))
        r = b.select(b.and_(negative, y_odd), b.fneg(r), r)
        r = b.select(b.and_(b.and_(negative, finite), b.not_(y_int)), c(t, math.nan), r)
        # zero base: 0 for y > 0, inf for y < 0, keeping the sign for odd y
        zero = b.fcmp_ordered("==", x, c(t, 0.0))
        z = b.select(b.fcmp_ordered("<", y, c(t, 0.0)), c(t, math.inf), c(t, 0.0))
        z = b.select(y_odd, self.intrinsic(b, "copysign", z, x), z)
        r = b.select(zero, z, r)
        # NaN exponents give NaN, except for the exact cases pow(x, 0) = pow(1, y) = 1 and
        # pow(−1, ±inf) = 1
        r = b.select(b.fcmp_unordered("uno", y, y), c(t, math.nan), r)
        ones = b.and_(b.fcmp_ordered("==", ax, c(t, 1.0)),
                      b.fcmp_ordered("==", self.intrinsic(b, "fabs", y), c(t, math.inf)))
        one = b.or_(b.or_(b.fcmp_ordered("==", y, c(t, 0.0)), b.fcmp_ordered("==", x, c(t, 1.0))),
                    ones)
        return b.select(one, c(t, 1.0), r)

    def _digamma(self, b: ll.IRBuilder, x: ll.Value) -> ll.Value:
        """ψ(x) as the interpreter computes it: ψ(x) = ψ(x+1) − 1/x up to 10, then the
        asymptotic series; reflection below ½."""
        t = x.type
        c = self.const
        reflect = b.fcmp_ordered("<", x, c(t, 0.5))
        y0 = b.select(reflect, b.fsub(c(t, 1.0), x), x)
        pre = b.block
        head = b.append_basic_block("head")
        body = b.append_basic_block("body")
        done = b.append_basic_block("done")
        b.branch(head)
        b.position_at_end(head)
        y = b.phi(t)
        acc = b.phi(t)
        y.add_incoming(y0, pre)
        acc.add_incoming(c(t, 0.0), pre)
        b.cbranch(b.fcmp_ordered("<", y, c(t, 10.0)), body, done)
        b.position_at_end(body)
        acc.add_incoming(b.fsub(acc, b.fdiv(c(t, 1.0), y)), body)
        y.add_incoming(b.fadd(y, c(t, 1.0)), body)
        b.branch(head)
        b.position_at_end(done)
        inv = b.fdiv(c(t, 1.0), y)
        inv2 = b.fmul(inv, inv)
        poly = self.horner(b, [-1 / 132, 1 / 240], inv2)
        poly = self.fma(b, inv2, b.fneg(poly), c(t, 1 / 252))
        poly = self.fma(b, inv2, b.fneg(poly), c(t, 1 / 120))
        poly = self.fma(b, inv2, b.fneg(poly), c(t, 1 / 12))
        log_y = self.call(b, "log", [y])
        series = b.fsub(b.fsub(log_y, b.fmul(c(t, 0.5), inv)), b.fmul(inv2, poly))
        result = b.fadd(acc, series)
        tan = self.call(b, "tan", [b.fmul(c(t, math.pi), x)])
        reflected = b.fsub(result, b.fdiv(c(t, math.pi), tan))
        return b.select(reflect, reflected, result)


__all__ = ["FITS", "LIBM", "OWN", "MathLib"]
