"""NNKit's operations and control flow write staged code: applied to plain arrays outside a
staged function they say so in one line, naming the caller's line; the same code inside a
staged function runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dlvm import nnkit as nn

X = np.array([[0.5, -1.0], [2.0, 0.25]])

OUTSIDE: dict[str, Callable[[], Any]] = {
    "sum": lambda: nn.sum(X),
    "max": lambda: nn.max(X, 0),
    "mean": lambda: nn.mean(X),
    "softmax": lambda: nn.softmax(X),
    "transpose": lambda: nn.transpose(X),
    "pad_shape": lambda: nn.pad_shape(X, 0),
    "reshape": lambda: nn.reshape(X, (4,)),
    "take": lambda: nn.take(X, 1),
    "tanh": lambda: nn.tanh(X),
    "dot": lambda: nn.dot(X, X),
    "cond": lambda: nn.cond(np.bool_(True), lambda v: v, lambda v: -v, X),
    "fori_loop": lambda: nn.fori_loop(0, 3, lambda t, h: h, X),
}


@pytest.mark.parametrize("operation", list(OUTSIDE))
def test_an_operation_on_arrays_outside_a_staged_function_is_a_staging_error(
        operation: str) -> None:
    with pytest.raises(nn.StagingError) as caught:
        OUTSIDE[operation]()
    message = str(caught.value)
    assert message.startswith(f"{__file__}:"), message  # the caller's line
    assert "inside a function staged by nn.lambda_ or @nn.function" in message
    assert "\n" not in message


def test_reductions_and_layout_take_arrays_inside_a_staged_function() -> None:
    """An array operand becomes a constant of the staged function, as for `+` or `@`."""
    fn = nn.lambda_(lambda x: nn.sum(x * nn.transpose(X)) + nn.max(X), (nn.Double2D,))
    np.testing.assert_allclose(fn(X), np.sum(X * X.T) + X.max(), rtol=1e-12)
