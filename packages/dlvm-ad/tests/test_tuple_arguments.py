"""Gradients with respect to a tuple argument: a model's parameters packed in one value
(`type $params = (…)`), whose derivative is the tuple of its elements' derivatives —
directly, and through a call that passes the tuple on."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ad.testing import check_gradient

MODEL = """
module "m"
stage raw

type $m_params = (<3 x 4 x f64>, <4 x f64>)

func @loss: (<_ x 3 x f64>, <_ x 4 x f64>, $m_params) -> f64 {
'entry(%x: <_ x 3 x f64>, %y: <_ x 4 x f64>, %params: $m_params):
    %w = extract 0 from %params: $m_params
    %b = extract 1 from %params: $m_params
    %z = dot %x: <_ x 3 x f64>, %w: <3 x 4 x f64>
    %bb = padShape %b: <4 x f64> at 0
    %a = add %z: <_ x 4 x f64>, %bb: <1 x 4 x f64>
    %t = tanh %a: <_ x 4 x f64>
    %d = subtract %t: <_ x 4 x f64>, %y: <_ x 4 x f64>
    %s = multiply %d: <_ x 4 x f64>, %d: <_ x 4 x f64>
    %r = reduce %s: <_ x 4 x f64> by add init 0.0: f64
    return %r: f64
}

[gradient @loss wrt 2, 0 keeping 0]
func @loss_grad: (<_ x 3 x f64>, <_ x 4 x f64>, $m_params) -> ($m_params, <_ x 3 x f64>, f64)

func @outer: (<_ x 3 x f64>, <_ x 4 x f64>, $m_params) -> f64 {
'entry(%x: <_ x 3 x f64>, %y: <_ x 4 x f64>, %p: $m_params):
    %l = apply @loss(%x: <_ x 3 x f64>, %y: <_ x 4 x f64>, %p: $m_params) -> f64
    %s = multiply %l: f64, %l: f64
    return %s: f64
}

[gradient @outer wrt 2]
func @douter: (<_ x 3 x f64>, <_ x 4 x f64>, $m_params) -> ($m_params)
"""


def arguments() -> list[object]:
    rng = np.random.default_rng(0)
    return [rng.standard_normal((5, 3)), rng.standard_normal((5, 4)),
            (rng.standard_normal((3, 4)), rng.standard_normal(4))]


@pytest.mark.parametrize("f, df", [("loss", "loss_grad"), ("outer", "douter")])
def test_the_derivative_of_a_tuple_argument_is_a_tuple(f: str, df: str) -> None:
    results = check_gradient(ir.parse(MODEL), f, df, arguments())
    assert [r.shape for r in results[:2]] == [(3, 4), (4,)]


def test_the_generated_function_keeps_the_declared_alias() -> None:
    module = ir.parse(MODEL)
    ir.run_passes(module, "differentiation")
    entry = module.function("loss_grad").blocks[0]
    assert str(entry.arguments[2].type) == "$m_params"


def test_a_tuple_holding_a_non_float_is_not_differentiable() -> None:
    text = MODEL.replace("type $m_params = (<3 x 4 x f64>, <4 x f64>)",
                         "type $m_params = (<3 x 4 x f64>, <4 x f64>, i64)")
    with pytest.raises(ir.DlvmError, match=r"argument 2 of type .* is not differentiable"):
        ir.run_passes(ir.parse(text), "verify")
