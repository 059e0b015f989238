"""Reference interpreter: literals, extract/insert, apply (calls, recursion, function
values) and the builtin intrinsics."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir import interp
from dlvm.ir.testing import run, run1

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")


def same(out: np.ndarray, expected: object, dtype: object) -> None:
    """Exactly equal: the values here are moved, not computed, or small integers."""
    assert out.dtype == np.dtype(dtype), (out.dtype, dtype)
    exp = np.asarray(expected)
    assert out.shape == exp.shape, (out.shape, exp.shape)
    assert out.tolist() == exp.tolist()


# ---------------------------------------------------------------- literals

LITERAL_SRC = """
struct $Pair {
  #w: <2 x f32>
  #n: i64
}
enum $Opt {
  ?none()
  ?some(f32)
}

func @splat: () -> <2 x 3 x f32> {
'entry():
  %r = literal 1.5: <2 x 3 x f32>
  return %r: <2 x 3 x f32>
}
func @splat_int: () -> <4 x i8> {
'entry():
  %r = literal -7: <4 x i8>
  return %r: <4 x i8>
}
func @splat_bool: () -> <2 x bool> {
'entry():
  %r = literal true: <2 x bool>
  return %r: <2 x bool>
}
func @int_as_float: () -> f64 {
'entry():
  %r = literal 3: f64
  return %r: f64
}
func @special: () -> <3 x f32> {
'entry():
  %r = literal <inf: f32, -inf: f32, -0.5: f32>: <3 x f32>
  return %r: <3 x f32>
}
func @matrix: () -> <2 x 2 x f32> {
'entry():
  %r = literal <<1: f32, 2: f32>: <2 x f32>, <3: f32, 4: f32>: <2 x f32>>: <2 x 2 x f32>
  return %r: <2 x 2 x f32>
}
func @from_values: (f32, <2 x f32>) -> <3 x 2 x f32> {
'entry(%a: f32, %v: <2 x f32>):
  %r = literal <%v: <2 x f32>, <%a: f32, 0: f32>: <2 x f32>, %v: <2 x f32>>: <3 x 2 x f32>
  return %r: <3 x 2 x f32>
}
func @empty: () -> <0 x i32> {
'entry():
  %r = literal <>: <0 x i32>
  return %r: <0 x i32>
}
func @bools: () -> <3 x bool> {
'entry():
  %r = literal <true: bool, false: bool, true: bool>: <3 x bool>
  return %r: <3 x bool>
}
func @tuple: (f32) -> (f32, (i32, <2 x f64>), bool) {
'entry(%x: f32):
  %r = literal (%x: f32, (7: i32, <1: f64, 2: f64>: <2 x f64>): (i32, <2 x f64>),
                false: bool): (f32, (i32, <2 x f64>), bool)
  return %r: (f32, (i32, <2 x f64>), bool)
}
func @array: () -> [3 x i64] {
'entry():
  %r = literal [10: i64, 20: i64, 30: i64]: [3 x i64]
  return %r: [3 x i64]
}
func @struct: (<2 x f32>) -> (<2 x f32>, i64) {
'entry(%w: <2 x f32>):
  %s = literal {#w = %w: <2 x f32>, #n = 5: i64}: $Pair
  %w2 = extract #w from %s: $Pair
  %n = extract #n from %s: $Pair
  %t = literal (%w2: <2 x f32>, %n: i64): (<2 x f32>, i64)
  return %t: (<2 x f32>, i64)
}
func @enum: (bool, f32) -> f32 {
'entry(%c: bool, %x: f32):
  conditional %c: bool then 'make_some else 'make_none
'make_some():
  %s = literal ?some(%x: f32): $Opt
  branch 'use(%s: $Opt)
'make_none():
  %n = literal ?none(): $Opt
  branch 'use(%n: $Opt)
'use(%o: $Opt):
  branchEnum %o: $Opt case ?none 'none case ?some 'some
'none():
  return -1: f32
'some(%v: f32):
  return %v: f32
}
func @zero_tensor: () -> <2 x 2 x i32> {
'entry():
  %r = literal zero: <2 x 2 x i32>
  return %r: <2 x 2 x i32>
}
func @zero_tuple: () -> (f32, <2 x i8>) {
'entry():
  %r = literal zero: (f32, <2 x i8>)
  return %r: (f32, <2 x i8>)
}
func @zero_struct: () -> (<2 x f32>, i64) {
'entry():
  %s = literal zero: $Pair
  %w = extract #w from %s: $Pair
  %n = extract #n from %s: $Pair
  %t = literal (%w: <2 x f32>, %n: i64): (<2 x f32>, i64)
  return %t: (<2 x f32>, i64)
}
func @undefined: () -> <3 x f32> {
'entry():
  %r = literal undefined: <3 x f32>
  return %r: <3 x f32>
}
func @void: () -> () {
'entry():
  return
}
"""


def test_scalar_literal_splats() -> None:
    same(run1(LITERAL_SRC, "splat"), [[1.5] * 3] * 2, np.float32)
    same(run1(LITERAL_SRC, "splat_int"), [-7] * 4, np.int8)
    same(run1(LITERAL_SRC, "splat_bool"), [True, True], np.bool_)
    same(run1(LITERAL_SRC, "int_as_float"), 3.0, np.float64)


def test_tensor_literals() -> None:
    same(run1(LITERAL_SRC, "special"), [math.inf, -math.inf, -0.5], np.float32)
    same(run1(LITERAL_SRC, "matrix"), [[1, 2], [3, 4]], np.float32)
    same(run1(LITERAL_SRC, "from_values", np.float32(9), np.array([1, 2], np.float32)),
         [[1, 2], [9, 0], [1, 2]], np.float32)
    same(run1(LITERAL_SRC, "empty"), np.zeros(0, np.int32), np.int32)
    same(run1(LITERAL_SRC, "bools"), [True, False, True], np.bool_)


def test_literal_outputs_can_be_modified_by_the_caller() -> None:
    a = run1(LITERAL_SRC, "splat")
    a[0, 0] = 100  # the caller owns the result
    same(run1(LITERAL_SRC, "splat"), [[1.5] * 3] * 2, np.float32)


def test_tuple_literal_results_are_flattened_in_order() -> None:
    outs = run(LITERAL_SRC, "tuple", np.float32(2.5))
    assert len(outs) == 4
    same(outs[0], 2.5, np.float32)
    same(outs[1], 7, np.int32)
    same(outs[2], [1.0, 2.0], np.float64)
    same(outs[3], False, np.bool_)


def test_array_literal() -> None:
    outs = run(LITERAL_SRC, "array")
    assert [o.tolist() for o in outs] == [10, 20, 30]
    assert all(o.dtype == np.int64 for o in outs)


def test_struct_literal() -> None:
    w, n = run(LITERAL_SRC, "struct", np.array([0.5, -1], np.float32))
    same(w, [0.5, -1], np.float32)
    same(n, 5, np.int64)


def test_enum_literal() -> None:
    same(run1(LITERAL_SRC, "enum", True, np.float32(4)), 4.0, np.float32)
    same(run1(LITERAL_SRC, "enum", False, np.float32(4)), -1.0, np.float32)


def test_zero_and_undefined_literals() -> None:
    same(run1(LITERAL_SRC, "zero_tensor"), [[0, 0], [0, 0]], np.int32)
    f, v = run(LITERAL_SRC, "zero_tuple")
    same(f, 0.0, np.float32)
    same(v, [0, 0], np.int8)
    w, n = run(LITERAL_SRC, "zero_struct")
    same(w, [0, 0], np.float32)
    same(n, 0, np.int64)
    u = run1(LITERAL_SRC, "undefined")
    assert u.shape == (3,) and u.dtype == np.float32


def test_void_function_returns_nothing() -> None:
    assert run(LITERAL_SRC, "void") == ()


ZERO_ENUM_SRC = """
enum $E {
  ?a()
  ?b(f32)
}
func @f: () -> f32 {
'entry():
  %e = literal zero: $E
  branchEnum %e: $E case ?a 'A case ?b 'B
'A():
  return 0: f32
'B(%x: f32):
  return %x: f32
}
"""


@pytest.mark.interp_only("how the interpreter fails on a value it cannot make")
@pytest.mark.parametrize("keyword", ["zero", "undefined"])
def test_zero_enum_is_rejected_or_a_clean_error(keyword: str) -> None:
    # An enum has no zero value: the verifier should reject `zero: $E`, or running it
    # should be an ExecutionError, not a crash of the interpreter (AssertionError).
    src = ZERO_ENUM_SRC.replace("literal zero", f"literal {keyword}")
    with pytest.raises(ir.DlvmError):
        m = ir.parse(src)
        ir.verify(m)
        ir.compile(m, "interp").call("f")


# ---------------------------------------------------------------- extract / insert

EXTRACT_SRC = """
struct $Layer {
  #w: <2 x 3 x f32>
  #b: <3 x f32>
  #meta: (i32, [2 x i64])
}

func @from_tuple: ((f32, (i32, <2 x f64>))) -> (f32, i32, f64) {
'entry(%t: (f32, (i32, <2 x f64>))):
  %a = extract 0 from %t: (f32, (i32, <2 x f64>))
  %b = extract 1, 0 from %t: (f32, (i32, <2 x f64>))
  %c = extract 1, 1, 1 from %t: (f32, (i32, <2 x f64>))
  %r = literal (%a: f32, %b: i32, %c: f64): (f32, i32, f64)
  return %r: (f32, i32, f64)
}
func @from_tensor: (<3 x 4 x f32>) -> (<4 x f32>, f32) {
'entry(%x: <3 x 4 x f32>):
  %row = extract 2 from %x: <3 x 4 x f32>
  %e = extract 1, 3 from %x: <3 x 4 x f32>
  %r = literal (%row: <4 x f32>, %e: f32): (<4 x f32>, f32)
  return %r: (<4 x f32>, f32)
}
func @dynamic: (i64, <6 x 4 x f32>) -> <4 x f32> {
'entry(%i: i64, %xs: <6 x 4 x f32>):
  %r = extract %i: i64 from %xs: <6 x 4 x f32>
  return %r: <4 x f32>
}
func @dynamic2: (i32, i64, <6 x 4 x f32>) -> f32 {
'entry(%i: i32, %j: i64, %xs: <6 x 4 x f32>):
  %r = extract %i: i32, %j: i64 from %xs: <6 x 4 x f32>
  return %r: f32
}
func @dynamic_dim: (<_ x 2 x f32>) -> <2 x f32> {
'entry(%xs: <_ x 2 x f32>):
  %r = extract 3 from %xs: <_ x 2 x f32>
  return %r: <2 x f32>
}
func @struct_path: (i64) -> (f32, i64) {
'entry(%i: i64):
  %l = literal {#w = 2: <2 x 3 x f32>, #b = <1: f32, 2: f32, 3: f32>: <3 x f32>,
               #meta = (4: i32, [5: i64, 6: i64]: [2 x i64]): (i32, [2 x i64])}: $Layer
  %b = extract #b, %i: i64 from %l: $Layer
  %m = extract #meta, 1, 1 from %l: $Layer
  %r = literal (%b: f32, %m: i64): (f32, i64)
  return %r: (f32, i64)
}
func @array_dynamic: (i64) -> i64 {
'entry(%i: i64):
  %a = literal [10: i64, 20: i64, 30: i64]: [3 x i64]
  %r = extract %i: i64 from %a: [3 x i64]
  return %r: i64
}
func @insert_tuple: (f32) -> ((f32, i32), (f32, i32)) {
'entry(%x: f32):
  %t = literal (1: f32, 2: i32): (f32, i32)
  %u = insert %x: f32 to %t: (f32, i32) at 0
  %r = literal (%t: (f32, i32), %u: (f32, i32)): ((f32, i32), (f32, i32))
  return %r: ((f32, i32), (f32, i32))
}
func @insert_tensor: (<2 x 3 x f32>, <3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>) {
'entry(%x: <2 x 3 x f32>, %row: <3 x f32>):
  %a = insert %row: <3 x f32> to %x: <2 x 3 x f32> at 1
  %b = insert 9: f32 to %a: <2 x 3 x f32> at 0, 2
  %r = literal (%x: <2 x 3 x f32>, %b: <2 x 3 x f32>): (<2 x 3 x f32>, <2 x 3 x f32>)
  return %r: (<2 x 3 x f32>, <2 x 3 x f32>)
}
func @insert_dynamic: (i64, <6 x 4 x f32>) -> <6 x 4 x f32> {
'entry(%i: i64, %xs: <6 x 4 x f32>):
  %r = insert 1: <4 x f32> to %xs: <6 x 4 x f32> at %i: i64
  return %r: <6 x 4 x f32>
}
func @insert_struct: (<3 x f32>) -> (<3 x f32>, i32) {
'entry(%b: <3 x f32>):
  %z = literal zero: $Layer
  %l = insert %b: <3 x f32> to %z: $Layer at #b
  %l2 = insert 8: i32 to %l: $Layer at #meta, 0
  %b2 = extract #b from %l2: $Layer
  %m = extract #meta, 0 from %l2: $Layer
  %r = literal (%b2: <3 x f32>, %m: i32): (<3 x f32>, i32)
  return %r: (<3 x f32>, i32)
}
func @insert_array: (i64) -> [3 x f32] {
'entry(%i: i64):
  %a = literal [1: f32, 2: f32, 3: f32]: [3 x f32]
  %r = insert 9: f32 to %a: [3 x f32] at %i: i64
  return %r: [3 x f32]
}
"""


def test_extract_from_tuples() -> None:
    a, b, c = run(EXTRACT_SRC, "from_tuple", (1.5, (3, [7.0, 8.0])))
    same(a, 1.5, np.float32)
    same(b, 3, np.int32)
    same(c, 8.0, np.float64)


def test_extract_from_tensors() -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    row, e = run(EXTRACT_SRC, "from_tensor", x)
    same(row, [8, 9, 10, 11], np.float32)
    same(e, 7, np.float32)


def test_extract_with_dynamic_index() -> None:
    xs = np.arange(24, dtype=np.float32).reshape(6, 4)
    for i in range(6):
        same(run1(EXTRACT_SRC, "dynamic", np.int64(i), xs), [4 * i + j for j in range(4)],
             np.float32)
    same(run1(EXTRACT_SRC, "dynamic2", np.int32(5), np.int64(2), xs), 22, np.float32)


@pytest.mark.parametrize("i", [6, 100, -1])
def test_extract_with_dynamic_index_out_of_bounds(i: int) -> None:
    xs = np.zeros((6, 4), np.float32)
    with pytest.raises(ir.ExecutionError):
        run(EXTRACT_SRC, "dynamic", np.int64(i), xs)
    with pytest.raises(ir.ExecutionError):
        run(EXTRACT_SRC, "dynamic2", np.int32(0), np.int64(i - 2 if i == 6 else i), xs)


def test_extract_static_index_beyond_a_dynamic_dimension() -> None:
    same(run1(EXTRACT_SRC, "dynamic_dim", np.ones((4, 2), np.float32)), [1, 1], np.float32)
    with pytest.raises(ir.ExecutionError):
        run(EXTRACT_SRC, "dynamic_dim", np.ones((3, 2), np.float32))


def test_extract_key_path_through_a_struct() -> None:
    b, m = run(EXTRACT_SRC, "struct_path", np.int64(2))
    same(b, 3, np.float32)
    same(m, 6, np.int64)
    with pytest.raises(ir.ExecutionError):
        run(EXTRACT_SRC, "struct_path", np.int64(3))


def test_extract_from_array_with_dynamic_index() -> None:
    assert [run1(EXTRACT_SRC, "array_dynamic", np.int64(i)).tolist() for i in range(3)] == [
        10, 20, 30]
    for i in (3, -1):
        with pytest.raises(ir.ExecutionError):
            run(EXTRACT_SRC, "array_dynamic", np.int64(i))


def test_insert_into_tuple_leaves_the_original() -> None:
    a, b, c, d = run(EXTRACT_SRC, "insert_tuple", np.float32(5))
    assert (a.tolist(), b.tolist(), c.tolist(), d.tolist()) == (1.0, 2, 5.0, 2)


def test_insert_into_tensor_leaves_the_original() -> None:
    x = np.zeros((2, 3), np.float32)
    orig, new = run(EXTRACT_SRC, "insert_tensor", x, np.array([1, 2, 3], np.float32))
    same(orig, np.zeros((2, 3)), np.float32)
    same(new, [[0, 0, 9], [1, 2, 3]], np.float32)
    assert x.tolist() == np.zeros((2, 3)).tolist()  # the argument is not modified


def test_insert_with_dynamic_index() -> None:
    xs = np.zeros((6, 4), np.float32)
    out = run1(EXTRACT_SRC, "insert_dynamic", np.int64(4), xs)
    expected = np.zeros((6, 4))
    expected[4] = 1
    same(out, expected, np.float32)
    for i in (6, -1):
        with pytest.raises(ir.ExecutionError):
            run(EXTRACT_SRC, "insert_dynamic", np.int64(i), xs)


def test_insert_into_struct() -> None:
    b, m = run(EXTRACT_SRC, "insert_struct", np.array([4, 5, 6], np.float32))
    same(b, [4, 5, 6], np.float32)
    same(m, 8, np.int32)


def test_insert_into_array_with_dynamic_index() -> None:
    outs = run(EXTRACT_SRC, "insert_array", np.int64(1))
    assert [o.tolist() for o in outs] == [1.0, 9.0, 3.0]


@pytest.mark.parametrize("i", [3, -1])
def test_insert_into_array_with_dynamic_index_out_of_bounds(i: int) -> None:
    # -1 must not wrap around to the last element, 3 must not be an IndexError
    with pytest.raises(ir.ExecutionError):
        run(EXTRACT_SRC, "insert_array", np.int64(i))


# ---------------------------------------------------------------- apply

APPLY_SRC = """
func @square: (f32) -> f32 {
'entry(%x: f32):
  %r = multiply %x: f32, %x: f32
  return %r: f32
}
func @inc: (f32) -> f32 {
'entry(%x: f32):
  %r = add %x: f32, 1: f32
  return %r: f32
}
func @sum_of_squares: (f32, f32) -> f32 {
'entry(%a: f32, %b: f32):
  %0.0 = apply @square(%a: f32) -> f32
  %0.1 = apply @square(%b: f32) -> f32
  %0.2 = add %0.0: f32, %0.1: f32
  return %0.2: f32
}
func @divmod: (i32, i32) -> (i32, i32) {
'entry(%a: i32, %b: i32):
  %q = divide %a: i32, %b: i32
  %r = modulo %a: i32, %b: i32
  %t = literal (%q: i32, %r: i32): (i32, i32)
  return %t: (i32, i32)
}
func @use_divmod: (i32) -> i32 {
'entry(%a: i32):
  %t = apply @divmod(%a: i32, 7: i32) -> (i32, i32)
  %q = extract 0 from %t: (i32, i32)
  %r = extract 1 from %t: (i32, i32)
  %s = multiply %q: i32, 100: i32
  %u = add %s: i32, %r: i32
  return %u: i32
}
func @factorial: (i64) -> i64 {
'entry(%n: i64):
  %c = lessThanOrEqual %n: i64, 1: i64
  conditional %c: bool then 'base else 'step
'base():
  return 1: i64
'step():
  %m = subtract %n: i64, 1: i64
  %f = apply @factorial(%m: i64) -> i64
  %r = multiply %n: i64, %f: i64
  return %r: i64
}
func @fib: (i32) -> i32 {
'entry(%n: i32):
  %c = lessThan %n: i32, 2: i32
  conditional %c: bool then 'base(%n: i32) else 'step
'base(%v: i32):
  return %v: i32
'step():
  %a = subtract %n: i32, 1: i32
  %b = subtract %n: i32, 2: i32
  %fa = apply @fib(%a: i32) -> i32
  %fb = apply @fib(%b: i32) -> i32
  %r = add %fa: i32, %fb: i32
  return %r: i32
}
func @is_even: (i64) -> bool {
'entry(%n: i64):
  %z = equal %n: i64, 0: i64
  conditional %z: bool then 'yes else 'ask
'yes():
  return true: bool
'ask():
  %m = subtract %n: i64, 1: i64
  %r = apply @is_odd(%m: i64) -> bool
  return %r: bool
}
func @is_odd: (i64) -> bool {
'entry(%n: i64):
  %z = equal %n: i64, 0: i64
  conditional %z: bool then 'no else 'ask
'no():
  return false: bool
'ask():
  %m = subtract %n: i64, 1: i64
  %r = apply @is_even(%m: i64) -> bool
  return %r: bool
}
func @twice: ((f32) -> f32, f32) -> f32 {
'entry(%f: (f32) -> f32, %x: f32):
  %a = apply %f(%x: f32) -> f32
  %b = apply %f(%a: f32) -> f32
  return %b: f32
}
func @twice_square: (f32) -> f32 {
'entry(%x: f32):
  %r = apply @twice(@square: (f32) -> f32, %x: f32) -> f32
  return %r: f32
}
func @pick: (bool, f32) -> f32 {
'entry(%c: bool, %x: f32):
  conditional %c: bool then 'call(@square: (f32) -> f32) else 'call(@inc: (f32) -> f32)
'call(%g: (f32) -> f32):
  %r = apply %g(%x: f32) -> f32
  return %r: f32
}
func @from_tuple: (f32) -> f32 {
'entry(%x: f32):
  %t = literal (@inc: (f32) -> f32, @square: (f32) -> f32): ((f32) -> f32, (f32) -> f32)
  %g = extract 1 from %t: ((f32) -> f32, (f32) -> f32)
  %r = apply %g(%x: f32) -> f32
  return %r: f32
}
func @through_pointer: (f32) -> f32 {
'entry(%x: f32):
  %p = allocateStack (f32) -> f32 count 1
  store @inc: (f32) -> f32 to %p: *(f32) -> f32
  %r = apply %p(%x: f32) -> f32
  return %r: f32
}
func @countdown: (i64) -> i64 {
'entry(%n: i64):
  %c = lessThanOrEqual %n: i64, 0: i64
  conditional %c: bool then 'done else 'rec
'done():
  return 0: i64
'rec():
  %m = subtract %n: i64, 1: i64
  %r = apply @countdown(%m: i64) -> i64
  %s = add %r: i64, 1: i64
  return %s: i64
}
func @forever: (i64) -> i64 {
'entry(%n: i64):
  %r = apply @forever(%n: i64) -> i64
  return %r: i64
}
func @static3: (<3 x f32>) -> f32 {
'entry(%x: <3 x f32>):
  %r = reduce %x: <3 x f32> by add init 0: f32
  return %r: f32
}
func @call_static: (<_ x f32>) -> f32 {
'entry(%x: <_ x f32>):
  %r = apply @static3(%x: <_ x f32>) -> f32
  return %r: f32
}
func @returns_static: (<_ x f32>) -> <3 x f32> {
'entry(%x: <_ x f32>):
  return %x: <_ x f32>
}
"""


def test_simple_calls() -> None:
    same(run1(APPLY_SRC, "sum_of_squares", np.float32(3), np.float32(4)), 25, np.float32)
    same(run1(APPLY_SRC, "use_divmod", np.int32(52)), 703, np.int32)
    same(run1(APPLY_SRC, "use_divmod", np.int32(-52)), -703, np.int32)


def test_recursion() -> None:
    assert [run1(APPLY_SRC, "factorial", np.int64(n)).tolist() for n in (0, 1, 5, 20)] == [
        1, 1, 120, 2432902008176640000]
    assert [run1(APPLY_SRC, "fib", np.int32(n)).tolist() for n in range(10)] == [
        0, 1, 1, 2, 3, 5, 8, 13, 21, 34]


def test_mutual_recursion() -> None:
    for n in (0, 1, 6, 7, 30):
        assert run1(APPLY_SRC, "is_even", np.int64(n)).tolist() is (n % 2 == 0)
        assert run1(APPLY_SRC, "is_odd", np.int64(n)).tolist() is (n % 2 == 1)


def test_function_values() -> None:
    same(run1(APPLY_SRC, "twice_square", np.float32(3)), 81, np.float32)
    same(run1(APPLY_SRC, "pick", True, np.float32(3)), 9, np.float32)
    same(run1(APPLY_SRC, "pick", False, np.float32(3)), 4, np.float32)
    same(run1(APPLY_SRC, "from_tuple", np.float32(5)), 25, np.float32)


def test_apply_through_a_function_pointer() -> None:
    # the type rule accepts a `*(T) -> R` callee: the call goes to the pointee
    same(run1(APPLY_SRC, "through_pointer", np.float32(1)), 2, np.float32)


def test_deep_recursion_up_to_the_documented_limit() -> None:
    n = interp.MAX_CALL_DEPTH - 10
    same(run1(APPLY_SRC, "countdown", np.int64(n)), n, np.int64)


@pytest.mark.interp_only("the interpreter's call depth limit")
def test_unbounded_recursion_is_an_execution_error() -> None:
    exe = ir.compile(ir.parse(APPLY_SRC), "interp")
    with pytest.raises(ir.ExecutionError, match="overflow"):
        exe.call("forever", np.int64(0))
    # the executable is still usable afterwards
    assert exe.call("countdown", np.int64(10))[0].tolist() == 10


@pytest.mark.interp_only("the interpreter's call depth limit")
def test_call_depth_is_restored_after_an_overflow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interp, "MAX_CALL_DEPTH", 50)
    m = ir.parse(APPLY_SRC)
    exe = ir.compile(m, "interp")
    assert exe.call("countdown", np.int64(40))[0].tolist() == 40
    for _ in range(3):
        with pytest.raises(ir.ExecutionError):
            exe.call("countdown", np.int64(60))
    assert exe.call("countdown", np.int64(40))[0].tolist() == 40


def test_dynamic_argument_passed_to_a_static_parameter_is_checked() -> None:
    same(run1(APPLY_SRC, "call_static", np.ones(3, np.float32)), 3, np.float32)
    with pytest.raises(ir.ExecutionError):
        run(APPLY_SRC, "call_static", np.ones(4, np.float32))


def test_returned_value_is_checked_against_a_static_result_type() -> None:
    same(run1(APPLY_SRC, "returns_static", np.ones(3, np.float32)), [1, 1, 1], np.float32)
    with pytest.raises(ir.ExecutionError):
        run(APPLY_SRC, "returns_static", np.ones(4, np.float32))


# ---------------------------------------------------------------- builtins

BUILTIN_SRC = """
func @softmax: (<2 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>):
  %r = builtin "softmax"(%x: <2 x 3 x f32>) -> <2 x 3 x f32>
  return %r: <2 x 3 x f32>
}
func @softmax64: (<4 x f64>) -> <4 x f64> {
'entry(%x: <4 x f64>):
  %r = builtin "softmax"(%x: <4 x f64>) -> <4 x f64>
  return %r: <4 x f64>
}
func @min: (<2 x 1 x f32>, <1 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%a: <2 x 1 x f32>, %b: <1 x 3 x f32>):
  %r = builtin "min"(%a: <2 x 1 x f32>, %b: <1 x 3 x f32>) -> <2 x 3 x f32>
  return %r: <2 x 3 x f32>
}
func @max: (<3 x i32>, i32) -> <3 x i32> {
'entry(%a: <3 x i32>, %b: i32):
  %r = builtin "max"(%a: <3 x i32>, %b: i32) -> <3 x i32>
  return %r: <3 x i32>
}
func @mean: (<2 x 3 x f32>) -> f32 {
'entry(%x: <2 x 3 x f32>):
  %r = builtin "mean"(%x: <2 x 3 x f32>) -> f32
  return %r: f32
}
func @mean64: (<_ x f64>) -> f64 {
'entry(%x: <_ x f64>):
  %r = builtin "mean"(%x: <_ x f64>) -> f64
  return %r: f64
}
"""


def softmax_row(row: list[float]) -> list[float]:
    e = [math.exp(v) for v in row]
    total = sum(e)
    return [v / total for v in e]


def test_softmax_along_the_last_dimension() -> None:
    x = np.array([[0, 1, 2], [1, 1, 1]], np.float32)
    out = run1(BUILTIN_SRC, "softmax", x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [softmax_row([0, 1, 2]), [1 / 3] * 3], rtol=1e-6)
    np.testing.assert_allclose(out.sum(axis=1), [1, 1], rtol=1e-6)


def test_softmax_is_stable_for_large_inputs() -> None:
    out = run1(BUILTIN_SRC, "softmax64", np.array([1000.0, 1000.0, -1000.0, 999.0]))
    assert out.dtype == np.float64
    e = math.exp(-1.0)
    np.testing.assert_allclose(out, [1 / (2 + e), 1 / (2 + e), 0.0, e / (2 + e)], rtol=1e-12)


def test_builtin_min_max_broadcast() -> None:
    a = np.array([[1], [5]], np.float32)
    b = np.array([[0, 3, 6]], np.float32)
    same(run1(BUILTIN_SRC, "min", a, b), [[0, 1, 1], [0, 3, 5]], np.float32)
    same(run1(BUILTIN_SRC, "max", np.array([-1, 4, 2], np.int32), np.int32(2)), [2, 4, 2],
         np.int32)


def test_builtin_mean() -> None:
    same(run1(BUILTIN_SRC, "mean", np.array([[1, 2, 3], [4, 5, 9]], np.float32)), 4.0,
         np.float32)
    same(run1(BUILTIN_SRC, "mean64", np.array([0.5, 1.5])), 1.0, np.float64)
