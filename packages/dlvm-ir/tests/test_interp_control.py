"""Reference interpreter: control flow (branch, conditional, loops, multiple returns,
branchEnum on recursive enums) and the calling convention of `Executable.call`."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import run, run1

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")

FLOW_SRC = """
module "flow"
stage raw

func @swap: (f32, f32) -> (f32, f32) {
'entry(%a: f32, %b: f32):
  branch 'next(%b: f32, %a: f32)
'next(%x: f32, %y: f32):
  %t = literal (%x: f32, %y: f32): (f32, f32)
  return %t: (f32, f32)
}

func @abs_diff: (i32, i32) -> i32 {
'entry(%a: i32, %b: i32):
  %c = greaterThan %a: i32, %b: i32
  conditional %c: bool then 'first(%a: i32, %b: i32) else 'first(%b: i32, %a: i32)
'first(%big: i32, %small: i32):
  %d = subtract %big: i32, %small: i32
  return %d: i32
}

func @sign_word: (f32) -> i32 {
'entry(%x: f32):
  %neg = lessThan %x: f32, 0: f32
  conditional %neg: bool then 'negative else 'not_negative
'negative():
  return -1: i32
'not_negative():
  %zero = equal %x: f32, 0: f32
  conditional %zero: bool then 'is_zero else 'positive
'is_zero():
  return 0: i32
'positive():
  return 1: i32
}

// sum of 0 + 1 + … + (n - 1), a loop whose trip count is the argument
func @triangle: (i64) -> i64 {
'entry(%n: i64):
  branch 'head(0: i64, 0: i64)
'head(%i: i64, %acc: i64):
  %more = lessThan %i: i64, %n: i64
  conditional %more: bool then 'body else 'exit(%acc: i64)
'body():
  %acc2 = add %acc: i64, %i: i64
  %i2 = add %i: i64, 1: i64
  branch 'head(%i2: i64, %acc2: i64)
'exit(%r: i64):
  return %r: i64
}

// doubles a vector until its sum exceeds the limit; returns it and the iteration count
func @grow: (<3 x f32>, f32) -> (<3 x f32>, i32) {
'entry(%v: <3 x f32>, %limit: f32):
  branch 'test(%v: <3 x f32>, 0: i32)
'test(%x: <3 x f32>, %k: i32):
  %s = reduce %x: <3 x f32> by add init 0: f32
  %done = greaterThan %s: f32, %limit: f32
  conditional %done: bool then 'out else 'again
'again():
  %x2 = multiply %x: <3 x f32>, 2: f32
  %k2 = add %k: i32, 1: i32
  branch 'test(%x2: <3 x f32>, %k2: i32)
'out():
  %t = literal (%x: <3 x f32>, %k: i32): (<3 x f32>, i32)
  return %t: (<3 x f32>, i32)
}

// Euclid's algorithm, branching back to the entry block
func @gcd: (i64, i64) -> i64 {
'entry(%a: i64, %b: i64):
  %z = equal %b: i64, 0: i64
  conditional %z: bool then 'done else 'step
'step():
  %m = modulo %a: i64, %b: i64
  branch 'entry(%b: i64, %m: i64)
'done():
  return %a: i64
}

// nested loops: sum over i < n, j < i of (i · j)
func @nested: (i32) -> i32 {
'entry(%n: i32):
  branch 'outer(0: i32, 0: i32)
'outer(%i: i32, %acc: i32):
  %c = lessThan %i: i32, %n: i32
  conditional %c: bool then 'inner(0: i32, %acc: i32) else 'end
'inner(%j: i32, %a: i32):
  %d = lessThan %j: i32, %i: i32
  conditional %d: bool then 'inner_body else 'outer_next(%a: i32)
'inner_body():
  %p = multiply %i: i32, %j: i32
  %a2 = add %a: i32, %p: i32
  %j2 = add %j: i32, 1: i32
  branch 'inner(%j2: i32, %a2: i32)
'outer_next(%a3: i32):
  %i2 = add %i: i32, 1: i32
  branch 'outer(%i2: i32, %a3: i32)
'end():
  return %acc: i32
}

// a loop over a dynamically sized tensor, indexing with the loop variable
func @running_dot: (<_ x 2 x f32>, <2 x f32>) -> f32 {
'entry(%xs: <_ x 2 x f32>, %w: <2 x f32>):
  %shape = shape of %xs: <_ x 2 x f32>
  %n = extract 0 from %shape: <2 x i64>
  branch 'loop(0: i64, 0: f32)
'loop(%i: i64, %acc: f32):
  %c = lessThan %i: i64, %n: i64
  conditional %c: bool then 'body else 'done
'body():
  %row = extract %i: i64 from %xs: <_ x 2 x f32>
  %d = dot %row: <2 x f32>, %w: <2 x f32>
  %acc2 = add %acc: f32, %d: f32
  %i2 = add %i: i64, 1: i64
  branch 'loop(%i2: i64, %acc2: f32)
'done():
  return %acc: f32
}

