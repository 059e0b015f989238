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


def many_parameters(n: int, loop: bool, steps: int = 3) -> str:
    """`@f(x, p)` over a tuple `p` of n vectors, each read once (the first twice, the last
    of dynamic size not at all), in one block or in the body of a loop run `steps` times."""
    elements = ", ".join(["<2 x f64>"] * n + ["<_ x f64>"])
    start = "%s" if loop else "%x"
    body: list[str] = []
    state = start
    for k, i in enumerate([*range(n), 0]):
        body += [f"    %e{k} = extract {i} from %p: $p",
                 f"    %a{k} = add {state}: <2 x f64>, %e{k}: <2 x f64>",
                 f"    %t{k} = tanh %a{k}: <2 x f64>"]
        state = f"%t{k}"
    result = start if loop else state
    end = [f"    %q = multiply {result}: <2 x f64>, {result}: <2 x f64>",
           "    %r = reduce %q: <2 x f64> by add init 0.0: f64", "    return %r: f64"]
    if loop:
        body = ["    branch 'loop(0: i64, %x: <2 x f64>)",
                "'loop(%i: i64, %s: <2 x f64>):",
                f"    %more = lessThan %i: i64, {steps}: i64",
                "    conditional %more: bool then 'body() else 'done()",
                "'body():",
                *body,
                "    %i1 = add %i: i64, 1: i64",
                f"    branch 'loop(%i1: i64, {state}: <2 x f64>)",
                "'done():"]
    return "\n".join([
        'module "many"', "stage raw", f"type $p = ({elements})", "",
        "func @f: (<2 x f64>, $p) -> f64 {", "'entry(%x: <2 x f64>, %p: $p):", *body, *end, "}",
        "", "[gradient @f wrt 1]", "func @df: (<2 x f64>, $p) -> ($p)"]) + "\n"


def gradient_size(n: int, loop: bool) -> int:
    module = ir.parse(many_parameters(n, loop))
    ir.run_passes(module, "differentiation")
    return sum(len(b.instructions) for b in module.function("df").blocks)


@pytest.mark.parametrize("loop", [False, True], ids=["straight", "loop"])
def test_reading_a_tuple_element_by_element_differentiates_in_linear_size(loop: bool) -> None:
    """n elements read one by one once took n tuples of n elements in the reverse sweep (a
    model of 250 parameters: 125,000 extracts); now each read adds one adjoint."""
    small, large = gradient_size(25, loop), gradient_size(100, loop)
    assert large < 4.5 * small, (small, large)


@pytest.mark.parametrize(("loop", "steps"), [(False, 0), (True, 3), (True, 0)],
                         ids=["straight", "loop", "loop-never-run"])
def test_element_by_element_adjoints_are_the_gradient(loop: bool, steps: int) -> None:
    """Elements read twice, once, or never (zeros of the element's run-time shape, also when
    the adjoint crossed blocks, where zeros travel with size-1 dimensions)."""
    rng = np.random.default_rng(1)
    p = tuple([*(rng.standard_normal(2) * 0.5 for _ in range(4)), rng.standard_normal(3)])
    results = check_gradient(many_parameters(4, loop, steps), "f", "df",
                             [rng.standard_normal(2), p])
    assert results[-1].shape == (3,) and not results[-1].any()  # never read: zero
