"""algebra-simplify: each rule on printed IR, the rules it must not apply, the web site's
gradient, results preserved (fixed programs, differentiated ones, random ones), idempotence."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.opt.testing import check_idempotent, check_preserves
from dlvm.opt.transforms.algebra_simplify import RULES, AlgebraSimplification

M = "<2 x 3 x f32>"


def function(args: str, body: list[str], result: str, ret: str = "%r") -> str:
    """A module with one function `@f(args) -> result` whose body ends by returning `ret`."""
    names = ", ".join(f"%{a.split(':')[0].strip()}: {a.split(':', 1)[1].strip()}"
                      for a in args.split(";"))
    types = ", ".join(a.split(":", 1)[1].strip() for a in args.split(";"))
    lines = [f"func @f: ({types}) -> {result} {{", f"'entry({names}):",
             *("    " + b for b in body), f"    return {ret}: {result}", "}"]
    return 'module "t"\nstage raw\n\n' + "\n".join(lines) + "\n"


def simplified(text: str, pipeline: str = "algebra-simplify") -> list[str]:
    """The instructions of @f after the pipeline, stripped."""
    module = ir.parse(text)
    ir.run_passes(module, pipeline)
    return [ir.print_instruction(i).strip() for i in module["f"].instructions()]


# (args, body, result type, expected instructions after simplification)
CASES = {
    "x + 0.0 → x (nsz)": (f"x: {M}", [f"%r = add 0.0: f32, %x: {M}"], M, [f"return %x: {M}"]),
    "x + (−0.0) → x": (f"x: {M}", [f"%r = add %x: {M}, -0.0: f32"], M, [f"return %x: {M}"]),
    "x · 1 with a splat": (f"x: {M}", [f"%r = multiply %x: {M}, 1.0: <1 x 3 x f32>"], M,
                           [f"return %x: {M}"]),
    "x / 1 and x − 0": (f"x: {M}", [f"%a = divide %x: {M}, 1: f32",
                                    f"%r = subtract %a: {M}, zero: {M}"], M,
                        [f"return %x: {M}"]),
    "x ^ 1": (f"x: {M}", [f"%r = power %x: {M}, 1.0: f32"], M, [f"return %x: {M}"]),
    "0 − x → −x": (f"x: {M}", [f"%z = literal -0.0: {M}", f"%r = subtract %z: {M}, %x: {M}"],
                   M, [f"%0.0 = negate %x: {M}", f"return %0.0: {M}"]),
    "x · (−1) → −x": ("x: i32", ["%r = multiply -1: i32, %x: i32"], "i32",
                      ["%0.0 = negate %x: i32", "return %0.0: i32"]),
    "x / 4 → x · 0.25": (f"x: {M}", [f"%r = divide %x: {M}, 4.0: f32"], M,
                         [f"%0.0 = multiply %x: {M}, 0.25: f32", f"return %0.0: {M}"]),
    "x ^ 2 → x · x": (f"x: {M}", [f"%r = power %x: {M}, 2: f32"], M,
                      [f"%0.0 = multiply %x: {M}, %x: {M}", f"return %0.0: {M}"]),
    "x ^ (−1) → 1 / x": ("x: f64", ["%r = power %x: f64, -1.0: f64"], "f64",
                         ["%0.0 = divide 1.0: f64, %x: f64", "return %0.0: f64"]),
    "x ^ 0 → 1": (f"x: {M}", [f"%r = power %x: {M}, 0.0: f32"], M, [f"return 1.0: {M}"]),
    "integer x · 0 and x − x": ("n: <4 x i32>", ["%a = multiply %n: <4 x i32>, 0: i32",
                                                 "%b = subtract %n: <4 x i32>, %n: <4 x i32>",
                                                 "%r = add %a: <4 x i32>, %b: <4 x i32>"],
                                "<4 x i32>", ["return 0: <4 x i32>"]),
    "booleans": ("m: <4 x bool>", ["%a = and %m: <4 x bool>, true: bool",
                                   "%b = or %a: <4 x bool>, %a: <4 x bool>",
                                   "%n = not %b: <4 x bool>", "%r = not %n: <4 x bool>"],
                 "<4 x bool>", ["return %m: <4 x bool>"]),
    "select": ("x: <4 x f32>; m: <4 x bool>",
               ["%a = select %x: <4 x f32>, %x: <4 x f32> by %m: <4 x bool>",
                "%r = select %a: <4 x f32>, 0.0: f32 by true: bool"], "<4 x f32>",
               ["return %x: <4 x f32>"]),
    "−(−x), min(x, x)": ("x: f32", ["%a = negate %x: f32", "%b = negate %a: f32",
                                    "%r = min %b: f32, %b: f32"], "f32", ["return %x: f32"]),
    "transposes": (f"x: {M}; v: <3 x f32>",
                   [f"%a = transpose %x: {M}", "%b = transpose %a: <3 x 2 x f32>",
                    "%c = transpose %v: <3 x f32>",
                    f"%r = literal (%b: {M}, %c: <3 x f32>): ({M}, <3 x f32>)"],
                   f"({M}, <3 x f32>)",
                   [f"%r = literal (%x: {M}, %v: <3 x f32>): ({M}, <3 x f32>)",
                    f"return %r: ({M}, <3 x f32>)"]),
    "reverse pairs": (f"x: {M}", [f"%a = reverse %x: {M} along 0, 1",
                                  f"%r = reverse %a: {M} along 1, 0"], M, [f"return %x: {M}"]),
    "dot of transposes": ("a: <3 x 4 x f32>; b: <2 x 3 x f32>",
                          ["%at = transpose %a: <3 x 4 x f32>",
                           "%bt = transpose %b: <2 x 3 x f32>",
                           "%r = dot %at: <4 x 3 x f32>, %bt: <3 x 2 x f32>"], "<4 x 2 x f32>",
                          ["%0.0 = dot %b: <2 x 3 x f32>, %a: <3 x 4 x f32>",
                           "%0.1 = transpose %0.0: <2 x 4 x f32>",
                           "return %0.1: <4 x 2 x f32>"]),
    "pad then squeeze": ("b: <10 x f32>", ["%p = padShape %b: <10 x f32> at 0",
                                           "%r = squeezeShape %p: <1 x 10 x f32> at 0"],
                         "<10 x f32>", ["return %b: <10 x f32>"]),
    "squeeze then pad": ("c: <3 x 1 x f32>", ["%s = squeezeShape %c: <3 x 1 x f32> at 1",
                                              "%r = padShape %s: <3 x f32> at 1"],
                         "<3 x 1 x f32>", ["return %c: <3 x 1 x f32>"]),
    "shapeCast chain": ("w: <3 x 4 x f32>", ["%a = shapeCast %w: <3 x 4 x f32> to 2 x 6",
                                             "%b = shapeCast %a: <2 x 6 x f32> to 12",
                                             "%r = shapeCast %b: <12 x f32> to 3 x 4"],
                        "<3 x 4 x f32>", ["return %w: <3 x 4 x f32>"]),
    "bitCast and dataTypeCast round trips": (
        f"x: {M}", [f"%a = bitCast %x: {M} to <2 x 3 x i32>",
                    f"%b = bitCast %a: <2 x 3 x i32> to {M}",
                    f"%r = dataTypeCast %b: {M} to f32"], M, [f"return %x: {M}"]),
    "reduce along unit dimensions": (
        "x: <1 x 4 x f32>", ["%r = reduce %x: <1 x 4 x f32> by max init -inf: f32 along 0"],
        "<4 x f32>", ["%0.0 = squeezeShape %x: <1 x 4 x f32> at 0", "return %0.0: <4 x f32>"]),
    "extract from literals and inserts": (
        "s: f32; k: i32", ["%t = literal (%s: f32, %k: i32): (f32, i32)",
                           "%i = insert 7: i32 to %t: (f32, i32) at 1",
                           "%a = extract 0 from %i: (f32, i32)",
                           "%b = extract 1 from %i: (f32, i32)",
                           "%c = extract 1 from 2.5: <4 x f32>",
                           "%d = dataTypeCast %b: i32 to f32",
                           "%e = add %a: f32, %c: f32",
                           "%r = add %e: f32, %d: f32"], "f32",
        ["%d = dataTypeCast 7: i32 to f32", "%e = add %s: f32, 2.5: f32",
         "%r = add %e: f32, %d: f32", "return %r: f32"]),
    "a broadcast by adding zeros, of a padded scalar": (
        "s: f32; y: <4 x f32>", ["%p = padShape %s: f32 at 0",
                                 "%b = add %p: <1 x f32>, 0.0: <4 x f32>",
                                 "%r = multiply %b: <4 x f32>, %y: <4 x f32>"], "<4 x f32>",
        ["%0.0 = multiply %s: f32, %y: <4 x f32>", "return %0.0: <4 x f32>"]),
    # the original's scalar_algsimp.dl @inference: w^0 → 1, 1^1 → 1, 1^2 → 1·1 → 1
    "power chain": ("w: f32", ["%a = power %w: f32, 0: f32", "%b = power %a: f32, 1: f32",
                               "%c = power %b: f32, 2: f32", "%r = cos %c: f32"], "f32",
                    ["%r = cos 1.0: f32", "return %r: f32"]),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_rewrites(case: str) -> None:
    args, body, result, expected = CASES[case]
    text = function(args, body, result)
    assert simplified(text) == expected
    check_preserves(text, "algebra-simplify")


# (args, body, result type): nothing applies
UNCHANGED = {
    "x · 0 for floats (∞·0 = NaN)": (f"x: {M}", [f"%r = multiply %x: {M}, 0.0: f32"], M),
    "x − x for floats (∞ − ∞ = NaN)": (f"x: {M}", [f"%r = subtract %x: {M}, %x: {M}"], M),
    "x / x for floats": ("x: f32", ["%r = divide %x: f32, %x: f32"], "f32"),
    "x + 0 that broadcasts x": ("x: f32", ["%r = add %x: f32, 0.0: <3 x f32>"], "<3 x f32>"),
    "x + 0 that fixes a dynamic dimension": (
        "x: <_ x 3 x f32>", ["%r = add %x: <_ x 3 x f32>, 0.0: <2 x 3 x f32>"], M),
    "exp(log x) without fast math": ("x: f32", ["%a = log %x: f32", "%r = exp %a: f32"], "f32"),
    "log(exp x) without fast math": ("x: f32", ["%a = exp %x: f32", "%r = log %a: f32"], "f32"),
    "x / 3 (1/3 is not exact)": ("x: f32", ["%r = divide %x: f32, 3.0: f32"], "f32"),
    "x ^ 0.5 (pow(−0, 0.5) = +0, sqrt(−0) = −0)": ("x: f32", ["%r = power %x: f32, 0.5: f32"],
                                                    "f32"),
    "integer x / (−1)": ("x: i8", ["%r = divide %x: i8, -1: i8"], "i8"),
    "a squeeze and pad at different axes": (
        "c: <1 x 1 x f32>", ["%s = squeezeShape %c: <1 x 1 x f32> at 0",
                             "%r = padShape %s: <1 x f32> at 1"], "<1 x 1 x f32>"),
    "a shapeCast through a dynamic shape": (
        "x: <_ x f32>", ["%a = shapeCast %x: <_ x f32> to _ x 2",
                         "%r = shapeCast %a: <_ x 2 x f32> to _"], "<_ x f32>"),
    "dot of transposes used elsewhere": (
        "a: <3 x 3 x f32>", ["%at = transpose %a: <3 x 3 x f32>",
                             "%d = dot %at: <3 x 3 x f32>, %at: <3 x 3 x f32>",
                             "%r = add %d: <3 x 3 x f32>, %at: <3 x 3 x f32>"], "<3 x 3 x f32>"),
    "reduce by a function": ("x: <1 x 4 x f32>", [
        "%r = reduce %x: <1 x 4 x f32> by @f2: (f32, f32) -> f32 init 0.0: f32 along 0"],
        "<4 x f32>"),
}

COMBINE = """
func @f2: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    %s = add %a: f32, %b: f32
    return %s: f32
}
"""


@pytest.mark.parametrize("case", sorted(UNCHANGED))
def test_rules_that_do_not_apply(case: str) -> None:
    args, body, result = UNCHANGED[case]
    text = function(args, body, result) + COMBINE
    module = ir.parse(text)
    before = ir.print_module(module)
    records = ir.run_passes(module, "algebra-simplify")
    assert not records[0].changed
    assert ir.print_module(module) == before


def test_signed_zeros_keeps_adding_positive_zero() -> None:
    text = function("x: f32", ["%a = add %x: f32, 0.0: f32", "%b = add %a: f32, -0.0: f32",
                               "%r = subtract %b: f32, 0.0: f32"], "f32")
    assert simplified(text, "algebra-simplify{signed_zeros=true}") == [
        "%a = add %x: f32, 0.0: f32", "return %a: f32"]
    assert simplified(text) == ["return %x: f32"]


def test_rule_table_is_documented_and_classified() -> None:
    assert {r.exactness for r in RULES} == {"exact", "nsz", "fast-math"}
    for rule in RULES:
        assert rule.opcodes and rule.name
    opts = AlgebraSimplification(fast_math=True).active_rules()
    assert any(r.name == "exp-of-log" for r in opts["exp"])
    assert "exp" not in AlgebraSimplification().active_rules()


FAST = """module "fast"
stage raw

