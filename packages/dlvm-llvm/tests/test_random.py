"""`random` in native code: the interpreter's counter-based stream, element for element,
with no call back into Python; threads that share an executable take disjoint elements."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.runtime import ExecutionError

CASES = [("f16", "0.0", "1.0"), ("f32", "-2.5", "3.0"), ("f64", "-1.0", "1.0"),
         ("i8", "-100", "100"), ("i16", "-7", "9000"), ("i32", "-5", "100"),
         ("i64", "-9223372036854775808", "9223372036854775807")]


def module_for(dtype: str, lo: str, hi: str) -> ir.Module:
    return ir.parse(f"""
func @noise: () -> (<3 x 7 x {dtype}>, {dtype}) {{
'entry():
    %a = random 3 x 7 from {lo}: {dtype} upto {hi}: {dtype}
    %s = random scalar from {lo}: {dtype} upto {hi}: {dtype}
    return (%a: <3 x 7 x {dtype}>, %s: {dtype}): (<3 x 7 x {dtype}>, {dtype})
}}
""")


@pytest.mark.parametrize(("dtype", "lo", "hi"), CASES)
def test_native_code_draws_the_interpreters_numbers(dtype: str, lo: str, hi: str) -> None:
    module = module_for(dtype, lo, hi)
    oracle = ir.compile(module, "interp", seed=11)
    exe = ir.compile(module, "llvm-cpu", seed=11)
    for _ in range(3):  # the counter advances alike
        for want, got in zip(oracle.call("noise"), exe.call("noise"), strict=True):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert got.tobytes() == want.tobytes()


def test_an_empty_range_is_an_error_as_in_the_interpreter() -> None:
    module = ir.parse("""
func @noise: (f32) -> <3 x f32> {
'entry(%hi: f32):
    %a = random 3 from 1.0: f32 upto %hi: f32
    return %a: <3 x f32>
}
""")
    exe = ir.compile(module, "llvm-cpu")
    with pytest.raises(ExecutionError, match="random needs lower < upper"):
        exe.call("noise", np.float32(1.0))
    assert exe.call("noise", np.float32(2.0))[0].min() >= 1.0


def test_threads_sharing_an_executable_take_disjoint_elements() -> None:
    module = ir.parse("""
func @noise: () -> <1000 x i64> {
'entry():
    %a = random 1000 from 0: i64 upto 9223372036854775807: i64
    return %a: <1000 x i64>
}
""")
    exe = ir.compile(module, "llvm-cpu", seed=2)
    oracle = ir.compile(module, "interp", seed=2)
    drawn: list[np.ndarray] = []

    def work() -> None:
        for _ in range(20):
            drawn.append(exe.call("noise")[0])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expected = {tuple(oracle.call("noise")[0].tolist()) for _ in range(80)}
    assert {tuple(d.tolist()) for d in drawn} == expected
