"""The interpreter's two ways in: an `observe` hook called after every instruction, and a
subclass that changes what some instructions compute."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.interp import Frame, InterpExecutable, Interpreter

MODULE = """\
func @square: (<3 x f32>) -> <3 x f32> {
'entry(%x: <3 x f32>):
    %y = multiply %x: <3 x f32>, %x: <3 x f32>
    return %y: <3 x f32>
}

func @f: (<3 x f32>) -> f32 {
'entry(%x: <3 x f32>):
    %sq = apply @square(%x: <3 x f32>) -> <3 x f32>
    %s = reduce %sq: <3 x f32> by add init 0.0: f32
    return %s: f32
}
"""

X = np.array([1.0, 2.0, 3.0], np.float32)


def test_observe_sees_every_instruction_with_its_value_in_order() -> None:
    seen: list[tuple[str, Any]] = []
    exe = ir.compile(ir.parse(MODULE), target="interp",
                     observe=lambda inst, frame, value: seen.append((inst.opcode, value)))
    assert exe["f"](X) == pytest.approx(14.0)
    assert [op for op, _ in seen] == ["multiply", "return", "apply", "reduce", "return"]
    np.testing.assert_array_equal(seen[0][1], X * X)
    assert seen[1][1] is None  # a terminator has no value
    assert float(seen[3][1]) == pytest.approx(14.0)


def test_the_frame_reads_the_operands_of_the_observed_instruction() -> None:
    operands: list[np.ndarray] = []

    def watch(inst: ir.Instruction, frame: Frame, value: Any) -> None:
        if inst.opcode == "multiply":
            operands.append(frame.get(inst.lhs))

    InterpExecutable(ir.parse(MODULE), observe=watch).call("f", X)
    np.testing.assert_array_equal(operands[0], X)


def test_without_an_observer_the_plain_walk_runs() -> None:
    class NoObserving(Interpreter):
        def execute_observed(self, inst: ir.Instruction, frame: Frame) -> Any:
            raise AssertionError("the observing walk ran without an observer")

    module = ir.parse(MODULE)
    assert NoObserving(module).call("f", [X]) == pytest.approx(14.0)


def test_an_observer_that_raises_stops_the_call() -> None:
    def fail(inst: ir.Instruction, frame: Frame, value: Any) -> None:
        raise ir.ExecutionError("seen enough")

    with pytest.raises(ir.ExecutionError, match="seen enough"):
        ir.compile(ir.parse(MODULE), target="interp", observe=fail)["f"](X)


def test_observe_must_be_a_function() -> None:
    with pytest.raises(ir.DlvmError, match="target option 'observe' must be a function"):
        ir.compile(ir.parse(MODULE), target="interp", observe="print")


class DoublingMultiply(Interpreter):
    """`multiply` computes twice the product; everything else as usual."""

    def evaluate(self, inst: ir.Instruction, frame: Frame) -> Any:
        if inst.opcode == "multiply":
            return 2 * frame.get(inst.lhs) * frame.get(inst.rhs)
        return super().evaluate(inst, frame)


def test_a_subclass_changes_what_one_instruction_computes() -> None:
    module = ir.parse(MODULE)
    exe = InterpExecutable(module, interpreter=DoublingMultiply(module))
    assert exe["f"](X) == pytest.approx(28.0)


def test_a_subclass_keeps_the_error_reporting_and_limits() -> None:
    module = ir.parse(MODULE, "m.dl")

    class Failing(Interpreter):
        def evaluate(self, inst: ir.Instruction, frame: Frame) -> Any:
            if inst.opcode == "reduce":
                raise ir.ExecutionError("no reductions here")
            return super().evaluate(inst, frame)

    with pytest.raises(ir.ExecutionError, match=r"m\.dl:10:10: 'reduce': no reductions here"):
        Failing(module).call("f", [X])
    with pytest.raises(ir.ExecutionError, match="exceeded the limit of 1 steps"):
        DoublingMultiply(module, max_steps=1).call("f", [X])
