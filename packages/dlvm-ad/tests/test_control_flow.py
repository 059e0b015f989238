"""Gradients and tangents through branches, loops, early exits and calls."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ad import Generator
from dlvm.ad.testing import check_gradient, check_tangent
from dlvm.ir.testing import compile_for_test

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")

POWER_LOOP = """
module "loop"
stage raw

// sin(x) · ∏ exp(tanh(y)) · x over n steps: a loop whose trip count is an argument
func @p: (f64, i64) -> f64 {
'entry(%x: f64, %n: i64):
    %s = sin %x: f64
    branch 'loop(0: i64, %s: f64)
'loop(%i: i64, %y: f64):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body() else 'exit()
'body():
    %t = tanh %y: f64
    %e = exp %t: f64
    %y2 = multiply %e: f64, %x: f64
    %i2 = add %i: i64, 1: i64
    branch 'loop(%i2: i64, %y2: f64)
'exit():
    return %y: f64
}

[gradient @p wrt 0]
func @dp: (f64, i64) -> (f64)

[gradient @p wrt 0 keeping 0 seedable]
func @dp_seeded: (f64, i64, f64) -> (f64, f64)

[tangent @p wrt 0]
func @tp: (f64, i64, f64) -> (f64)
"""


@pytest.mark.parametrize("n", [0, 1, 2, 7])
def test_loop_with_a_data_dependent_trip_count(n: int) -> None:
    args = [np.float64(0.7), np.int64(n)]
    check_gradient(POWER_LOOP, "p", "dp", args)
    check_gradient(POWER_LOOP, "p", "dp_seeded", args, seed=np.float64(-1.5))
    check_tangent(POWER_LOOP, "p", "tp", args, [np.float64(1.0)])


def test_checkpointing_shrinks_the_tape_and_keeps_the_gradient() -> None:
    counts = {}
    for checkpoint in (False, True):
        module = ir.parse(POWER_LOOP)
        generator = Generator(module, checkpoint)
        generator.run()
        ir.verify(module)
        counts[checkpoint] = generator.tape_values
        exe = compile_for_test(module)
        grad = exe.call("dp", np.float64(0.7), np.int64(5))[0]
        expected = check_gradient(POWER_LOOP, "p", "dp", [np.float64(0.7), np.int64(5)])[0]
        np.testing.assert_allclose(grad, expected, rtol=1e-12)
    assert counts[True] < counts[False]


@pytest.mark.interp_only("checks the differentiation pass; compiles nothing")
def test_checkpoint_is_a_pass_option() -> None:
    module = ir.parse(POWER_LOOP)
    records = ir.run_passes(module, "differentiation{checkpoint=true}")
    assert module.stage == "optimizable"
    assert records


BRANCHES = """
module "branches"
stage raw

// |x|·x with an early return on one side: both directions of the branch
func @f: (<3 x f64>, f64) -> <3 x f64> {
'entry(%x: <3 x f64>, %k: f64):
    %c = greaterThan %k: f64, 0.0: f64
    conditional %c: bool then 'pos(%x: <3 x f64>) else 'neg()
'pos(%a: <3 x f64>):
    %s = sin %a: <3 x f64>
    %m = multiply %s: <3 x f64>, %k: f64
    return %m: <3 x f64>
'neg():
    %e = exp %x: <3 x f64>
    branch 'join(%e: <3 x f64>)
'join(%j: <3 x f64>):
    %r = multiply %j: <3 x f64>, %k: f64
    return %r: <3 x f64>
}

[gradient @f seedable]
func @df: (<3 x f64>, f64, <3 x f64>) -> (<3 x f64>, f64)

[tangent @f wrt 0, 1]
func @tf: (<3 x f64>, f64, <3 x f64>, f64) -> (<3 x f64>)
"""


@pytest.mark.parametrize("k", [1.3, -0.4])
def test_branch_taken_either_way_with_several_returns(k: float) -> None:
    x = np.array([0.3, -1.2, 2.0])
    check_gradient(BRANCHES, "f", "df", [x, np.float64(k)])
    check_tangent(BRANCHES, "f", "tf", [x, np.float64(k)], [np.array([1.0, 0.5, -2.0]),
                                                            np.float64(0.3)])


CALLS = """
module "calls"
stage raw

