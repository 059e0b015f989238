"""Reference interpreter: memory (allocation, load/store, elementPointer, copy,
deallocation, boxes and reference counts, trap, global variables) and the stack."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import compile_for_test, run, run1

# Each test runs once per installed target: interp, llvm-cpu, nvptx{device=host} (conftest.py).
pytestmark = pytest.mark.usefixtures("spec_target")


def fresh(src: str) -> ir.Executable:
    """A new executable (own global variables) for the target under test."""
    m = ir.parse(src)
    ir.verify(m)
    return compile_for_test(m)


MEMORY_SRC = """
struct $Point {
  #x: f32
  #y: f32
  #tag: <3 x i32>
}
struct $Outer {
  #p: $Point
  #n: i64
}

func @stack_slot: (f32) -> (f32, f32) {
'entry(%v: f32):
  %p = allocateStack f32 count 1
  %z = load %p: *f32
  store %v: f32 to %p: *f32
  %r = load %p: *f32
  %t = literal (%z: f32, %r: f32): (f32, f32)
  return %t: (f32, f32)
}

func @tensor_slot: (<2 x 3 x f64>) -> (<2 x 3 x f64>, <2 x 3 x f64>) {
'entry(%v: <2 x 3 x f64>):
  %p = allocateStack <2 x 3 x f64> count 2
  %z = load %p: *<2 x 3 x f64>
  store %v: <2 x 3 x f64> to %p: *<2 x 3 x f64>
  %w = multiply %v: <2 x 3 x f64>, 2: f64
  store %w: <2 x 3 x f64> to %p: *<2 x 3 x f64>
  %r = load %p: *<2 x 3 x f64>
  %t = literal (%z: <2 x 3 x f64>, %r: <2 x 3 x f64>): (<2 x 3 x f64>, <2 x 3 x f64>)
  return %t: (<2 x 3 x f64>, <2 x 3 x f64>)
}

func @heap: (i64, i32) -> i32 {
'entry(%n: i64, %v: i32):
  %p = allocateHeap i32 count %n: i64
  %z = load %p: *i32
  store %v: i32 to %p: *i32
  %r = load %p: *i32
  %s = add %r: i32, %z: i32
  deallocate %p: *i32
  return %s: i32
}

func @use_after_free: () -> f32 {
'entry():
  %p = allocateHeap f32 count 1: i64
  store 1: f32 to %p: *f32
  deallocate %p: *f32
  %r = load %p: *f32
  return %r: f32
}

func @store_after_free: () -> () {
'entry():
  %p = allocateHeap f32 count 1: i64
  deallocate %p: *f32
  store 1: f32 to %p: *f32
  return
}

func @double_free: () -> () {
'entry():
  %p = allocateHeap f32 count 1: i64
  deallocate %p: *f32
  deallocate %p: *f32
  return
}

func @fields: (f32, f32) -> (f32, f32, <3 x i32>) {
'entry(%a: f32, %b: f32):
  %p = allocateStack $Point count 1
  %px = elementPointer %p: *$Point at #x
  %py = elementPointer %p: *$Point at #y
  %pt = elementPointer %p: *$Point at #tag, 1
  store %a: f32 to %px: *f32
  store %b: f32 to %py: *f32
  store 7: i32 to %pt: *i32
  %s = load %p: *$Point
  %x = extract #x from %s: $Point
  %y = load %py: *f32
  %tag = extract #tag from %s: $Point
  %t = literal (%x: f32, %y: f32, %tag: <3 x i32>): (f32, f32, <3 x i32>)
  return %t: (f32, f32, <3 x i32>)
}

func @nested_fields: (i64) -> (f32, i32, i64) {
'entry(%i: i64):
  %p = allocateStack $Outer count 1
  %q = elementPointer %p: *$Outer at #p
  %qy = elementPointer %q: *$Point at #y
  store 2.5: f32 to %qy: *f32
  %qt = elementPointer %p: *$Outer at #p, #tag, %i: i64
  store -4: i32 to %qt: *i32
  %pn = elementPointer %p: *$Outer at #n
  store 9: i64 to %pn: *i64
  %o = load %p: *$Outer
  %y = extract #p, #y from %o: $Outer
  %t = extract #p, #tag, %i: i64 from %o: $Outer
  %n = extract #n from %o: $Outer
  %r = literal (%y: f32, %t: i32, %n: i64): (f32, i32, i64)
  return %r: (f32, i32, i64)
}

