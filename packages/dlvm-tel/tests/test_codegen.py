"""The IR TEL generates computes what the model says: inference against numpy, the loss's
gradient (through a recurrent loop too: backpropagation through time) against finite
differences in float64, the declared initial values, one SGD step, on every target."""

from __future__ import annotations

from math import erf, sqrt

import numpy as np
import pytest

import dlvm.ir as ir
import dlvm.tel as tel
from dlvm.ad.testing import check_gradient
from dlvm.ir.testing import compile_for_test

MLP = """
module mlp
type float64

x: in[_ x 4]
target: in[_ x 3]
w1: param[4 x 6] = random(-0.5, 0.5)
b1: param[6] = 0.1
w2: param[6 x 3] = glorot
b2: param[3] = normal(0.5)
h: hidden[_ x 6] = sigmoid(x . w1 + b1)
y: out[_ x 3] = softmax(h . w2 + b2)
loss xent = cross_entropy(y, target)
"""

RNN = """
module rnn
type float64

xs: in[_ x _ x 2]
target: in[_ x 2]
wx: param[2 x 4] = glorot
wh: param[4 x 4] = glorot
v: param[4 x 4] = glorot
bh: param[4] = 0.0
wy: param[4 x 2] = glorot

recurrent t {
    h: hidden[_ x 4] = tanh(xs[t] . wx + h[t-1] . wh + bh)
    g: hidden[_ x 4] = tanh(h[t] . v + g[t-1])      // a second layer over the first
}
y: out[_ x 2] = log_softmax(g . wy)
loss nll = -mean(y * target) * 2
"""


NORMED = """
module normed
type float64

x: in[_ x 5]
target: in[_ x 5]
gain: param[5] = normal(1.0)
bias: param[5] = normal(0.1)
w: param[5 x 5] = glorot
h: hidden[_ x 5] = layer_norm(x) * gain + bias
y: out[_ x 5] = gelu(h . w)
loss err = mse(y, target)
"""


def params(module: ir.Module, seed: int = 0) -> tuple[np.ndarray, ...]:
    return ir.compile(module, "interp", seed=seed).call("init_params")


def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-z))


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_inference_and_loss_are_the_model_in_numpy() -> None:
    module = tel.compile(MLP, "mlp.tel")
    w1, b1, w2, b2 = params(module)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 4))
    t = np.eye(3)[rng.integers(0, 3, 5)]
    exe = compile_for_test(module)
    y = softmax(sigmoid(x @ w1 + b1) @ w2 + b2)
    np.testing.assert_allclose(exe["inference"](x, (w1, b1, w2, b2)), y, rtol=1e-10)
    expected = -np.sum(t * np.log(y)) / 5
    np.testing.assert_allclose(exe["loss"](x, t, (w1, b1, w2, b2)), expected, rtol=1e-10)
    np.testing.assert_allclose(exe["predict"](w1, b1, w2, b2, x), y, rtol=1e-10)


def test_the_gradient_of_the_loss_matches_finite_differences() -> None:
    module = tel.compile(MLP, "mlp.tel")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 4))
    t = np.eye(3)[rng.integers(0, 3, 5)]
    check_gradient(module, "loss", "loss_grad", [x, t, params(module)])


@pytest.mark.parametrize("steps", [0, 1, 6])
def test_backpropagation_through_time_matches_finite_differences(steps: int) -> None:
    module = tel.compile(RNN, "rnn.tel")
    rng = np.random.default_rng(steps)
    xs = rng.standard_normal((3, steps, 2))
    t = np.eye(2)[rng.integers(0, 2, 3)]
    check_gradient(module, "loss", "loss_grad", [xs, t, params(module)])


def test_the_recurrent_block_runs_over_the_sequence_in_order() -> None:
    module = tel.compile(RNN, "rnn.tel")
    wx, wh, v, bh, wy = p = params(module)
    rng = np.random.default_rng(3)
    xs = rng.standard_normal((4, 7, 2))
    h = np.zeros((4, 4))
    g = np.zeros((4, 4))
    for k in range(7):
        h = np.tanh(xs[:, k] @ wx + h @ wh + bh)
        g = np.tanh(h @ v + g)
    z = g @ wy
    expected = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(compile_for_test(module)["inference"](xs, p), expected,
                               rtol=1e-10)


def test_an_empty_sequence_leaves_the_zero_state() -> None:
    module = tel.compile(RNN, "rnn.tel")
    p = params(module)
    y = compile_for_test(module)["inference"](np.zeros((2, 0, 2)), p)
    np.testing.assert_allclose(y, np.full((2, 2), np.log(0.5)), rtol=1e-12)


