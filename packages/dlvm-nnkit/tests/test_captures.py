"""Arrays and numbers a staged function reads from outside its arguments are constants of its
build, captured by value when it is staged (as in JAX); a build never answers with an old
value: when a captured array changes in place, or a global or closure variable the function
reads is bound to another value, the next call stages and compiles it again."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm import nnkit as nn
from dlvm.nnkit import Double1D

ONES = np.ones(3)
scale = 2.0  # a global a staged function reads
weights = np.array([1.0, 2.0, 3.0])


def times_weights(x: Any) -> Any:  # a plain helper a staged function calls
    return x * weights


def test_a_captured_array_is_a_constant_of_the_build() -> None:
    """Captured by value: the IR holds the array's values when the function was staged."""
    w = np.array([1.0, 2.0, 3.0])
    fn = nn.lambda_(lambda x: x * w, (Double1D,))
    assert "literal <1.0: f64, 2.0: f64, 3.0: f64>" in fn.ir(ONES)
    np.testing.assert_array_equal(fn(ONES), [1.0, 2.0, 3.0])


def test_a_large_captured_array_is_kept_as_its_bytes() -> None:
    """Past 64 elements a constant is a dense literal (weights: one object, not one per
    element, however large); it computes the same and survives a print and parse."""
    w = np.arange(6 * 20, dtype=np.float32).reshape(6, 20) / 7
    fn = nn.lambda_(lambda x: x * w, (nn.Tensor[nn.f32, (6, 20)],))
    text = fn.ir(np.ones((6, 20), np.float32))
    assert 'literal dense "0x' in text and "0.0: f32," not in text
    np.testing.assert_array_equal(fn(np.ones((6, 20), np.float32)), w)
    module = ir.parse(text)
    assert ir.print_module(module) == text


def test_an_array_changed_in_place_restages_the_function() -> None:
    w = np.array([1.0, 2.0, 3.0])
    fn = nn.lambda_(lambda x: x * w, (Double1D,))
    np.testing.assert_array_equal(fn(ONES), [1.0, 2.0, 3.0])
    w[:] = 5.0  # the trap: a build for this shape exists
    np.testing.assert_array_equal(fn(ONES), [5.0, 5.0, 5.0])
    w[1] = -1.0
    np.testing.assert_array_equal(fn(ONES), [5.0, -1.0, 5.0])
    assert len(fn.builds) == 1  # replaced, not piled up


def test_an_unchanged_capture_keeps_its_build() -> None:
    w = np.array([1.0, 2.0, 3.0])
    fn = nn.lambda_(lambda x: x * w, (Double1D,))
    fn(ONES)
    (built,) = fn.builds.values()
    w[:] = [1.0, 2.0, 3.0]  # written, but the same values
    fn(ONES)
    assert next(iter(fn.builds.values())) is built


def test_a_rebound_closure_variable_restages_the_function() -> None:
    factor = 2.0
    fn = nn.lambda_(lambda x: x * factor, (Double1D,))
    np.testing.assert_array_equal(fn(ONES), [2.0, 2.0, 2.0])
    factor = 3.0
    np.testing.assert_array_equal(fn(ONES), [3.0, 3.0, 3.0])
    assert factor == 3.0


def test_a_rebound_global_restages_the_function() -> None:
    global scale
    fn = nn.lambda_(lambda x: x * scale, (Double1D,))
    try:
        np.testing.assert_array_equal(fn(ONES), [2.0, 2.0, 2.0])
        scale = 4.0
        np.testing.assert_array_equal(fn(ONES), [4.0, 4.0, 4.0])
    finally:
        scale = 2.0


def test_globals_of_the_helpers_a_function_calls_are_watched_too() -> None:
    global weights
    fn = nn.lambda_(lambda x: times_weights(x) + 1.0, (Double1D,))
    try:
        np.testing.assert_array_equal(fn(ONES), [2.0, 3.0, 4.0])
        weights = np.array([0.0, 0.0, 1.0])  # another array, same shape
        np.testing.assert_array_equal(fn(ONES), [1.0, 1.0, 2.0])
    finally:
        weights = np.array([1.0, 2.0, 3.0])


def test_a_value_computed_from_a_capture_while_staging_follows_it() -> None:
    """`float(w.sum())` is computed in Python while staging; `w` changing restages it."""
    w = np.array([1.0, 1.0])
    fn = nn.lambda_(lambda x: x * float(w.sum()), (Double1D,))
    np.testing.assert_array_equal(fn(ONES), [2.0, 2.0, 2.0])
    w += 1.0
    np.testing.assert_array_equal(fn(ONES), [4.0, 4.0, 4.0])


def test_a_capture_of_a_called_staged_function_restages_the_caller() -> None:
    bias = np.array([1.0, 1.0, 1.0])
    inner = nn.lambda_(lambda x: x + bias, (Double1D,), name="inner")
    outer = nn.lambda_(lambda x: inner[x] * 2.0, (Double1D,), name="outer")
    np.testing.assert_array_equal(outer(ONES), [4.0, 4.0, 4.0])
    bias[0] = 0.0
    np.testing.assert_array_equal(outer(ONES), [2.0, 4.0, 4.0])


def test_a_gradient_follows_a_changed_capture() -> None:
    w = np.array([1.0, 2.0, 3.0])
    loss = nn.lambda_(lambda x: nn.sum(x * w), (Double1D,))
    grad = nn.gradient(loss)
    np.testing.assert_array_equal(grad(ONES)[0], [1.0, 2.0, 3.0])
    w *= 10.0
    np.testing.assert_array_equal(grad(ONES)[0], [10.0, 20.0, 30.0])


def test_the_hyper_parameters_of_layers_and_optimizers_cannot_change_under_a_build() -> None:
    """They are read once, while staging: NNKit's layers and optimizers are frozen."""
    for made in (nn.Adam(), nn.SGD(0.5), nn.Dense(2, 3)):
        field = dataclasses.fields(made)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(made, field, 0.1)
