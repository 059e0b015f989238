"""cfg-simplify: dead blocks go, branches fold, straight-line blocks merge, trampolines are
bypassed, uniform block arguments disappear; results are preserved."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ir.testing import COUNTED_LOOP
from dlvm.opt.testing import check_idempotent, check_preserves

PASS = "cfg-simplify"


def simplified(text: str) -> tuple[str, ir.PassRecord]:
    module = ir.parse(text)
    (record,) = ir.run_passes(module, PASS)
    body = ir.print_module(module).split("\n", 3)[3]  # drop the module and stage lines
    return body.strip(), record


# The original's cfg_simplification.dl (test 12), ported. The original stopped with 'then
# still branching to 'trampoline; but 'then (once 'next is merged into it) is itself a
# trampoline, so the fixed point sends both edges of the conditional straight to 'trampoline.
ORIGINAL = """module "cfg_simplification"
stage raw

func @foo: (i32) -> i32 {
'entry(%x: i32):
    %y = multiply %x: i32, 2: i32
    %c = lessThan %x: i32, 0: i32
    conditional %c: bool then 'then() else 'trampoline(%y: i32)
'unreachable():
    %z = add %x: i32, 1: i32
    branch 'cont(%z: i32)
'then():
    branch 'next()
'next():
    branch 'trampoline(%x: i32)
'trampoline(%x1: i32):
    branch 'cont(%x1: i32)
'cont(%x2: i32):
    return %x2: i32
}
"""


def test_the_original_program() -> None:
    body, record = simplified(ORIGINAL)
    assert body == """func @foo: (i32) -> i32 {
'entry(%x: i32):
    %y = multiply %x: i32, 2: i32
    %c = lessThan %x: i32, 0: i32
    conditional %c: bool then 'trampoline(%x: i32) else 'trampoline(%y: i32)
'trampoline(%x1: i32):
    return %x1: i32
}"""
    assert record.stats == {"unreachable blocks removed": 2, "blocks merged": 2,
                            "edges bypassing trampolines": 1}
    check_preserves(ORIGINAL, PASS)
    check_idempotent(ORIGINAL, PASS)


def fn(body: str, sig: str = "(i32) -> i32", args: str = "%x: i32") -> str:
    return f"func @f: {sig} {{\n'entry({args}):\n{body}}}\n"


CASES = [
    # a constant condition picks its target; the other becomes dead
    ("""    conditional true: bool then 'a() else 'b()
'a():
    return %x: i32
'b():
    %y = negate %x: i32
    return %y: i32
""", """'entry(%x: i32):
    return %x: i32"""),
    # both targets the same block with the same values: a branch (then merged)
    ("""    %c = lessThan %x: i32, 0: i32
    conditional %c: bool then 'a(%x: i32) else 'a(%x: i32)
'a(%v: i32):
    %w = add %v: i32, 1: i32
    return %w: i32
""", """'entry(%x: i32):
    %c = lessThan %x: i32, 0: i32
    %w = add %x: i32, 1: i32
    return %w: i32"""),
    # one value on every edge: the argument goes, the join stays
    ("""    %c = lessThan %x: i32, 0: i32
    conditional %c: bool then 'a() else 'j(%x: i32, 1: i32)
'a():
    %n = negate %x: i32
    branch 'j(%x: i32, %n: i32)
'j(%p: i32, %q: i32):
    %s = add %p: i32, %q: i32
    return %s: i32
""", """'entry(%x: i32):
    %c = lessThan %x: i32, 0: i32
    conditional %c: bool then 'a() else 'j(1: i32)
'a():
    %n = negate %x: i32
    branch 'j(%n: i32)
'j(%q: i32):
    %s = add %x: i32, %q: i32
    return %s: i32"""),
    # a loop-carried argument that only ever holds its initial value
    ("""    branch 'loop(0: i32, %x: i32)
'loop(%i: i32, %k: i32):
    %i2 = add %i: i32, %k: i32
    %c = lessThan %i2: i32, 10: i32
    conditional %c: bool then 'loop(%i2: i32, %k: i32) else 'done()
'done():
    return %i2: i32
""", """'entry(%x: i32):
    branch 'loop(0: i32)
'loop(%i: i32):
    %i2 = add %i: i32, %x: i32
    %c = lessThan %i2: i32, 10: i32
    conditional %c: bool then 'loop(%i2: i32) else 'done()
'done():
    return %i2: i32"""),
]


@pytest.mark.parametrize(("body", "expected"), CASES)
def test_cases(body: str, expected: str) -> None:
    text = fn(body)
    got, record = simplified(text)
    assert got == "func @f: (i32) -> i32 {\n" + expected + "\n}"
    assert record.changed
    check_preserves(text, PASS)
    check_idempotent(text, PASS)


UNCHANGED = [
    # a conditional to one block with different values; a loop header
    fn("""    %c = lessThan %x: i32, 0: i32
    conditional %c: bool then 'a(%x: i32) else 'a(1: i32)
'a(%v: i32):
    %w = negate %v: i32
    branch 'loop(%w: i32)
'loop(%i: i32):
    %i2 = add %i: i32, 1: i32
    %d = lessThan %i2: i32, 10: i32
    conditional %d: bool then 'loop(%i2: i32) else 'done()
'done():
    return %i2: i32
"""),
    # the value has another type than the argument: merging would drop the run-time check
    # of the static dimension (and change the type the users are written with)
    fn("""    branch 'a(%x: <_ x f32>)
'a(%v: <4 x f32>):
    %w = negate %v: <4 x f32>
    return %w: <4 x f32>
