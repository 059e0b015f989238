"""`bf16` (bfloat16) in the IR and the reference interpreter.

A bf16 has float32's 8-bit exponent and an 8-bit significand (7 stored bits): each operation
is computed exactly and rounded once to the nearest bf16, ties to even; sums accumulate in
float64 before their one rounding, as for f16 and f32. The interpreter's results are written
as powers of two, by hand; the other targets (bf16 as 16-bit patterns, arithmetic in f32) are
held to the interpreter.
"""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.runtime import convert_argument
from dlvm.ir.testing import executable, run
from dlvm.ir.types import BF16, F32, TensorType, parse_data_type

BF = np.dtype(ml_dtypes.bfloat16)

ARITHMETIC = """module "bf"
stage raw

func @f: (<3 x bf16>, <3 x bf16>) -> (<3 x bf16>, <3 x bf16>, <3 x f32>, bf16) {
'entry(%x: <3 x bf16>, %y: <3 x bf16>):
    %s = add %x: <3 x bf16>, %y: <3 x bf16>
    %p = multiply %x: <3 x bf16>, 0.5: bf16
    %w = dataTypeCast %s: <3 x bf16> to f32
    %t = reduce %x: <3 x bf16> by add init 0.0: bf16
    return (%s: <3 x bf16>, %p: <3 x bf16>, %w: <3 x f32>, %t: bf16
           ): (<3 x bf16>, <3 x bf16>, <3 x f32>, bf16)
}

func @narrow: (<3 x f32>) -> <3 x bf16> {
'entry(%x: <3 x f32>):
    %n = dataTypeCast %x: <3 x f32> to bf16
    return %n: <3 x bf16>
}

func @total: (<1000 x bf16>) -> bf16 {
'entry(%x: <1000 x bf16>):
    %t = reduce %x: <1000 x bf16> by add init 0.0: bf16
    return %t: bf16
}
"""


def interp() -> ir.Executable:
    return executable(ARITHMETIC, "interp")


def test_names_and_text_round_trip() -> None:
    assert parse_data_type("bf16") == BF16 and str(BF16) == "bf16"
    assert BF16.is_float and not BF16.is_int
    assert BF16.can_widen_to(F32) and not F32.can_widen_to(BF16)
    module = ir.parse(ARITHMETIC)
    ir.verify(module)
    assert ir.parse(ir.print_module(module)).functions[0].type == module.functions[0].type


def test_each_operation_rounds_once_to_nearest_even() -> None:
    x = np.array([1.0, 256.0, 3.0], BF)
    y = np.array([2.0**-8, 1.0, 2.0**-7], BF)
    s, p, w, t = interp().call("f", x, y)
    assert s.dtype == BF and p.dtype == BF and w.dtype == np.float32
    # 1 + 2^-8 is a tie between 1 and 1 + 2^-7: the even one is 1; 256 + 1 rounds to 256;
    # 3 + 2^-7 needs 9 significant bits: it rounds to 3
    assert w.tolist() == [1.0, 256.0, 3.0]
    assert p.astype(np.float64).tolist() == [0.5, 128.0, 1.5]
    assert float(t) == 260.0


def test_narrowing_from_f32_rounds_to_nearest_even() -> None:
    x = np.array([1.0 + 2.0**-8, 1.0 + 3 * 2.0**-8, 1.0 + 2.0**-8 + 2.0**-20], np.float32)
    out = interp().call("narrow", x)[0]
    assert out.astype(np.float64).tolist() == [1.0, 1.0 + 2.0**-6, 1.0 + 2.0**-7]


def test_sums_accumulate_in_float64() -> None:
    # summed in bf16, the total would stop at 256, where adding 1 rounds back down
    assert float(interp().call("total", np.ones(1000, BF))[0]) == 1000.0


def test_arrays_saved_by_numpy_read_back_as_bf16() -> None:
    """numpy writes bfloat16 as raw 2-byte records (`V2`): an argument of type bf16 takes
    them as the bf16 they hold."""
    buffer = io.BytesIO()
    np.save(buffer, np.array([1.5, -2.0], BF))
    buffer.seek(0)
    raw = np.load(buffer)
    assert raw.dtype.kind == "V"
    got = convert_argument(raw, TensorType((2,), BF16))
    assert got.dtype == BF and got.astype(np.float64).tolist() == [1.5, -2.0]
    got = convert_argument(np.array([0.5, 4.0], np.float32), TensorType((2,), BF16))
    assert got.dtype == BF and got.astype(np.float64).tolist() == [0.5, 4.0]
    with pytest.raises(ir.ExecutionError, match="overflows bf16"):
        convert_argument(np.array([1e300]), TensorType((1,), BF16))