func @trap_if_negative: (f32) -> f32 {
'entry(%x: f32):
  %c = lessThan %x: f32, 0: f32
  conditional %c: bool then 'bad else 'good
'bad():
  trap
  return %x: f32
'good():
  %r = sqrt %x: f32
  return %r: f32
}
"""


def test_branch_passes_block_arguments() -> None:
    a, b = run(FLOW_SRC, "swap", np.float32(1), np.float32(2))
    assert (a.tolist(), b.tolist()) == (2.0, 1.0)


def test_conditional_both_ways() -> None:
    assert run1(FLOW_SRC, "abs_diff", np.int32(7), np.int32(3)).tolist() == 4
    assert run1(FLOW_SRC, "abs_diff", np.int32(3), np.int32(7)).tolist() == 4
    assert run1(FLOW_SRC, "abs_diff", np.int32(-2), np.int32(-2)).tolist() == 0


def test_multiple_returns() -> None:
    got = [run1(FLOW_SRC, "sign_word", np.float32(v)).tolist() for v in (-3, 0, 0.5)]
    assert got == [-1, 0, 1]
    assert run1(FLOW_SRC, "sign_word", np.float32(1)).dtype == np.int32


@pytest.mark.parametrize(("n", "expected"), [(0, 0), (1, 0), (2, 1), (10, 45), (-5, 0)])
def test_loop_with_data_dependent_trip_count(n: int, expected: int) -> None:
    out = run1(FLOW_SRC, "triangle", np.int64(n))
    assert out.dtype == np.int64 and out.tolist() == expected


def test_loop_carrying_a_tensor() -> None:
    v, k = run(FLOW_SRC, "grow", np.array([1, 2, 3], np.float32), np.float32(40))
    assert v.tolist() == [8, 16, 24] and k.tolist() == 3  # sums 6, 12, 24, 48
    v, k = run(FLOW_SRC, "grow", np.array([1, 2, 3], np.float32), np.float32(1))
    assert v.tolist() == [1, 2, 3] and k.tolist() == 0  # zero iterations


def test_branch_back_to_the_entry_block() -> None:
    assert run1(FLOW_SRC, "gcd", np.int64(48), np.int64(18)).tolist() == 6
    assert run1(FLOW_SRC, "gcd", np.int64(17), np.int64(0)).tolist() == 17
    assert run1(FLOW_SRC, "gcd", np.int64(0), np.int64(9)).tolist() == 9


def test_nested_loops() -> None:
    for n in (0, 1, 4, 7):
        expected = sum(i * j for i in range(n) for j in range(i))
        assert run1(FLOW_SRC, "nested", np.int32(n)).tolist() == expected


def test_loop_over_a_dynamic_tensor() -> None:
    w = np.array([1, 10], np.float32)
    xs = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    assert run1(FLOW_SRC, "running_dot", xs, w).tolist() == 21 + 43 + 65
    assert run1(FLOW_SRC, "running_dot", np.zeros((0, 2), np.float32), w).tolist() == 0


def test_trap_only_when_reached() -> None:
    assert run1(FLOW_SRC, "trap_if_negative", np.float32(9)).tolist() == 3
    with pytest.raises(ir.ExecutionError, match="trap"):
        run(FLOW_SRC, "trap_if_negative", np.float32(-1))


# ---------------------------------------------------------------- branchEnum

ENUM_SRC = """
enum $List {
  ?nil()
  ?cons(f32, $List)
}
enum $Tree {
  ?leaf(i64)
  ?node($Tree, $Tree)
}
enum $Color {
  ?red()
  ?green()
  ?blue()
}

func @sum: ($List) -> f32 {
'entry(%l: $List):
  branchEnum %l: $List case ?nil 'empty case ?cons 'cell
'empty():
  return 0: f32
'cell(%head: f32, %tail: $List):
  %s = apply @sum(%tail: $List) -> f32
  %r = add %head: f32, %s: f32
  return %r: f32
}

