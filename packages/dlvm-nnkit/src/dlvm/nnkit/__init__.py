"""NNKit: a staged DSL embedded in Python that JIT-compiles through DLVM.

    from dlvm import nnkit as nn
    from dlvm.nnkit import Float1D, Float2D

    f = nn.lambda_(lambda x, w, b: x @ w + b.rank_lifted(), (Float2D, Float2D, Float1D))
    g = nn.lambda_(lambda x, w, b: nn.tanh(f[x, w, b]))      # staged application of f
    dg = nn.gradient(g, wrt=(1, 2), keeping=0)                # (dg/dw, dg/db, g(x, w, b))
    dg_dw, dg_db, result = dg[x, w, b]                        # JIT-compiled, then run

A staged function applied to arrays is staged into DLVM IR, compiled with `ir.compile`
(differentiation, optimization, the fastest installed target) once per argument shapes,
and run; `f.ir(...)` prints the IR it writes.
"""

from __future__ import annotations

from .ops import (
    add,
    concatenate,
    cos,
    cross_entropy,
    divide,
    dot,
    equal,
    erf,
    exp,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log_softmax,
    max,
    maximum,
    mean,
    minimum,
    multiply,
    negate,
    not_equal,
    pad_shape,
    power,
    rank_lifted,
    reduce,
    relu,
    reshape,
    select,
    sigmoid,
    sin,
    softmax,
    sqrt,
    square,
    squeeze,
    subtract,
    sum,
    tanh,
    transpose,
    where,
)
from .staging import (
    Rep,
    StagedFunction,
    StagingError,
    function,
    gradient,
    lambda_,
    tangent,
)
from .types import (
    Double,
    Double1D,
    Double2D,
    Double3D,
    Float,
    Float1D,
    Float2D,
    Float3D,
    Float4D,
    Int1D,
    Int2D,
    Tensor,
    TensorSpec,
    bool_,
    f16,
    f32,
    f64,
    i8,
    i16,
    i32,
    i64,
)

__all__ = [
    "Double", "Double1D", "Double2D", "Double3D", "Float", "Float1D", "Float2D", "Float3D",
    "Float4D", "Int1D", "Int2D", "Rep", "StagedFunction", "StagingError", "Tensor",
    "TensorSpec", "add", "bool_", "concatenate", "cos", "cross_entropy", "divide", "dot",
    "equal", "erf", "exp", "f16", "f32", "f64", "function", "gradient", "greater",
    "greater_equal", "i8", "i16", "i32", "i64", "lambda_", "less", "less_equal", "log",
    "log_softmax", "max", "maximum", "mean", "minimum", "multiply", "negate", "not_equal",
    "pad_shape", "power", "rank_lifted", "reduce", "relu", "reshape", "select", "sigmoid",
    "sin", "softmax", "sqrt", "square", "squeeze", "subtract", "sum", "tangent", "tanh",
    "transpose", "where",
]