func @assoc1: (<2 x 3 x f64>, <2 x 3 x f64>, <2 x 3 x f64>, <2 x 3 x f64>) -> <2 x 3 x f64> {
'entry(%x: <2 x 3 x f64>, %y: <2 x 3 x f64>, %z: <2 x 3 x f64>, %a: <2 x 3 x f64>):
    %0.0 = divide %x: <2 x 3 x f64>, %y: <2 x 3 x f64>
    %0.1 = divide %z: <2 x 3 x f64>, %a: <2 x 3 x f64>
    %0.2 = divide %0.0: <2 x 3 x f64>, %0.1: <2 x 3 x f64>
    return %0.2: <2 x 3 x f64>
}

func @assoc2: (<2 x 3 x f64>, <2 x 3 x f64>, <2 x f64>) -> <2 x 3 x f64> {
'entry(%x: <2 x 3 x f64>, %y: <2 x 3 x f64>, %z: <2 x f64>):
    %z_ = shapeCast %z: <2 x f64> to 2 x 1
    %0.1 = divide %y: <2 x 3 x f64>, %z_: <2 x 1 x f64>
    %0.2 = divide %x: <2 x 3 x f64>, %0.1: <2 x 3 x f64>
    return %0.2: <2 x 3 x f64>
}

func @exps: (<3 x f64>, <3 x f64>) -> (<3 x f64>, <3 x f64>, <3 x f64>, <3 x f64>) {
'entry(%x: <3 x f64>, %y: <3 x f64>):
    %l = log %x: <3 x f64>
    %e = exp %l: <3 x f64>
    %e2 = exp %x: <3 x f64>
    %l2 = log %e2: <3 x f64>
    %ex = exp %x: <3 x f64>
    %ey = exp %y: <3 x f64>
    %q = divide %ex: <3 x f64>, %ey: <3 x f64>
    %ez = exp %y: <3 x f64>
    %p = power %ez: <3 x f64>, %x: <3 x f64>
    return (%e: <3 x f64>, %l2: <3 x f64>, %q: <3 x f64>, %p: <3 x f64>): (<3 x f64>, <3 x f64>, <3 x f64>, <3 x f64>)
}
"""


def test_fast_math_rules() -> None:
    """The original's division reassociations (scalar_algsimp.dl @assoc1, @assoc2), and the
    exp/log pairs, only under fast_math."""
    _, after = check_preserves(FAST, "algebra-simplify{fast_math=true}", rtol=1e-9)
    text = ir.print_module(after)
    assert "%0.0 = multiply %x: <2 x 3 x f64>, %a: <2 x 3 x f64>\n" \
           "    %0.1 = multiply %y: <2 x 3 x f64>, %z: <2 x 3 x f64>\n" \
           "    %0.2 = divide %0.0: <2 x 3 x f64>, %0.1: <2 x 3 x f64>" in text
    assert "%0.1 = multiply %x: <2 x 3 x f64>, %z_: <2 x 1 x f64>\n" \
           "    %0.2 = divide %0.1: <2 x 3 x f64>, %y: <2 x 3 x f64>" in text
    assert "return (%x: <3 x f64>, %x: <3 x f64>, " in text
    assert "log" not in text and "power" not in text
    check_idempotent(FAST, "algebra-simplify{fast_math=true}")
    assert "divide %0.0" in ir.print_module(check_preserves(FAST, "algebra-simplify")[1])


def live_listing(module: ir.Module, name: str) -> list[str]:
    """The instructions of `name` that its results depend on (what dce would keep)."""
    fn = module[name]
    live: set[ir.Value] = set()
    work = [i for i in fn.instructions() if i.is_terminator]
    while work:
        inst = work.pop()
        if inst in live:
            continue
        live.add(inst)
        work.extend(v for v in inst.operands if isinstance(v, ir.Instruction))
    return [ir.print_instruction(i).strip() for i in fn.instructions() if i in live]


WEBSITE = """module "website"
stage raw

