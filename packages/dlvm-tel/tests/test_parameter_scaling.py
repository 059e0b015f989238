"""The code for a model grows linearly with its number of parameters: the IR TEL generates
and the gradient the differentiation pass writes for it (250 parameters once made 125,000
`extract`s in `@loss_grad`). Counts of instructions, not seconds, so the test is exact and
quick; `benchmarks/tel_parameters.py` times 100, 300 and 1,000 parameters."""

from __future__ import annotations

from collections import Counter

import pytest

import dlvm.ir as ir
import dlvm.tel as tel


def layers(n: int) -> str:
    """n parameters: n/2 layers of a weight and a bias."""
    lines = ["module chain", "x: in[_ x 4]", "t: in[_ x 4]"]
    previous = "x"
    for i in range(n // 2):
        lines += [f"w{i}: param[4 x 4] = glorot", f"b{i}: param[4] = 0.0",
                  f"h{i}: hidden[_ x 4] = tanh({previous} . w{i} + b{i})"]
        previous = f"h{i}"
    return "\n".join([*lines, f"y: out[_ x 4] = {previous}", "loss l = mse(y, t)"]) + "\n"


def recurrent(n: int) -> str:
    """n biases read at every step of a recurrent block (the gradient's adjoints of the
    parameters cross the loop's blocks)."""
    lines = ["module seq", "xs: in[_ x _ x 4]", "t: in[_ x 4]", "wh: param[4 x 4] = glorot",
             *[f"b{i}: param[4] = 0.0" for i in range(n - 1)], "recurrent s {",
             "  h: hidden[_ x 4] = tanh(xs[s] + h[s-1] . wh + "
             + " + ".join(f"b{i}" for i in range(n - 1)) + ")", "}"]
    return "\n".join([*lines, "y: out[_ x 4] = h", "loss l = mse(y, t)"]) + "\n"


def sizes(text: str) -> tuple[int, int, Counter[str]]:
    """The instructions of the generated module, then of `@loss_grad` once differentiated
    (and those by opcode)."""
    module = tel.compile(text, "m.tel")
    generated = sum(len(b.instructions) for f in module.functions for b in f.blocks)
    ir.run_passes(module, "differentiation")
    grad = module.function("loss_grad")
    assert grad is not None
    ops = Counter(i.opcode for b in grad.blocks for i in b.instructions)
    return generated, sum(ops.values()), ops


@pytest.mark.parametrize("model", [layers, recurrent], ids=["layers", "recurrent"])
def test_code_and_gradient_grow_linearly_with_the_parameters(model: object) -> None:
    assert callable(model)
    small_code, small_grad, _ = sizes(model(20))
    large_code, large_grad, ops = sizes(model(80))
    assert large_code < 4.5 * small_code, (small_code, large_code)
    assert large_grad < 4.5 * small_grad, (small_grad, large_grad)
    assert ops["extract"] < 4 * 80, ops  # a few per parameter, not one per pair
