"""The seed's NNKit demo, written in Python nearly line for line: `f`, `g` calling `f`, the
gradient `dg` and its application, with results against numpy and the IR against the
seed's listings."""

from __future__ import annotations

import numpy as np
import pytest

from dlvm import nnkit as nn
from dlvm.nnkit import Float1D, Float2D

# f(x, w, b) = x • w + b
f = nn.lambda_(lambda x, w, b: x @ w + b.rank_lifted(), (Float2D, Float2D, Float1D),
               name="f")
# g, its types inferred from its use of f; staged application f[x, w, b] emits a call
g = nn.lambda_(lambda x, w, b: nn.tanh(f[x, w, b]), name="g")
# the gradient of g with respect to w and b, keeping g's value
dg = nn.gradient(g, wrt=(1, 2), keeping=0, name="dg")
df = nn.gradient(f, wrt=(1, 2), seedable=True, name="df")

RNG = np.random.default_rng(0)
X = RNG.random((1, 784), dtype=np.float32)
W = (RNG.random((784, 10), dtype=np.float32) - 0.5) * 0.1
B = RNG.random(10, dtype=np.float32)


def test_dg_computes_the_gradient_and_keeps_g() -> None:
    dg_dw, dg_db, result = dg[X, W, B]
    y = np.tanh(X @ W + B)
    np.testing.assert_allclose(result, y, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dg_db, (1 - y * y)[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(dg_dw, X.T @ (1 - y * y), rtol=1e-4, atol=1e-6)


def test_the_same_results_as_pytorch() -> None:
    torch = pytest.importorskip("torch")
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (X, W, B))
    out = torch.tanh(tx @ tw + tb).sum()
    out.backward()
    dg_dw, dg_db, _ = dg(X, W, B)
    np.testing.assert_allclose(dg_dw, tw.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(dg_db, tb.grad.numpy(), rtol=1e-4, atol=1e-6)


SEED_F_DYNAMIC = """\
func @f: (<_ x _ x f32>, <_ x _ x f32>, <_ x f32>) -> <_ x _ x f32> {
'entry(%x: <_ x _ x f32>, %w: <_ x _ x f32>, %b: <_ x f32>):
    %0.0 = dot %x: <_ x _ x f32>, %w: <_ x _ x f32>
    %0.1 = padShape %b: <_ x f32> at 0
    %0.2 = add %0.0: <_ x _ x f32>, %0.1: <1 x _ x f32>
    return %0.2: <_ x _ x f32>
}"""

SEED_DF_SPECIALIZED = """\
func @df: (<1 x 784 x f32>, <784 x 10 x f32>, <10 x f32>, <1 x 10 x f32>) -> (<784 x 10 x f32>, <10 x f32>) {
'entry(%x: <1 x 784 x f32>, %w: <784 x 10 x f32>, %b: <10 x f32>, %seed: <1 x 10 x f32>):
    %0.0 = squeezeShape %seed: <1 x 10 x f32> at 0
    %0.1 = transpose %x: <1 x 784 x f32>
    %0.2 = dot %0.1: <784 x 1 x f32>, %seed: <1 x 10 x f32>
    return (%0.2: <784 x 10 x f32>, %0.0: <10 x f32>): (<784 x 10 x f32>, <10 x f32>)
}"""


def test_f_is_the_seeds_listing_in_both_forms() -> None:
    assert SEED_F_DYNAMIC in f.ir(dynamic=True)
    specialized = f.ir(X, W, B)
    assert "func @f: (<1 x 784 x f32>, <784 x 10 x f32>, <10 x f32>) -> <1 x 10 x f32>" \
        in specialized
    assert "%0.2 = add %0.0: <1 x 10 x f32>, %0.1: <1 x 10 x f32>" in specialized


def test_df_shape_specialized_is_the_seeds_listing() -> None:
    assert SEED_DF_SPECIALIZED in df.ir(X, W, B, optimize=True)


def test_df_dimension_erased_computes_the_seeds_adjoints() -> None:
    """Erased, the bias adjoint sums the seed over rows (the listing's `reduce … along 0`);
    the IR keeps an `unbroadcast` since a run-time size 1 could broadcast."""
    text = df.ir(dynamic=True, optimize=True)
    assert "[gradient" not in text and "func @df:" in text
    dynamic = nn.gradient(nn.lambda_(f.fn, (Float2D, Float2D, Float1D), name="f",
                                     dynamic=True), wrt=(1, 2), seedable=True)
    x = RNG.random((3, 4), dtype=np.float32)
    w = RNG.random((4, 2), dtype=np.float32)
    seed = RNG.random((3, 2), dtype=np.float32)
    dw, db = dynamic(x, w, np.zeros(2, np.float32), seed)
    np.testing.assert_allclose(dw, x.T @ seed, rtol=1e-5)
    np.testing.assert_allclose(db, seed.sum(0), rtol=1e-5)
