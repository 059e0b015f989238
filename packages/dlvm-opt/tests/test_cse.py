"""cse: dominance (sibling duplicates kept), commutativity, literals by value (signed zeros
apart), what never merges; results preserved on fixed, differentiated and random programs;
idempotence; statistics."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.opt.testing import check_idempotent, check_preserves

HEADER = 'module "t"\nstage raw\n\n'


def body(text: str, name: str = "f", pipeline: str = "cse") -> list[str]:
    """The printed lines of `@name` after the pipeline, stripped, without the braces."""
    module = ir.parse(text)
    ir.run_passes(module, pipeline)
    lines = ir.print_function(module[name]).strip().splitlines()
    return [line.strip() for line in lines[1:-1]]


def straight(args: str, lines: list[str], result: str, ret: str) -> str:
    """`@f(args) -> result` made of one block."""
    types = ", ".join(a.split(": ", 1)[1] for a in args.split(", "))
    names = ", ".join("%" + a for a in args.split(", "))
    return HEADER + f"func @f: ({types}) -> {result} {{\n'entry({names}):\n" + \
        "".join(f"    {line}\n" for line in lines) + f"    return {ret}: {result}\n}}\n"


# The original DLVM's cse.dl (§10, test 2), whose second `add 3` has its operands swapped.
ORIGINAL = HEADER + """
func @bar: (i32) -> i32 {
'entry(%x: i32):
    %0.0 = add %x: i32, 1: i32
    %0.1 = add %x: i32, 1: i32
    %0.2 = multiply %0.0: i32, 2: i32
    %0.3 = multiply %0.1: i32, 2: i32
    %0.4 = add 3: i32, %0.2: i32
    %0.5 = add %0.3: i32, 3: i32
    %0.6 = equal %0.4: i32, %0.5: i32
    conditional %0.6: bool then 'then() else 'else()
'then():
    %1.0 = add 3: i32, 7: i32
    branch 'cont(%1.0: i32)
'else():
    %2.0 = add 3: i32, 7: i32
    branch 'cont(%2.0: i32)
'cont(%c: i32):
    %3.0 = add 3: i32, %0.2: i32
    %3.1 = add %3.0: i32, %c: i32
    return %3.1: i32
}
"""


def test_the_original_cse_program() -> None:
    assert body(ORIGINAL, "bar") == [
        "'entry(%x: i32):",
        "%0.0 = add %x: i32, 1: i32",
        "%0.1 = multiply %0.0: i32, 2: i32",
        "%0.2 = add 3: i32, %0.1: i32",
        "%0.3 = equal %0.2: i32, %0.2: i32",
        "conditional %0.3: bool then 'then() else 'else()",
        "'then():",
        "%1.0 = add 3: i32, 7: i32",  # siblings: neither dominates the other
        "branch 'cont(%1.0: i32)",
        "'else():",
        "%2.0 = add 3: i32, 7: i32",
        "branch 'cont(%2.0: i32)",
        "'cont(%c: i32):",
        "%3.0 = add %0.2: i32, %c: i32",
        "return %3.0: i32",
    ]
    check_preserves(ORIGINAL, "cse")
    check_idempotent(ORIGINAL, "cse")


# (arguments, instructions, result type, returned value, expected instructions)
MERGED = {
    "commuted add and equal": (
        "x: f32, y: f32",
        ["%a = add %x: f32, %y: f32", "%b = add %y: f32, %x: f32",
         "%r = literal (%a: f32, %b: f32): (f32, f32)"],
        "(f32, f32)", "%r",
        ["%a = add %x: f32, %y: f32", "%r = literal (%a: f32, %a: f32): (f32, f32)"]),
    "literals by value": (
        "x: f32",
        ["%a = multiply %x: f32, 1: f32", "%b = multiply 1.0: f32, %x: f32",
         "%c = add %a: f32, zero: f32", "%d = add %b: f32, 0.0: f32",
         "%r = subtract %c: f32, %d: f32"],
        "f32", "%r",
        ["%a = multiply %x: f32, 1: f32", "%c = add %a: f32, zero: f32",
         "%r = subtract %c: f32, %c: f32"]),
    "NaN literals agree": (
        "x: f32",
        ["%a = max %x: f32, nan: f32", "%b = max nan: f32, %x: f32",
         "%r = add %a: f32, %b: f32"],
        "f32", "%r",
        ["%a = max %x: f32, nan: f32", "%r = add %a: f32, %a: f32"]),
    "nested literal operands and fields": (
        "x: <2 x 3 x f32>",
        ["%a = reduce %x: <2 x 3 x f32> by add init 0.0: f32 along 1",
         "%b = reduce %x: <2 x 3 x f32> by add init 0.0: f32 along 1",
         "%t = literal (%a: <2 x f32>, 1: f32): (<2 x f32>, f32)",
         "%u = literal (%b: <2 x f32>, 1.0: f32): (<2 x f32>, f32)",
         "%e = extract 0 from %t: (<2 x f32>, f32)", "%g = extract 0 from %u: (<2 x f32>, f32)",
         "%r = multiply %e: <2 x f32>, %g: <2 x f32>"],
        "<2 x f32>", "%r",
        ["%a = reduce %x: <2 x 3 x f32> by add init 0.0: f32 along 1",
         "%t = literal (%a: <2 x f32>, 1: f32): (<2 x f32>, f32)",
         "%e = extract 0 from %t: (<2 x f32>, f32)",
         "%r = multiply %e: <2 x f32>, %e: <2 x f32>"]),
}

KEPT = {
    "non-commutative operands swapped": (
        "x: f32, y: f32",
        ["%a = subtract %x: f32, %y: f32", "%b = subtract %y: f32, %x: f32",
         "%c = lessThan %x: f32, %y: f32", "%d = lessThan %y: f32, %x: f32",
         "%r = literal (%a: f32, %b: f32, %c: bool, %d: bool): (f32, f32, bool, bool)"],
        "(f32, f32, bool, bool)", "%r"),
    "signed zeros differ": (
        "x: f32",
        ["%a = add %x: f32, 0.0: f32", "%b = add %x: f32, -0.0: f32",
         "%r = literal (%a: f32, %b: f32): (f32, f32)"],
        "(f32, f32)", "%r"),
    "other fields or types": (
        "x: <2 x 3 x f32>",
        ["%a = reduce %x: <2 x 3 x f32> by add init 0.0: f32 along 0",
         "%b = reduce %x: <2 x 3 x f32> by max init 0.0: f32 along 0",
         "%c = shapeCast %x: <2 x 3 x f32> to 3 x 2", "%d = shapeCast %x: <2 x 3 x f32> to 6",
         "%e = dataTypeCast %x: <2 x 3 x f32> to f64",
         "%g = dataTypeCast %x: <2 x 3 x f32> to f16",
         "%r = literal (%a: <3 x f32>, %b: <3 x f32>, %c: <3 x 2 x f32>, %d: <6 x f32>, "
         "%e: <2 x 3 x f64>, %g: <2 x 3 x f16>): (<3 x f32>, <3 x f32>, <3 x 2 x f32>, "
         "<6 x f32>, <2 x 3 x f64>, <2 x 3 x f16>)"],
        "(<3 x f32>, <3 x f32>, <3 x 2 x f32>, <6 x f32>, <2 x 3 x f64>, <2 x 3 x f16>)", "%r"),
    "effects and impure reads": (
        "x: f32",
        ["%a = random 2 from 0.0: f32 upto 1.0: f32", "%b = random 2 from 0.0: f32 upto 1.0: f32",
         "%p = allocateStack f32 count 1", "store %x: f32 to %p: *f32",
         "%l1 = load %p: *f32", "store 2.0: f32 to %p: *f32", "%l2 = load %p: *f32",
         "%s = add %l1: f32, %l2: f32",
         "%r = literal (%a: <2 x f32>, %b: <2 x f32>, %s: f32): (<2 x f32>, <2 x f32>, f32)"],
        "(<2 x f32>, <2 x f32>, f32)", "%r"),
}


@pytest.mark.parametrize("case", sorted(MERGED))
def test_merges(case: str) -> None:
    args, lines, result, ret, expected = MERGED[case]
    text = straight(args, lines, result, ret)
    assert body(text)[1:-1] == expected
    check_preserves(text, "cse")


@pytest.mark.parametrize("case", sorted(KEPT))
def test_keeps(case: str) -> None:
    args, lines, result, ret = KEPT[case]
    text = straight(args, lines, result, ret)
    assert body(text)[1:-1] == lines
    module = ir.parse(text)
    [record] = ir.run_passes(module, "cse")
    assert not record.changed
    check_preserves(text, "cse")


CALLS = HEADER + """
func @noise: (f32) -> <2 x f32> {
'entry(%x: f32):
    %r = random 2 from 0.0: f32 upto 1.0: f32
    return %r: <2 x f32>
}

