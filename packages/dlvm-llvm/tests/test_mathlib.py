"""The vectorizing math functions keep their documented error bounds over the whole float
range — subnormals, ±inf and NaN included — against numpy and Python's `math`."""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from functools import cache

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir as ll

from dlvm.llvm.codegen import jit
from dlvm.llvm.codegen.emit import for_range, gep, i64
from dlvm.llvm.codegen.layout import F32, F64, I64, PTR
from dlvm.llvm.codegen.mathlib import MathLib

# (function, float32 bound, float64 bound), in units in the last place of the exact result
BOUNDS = {
    "exp": (1, 1),
    "log": (2, 1),
    "tanh": (2, 2),
    "erf": (2, 2),
    "erfc": (6, 6),
    "pow": (1, 4),  # float64: times 1 + |y·log x|
}
REFERENCE: dict[str, Callable[..., np.ndarray]] = {
    "exp": np.exp,
    "log": np.log,
    "tanh": np.tanh,
    "erf": np.vectorize(math.erf, otypes=[np.float64]),
    "erfc": np.vectorize(math.erfc, otypes=[np.float64]),
    "pow": np.power,
}


@cache
def kernel(name: str, double: bool, arity: int) -> tuple[Callable[..., None], str, object]:
    """out[i] = name(x[i], …) as a compiled, optimized loop; and the optimized IR."""
    t = F64 if double else F32
    m = ll.Module(name="mathtest")
    fn = ll.Function(m, ll.FunctionType(ll.VoidType(), [PTR] * (arity + 1) + [I64]), "k")
    for a in fn.args[:-1]:
        a.add_attribute("noalias")
    b = ll.IRBuilder(fn.append_basic_block())
    with for_range(b, i64(0), fn.args[-1]) as i:
        xs = [b.load(gep(b, t, fn.args[k], i), typ=t) for k in range(arity)]
        b.store(lib_call(m, b, name, xs), gep(b, t, fn.args[arity], i))
    b.ret_void()
    text = jit.emit(str(m), "llvm")
    engine = jit.Engine()
    engine.load(jit.emit(str(m), "obj"))  # type: ignore[arg-type]
    cfunc = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (arity + 1)), ctypes.c_int64)(
        engine.address("k"))
    return cfunc, str(text), engine


_libs: dict[int, MathLib] = {}


def lib_call(m: ll.Module, b: ll.IRBuilder, name: str, xs: list[ll.Value]) -> ll.Value:
    lib = _libs.setdefault(id(m), MathLib(m))
    return lib.call(b, name, xs)


def run(name: str, dtype: type, *xs: np.ndarray) -> np.ndarray:
    f, _, _ = kernel(name, dtype == np.float64, len(xs))
    args = [np.ascontiguousarray(x, dtype) for x in xs]
    out = np.empty_like(args[0])
    f(*[a.ctypes.data for a in args], out.ctypes.data, out.size)
    return out


def inputs(dtype: type, n: int = 100_000) -> np.ndarray:
    """Special values, and magnitudes spread over the whole range (log-uniform), both signs."""
    fi = np.finfo(dtype)
    rng = np.random.default_rng(0)
    special = [0.0, -0.0, np.inf, -np.inf, np.nan, fi.tiny, fi.tiny / 4, fi.smallest_subnormal,
               fi.max, -fi.max, fi.eps, 1.0, -1.0, 0.5, 2.0, 0.25, -0.25]
    wide = np.exp(rng.uniform(np.log(float(fi.smallest_subnormal)), np.log(float(fi.max)), n))
    wide = (wide * rng.choice([-1, 1], n)).astype(dtype)
    near = rng.uniform(-30, 30, n).astype(dtype)
    small = rng.uniform(-1, 1, n).astype(dtype)
    return np.concatenate([np.array(special, dtype), wide, near, small])


def ulp_error(got: np.ndarray, want: np.ndarray, dtype: type) -> np.ndarray:
    """|got − want| in units in the last place of `want` (as a value of `dtype`)."""
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    exact = want.astype(dtype)
    spacing = np.spacing(np.abs(exact).astype(dtype)).astype(np.float64)
    with np.errstate(all="ignore"):
        err = np.abs(got.astype(np.float64) - want) / spacing
    return np.where(same, 0.0, err)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", [n for n in BOUNDS if n != "pow"])
def test_unary_functions_keep_their_bounds(name: str, dtype: type) -> None:
    x = inputs(dtype)
    got = run(name, dtype, x)
    with np.errstate(all="ignore"):
        want = REFERENCE[name](x.astype(np.float64))
        rounded = want.astype(dtype)
    assert np.array_equal(np.isnan(got), np.isnan(rounded)), "NaN where numpy has not"
    finite = np.isfinite(rounded)
    assert np.array_equal(got[~finite], rounded[~finite], equal_nan=True), "infinities differ"
    err = ulp_error(got[finite], want[finite], dtype)
    bound = BOUNDS[name][dtype == np.float64]
    worst = int(np.argmax(err))
    assert err.max() <= bound, (f"{name} {np.dtype(dtype)}: {err.max():.3g} ulp at "
                                f"x = {x[finite][worst]!r}")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_pow_keeps_its_bound_and_ieee_special_cases(dtype: type) -> None:
    rng = np.random.default_rng(1)
    x = np.abs(inputs(dtype)) ** 0.01 * np.sign(inputs(dtype))
    y = rng.uniform(-20, 20, x.size).astype(dtype)
    y[::7] = np.round(y[::7])  # integer exponents, for negative bases
    got = run("pow", dtype, x, y)
    with np.errstate(all="ignore"):
        want = np.power(x.astype(np.float64), y.astype(np.float64))
        rounded = want.astype(dtype)
    assert np.array_equal(np.isnan(got), np.isnan(rounded))
    finite = np.isfinite(rounded)
    assert np.array_equal(got[~finite], rounded[~finite], equal_nan=True)
    err = ulp_error(got[finite], want[finite], dtype)
    bound = BOUNDS["pow"][dtype == np.float64]
    if dtype == np.float64:
        with np.errstate(all="ignore"):
            scale = 1 + np.abs(y[finite] * np.log(np.abs(x[finite].astype(np.float64))))
        err = err / np.where(np.isfinite(scale), scale, 1)
    assert err.max() <= bound
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.0, -2.0], dtype)
    xs, ys = np.meshgrid(special, special)
    with np.errstate(all="ignore"):
        want = np.power(xs, ys)
    # exact: IEEE 754 (C99 Annex F) specifies pow at zeros, ones, infinities and NaN
    np.testing.assert_array_equal(run("pow", dtype, xs.ravel(), ys.ravel()), want.ravel())


@pytest.mark.parametrize("name", list(BOUNDS))
def test_loops_over_them_vectorize(name: str) -> None:
    _, text, _ = kernel(name, False, 2 if name == "pow" else 1)
    assert " x float>" in text, f"a loop over {name} did not vectorize"
    assert "call float @" not in text.replace("@llvm.", ""), "a library call is left"


def test_the_host_is_known() -> None:
    assert llvm.get_host_cpu_name()