""", "(<_ x f32>) -> <4 x f32>", "%x: <_ x f32>"),
    # branchEnum binds its target's arguments: neither merged nor bypassed
    """enum $T {
    ?leaf(f32)
    ?pair(f32, f32)
}

func @g: ($T) -> f32 {
'entry(%t: $T):
    branchEnum %t: $T case ?leaf 'leaf case ?pair 'pair
'leaf(%v: f32):
    branch 'done(%v: f32)
'pair(%a: f32, %b: f32):
    %s = add %a: f32, %b: f32
    branch 'done(%s: f32)
'done(%r: f32):
    return %r: f32
}
""",
]


@pytest.mark.parametrize("text", UNCHANGED)
def test_unchanged(text: str) -> None:
    module = ir.parse(text)
    before = ir.print_module(module)
    (record,) = ir.run_passes(module, PASS)
    assert not record.changed
    assert ir.print_module(module) == before


def test_cycle_of_trampolines_ends() -> None:
    """An empty infinite loop made of trampolines is merged into a self-loop, not chased."""
    text = fn("""    %c = lessThan %x: i32, 0: i32
    conditional %c: bool then 'a() else 'done()
'a():
    branch 'b()
'b():
    branch 'a()
'done():
    return %x: i32
""")
    got, _ = simplified(text)
    assert "'a():\n    branch 'a()" in got
    assert "'b()" not in got
    check_idempotent(text, PASS)
    exe = ir.compile(ir.parse(check_idempotent(text, PASS)), "interp")
    assert exe.call("f", np.int32(5))[0] == 5




def test_after_differentiation() -> None:
    _, after = check_preserves(COUNTED_LOOP, f"differentiation,{PASS}", rtol=1e-9)
    check_idempotent(ir.print_module(after), PASS)
    before = ir.parse(COUNTED_LOOP)
    ir.run_passes(before, "differentiation")
    assert len(after["dp"].blocks) < len(before["dp"].blocks)


# ---------------------------------------------------------------- random programs

OPS = ["add", "subtract", "multiply", "max"]


@st.composite
def programs(draw: st.DrawFn) -> str:
    """Acyclic CFGs on (%x, %y: f64): blocks with arguments, straight-line code, branches
    and conditionals (constant, same-target, ordinary) forward to later blocks, early
    returns, trampolines and unreachable blocks."""
    n = draw(st.integers(2, 7))
    arity = [0] + [draw(st.integers(0, 2)) for _ in range(n - 1)]
    blocks = []
    for i in range(n):
        values = ["%x", "%y"] + [f"%a{i}_{k}" for k in range(arity[i])]
        lines = []
        for k in range(draw(st.sampled_from([0, 0, 1, 2]))):  # empty blocks: trampolines
            op = draw(st.sampled_from(OPS))
            a, b = draw(st.sampled_from(values)), draw(st.sampled_from(values))
            lines.append(f"    %v{i}_{k} = {op} {a}: f64, {b}: f64")
            values.append(f"%v{i}_{k}")

        def target(j: int, values: list[str] = values) -> str:
            args = ", ".join(draw(st.sampled_from([*values, "0.5"])) + ": f64"
                             for _ in range(arity[j]))
            return f"'b{j}({args})"

        def later(i: int = i) -> int:
            return min(n - 1, i + 1 + draw(st.integers(0, 2)))  # mostly near blocks

        kind = "return" if i == n - 1 else draw(st.sampled_from(
            ["branch", "branch", "conditional", "conditional", "same", "constant", "return"]))
        if kind == "return":
            lines.append(f"    return {draw(st.sampled_from(values))}: f64")
        elif kind == "branch":
            lines.append(f"    branch {target(later())}")
        else:
            if kind == "constant":
                cond = draw(st.sampled_from(["true", "false"]))
            else:
                a, b = draw(st.sampled_from(values)), draw(st.sampled_from(values))
                lines.append(f"    %c{i} = lessThan {a}: f64, {b}: f64")
                cond = f"%c{i}"
            t = target(later())
            e = t if kind == "same" else target(later())
            lines.append(f"    conditional {cond}: bool then {t} else {e}")
        params = ", ".join(f"%a{i}_{k}: f64" for k in range(arity[i]))
        header = "'entry(%x: f64, %y: f64):" if i == 0 else f"'b{i}({params}):"
        blocks.append("\n".join([header, *lines]))
    return "func @f: (f64, f64) -> f64 {\n" + "\n".join(blocks) + "\n}\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_programs(text: str) -> None:
    _, after = check_preserves(text, PASS, trials=2)
    check_idempotent(text, PASS)
    assert len(after["f"].blocks) <= len(ir.parse(text)["f"].blocks)


def test_a_join_whose_argument_is_read_later_is_no_trampoline() -> None:
    """'join holds only a branch, but 'done reads its argument: bypassing 'join would leave
    %a without a value (the verifier then rejects the function)."""
    text = fn("""    %c = lessThan %x: i32, 0: i32
    conditional %c: bool then 'neg() else 'pos()
'neg():
    %m = negate %x: i32
    branch 'join(%m: i32)
'pos():
    %p = add %x: i32, 1: i32
    branch 'join(%p: i32)
'join(%a: i32):
    branch 'loop(0: i32)
'loop(%i: i32):
    %more = lessThan %i: i32, 3: i32
    conditional %more: bool then 'body() else 'done()
'body():
    %next = add %i: i32, 1: i32
    branch 'loop(%next: i32)
'done():
    %r = add %a: i32, %i: i32
    return %r: i32
""")
    got, _ = simplified(text)
    assert "'join(%a: i32):\n    branch 'loop(0: i32)" in got
    check_preserves(text, PASS)
    check_idempotent(text, PASS)
