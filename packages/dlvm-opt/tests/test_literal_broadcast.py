"""literal-broadcast-promotion: splat operands become scalars only where the result type
stays; the literal instructions stay for dce; results are preserved."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.opt.testing import check_idempotent, check_preserves

PASS = "literal-broadcast-promotion"

# The original's literal_broadcasting_promotion.dl, ported: each literal splat feeding an
# element-wise instruction becomes a scalar in its users; reduceWindow is left alone.
ORIGINAL = """module "lbp"
stage raw

func @f: (<1 x 10 x f32>, <1 x 10 x i32>, <1 x 10 x bool>) -> (<1 x 10 x f32>, <1 x 10 x i32>, <1 x 10 x bool>, <1 x 10 x bool>, <1 x 10 x f32>) {
'entry(%x: <1 x 10 x f32>, %n: <1 x 10 x i32>, %m: <1 x 10 x bool>):
    %0.0 = literal 1: <1 x 10 x f32>
    %0.1 = add %x: <1 x 10 x f32>, %0.0: <1 x 10 x f32>
    %0.2 = literal 2: <1 x 10 x i32>
    %0.3 = multiply %0.2: <1 x 10 x i32>, %n: <1 x 10 x i32>
    %0.4 = literal true: <1 x 10 x bool>
    %0.5 = and %m: <1 x 10 x bool>, %0.4: <1 x 10 x bool>
    %0.6 = or %0.5: <1 x 10 x bool>, false: <1 x 10 x bool>
    %0.7 = lessThan %x: <1 x 10 x f32>, %0.0: <1 x 10 x f32>
    %0.8 = greaterThanOrEqual %n: <1 x 10 x i32>, %0.2: <1 x 10 x i32>
    %0.9 = and %0.7: <1 x 10 x bool>, %0.8: <1 x 10 x bool>
    %0.10 = reduceWindow %x: <1 x 10 x f32> by max init -inf: f32 dims 1, 2 strides 1, 1 padding half
    %0.11 = select %0.10: <1 x 10 x f32>, zero: <1 x 10 x f32> by %0.4: <1 x 10 x bool>
    return (%0.1: <1 x 10 x f32>, %0.3: <1 x 10 x i32>, %0.6: <1 x 10 x bool>, %0.9: <1 x 10 x bool>, %0.11: <1 x 10 x f32>): (<1 x 10 x f32>, <1 x 10 x i32>, <1 x 10 x bool>, <1 x 10 x bool>, <1 x 10 x f32>)
}
"""


def promoted(text: str) -> list[str]:
    module = ir.parse(text)
    ir.run_passes(module, PASS)
    return [ir.print_instruction(i).strip() for i in module.functions[0].instructions()]


def test_the_original_program() -> None:
    assert promoted(ORIGINAL) == [
        "%0.0 = literal 1: <1 x 10 x f32>",
        "%0.1 = add %x: <1 x 10 x f32>, 1: f32",
        "%0.2 = literal 2: <1 x 10 x i32>",
        "%0.3 = multiply 2: i32, %n: <1 x 10 x i32>",
        "%0.4 = literal true: <1 x 10 x bool>",
        "%0.5 = and %m: <1 x 10 x bool>, true: bool",
        "%0.6 = or %0.5: <1 x 10 x bool>, false: bool",
        "%0.7 = lessThan %x: <1 x 10 x f32>, 1: f32",
        "%0.8 = greaterThanOrEqual %n: <1 x 10 x i32>, 2: i32",
        "%0.9 = and %0.7: <1 x 10 x bool>, %0.8: <1 x 10 x bool>",
        "%0.10 = reduceWindow %x: <1 x 10 x f32> by max init -inf: f32 dims 1, 2 strides 1, 1 "
        "padding half",
        "%0.11 = select %0.10: <1 x 10 x f32>, 0.0: f32 by true: bool",
        "return (%0.1: <1 x 10 x f32>, %0.3: <1 x 10 x i32>, %0.6: <1 x 10 x bool>, "
        "%0.9: <1 x 10 x bool>, %0.11: <1 x 10 x f32>): (<1 x 10 x f32>, <1 x 10 x i32>, "
        "<1 x 10 x bool>, <1 x 10 x bool>, <1 x 10 x f32>)",
    ]
    check_preserves(ORIGINAL, PASS)
    check_idempotent(ORIGINAL, PASS)


def one(args: str, line: str, result: str) -> str:
    types = ", ".join(a.split(": ", 1)[1] for a in args.split("; "))
    return (f"func @f: ({types}) -> {result} {{\n'entry({', '.join(args.split('; '))}):\n"
            f"    {line}\n    return %r: {result}\n}}\n")


@pytest.mark.parametrize(("args", "line", "result", "expected"), [
    # a uniform tensor literal is a splat too
    ("%x: <2 x f32>", "%r = add %x: <2 x f32>, <-0.5: f32, -0.5: f32>: <2 x f32>", "<2 x f32>",
     "%r = add %x: <2 x f32>, -0.5: f32"),
    ("%x: <2 x 2 x f64>",
     "%r = multiply %x: <2 x 2 x f64>, <3: <2 x f64>, 3: <2 x f64>>: <2 x 2 x f64>",
     "<2 x 2 x f64>", "%r = multiply %x: <2 x 2 x f64>, 3: f64"),
    # a size-1 splat against a dynamic dimension keeps the type <_ x 4 x f32>
    ("%x: <_ x 4 x f32>", "%r = subtract %x: <_ x 4 x f32>, 2.0: <1 x 4 x f32>",
     "<_ x 4 x f32>", "%r = subtract %x: <_ x 4 x f32>, 2.0: f32"),
    # unchanged: the splat widens x (the result type would change)
    ("%x: <1 x 4 x f32>", "%r = add %x: <1 x 4 x f32>, 1.0: <3 x 4 x f32>", "<3 x 4 x f32>",
     None),
    ("%x: <_ x 4 x f32>", "%r = add %x: <_ x 4 x f32>, 1.0: <3 x 4 x f32>", "<3 x 4 x f32>",
     None),
    ("%x: f32", "%r = add %x: f32, 1.0: <4 x f32>", "<4 x f32>", None),
    # unchanged: not a splat, a scalar already, not an element-wise binary instruction
    ("%x: <2 x f32>", "%r = add %x: <2 x f32>, <1: f32, 2: f32>: <2 x f32>", "<2 x f32>", None),
    ("%x: <2 x f32>", "%r = add %x: <2 x f32>, <0.0: f32, -0.0: f32>: <2 x f32>", "<2 x f32>",
     None),
    ("%x: <2 x f32>", "%r = add %x: <2 x f32>, 1.0: f32", "<2 x f32>", None),
    ("%x: <2 x 2 x f32>", "%r = dot %x: <2 x 2 x f32>, 1.0: <2 x 2 x f32>", "<2 x 2 x f32>",
     None),
])
def test_cases(args: str, line: str, result: str, expected: str | None) -> None:
    text = one(args, line, result)
    module = ir.parse(text)
    (record,) = ir.run_passes(module, PASS)
    got = ir.print_instruction(next(module["f"].instructions())).strip()
    assert got == (expected or line)
    assert record.changed == (expected is not None)
    assert record.stats["operands promoted"] == (expected is not None)
    check_preserves(text, PASS)


DIFFERENTIATED = """module "ad"
stage raw

