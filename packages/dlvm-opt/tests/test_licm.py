"""licm: loop-invariant effect-free code moves to the preheader, innermost loops first; code
that may fail moves only out of the header; results are preserved."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import dlvm.ir as ir
from dlvm.ir.strategies import loop_programs
from dlvm.opt.testing import check_idempotent, check_preserves

PASS = "licm"


def run(text: str, pipeline: str = PASS) -> tuple[ir.Module, ir.PassRecord]:
    module = ir.parse(text)
    *_, record = ir.run_passes(module, pipeline)
    return module, record


def body(module: ir.Module, name: str = "f") -> str:
    return ir.print_function(module[name]).strip()


NESTED = """func @f: (f32, <2 x 2 x f32>, i64, i64) -> f32 {
'entry(%x: f32, %w: <2 x 2 x f32>, %n: i64, %k: i64):
    branch 'outer(0: i64, %x: f32)
'outer(%i: i64, %acc: f32):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'inner(0: i64, %acc: f32) else 'done()
'inner(%j: i64, %a: f32):
    %q = divide %n: i64, %k: i64
    %ww = dot %w: <2 x 2 x f32>, %w: <2 x 2 x f32>
    %s = reduce %ww: <2 x 2 x f32> by add init 0: f32
    %t = multiply %s: f32, %x: f32
    %u = dataTypeCast %i: i64 to f32
    %d = lessThan %j: i64, 3: i64
    %a2 = add %a: f32, %t: f32
    %a3 = add %a2: f32, %u: f32
    %j2 = add %j: i64, 1: i64
    conditional %d: bool then 'inner(%j2: i64, %a3: f32) else 'next()
'next():
    %i2 = add %i: i64, 1: i64
    %r = truncateDivide %n: i64, %k: i64
    branch 'outer(%i2: i64, %a: f32)
'done():
    return %acc: f32
}
"""


def test_nested_loops() -> None:
    """The inner loop gets a preheader; what does not depend on %i moves on out of the outer
    loop. The integer division leaves the inner header (it ran whenever the inner loop was
    entered) but not the outer loop, and the one in 'next stays: 'next may never run."""
    module, record = run(NESTED)
    assert body(module) == """func @f: (f32, <2 x 2 x f32>, i64, i64) -> f32 {
'entry(%x: f32, %w: <2 x 2 x f32>, %n: i64, %k: i64):
    %ww = dot %w: <2 x 2 x f32>, %w: <2 x 2 x f32>
    %s = reduce %ww: <2 x 2 x f32> by add init 0: f32
    %t = multiply %s: f32, %x: f32
    branch 'outer(0: i64, %x: f32)
'outer(%i: i64, %acc: f32):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'inner_preheader(0: i64, %acc: f32) else 'done()
'inner_preheader(%2^0: i64, %2^1: f32):
    %q = divide %n: i64, %k: i64
    %u = dataTypeCast %i: i64 to f32
    branch 'inner(%2^0: i64, %2^1: f32)
'inner(%j: i64, %a: f32):
    %d = lessThan %j: i64, 3: i64
    %a2 = add %a: f32, %t: f32
    %a3 = add %a2: f32, %u: f32
    %j2 = add %j: i64, 1: i64
    conditional %d: bool then 'inner(%j2: i64, %a3: f32) else 'next()
'next():
    %i2 = add %i: i64, 1: i64
    %r = truncateDivide %n: i64, %k: i64
    branch 'outer(%i2: i64, %a: f32)
'done():
    return %acc: f32
}"""
    assert record.stats == {"instructions hoisted": 8, "preheaders created": 1}
    check_preserves(NESTED, PASS)
    check_idempotent(NESTED, PASS)


WHAT_MOVES = """var @g: f32

func @pure: (f32) -> f32 {
'entry(%x: f32):
    %y = exp %x: f32
    return %y: f32
}

func @writes: (f32) -> f32 {
'entry(%x: f32):
    store %x: f32 to @g: *f32
    return %x: f32
}

