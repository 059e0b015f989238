"""Staged tensors behave like numpy arrays where they can (operators, `==`, `x[i]`, numpy's
ufuncs) and, where they cannot (a value needed while staging, an operator NNKit does not
stage), say so in one line that names what the user wrote — a staged tensor of its type —
never the internal class."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dlvm import nnkit as nn
from dlvm.nnkit import Double1D, Float2D

X = np.array([[0.5, -1.0], [2.0, 0.0]], np.float32)


def staged(body: Callable[[Any], Any]) -> str:
    return nn.lambda_(body, (Float2D,)).ir()


NEEDS_A_VALUE: dict[str, Callable[[Any], Any]] = {
    "if": lambda x: x if x else -x,
    "float": lambda x: float(x),
    "int": lambda x: int(x),
    "range": lambda x: range(x),
    "iteration": lambda x: [row for row in x],
    "in": lambda x: 1.0 in x,
    "len of an unknown size": lambda x: len(x),
    "numpy array": lambda x: np.asarray(x),
    "formatting": lambda x: f"{x:.2f}",
    "assignment": lambda x: x.__setitem__(0, 1.0),
    "floor division": lambda x: x // 2,
    "modulo": lambda x: x % 2,
    "abs": lambda x: abs(x),
    "and": lambda x: (x > 0) & (x < 1),
    "numpy function": lambda x: np.cumsum(x),
    "numpy ufunc": lambda x: np.arctan(x),
    "numpy reduction": lambda x: np.add.reduce(x),
    "numpy ufunc with options": lambda x: np.exp(x, dtype=np.float64),
}


@pytest.mark.parametrize("use", list(NEEDS_A_VALUE))
def test_what_needs_a_value_is_a_one_line_error_naming_the_staged_tensor(use: str) -> None:
    with pytest.raises(nn.NNKitTypeError) as caught:
        staged(NEEDS_A_VALUE[use])
    message = str(caught.value)
    assert "a staged tensor of type <_ x _ x " in message
    assert "Rep" not in message and "StagedTensor" not in message and "\n" not in message
    assert message.startswith(f"{__file__}:")


def test_an_unknown_attribute_is_an_attribute_error_that_names_the_staged_tensor() -> None:
    with pytest.raises(AttributeError, match="a staged tensor of type <_ x _ x f32> has no "
                                             "attribute 'foo'") as caught:
        staged(lambda x: x.foo)
    assert isinstance(caught.value, nn.StagingError)
    assert staged(lambda x: x + getattr(x, "foo", 1.0))  # getattr's default still works


def test_a_staged_tensor_shows_its_type() -> None:
    shown: list[str] = []
    staged(lambda x: shown.append(repr(x)) or x)
    assert shown == ["<staged tensor of type <_ x _ x f32>>"]


def test_a_value_of_another_staged_function_is_refused_by_name() -> None:
    leaked: list[Any] = []
    first = nn.lambda_(lambda x: leaked.append(x) or x, (Double1D,))
    first.ir()
    second = nn.lambda_(lambda y: y + leaked[0], (Double1D,))
    with pytest.raises(nn.StagingError, match="a staged tensor of another staged function "
                                              r"\(of type <_ x f64>\): pass it as an argument"):
        second.ir()


def test_a_wrong_operand_names_its_kind() -> None:
    with pytest.raises(nn.NNKitTypeError, match="the right operand of 'add' must be a staged "
                                                "tensor, a number or an array, found the "
                                                "string 'a'"):
        staged(lambda x: x + "a")


def test_numpy_functions_and_operators_that_nnkit_has_stage_as_nnkit_operations() -> None:
    fn = nn.lambda_(lambda x: np.tanh(x) + np.ones((2, 2), np.float32) * np.square(x), (Float2D,))
    np.testing.assert_allclose(fn(X), np.tanh(X) + X * X, rtol=1e-6)


def test_equality_is_staged_element_wise_not_python_identity() -> None:
    fn = nn.lambda_(lambda x: nn.where(x == 0.0, 1.0, x) + (x != 2.0), (Float2D,))
    want = np.where(X == 0.0, 1.0, X) + (X != 2.0)
    np.testing.assert_allclose(fn(X), want)
    assert fn(X).dtype == want.dtype


def test_indexing_takes_a_row() -> None:
    fn = nn.lambda_(lambda x: x[1] * 2.0, (Float2D,))
    np.testing.assert_allclose(fn(X), X[1] * 2)
    assert len(nn.lambda_(lambda x: x, (nn.Tensor[nn.f32, (3,)],)).ir()) > 0
