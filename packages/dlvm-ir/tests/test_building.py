"""Building a module without writing text: `Module`, `Builder`, types and literals are the
whole public path (what docs/plugins.md shows), control flow included."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir

POWER = """\
module "powers"
stage raw

func @power: (f32, i64) -> f32 {
'entry(%x: f32, %n: i64):
    branch 'loop(0: i64, 1.0: f32)
'loop(%i: i64, %acc: f32):
    %more = lessThan %i: i64, %n: i64
    conditional %more: bool then 'body() else 'done(%acc: f32)
'body():
    %next = add %i: i64, 1: i64
    %product = multiply %acc: f32, %x: f32
    branch 'loop(%next: i64, %product: f32)
'done(%result: f32):
    return %result: f32
}
"""


def build_power() -> ir.Module:
    """x to the n-th power, by a loop of multiplications."""
    f32, i64 = ir.scalar(ir.F32), ir.scalar(ir.I64)
    module = ir.Module("powers")
    b = ir.Builder(module)
    power = b.function("power", [f32, i64], f32, ["x", "n"])
    x, n = power.entry.arguments
    loop = b.block_in(power, "loop", [i64, f32], ["i", "acc"])
    body = b.block_in(power, "body")
    done = b.block_in(power, "done", [f32], ["result"])
    b.position_at_end(power.entry)
    b.branch((loop, [ir.constant(0, i64), ir.constant(1.0, f32)]))
    b.position_at_end(loop)
    i, acc = loop.arguments
    b.conditional(b.lessThan(i, n, name="more"), body, (done, [acc]))
    b.position_at_end(body)
    b.branch((loop, [b.add(i, 1, name="next"), b.multiply(acc, x, name="product")]))
    b.position_at_end(done)
    b.ret(done.arguments[0])
    return module


def test_a_built_module_verifies_and_prints_as_if_written() -> None:
    module = build_power()
    ir.verify(module)
    assert ir.print_module(module) == POWER
    assert ir.print_module(ir.parse(POWER)) == POWER


def test_a_built_module_runs() -> None:
    power = ir.compile(build_power(), target="interp")["power"]
    assert power(np.float32(1.5), 3) == pytest.approx(3.375)
    assert power(np.float32(2.0), 0) == pytest.approx(1.0)


def test_a_built_function_knows_its_module() -> None:
    module = build_power()
    assert module.functions[0].module is module
    assert module["power"].type == ir.FunctionType((ir.scalar(ir.F32), ir.scalar(ir.I64)),
                                                   ir.scalar(ir.F32))


def test_types_are_made_by_shape_and_data_type() -> None:
    assert str(ir.tensor((2, None, 3), ir.F16)) == "<2 x _ x 3 x f16>"
    assert ir.scalar(ir.BOOL) == ir.TensorType((), ir.BOOL)
