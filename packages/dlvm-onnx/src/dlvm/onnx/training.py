"""ONNX's optimizer operators (domain `ai.onnx.preview.training`): `Adagrad`, `Momentum`
(standard and Nesterov) and `Adam`, one update of any number of tensors, as ONNX's reference
runtime computes it. Inputs are the learning rate R, the update count T, then the tensors X,
their gradients G and the optimizer's states, each group in the same order; outputs are the
new tensors, then the new states. T may be known only at run time: where the update depends
on T > 0 both forms are computed and one selected.
"""

from __future__ import annotations

import math

from dlvm.ir import Value

from .context import NodeContext
from .errors import Invalid
from .ops import converts

DOMAIN = "ai.onnx.preview.training"


def groups(c: NodeContext, states: int) -> list[list[Value]]:
    """[X…], [G…] and each state's tensors, from the inputs after R and T"""
    n_inputs = len(c.node.input) - 2
    if n_inputs <= 0 or n_inputs % (2 + states):
        raise Invalid(f"{c.node.op_type} needs R, T, then {2 + states} groups of equally many "
                      f"tensors; found {len(c.node.input)} inputs")
    n = n_inputs // (2 + states)
    return [[c.value(2 + g * n + k) for k in range(n)] for g in range(2 + states)]


def update_count(c: NodeContext, like: Value) -> tuple[Value, Value]:
    """T as a float of `like`'s type, and whether T > 0"""
    t = c.value(1)
    positive = c.b.greaterThan(t, c.number(0, t))
    return c.b.dataTypeCast(t, c.type_of(like).dtype), positive


def scalar_of(c: NodeContext, v: Value, like: Value) -> Value:
    """R (a scalar, or a one-element vector) in `like`'s data type"""
    t = c.type_of(v)
    if t.rank == 1 and t.shape[0] == 1:
        v = c.b.shapeCast(v, [])
    dt = c.type_of(like).dtype
    return v if c.type_of(v).dtype == dt else c.b.dataTypeCast(v, dt)


def regularized(c: NodeContext, x: Value, g: Value) -> Value:
    """norm_coefficient · x + g"""
    return c.b.add(c.b.multiply(c.number(c.attr("norm_coefficient", 0.0), x), x), g)


@converts("Adagrad")
def _adagrad(c: NodeContext) -> list[Value]:
    """r = R / (1 + T·decay_factor); H' = H + G̃²; X' = X − r·G̃ / (√H' + ε), G̃ = λX + G"""
    xs, gs, hs = groups(c, 1)
    b = c.b
    new_x, new_h = [], []
    for x, g, h in zip(xs, gs, hs, strict=True):
        t, _ = update_count(c, x)
        r = b.divide(scalar_of(c, c.value(0), x),
                     b.add(c.number(1, x), b.multiply(t, c.number(c.attr("decay_factor", 0.0),
                                                                   x))))
        gr = regularized(c, x, g)
        h2 = b.add(h, b.multiply(gr, gr))
        root = b.add(b.sqrt(h2), c.number(c.attr("epsilon", 0.0), x))
        new_x.append(b.subtract(x, b.divide(b.multiply(r, gr), root)))
        new_h.append(h2)
    return new_x + new_h


@converts("Momentum")
def _momentum(c: NodeContext) -> list[Value]:
    """V' = α·V + β'·G̃ (β' = β, or 1 at T = 0); X' = X − R·V' (standard) or
    X − R·(G̃ + α·V') (Nesterov)"""
    mode = c.attr("mode", "standard")
    if mode not in ("standard", "nesterov"):
        raise Invalid(f"Momentum's mode must be 'standard' or 'nesterov', found '{mode}'")
    xs, gs, vs = groups(c, 1)
    b = c.b
    new_x, new_v = [], []
    for x, g, v in zip(xs, gs, vs, strict=True):
        _, positive = update_count(c, x)
        alpha = c.number(c.attr("alpha", 0.0), x)
        beta = b.select(c.number(c.attr("beta", 0.0), x), c.number(1, x), positive)
        gr = regularized(c, x, g)
        v2 = b.add(b.multiply(alpha, v), b.multiply(beta, gr))
        step = v2 if mode == "standard" else b.add(gr, b.multiply(alpha, v2))
        new_x.append(b.subtract(x, b.multiply(scalar_of(c, c.value(0), x), step)))
        new_v.append(v2)
    return new_x + new_v


@converts("Adam")
def _adam(c: NodeContext) -> list[Value]:
    """V' = α·V + (1−α)·G̃; H' = β·H + (1−β)·G̃²; r = R·√(1−βᵀ)/(1−αᵀ) (R at T = 0);
    X' = (1 − norm_coefficient_post)·(X − r·V' / (√H' + ε))"""
    xs, gs, vs, hs = groups(c, 2)
    b = c.b
    a, beta_ = float(c.attr("alpha", 0.9)), float(c.attr("beta", 0.999))
    if a < 0 or beta_ < 0:
        raise Invalid("Adam's alpha and beta must not be negative")
    new_x, new_v, new_h = [], [], []
    for x, g, v, h in zip(xs, gs, vs, hs, strict=True):
        t, positive = update_count(c, x)
        gr = regularized(c, x, g)
        v2 = b.add(b.multiply(c.number(a, x), v), b.multiply(c.number(1 - a, x), gr))
        h2 = b.add(b.multiply(c.number(beta_, x), h),
                   b.multiply(c.number(1 - beta_, x), b.multiply(gr, gr)))
        root = b.add(b.sqrt(h2), c.number(c.attr("epsilon", 1e-6), x))
        r = scalar_of(c, c.value(0), x)

        def power(base: float, tf: Value = t, like: Value = x) -> Value:  # baseᵀ = e^(T·ln base)
            if base == 0:  # 0ᵀ = 0 for the T > 0 that use it
                return c.number(0, like)
            return b.exp(b.multiply(tf, c.number(math.log(base), like)))

        corrected = b.divide(b.multiply(r, b.sqrt(b.subtract(c.number(1, x), power(beta_)))),
                             b.subtract(c.number(1, x), power(a)))
        rate = b.select(corrected, r, positive)
        step = b.subtract(x, b.multiply(rate, b.divide(v2, root)))
        post = c.attr("norm_coefficient_post", 0.0)
        new_x.append(b.multiply(c.number(1 - post, x), step) if post else step)
        new_v.append(v2)
        new_h.append(h2)
    return new_x + new_v + new_h
