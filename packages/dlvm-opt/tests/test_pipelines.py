"""The named pipelines O0–O3: registered, usable inside any pipeline text, result-preserving
on random programs and on AD's output, and shrinking what AD leaves behind."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ir.strategies import branch_and_loop, loop_programs
from dlvm.ir.testing import mlp_cross_entropy
from dlvm.opt.metrics import size
from dlvm.opt.plugin import PIPELINES
from dlvm.opt.testing import check_idempotent, check_preserves


def differentiated(text: str) -> str:
    module = ir.parse(text)
    ir.run_passes(module, "differentiation")
    return ir.print_module(module)


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_pipelines_are_registered(name: str) -> None:
    assert ir.registry().has("pipeline", name)


@pytest.mark.parametrize("batch", ["_", "4"])
@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_mlp_gradient_keeps_its_results(level: str, batch: str) -> None:
    check_preserves(differentiated(mlp_cross_entropy(batch, inputs=6)), level, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("level", ["O1", "O2", "O3"])
def test_levels_are_idempotent_on_ad_output(level: str) -> None:
    check_idempotent(differentiated(mlp_cross_entropy("4", inputs=6)), level)


@pytest.mark.parametrize("batch", ["_", "4"])
def test_o2_and_o3_shrink_the_mlp_gradient(batch: str) -> None:
    """Forward recomputation, zero adjoints and `x + 0` accumulations go; each level computes
    no more than the one below it, and O3 gathers the element-wise work into kernels."""
    sizes = {}
    for level in ["", ",O1", ",O2", ",O3"]:
        module = ir.parse(mlp_cross_entropy(batch, inputs=6))
        ir.run_passes(module, "differentiation" + level)
        sizes[level] = size(module, "dloss")
    base = sizes[""].operations
    assert sizes[",O3"].operations <= sizes[",O2"].operations <= sizes[",O1"].operations < base
    assert sizes[",O2"].operations <= 0.9 * base
    assert sizes[",O3"].instructions < sizes[",O2"].instructions
    assert sizes[",O3"].kernels >= 5 and sizes[",O2"].kernels == 0


def test_static_batch_folds_the_row_count() -> None:
    """With a static batch the mean's divisor is a literal: no `unitCount` is left."""
    module = ir.parse(mlp_cross_entropy("4", inputs=6))
    ir.run_passes(module, "differentiation,O2")
    text = ir.print_function(module["dloss"])
    assert "unitCount" not in text and "dataTypeCast" not in text
    assert "0.25: f64" in text or "-0.25: f64" in text


def test_levels_inside_a_pipeline_text() -> None:
    """A level is a name like any pass: it nests inside longer pipelines and other levels."""
    module = ir.parse(mlp_cross_entropy(inputs=6))
    records = ir.run_passes(module, "differentiation,O1,O3,dce")
    names = [r.name for r in records]
    assert names[0] == "differentiation" and names[-1] == "dce"
    assert "fuse-elementwise" in names and "matrix-chain-reordering" in names
    ir.verify(module)
    again = ir.parse(ir.print_module(module))
    assert ir.print_module(again) == ir.print_module(module)


# ---------------------------------------------------------------- random programs

V = "<3 x f64>"
# Steps of a chain on %{c}, with redundancy for the passes to find: recomputation, identities,
# dead values and loop-invariant work.
STEPS = {
    "sin": ["%{o} = sin %{c}: {V}"],
    "times-x": ["%{o} = multiply %{c}: {V}, %x: {V}"],
    "plus-k": ["%{o} = add %{c}: {V}, %k: f64"],
    "plus-zero": ["%{o} = add %{c}: {V}, 0.0: f64"],
    "times-one": ["%{o} = multiply 1.0: f64, %{c}: {V}"],
    "invariant": ["%{o}i = exp %x: {V}", "%{o} = add %{c}: {V}, %{o}i: {V}"],
    "twice": ["%{o}a = tanh %{c}: {V}", "%{o}b = tanh %{c}: {V}",
              "%{o} = subtract %{o}a: {V}, %{o}b: {V}"],
    "dead": ["%{o}d = cos %{c}: {V}", "%{o} = square %{c}: {V}"],
    "folded": ["%{o}f = multiply 2.0: f64, 3.0: f64", "%{o} = multiply %{c}: {V}, %{o}f: f64"],
    "exp-log": ["%{o}e = exp %{c}: {V}", "%{o} = log %{o}e: {V}"],
}