func @f: ({x}, <784 x 10 x f32>, <10 x f32>) -> {y} {{
'entry(%x: {x}, %w: <784 x 10 x f32>, %b: <10 x f32>):
    %0.0 = dot %x: {x}, %w: <784 x 10 x f32>
    %0.1 = padShape %b: <10 x f32> at 0
    %0.2 = add %0.0: {y}, %0.1: <1 x 10 x f32>
    return %0.2: {y}
}}

[gradient @f wrt 1, 2 seedable]
func @df: ({x}, <784 x 10 x f32>, <10 x f32>, {y}) -> (<784 x 10 x f32>, <10 x f32>)
"""


@pytest.mark.parametrize("batch", ["1", "_"])
def test_the_web_sites_gradient_becomes_the_hand_written_one(batch: str) -> None:
    x, y = f"<{batch} x 784 x f32>", f"<{batch} x 10 x f32>"
    text = WEBSITE.format(x=x, y=y)
    module = ir.parse(text)
    ir.run_passes(module, "differentiation,algebra-simplify")
    db = ("squeezeShape %seed: <1 x 10 x f32> at 0" if batch == "1"
          else "reduce %seed: <_ x 10 x f32> by add init 0.0: f32 along 0")
    k = "1" if batch == "1" else "_"
    # the hand-written listing (in the order the pass leaves it), once dce drops the rest
    assert live_listing(module, "df") == [
        f"%0.3 = {db}",
        f"%0.4 = transpose %x: {x}",
        f"%0.5 = dot %0.4: <784 x {k} x f32>, %seed: {y}",
        "return (%0.5: <784 x 10 x f32>, %0.3: <10 x f32>): (<784 x 10 x f32>, <10 x f32>)"]
    listing = ir.print_function(module["df"])
    assert "padShape" not in "\n".join(listing)
    check_preserves(text, "differentiation,algebra-simplify", functions=["df"])


AD_PROGRAM = """module "ad"
stage raw