func @plus: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
    %s = add %a: f32, %b: f32
    return %s: f32
}

func @f: (<3 x f32>) -> (<2 x f32>, <2 x f32>, f32, f32) {
'entry(%x: <3 x f32>):
    %a = apply @noise(1.0: f32) -> <2 x f32>
    %b = apply @noise(1.0: f32) -> <2 x f32>
    %c = reduce %x: <3 x f32> by @plus: (f32, f32) -> f32 init 0.0: f32
    %d = reduce %x: <3 x f32> by @plus: (f32, f32) -> f32 init 0.0: f32
    %r = literal (%a: <2 x f32>, %b: <2 x f32>, %c: f32, %d: f32): (<2 x f32>, <2 x f32>, f32, f32)
    return %r: (<2 x f32>, <2 x f32>, f32, f32)
}
"""


def test_calls_never_merge() -> None:
    # @noise has no effects by the SideEffects analysis, yet two calls differ.
    module = ir.parse(CALLS)
    [record] = ir.run_passes(module, "cse")
    assert not record.changed
    check_preserves(CALLS, "cse")


DOMINANCE = HEADER + """
func @f: (f32, i64) -> f32 {
'entry(%x: f32, %n: i64):
    %e = exp %x: f32
    branch 'loop(0: i64, %e: f32)
'loop(%i: i64, %acc: f32):
    %e2 = exp %x: f32
    %s = multiply %acc: f32, %e2: f32
    %more = lessThan %i: i64, %n: i64
    conditional %more: bool then 'body() else 'exit()
'body():
    %e3 = exp %x: f32
    %t = multiply %e3: f32, %acc: f32
    %u = multiply %acc: f32, %e2: f32
    %i2 = add %i: i64, 1: i64
    %v = add %t: f32, %u: f32
    branch 'loop(%i2: i64, %v: f32)
'exit():
    %w = multiply %e2: f32, %acc: f32
    %y = add %w: f32, %s: f32
    %i1 = add 1: i64, %i: i64
    return %y: f32
}
"""


def test_dominating_instructions_across_blocks_and_loops() -> None:
    assert body(DOMINANCE) == [
        "'entry(%x: f32, %n: i64):",
        "%e = exp %x: f32",
        "branch 'loop(0: i64, %e: f32)",
        "'loop(%i: i64, %acc: f32):",
        "%s = multiply %acc: f32, %e: f32",
        "%more = lessThan %i: i64, %n: i64",
        "conditional %more: bool then 'body() else 'exit()",
        "'body():",
        "%i2 = add %i: i64, 1: i64",
        "%v = add %s: f32, %s: f32",
        "branch 'loop(%i2: i64, %v: f32)",
        "'exit():",
        "%y = add %s: f32, %s: f32",
        "%i1 = add 1: i64, %i: i64",  # the sibling 'body's `add %i, 1` does not dominate
        "return %y: f32",
    ]
    check_preserves(DOMINANCE, "cse")
    check_idempotent(DOMINANCE, "cse")


GRADIENT = HEADER + """
func @g: (<2 x 3 x f32>, <3 x 4 x f32>, <1 x 4 x f32>) -> <2 x 4 x f32> {
'entry(%x: <2 x 3 x f32>, %w: <3 x 4 x f32>, %b: <1 x 4 x f32>):
    %d = dot %x: <2 x 3 x f32>, %w: <3 x 4 x f32>
    %s = add %d: <2 x 4 x f32>, %b: <1 x 4 x f32>
    %t = tanh %s: <2 x 4 x f32>
    %u = multiply %t: <2 x 4 x f32>, %t: <2 x 4 x f32>
    return %u: <2 x 4 x f32>
}

