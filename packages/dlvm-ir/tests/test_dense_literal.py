"""`dense "0x…"` tensor literals: a static tensor's bytes, for large constants such as a
model's weights — printed and parsed back unchanged, checked against their type, and
computed with by the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir import Builder, DenseLiteral
from dlvm.ir.types import BOOL, F16, F32, F64, I8, I64, TensorType

TEXT = """func @f: (<_ x 2 x f32>) -> <_ x 3 x f32> {{
'entry(%x: <_ x 2 x f32>):
    %w = literal {literal}: <2 x 3 x f32>
    %y = dot %x: <_ x 2 x f32>, %w: <2 x 3 x f32>
    return %y: <_ x 3 x f32>
}}
"""


@pytest.mark.parametrize("dtype, data", [
    (F32, np.arange(6, dtype=np.float32).reshape(2, 3) / 7),
    (F64, np.array([[1e300, -0.0], [np.inf, 2.5]])),
    (F16, np.array([1.5, -2.0, 65504.0], np.float16)),
    (I8, np.array([-128, 0, 127], np.int8)),
    (I64, np.array([[2**62, -1]], np.int64)),
    (BOOL, np.array([True, False, True])),
])
def test_a_dense_literal_holds_exactly_its_array(dtype: object, data: np.ndarray) -> None:
    module = ir.Module("m")
    b = Builder(module)
    t = TensorType(data.shape, dtype)  # type: ignore[arg-type]
    b.function("f", [], t)
    b.ret(b.literal(DenseLiteral.of(data), t))
    text = str(module)
    assert 'dense "0x' in text
    assert str(ir.parse(text)) == text
    out = ir.compile(ir.parse(text), "interp")["f"]()
    np.testing.assert_array_equal(out, data)
    assert out.dtype == data.dtype


def test_the_bytes_are_little_endian_and_row_major() -> None:
    lit = DenseLiteral.of(np.array([[1.0, 2.0]], np.float32))
    assert lit.data.hex() == "0000803f00000040"
    big = DenseLiteral.of(np.array([1.0, 2.0], ">f4"))
    assert big.data == DenseLiteral.of(np.array([1.0, 2.0], "<f4")).data


def test_a_dense_literal_computes_like_the_array() -> None:
    w = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
    module = ir.parse(TEXT.format(literal=f'dense "0x{DenseLiteral.of(w).data.hex()}"'))
    x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    np.testing.assert_allclose(ir.compile(module, "interp")["f"](x), x @ w, rtol=1e-6)


@pytest.mark.parametrize("literal, message", [
    ('dense "0x0000"', "a dense literal of '<2 x 3 x f32>' holds 24 bytes, found 2"),
    ('dense "12"', "a dense literal's string is '0x' and two hexadecimal digits per byte"),
    ('dense "0xabc"', "a dense literal's string is '0x' and two hexadecimal digits per byte"),
    ("dense 3", "expected the elements as a string"),
])
def test_a_malformed_dense_literal_is_an_error_at_its_place(literal: str, message: str) -> None:
    with pytest.raises(ir.DlvmError, match=message) as e:
        ir.run_passes(ir.parse(TEXT.format(literal=literal), "w.dl"), "verify")
    assert "w.dl:3:" in str(e.value)


def test_a_dynamic_shape_cannot_hold_dense_data() -> None:
    text = TEXT.format(literal='dense "0x00"').replace("<2 x 3 x f32>", "<_ x 3 x f32>", 1)
    with pytest.raises(ir.DlvmError, match="needs a tensor type of static shape"):
        ir.run_passes(ir.parse(text, "w.dl"), "verify")


def test_a_weight_of_megabytes_reads_back_as_it_was() -> None:
    """A 4 MB literal (8 million hex digits in one string token) prints and parses back
    unchanged: strings are scanned in one regular-expression step, not one per character."""
    data = np.random.default_rng(0).standard_normal((1024, 1024)).astype(np.float32)
    module = ir.Module("m")
    b = Builder(module)
    t = TensorType(data.shape, F32)
    b.function("f", [], t)
    b.ret(b.literal(DenseLiteral.of(data), t))
    text = str(module)
    back = ir.parse(text)
    assert str(back) == text
    np.testing.assert_array_equal(ir.compile(back, "interp")["f"](), data)
