"""The language: operators and composites against numpy, gradients of every composite
against finite differences (float64), tangents, types from annotations or the first
application, and staging errors located in the user's code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dlvm import nnkit as nn
from dlvm.ad.testing import central_difference
from dlvm.nnkit import Double1D, Double2D, Float2D

RNG = np.random.default_rng(1)


COMPOSITES: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "sigmoid": (lambda x: nn.sum(nn.sigmoid(x)), lambda x: (1 / (1 + np.exp(-x))).sum()),
    "relu": (lambda x: nn.sum(nn.relu(x) * x), lambda x: (np.maximum(x, 0) * x).sum()),
    "softmax": (lambda x: nn.sum(nn.softmax(x) * nn.softmax(x)),
                lambda x: ((np.exp(x) / np.exp(x).sum(1, keepdims=True)) ** 2).sum()),
    "log_softmax": (lambda x: nn.sum(nn.log_softmax(x) * x),
                    lambda x: ((x - np.log(np.exp(x).sum(1, keepdims=True))) * x).sum()),
    "tanh_exp_log": (lambda x: nn.sum(nn.tanh(x) * nn.exp(x) + nn.log(x * x + 1.0)),
                     lambda x: (np.tanh(x) * np.exp(x) + np.log(x * x + 1)).sum()),
}


@pytest.mark.parametrize("name", sorted(COMPOSITES))
def test_composites_and_their_gradients(name: str) -> None:
    staged, reference = COMPOSITES[name]
    fn = nn.lambda_(staged, (Double2D,), name=name)
    x = RNG.standard_normal((3, 4))
    np.testing.assert_allclose(fn(x), reference(x), rtol=1e-10)
    (dx,) = nn.gradient(fn)(x)
    np.testing.assert_allclose(dx, central_difference(reference, x), rtol=1e-5, atol=1e-7)


def test_cross_entropy_and_its_gradient() -> None:
    loss = nn.lambda_(lambda z, y: nn.cross_entropy(z, y), (Double2D, Double2D))
    z = RNG.standard_normal((5, 3))
    y = np.eye(3)[RNG.integers(0, 3, 5)]

    def reference(zz: np.ndarray) -> float:
        logp = zz - np.log(np.exp(zz).sum(1, keepdims=True))
        return float(-(logp * y).sum(1).mean())

    np.testing.assert_allclose(loss(z, y), reference(z), rtol=1e-10)
    (dz,) = nn.gradient(loss, wrt=0)(z, y)
    np.testing.assert_allclose(dz, central_difference(reference, z), rtol=1e-5, atol=1e-8)


def test_tangents_are_directional_derivatives() -> None:
    fn = nn.lambda_(lambda x: nn.sum(nn.tanh(x) * x), (Double1D,))
    x, t = RNG.standard_normal(4), RNG.standard_normal(4)
    (along,) = nn.tangent(fn, wrt=0)(x, t)
    (grad,) = nn.gradient(fn)(x)
    np.testing.assert_allclose(along, grad @ t, rtol=1e-10)


def test_a_gradient_of_a_gradient() -> None:
    cube = nn.lambda_(lambda x: nn.sum(x * x * x), (Double1D,), name="cube")
    grad = nn.gradient(cube, name="grad")
    second = nn.gradient(nn.lambda_(lambda x: nn.sum(grad[x][0]), (Double1D,),
                                    name="sumgrad"))
    x = RNG.standard_normal(3)
    (h,) = second(x)
    np.testing.assert_allclose(h, 6 * x, rtol=1e-10)


def test_types_from_annotations_and_from_the_first_application() -> None:
    @nn.function
    def layer(x: Float2D, w: Float2D) -> Any:
        return nn.tanh(x @ w)

    assert layer.arg_specs == (Float2D, Float2D)
    untyped = nn.lambda_(lambda a, b: a * b + 1.0)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_allclose(untyped(a, a), a * a + 1)
    x, w = RNG.random((2, 3), dtype=np.float32), RNG.random((3, 4), dtype=np.float32)
    np.testing.assert_allclose(layer(x, w), np.tanh(x @ w), rtol=1e-5)


def test_numpy_broadcasting_lifts_ranks() -> None:
    fn = nn.lambda_(lambda x, b: x + b, (Float2D, nn.Float1D))
    x, b = RNG.random((3, 4), dtype=np.float32), RNG.random(4, dtype=np.float32)
    np.testing.assert_allclose(fn(x, b), x + b, rtol=1e-6)


def test_a_new_shape_compiles_once() -> None:
    fn = nn.lambda_(lambda x: nn.exp(x), (nn.Float1D,))
    for n in (3, 3, 5, 3):
        fn(np.zeros(n, np.float32))
    assert len(fn.builds) == 2
    erased = nn.lambda_(lambda x: nn.exp(x), (nn.Float1D,), dynamic=True)
    for n in (3, 5):
        erased(np.zeros(n, np.float32))
    assert len(erased.builds) == 1


def test_staging_errors_name_the_users_line() -> None:
    bad = nn.lambda_(lambda x, w: x @ w, (Float2D, nn.Float3D))
    with pytest.raises(nn.StagingError, match=r"test_language\.py:\d+: error: 'dot': "):
        bad.ir()
    fn = nn.lambda_(lambda x: x, (Float2D,))
    with pytest.raises(nn.StagingError, match=r"test_language\.py:\d+: error: 'lambda' "
                                              r"takes 1 argument, 2 given|takes 1 argument"):
        fn(np.zeros((2, 2), np.float32), np.zeros((2, 2), np.float32))
    with pytest.raises(nn.StagingError, match="argument 0 of 'f' must be <_ x _ x f32>, "
                                              "found <3 x f64>"):
        nn.lambda_(lambda x: x, (Float2D,), name="f")(np.zeros(3))
    branchy = nn.lambda_(lambda x: x if x else -x, (nn.Float,))
    with pytest.raises(nn.StagingError, match="no truth value while staging"):
        branchy.ir()


@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.sampled_from(["add", "mul", "tanh", "exp_neg", "sub"]), min_size=1,
                    max_size=6), seed=st.integers(0, 2**16))
def test_random_staged_expressions_match_numpy(ops: list[str], seed: int) -> None:
    rng = np.random.default_rng(seed)
    x0, y0 = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))

    def build(x: Any, y: Any, lib: Any) -> Any:
        for op in ops:
            if op == "add":
                x = x + y
            elif op == "mul":
                x = x * y
            elif op == "sub":
                x = y - x
            elif op == "tanh":
                x = lib.tanh(x)
            else:
                x = lib.exp(-lib.tanh(x))
        return x

    fn = nn.lambda_(lambda x, y: build(x, y, nn), (Double2D, Double2D))
    np.testing.assert_allclose(fn(x0, y0), build(x0, y0, np), rtol=1e-10, atol=1e-12)


def test_arrays_of_other_frameworks_come_in_through_dlpack() -> None:
    torch = pytest.importorskip("torch")
    fn = nn.lambda_(lambda x: nn.tanh(x) * 2.0, (nn.Float1D,))
    t = torch.linspace(-1, 1, 5)
    np.testing.assert_allclose(fn(t), np.tanh(t.numpy()) * 2, rtol=1e-6)


def test_convolution_reverse_and_row_slices() -> None:
    conv = nn.lambda_(lambda x, k: nn.sum(nn.convolve(x, k) * nn.convolve(x, k)),
                      (nn.Double3D, nn.Double3D))
    x, k = RNG.standard_normal((1, 1, 6)), RNG.standard_normal((1, 1, 3))
    windows = np.lib.stride_tricks.sliding_window_view(x[0, 0], 3)
    y = windows @ k[0, 0]
    np.testing.assert_allclose(conv(x, k), (y * y).sum(), rtol=1e-12)
    (dk,) = nn.gradient(conv, wrt=1)(x, k)
    np.testing.assert_allclose(dk[0, 0], 2 * windows.T @ y, rtol=1e-10)
    flip = nn.lambda_(lambda v: nn.slice_rows(nn.reverse(v, 0), 1, 2), (Double1D,))
    np.testing.assert_array_equal(flip(np.arange(4.0)), [2.0, 1.0])  # moves values: exact
