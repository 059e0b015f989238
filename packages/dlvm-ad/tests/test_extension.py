"""A plugin that adds an instruction adds its derivative rules to the same tables."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ad import ADJOINTS, TANGENTS, adjoint, tangent
from dlvm.ad.testing import check_gradient, check_tangent
from dlvm.ir.instructions.common import float_tensor, result_array

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")


@pytest.fixture
def cube() -> Iterator[None]:
    """`%y = cube %x: T`, y = x³, defined for the length of one test."""
    ir.define("cube", "$x", lambda inst, m: float_tensor(inst.x, m),
              traits=("pure", "elementwise"),
              evaluate=lambda inst, f: result_array(inst, f.get(inst.x) ** 3),
              summary="x³ (a test extension)")

    @adjoint("cube")
    def _cube(c, inst, dy):  # type: ignore[no-untyped-def]
        # dx = 3x²·dy
        x = c.primal(inst.x)
        return [(inst.x, c.b.multiply(dy, c.b.multiply(3.0, c.b.square(x))))]

    @tangent("cube")
    def _cube_t(c, inst):  # type: ignore[no-untyped-def]
        # t(x³) = 3x²·tx
        tx = c.tangent(inst.x)
        if tx is None:
            return None
        return c.b.multiply(tx, c.b.multiply(3.0, c.b.square(c.primal(inst.x))))

    try:
        yield
    finally:
        del ir.OPS["cube"]
        ADJOINTS.pop("cube", None)
        TANGENTS.pop("cube", None)


TEXT = """
func @f: (<3 x f64>) -> <3 x f64> {
'entry(%x: <3 x f64>):
    %y = cube %x: <3 x f64>
    %z = sin %y: <3 x f64>
    return %z: <3 x f64>
}
[gradient @f seedable]
func @df: (<3 x f64>, <3 x f64>) -> (<3 x f64>)
[tangent @f]
func @tf: (<3 x f64>, <3 x f64>) -> (<3 x f64>)
"""


@pytest.mark.usefixtures("cube")
def test_an_added_instruction_is_differentiated_by_its_own_rules() -> None:
    x = np.array([0.3, -0.5, 0.9])
    check_gradient(TEXT, "f", "df", [x])
    check_tangent(TEXT, "f", "tf", [x], [np.array([1.0, 2.0, -1.0])])


@pytest.mark.interp_only("checks the differentiation pass; compiles nothing")
def test_without_a_rule_the_error_names_the_instruction(cube: None) -> None:
    del ADJOINTS["cube"]
    with pytest.raises(ir.PassError, match="'cube' has no adjoint rule"):
        ir.run_passes(ir.parse(TEXT), "differentiation")
