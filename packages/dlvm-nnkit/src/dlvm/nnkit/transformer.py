"""Transformer building blocks on the staged language: token embeddings, layer
normalization, GELU, causal multi-head self-attention, a pre-norm block, and AdamW with a
warm-up and cosine learning-rate schedule.

Layers follow `layers.py`'s protocol (`parameters()`, `init(rng)`, `layer(params, x)`). A
batch of sequences is [batch, context, d_model]; the context is static (the causal mask is a
constant), the batch may be dynamic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlvm.ir.runtime import numpy_dtype

from . import ops
from .checks import (
    POSITIVE,
    Interval,
    bad,
    check_int,
    check_name,
    check_rng,
    check_sequence,
)
from .layers import (
    ADAM_RULES,
    Dense,
    Params,
    _bias_correction,
    _checked_layer,
    _checked_numbers,
    _parameters_of,
)
from .types import TensorSpec, f32

ADAMW_RULES = {**ADAM_RULES, "weight_decay": Interval(0.0, math.inf)}


def gelu(x: Any) -> Any:
    """x·Φ(x) = ½x(1 + erf(x/√2)), the exact GELU (PyTorch's default)"""
    half = ops.multiply(x, 0.5)
    return half * (ops.erf(ops.multiply(x, 1.0 / math.sqrt(2.0))) + 1.0)


@dataclass(frozen=True)
class Embedding:
    """Rows of a [vocab, dim] table picked by integer token ids: a one-hot product, whose
    gradient adds each position's gradient into its token's row (a scatter-add)."""

    vocab: int
    dim: int
    name: str = "embed"
    dtype: Any = f32

    def __post_init__(self) -> None:
        _checked_layer(self, ("vocab", "dim"))

    def parameters(self) -> list[tuple[str, TensorSpec]]:
        return [(f"{self.name}_table", TensorSpec(self.dtype, (self.vocab, self.dim)))]

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """N(0, 0.02²), as GPT-2's"""
        check_rng(rng, "the generator of nnkit.Embedding.init")
        return {f"{self.name}_table": (0.02 * rng.standard_normal((self.vocab, self.dim))
                                       ).astype(numpy_dtype(self.dtype))}

    def __call__(self, params: Params, ids: Any) -> Any:
        p = _parameters_of(self, params)
        table = p[f"{self.name}_table"]
        rank = len(ids.shape)
        hot = ops.equal(ops.pad_shape(ids, rank), np.arange(self.vocab, dtype=np.int64))
        return ops.cast(hot, self.dtype) @ table  # [… x vocab] · [vocab x dim]


@dataclass(frozen=True)
class LayerNorm:
    """(x − mean) / √(var + ε) · gain + bias over the last axis (the biased variance)."""

    dim: int
    eps: float = 1e-5
    name: str = "ln"
    dtype: Any = f32

    def __post_init__(self) -> None:
        _checked_layer(self, ("dim",))
        _checked_numbers(self, {"eps": POSITIVE})

    def parameters(self) -> list[tuple[str, TensorSpec]]:
        return [(f"{self.name}_gain", TensorSpec(self.dtype, (self.dim,))),
                (f"{self.name}_bias", TensorSpec(self.dtype, (self.dim,)))]

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        dt = numpy_dtype(self.dtype)
        return {f"{self.name}_gain": np.ones(self.dim, dt),
                f"{self.name}_bias": np.zeros(self.dim, dt)}

    def __call__(self, params: Params, x: Any) -> Any:
        p = _parameters_of(self, params)
        last = len(x.shape) - 1
        centered = x - ops.pad_shape(ops.mean(x, last), last)
        var = ops.pad_shape(ops.mean(ops.square(centered), last), last)
        return centered / ops.sqrt(var + self.eps) * p[f"{self.name}_gain"] + \
            p[f"{self.name}_bias"]


@dataclass(frozen=True)
class CausalSelfAttention:
    """Multi-head self-attention in which each position sees itself and the ones before:
    softmax(q·kᵀ/√d_head + mask)·v per head, the heads joined and projected."""

    dim: int
    heads: int
    context: int
    name: str = "attn"
    dtype: Any = f32

    def __post_init__(self) -> None:
        _checked_layer(self, ("dim", "heads", "context"))
        if self.dim % self.heads:
            raise bad("the heads of nnkit.CausalSelfAttention",
                      f"a divisor of its dim {self.dim}", self.heads)

    def projections(self) -> list[str]:
        return ["q", "k", "v", "o"]

    def parameters(self) -> list[tuple[str, TensorSpec]]:
        out = []
        for w in self.projections():
            out += [(f"{self.name}_w{w}", TensorSpec(self.dtype, (self.dim, self.dim))),
                    (f"{self.name}_b{w}", TensorSpec(self.dtype, (self.dim,)))]
        return out

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        check_rng(rng, "the generator of nnkit.CausalSelfAttention.init")
        dt = numpy_dtype(self.dtype)
        out = {}
        for w in self.projections():
            out[f"{self.name}_w{w}"] = (0.02 * rng.standard_normal((self.dim, self.dim))
                                        ).astype(dt)
            out[f"{self.name}_b{w}"] = np.zeros(self.dim, dt)
        return out

    def __call__(self, params: Params, x: Any) -> Any:
        p = _parameters_of(self, params)
        n, h, t = self.name, self.heads, self.context
        d = self.dim // h

        def heads(w: str) -> Any:  # [batch, context, dim] → [batch, heads, context, d]
            y = x @ p[f"{n}_w{w}"] + p[f"{n}_b{w}"]
            return ops.transpose(ops.reshape(y, [None, t, h, d]), [0, 2, 1, 3])

        q, k, v = heads("q"), heads("k"), heads("v")
        scores = (q @ ops.transpose(k, [0, 1, 3, 2])) * (1.0 / math.sqrt(d))
        allowed = np.tril(np.ones((t, t), bool)).reshape(1, 1, t, t)
        weights = ops.softmax(ops.where(allowed, scores, -math.inf))
        joined = ops.reshape(ops.transpose(weights @ v, [0, 2, 1, 3]), [None, t, self.dim])
        return joined @ p[f"{n}_wo"] + p[f"{n}_bo"]


@dataclass(frozen=True)
class TransformerBlock:
    """A pre-norm decoder block: x + attention(LN(x)), then x + W₂·GELU(W₁·LN(x))."""

    dim: int
    heads: int
    context: int
    hidden: int
    name: str = "block"
    dtype: Any = f32

    def __post_init__(self) -> None:
        _checked_layer(self, ("dim", "heads", "context", "hidden"))

    def parts(self) -> list[Any]:
        n = self.name
        return [LayerNorm(self.dim, name=f"{n}_ln1", dtype=self.dtype),
                CausalSelfAttention(self.dim, self.heads, self.context, name=f"{n}_attn",
                                    dtype=self.dtype),
                LayerNorm(self.dim, name=f"{n}_ln2", dtype=self.dtype),
                Dense(self.dim, self.hidden, name=f"{n}_fc1", dtype=self.dtype),
                Dense(self.hidden, self.dim, name=f"{n}_fc2", dtype=self.dtype)]

    def parameters(self) -> list[tuple[str, TensorSpec]]:
        return [p for part in self.parts() for p in part.parameters()]

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {k: v for part in self.parts() for k, v in part.init(rng).items()}

    def __call__(self, params: Params, x: Any) -> Any:
        ln1, attn, ln2, fc1, fc2 = self.parts()
        x = x + attn(params, ln1(params, x))
        return x + fc2(params, gelu(fc1(params, ln2(params, x))))


@dataclass(frozen=True)
class AdamW:
    """Adam with decoupled weight decay (Loshchilov & Hutter) and a learning-rate schedule:
    linear warm-up over `warmup` steps, then a cosine decay to 0 at `total` steps (`total`
    0: constant after the warm-up). With step t and rate r_t = lr·s(t):
    p ← p − r_t·(m̂/(√v̂ + ε) + λ·p); `decay_names`, when given, are the parameters decayed
    (the others — biases, gains, embeddings — are not)."""

    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.01
    warmup: int = 0
    total: int = 0
    decay_names: Sequence[str] | None = None

    def __post_init__(self) -> None:
        _checked_numbers(self, ADAMW_RULES)
        check_int(self.warmup, "the warm-up steps of nnkit.AdamW", minimum=0)
        check_int(self.total, "the total steps of nnkit.AdamW", minimum=0)
        if self.decay_names is not None:
            names = check_sequence(self.decay_names, "the decayed parameters of nnkit.AdamW",
                                   "a list of parameter names")
            for k, n in enumerate(names):
                check_name(n, f"decayed parameter {k} of nnkit.AdamW")

    def state(self, params: Sequence[tuple[str, TensorSpec]]) -> list[tuple[str, TensorSpec]]:
        dtype = params[0][1].dtype if params else f32
        out = [(f"{n}_m", s) for n, s in params] + [(f"{n}_v", s) for n, s in params]
        return [*out, ("adamw_t", TensorSpec(dtype, ()))]

    def schedule(self, t: Any) -> Any:
        """s(t) for the step t = 1, 2, …"""
        s: Any = 1.0
        if self.warmup:
            s = ops.minimum(t * (1.0 / self.warmup), 1.0)
        if self.total > self.warmup:
            progress = ops.minimum(ops.maximum(t - float(self.warmup), 0.0) *
                                   (1.0 / (self.total - self.warmup)), 1.0)
            s = s * ((ops.cos(progress * math.pi) + 1.0) * 0.5)
        return s

    def update(self, p: Params, g: Params, state: Params, lr: Any,
               names: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        t = state["adamw_t"] + 1.0
        rate = lr * self.schedule(t)
        c1, c2 = _bias_correction(t, self.beta1), _bias_correction(t, self.beta2)
        decayed = set(names if self.decay_names is None else self.decay_names)
        new_p, new_s = {}, {"adamw_t": t}
        for n in names:
            m = state[f"{n}_m"] * self.beta1 + g[n] * (1.0 - self.beta1)
            v = state[f"{n}_v"] * self.beta2 + ops.square(g[n]) * (1.0 - self.beta2)
            new_s[f"{n}_m"], new_s[f"{n}_v"] = m, v
            step = (m / c1) / (ops.sqrt(v / c2) + self.eps)
            if self.weight_decay and n in decayed:
                step = step + p[n] * self.weight_decay
            new_p[n] = p[n] - step * rate
        return new_p, new_s