func @f: (i64, i64, f32, <4 x f32>, <_ x f32>) -> f32 {
'entry(%n: i64, %k: i64, %x: f32, %xs: <4 x f32>, %d: <_ x f32>):
    branch 'loop(0: i64, 0: f32)
'loop(%i: i64, %acc: f32):
    %q = divide 100: i64, %k: i64
    %p = apply @pure(%x: f32) -> f32
    %r = modulo %i: i64, %k: i64
    %s = divide 7: i64, %k: i64
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body() else 'done()
'body():
    %m = multiply %k: i64, 3: i64
    %t = divide 100: i64, %k: i64
    %e0 = extract 0 from %xs: <4 x f32>
    %e1 = extract %k: i64 from %xs: <4 x f32>
    %dd = add %d: <_ x f32>, %d: <_ x f32>
    %w = apply @writes(%x: f32) -> f32
    %p2 = apply @pure(%x: f32) -> f32
    %h = load @g: *f32
    %a1 = add %acc: f32, %e0: f32
    %a2 = add %a1: f32, %p: f32
    %i2 = add %i: i64, 1: i64
    branch 'loop(%i2: i64, %a2: f32)
'done():
    return %acc: f32
}
"""


def test_what_moves() -> None:
    """Header: the division and the pure call come first and move; %s follows %r, which may
    fail and stays, so %s stays. Body: only what cannot fail moves (the multiply, the
    constant-index extract); not the division, the dynamic index, the dynamic-shape add,
    calls, a call with effects, a load."""
    module, record = run(WHAT_MOVES)
    assert body(module) == """func @f: (i64, i64, f32, <4 x f32>, <_ x f32>) -> f32 {
'entry(%n: i64, %k: i64, %x: f32, %xs: <4 x f32>, %d: <_ x f32>):
    %q = divide 100: i64, %k: i64
    %p = apply @pure(%x: f32) -> f32
    %m = multiply %k: i64, 3: i64
    %e0 = extract 0 from %xs: <4 x f32>
    branch 'loop(0: i64, 0: f32)
'loop(%i: i64, %acc: f32):
    %r = modulo %i: i64, %k: i64
    %s = divide 7: i64, %k: i64
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body() else 'done()
'body():
    %t = divide 100: i64, %k: i64
    %e1 = extract %k: i64 from %xs: <4 x f32>
    %dd = add %d: <_ x f32>, %d: <_ x f32>
    %w = apply @writes(%x: f32) -> f32
    %p2 = apply @pure(%x: f32) -> f32
    %h = load @g: *f32
    %a1 = add %acc: f32, %e0: f32
    %a2 = add %a1: f32, %p: f32
    %i2 = add %i: i64, 1: i64
    branch 'loop(%i2: i64, %a2: f32)
'done():
    return %acc: f32
}"""
    assert record.stats == {"instructions hoisted": 4}
    check_idempotent(WHAT_MOVES, PASS)


ZERO_TRIP = """func @f: (i64, i64, <4 x f32>, <_ x f32>) -> i64 {
'entry(%n: i64, %k: i64, %xs: <4 x f32>, %d: <_ x f32>):
    branch 'loop(0: i64, 0: i64)
'loop(%i: i64, %acc: i64):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body() else 'done()
'body():
    %q = divide 100: i64, %k: i64
    %e = extract %k: i64 from %xs: <4 x f32>
    %dd = add %d: <_ x f32>, %xs: <4 x f32>
    %acc2 = add %acc: i64, %q: i64
    %i2 = add %i: i64, 1: i64
    branch 'loop(%i2: i64, %acc2: i64)
'done():
    return %acc: i64
}
"""


@pytest.mark.parametrize("pipeline", [PASS, f"cfg-canonicalize,{PASS}"])
def test_loop_that_does_not_run(pipeline: str) -> None:
    """With n = 0 the body never runs: k = 0 (or 7, out of range) and a 3-element %d must not
    fail, so the division, the dynamic index and the dynamic-shape add stay in the loop."""
    module, record = run(ZERO_TRIP, pipeline)
    assert not record.changed
    exe = ir.compile(module, "interp")
    xs = np.ones(4, np.float32)
    for k in (0, 7):
        assert exe.call("f", np.int64(0), np.int64(k), xs, np.ones(3, np.float32))[0] == 0


def test_nothing_to_hoist_adds_no_preheader() -> None:
    text = """func @f: (i64) -> i64 {
'entry(%n: i64):
    %z = lessThan %n: i64, 0: i64
    conditional %z: bool then 'done(0: i64) else 'loop(0: i64)
'loop(%i: i64):
    %i2 = add %i: i64, 1: i64
    %c = lessThan %i2: i64, %n: i64
    conditional %c: bool then 'loop(%i2: i64) else 'done(%i2: i64)
'done(%r: i64):
    return %r: i64
}
"""
    module = ir.parse(text)
    before = ir.print_module(module)
    (record,) = ir.run_passes(module, PASS)
    assert not record.changed
    assert ir.print_module(module) == before


def test_existing_preheader_is_used() -> None:
    text = """func @f: (f64, i64) -> f64 {
'entry(%x: f64, %n: i64):
    %one = literal 1.0: f64
    branch 'loop(0: i64, %x: f64)
'loop(%i: i64, %s: f64):
    %inv = exp %x: f64
    %half = multiply %one: f64, 0.5: f64
    %s2 = add %s: f64, %inv: f64
    %s3 = multiply %s2: f64, %half: f64
    %i2 = add %i: i64, 1: i64
    %c = lessThan %i2: i64, %n: i64
    conditional %c: bool then 'loop(%i2: i64, %s3: f64) else 'done()
'done():
    return %s: f64
}
"""
    module, record = run(text)
    assert body(module).startswith("""func @f: (f64, i64) -> f64 {
'entry(%x: f64, %n: i64):
    %one = literal 1.0: f64
    %inv = exp %x: f64
    %half = multiply %one: f64, 0.5: f64
    branch 'loop(0: i64, %x: f64)
'loop(%i: i64, %s: f64):
    %s2 = add %s: f64, %inv: f64""")
    assert record.stats == {"instructions hoisted": 2}
    check_preserves(text, PASS)


LOOP = """module "loop"
stage raw

func @p: (f64, i64) -> f64 {
'entry(%x: f64, %n: i64):
    %s = sin %x: f64
    branch 'loop(0: i64, %s: f64)
'loop(%i: i64, %y: f64):
    %c = lessThan %i: i64, %n: i64
    conditional %c: bool then 'body() else 'exit()
'body():
    %t = tanh %y: f64
    %cx = cos %x: f64
    %e = exp %cx: f64
    %y2 = multiply %t: f64, %e: f64
    %i2 = add %i: i64, 1: i64
    branch 'loop(%i2: i64, %y2: f64)
'exit():
    return %y: f64
}

[gradient @p wrt 0]
func @dp: (f64, i64) -> (f64)
"""


@pytest.mark.parametrize("pipeline", [f"differentiation,{PASS}",
                                      f"differentiation,cfg-canonicalize,{PASS},cfg-simplify"])
def test_after_differentiation(pipeline: str) -> None:
    _, after = check_preserves(LOOP, pipeline, rtol=1e-9)
    check_idempotent(ir.print_module(after), PASS)
    hoisted = ir.print_function(after["p"]).split("'loop(")[0]
    assert "cos %x" in hoisted and "exp" in hoisted


# ---------------------------------------------------------------- random programs

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loop_programs())
def test_random_programs(text: str) -> None:
    check_preserves(text, PASS, trials=2)
    check_idempotent(text, PASS)
    check_preserves(text, f"cfg-canonicalize,{PASS},cfg-simplify", trials=1)
    # k = 0: a division by zero fails after the pass exactly when it failed before
    before, after = ir.parse(text), ir.parse(text)
    ir.run_passes(after, PASS)
    args = (np.float64(0.7), np.float64(1.1), np.int64(2), np.int64(0))
    outcomes = []
    for module in (before, after):
        try:
            outcomes.append(ir.compile(module, "interp").call("f", *args)[0])
        except ir.ExecutionError:
            outcomes.append("error")
    if "error" in outcomes:
        assert outcomes[0] == outcomes[1]
    else:
        np.testing.assert_allclose(outcomes[1], outcomes[0], rtol=1e-12)
