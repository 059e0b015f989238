"""Generated TEL models of any number of parameter tensors, for the tests and benchmarks
that hold TEL's code generation and the gradient to linear growth in that number."""

from __future__ import annotations


def layers(n: int) -> str:
    """n parameters: n/2 layers of a 4 × 4 weight and a bias, each read once."""
    lines = ["module chain", "x: in[_ x 4]", "t: in[_ x 4]"]
    previous = "x"
    for i in range(n // 2):
        lines += [f"w{i}: param[4 x 4] = glorot", f"b{i}: param[4] = 0.0",
                  f"h{i}: hidden[_ x 4] = tanh({previous} . w{i} + b{i})"]
        previous = f"h{i}"
    return "\n".join([*lines, f"y: out[_ x 4] = {previous}", "loss l = mse(y, t)"]) + "\n"


def recurrent(n: int) -> str:
    """n parameters: a weight and n − 1 biases read at every step of a recurrent block (the
    gradient's adjoints of the parameters cross the loop's blocks)."""
    lines = ["module seq", "xs: in[_ x _ x 4]", "t: in[_ x 4]", "wh: param[4 x 4] = glorot",
             *[f"b{i}: param[4] = 0.0" for i in range(n - 1)], "recurrent s {",
             "  h: hidden[_ x 4] = tanh(xs[s] + h[s-1] . wh + "
             + " + ".join(f"b{i}" for i in range(n - 1)) + ")", "}"]
    return "\n".join([*lines, "y: out[_ x 4] = h", "loss l = mse(y, t)"]) + "\n"
