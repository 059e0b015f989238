"""The shift of softmax, log-softmax and logsumexp is a constant to AD (`invariance.py`):
found exactly where the derivative flowing into it is zero, and the derivatives then agree
with finite differences and, to rounding, with the derivatives that carry the shift."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ad import activity
from dlvm.ad.invariance import invariant_shifts
from dlvm.ad.testing import check_gradient, check_tangent
from dlvm.ir.testing import compile_for_test

# the body after the shift z = s − m, per variant; `%l` is the f64 result
TAILS = {
    "log_softmax_ce": """
    %ls = log %se: <{r}>
    %lsp = padShape %ls: <{r}> at {a}
    %logp = subtract %z: <{t}>, %lsp: <{k}>
    %p = multiply %logp: <{t}>, %y: <{t}>
    %l = reduce %p: <{t}> by add init 0.0: f64""",
    "softmax": """
    %sep = padShape %se: <{r}> at {a}
    %p = divide %e: <{t}>, %sep: <{k}>
    %q = multiply %p: <{t}>, %y: <{t}>
    %l = reduce %q: <{t}> by add init 0.0: f64""",
    "logsumexp": """
    %ls = log %se: <{r}>
    %lse = add %ls: <{r}>, %m: <{r}>
    %w = multiply %lse: <{r}>, %v: <{r}>
    %l = reduce %w: <{r}> by add init 0.0: f64""",
    # not invariant: z itself reaches the result
    "shift_used_directly": """
    %ls = log %se: <{r}>
    %zy = multiply %z: <{t}>, %y: <{t}>
    %a1 = reduce %zy: <{t}> by add init 0.0: f64
    %b1 = reduce %ls: <{r}> by add init 0.0: f64
    %l = subtract %b1: f64, %a1: f64""",
    # not invariant: log Σ exp z = log Σ exp s − m
    "log_sum_only": """
    %ls = log %se: <{r}>
    %w = multiply %ls: <{r}>, %v: <{r}>
    %l = reduce %w: <{r}> by add init 0.0: f64""",
    # not invariant: exp z without its normalization
    "unnormalized": """
    %q = multiply %e: <{t}>, %y: <{t}>
    %l = reduce %q: <{t}> by add init 0.0: f64""",
}
INVARIANT = ("log_softmax_ce", "softmax", "logsumexp")


def program(variant: str, rows: int, cols: int, axis: int, sum_axis: int | None = None
            ) -> str:
    """`@f(s, y, v)` applying `variant` along `axis` of an rows×cols `s` (the shift is the
    maximum along `axis`, the sum runs along `sum_axis`, by default the same)."""
    sum_axis = axis if sum_axis is None else sum_axis
    shape = [rows, cols]
    t = f"{rows} x {cols} x f64"
    r = f"{shape[1 - axis]} x f64"  # a row of maxima
    rs = f"{shape[1 - sum_axis]} x f64"
    k = f"{rows} x 1 x f64" if axis == 1 else f"1 x {cols} x f64"
    ks = f"{rows} x 1 x f64" if sum_axis == 1 else f"1 x {cols} x f64"
    tail = TAILS[variant].format(t=t, r=rs, k=ks, a=sum_axis)
    return f"""
module "shift"
stage raw

func @f: (<{t}>, <{t}>, <{r}>) -> f64 {{
'entry(%s: <{t}>, %y: <{t}>, %v: <{r}>):
    %m = reduce %s: <{t}> by max init -inf: f64 along {axis}
    %mp = padShape %m: <{r}> at {axis}
    %z = subtract %s: <{t}>, %mp: <{k}>
    %e = exp %z: <{t}>
    %se = reduce %e: <{t}> by add init 0.0: f64 along {sum_axis}{tail}
    return %l: f64
}}

[gradient @f wrt 0]
func @df: (<{t}>, <{t}>, <{r}>) -> (<{t}>)