func @g: (f64, f64) -> f64 {
'entry(%a: f64, %b: f64):
    %p = multiply %a: f64, %b: f64
    %s = sin %p: f64
    return %s: f64
}

// a recursive function: r(x, n) = g(x, r(x, n − 1)), r(x, 0) = x
func @r: (f64, i64) -> f64 {
'entry(%x: f64, %n: i64):
    %c = lessThanOrEqual %n: i64, 0: i64
    conditional %c: bool then 'base() else 'step()
'base():
    return %x: f64
'step():
    %m = subtract %n: i64, 1: i64
    %inner = apply @r(%x: f64, %m: i64) -> f64
    %out = apply @g(%x: f64, %inner: f64) -> f64
    return %out: f64
}

[gradient @r wrt 0]
func @dr: (f64, i64) -> (f64)

[tangent @r wrt 0]
func @tr: (f64, i64, f64) -> (f64)
"""


@pytest.mark.parametrize("n", [0, 1, 4])
def test_calls_and_recursion(n: int) -> None:
    check_gradient(CALLS, "r", "dr", [np.float64(0.9), np.int64(n)])
    check_tangent(CALLS, "r", "tr", [np.float64(0.9), np.int64(n)], [np.float64(1.0)])


@pytest.mark.interp_only("checks the differentiation pass; compiles nothing")
def test_callee_derivatives_are_generated_once() -> None:
    module = ir.parse(CALLS)
    ir.run_passes(module, "differentiation")
    names = [f.name for f in module.functions]
    assert names.count("r_grad") == 1 and names.count("g_grad") == 1
    assert all(not f.is_declaration for f in module.functions)


UNUSED = """
module "unused"
stage raw

func @f: (f64, <2 x f64>) -> f64 {
'entry(%x: f64, %unused: <2 x f64>):
    %y = exp %x: f64
    return %y: f64
}

[gradient @f]
func @df: (f64, <2 x f64>) -> (f64, <2 x f64>)
"""


def test_an_argument_the_output_does_not_depend_on_gets_a_zero_adjoint() -> None:
    out = check_gradient(UNUSED, "f", "df", [np.float64(0.2), np.array([1.0, 2.0])])
    np.testing.assert_array_equal(out[1], [0.0, 0.0])  # nothing flows back: exactly zero


HIGHER = """
module "higher"
stage raw

func @f: (f64) -> f64 {
'entry(%x: f64):
    %s = sin %x: f64
    %e = exp %x: f64
    %y = multiply %s: f64, %e: f64
    return %y: f64
}

[gradient @f]
func @d1: (f64) -> (f64)

[gradient @d1 from 0]
func @d2: (f64) -> (f64)

[gradient @d2 from 0]
func @d3: (f64) -> (f64)
"""


def test_third_order_derivatives() -> None:
    # f = sin·exp: f' = eˣ(sin + cos), f'' = 2eˣ cos, f''' = 2eˣ(cos − sin)
    exe = compile_for_test(ir.parse(HIGHER))
    x = 0.4
    e, s, c = np.exp(x), np.sin(x), np.cos(x)
    np.testing.assert_allclose(exe.call("d1", np.float64(x))[0], e * (s + c), rtol=1e-12)
    np.testing.assert_allclose(exe.call("d2", np.float64(x))[0], 2 * e * c, rtol=1e-12)
    np.testing.assert_allclose(exe.call("d3", np.float64(x))[0], 2 * e * (c - s), rtol=1e-12)


@pytest.mark.interp_only("checks the differentiation pass; compiles nothing")
def test_a_function_without_a_body_cannot_be_differentiated() -> None:
    module = ir.parse("""
[extern]
func @g: (f64) -> f64
[gradient @g]
func @dg: (f64) -> (f64)
""")
    with pytest.raises(ir.PassError, match="'@g': it has no body"):
        ir.run_passes(module, "differentiation", verify_each=False)


@pytest.mark.parametrize("n", [0, 1, 4])
def test_second_derivatives_through_a_loop_both_ways(n: int) -> None:
    # @dp keeps a tape on a stack; differentiating it again follows values through the
    # stack: reverse over reverse (an adjoint stack) and forward over reverse (a twin stack).
    text = POWER_LOOP + """