def test_initial_values_are_drawn_as_declared_and_follow_the_seed() -> None:
    module = tel.compile(MLP.replace("[4 x 6]", "[40 x 60]").replace("[6]", "[60]")
                         .replace("[6 x 3]", "[60 x 30]").replace("[3]", "[30]")
                         .replace("[_ x 6]", "[_ x 60]").replace("[_ x 4]", "[_ x 40]")
                         .replace("[_ x 3]", "[_ x 30]"), "big.tel")
    w1, b1, w2, b2 = params(module, seed=0)
    assert w1.shape == (40, 60) and w1.min() >= -0.5 and w1.max() < 0.5
    np.testing.assert_array_equal(b1, np.full(60, 0.1))  # a declared constant: exact
    limit = np.sqrt(6 / (60 + 30))
    assert np.abs(w2).max() <= limit and np.abs(w2).max() > 0.9 * limit
    assert b2.shape == (30,)
    again = params(module, seed=0)
    other = params(module, seed=1)
    np.testing.assert_array_equal(again[0], w1)  # the same seed draws the same numbers
    assert not np.array_equal(other[0], w1)


def test_normal_draws_have_the_declared_spread() -> None:
    module = tel.compile("module m\ntype float64\nx: in[3]\nw: param[20000] = normal(0.5)\n"
                         "y: out[3] = x\n", "m.tel")
    (w,) = params(module)
    assert abs(w.std() - 0.5) < 0.02 and abs(w.mean()) < 0.02


def test_train_step_is_one_step_of_gradient_descent() -> None:
    module = tel.compile(MLP, "mlp.tel")
    p = params(module)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 4))
    t = np.eye(3)[rng.integers(0, 3, 6)]
    exe = compile_for_test(module)
    *grads, value = exe.call("loss_grad", x, t, p)
    *updated, loss = exe.call("train_step", *p, x, t, 0.3)
    assert loss == pytest.approx(value)
    for new, old, g in zip(updated, p, grads, strict=True):
        np.testing.assert_allclose(new, old - 0.3 * g, rtol=1e-12)


def test_value_names_come_from_the_model() -> None:
    text = str(tel.compile(MLP, "mlp.tel"))
    for line in ("%h = divide", "%xent = negate", "%w1 = random 4 x 6",
                 "[gradient @loss wrt 2 keeping 0]"):
        assert line in text, line
    module = ir.parse(text, "mlp.dl")  # the printed module reads back
    assert str(module) == text


def test_a_model_without_a_loss_or_parameters_has_only_inference() -> None:
    module = tel.compile("module m\nx: in[3]\ny: out[3] = exp(x) - 1\n", "m.tel")
    assert [f.name for f in module.functions] == ["inference"]
    np.testing.assert_allclose(ir.compile(module, "interp")["inference"](np.zeros(3)),
                               np.zeros(3))


LEARNED_STATE = """
module r
type float64
xs: in[_ x _ x 2]
target: in[_ x 3]
wx: param[2 x 3] = glorot
wh: param[3 x 3] = glorot
h0: param[3] = normal(0.5)
recurrent t {
    h[0] = h0                   // one learned state, broadcast over the batch
    h: hidden[_ x 3] = tanh(xs[t] . wx + h[t-1] . wh)
}
y: out[_ x 3] = h
loss l = mse(y, target)
"""


@pytest.mark.parametrize("steps", [0, 4])
def test_a_learned_initial_state_gets_its_gradient(steps: int) -> None:
    module = tel.compile(LEARNED_STATE, "r.tel")
    p = params(module)
    rng = np.random.default_rng(steps)
    xs, t = rng.standard_normal((2, steps, 2)), rng.standard_normal((2, 3))
    check_gradient(module, "loss", "loss_grad", [xs, t, p])
    if steps == 0:
        y = compile_for_test(module)["inference"](xs, p)
        np.testing.assert_allclose(y, np.stack([p[2], p[2]]), rtol=1e-12)


def test_long_chains_and_deep_expressions_compile() -> None:
    """Thousands of declarations, in either order, and a sum of thousands of terms: values
    are generated in dependency order and expression trees may be deep."""
    chain = [f"h{i}: hidden[_ x 2] = tanh(h{i - 1} . w + x)" for i in range(1, 3000)]
    for body in (chain, chain[::-1]):
        text = "\n".join(["module big", "x: in[_ x 2]", "w: param[2 x 2] = glorot",
                          "h0: hidden[_ x 2] = x", *body, "y: out[_ x 2] = h2999"])
        module = tel.compile(text, "big.tel")
        assert len(module.function("inference").blocks[0].instructions) > 3000
    total = tel.compile("module s\nx: in[2]\ny: out[2] = " + " + ".join(["x"] * 5000), "s.tel")
    np.testing.assert_allclose(ir.compile(total, "interp")["inference"](np.ones(2)), [5000] * 2)


def test_layer_norm_and_gelu_are_their_formulas_and_differentiate() -> None:
    """layer_norm and gelu (transformer pieces) against numpy, and the gradient through
    them against finite differences."""
    module = tel.compile(NORMED, "normed.tel")
    gain, bias, w = p = params(module)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 5)) * 3 + 1
    centered = x - x.mean(axis=1, keepdims=True)
    h = centered / np.sqrt((centered**2).mean(axis=1, keepdims=True) + 1e-5) * gain + bias
    z = h @ w
    expected = z * 0.5 * (1 + np.vectorize(lambda v: erf(v / sqrt(2)))(z))
    np.testing.assert_allclose(compile_for_test(module)["inference"](x, p), expected,
                               rtol=1e-10)
    check_gradient(module, "loss", "loss_grad", [x, rng.standard_normal((3, 5)), p])
