"""Staged arithmetic promotes element types as numpy's does (NEP 50): a Python number is weak
(it takes the tensor's type unless its kind is higher), numpy scalars and tensors are strong
(`numpy.result_type`), and `/` of integers is true division in float64. Checked against
numpy on a table of element types × scalars × operations: the result types from the IR
(no compilation), the values on the interpreter."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm import nnkit as nn
from dlvm.ir.runtime import numpy_dtype
from dlvm.nnkit.types import from_numpy

DTYPES = [np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]
SCALARS: list[Any] = [True, 3, -2, 3.7, 1e-3, np.int8(3), np.int32(3), np.int64(-4),
                      np.float16(0.5), np.float32(2.5), np.float64(3.7), np.bool_(True)]
OPERATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "x * s": lambda x, s: x * s,
    "s + x": lambda x, s: s + x,
    "x - s": lambda x, s: x - s,
    "x / s": lambda x, s: x / s,
    "s / x": lambda x, s: s / x,
    "x < s": lambda x, s: x < s,
    "s >= x": lambda x, s: s >= x,
    "maximum": lambda x, s: (nn if isinstance(x, nn.StagedTensor) else np).maximum(x, s),
}
X = [1, 2, 3]


def staged_for(dtype: Any) -> nn.StagedFunction:
    """One function of an array of `dtype` computing every operation with every scalar."""
    spec = nn.Tensor[from_numpy(np.dtype(dtype)), 1]
    return nn.lambda_(lambda x: tuple(op(x, s) for s in SCALARS for op in OPERATIONS.values()),
                      (spec,), name="table")


def expected(x: np.ndarray) -> list[np.ndarray]:
    return [op(x, s) for s in SCALARS for op in OPERATIONS.values()]


def labels() -> list[str]:
    return [f"{name} with s = {s!r}" for s in SCALARS for name in OPERATIONS]


@pytest.mark.parametrize("dtype", DTYPES, ids=[np.dtype(d).name for d in DTYPES])
def test_result_types_and_values_follow_numpy(dtype: Any) -> None:
    x = np.array(X, dtype)
    fn = staged_for(dtype)
    module = fn.module_for(fn.arg_specs or ())
    (table,) = [f for f in module.functions if f.name == "table"]
    got_types = [str(t.dtype) for t in table.type.result.elements]  # type: ignore[union-attr]
    with np.errstate(all="ignore"):
        want = expected(x)
    want_types = [str(from_numpy(w.dtype)) for w in want]
    mismatched = [(label, g, w) for label, g, w in zip(labels(), got_types, want_types,
                                                        strict=True) if g != w]
    assert mismatched == []
    results = ir.compile(module, "interp")["table"](x)
    for label, got, w in zip(labels(), results, want, strict=True):
        assert got.dtype == w.dtype, label
        rtol = 1e-3 if w.dtype == np.float16 else 1e-6
        np.testing.assert_allclose(got, w, rtol=rtol, err_msg=label)


def test_an_int32_tensor_times_a_float_is_float64_not_truncated() -> None:
    """The reported sample, through a real compilation: numpy's 3.7, 7.4, not 3, 7."""
    fn = nn.lambda_(lambda x: x * 3.7, (nn.Tensor[nn.i32, 1],))
    got = fn(np.array([1, 2], np.int32))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, np.array([1, 2], np.int32) * 3.7)


@pytest.mark.parametrize(("a", "b"), [(nn.i32, nn.f32), (nn.i8, nn.i64), (nn.f16, nn.f64),
                                      (nn.bool_, nn.i16), (nn.f16, nn.i8)])
def test_two_staged_tensors_promote_to_numpys_result_type(a: Any, b: Any) -> None:
    fn = nn.lambda_(lambda x, y: x + y, (nn.Tensor[a, 1], nn.Tensor[b, 1]))
    want = np.result_type(numpy_dtype(a), numpy_dtype(b))
    assert f"-> <_ x {from_numpy(want)}>" in fn.ir()


def test_a_python_int_out_of_the_tensors_range_is_an_error_as_in_numpy() -> None:
    fn = nn.lambda_(lambda x: x + 300, (nn.Tensor[nn.i8, 1],))
    with pytest.raises(nn.NNKitValueError, match="the Python integer 300 is out of range for "
                                                 r"i8 \(-128 to 127\)"):
        fn.ir()
    with pytest.raises(OverflowError):
        np.ones(2, np.int8) + 300


def test_a_bool_tensor_with_a_python_int_is_int64() -> None:
    fn = nn.lambda_(lambda x: x * 3, (nn.Tensor[nn.bool_, 1],))
    assert "-> <_ x i64>" in fn.ir()


def test_what_the_ir_cannot_express_is_a_clear_error() -> None:
    """Arithmetic on bools (numpy's logical or) has no DLVM instruction: refused."""
    fn = nn.lambda_(lambda x: x + True, (nn.Tensor[nn.bool_, 1],))
    with pytest.raises(nn.NNKitTypeError, match=r"'add': .*numeric"):
        fn.ir()
