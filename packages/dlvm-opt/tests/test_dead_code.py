"""dce: dead instructions, dead block arguments (cycles too), unreachable blocks; what stays
(effects, `random`, parameters, enum-bound arguments, functions); results preserved on fixed,
differentiated and random programs; idempotence; statistics."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.opt.testing import check_idempotent, check_preserves

HEADER = 'module "t"\nstage raw\n\n'


def body(text: str, name: str, pipeline: str = "dce") -> list[str]:
    """The printed lines of `@name` after the pipeline, stripped, without the braces."""
    module = ir.parse(text)
    ir.run_passes(module, pipeline)
    lines = ir.print_function(module[name]).strip().splitlines()
    return [line.strip() for line in lines[1:-1]]


# The original DLVM's dce.dl (§10, test 1), with the dead call's arguments as literals.
ORIGINAL = HEADER + """
func @inference: (<1 x 2 x f32>, <2 x 2 x f32>) -> <1 x 2 x f32> {
'entry(%x: <1 x 2 x f32>, %w: <2 x 2 x f32>):
    %d = dot %x: <1 x 2 x f32>, %w: <2 x 2 x f32>
    return %d: <1 x 2 x f32>
}

func @bar: (f32, f32) -> i32 {
'entry(%x: f32, %y: f32):
    %0.0 = multiply 10000: i32, 20000: i32
    %0.1 = add %0.0: i32, 20000: i32
    %0.2 = literal 1: <1 x 2 x f32>
    %0.3 = multiply 5: i32, 8: i32
    %0.4 = literal 1: <2 x 2 x f32>
    %0.5 = apply @inference(%0.2: <1 x 2 x f32>, %0.4: <2 x 2 x f32>) -> <1 x 2 x f32>
    %0.6 = equal %0.3: i32, 1: i32
    conditional %0.6: bool then 'then(0: i32) else 'else(1: i32)
'then(%a: i32):
    branch 'cont(%a: i32)
'else(%b: i32):
    branch 'cont(%b: i32)
'cont(%c: i32):
    return %c: i32
}
"""


def test_the_original_dce_program() -> None:
    assert body(ORIGINAL, "bar") == [
        "'entry(%x: f32, %y: f32):",
        "%0.0 = multiply 5: i32, 8: i32",
        "%0.1 = equal %0.0: i32, 1: i32",
        "conditional %0.1: bool then 'then(0: i32) else 'else(1: i32)",
        "'then(%a: i32):",
        "branch 'cont(%a: i32)",
        "'else(%b: i32):",
        "branch 'cont(%b: i32)",
        "'cont(%c: i32):",
        "return %c: i32",
    ]
    check_idempotent(ORIGINAL, "dce")
    check_preserves(ORIGINAL, "dce")


LOOP = HEADER + """
func @fact: (i64) -> i64 {
'entry(%n: i64):
    %unused = multiply %n: i64, %n: i64
    branch 'loop(%n: i64, 1: i64, 0.0: f64)
'loop(%i: i64, %acc: i64, %sum: f64):
    %done = lessThanOrEqual %i: i64, 1: i64
    %next = subtract %i: i64, 1: i64
    %product = multiply %acc: i64, %i: i64
    %fi = dataTypeCast %i: i64 to f64
    %sum2 = add %sum: f64, %fi: f64
    conditional %done: bool then 'exit(%sum2: f64) else 'loop(%next: i64, %product: i64, %sum2: f64)
'exit(%s: f64):
    return %acc: i64
'never(%z: i64):
    %w = add %z: i64, %n: i64
    branch 'loop(%w: i64, %w: i64, 1.0: f64)
}
"""


def test_dead_cycles_through_block_arguments_and_unreachable_blocks() -> None:
    # %sum only feeds itself and the unused 'exit argument: the whole cycle goes.
    assert body(LOOP, "fact") == [
        "'entry(%n: i64):",
        "branch 'loop(%n: i64, 1: i64)",
        "'loop(%i: i64, %acc: i64):",
        "%done = lessThanOrEqual %i: i64, 1: i64",
        "%next = subtract %i: i64, 1: i64",
        "%product = multiply %acc: i64, %i: i64",
        "conditional %done: bool then 'exit() else 'loop(%next: i64, %product: i64)",
        "'exit():",
        "return %acc: i64",
    ]
    check_preserves(LOOP, "dce")
    check_idempotent(LOOP, "dce")


EFFECTS = HEADER + """
var @count: i64

[extern]
func @log: (f32) -> f32

func @bump: (f32) -> f32 {
'entry(%x: f32):
    %c = load @count: *i64
    %c1 = add %c: i64, 1: i64
    store %c1: i64 to @count: *i64
    return %x: f32
}

