"""Fit the polynomial coefficients of `dlvm.llvm.codegen.mathlib`
(run: python tools/fit_mathlib.py).

Each approximation is a Chebyshev interpolant, computed in 50-digit arithmetic with mpmath
(near-minimax: within a small factor of the best polynomial of its degree), in the variable
t ∈ [-1, 1] that maps its interval linearly, so that rounding the coefficients to float64
costs nothing. The output is pasted into mathlib.py's FITS; the tests measure the error of
the code that evaluates them against numpy.
"""

from __future__ import annotations

from collections.abc import Callable

import mpmath as mp

mp.mp.dps = 50


def tanh_over_x(u: mp.mpf) -> mp.mpf:
    x = mp.sqrt(u)
    return mp.tanh(x) / x if u else mp.mpf(1)


def erf_over_x(u: mp.mpf) -> mp.mpf:
    x = mp.sqrt(u)
    return mp.erf(x) / x if u else 2 / mp.sqrt(mp.pi)


def erfc_scaled(x: mp.mpf) -> mp.mpf:
    """erfc(x)·exp(x²): smooth, between 1 and 1/(x√π)."""
    return mp.erfc(x) * mp.exp(x * x)


def erfc_asymptotic(s: mp.mpf) -> mp.mpf:
    """x·erfc(x)·exp(x²) in s = 1/x²: tends to 1/√π as x grows."""
    x = 1 / mp.sqrt(s)
    return x * erfc_scaled(x)


# name -> (function, (a, b), number of coefficients); the polynomial is in t = (2v - a - b)/(b - a)
FITS: dict[str, tuple[Callable[[mp.mpf], mp.mpf], tuple[object, object], int]] = {
    "tanh_small.f64": (tanh_over_x, (0, "0.3025"), 11),          # |x| ≤ 0.55, v = x²
    "tanh_small.f32": (tanh_over_x, (0, "0.3025"), 5),
    "erf_small.f64": (erf_over_x, (0, 1), 13),                   # |x| ≤ 1, v = x²
    "erf_small.f32": (erf_over_x, (0, 1), 7),
    "erfc_1_2.f64": (erfc_scaled, (1, 2), 18),                   # v = x
    "erfc_2_3.5.f64": (erfc_scaled, (2, "3.5"), 16),
    "erfc_3.5_6.f64": (erfc_scaled, ("3.5", 6), 19),
    "erfc_6_27.f64": (erfc_asymptotic, (1 / mp.mpf(27) ** 2, 1 / mp.mpf(36)), 12),  # v = 1/x²
    "erfc_1_2.5.f32": (erfc_scaled, (1, "2.5"), 9),
    "erfc_2.5_10.f32": (erfc_asymptotic, ("0.01", "0.16"), 9),
}


def main() -> None:
    for name, (f, (a, b), n) in FITS.items():
        lo, hi = mp.mpf(a), mp.mpf(b)

        def in_t(t: mp.mpf, f: Callable[[mp.mpf], mp.mpf] = f, lo: mp.mpf = lo,
                 hi: mp.mpf = hi) -> mp.mpf:
            return f((t * (hi - lo) + hi + lo) / 2)

        poly, err = mp.chebyfit(in_t, [-1, 1], n, error=True)
        scale = mp.mpf(1) if name.startswith("erfc_6") or name.startswith("erfc_2.5") else \
            abs(in_t(mp.mpf(-1)))
        coefficients = ", ".join(repr(float(c)) for c in poly)
        print(f'    "{name}": ({float(lo)!r}, {float(hi)!r}, ({coefficients},)),  '
              f'# max error {mp.nstr(err / scale, 3)} (relative)')


if __name__ == "__main__":
    main()
