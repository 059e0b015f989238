"""`dlvm.ir.link`: an `extern` declaration in one module is resolved by the other's
definition — calls and derivative declarations included — and what is declared twice
otherwise is an error."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir

MODEL = """
module "model"
stage raw

type $p = (<3 x 2 x f64>, <2 x f64>)

func @forward: (<_ x 3 x f64>, $p) -> <_ x 2 x f64> {
'entry(%x: <_ x 3 x f64>, %params: $p):
    %w = extract 0 from %params: $p
    %b = extract 1 from %params: $p
    %z = dot %x: <_ x 3 x f64>, %w: <3 x 2 x f64>
    %bb = padShape %b: <2 x f64> at 0
    %y = add %z: <_ x 2 x f64>, %bb: <1 x 2 x f64>
    return %y: <_ x 2 x f64>
}
"""

LOSS = """
module "loss"
stage raw

type $p = (<3 x 2 x f64>, <2 x f64>)

func @forward: (<_ x 3 x f64>, $p) -> <_ x 2 x f64>

// the sum of squared errors of the model's outputs
func @sse: (<_ x 3 x f64>, <_ x 2 x f64>, $p) -> f64 {
'entry(%x: <_ x 3 x f64>, %t: <_ x 2 x f64>, %params: $p):
    %y = apply @forward(%x: <_ x 3 x f64>, %params: $p) -> <_ x 2 x f64>
    %d = subtract %y: <_ x 2 x f64>, %t: <_ x 2 x f64>
    %s = multiply %d: <_ x 2 x f64>, %d: <_ x 2 x f64>
    %r = reduce %s: <_ x 2 x f64> by add init 0.0: f64
    return %r: f64
}

[gradient @sse wrt 2]
func @dsse: (<_ x 3 x f64>, <_ x 2 x f64>, $p) -> ($p)
"""


def test_an_extern_declaration_becomes_the_definition() -> None:
    pytest.importorskip("dlvm.ad", reason="'@dsse' is differentiated by dlvm-ad")
    module = ir.link(ir.parse(MODEL), ir.parse(LOSS), "loss.dl")
    ir.run_passes(module, "verify")
    assert [f.name for f in module.functions] == ["forward", "sse", "dsse"]
    assert str(ir.parse(str(module))) == str(module)
    rng = np.random.default_rng(0)
    x, t = rng.standard_normal((4, 3)), rng.standard_normal((4, 2))
    w, b = rng.standard_normal((3, 2)), rng.standard_normal(2)
    exe = ir.compile(module, "interp")
    np.testing.assert_allclose(exe["sse"](x, t, (w, b)), np.sum((x @ w + b - t) ** 2))
    dw, db = exe.call("dsse", x, t, (w, b))
    np.testing.assert_allclose(dw, 2 * x.T @ (x @ w + b - t))
    np.testing.assert_allclose(db, 2 * (x @ w + b - t).sum(axis=0))


def test_the_definition_may_come_second() -> None:
    module = ir.link(ir.parse(LOSS), ir.parse(MODEL), "model.dl")
    ir.run_passes(module, "verify")
    assert module.function("forward").blocks


@pytest.mark.parametrize("change, message", [
    (("type $p = (<3 x 2 x f64>, <2 x f64>)", "type $p = (<3 x 2 x f64>)"),
     "type '\\$p' is declared differently"),
    (("func @forward: (<_ x 3 x f64>, $p) -> <_ x 2 x f64>\n",
      "func @forward: (<_ x 3 x f64>, $p) -> <_ x 3 x f64>\n"), "'@forward' has type"),
])
def test_conflicting_declarations_are_errors(change: tuple[str, str], message: str) -> None:
    with pytest.raises(ir.DlvmError, match=message):
        ir.link(ir.parse(MODEL), ir.parse(LOSS.replace(*change)), "loss.dl")


def test_a_function_defined_twice_is_an_error() -> None:
    with pytest.raises(ir.DlvmError, match="'@forward' is defined in both modules"):
        ir.link(ir.parse(MODEL), ir.parse(MODEL), "again.dl")