func @square: (f32) -> f32 {
'entry(%x: f32):
    %y = multiply %x: f32, %x: f32
    return %y: f32
}

func @f: (f32) -> f32 {
'entry(%x: f32):
    %a = apply @bump(%x: f32) -> f32
    %b = apply @square(%x: f32) -> f32
    %l = load @count: *i64
    %r = random 2 x 2 from 0.0: f32 upto 1.0: f32
    %s = createStack
    push %x: f32 to %s: stack
    %p = pop f32 from %s: stack
    destroyStack %s: stack
    %t = allocateStack f32 count 1
    store %x: f32 to %t: *f32
    return %x: f32
}

func @g: (f32) -> f32 {
'entry(%x: f32):
    %e = apply @log(%x: f32) -> f32
    return %x: f32
}
"""


def test_effects_stay_and_pure_calls_and_loads_go() -> None:
    assert body(EFFECTS, "f") == [
        "'entry(%x: f32):",
        "%a = apply @bump(%x: f32) -> f32",
        "%r = random 2 x 2 from 0.0: f32 upto 1.0: f32",  # later draws depend on it
        "%s = createStack",
        "push %x: f32 to %s: stack",
        "%p = pop f32 from %s: stack",
        "destroyStack %s: stack",
        "%t = allocateStack f32 count 1",
        "store %x: f32 to %t: *f32",
        "return %x: f32",
    ]
    assert body(EFFECTS, "g") == ["'entry(%x: f32):", "%e = apply @log(%x: f32) -> f32",
                                  "return %x: f32"]
    module = ir.parse(EFFECTS)
    ir.run_passes(module, "dce")
    assert [f.name for f in module.functions] == ["log", "bump", "square", "f", "g"]


ENUM = HEADER + """
enum $Tree {
    ?leaf(f32)
    ?node($Tree, $Tree)
}

func @sum: ($Tree, f32) -> f32 {
'entry(%t: $Tree, %unused: f32):
    branchEnum %t: $Tree case ?leaf 'leaf case ?node 'node
'leaf(%v: f32):
    return 1.0: f32
'node(%l: $Tree, %r: $Tree):
    %b = apply @sum(%r: $Tree, 0.0: f32) -> f32
    return %b: f32
}
"""


def test_parameters_and_enum_bound_arguments_stay() -> None:
    assert body(ENUM, "sum") == [
        "'entry(%t: $Tree, %unused: f32):",
        "branchEnum %t: $Tree case ?leaf 'leaf case ?node 'node",
        "'leaf(%v: f32):",
        "return 1.0: f32",
        "'node(%l: $Tree, %r: $Tree):",
        "%b = apply @sum(%r: $Tree, 0.0: f32) -> f32",
        "return %b: f32",
    ]
    check_idempotent(ENUM, "dce")


def test_values_nested_in_literals_and_branch_arguments_stay_live() -> None:
    text = HEADER + """
func @f: (f32, f32) -> (f32, f32) {
'entry(%x: f32, %y: f32):
    %a = sin %x: f32
    %b = cos %y: f32
    %dead = tan %y: f32
    %c = lessThan %x: f32, %y: f32
    conditional %c: bool then 'out((%a: f32, %b: f32): (f32, f32)) else 'out((%b: f32, %a: f32): (f32, f32))
'out(%r: (f32, f32)):
    return %r: (f32, f32)
}
"""
    lines = body(text, "f")
    assert "%dead = tan %y: f32" not in lines
    assert "%a = sin %x: f32" in lines and "%b = cos %y: f32" in lines
    check_preserves(text, "dce")


GRADIENT = HEADER + """
func @p: (f64, f64) -> f64 {
'entry(%x: f64, %w: f64):
    %s = sin %x: f64
    %unused = cos %w: f64
    branch 'loop(0: i64, %s: f64)
'loop(%i: i64, %y: f64):
    %t = tanh %y: f64
    %y2 = multiply %t: f64, %w: f64
    %i2 = add %i: i64, 1: i64
    %more = lessThan %i2: i64, 3: i64
    conditional %more: bool then 'loop(%i2: i64, %y2: f64) else 'exit()
'exit():
    return %y: f64
}

[gradient @p keeping 0]
func @dp: (f64, f64) -> (f64, f64, f64)

func @q: (<2 x 3 x f32>, <1 x 3 x f32>) -> <2 x f32> {
'entry(%x: <2 x 3 x f32>, %w: <1 x 3 x f32>):
    %e = exp %x: <2 x 3 x f32>
    %m = multiply %e: <2 x 3 x f32>, %w: <1 x 3 x f32>
    %r = reduce %m: <2 x 3 x f32> by add init 0.0: f32 along 1
    return %r: <2 x f32>
}