KERNELS = """module "bf"
stage raw

func @f: (<2 x 3 x bf16>, <3 x 4 x bf16>, <3 x bf16>) -> (<2 x 4 x bf16>, <2 x 3 x bf16>, <2 x bf16>, <1 x 3 x bool>, <2 x 3 x bf16>, <3 x 2 x bf16>, <3 x bf16>) {
'entry(%a: <2 x 3 x bf16>, %w: <3 x 4 x bf16>, %v: <3 x bf16>):
    %mm = dot %a: <2 x 3 x bf16>, %w: <3 x 4 x bf16>
    %t = tanh %a: <2 x 3 x bf16>
    %e = exp %t: <2 x 3 x bf16>
    %vp = padShape %v: <3 x bf16> at 0
    %s = multiply %e: <2 x 3 x bf16>, %vp: <1 x 3 x bf16>
    %m = reduce %s: <2 x 3 x bf16> by max init -inf: bf16 along 1
    %lt = lessThan %vp: <1 x 3 x bf16>, 0.5: bf16
    %k = literal <<1.0: bf16, -2.5: bf16, 3.0e38: bf16>: <3 x bf16>, <0.0078125: bf16, -0.0: bf16, 65504.0: bf16>: <3 x bf16>>: <2 x 3 x bf16>
    %sel = select %k: <2 x 3 x bf16>, %a: <2 x 3 x bf16> by %lt: <1 x 3 x bool>
    %tr = transpose %a: <2 x 3 x bf16>
    %d = literal dense "0x803f0040c0bf": <3 x bf16>
    %sum0 = reduce %w: <3 x 4 x bf16> by add init 0.0: bf16 along 1
    %sum = add %sum0: <3 x bf16>, %d: <3 x bf16>
    return (%mm: <2 x 4 x bf16>, %sel: <2 x 3 x bf16>, %m: <2 x bf16>, %lt: <1 x 3 x bool>, %s: <2 x 3 x bf16>, %tr: <3 x 2 x bf16>, %sum: <3 x bf16>): (<2 x 4 x bf16>, <2 x 3 x bf16>, <2 x bf16>, <1 x 3 x bool>, <2 x 3 x bf16>, <3 x 2 x bf16>, <3 x bf16>)
}

func @casts: (<6 x f64>, <6 x bf16>) -> (<6 x bf16>, <6 x i32>, <6 x f16>, <6 x bool>, <6 x f64>) {
'entry(%x: <6 x f64>, %y: <6 x bf16>):
    %n = dataTypeCast %x: <6 x f64> to bf16
    %i = dataTypeCast %y: <6 x bf16> to i32
    %h = dataTypeCast %y: <6 x bf16> to f16
    %b = dataTypeCast %y: <6 x bf16> to bool
    %w = dataTypeCast %y: <6 x bf16> to f64
    return (%n: <6 x bf16>, %i: <6 x i32>, %h: <6 x f16>, %b: <6 x bool>, %w: <6 x f64>): (<6 x bf16>, <6 x i32>, <6 x f16>, <6 x bool>, <6 x f64>)
}

func @draw: (bf16) -> <64 x bf16> {
'entry(%hi: bf16):
    %r = random 64 from 1.0: bf16 upto %hi: bf16
    return %r: <64 x bf16>
}
"""


@pytest.mark.usefixtures("spec_target")
def test_every_target_computes_bf16_as_the_interpreter() -> None:
    """Kernels, reductions, a product, compares, selects, literals and layout on bf16: every
    target equal to the interpreter (within two bf16 ulps where sums may be ordered
    differently, exactly elsewhere)."""
    rng = np.random.default_rng(0)
    args = (rng.standard_normal((2, 3)).astype(BF), rng.standard_normal((3, 4)).astype(BF),
            np.array([0.25, 0.75, -1.5], BF))
    want = executable(KERNELS, "interp").call("f", *args)
    got = run(KERNELS, "f", *args)
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype and g.shape == w.shape, k
        if w.dtype == BF:
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                       rtol=2.0**-7, atol=0, err_msg=str(k))
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.usefixtures("spec_target")
def test_casts_round_and_widen_as_the_interpreter_does() -> None:
    x = np.array([1.0 + 2.0**-8, 1.0 + 2.0**-8 + 2.0**-30, 3.0e39, -np.inf, np.nan, -0.0])
    y = np.array([1.5, -2.75, 70000.0, -0.0, np.inf, 3.0], BF)
    want = executable(KERNELS, "interp").call("casts", x, y)
    got = run(KERNELS, "casts", x, y)
    finite = np.isfinite(y.astype(np.float64))  # an infinity's integer is unspecified
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype, k
        if g.dtype == np.int32:
            g, w = g[finite], w[finite]
        if g.dtype == BF:  # every bit, but a NaN's payload (a GPU gives its canonical NaN)
            nan = np.isnan(w.astype(np.float32))
            np.testing.assert_array_equal(np.isnan(g.astype(np.float32)), nan, str(k))
            g, w = g[~nan].view(np.uint16), w[~nan].view(np.uint16)
        np.testing.assert_array_equal(g, w, str(k))


@pytest.mark.usefixtures("spec_target")
def test_random_bf16_lies_in_its_half_open_range() -> None:
    out = run(KERNELS, "draw", np.array(1.0078125, BF))[0]  # [1, 1 + 2^-7): only 1
    assert out.dtype == BF and (out == BF.type(1.0)).all()