[tangent @f wrt 0]
func @tf: (<{t}>, <{t}>, <{r}>, <{t}>) -> (f64)
"""


def shifts(text: str) -> set[str]:
    module = ir.parse(text)
    fn = module.function("f")
    assert fn is not None
    return {str(v.name) for v in invariant_shifts(fn, module)}


def inputs(rows: int, cols: int, axis: int, rng: np.random.Generator
           ) -> list[np.ndarray]:
    s = rng.standard_normal((rows, cols)) * 3
    y = rng.random((rows, cols))
    v = rng.standard_normal((rows, cols)[1 - axis])
    return [s, y, v]


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("variant", list(TAILS))
def test_found_exactly_where_the_derivative_is_zero(variant: str, axis: int) -> None:
    assert shifts(program(variant, 4, 3, axis)) == ({"m"} if variant in INVARIANT else set())


@pytest.mark.parametrize("variant", INVARIANT)
def test_not_where_the_sum_runs_along_another_axis(variant: str) -> None:
    assert shifts(program(variant, 3, 3, 1, sum_axis=0)) == set()


def test_not_where_the_shift_is_also_returned() -> None:
    text = program("log_softmax_ce", 4, 3, 1).replace(
        "-> f64 {", "-> (f64, <4 x f64>) {").replace(
        "    return %l: f64", "    %r = literal (%l: f64, %m: <4 x f64>): (f64, <4 x f64>)\n"
        "    return %r: (f64, <4 x f64>)")
    text = text[:text.index("[gradient")]
    assert shifts(text) == set()


def test_not_where_the_shift_varies_along_the_summed_axis() -> None:
    # a full-size shift: z = s − s·0.5 is not constant along the sum
    text = program("log_softmax_ce", 4, 3, 1).replace(
        "%mp = padShape %m: <4 x f64> at 1", "%mp = multiply %s: <4 x 3 x f64>, 0.5: f64"
    ).replace("%mp: <4 x 1 x f64>", "%mp: <4 x 3 x f64>")
    assert shifts(text) == set()


def test_the_gradient_has_no_max_backward() -> None:
    module = ir.parse(program("log_softmax_ce", 4, 3, 1))
    ir.run_passes(module, "differentiation")
    df = module.function("df")
    assert df is not None
    opcodes = {i.opcode for b in df.blocks for i in b.instructions}
    assert "equal" not in opcodes and "select" not in opcodes


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("variant", list(TAILS))
def test_derivatives_agree_with_finite_differences(variant: str, axis: int) -> None:
    rng = np.random.default_rng(7)
    args = inputs(4, 3, axis, rng)
    text = program(variant, 4, 3, axis)
    check_gradient(text, "f", "df", args, rtol=1e-6, atol=1e-8)
    check_tangent(text, "f", "tf", args, [rng.standard_normal((4, 3))], rtol=1e-6, atol=1e-8)


def derivatives(text: str, args: list[np.ndarray], keep_shift: bool,
                monkeypatch: pytest.MonkeyPatch) -> tuple[np.ndarray, np.ndarray]:
    with monkeypatch.context() as m:
        if keep_shift:
            m.setattr(activity, "invariant_shifts", lambda fn, module: set())
        exe = compile_for_test(ir.parse(text))
        tangent = np.ones_like(args[0])
        return exe.call("df", *args)[0], exe.call("tf", *args, tangent)[0]


@settings(max_examples=25, deadline=None)
@given(variant=st.sampled_from(INVARIANT), rows=st.integers(1, 5), cols=st.integers(1, 5),
       axis=st.integers(0, 1), seed=st.integers(0, 2**32 - 1), ties=st.booleans())
def test_same_derivatives_as_with_the_shift_carried(variant: str, rows: int, cols: int,
                                                    axis: int, seed: int, ties: bool) -> None:
    """Dropping the shift's derivative changes the results by rounding only, ties in the
    maximum included (where the carried derivative splits among the tied entries)."""
    rng = np.random.default_rng(seed)
    args = inputs(rows, cols, axis, rng)
    if ties:
        args[0] = np.round(args[0] / 3)
    text = program(variant, rows, cols, axis)
    with pytest.MonkeyPatch.context() as monkeypatch:
        dropped = derivatives(text, args, False, monkeypatch)
        carried = derivatives(text, args, True, monkeypatch)
    for a, b in zip(dropped, carried, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
