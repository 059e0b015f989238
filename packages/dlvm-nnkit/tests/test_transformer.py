"""The transformer blocks against PyTorch in float64 (fixtures/transformer.npz, written by
fixtures/make_transformer.py): an embedding and a pre-norm causal block's outputs and every
parameter's gradient (the embedding's a scatter-add of the positions' gradients), three AdamW
steps with warm-up and cosine decay; and the pieces against their formulas."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from dlvm import nnkit as nn
from dlvm.nnkit import Tensor, f64

FIXTURE = Path(__file__).with_name("fixtures") / "transformer.npz"
B, T, D, H, HIDDEN, V = 2, 6, 8, 2, 16, 11
EMBED = nn.Embedding(V, D, dtype=f64)
BLOCK = nn.TransformerBlock(D, H, T, HIDDEN, dtype=f64)
SPECS = EMBED.parameters() + BLOCK.parameters()
NAMES = [n for n, _ in SPECS]


def reference() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as data:
        return dict(data)


def weighted_output(*args: object) -> object:
    """Σ block(embed(ids)) · weights: a scalar whose gradient is the outputs' weights"""
    p = dict(zip(NAMES, args[:-2], strict=True))
    ids, weights = args[-2], args[-1]
    return nn.sum(BLOCK(p, EMBED(p, ids)) * weights)


LOSS = nn.lambda_(weighted_output, [s for _, s in SPECS] + [Tensor[nn.i64, 2], Tensor[f64, 3]])


def test_the_block_computes_what_pytorch_computes() -> None:
    ref = reference()
    forward = nn.lambda_(lambda *a: BLOCK(dict(zip(NAMES, a[:-1], strict=True)),
                                          EMBED(dict(zip(NAMES, a[:-1], strict=True)), a[-1])),
                         [s for _, s in SPECS] + [Tensor[nn.i64, 2]])
    out = forward(*(ref[f"param_{n}"] for n in NAMES), ref["ids"])
    np.testing.assert_allclose(out, ref["out"], rtol=1e-12, atol=1e-12)


def test_every_gradient_is_what_pytorch_computes() -> None:
    ref = reference()
    grad = nn.gradient(LOSS, wrt=tuple(range(len(NAMES))))
    got = grad(*(ref[f"param_{n}"] for n in NAMES), ref["ids"], ref["weights"])
    for name, g in zip(NAMES, got, strict=True):
        np.testing.assert_allclose(g, ref[f"grad_{name}"], rtol=1e-10, atol=1e-12,
                                   err_msg=name)
    # rows of tokens that do not occur get no gradient: the lookup's adjoint is a scatter
    unused = sorted(set(range(V)) - set(ref["ids"].ravel().tolist()))
    assert unused and not np.any(got[0][unused])


def test_three_adamw_steps_with_warm_up_and_cosine_decay_match_pytorch() -> None:
    ref = reference()
    optimizer = nn.AdamW(beta1=0.9, beta2=0.99, eps=1e-8, weight_decay=0.1, warmup=2, total=5)
    grad = nn.gradient(LOSS, wrt=tuple(range(len(NAMES))))
    state_specs = optimizer.state(SPECS)

    def step(*args: object) -> object:
        n, s = len(NAMES), len(state_specs)
        p = dict(zip(NAMES, args[:n], strict=True))
        state = dict(zip([k for k, _ in state_specs], args[n:n + s], strict=True))
        ids, weights, lr = args[n + s:]
        gs = grad(*args[:n], ids, weights)
        new_p, new_s = optimizer.update(p, dict(zip(NAMES, gs, strict=True)), state, lr,
                                        NAMES)
        return (*(new_p[k] for k in NAMES), *(new_s[k] for k, _ in state_specs))

    staged = nn.lambda_(step, [s for _, s in SPECS] + [s for _, s in state_specs] +
                        [Tensor[nn.i64, 2], Tensor[f64, 3], Tensor[f64, 0]])
    values = [ref[f"param_{n}"] for n in NAMES]
    state = [np.zeros(s.shape) for _, s in state_specs]
    for _ in range(3):
        out = staged(*values, *state, ref["ids"], ref["weights"], np.float64(0.05))
        values, state = list(out[:len(NAMES)]), list(out[len(NAMES):])
    # the key bias's gradient is round-off (softmax ignores a constant per row), which Adam's
    # m/√v turns into steps of order 1: parameters agree to 1e-7, not to the last bits
    for name, v in zip(NAMES, values, strict=True):
        np.testing.assert_allclose(v, ref[f"adamw_{name}"], rtol=1e-9, atol=1e-7,
                                   err_msg=name)


@pytest.mark.parametrize("t, expected", [(1, 0.5), (2, 1.0), (3, 0.5 * (1 + math.cos(math.pi / 3))),
                                         (5, 0.0), (9, 0.0)])
def test_the_schedule_warms_up_linearly_then_decays_as_a_cosine(t: int, expected: float
                                                                 ) -> None:
    optimizer = nn.AdamW(warmup=2, total=5)
    s = nn.lambda_(lambda x: optimizer.schedule(x) * 1.0, [Tensor[f64, 0]])
    assert s(np.float64(t)) == pytest.approx(expected, abs=1e-15)


def test_gelu_and_layer_norm_follow_their_formulas() -> None:
    x = np.linspace(-4, 4, 9).reshape(3, 3)
    gelu = nn.lambda_(nn.gelu, [Tensor[f64, 2]])
    want = np.array([[v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in row] for row in x])
    np.testing.assert_allclose(gelu(x), want, rtol=1e-14)
    ln = nn.LayerNorm(3, dtype=f64)
    f = nn.lambda_(lambda g, b, v: ln({"ln_gain": g, "ln_bias": b}, v),
                   [Tensor[f64, 1], Tensor[f64, 1], Tensor[f64, 2]])
    g, b = np.array([1.0, 2.0, 0.5]), np.array([0.0, 1.0, -1.0])
    centered = x - x.mean(axis=1, keepdims=True)
    want = centered / np.sqrt((centered**2).mean(axis=1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(f(g, b, x), want, rtol=1e-12)


def test_a_position_attends_only_to_itself_and_earlier_ones() -> None:
    """Changing the last token changes only the last position's output."""
    ref = reference()
    forward = nn.lambda_(lambda *a: BLOCK(dict(zip(NAMES, a[:-1], strict=True)),
                                          EMBED(dict(zip(NAMES, a[:-1], strict=True)), a[-1])),
                         [s for _, s in SPECS] + [Tensor[nn.i64, 2]])
    params = [ref[f"param_{n}"] for n in NAMES]
    ids = ref["ids"].copy()
    before = forward(*params, ids)
    ids[:, -1] = (ids[:, -1] + 1) % V
    after = forward(*params, ids)
    np.testing.assert_array_equal(before[:, :-1], after[:, :-1])
    assert not np.allclose(before[:, -1], after[:, -1])


def test_heads_must_divide_the_width() -> None:
    with pytest.raises(ValueError, match="a divisor of its dim 10"):
        nn.CausalSelfAttention(10, 3, 4)