func @scalar: (f32, f32, f32) -> f32 {
'entry(%x: f32, %w: f32, %b: f32):
    %0.0 = multiply %x: f32, %w: f32
    %0.1 = add %0.0: f32, %b: f32
    return %0.1: f32
}

[gradient @scalar]
func @dscalar: (f32, f32, f32) -> (f32, f32, f32)

func @h: (<3 x f64>, f64, <2 x 3 x f64>) -> f64 {
'entry(%x: <3 x f64>, %y: f64, %m: <2 x 3 x f64>):
    %0.0 = multiply %x: <3 x f64>, %y: f64
    %0.1 = exp %0.0: <3 x f64>
    %0.2 = tanh %0.1: <3 x f64>
    %0.3 = padShape %0.2: <3 x f64> at 0
    %0.4 = add %0.3: <1 x 3 x f64>, %m: <2 x 3 x f64>
    %0.5 = transpose %0.4: <2 x 3 x f64>
    %0.6 = reduce %0.5: <3 x 2 x f64> by add init 0.0: f64
    %0.7 = divide %0.6: f64, %y: f64
    %0.8 = power %0.7: f64, 2.0: f64
    return %0.8: f64
}

[gradient @h]
func @dh: (<3 x f64>, f64, <2 x 3 x f64>) -> (<3 x f64>, f64, <2 x 3 x f64>)

