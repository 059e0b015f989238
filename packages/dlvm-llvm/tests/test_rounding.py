"""Rounding doubles to halves in generated code (`dlvm.llvm.codegen.rounding.rounded`): once, to
nearest with ties to even, as numpy rounds — without the library call the JIT lacks."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from llvmlite import ir as ll

import dlvm.ir as ir
from dlvm.llvm.codegen import jit
from dlvm.llvm.codegen.rounding import rounded


@pytest.fixture(scope="module")
def to_half() -> ctypes._CFuncPtr:
    """`rounded` compiled alone: double → the half's 16 bits."""
    module = ll.Module(name="to_half")
    fn = ll.Function(module, ll.FunctionType(ll.IntType(16), [ll.DoubleType()]), "to_half")
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    b.ret(b.bitcast(rounded(b, fn.args[0], ll.HalfType()), ll.IntType(16)))
    engine = jit.Engine()
    engine.load(jit.emit(str(module), "obj"))  # type: ignore[arg-type]
    compiled = ctypes.CFUNCTYPE(ctypes.c_uint16, ctypes.c_double)(engine.address("to_half"))
    compiled.engine = engine  # type: ignore[attr-defined]  # the code lives as long as it
    return compiled


def hard_cases() -> np.ndarray:
    """Every finite half, the midpoints between neighbours (ties) and the doubles just either
    side of them (where rounding to single first would tie wrongly), extremes and specials."""
    halves = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    above = np.append(halves[1:], 65520.0)  # 65520: the first value that rounds to inf
    mid = (halves + above) / 2
    near = np.concatenate([mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf)])
    special = [0.0, -0.0, np.inf, -np.inf, 1e300, -1e300, 2.0**-25, 2.0**-26, 1e-30]
    both = np.concatenate([halves, near, special])
    return np.concatenate([both, -both])


def test_doubles_round_to_halves_as_numpy_rounds(to_half: ctypes._CFuncPtr) -> None:
    cases = hard_cases()
    with np.errstate(over="ignore"):
        want = cases.astype(np.float16).view(np.uint16)
    got = np.array([to_half(x) for x in cases.tolist()], np.uint16)
    wrong = np.flatnonzero(got != want)
    assert wrong.size == 0, [(cases[i], hex(got[i]), hex(want[i])) for i in wrong[:5]]


def test_nan_stays_nan(to_half: ctypes._CFuncPtr) -> None:
    assert np.isnan(np.uint16(to_half(float("nan"))).view(np.float16))


def test_a_cast_from_f64_to_f16_on_llvm_cpu_rounds_as_numpy() -> None:
    # it called `__truncdfhf2`, which the JIT does not link: the process crashed
    text = ("func @c: (<_ x f64>) -> <_ x f16> {\n'entry(%x: <_ x f64>):\n"
            "  %r = dataTypeCast %x: <_ x f64> to f16\n  return %r: <_ x f16>\n}\n")
    x = np.array([1.5, 3001.0, 2049.0000001, -0.1, 1e6, 6e-8, np.nan])
    (out,) = ir.compile(ir.parse(text), "llvm-cpu").call("c", x)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, x.astype(np.float16))