[gradient @q wrt 1 seedable]
func @dq: (<2 x 3 x f32>, <1 x 3 x f32>, <2 x f32>) -> (<1 x 3 x f32>)
"""


def test_differentiated_programs() -> None:
    _, after = check_preserves(GRADIENT, "differentiation,dce")
    plain = ir.parse(GRADIENT)
    ir.run_passes(plain, "differentiation")
    assert ir.passes.count_instructions(after) < ir.passes.count_instructions(plain)
    check_idempotent(GRADIENT, "differentiation,dce")


def test_stats() -> None:
    module = ir.parse(LOOP)
    [record] = ir.run_passes(module, "dce")
    assert record.changed
    assert dict(record.stats) == {"instructions removed": 3, "block arguments removed": 2,
                                  "unreachable blocks removed": 1}
    [again] = ir.run_passes(module, "dce")
    assert not again.changed and not again.stats


# ---------------------------------------------------------------- random programs

T = "<2 x 3 x f32>"
ROW = "<1 x 3 x f32>"
UNARY = ("negate", "tanh", "sin", "square", "exp")
BINARY = ("add", "subtract", "multiply", "max", "divide")
LITERALS = (("1.5", "f32"), ("2.0", T), ("0.5", ROW), ("-0.0", "f32"))
RANK = {"f32": 0, ROW: 1, T: 2}


def emit(ops: list[tuple[int, int, int]], pool: list[tuple[str, str]], lines: list[str],
         prefix: str) -> None:
    """Append instructions over `pool` (value, type), adding their results to it."""
    for n, (kind, i, j) in enumerate(ops):
        a = pool[i % len(pool)]
        b = pool[j % len(pool)]
        name = f"%{prefix}{n}"
        if kind % 4 == 0:
            lines.append(f"{name} = {UNARY[i % len(UNARY)]} {a[0]}: {a[1]}")
            pool.append((name, a[1]))
        elif kind % 4 == 3:  # an effect that must stay, unused
            lines.append(f"{name} = random 2 from 0.0: f32 upto 1.0: f32")
        else:
            t = max(a[1], b[1], key=RANK.__getitem__)
            lines.append(f"{name} = {BINARY[kind % len(BINARY)]} {a[0]}: {a[1]}, {b[0]}: {b[1]}")
            pool.append((name, t))


def random_program(entry: list[tuple[int, int, int]], left: list[tuple[int, int, int]],
                   right: list[tuple[int, int, int]], picks: list[int]) -> str:
    """@f(%x: T, %y: f32) -> T, with a diamond whose join takes two arguments."""
    pool: list[tuple[str, str]] = [("%x", T), ("%y", "f32"), *LITERALS]
    lines: list[str] = []
    emit(entry, pool, lines, "e")
    tensors = [v for v, t in pool if t == T]
    lines.append("%c = lessThan %y: f32, 1.0: f32")
    lines.append(f"conditional %c: bool then 'l({tensors[picks[0] % len(tensors)]}: {T}) "
                 f"else 'r({tensors[picks[1] % len(tensors)]}: {T})")
    for side, ops in (("l", left), ("r", right)):
        side_pool = [*pool, (f"%{side}a", T)]
        side_lines: list[str] = []
        emit(ops, side_pool, side_lines, side)
        outs = [v for v, t in side_pool if t == T]
        lines += [f"'{side}(%{side}a: {T}):", *side_lines,
                  f"branch 'join({outs[-1]}: {T}, {outs[picks[2] % len(outs)]}: {T})"]
    lines += [f"'join(%j: {T}, %k: {T}):", f"%out = add %x: {T}, %j: {T}", f"return %out: {T}"]
    return HEADER + f"func @f: ({T}, f32) -> {T} {{\n'entry(%x: {T}, %y: f32):\n" + \
        "\n".join("    " + line if not line.startswith("'") else line for line in lines) + "\n}\n"


ops = st.lists(st.tuples(st.integers(0, 7), st.integers(0, 20), st.integers(0, 20)), max_size=6)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(entry=ops, left=ops, right=ops, picks=st.lists(st.integers(0, 9), min_size=3, max_size=3))
def test_random_programs_keep_their_results(entry: list[tuple[int, int, int]],
                                            left: list[tuple[int, int, int]],
                                            right: list[tuple[int, int, int]],
                                            picks: list[int]) -> None:
    text = random_program(entry, left, right, picks)
    _, after = check_preserves(text, "dce", trials=2, seed=picks[0])
    assert all(i.opcode != "random" for i in after["f"].instructions()) == \
        ("random" not in text)
    assert not any(i.opcode in UNARY + BINARY and not _used(after["f"], i)
                   for i in after["f"].instructions())
    check_idempotent(text, "dce")


def _used(fn: ir.Function, inst: ir.Instruction) -> bool:
    return any(inst in (u.operands) for u in fn.instructions())
