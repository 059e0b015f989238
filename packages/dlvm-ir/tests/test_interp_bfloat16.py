"""`bf16` (bfloat16) in the IR and the reference interpreter.

A bf16 has float32's 8-bit exponent and an 8-bit significand (7 stored bits): each operation
is computed exactly and rounded once to the nearest bf16, ties to even; sums accumulate in
float64 before their one rounding, as for f16 and f32. The LLVM targets refuse it in one line.
Expected values are written as powers of two, by hand.
"""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.runtime import convert_argument
from dlvm.ir.testing import executable
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


@pytest.mark.parametrize("target", ["llvm-cpu", "nvptx"])
def test_llvm_targets_refuse_bf16_in_one_line(target: str) -> None:
    if not ir.registry().has("target", target):
        pytest.skip(f"{target} is not installed")
    with pytest.raises(ir.DlvmError, match=rf"target '{target}' does not compile bf16 "
                                           r"\('@f' uses"):
        ir.compile(ir.parse(ARITHMETIC), target=target)