// builds [n - 1, …, 1, 0] in a loop, then sums it with a loop (no recursion)
func @build_and_sum: (i32) -> (f32, i32) {
'entry(%n: i32):
  %empty = literal ?nil(): $List
  branch 'build(0: i32, %empty: $List)
'build(%i: i32, %acc: $List):
  %c = lessThan %i: i32, %n: i32
  conditional %c: bool then 'push else 'walk(%acc: $List, 0: f32, 0: i32)
'push():
  %f = dataTypeCast %i: i32 to f32
  %cell = literal ?cons(%f: f32, %acc: $List): $List
  %i2 = add %i: i32, 1: i32
  branch 'build(%i2: i32, %cell: $List)
'walk(%l: $List, %s: f32, %len: i32):
  branchEnum %l: $List case ?cons 'step case ?nil 'done
'step(%h: f32, %t: $List):
  %s2 = add %s: f32, %h: f32
  %len2 = add %len: i32, 1: i32
  branch 'walk(%t: $List, %s2: f32, %len2: i32)
'done():
  %r = literal (%s: f32, %len: i32): (f32, i32)
  return %r: (f32, i32)
}

func @three: (f32, f32, f32) -> f32 {
'entry(%a: f32, %b: f32, %c: f32):
  %l0 = literal ?nil(): $List
  %l1 = literal ?cons(%c: f32, %l0: $List): $List
  %l2 = literal ?cons(%b: f32, %l1: $List): $List
  %l3 = literal ?cons(%a: f32, %l2: $List): $List
  %r = apply @sum(%l3: $List) -> f32
  return %r: f32
}

// (leaf count, sum of leaves, depth)
func @measure: ($Tree) -> (i64, i64, i64) {
'entry(%t: $Tree):
  branchEnum %t: $Tree case ?leaf 'leaf case ?node 'node
'leaf(%v: i64):
  %one = literal (1: i64, %v: i64, 1: i64): (i64, i64, i64)
  return %one: (i64, i64, i64)
'node(%l: $Tree, %r: $Tree):
  %a = apply @measure(%l: $Tree) -> (i64, i64, i64)
  %b = apply @measure(%r: $Tree) -> (i64, i64, i64)
  %a0 = extract 0 from %a: (i64, i64, i64)
  %b0 = extract 0 from %b: (i64, i64, i64)
  %a1 = extract 1 from %a: (i64, i64, i64)
  %b1 = extract 1 from %b: (i64, i64, i64)
  %a2 = extract 2 from %a: (i64, i64, i64)
  %b2 = extract 2 from %b: (i64, i64, i64)
  %n = add %a0: i64, %b0: i64
  %s = add %a1: i64, %b1: i64
  %d0 = max %a2: i64, %b2: i64
  %d = add %d0: i64, 1: i64
  %out = literal (%n: i64, %s: i64, %d: i64): (i64, i64, i64)
  return %out: (i64, i64, i64)
}

func @tree: () -> (i64, i64, i64) {
'entry():
  %a = literal ?leaf(1: i64): $Tree
  %b = literal ?leaf(20: i64): $Tree
  %c = literal ?leaf(300: i64): $Tree
  %ab = literal ?node(%a: $Tree, %b: $Tree): $Tree
  %root = literal ?node(%ab: $Tree, %c: $Tree): $Tree
  %r = apply @measure(%root: $Tree) -> (i64, i64, i64)
  return %r: (i64, i64, i64)
}

func @color_code: (i32) -> i32 {
'entry(%k: i32):
  %is0 = equal %k: i32, 0: i32
  conditional %is0: bool then 'r else 'not_r
'r():
  %red = literal ?red(): $Color
  branch 'classify(%red: $Color)
'not_r():
  %is1 = equal %k: i32, 1: i32
  conditional %is1: bool then 'g else 'b
'g():
  %green = literal ?green(): $Color
  branch 'classify(%green: $Color)
'b():
  %blue = literal ?blue(): $Color
  branch 'classify(%blue: $Color)
'classify(%c: $Color):
  branchEnum %c: $Color case ?blue 'is_blue case ?red 'is_red case ?green 'is_green
'is_red():
  return 100: i32
'is_green():
  return 200: i32
'is_blue():
  return 300: i32
}