func @element_of_tensor: (<2 x 3 x f32>, i64) -> (<2 x 3 x f32>, <3 x f32>) {
'entry(%v: <2 x 3 x f32>, %i: i64):
  %p = allocateStack <2 x 3 x f32> count 1
  store %v: <2 x 3 x f32> to %p: *<2 x 3 x f32>
  %row = elementPointer %p: *<2 x 3 x f32> at %i: i64
  %old = load %row: *<3 x f32>
  store 0: <3 x f32> to %row: *<3 x f32>
  %all = load %p: *<2 x 3 x f32>
  %t = literal (%all: <2 x 3 x f32>, %old: <3 x f32>): (<2 x 3 x f32>, <3 x f32>)
  return %t: (<2 x 3 x f32>, <3 x f32>)
}

func @element_of_array: (i64) -> f32 {
'entry(%i: i64):
  %p = allocateStack [3 x f32] count 1
  %a = literal [1: f32, 2: f32, 3: f32]: [3 x f32]
  store %a: [3 x f32] to %p: *[3 x f32]
  %q = elementPointer %p: *[3 x f32] at %i: i64
  %r = load %q: *f32
  return %r: f32
}

func @store_element_of_array: (i64) -> [3 x f32] {
'entry(%i: i64):
  %p = allocateStack [3 x f32] count 1
  %q = elementPointer %p: *[3 x f32] at %i: i64
  store 5: f32 to %q: *f32
  %r = load %p: *[3 x f32]
  return %r: [3 x f32]
}

func @copy_cells: (i64) -> (f32, f32) {
'entry(%n: i64):
  %src = allocateHeap f32 count 2: i64
  %dst = allocateHeap f32 count 2: i64
  store 3: f32 to %src: *f32
  store 4: f32 to %dst: *f32
  copy from %src: *f32 to %dst: *f32 count %n: i64
  %a = load %dst: *f32
  %b = load %src: *f32
  %t = literal (%a: f32, %b: f32): (f32, f32)
  return %t: (f32, f32)
}

func @copy_is_by_value: () -> (<2 x f32>, <2 x f32>) {
'entry():
  %src = allocateStack <2 x f32> count 1
  %dst = allocateStack <2 x f32> count 1
  store 1: <2 x f32> to %src: *<2 x f32>
  copy from %src: *<2 x f32> to %dst: *<2 x f32> count 1: i64
  store 2: <2 x f32> to %src: *<2 x f32>
  %a = load %src: *<2 x f32>
  %b = load %dst: *<2 x f32>
  %t = literal (%a: <2 x f32>, %b: <2 x f32>): (<2 x f32>, <2 x f32>)
  return %t: (<2 x f32>, <2 x f32>)
}

