"""Gradients of whole programs: the web site's layer, an RNN over a sequence, an MLP with
softmax cross-entropy — checked against central finite differences in float64."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ad.testing import check_gradient, check_tangent
from dlvm.ir.testing import compile_for_test, mlp_cross_entropy

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")

RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


LAYER = """
module "layer"
stage raw

func @f: (<_ x 5 x f64>, <5 x 3 x f64>, <3 x f64>) -> <_ x 3 x f64> {
'entry(%x: <_ x 5 x f64>, %w: <5 x 3 x f64>, %b: <3 x f64>):
    %0.0 = dot %x: <_ x 5 x f64>, %w: <5 x 3 x f64>
    %0.1 = padShape %b: <3 x f64> at 0
    %0.2 = add %0.0: <_ x 3 x f64>, %0.1: <1 x 3 x f64>
    return %0.2: <_ x 3 x f64>
}

[gradient @f seedable]
func @df: (<_ x 5 x f64>, <5 x 3 x f64>, <3 x f64>, <_ x 3 x f64>) -> (<_ x 5 x f64>, <5 x 3 x f64>, <3 x f64>)

[tangent @f]
func @tf: (<_ x 5 x f64>, <5 x 3 x f64>, <3 x f64>, <_ x 5 x f64>, <5 x 3 x f64>, <3 x f64>) -> (<_ x 3 x f64>)
"""


@pytest.mark.parametrize("batch", [1, 4])
def test_the_web_sites_layer_with_a_dynamic_batch(batch: int) -> None:
    args = [rand(batch, 5), rand(5, 3), rand(3)]
    check_gradient(LAYER, "f", "df", args)
    check_tangent(LAYER, "f", "tf", args, [rand(batch, 5), rand(5, 3), rand(3)])


RNN = """
module "rnn"
stage raw

// h ← tanh(x[i]·Wx + h·Wh) for i < n, then the sum of h
func @rnn: (<_ x 4 x f64>, <4 x 3 x f64>, <3 x 3 x f64>, i64) -> f64 {
'entry(%xs: <_ x 4 x f64>, %wx: <4 x 3 x f64>, %wh: <3 x 3 x f64>, %n: i64):
    %h0 = literal 0.0: <1 x 3 x f64>
    branch 'loop(0: i64, %h0: <1 x 3 x f64>)
'loop(%i: i64, %h: <1 x 3 x f64>):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body() else 'exit()
'body():
    %x = extract %i: i64 from %xs: <_ x 4 x f64>
    %xr = padShape %x: <4 x f64> at 0
    %a = dot %xr: <1 x 4 x f64>, %wx: <4 x 3 x f64>
    %b = dot %h: <1 x 3 x f64>, %wh: <3 x 3 x f64>
    %s = add %a: <1 x 3 x f64>, %b: <1 x 3 x f64>
    %h2 = tanh %s: <1 x 3 x f64>
    %i2 = add %i: i64, 1: i64
    branch 'loop(%i2: i64, %h2: <1 x 3 x f64>)
'exit():
    %r = reduce %h: <1 x 3 x f64> by add init 0.0: f64
    return %r: f64
}

[gradient @rnn]
func @drnn: (<_ x 4 x f64>, <4 x 3 x f64>, <3 x 3 x f64>, i64) -> (<_ x 4 x f64>, <4 x 3 x f64>, <3 x 3 x f64>)

[tangent @rnn wrt 1, 2]
func @trnn: (<_ x 4 x f64>, <4 x 3 x f64>, <3 x 3 x f64>, i64, <4 x 3 x f64>, <3 x 3 x f64>) -> (f64)
"""


@pytest.mark.parametrize("n", [0, 1, 5])
def test_an_rnn_over_a_sequence_indexed_by_the_loop_counter(n: int) -> None:
    args = [rand(6, 4) * 0.5, rand(4, 3) * 0.5, rand(3, 3) * 0.5, np.int64(n)]
    out = check_gradient(RNN, "rnn", "drnn", args)
    if n < 6:
        assert np.all(out[0][n:] == 0)  # rows the loop never read: exactly zero
    check_tangent(RNN, "rnn", "trnn", args, [rand(4, 3), rand(3, 3)])


MLP = mlp_cross_entropy()


def test_softmax_cross_entropy_mlp() -> None:
    batch = 6
    labels = RNG.integers(0, 3, batch)
    y = np.eye(3)[labels]
    args = [rand(batch, 4), y, rand(4, 5), rand(5), rand(5, 3), rand(3)]
    out = check_gradient(MLP, "loss", "dloss", args)
    assert out[-1] > 0  # the kept loss


def test_gradient_descent_on_the_mlp_lowers_the_loss() -> None:
    exe = compile_for_test(ir.parse(MLP))
    x = rand(32, 4)
    labels = np.argmax(x @ rand(4, 3), axis=1)  # learnable: a linear rule
    y = np.eye(3)[labels]
    params = [rand(4, 5) * 0.5, np.zeros(5), rand(5, 3) * 0.5, np.zeros(3)]
    first = None
    for _ in range(60):
        *grads, loss = exe.call("dloss", x, y, *params)
        first = loss if first is None else first
        params = [p - 0.5 * g for p, g in zip(params, grads, strict=True)]
    assert exe.call("loss", x, y, *params)[0] < 0.5 * first


HVP = """
module "hvp"
stage raw

func @f: (<3 x f64>) -> f64 {
'entry(%x: <3 x f64>):
    %s = sin %x: <3 x f64>
    %q = multiply %s: <3 x f64>, %x: <3 x f64>
    %r = reduce %q: <3 x f64> by add init 0.0: f64
    return %r: f64
}

[gradient @f seedable]
func @df: (<3 x f64>, f64) -> (<3 x f64>)

// the gradient of ⟨∇f(x), v⟩: a Hessian-vector product
[gradient @df from 0 wrt 0 seedable]
func @hvp: (<3 x f64>, f64, <3 x f64>) -> (<3 x f64>)
"""


def test_gradient_of_a_gradient_is_a_hessian_vector_product() -> None:
    exe = compile_for_test(ir.parse(HVP))
    x, v = rand(3), rand(3)
    # f = Σ x sin x: H = diag(2 cos x − x sin x)
    expected = (2 * np.cos(x) - x * np.sin(x)) * v
    np.testing.assert_allclose(exe.call("hvp", x, np.float64(1.0), v)[0], expected, rtol=1e-10)
