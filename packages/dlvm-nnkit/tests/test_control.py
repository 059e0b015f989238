"""Staged control flow stays control flow in the IR, runs, and differentiates: an RNN loop
against finite differences, a branch both ways, a loop whose state grows."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from dlvm import nnkit as nn
from dlvm.ad.testing import central_difference
from dlvm.nnkit import Double1D, Double2D, Tensor, i64

RNG = np.random.default_rng(2)
Index = Tensor[i64, 0]


def rnn(h: Any, w: Any, u: Any, xs: Any, n: Any) -> Any:
    """h ← tanh(h·w + xs[t]·u) for t < n, then the sum of h."""
    def step(t: Any, h: Any) -> Any:
        return nn.tanh(h @ w + nn.take(xs, t) @ u)
    return nn.sum(nn.fori_loop(0, n, step, h))


def reference(h: np.ndarray, w: np.ndarray, u: np.ndarray, xs: np.ndarray, n: int) -> float:
    for t in range(n):
        h = np.tanh(h @ w + xs[t] @ u)
    return float(h.sum())


@pytest.mark.parametrize("steps", [0, 1, 5])
def test_an_rnn_loop_is_a_loop_and_differentiates(steps: int) -> None:
    staged = nn.lambda_(rnn, (Double2D, Double2D, Double2D, nn.Double3D, Index), name="rnn")
    text = staged.ir()
    assert "conditional" in text and "branch 'loop" in text  # a loop, not an unrolled body
    h, w, u = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 3)) * 0.5, \
        RNG.standard_normal((4, 3)) * 0.5
    xs = RNG.standard_normal((6, 2, 4))
    n = np.int64(steps)
    np.testing.assert_allclose(staged(h, w, u, xs, n), reference(h, w, u, xs, steps),
                               rtol=1e-10)
    dw, du = nn.gradient(staged, wrt=(1, 2))(h, w, u, xs, n)
    np.testing.assert_allclose(dw, central_difference(lambda ww: reference(h, ww, u, xs, steps), w),
                               rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(du, central_difference(lambda uu: reference(h, w, uu, xs, steps), u),
                               rtol=1e-5, atol=1e-8)


def test_cond_takes_either_branch_and_differentiates_through_it() -> None:
    fn = nn.lambda_(lambda x: nn.sum(nn.cond(nn.sum(x) > 0.0, lambda v: v * v,
                                             lambda v: nn.sin(v), x)), (Double1D,))
    assert "conditional" in fn.ir()
    for x in (np.array([0.5, 1.0]), np.array([-0.5, -1.0])):
        want = (x * x).sum() if x.sum() > 0 else np.sin(x).sum()
        np.testing.assert_allclose(fn(x), want, rtol=1e-12)
        (dx,) = nn.gradient(fn)(x)
        np.testing.assert_allclose(dx, 2 * x if x.sum() > 0 else np.cos(x), rtol=1e-12)


def test_while_loop_with_a_tuple_state() -> None:
    def halve(x: Any) -> Any:
        return nn.while_loop(lambda s: nn.sum(s[0]) > 1.0,
                             lambda s: (s[0] * 0.5, s[1] + 1), (x, 0))[1]

    fn = nn.lambda_(halve, (Double1D,))
    assert int(fn(np.array([3.0, 5.0]))) == 3  # 8 → 4 → 2 → 1


def test_a_state_that_grows_is_carried_with_an_unknown_size() -> None:
    def grow(x: Any, n: Any) -> Any:
        return nn.fori_loop(0, n, lambda i, acc: nn.concatenate([acc, x]), x)

    fn = nn.lambda_(grow, (Double1D, Index))
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(fn(x, np.int64(2)), np.tile(x, 3))  # copies: exact
    assert "<_ x f64>" in fn.ir(x, np.int64(2))  # the carried value's size is `_`


def test_bad_control_flow_is_a_staging_error() -> None:
    bad = nn.lambda_(lambda x: nn.cond(x, lambda v: v, lambda v: v, x), (Double1D,))
    with pytest.raises(nn.StagingError, match="condition of 'cond' must be a bool scalar"):
        bad.ir()
    mismatch = nn.lambda_(lambda x: nn.cond(nn.sum(x) > 0.0, lambda v: v,
                                            lambda v: nn.sum(v), x), (Double1D,))
    with pytest.raises(nn.StagingError, match="result 0 of 'cond'"):
        mismatch.ir()