func @copy_field: () -> (f32, f32) {
'entry():
  %p = allocateStack $Point count 1
  %q = allocateStack $Point count 1
  %v = literal {#x = 1: f32, #y = 2: f32, #tag = 3: <3 x i32>}: $Point
  store %v: $Point to %p: *$Point
  %px = elementPointer %p: *$Point at #x
  %qy = elementPointer %q: *$Point at #y
  copy from %px: *f32 to %qy: *f32 count 1: i64
  %s = load %q: *$Point
  %x = extract #x from %s: $Point
  %y = extract #y from %s: $Point
  %t = literal (%x: f32, %y: f32): (f32, f32)
  return %t: (f32, f32)
}

func @copy_from_freed: () -> f32 {
'entry():
  %p = allocateHeap f32 count 1: i64
  %q = allocateHeap f32 count 1: i64
  store 5: f32 to %p: *f32
  deallocate %p: *f32
  copy from %p: *f32 to %q: *f32 count 1: i64
  %r = load %q: *f32
  return %r: f32
}

func @copy_to_freed: () -> () {
'entry():
  %p = allocateHeap f32 count 1: i64
  %q = allocateHeap f32 count 1: i64
  deallocate %q: *f32
  copy from %p: *f32 to %q: *f32 count 1: i64
  return
}

func @box: (f32) -> (f32, f32) {
'entry(%v: f32):
  %b = allocateBox f32
  %p = projectBox %b: box{f32}
  %z = load %p: *f32
  store %v: f32 to %p: *f32
  retain %b: box{f32}
  release %b: box{f32}
  %q = projectBox %b: box{f32}
  %r = load %q: *f32
  release %b: box{f32}
  %t = literal (%z: f32, %r: f32): (f32, f32)
  return %t: (f32, f32)
}

func @box_freed_at_zero: () -> f32 {
'entry():
  %b = allocateBox f32
  %p = projectBox %b: box{f32}
  store 1: f32 to %p: *f32
  retain %b: box{f32}
  release %b: box{f32}
  release %b: box{f32}
  %r = load %p: *f32
  return %r: f32
}

func @over_release: () -> () {
'entry():
  %b = allocateBox f32
  release %b: box{f32}
  release %b: box{f32}
  return
}

func @copy_boxes: (<2 x i32>) -> <2 x i32> {
'entry(%v: <2 x i32>):
  %a = allocateBox <2 x i32>
  %b = allocateBox <2 x i32>
  %pa = projectBox %a: box{<2 x i32>}
  store %v: <2 x i32> to %pa: *<2 x i32>
  copy from %a: box{<2 x i32>} to %b: box{<2 x i32>} count 1: i64
  %pb = projectBox %b: box{<2 x i32>}
  %r = load %pb: *<2 x i32>
  return %r: <2 x i32>
}

func @null_load: () -> f32 {
'entry():
  %p = literal null: *f32
  %r = load %p: *f32
  return %r: f32
}

func @null_store: () -> () {
'entry():
  %p = literal null: *f32
  store 1: f32 to %p: *f32
  return
}

func @null_deallocate: () -> () {
'entry():
  %p = literal null: *f32
  deallocate %p: *f32
  return
}

func @null_call: () -> f32 {
'entry():
  %g = literal null: (f32) -> f32
  %r = apply %g(1: f32) -> f32
  return %r: f32
}

func @trap: () -> f32 {
'entry():
  trap
  return 0: f32
}
"""


def test_allocate_stack_load_store() -> None:
    z, r = run(MEMORY_SRC, "stack_slot", np.float32(2.5))
    assert z.dtype == np.float32 and z.tolist() == 0.0  # fresh memory is zero
    assert r.dtype == np.float32 and r.tolist() == 2.5


def test_tensor_in_memory() -> None:
    v = np.arange(6, dtype=np.float64).reshape(2, 3)
    z, r = run(MEMORY_SRC, "tensor_slot", v)
    assert z.tolist() == np.zeros((2, 3)).tolist()
    assert r.dtype == np.float64 and r.tolist() == (2 * v).tolist()


def test_allocate_heap() -> None:
    out = run1(MEMORY_SRC, "heap", np.int64(3), np.int32(-8))
    assert out.dtype == np.int32 and out.tolist() == -8


def test_allocate_heap_of_zero_cells_cannot_be_loaded() -> None:
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, "heap", np.int64(0), np.int32(1))


@pytest.mark.parametrize("fn", ["use_after_free", "store_after_free", "double_free"])
def test_deallocated_memory_cannot_be_used(fn: str) -> None:
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, fn)


def test_element_pointer_into_struct_fields() -> None:
    x, y, tag = run(MEMORY_SRC, "fields", np.float32(1.5), np.float32(-2))
    assert (x.tolist(), y.tolist(), tag.tolist()) == (1.5, -2.0, [0, 7, 0])
    assert tag.dtype == np.int32


def test_element_pointer_through_nested_structs() -> None:
    y, t, n = run(MEMORY_SRC, "nested_fields", np.int64(2))
    assert (y.tolist(), t.tolist(), n.tolist()) == (2.5, -4, 9)
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, "nested_fields", np.int64(3))


def test_element_pointer_into_a_tensor() -> None:
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    whole, old = run(MEMORY_SRC, "element_of_tensor", v, np.int64(1))
    assert whole.tolist() == [[0, 1, 2], [0, 0, 0]] and old.tolist() == [3, 4, 5]
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, "element_of_tensor", v, np.int64(2))


def test_element_pointer_into_an_array() -> None:
    assert [run1(MEMORY_SRC, "element_of_array", np.int64(i)).tolist() for i in range(3)] == [
        1, 2, 3]
    outs = run(MEMORY_SRC, "store_element_of_array", np.int64(2))
    assert [o.tolist() for o in outs] == [0, 0, 5]


@pytest.mark.parametrize("i", [3, -1])
def test_element_pointer_into_an_array_out_of_bounds(i: int) -> None:
    # -1 must not wrap around to the last element; 3 must not be a raw IndexError
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, "element_of_array", np.int64(i))
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, "store_element_of_array", np.int64(i))


def test_copy() -> None:
    a, b = run(MEMORY_SRC, "copy_cells", np.int64(1))
    assert (a.tolist(), b.tolist()) == (3.0, 3.0)
    a, b = run(MEMORY_SRC, "copy_cells", np.int64(0))
    assert (a.tolist(), b.tolist()) == (4.0, 3.0)
    a, b = run(MEMORY_SRC, "copy_cells", np.int64(2))
    assert (a.tolist(), b.tolist()) == (3.0, 3.0)
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, "copy_cells", np.int64(3))


def test_copy_is_by_value() -> None:
    a, b = run(MEMORY_SRC, "copy_is_by_value")
    assert (a.tolist(), b.tolist()) == ([2, 2], [1, 1])


def test_copy_between_element_pointers() -> None:
    # copying one f32 from p.#x to q.#y writes q.#y only
    x, y = run(MEMORY_SRC, "copy_field")
    assert (x.tolist(), y.tolist()) == (0.0, 1.0)


@pytest.mark.parametrize("fn", ["copy_from_freed", "copy_to_freed"])
def test_copy_with_deallocated_memory(fn: str) -> None:
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, fn)


# ---------------------------------------------------------------- allocation counts

COUNTS_SRC = """
func @heap_of: (i64) -> f32 {
'entry(%n: i64):
  %p = allocateHeap f32 count %n: i64
  return 1: f32
}
func @heap_of_i8: (i8) -> f32 {
'entry(%n: i8):
  %p = allocateHeap <2 x f32> count %n: i8
  return 1: f32
}
func @copy_between: (i64, i64, i64) -> f32 {
'entry(%m: i64, %k: i64, %n: i64):
  %src = allocateHeap f32 count %m: i64
  %dst = allocateHeap f32 count %k: i64
  store 1: f32 to %src: *f32
  copy from %src: *f32 to %dst: *f32 count %n: i64
  %r = load %dst: *f32
  return %r: f32
}
"""

HUGE_SRC = """
func @billion: (f32) -> (f32, f32, f32) {
'entry(%v: f32):
  %a = allocateHeap <4 x f32> count 1000000000000: i64
  %z = load %a: *<4 x f32>
  %s = reduce %z: <4 x f32> by add init 0: f32
  %b = allocateStack f32 count 1000000000
  %c = allocateStack f32 count 1000000000
  store %v: f32 to %b: *f32
  copy from %b: *f32 to %c: *f32 count 1000000000: i64
  %x = load %c: *f32
  %d = allocateHeap f32 count 1000000000: i64
  copy from %d: *f32 to %c: *f32 count 1000000000: i64
  %y = load %c: *f32
  deallocate %a: *<4 x f32>
  deallocate %d: *f32
  %r = literal (%s: f32, %x: f32, %y: f32): (f32, f32, f32)
  return %r: (f32, f32, f32)
}
func @huge_array: () -> f32 {
'entry():
  %b = allocateBox [1000000000 x f32]
  %p = projectBox %b: box{[1000000000 x f32]}
  %q = elementPointer %p: *[1000000000 x f32] at 5
  %v = load %q: *f32
  return %v: f32
}
func @array_of_arrays: () -> f32 {
'entry():
  %p = allocateStack [100000 x [100000 x f32]] count 1
  %q = elementPointer %p: *[100000 x [100000 x f32]] at 1, 2
  %v = load %q: *f32
  return %v: f32
}
"""


def every_cell_is_made() -> bool:
    """llvm-cpu allocates and zeroes every cell at the allocation; the interpreter and the
    GPU target's host walk make a cell when it is first written."""
    from dlvm.ir.testing import target_under_test

    return target_under_test().startswith("llvm-cpu")


@pytest.mark.parametrize("fn, n", [("heap_of", np.int64(-1)), ("heap_of", np.int64(-2**62)),
                                   ("heap_of_i8", np.int8(-5))])
def test_a_negative_count_is_an_error_at_the_allocation(fn: str, n: np.integer) -> None:
    with pytest.raises(ir.ExecutionError,
                       match=f"'allocateHeap': allocation of a negative count {int(n)}$"):
        run(COUNTS_SRC, fn, n)


def test_a_count_of_zero_allocates_nothing_to_read() -> None:
    assert run1(COUNTS_SRC, "heap_of", np.int64(0)).tolist() == 1.0
    with pytest.raises(ir.ExecutionError, match="pointer index 0 out of bounds"):
        run(COUNTS_SRC, "copy_between", np.int64(1), np.int64(0), np.int64(1))


@pytest.mark.parametrize("m, k, n", [(2, 5, 3), (5, 2, 3), (3, 3, 4)])
def test_a_copy_past_an_end_names_the_first_cell_outside(m: int, k: int, n: int) -> None:
    with pytest.raises(ir.ExecutionError, match=f"pointer index {min(m, k)} out of bounds"):
        run(COUNTS_SRC, "copy_between", np.int64(m), np.int64(k), np.int64(n))


def test_a_copy_of_a_huge_count_past_an_end_is_refused_at_once() -> None:
    with pytest.raises(ir.ExecutionError, match="pointer index 1 out of bounds"):
        run(COUNTS_SRC, "copy_between", np.int64(1), np.int64(1), np.int64(10**12))


def test_a_copy_of_a_negative_count_is_an_error() -> None:
    with pytest.raises(ir.ExecutionError, match="negative count -1"):
        run(COUNTS_SRC, "copy_between", np.int64(2), np.int64(2), np.int64(-1))


def test_a_billion_cells_cost_nothing_until_written() -> None:
    if every_cell_is_made():
        pytest.skip("llvm-cpu makes every cell at the allocation (gigabytes here)")
    exe = compile_for_test(ir.parse(HUGE_SRC))
    s, x, y = exe.call("billion", np.float32(2.5))
    # unwritten cells read as zero, a copy moves what was written, and a copy from cells
    # never written makes the destination read zero again
    assert (s.tolist(), x.tolist(), y.tolist()) == (0.0, 2.5, 0.0)


@pytest.mark.parametrize("fn", ["huge_array", "array_of_arrays"])
def test_an_array_value_too_large_to_hold_is_refused(fn: str) -> None:
    if every_cell_is_made():
        pytest.skip("llvm-cpu lays the array out in memory (gigabytes here)")
    exe = compile_for_test(ir.parse(HUGE_SRC))
    with pytest.raises(ir.ExecutionError, match=r"elements, more than the interpreter keeps "
                                                r"in arrays \(16777216\); use a tensor type"):
        exe.call(fn)


@pytest.mark.interp_only("a type rule: the verifier's")
def test_an_allocate_stack_count_must_fit_in_an_i64() -> None:
    m = ir.parse("func @f: () -> () {\n'entry():\n"
                 "  %p = allocateStack f32 count 9223372036854775808\n  return\n}\n")
    with pytest.raises(ir.DlvmError, match="allocateStack needs a count from 1 to "
                                           "9223372036854775807, found 9223372036854775808"):
        ir.verify(m)


def test_box_retain_release() -> None:
    z, r = run(MEMORY_SRC, "box", np.float32(6))
    assert (z.tolist(), r.tolist()) == (0.0, 6.0)


def test_box_is_freed_when_its_count_reaches_zero() -> None:
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, "box_freed_at_zero")