func @layer: (<1 x 4 x f64>, <4 x 3 x f64>, <1 x 3 x f64>) -> f64 {
'entry(%x: <1 x 4 x f64>, %w: <4 x 3 x f64>, %b: <1 x 3 x f64>):
    %0.0 = dot %x: <1 x 4 x f64>, %w: <4 x 3 x f64>
    %0.1 = add %0.0: <1 x 3 x f64>, %b: <1 x 3 x f64>
    %0.2 = tanh %0.1: <1 x 3 x f64>
    %0.3 = reduce %0.2: <1 x 3 x f64> by add init 0.0: f64
    return %0.3: f64
}

[gradient @layer wrt 1, 2]
func @dlayer: (<1 x 4 x f64>, <4 x 3 x f64>, <1 x 3 x f64>) -> (<4 x 3 x f64>, <1 x 3 x f64>)
"""


def test_after_differentiation() -> None:
    _, after = check_preserves(DIFFERENTIATED, f"differentiation,{PASS}", rtol=1e-9)
    check_idempotent(ir.print_module(after), PASS)


# ---------------------------------------------------------------- random programs

SPLATS = ["1.5: {t}", "zero: {t}", "-2.0: {t}"]
OPS = ["add", "subtract", "multiply", "divide", "max", "lessThan", "select"]


@st.composite
def programs(draw: st.DrawFn) -> str:
    """Straight-line code on %x: <2 x 3 x f64>, mixing splats of several shapes (some of
    which widen the operand) into element-wise instructions."""
    lines, cur, cur_t = [], "%x", "<2 x 3 x f64>"
    for n in range(draw(st.integers(1, 5))):
        shape = draw(st.sampled_from(["<1 x 3 x f64>", "<2 x 3 x f64>", "<2 x 1 x f64>",
                                      "<1 x 1 x f64>"]))
        splat = draw(st.sampled_from(SPLATS)).format(t=shape)
        if draw(st.booleans()):
            lines.append(f"    %s{n} = literal {splat}")
            splat = f"%s{n}: {shape}"
        op = draw(st.sampled_from(OPS))
        a, b = (f"{cur}: {cur_t}", splat) if draw(st.booleans()) else (splat, f"{cur}: {cur_t}")
        if op == "lessThan":
            lines.append(f"    %m{n} = lessThan {a}, {b}")
            mask_t = "<2 x 3 x bool>"
            lines.append(f"    %v{n} = select {cur}: {cur_t}, 0.5: f64 by %m{n}: {mask_t}")
        elif op == "select":
            lines.append(f"    %v{n} = select {a}, {b} by true: <2 x 3 x bool>")
        else:
            lines.append(f"    %v{n} = {op} {a}, {b}")
        cur, cur_t = f"%v{n}", "<2 x 3 x f64>"
    return "\n".join([
        "func @f: (<2 x 3 x f64>, f64) -> <2 x 3 x f64> {",
        "'entry(%x: <2 x 3 x f64>, %k: f64):",
        "    %c = greaterThan %k: f64, 1.0: f64",
        "    conditional %c: bool then 'body() else 'exit(%x: <2 x 3 x f64>)",
        "'body():", *lines, f"    branch 'exit({cur}: {cur_t})",
        "'exit(%r: <2 x 3 x f64>):", "    return %r: <2 x 3 x f64>", "}", ""])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=programs(), seed=st.integers(0, 2**16))
def test_random_programs(text: str, seed: int) -> None:
    # exact: a splat and its scalar give each element the same operation on the same values
    check_preserves(text, PASS, seed=seed, trials=2, rtol=0, atol=0)
    check_idempotent(text, PASS)