[gradient @g wrt 1, 2 keeping 0]
func @dg: (<2 x 3 x f32>, <3 x 4 x f32>, <1 x 4 x f32>) -> (<3 x 4 x f32>, <1 x 4 x f32>, <2 x 4 x f32>)

func @h: (f64) -> f64 {
'entry(%x: f64):
    %c = greaterThan %x: f64, 1.0: f64
    conditional %c: bool then 'big() else 'small()
'big():
    %a = multiply %x: f64, %x: f64
    %a2 = multiply %x: f64, %x: f64
    %b = add %a: f64, %a2: f64
    branch 'out(%b: f64)
'small():
    %e = exp %x: f64
    %e2 = exp %x: f64
    %m = multiply %e: f64, %e2: f64
    branch 'out(%m: f64)
'out(%r: f64):
    return %r: f64
}

[gradient @h keeping 0 seedable]
func @dh: (f64, f64) -> (f64, f64)
"""


def test_differentiated_programs() -> None:
    _, after = check_preserves(GRADIENT, "differentiation,cse")
    plain = ir.parse(GRADIENT)
    ir.run_passes(plain, "differentiation")
    assert ir.passes.count_instructions(after) < ir.passes.count_instructions(plain)
    check_idempotent(GRADIENT, "differentiation,cse")
    check_preserves(GRADIENT, "differentiation,cse,dce")


def test_stats() -> None:
    module = ir.parse(ORIGINAL)
    [record] = ir.run_passes(module, "cse")
    assert dict(record.stats) == {"instructions removed": 4}
    assert (record.instructions_before, record.instructions_after) == (15, 11)


# ---------------------------------------------------------------- random programs

T = "<2 x 3 x f32>"
ROW = "<1 x 3 x f32>"
UNARY = ("negate", "tanh", "sin", "exp")
BINARY = ("add", "multiply", "subtract", "max", "min", "divide")
LITERALS = (("1.5", "f32"), ("2.0", T), ("0.5", ROW), ("-0.0", "f32"), ("0.0", "f32"))
RANK = {"f32": 0, ROW: 1, T: 2}
Op = tuple[int, int, int]


def emit(ops: list[Op], pool: list[tuple[str, str]], seen: list[tuple[str, str, str, str]],
         lines: list[str], prefix: str) -> None:
    """Append instructions over `pool`; kind 0 repeats (swapped) an instruction of `seen`."""
    for n, (kind, i, j) in enumerate(ops):
        name = f"%{prefix}{n}"
        if kind == 0 and seen:
            op, a, b, t = seen[i % len(seen)]
            if op in ("add", "multiply", "max", "min") and j % 2:
                a, b = b, a
            lines.append(f"{name} = {op} {a}" + (f", {b}" if b else ""))
            pool.append((name, t))
            continue
        x, y = pool[i % len(pool)], pool[j % len(pool)]
        a = f"{x[0]}: {x[1]}"
        if kind % 3 == 1:
            op, b, t = UNARY[j % len(UNARY)], "", x[1]
        else:
            op, b, t = BINARY[kind % len(BINARY)], f"{y[0]}: {y[1]}", max(x[1], y[1], key=RANK.get)
        lines.append(f"{name} = {op} {a}" + (f", {b}" if b else ""))
        seen.append((op, a, b, t))
        pool.append((name, t))


def random_program(entry: list[Op], left: list[Op], right: list[Op], join: list[Op]) -> str:
    """@f(%x: T, %y: f32) -> T: a diamond; each block may repeat what dominates it."""
    pool: list[tuple[str, str]] = [("%x", T), ("%y", "f32"), *LITERALS]
    seen: list[tuple[str, str, str, str]] = []
    lines: list[str] = []
    emit(entry, pool, seen, lines, "e")
    lines += ["%c = lessThan %y: f32, 1.0: f32", "conditional %c: bool then 'l() else 'r()"]
    for side, ops in (("l", left), ("r", right)):
        side_pool, side_lines = list(pool), [f"'{side}():"]
        emit(ops, side_pool, list(seen), side_lines, side)
        out = [v for v, t in side_pool if t == T][-1]
        lines += [*side_lines, f"branch 'join({out}: {T})"]
    lines.append(f"'join(%j: {T}):")
    pool.append(("%j", T))
    emit(join, pool, seen, lines, "j")
    used = " ".join(f"{v}: {t}," for v, t in pool if v.startswith("%")).rstrip(",")
    types = ", ".join(t for v, t in pool if v.startswith("%"))
    lines += [f"%out = literal ({used}): ({types})", f"return %out: ({types})"]
    return HEADER + f"func @f: ({T}, f32) -> ({types}) {{\n'entry(%x: {T}, %y: f32):\n" + \
        "\n".join(line if line.startswith("'") else "    " + line for line in lines) + "\n}\n"


ops = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 30), st.integers(0, 30)), max_size=6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entry=ops, left=ops, right=ops, join=ops)
def test_random_programs_keep_their_results(entry: list[Op], left: list[Op], right: list[Op],
                                            join: list[Op]) -> None:
    text = random_program(entry, left, right, join)
    check_preserves(text, "cse", trials=2)
    check_idempotent(text, "cse")