def test_releasing_a_freed_box_is_an_error() -> None:
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, "over_release")


def test_copy_between_boxes() -> None:
    out = run1(MEMORY_SRC, "copy_boxes", np.array([3, -4], np.int32))
    assert out.dtype == np.int32 and out.tolist() == [3, -4]


@pytest.mark.parametrize("fn", ["null_load", "null_store", "null_deallocate", "null_call"])
def test_null_is_an_execution_error(fn: str) -> None:
    with pytest.raises(ir.ExecutionError):
        run(MEMORY_SRC, fn)


def test_trap() -> None:
    with pytest.raises(ir.ExecutionError, match="trap"):
        run(MEMORY_SRC, "trap")


# ---------------------------------------------------------------- global variables

GLOBAL_SRC = """
struct $Stats {
  #count: i64
  #total: f64
}
var @counter: i64
var @stats: $Stats
var @weights: <2 x f32>

func @bump: () -> i64 {
'entry():
  %v = load @counter: *i64
  %w = add %v: i64, 1: i64
  store %w: i64 to @counter: *i64
  return %w: i64
}
func @peek: () -> i64 {
'entry():
  %v = load @counter: *i64
  return %v: i64
}
func @record: (f64) -> (i64, f64) {
'entry(%x: f64):
  %pc = elementPointer @stats: *$Stats at #count
  %pt = elementPointer @stats: *$Stats at #total
  %c = load %pc: *i64
  %t = load %pt: *f64
  %c2 = add %c: i64, 1: i64
  %t2 = add %t: f64, %x: f64
  store %c2: i64 to %pc: *i64
  store %t2: f64 to %pt: *f64
  %s = load @stats: *$Stats
  %rc = extract #count from %s: $Stats
  %rt = extract #total from %s: $Stats
  %r = literal (%rc: i64, %rt: f64): (i64, f64)
  return %r: (i64, f64)
}
func @set_weights: (<2 x f32>) -> () {
'entry(%w: <2 x f32>):
  store %w: <2 x f32> to @weights: *<2 x f32>
  return
}
func @predict: (<2 x f32>) -> f32 {
'entry(%x: <2 x f32>):
  %w = load @weights: *<2 x f32>
  %r = dot %x: <2 x f32>, %w: <2 x f32>
  return %r: f32
}
func @get_weights: () -> <2 x f32> {
'entry():
  %w = load @weights: *<2 x f32>
  return %w: <2 x f32>
}
func @same: (<2 x f32>) -> <2 x f32> {
'entry(%x: <2 x f32>):
  return %x: <2 x f32>
}
"""