[gradient @dp from 0 wrt 0]
func @ddp: (f64, i64) -> (f64)
[tangent @dp from 0 wrt 0]
func @tdp: (f64, i64, f64) -> (f64)
"""
    args = [np.float64(0.7), np.int64(n)]
    module = ir.parse(text)
    check_gradient(module, "dp", "ddp", args, rtol=1e-5)
    check_tangent(ir.parse(text), "dp", "tdp", args, [np.float64(1.0)], rtol=1e-5)


@pytest.mark.interp_only("checks the differentiation pass; compiles nothing")
def test_values_stored_to_memory_are_refused_with_a_reason() -> None:
    text = """
func @f: (f64) -> f64 {
'entry(%x: f64):
    %p = allocateStack f64 count 1
    store %x: f64 to %p: *f64
    %y = load %p: *f64
    return %y: f64
}
[gradient @f]
func @df: (f64) -> (f64)
"""
    with pytest.raises(ir.PassError, match="derivatives through memory are not supported"):
        ir.run_passes(ir.parse(text), "differentiation")


def test_a_second_derivative_of_a_recursive_function() -> None:
    text = CALLS + "\n[gradient @dr from 0 wrt 0]\nfunc @ddr: (f64, i64) -> (f64)\n"
    exe = compile_for_test(ir.parse(text))
    x, h = 0.9, 1e-5
    numeric = (exe.call("dr", np.float64(x + h), np.int64(2))[0]
               - exe.call("dr", np.float64(x - h), np.int64(2))[0]) / (2 * h)
    np.testing.assert_allclose(exe.call("ddr", np.float64(x), np.int64(2))[0], numeric,
                               rtol=1e-6)


# A `conditional` passes an argument to a loop header on one edge only. When the other edge
# is taken, the header parameter's adjoint (here that of %s, read again in the inner loop)
# is not the branch argument's: only the edge taken may pass it back. The reverse of 'ob
# cannot tell the edges apart; each such edge records itself on the tape.
ONE_EDGE_PASSES = """
module "edge"
stage raw

func @f: (f64, f64, i64) -> f64 {
'entry(%x: f64, %y: f64, %n: i64):
    branch 'oh(0: i64, %x: f64)
'oh(%i: i64, %s: f64):
    %ci = lessThan %i: i64, %n: i64
    conditional %ci: bool then 'ob() else 'done(%s: f64)
'ob():
    %b0 = tanh %x: f64
    %i1 = add %i: i64, 1: i64
    %c2 = lessThan %s: f64, %y: f64
    conditional %c2: bool then 'oh(%i1: i64, %b0: f64) else 'ob2()
'ob2():
    branch 'ih(0: i64, %b0: f64)
'ih(%j: i64, %u: f64):
    %cj = lessThan %j: i64, %i: i64
    conditional %cj: bool then 'ib() else 'ix()
'ib():
    %r0 = tanh %s: f64
    %j1 = add %j: i64, 1: i64
    branch 'ih(%j1: i64, %r0: f64)
'ix():
    branch 'oh(%i1: i64, %u: f64)
'done(%r: f64):
    return %r: f64
}

// both edges of one conditional reach the same block with other arguments
func @g: (f64, f64) -> f64 {
'entry(%x: f64, %y: f64):
    %c = lessThan %x: f64, %y: f64
    %a = sin %x: f64
    %b = multiply %x: f64, %y: f64
    conditional %c: bool then 'join(%a: f64) else 'join(%b: f64)
'join(%v: f64):
    %w = multiply %v: f64, %x: f64
    return %w: f64
}

[gradient @f wrt 0, 1]
func @df: (f64, f64, i64) -> (f64, f64)

[gradient @g wrt 0, 1]
func @dg: (f64, f64) -> (f64, f64)
"""


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("y", [0.5, 0.9])
def test_an_argument_passed_along_one_edge_gets_the_adjoint_only_when_taken(
        n: int, y: float) -> None:
    check_gradient(ONE_EDGE_PASSES, "f", "df", [np.float64(1.0), np.float64(y), np.int64(n)])


@pytest.mark.parametrize("x", [0.3, 1.7])
def test_two_edges_to_one_block_pass_back_only_the_taken_ones_arguments(x: float) -> None:
    check_gradient(ONE_EDGE_PASSES, "g", "dg", [np.float64(x), np.float64(1.1)])
