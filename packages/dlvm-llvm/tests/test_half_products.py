"""f16 `dot` and `convolve` on llvm-cpu go through the f32 BLAS (there is no f16 GEMM):
the prepared module computes them on f32 operands, rounded back to f16 once, and the
results are the interpreter's."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir

TEXT = """
func @mm: (<_ x 64 x f16>, <64 x 48 x f16>) -> <_ x 48 x f16> {
'entry(%x: <_ x 64 x f16>, %w: <64 x 48 x f16>):
    %y = dot %x: <_ x 64 x f16>, %w: <64 x 48 x f16>
    %t = tanh %y: <_ x 48 x f16>
    return %t: <_ x 48 x f16>
}
"""


def test_f16_products_are_prepared_on_f32() -> None:
    prepared = ir.registry().make_target("llvm-cpu").prepare(ir.parse(TEXT))
    fn = prepared.function("mm")
    assert fn is not None
    (dot,) = [i for i in fn.instructions() if i.opcode == "dot"]
    assert str(dot.type) == "<_ x 48 x f32>"
    assert str(fn.type_) == "(<_ x 64 x f16>, <64 x 48 x f16>) -> <_ x 48 x f16>"


@pytest.mark.parametrize("rows", [1, 33, 256])
def test_f16_products_match_the_interpreter(rows: int) -> None:
    module = ir.parse(TEXT)
    rng = np.random.default_rng(rows)
    x = rng.standard_normal((rows, 64)).astype(np.float16)
    w = (rng.standard_normal((64, 48)) / 8).astype(np.float16)
    want = ir.compile(module, "interp").call("mm", x, w)[0]
    got = ir.compile(module, "llvm-cpu").call("mm", x, w)[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-3,
                               atol=2e-3)


CONV = """
func @conv: (<2 x 4 x 9 x 9 x f16>, <8 x 4 x 3 x 3 x f16>) -> <2 x 8 x 7 x 7 x f16> {
'entry(%x: <2 x 4 x 9 x 9 x f16>, %k: <8 x 4 x 3 x 3 x f16>):
    %y = convolve %x: <2 x 4 x 9 x 9 x f16> kernel %k: <8 x 4 x 3 x 3 x f16>
    return %y: <2 x 8 x 7 x 7 x f16>
}
"""


def test_f16_convolutions_match_the_interpreter() -> None:
    module = ir.parse(CONV)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 9, 9)).astype(np.float16)
    k = (rng.standard_normal((8, 4, 3, 3)) / 4).astype(np.float16)
    want = ir.compile(module, "interp").call("conv", x, k)[0]
    got = ir.compile(module, "llvm-cpu").call("conv", x, k)[0]
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=2e-3,
                               atol=2e-3)
