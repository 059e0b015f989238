"""`exe["f"]` returns a function's result in the structure of its type; `exe.call` returns
it flat."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.target import flatten_results, leaf_count, nest_results, result_structure
from dlvm.ir.testing import executable

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")

SOURCE = """
module "shapes"
stage raw

type $params = (<2 x f32>, f32)

func @loss_grad: (<2 x f32>, f32) -> ($params, f32) {
'entry(%w: <2 x f32>, %b: f32):
    %dw = multiply %w: <2 x f32>, 2: f32
    %db = add %b: f32, 1: f32
    %grads = literal (%dw: <2 x f32>, %db: f32): $params
    %loss = multiply %b: f32, 3: f32
    %out = literal (%grads: $params, %loss: f32): ($params, f32)
    return %out: ($params, f32)
}

func @pair: (f32) -> (f32, f32) {
'entry(%x: f32):
    %p = literal (%x: f32, %x: f32): (f32, f32)
    return %p: (f32, f32)
}

func @rows: (f32) -> [3 x (f32, i64)] {
'entry(%x: f32):
    %r = literal (%x: f32, 7: i64): (f32, i64)
    %a = literal [%r: (f32, i64), %r: (f32, i64), %r: (f32, i64)]: [3 x (f32, i64)]
    return %a: [3 x (f32, i64)]
}

func @one: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}

func @single: (f32) -> (f32) {
'entry(%x: f32):
    %t = literal (%x: f32): (f32)
    return %t: (f32)
}

func @nothing: (f32) -> () {
'entry(%x: f32):
    return
}
"""

W = np.array([1.0, -2.0], np.float32)
B = np.float32(0.5)


@pytest.fixture
def exe() -> ir.Executable:
    return executable(SOURCE)


def test_a_nested_tuple_result_comes_back_nested(exe: ir.Executable) -> None:
    """A gradient with the loss kept, (∂loss/∂params, loss), unpacks as it is written."""
    grads, loss = exe["loss_grad"](W, B)
    dw, db = grads
    np.testing.assert_array_equal(dw, 2 * W)
    assert db == B + 1
    assert loss == 3 * B


def test_call_stays_flat_whatever_the_nesting(exe: ir.Executable) -> None:
    dw, db, loss = exe.call("loss_grad", W, B)
    np.testing.assert_array_equal(dw, 2 * W)
    assert (db, loss) == (B + 1, 3 * B)


def test_a_flat_tuple_result_is_a_tuple_of_arrays(exe: ir.Executable) -> None:
    first, second = exe["pair"](np.float32(4))
    assert first == second == 4
    (only,) = exe["single"](np.float32(5))
    assert only == 5


def test_an_array_result_is_a_tuple_of_its_elements(exe: ir.Executable) -> None:
    rows = exe["rows"](np.float32(2))
    assert len(rows) == 3
    assert all(x == 2 and n == 7 for x, n in rows)


def test_one_result_is_an_array_and_none_is_none(exe: ir.Executable) -> None:
    one = exe["one"](np.float32(1.5))
    assert isinstance(one, np.ndarray) and one == 1.5
    assert exe["nothing"](np.float32(1)) is None


@pytest.mark.interp_only("about types and tuples, not a target")
def test_the_structure_follows_named_types_tuples_and_arrays() -> None:
    module = ir.parse(SOURCE)
    fn = module.function("loss_grad")
    assert fn is not None
    assert result_structure(module, fn.type_.result) == ((None, None), None)
    rows = module.function("rows")
    assert rows is not None
    assert result_structure(module, rows.type_.result) == ((None, None),) * 3
    assert leaf_count(((None, None),) * 3) == 6


@pytest.mark.interp_only("about types and tuples, not a target")
def test_nesting_undoes_flattening() -> None:
    value = (np.float32(1), ((np.float32(2), np.float32(3)), np.float32(4)))
    flat = flatten_results(value)
    assert nest_results((None, ((None, None), None)), flat) == value


@pytest.mark.interp_only("about types and tuples, not a target")
def test_a_target_returning_the_wrong_number_of_values_is_an_error() -> None:
    class Short(ir.Executable):
        def __init__(self) -> None:
            self.module = ir.parse(SOURCE)

        def call(self, name: str, *args: object) -> tuple[np.ndarray, ...]:
            return (np.array(1, np.float32),)

    with pytest.raises(ir.ExecutionError, match=r"'@loss_grad' returned 1 values for a "
                       r"result of type '\(\$params, f32\)', which holds 3"):
        Short()["loss_grad"](W, B)
