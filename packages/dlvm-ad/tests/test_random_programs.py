"""Hypothesis: random programs with branches and loops; gradients and tangents against
finite differences, and the duality ⟨s, J t⟩ = ⟨Jᵀ s, t⟩ between the two modes."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ad.testing import check_gradient, check_tangent
from dlvm.ir.strategies import branch_and_loop, loop_programs
from dlvm.ir.testing import compile_for_test

V = "<3 x f64>"
# Steps of a chain on %cur, each with its math: safe everywhere (no poles, bounded growth).
STEPS = {
    "sin": ["%{o} = sin %{c}: {V}"],
    "tanh": ["%{o} = tanh %{c}: {V}"],
    "cos": ["%{o} = cos %{c}: {V}"],
    "times-x": ["%{o} = multiply %{c}: {V}, %x: {V}"],
    "plus-k": ["%{o} = add %{c}: {V}, %k: f64"],
    "times-k": ["%{o} = multiply %{c}: {V}, %k: f64"],
    "square": ["%{o} = square %{c}: {V}"],
    "atan": ["%{o} = atan %{c}: {V}"],
    "reverse": ["%{o} = reverse %{c}: {V} along 0"],
}
DECLARATIONS = ["[gradient @f seedable]", f"func @df: ({V}, f64, i64, {V}) -> ({V}, f64)", "",
                "[tangent @f]", f"func @tf: ({V}, f64, i64, {V}, f64) -> ({V})", ""]


def program(then: list[str], other: list[str], body: list[str], after: list[str]) -> str:
    return branch_and_loop(STEPS, then, other, body, after, V, DECLARATIONS)


steps = st.lists(st.sampled_from(sorted(STEPS)), min_size=0, max_size=3)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(then=steps, other=steps, body=steps, after=steps, k=st.sampled_from([0.6, -0.8]),
       n=st.integers(0, 3), seed=st.integers(0, 2**16))
def test_random_branching_and_looping_programs(then: list[str], other: list[str],
                                               body: list[str], after: list[str], k: float,
                                               n: int, seed: int) -> None:
    text = program(then, other, body, after)
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, 3)
    args = [x, np.float64(k), np.int64(n)]
    s, t, tk = rng.standard_normal(3), rng.standard_normal(3), np.float64(rng.standard_normal())
    dx, dk = check_gradient(text, "f", "df", args, seed=s, rtol=1e-4, atol=1e-6)
    jt = check_tangent(text, "f", "tf", args, [t, tk], rtol=1e-4, atol=1e-6)
    # ⟨s, J t⟩ = ⟨Jᵀ s, t⟩
    np.testing.assert_allclose(np.dot(s, jt), np.dot(dx, t) + dk * tk, rtol=1e-9, atol=1e-9)


def test_the_generated_functions_verify_and_print_back() -> None:
    module = ir.parse(program(["sin", "times-k"], ["tanh"], ["square"], ["plus-k"]))
    ir.run_passes(module, "differentiation")
    again = ir.parse(ir.print_module(module))
    ir.verify(again)
    assert ir.print_module(again) == ir.print_module(module)


# ---------------------------------------------------------------- arbitrary control flow

CFG_DECLARATIONS = """
[gradient @f wrt 0, 1 seedable]
func @df: (f64, f64, i64, i64, f64) -> (f64, f64)

[tangent @f wrt 0, 1]
func @tf: (f64, f64, i64, i64, f64, f64) -> (f64)
"""


def away_from_kinks(check, x: float, y: float, n: int, k: int) -> None:  # type: ignore[no-untyped-def]
    """`check` at (x, y), or at a nearby point when (x, y) sits on a kink of `max` or on a
    branch boundary, where finite differences are meaningless."""
    try:
        check([np.float64(x), np.float64(y), np.int64(n), np.int64(k)])
    except AssertionError:
        check([np.float64(x + 1.3e-3), np.float64(y - 0.7e-3), np.int64(n), np.int64(k)])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=loop_programs(), x=st.floats(0.2, 1.5), y=st.floats(0.2, 1.5),
       n=st.integers(0, 3), k=st.integers(1, 3))
def test_random_control_flow_graphs(text: str, x: float, y: float, n: int, k: int) -> None:
    """Nested loops, `continue`, `break` out of two loops, early and several returns: both
    modes against finite differences, and checkpointing changes no result."""
    text = 'module "cfg"\nstage raw\n\n' + text + CFG_DECLARATIONS
    seed, tangents = np.float64(0.9), [np.float64(0.3), np.float64(-0.7)]
    away_from_kinks(lambda a: check_gradient(text, "f", "df", a, seed=seed, rtol=1e-4,
                                             atol=1e-6), x, y, n, k)
    away_from_kinks(lambda a: check_tangent(text, "f", "tf", a, tangents, rtol=1e-4,
                                            atol=1e-6), x, y, n, k)
    args = [np.float64(x), np.float64(y), np.int64(n), np.int64(k)]
    results = []
    for pipeline in ["differentiation", "differentiation{checkpoint=true}"]:
        module = ir.parse(text)
        ir.run_passes(module, pipeline)
        results.append(compile_for_test(module).call("df", *args, seed))
    np.testing.assert_allclose(results[1], results[0], rtol=1e-12)
