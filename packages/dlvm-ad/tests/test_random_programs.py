"""Hypothesis: random programs with branches and loops; gradients and tangents against
finite differences, and the duality ⟨s, J t⟩ = ⟨Jᵀ s, t⟩ between the two modes."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ad.testing import check_gradient, check_tangent
from dlvm.ir.strategies import branch_and_loop

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