def test_global_variable_starts_at_zero_and_persists_across_calls() -> None:
    exe = fresh(GLOBAL_SRC)
    assert exe.call("peek")[0].tolist() == 0
    assert [exe.call("bump")[0].tolist() for _ in range(3)] == [1, 2, 3]
    assert exe.call("peek")[0].tolist() == 3
    # another executable has its own globals
    assert fresh(GLOBAL_SRC).call("peek")[0].tolist() == 0


def test_global_struct_fields() -> None:
    exe = fresh(GLOBAL_SRC)
    c, t = exe.call("record", np.float64(1.5))
    assert (c.tolist(), t.tolist()) == (1, 1.5)
    c, t = exe.call("record", np.float64(2.0))
    assert (c.tolist(), t.tolist()) == (2, 3.5)
    assert c.dtype == np.int64 and t.dtype == np.float64


def test_global_tensor() -> None:
    exe = fresh(GLOBAL_SRC)
    assert exe.call("predict", np.array([1, 1], np.float32))[0].tolist() == 0
    assert exe.call("set_weights", np.array([2, -1], np.float32)) == ()
    out = exe.call("predict", np.array([3, 4], np.float32))[0]
    assert out.dtype == np.float32 and out.tolist() == 2.0




def test_memory_keeps_what_was_stored_whatever_the_caller_does_with_its_array() -> None:
    exe = fresh(GLOBAL_SRC)
    w = np.array([2, -1], np.float32)
    exe.call("set_weights", w)
    w[:] = 100  # the caller's array changes after the call: the global does not
    assert exe.call("get_weights")[0].tolist() == [2, -1]
    del w
    assert exe.call("predict", np.array([3, 4], np.float32))[0].tolist() == 2.0


