"""TEL's functions: each name's arity and shape rule, in one table the checker and the
code generator share (the code generator attaches the IR it emits by the same names)."""

from __future__ import annotations

from dataclasses import dataclass

# the original's unary intrinsics, and the activations every model needs
UNARY = ("log", "exp", "tan", "tanh", "atan", "sin", "asin", "cos", "acos", "sqrt", "ceil",
         "floor", "sigmoid", "relu", "gelu")
BINARY = ("min", "max", "pow", "mod")  # element-wise, broadcasting
ROWWISE = ("softmax", "log_softmax", "layer_norm")  # along the last dimension
REDUCTIONS = ("sum", "mean")  # to a scalar
LOSSES = ("cross_entropy", "mse")  # (prediction, target) of one shape -> scalar
INITIALIZERS = ("random", "normal", "glorot")  # only as a parameter's initializer
# transformer pieces: (q, k, v, heads) -> shape of q, where heads is an integer constant (it
# shapes the code, so it is no value); (ids, table [V x D]) -> ids' shape + [D]
ATTENTION = ("causal_attention",)
EMBEDDING = ("embedding",)


@dataclass(frozen=True)
class Intrinsic:
    name: str
    arity: int
    rule: str  # "unary", "binary", "rowwise", "reduction", "loss", "attention", "embedding"
    float_only: bool


TABLE: dict[str, Intrinsic] = {
    **{n: Intrinsic(n, 1, "unary", n != "relu") for n in UNARY},
    **{n: Intrinsic(n, 2, "binary", False) for n in BINARY},
    **{n: Intrinsic(n, 1, "rowwise", True) for n in ROWWISE},
    **{n: Intrinsic(n, 1, "reduction", n == "mean") for n in REDUCTIONS},
    **{n: Intrinsic(n, 2, "loss", True) for n in LOSSES},
    **{n: Intrinsic(n, 4, "attention", True) for n in ATTENTION},
    **{n: Intrinsic(n, 2, "embedding", False) for n in EMBEDDING},
}
