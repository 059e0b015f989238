"""inline: calls to !inline and small non-recursive functions are replaced by the callee's
body (split at the call for multi-block callees); callees stay; results are preserved."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.opt.testing import check_idempotent, check_preserves

PASS = "inline"


def run(text: str, pipeline: str = PASS) -> tuple[ir.Module, ir.PassRecord]:
    module = ir.parse(text)
    *_, record = ir.run_passes(module, pipeline)
    return module, record


def body(module: ir.Module, name: str) -> str:
    return ir.print_function(module[name]).strip()


CALLEES = """func @abs: (f32) -> f32 {
'entry(%x: f32):
    %neg = lessThan %x: f32, 0: f32
    conditional %neg: bool then 'flip() else 'done(%x: f32)
'flip():
    %y = negate %x: f32
    branch 'done(%y: f32)
'done(%r: f32):
    return %r: f32
}

!inline
func @relu: (<_ x f32>) -> <_ x f32> {
'entry(%x: <_ x f32>):
    %pos = greaterThan %x: <_ x f32>, 0: f32
    %y = select %x: <_ x f32>, 0: f32 by %pos: <_ x bool>
    return %y: <_ x f32>
}

func @sq: (f32) -> f32 {
'entry(%x: f32):
    %y = multiply %x: f32, %x: f32
    return %y: f32
}