[gradient @h wrt 0 seedable]
func @dh_seeded: (<3 x f64>, f64, <2 x 3 x f64>, f64) -> (<3 x f64>)
"""


def test_differentiated_programs() -> None:
    _, after = check_preserves(AD_PROGRAM, "differentiation,algebra-simplify", rtol=1e-9)
    assert "multiply 1.0" not in ir.print_module(after)
    assert live_listing(after, "dscalar") == ["return (%w: f32, %x: f32, 1.0: f32): (f32, f32, f32)"]
    check_idempotent(ir.print_module(after), "algebra-simplify")


RULE_PROGRAM = """module "rules"
stage raw

func @g: (<2 x 3 x f32>, <3 x 4 x f32>, <4 x f32>, <1 x 4 x f32>, <4 x bool>) -> (<2 x 3 x f32>, <4 x 2 x f32>, <4 x f32>, <12 x f32>, <4 x f32>) {
'entry(%x: <2 x 3 x f32>, %w: <3 x 4 x f32>, %v: <4 x f32>, %row: <1 x 4 x f32>, %m: <4 x bool>):
    %n1 = negate %x: <2 x 3 x f32>
    %n2 = negate %n1: <2 x 3 x f32>
    %a = add %n2: <2 x 3 x f32>, -0.0: f32
    %wt = transpose %w: <3 x 4 x f32>
    %xt = transpose %a: <2 x 3 x f32>
    %d = dot %wt: <4 x 3 x f32>, %xt: <3 x 2 x f32>
    %p = padShape %v: <4 x f32> at 1
    %q = squeezeShape %p: <4 x 1 x f32> at 1
    %c1 = shapeCast %w: <3 x 4 x f32> to 2 x 6
    %c2 = shapeCast %c1: <2 x 6 x f32> to 12
    %red = reduce %row: <1 x 4 x f32> by add init -0.0: f32 along 0
    %s = select %red: <4 x f32>, %q: <4 x f32> by %m: <4 x bool>
    %s2 = divide %s: <4 x f32>, 0.5: f32
    return (%a: <2 x 3 x f32>, %d: <4 x 2 x f32>, %s2: <4 x f32>, %c2: <12 x f32>, %q: <4 x f32>): (<2 x 3 x f32>, <4 x 2 x f32>, <4 x f32>, <12 x f32>, <4 x f32>)
}
"""


def test_a_program_with_many_rules_is_preserved_and_idempotent() -> None:
    _, after = check_preserves(RULE_PROGRAM, "algebra-simplify")
    text = ir.print_module(after)
    for gone in ("negate", "padShape", "squeezeShape %p", "reduce", "transpose %w"):
        assert gone not in text
    assert "multiply %s: <4 x f32>, 2.0: f32" in text
    check_idempotent(RULE_PROGRAM, "algebra-simplify")


def test_stats_count_rewrites_and_erasures() -> None:
    module = ir.parse(RULE_PROGRAM)
    (record,) = ir.run_passes(module, "algebra-simplify")
    assert record.changed
    assert record.stats["rewrites (double-negate)"] == 1
    assert record.stats["instructions erased"] >= 5
    assert record.instructions_after < record.instructions_before


# ---------------------------------------------------------------- random programs

# Two shapes for the random programs' values: static, and with a dynamic batch dimension
# (`_` is 3 at run time), where rules must not drop a broadcast that fixes a dimension.
SHAPES = {
    "static": {"V": "<2 x 3 x f64>", "T": "<3 x 2 x f64>", "P": "<2 x 1 x 3 x f64>",
               "Z": "<2 x 3 x f64>", "B": "<2 x 3 x bool>"},
    "dynamic": {"V": "<_ x 3 x f64>", "T": "<3 x _ x f64>", "P": "<_ x 1 x 3 x f64>",
                "Z": "<3 x 3 x f64>", "B": "<_ x 3 x bool>"},
}
# Steps on %cur (of type V); most create the patterns the rules remove.
STEPS = {
    "add-zero": ["%{o} = add %{c}: {V}, 0.0: f64"],
    "zero-add-splat": ["%{o} = add 0.0: <1 x 3 x f64>, %{c}: {V}"],
    "widen-by-zero": ["%{o}w = add %{c}: {V}, -0.0: {Z}",
                      "%{o}s = reduce %{o}w: {Z} by add init 0.0: f64",
                      "%{o} = add %{c}: {V}, %{o}s: f64"],
    "times-one": ["%{o} = multiply 1.0: f64, %{c}: {V}"],
    "times-minus-one": ["%{o} = multiply %{c}: {V}, -1.0: f64"],
    "halve": ["%{o} = divide %{c}: {V}, 2.0: f64"],
    "by-one": ["%{o} = divide %{c}: {V}, 1.0: f64"],
    "square-pow": ["%{o} = power %{c}: {V}, 2.0: f64"],
    "pow-one": ["%{o} = power %{c}: {V}, 1: f64"],
    "negate2": ["%{o}a = negate %{c}: {V}", "%{o} = negate %{o}a: {V}"],
    "transpose2": ["%{o}a = transpose %{c}: {V}", "%{o} = transpose %{o}a: {T}"],
    "pad-squeeze": ["%{o}a = padShape %{c}: {V} at 1", "%{o} = squeezeShape %{o}a: {P} at 1"],
    "sin": ["%{o} = sin %{c}: {V}"],
    "times-x": ["%{o} = multiply %{c}: {V}, %x: {V}"],
    "plus-k": ["%{o} = add %{c}: {V}, %k: f64"],
    "min-self": ["%{o} = min %{c}: {V}, %{c}: {V}"],
    "select-same": ["%{o}m = greaterThan %{c}: {V}, %k: f64",
                    "%{o} = select %{c}: {V}, %{c}: {V} by %{o}m: {B}"],
    "broadcast-zero": ["%{o}s = reduce %{c}: {V} by add init 0.0: f64 along 0",
                       "%{o}p = padShape %{o}s: <3 x f64> at 0",
                       "%{o}b = add %{o}p: <1 x 3 x f64>, 0.0: <1 x 3 x f64>",
                       "%{o} = multiply %{o}b: <1 x 3 x f64>, %x: {V}"],
    "unit-reduce": ["%{o}p = padShape %{c}: {V} at 0",
                    "%{o} = reduce %{o}p: <1 x {d} x 3 x f64> by add init 0.0: f64 along 0"],
}


def chain(prefix: str, start: str, steps: list[str], shapes: dict[str, str]) -> tuple[list[str], str]:
    lines, cur = [], start
    d = shapes["V"][1]
    for n, step in enumerate(steps):
        out = f"{prefix}{n}"
        lines += ["    " + s.format(o=out, c=cur, d=d, **shapes) for s in STEPS[step]]
        cur = out
    return lines, cur


def random_program(first: list[str], then: list[str], other: list[str], shape: str) -> str:
    shapes = SHAPES[shape]
    V = shapes["V"]
    a, ra = chain("a", "x", first, shapes)
    b, rb = chain("b", ra, then, shapes)
    c, rc = chain("c", ra, other, shapes)
    return "\n".join([
        'module "random"', "stage raw", "",
        f"func @f: ({V}, f64) -> {V} {{",
        f"'entry(%x: {V}, %k: f64):", *a,
        "    %cond = greaterThan %k: f64, 1.0: f64",
        "    conditional %cond: bool then 'b() else 'c()",
        "'b():", *b, f"    branch 'join(%{rb}: {V})",
        "'c():", *c, f"    branch 'join(%{rc}: {V})",
        f"'join(%r: {V}):", f"    return %r: {V}", "}", ""])


steps = st.lists(st.sampled_from(sorted(STEPS)), min_size=0, max_size=4)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(first=steps, then=steps, other=steps, shape=st.sampled_from(sorted(SHAPES)),
       seed=st.integers(0, 2**16))
def test_random_programs_keep_their_results(first: list[str], then: list[str],
                                            other: list[str], shape: str, seed: int) -> None:
    text = random_program(first, then, other, shape)
    _, after = check_preserves(text, "algebra-simplify", seed=seed, trials=2, rtol=1e-12, atol=0)
    check_idempotent(text, "algebra-simplify")
    if {"add-zero", "times-one", "negate2", "transpose2", "pad-squeeze"} & {*first, *then, *other}:
        assert len(list(after["f"].instructions())) < len(list(ir.parse(text)["f"].instructions()))


def test_ieee_special_values_are_preserved_by_exact_rules() -> None:
    """Exact rules keep NaN, ±∞ and −0.0 bit for bit (nsz ones only lose a zero's sign).

    (Positive zeros are written `zero`: the interpreter caches splat literals by value, and
    0.0 == −0.0 in Python, so `0.0: f64` and `-0.0: f64` in one module would share an array.)
    """
    text = function("x: <8 x f64>", [
        "%a = multiply %x: <8 x f64>, 1.0: f64", "%b = divide %a: <8 x f64>, 4.0: f64",
        "%c = power %b: <8 x f64>, 2.0: f64", "%d = power %c: <8 x f64>, zero: f64",
        "%e = add %b: <8 x f64>, -0.0: f64", "%f = power %e: <8 x f64>, -1.0: f64",
        "%g = subtract %f: <8 x f64>, zero: f64", "%h = multiply %g: <8 x f64>, %d: <8 x f64>",
        "%r = add %h: <8 x f64>, %c: <8 x f64>"], "<8 x f64>")
    import numpy as np

    x = np.array([0.0, -0.0, math.inf, -math.inf, math.nan, 1e-310, -3.5, 1e300])
    before = ir.compile(ir.parse(text), "interp").call("f", x)[0]
    module = ir.parse(text)
    ir.run_passes(module, "algebra-simplify{signed_zeros=true}")
    assert "power" not in ir.print_module(module)
    after = ir.compile(module, "interp").call("f", x)[0]
    assert before.tobytes() == after.tobytes()