// no block for ?blue: reaching it is a run-time error
func @partial: (bool) -> i32 {
'entry(%c: bool):
  conditional %c: bool then 'mk_red else 'mk_blue
'mk_red():
  %red = literal ?red(): $Color
  branch 'dispatch(%red: $Color)
'mk_blue():
  %blue = literal ?blue(): $Color
  branch 'dispatch(%blue: $Color)
'dispatch(%col: $Color):
  branchEnum %col: $Color case ?red 'is_red
'is_red():
  return 1: i32
}
"""


def test_branch_enum_on_a_recursive_list() -> None:
    out = run1(ENUM_SRC, "three", np.float32(1), np.float32(20), np.float32(300))
    assert out.dtype == np.float32 and out.tolist() == 321


@pytest.mark.parametrize("n", [0, 1, 5])
def test_branch_enum_in_loops(n: int) -> None:
    s, length = run(ENUM_SRC, "build_and_sum", np.int32(n))
    assert s.tolist() == sum(range(n)) and length.tolist() == n


def test_branch_enum_on_a_recursive_tree() -> None:
    n, s, d = run(ENUM_SRC, "tree")
    assert (n.tolist(), s.tolist(), d.tolist()) == (3, 321, 3)


def test_branch_enum_without_payloads() -> None:
    assert [run1(ENUM_SRC, "color_code", np.int32(k)).tolist() for k in (0, 1, 2)] == [
        100, 200, 300]


def test_branch_enum_on_a_case_without_a_block() -> None:
    assert run1(ENUM_SRC, "partial", True).tolist() == 1
    with pytest.raises(ir.ExecutionError):
        run(ENUM_SRC, "partial", False)


# ---------------------------------------------------------------- calling convention

CALL_SRC = """
func @rows: (<_ x 3 x f32>) -> <3 x f32> {
'entry(%x: <_ x 3 x f32>):
  %r = reduce %x: <_ x 3 x f32> by add init 0: f32 along 0
  return %r: <3 x f32>
}
func @same: (<_ x _ x f32>) -> <_ x _ x f32> {
'entry(%x: <_ x _ x f32>):
  %r = transpose %x: <_ x _ x f32>
  return %r: <_ x _ x f32>
}
func @pair: ((f32, <2 x i32>)) -> (<2 x i32>, f32) {
'entry(%p: (f32, <2 x i32>)):
  %a = extract 0 from %p: (f32, <2 x i32>)
  %b = extract 1 from %p: (f32, <2 x i32>)
  %r = literal (%b: <2 x i32>, %a: f32): (<2 x i32>, f32)
  return %r: (<2 x i32>, f32)
}
func @byte: (i8) -> i8 {
'entry(%x: i8):
  return %x: i8
}
[extern]
func @outside: (f32) -> f32
"""


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_dynamic_dimension_accepts_any_size(n: int) -> None:
    x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
    expected = [sum(3 * i + j for i in range(n)) for j in range(3)]
    out = run1(CALL_SRC, "rows", x)
    assert out.dtype == np.float32 and out.tolist() == expected


def test_fully_dynamic_shape() -> None:
    for shape in ((1, 4), (3, 2)):
        x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
        out = run1(CALL_SRC, "same", x)
        assert out.shape == shape[::-1] and out.tolist() == x.T.tolist()


@pytest.mark.parametrize("shape", [(2, 4), (3,), (2, 3, 1), ()])
def test_wrong_static_size_or_rank_is_an_execution_error(shape: tuple[int, ...]) -> None:
    with pytest.raises(ir.ExecutionError):
        run(CALL_SRC, "rows", np.zeros(shape, np.float32))


def test_wrong_argument_count_is_an_execution_error() -> None:
    with pytest.raises(ir.ExecutionError):
        run(CALL_SRC, "rows")
    with pytest.raises(ir.ExecutionError):
        run(CALL_SRC, "rows", np.zeros((1, 3), np.float32), np.zeros((1, 3), np.float32))


def test_unknown_and_external_functions_are_execution_errors() -> None:
    with pytest.raises(ir.ExecutionError):
        run(CALL_SRC, "missing")
    with pytest.raises(ir.ExecutionError):
        run(CALL_SRC, "outside", np.float32(1))


def test_tuple_arguments() -> None:
    b, a = run(CALL_SRC, "pair", (2.5, [1, 2]))
    assert b.dtype == np.int32 and b.tolist() == [1, 2]
    assert a.dtype == np.float32 and a.tolist() == 2.5
    with pytest.raises(ir.ExecutionError):
        run(CALL_SRC, "pair", (2.5, [1, 2, 3]))
    with pytest.raises(ir.ExecutionError):
        run(CALL_SRC, "pair", (2.5,))


def test_argument_that_cannot_be_converted_is_an_execution_error() -> None:
    assert run1(CALL_SRC, "byte", -128).tolist() == -128
    with pytest.raises(ir.ExecutionError):
        run(CALL_SRC, "byte", "abc")
    with pytest.raises(ir.ExecutionError):
        run(CALL_SRC, "byte", 300)  # does not fit in i8