func @fact: (i64) -> i64 {
'entry(%n: i64):
    %c = lessThan %n: i64, 2: i64
    conditional %c: bool then 'base() else 'rec()
'base():
    return 1: i64
'rec():
    %m = subtract %n: i64, 1: i64
    %f = apply @fact(%m: i64) -> i64
    %r = multiply %n: i64, %f: i64
    return %r: i64
}
"""

MAIN = CALLEES + """
func @main: (f32, <_ x f32>, <4 x f32>, i64) -> (f32, <_ x f32>, <_ x f32>, i64) {
'entry(%x: f32, %v: <_ x f32>, %w: <4 x f32>, %n: i64):
    %y = apply @sq(%x: f32) -> f32
    %a = apply @abs(%y: f32) -> f32
    %b = apply @relu(%v: <_ x f32>) -> <_ x f32>
    %c = apply @relu(%w: <4 x f32>) -> <_ x f32>
    %f = apply @fact(%n: i64) -> i64
    %t = literal (%a: f32, %b: <_ x f32>, %c: <_ x f32>, %f: i64): (f32, <_ x f32>, <_ x f32>, i64)
    return %t: (f32, <_ x f32>, <_ x f32>, i64)
}
"""


def test_main() -> None:
    """@sq and the first @relu are copied in place (their results keep the calls' names);
    @abs splits the block, its return becoming a branch to 'abs.cont whose argument is %a;
    @relu called with a <4 x f32> keeps its entry block, whose argument checks the dimension
    as the call did; the recursive @fact stays a call. Clashing names get a suffix."""
    module, record = run(MAIN)
    assert body(module, "main") == """func @main: (f32, <_ x f32>, <4 x f32>, i64) -> (f32, <_ x f32>, <_ x f32>, i64) {
'entry(%x: f32, %v: <_ x f32>, %w: <4 x f32>, %n: i64):
    %y = multiply %x: f32, %x: f32
    %neg = lessThan %y: f32, 0: f32
    conditional %neg: bool then 'abs.flip() else 'abs.done(%y: f32)
'abs.flip():
    %y.1 = negate %y: f32
    branch 'abs.done(%y.1: f32)
'abs.done(%r: f32):
    branch 'abs.cont(%r: f32)
'abs.cont(%a: f32):
    %pos = greaterThan %v: <_ x f32>, 0: f32
    %b = select %v: <_ x f32>, 0: f32 by %pos: <_ x bool>
    branch 'relu.entry(%w: <4 x f32>)
'relu.entry(%x.1: <_ x f32>):
    %pos.1 = greaterThan %x.1: <_ x f32>, 0: f32
    %y.2 = select %x.1: <_ x f32>, 0: f32 by %pos.1: <_ x bool>
    branch 'relu.cont(%y.2: <_ x f32>)
'relu.cont(%c: <_ x f32>):
    %f = apply @fact(%n: i64) -> i64
    %t = literal (%a: f32, %b: <_ x f32>, %c: <_ x f32>, %f: i64): (f32, <_ x f32>, <_ x f32>, i64)
    return %t: (f32, <_ x f32>, <_ x f32>, i64)
}"""
    assert record.stats == {"calls inlined": 4}
    for name in ("abs", "relu", "sq", "fact"):  # never removed
        assert body(module, name) == body(ir.parse(MAIN), name)
    check_preserves(MAIN, PASS)
    check_preserves(MAIN, f"{PASS},cfg-simplify")
    check_idempotent(MAIN, PASS)


def test_callees_first() -> None:
    """@mid's own call is inlined before @mid is copied into @top, so no call remains."""
    text = """func @leaf: (f64) -> f64 {
'entry(%x: f64):
    %y = tanh %x: f64
    return %y: f64
}

func @mid: (f64) -> f64 {
'entry(%x: f64):
    %a = apply @leaf(%x: f64) -> f64
    %b = add %a: f64, %x: f64
    return %b: f64
}

func @top: (f64) -> f64 {
'entry(%x: f64):
    %r = apply @mid(%x: f64) -> f64
    %s = apply @mid(%r: f64) -> f64
    return %s: f64
}
"""
    module, record = run(text)
    assert body(module, "top") == """func @top: (f64) -> f64 {
'entry(%x: f64):
    %a = tanh %x: f64
    %r = add %a: f64, %x: f64
    %a.1 = tanh %r: f64
    %s = add %a.1: f64, %r: f64
    return %s: f64
}"""
    assert record.stats == {"calls inlined": 3}
    check_preserves(text, PASS)
    check_idempotent(text, PASS)


BIG = "\n".join(f"    %v{i} = add %v{i - 1}: f64, %x: f64" for i in range(1, 25))
THRESHOLD = f"""func @big: (f64) -> f64 {{
'entry(%x: f64):
    %v0 = add %x: f64, 1.0: f64
{BIG}
    return %v24: f64
}}

func @main: (f64) -> f64 {{
'entry(%x: f64):
    %r = apply @big(%x: f64) -> f64
    return %r: f64
}}
"""


@pytest.mark.parametrize(("pipeline", "inlined"), [
    (PASS, False),  # 25 instructions > 20
    (f"{PASS}{{threshold=25}}", True),
    (f"{PASS}{{threshold=0}}", False),
])
def test_threshold(pipeline: str, inlined: bool) -> None:
    module, record = run(THRESHOLD, pipeline)
    assert record.changed == inlined
    assert ("apply" in body(module, "main")) != inlined
    check_preserves(THRESHOLD, pipeline)


def test_inline_attribute_beats_threshold() -> None:
    text = "!inline\n" + THRESHOLD
    module, record = run(text, f"{PASS}{{threshold=0}}")
    assert record.changed
    assert "apply" not in body(module, "main")


NOT_INLINED = [
    # mutual recursion
    """func @even: (i64) -> bool {
'entry(%n: i64):
    %z = equal %n: i64, 0: i64
    conditional %z: bool then 'yes() else 'no()
'yes():
    return true: bool
'no():
    %m = subtract %n: i64, 1: i64
    %r = apply @odd(%m: i64) -> bool
    return %r: bool
}

!inline
func @odd: (i64) -> bool {
'entry(%n: i64):
    %z = equal %n: i64, 0: i64
    conditional %z: bool then 'yes() else 'no()
'yes():
    return false: bool
'no():
    %m = subtract %n: i64, 1: i64
    %r = apply @even(%m: i64) -> bool
    return %r: bool
}
""",
    # a kernel (fusion outlined it on purpose), an external function, a function value
    """!kernel
func @k: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %y = exp %x: <4 x f32>
    return %y: <4 x f32>
}

[extern]
func @ext: (f32) -> f32

func @id: (f32) -> f32 {
'entry(%x: f32):
    return %x: f32
}

func @main: (<4 x f32>, f32) -> <4 x f32> {
'entry(%x: <4 x f32>, %s: f32):
    %y = apply @k(%x: <4 x f32>) -> <4 x f32>
    %f = literal @id: (f32) -> f32
    %t = apply %f(%s: f32) -> f32
    %z = lessThan %t: f32, 0: f32
    conditional %z: bool then 'ext() else 'done()
'ext():
    %e = apply @ext(%s: f32) -> f32
    branch 'done()
'done():
    return %y: <4 x f32>
}
""",
    # the call is written with a less static result type than the callee's
    """func @g: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %y = negate %x: <4 x f32>
    return %y: <4 x f32>
}

func @main: (<4 x f32>) -> <_ x f32> {
'entry(%x: <4 x f32>):
    %y = apply @g(%x: <4 x f32>) -> <_ x f32>
    return %y: <_ x f32>
}
""",
]


@pytest.mark.parametrize("text", NOT_INLINED)
def test_not_inlined(text: str) -> None:
    module = ir.parse(text)
    before = ir.print_module(module)
    (record,) = ir.run_passes(module, PASS)
    assert not record.changed
    assert ir.print_module(module) == before


def test_void_callee_with_effects_and_several_returns() -> None:
    text = """var @g: f32

func @log: (f32) -> () {
'entry(%x: f32):
    %c = lessThan %x: f32, 0: f32
    conditional %c: bool then 'neg() else 'pos()
'neg():
    return
'pos():
    store %x: f32 to @g: *f32
    return
}

func @main: (f32) -> f32 {
'entry(%x: f32):
    apply @log(%x: f32) -> ()
    %v = load @g: *f32
    return %v: f32
}
"""
    module, record = run(text)
    assert record.stats == {"calls inlined": 1}
    assert body(module, "main") == """func @main: (f32) -> f32 {
'entry(%x: f32):
    %c = lessThan %x: f32, 0: f32
    conditional %c: bool then 'log.neg() else 'log.pos()
'log.neg():
    branch 'log.cont()
'log.pos():
    store %x: f32 to @g: *f32
    branch 'log.cont()
'log.cont():
    %v = load @g: *f32
    return %v: f32
}"""
    check_preserves(text, PASS)
    check_idempotent(text, PASS)


# Test 9 of the original: @f(x) = mul(x, x); its gradient calls the generated @mul_grad.
CALLS = """module "calls"
stage raw

func @mul: (f32, f32) -> f32 {
'entry(%x: f32, %y: f32):
    %0.0 = multiply %x: f32, %y: f32
    return %0.0: f32
}

func @f: (f32) -> f32 {
'entry(%x: f32):
    %0.0 = apply @mul(%x: f32, %x: f32) -> f32
    return %0.0: f32
}

[gradient @f]
func @f_grad: (f32) -> (f32)
"""


def test_after_differentiation() -> None:
    _, after = check_preserves(CALLS, f"differentiation,{PASS}")
    assert "apply" not in body(after, "f_grad")
    assert "apply" not in body(after, "f")
    check_idempotent(ir.print_module(after), PASS)
    check_preserves(CALLS, f"{PASS},differentiation")


# ---------------------------------------------------------------- random programs

BINARY = ["add", "subtract", "multiply", "max"]


def straight(draw: st.DrawFn, values: list[str], prefix: str, calls: list[str]) -> list[str]:
    """1–3 instructions on f64 values: arithmetic, tanh, or calls of earlier functions."""
    lines = []
    for k in range(draw(st.integers(1, 3))):
        name = f"%{prefix}{k}"
        a, b = draw(st.sampled_from(values)), draw(st.sampled_from(values))
        kind = draw(st.sampled_from(["binary", "binary", "tanh", "call"]))
        if kind == "call" and calls:
            callee = draw(st.sampled_from(calls))
            lines.append(f"    {name} = apply @{callee}({a}: f64, {b}: f64) -> f64")
        elif kind == "tanh":
            lines.append(f"    {name} = tanh {a}: f64")
        else:
            lines.append(f"    {name} = {draw(st.sampled_from(BINARY))} {a}: f64, {b}: f64")
        values.append(name)
    return lines


@st.composite
def modules(draw: st.DrawFn) -> str:
    """Functions @g0…@gN of (f64, f64) -> f64, each straight-line, a diamond joining with a
    block argument, or two returns; some `!inline`; each may call earlier ones; all called
    from @main. Value names repeat across functions, so inlining must rename."""
    out, names = [], []
    for g in range(draw(st.integers(1, 4))):
        values = ["%x", "%y"]
        lines = ["'entry(%x: f64, %y: f64):", *straight(draw, values, "v", names)]
        shape = draw(st.sampled_from(["straight", "diamond", "returns"]))
        if shape == "straight":
            lines.append(f"    return {values[-1]}: f64")
        else:
            lines.append(f"    %c = lessThan {values[-1]}: f64, %y: f64")
            then_values = list(values)
            then = straight(draw, then_values, "t", names)
            join = (f"branch 'join({then_values[-1]}: f64)" if shape == "diamond"
                    else f"return {then_values[-1]}: f64")
            other = "'join(%x: f64)" if shape == "diamond" else "'other()"
            lines += [f"    conditional %c: bool then 'then() else {other}", "'then():", *then,
                      f"    {join}"]
            if shape == "diamond":
                lines += ["'join(%j: f64):", "    %w = multiply %j: f64, %y: f64",
                          "    return %w: f64"]
            else:
                lines += ["'other():", "    %w = negate %y: f64", "    return %w: f64"]
        attribute = "!inline\n" if draw(st.booleans()) else ""
        out.append(f"{attribute}func @g{g}: (f64, f64) -> f64 {{\n" + "\n".join(lines) + "\n}")
        names.append(f"g{g}")
    values = ["%x", "%y"]
    main = straight(draw, values, "m", names)
    calls = [f"    %call{k} = apply @{g}({draw(st.sampled_from(values))}: f64, %x: f64) -> f64"
             for k, g in enumerate(names)]
    total = " ".join(f"%call{k}" for k in range(len(names)))
    adds, last = [], values[-1]
    for k, name in enumerate(total.split()):
        adds.append(f"    %sum{k} = add {last}: f64, {name}: f64")
        last = f"%sum{k}"
    out.append("func @main: (f64, f64) -> f64 {\n'entry(%x: f64, %y: f64):\n"
               + "\n".join([*main, *calls, *adds]) + f"\n    return {last}: f64\n}}")
    return "\n\n".join(out) + "\n"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(modules(), st.sampled_from([0, 4, 20, 1000]))
def test_random_programs(text: str, threshold: int) -> None:
    pipeline = f"{PASS}{{threshold={threshold}}}"
    _, after = check_preserves(text, pipeline, trials=2)
    check_idempotent(text, pipeline)
    if threshold == 1000:  # nothing is too big: no call is left
        assert "apply" not in ir.print_function(after["main"])
    check_preserves(text, f"{pipeline},cfg-simplify", trials=1)