def program(then: list[str], other: list[str], body: list[str], after: list[str]) -> str:
    return branch_and_loop(STEPS, then, other, body, after, V,
                           ["[gradient @f seedable]", f"func @df: ({V}, f64, i64, {V}) -> ({V}, f64)"])


steps = st.lists(st.sampled_from(sorted(STEPS)), min_size=0, max_size=3)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(then=steps, other=steps, body=steps, after=steps,
       level=st.sampled_from(["O1", "O2", "O3"]), seed=st.integers(0, 2**16))
def test_random_programs_and_their_gradients_keep_their_results(
        then: list[str], other: list[str], body: list[str], after: list[str], level: str,
        seed: int) -> None:
    text = differentiated(program(then, other, body, after))
    before, after_opt = check_preserves(text, level, functions=["df"], trials=1, seed=seed,
                                        rtol=1e-9, atol=1e-12)
    exe_before = ir.compile(before, "interp")
    exe_after = ir.compile(after_opt, "interp")
    rng = np.random.default_rng(seed)
    for k in (0.6, -0.8):  # both branches
        for n in (0, 2):  # the loop skipped and taken
            args = [rng.uniform(-1, 1, 3), np.float64(k), np.int64(n)]
            for name, extra in (("f", []), ("df", [rng.standard_normal(3)])):
                want = exe_before.call(name, *args, *extra)
                got = exe_after.call(name, *args, *extra)
                for g, w in zip(got, want, strict=True):
                    np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


CALLS = """
module "calls"
stage raw

func @predict: (<4 x 3 x f64>, <_ x 4 x f64>) -> <_ x 3 x f64> {
'entry(%w: <4 x 3 x f64>, %x: <_ x 4 x f64>):
    %z = dot %x: <_ x 4 x f64>, %w: <4 x 3 x f64>
    %h = tanh %z: <_ x 3 x f64>
    return %h: <_ x 3 x f64>
}

func @loss: (<4 x 3 x f64>, <_ x 4 x f64>) -> f64 {
'entry(%w: <4 x 3 x f64>, %x: <_ x 4 x f64>):
    %h = apply @predict(%w: <4 x 3 x f64>, %x: <_ x 4 x f64>) -> <_ x 3 x f64>
    %s = square %h: <_ x 3 x f64>
    %l = reduce %s: <_ x 3 x f64> by add init 0.0: f64
    return %l: f64
}

[gradient @loss wrt 0 keeping 0]
func @dloss: (<4 x 3 x f64>, <_ x 4 x f64>) -> (<4 x 3 x f64>, f64)
"""


def test_a_gradient_through_a_call_shares_the_forward_pass() -> None:
    """The callee's gradient is a helper marked `!inline`: after O2 the forward `dot` runs
    once, and the adjoint of `%x` (not a `wrt` argument) is never computed."""
    module = ir.parse(CALLS)
    ir.run_passes(module, "differentiation")
    helper = module["predict_grad"]
    assert "inline" in helper.attributes
    assert len(helper.type_.result.elements) == 1  # ∂/∂w only: %x does not vary
    ir.run_passes(module, "O2")
    dloss = ir.print_function(module["dloss"])
    assert dloss.count("= dot ") == 2  # x·w forward, xᵀ·dz backward
    assert "apply" not in dloss
    check_preserves(differentiated(CALLS), "O2", functions=["dloss"], rtol=1e-10, atol=1e-12)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=loop_programs(), level=st.sampled_from(["O2", "O3"]),
       checkpoint=st.booleans())
def test_gradients_of_arbitrary_control_flow_keep_their_results(text: str, level: str,
                                                                checkpoint: bool) -> None:
    """Nested loops, `break`, `continue` and several returns, differentiated (with or without
    checkpointing), then optimized."""
    text = ('module "cfg"\nstage raw\n\n' + text +
            "\n[gradient @f wrt 0, 1 seedable]\nfunc @df: (f64, f64, i64, i64, f64) -> (f64, f64)\n")
    module = ir.parse(text)
    ir.run_passes(module, f"differentiation{{checkpoint={str(checkpoint).lower()}}}")
    check_preserves(ir.print_module(module), level, trials=2, rtol=1e-9, atol=1e-12)