def test_results_are_the_callers_own_arrays() -> None:
    exe = fresh(GLOBAL_SRC)
    exe.call("set_weights", np.array([2, -1], np.float32))
    (loaded,) = exe.call("get_weights")
    loaded[:] = 7  # writing a global's value handed out does not write the global
    assert exe.call("get_weights")[0].tolist() == [2, -1]
    x = np.array([1, 2], np.float32)
    (y,) = exe.call("same", x)  # an argument returned comes back as a copy
    assert y.flags.writeable and not np.shares_memory(x, y)
    y[0] = 5
    assert x.tolist() == [1, 2]


# ---------------------------------------------------------------- stack

STACK_SRC = """
func @lifo: (f32, f32, f32) -> (f32, f32, f32) {
'entry(%a: f32, %b: f32, %c: f32):
  %s = createStack
  push %a: f32 to %s: stack
  push %b: f32 to %s: stack
  %x = pop f32 from %s: stack
  push %c: f32 to %s: stack
  %y = pop f32 from %s: stack
  %z = pop f32 from %s: stack
  destroyStack %s: stack
  %t = literal (%x: f32, %y: f32, %z: f32): (f32, f32, f32)
  return %t: (f32, f32, f32)
}
func @mixed: (<2 x i32>) -> (<2 x i32>, (f64, bool)) {
'entry(%v: <2 x i32>):
  %s = createStack
  %pair = literal (1.5: f64, true: bool): (f64, bool)
  push %v: <2 x i32> to %s: stack
  push %pair: (f64, bool) to %s: stack
  %p = pop (f64, bool) from %s: stack
  %w = pop <2 x i32> from %s: stack
  %t = literal (%w: <2 x i32>, %p: (f64, bool)): (<2 x i32>, (f64, bool))
  return %t: (<2 x i32>, (f64, bool))
}
// a tape: push in a loop, pop in a second loop (reversed order)
func @tape: (i32) -> i32 {
'entry(%n: i32):
  %s = createStack
  branch 'fwd(0: i32)
'fwd(%i: i32):
  %c = lessThan %i: i32, %n: i32
  conditional %c: bool then 'push else 'bwd(0: i32, 0: i32)
'push():
  push %i: i32 to %s: stack
  %i2 = add %i: i32, 1: i32
  branch 'fwd(%i2: i32)
'bwd(%k: i32, %acc: i32):
  %d = lessThan %k: i32, %n: i32
  conditional %d: bool then 'pop else 'done
'pop():
  %v = pop i32 from %s: stack
  %w = multiply %acc: i32, 10: i32
  %acc2 = add %w: i32, %v: i32
  %k2 = add %k: i32, 1: i32
  branch 'bwd(%k2: i32, %acc2: i32)
'done():
  destroyStack %s: stack
  return %acc: i32
}
func @pop_empty: () -> f32 {
'entry():
  %s = createStack
  push 1: f32 to %s: stack
  %a = pop f32 from %s: stack
  %b = pop f32 from %s: stack
  return %b: f32
}
func @pop_destroyed: () -> f32 {
'entry():
  %s = createStack
  push 1: f32 to %s: stack
  destroyStack %s: stack
  %a = pop f32 from %s: stack
  return %a: f32
}
func @pop_wrong_type: () -> f32 {
'entry():
  %s = createStack
  push 1: i32 to %s: stack
  %a = pop f32 from %s: stack
  return %a: f32
}
"""


def test_stack_is_last_in_first_out() -> None:
    x, y, z = run(STACK_SRC, "lifo", np.float32(1), np.float32(2), np.float32(3))
    assert (x.tolist(), y.tolist(), z.tolist()) == (2.0, 3.0, 1.0)


def test_stack_holds_values_of_any_type() -> None:
    w, f, b = run(STACK_SRC, "mixed", np.array([5, 6], np.int32))
    assert w.tolist() == [5, 6] and f.tolist() == 1.5 and b.tolist() is True


def test_stack_as_a_tape() -> None:
    assert run1(STACK_SRC, "tape", np.int32(4)).tolist() == 3210
    assert run1(STACK_SRC, "tape", np.int32(0)).tolist() == 0


@pytest.mark.parametrize("fn", ["pop_empty", "pop_destroyed"])
def test_pop_from_an_empty_stack_is_an_error(fn: str) -> None:
    with pytest.raises(ir.ExecutionError):
        run(STACK_SRC, fn)


def test_pop_of_another_type_than_was_pushed_is_an_error() -> None:
    with pytest.raises(ir.ExecutionError):
        run(STACK_SRC, "pop_wrong_type")
