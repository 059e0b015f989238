"""The code for a model grows linearly with its number of parameters: the IR TEL generates
and the gradient the differentiation pass writes for it (250 parameters once made 125,000
`extract`s in `@loss_grad`). Counts of instructions, not seconds, so the test is exact and
quick; `benchmarks/tel_parameters.py` times 100, 300 and 1,000 parameters."""

from __future__ import annotations

from collections import Counter

import pytest

import dlvm.ir as ir
import dlvm.tel as tel
from dlvm.tel.testing import layers, recurrent


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
