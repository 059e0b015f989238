"""Arguments are lent to a call: what memory keeps past the call is its own.

Native code reads the caller's numpy arrays in place for the duration of one call. Every
way the memory instructions let a tensor outlive the call (a global, a field or element of
one, a tuple or struct stored whole, heap memory or a box a global points to, `copy`, an
enum's payload, a callee's store, a view of an argument) must keep a copy of its own, so a
later call sees the value stored even after the caller scribbles over its array or drops
it. The other way, a global's value handed back to Python is a copy that Python may write.
Each program runs on `interp` too, which is given private copies of the arguments (it reads
its arguments in place as well, and only a copy stands for "the value at the call").
"""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.llvm.codegen.support import HEADER_BYTES
from dlvm.llvm.runtime.executable import LLVMExecutable

SRC = """
struct $Params {
  #w: <4 x f32>
  #scale: f32
}
enum $Maybe {
  ?nothing()
  ?just(<4 x f32>)
}
var @w: <4 x f32>
var @w2: <4 x f32>
var @params: $Params
var @pair: (<4 x f32>, <4 x f32>)
var @rows: [2 x <4 x f32>]
var @heap: *<4 x f32>
var @box: box{<4 x f32>}
var @maybe: $Maybe
var @grid: <2 x 4 x f32>

func @set_global: (<4 x f32>) -> () {
'entry(%x: <4 x f32>):
  store %x: <4 x f32> to @w: *<4 x f32>
  return
}
func @get_global: () -> <4 x f32> {
'entry():
  %v = load @w: *<4 x f32>
  return %v: <4 x f32>
}
func @get_global_twice: () -> (<4 x f32>, <4 x f32>) {
'entry():
  %v = load @w: *<4 x f32>
  %t = literal (%v: <4 x f32>, %v: <4 x f32>): (<4 x f32>, <4 x f32>)
  return %t: (<4 x f32>, <4 x f32>)
}
func @set_both: (<4 x f32>) -> () {
'entry(%x: <4 x f32>):
  %v = multiply %x: <4 x f32>, 2: f32
  store %v: <4 x f32> to @w: *<4 x f32>
  store %v: <4 x f32> to @w2: *<4 x f32>
  return
}
func @set_twice: (<4 x f32>) -> () {
'entry(%x: <4 x f32>):
  store %x: <4 x f32> to @w: *<4 x f32>
  store %x: <4 x f32> to @w2: *<4 x f32>
  return
}
func @get_w2: () -> <4 x f32> {
'entry():
  %v = load @w2: *<4 x f32>
  return %v: <4 x f32>
}

func @set_field: (<4 x f32>) -> () {
'entry(%x: <4 x f32>):
  %p = elementPointer @params: *$Params at #w
  store %x: <4 x f32> to %p: *<4 x f32>
  return
}
func @set_struct: (<4 x f32>, f32) -> () {
'entry(%x: <4 x f32>, %k: f32):
  %s = literal {#w = %x: <4 x f32>, #scale = %k: f32}: $Params
  store %s: $Params to @params: *$Params
  return
}
func @get_params: () -> (<4 x f32>, f32) {
'entry():
  %s = load @params: *$Params
  %w = extract #w from %s: $Params
  %k = extract #scale from %s: $Params
  %t = literal (%w: <4 x f32>, %k: f32): (<4 x f32>, f32)
  return %t: (<4 x f32>, f32)
}

func @set_pair: (<4 x f32>, <4 x f32>) -> () {
'entry(%a: <4 x f32>, %b: <4 x f32>):
  %t = literal (%a: <4 x f32>, %b: <4 x f32>): (<4 x f32>, <4 x f32>)
  store %t: (<4 x f32>, <4 x f32>) to @pair: *(<4 x f32>, <4 x f32>)
  return
}
func @set_pair_tuple: ((<4 x f32>, <4 x f32>)) -> () {
'entry(%t: (<4 x f32>, <4 x f32>)):
  store %t: (<4 x f32>, <4 x f32>) to @pair: *(<4 x f32>, <4 x f32>)
  return
}
func @get_pair: () -> (<4 x f32>, <4 x f32>) {
'entry():
  %t = load @pair: *(<4 x f32>, <4 x f32>)
  return %t: (<4 x f32>, <4 x f32>)
}

func @set_row: (<4 x f32>, i64) -> () {
'entry(%x: <4 x f32>, %i: i64):
  %p = elementPointer @rows: *[2 x <4 x f32>] at %i: i64
  store %x: <4 x f32> to %p: *<4 x f32>
  return
}
func @get_rows: () -> [2 x <4 x f32>] {
'entry():
  %r = load @rows: *[2 x <4 x f32>]
  return %r: [2 x <4 x f32>]
}

func @set_heap: (<4 x f32>) -> () {
'entry(%x: <4 x f32>):
  %p = allocateHeap <4 x f32> count 1: i64
  store %x: <4 x f32> to %p: *<4 x f32>
  store %p: *<4 x f32> to @heap: **<4 x f32>
  return
}
func @get_heap: () -> <4 x f32> {
'entry():
  %p = load @heap: **<4 x f32>
  %v = load %p: *<4 x f32>
  return %v: <4 x f32>
}

func @set_box: (<4 x f32>) -> () {
'entry(%x: <4 x f32>):
  %b = allocateBox <4 x f32>
  %p = projectBox %b: box{<4 x f32>}
  store %x: <4 x f32> to %p: *<4 x f32>
  store %b: box{<4 x f32>} to @box: *box{<4 x f32>}
  return
}
func @get_box: () -> <4 x f32> {
'entry():
  %b = load @box: *box{<4 x f32>}
  %p = projectBox %b: box{<4 x f32>}
  %v = load %p: *<4 x f32>
  return %v: <4 x f32>
}

func @copy_to_global: (<4 x f32>) -> () {
'entry(%x: <4 x f32>):
  %s = allocateStack <4 x f32> count 1
  store %x: <4 x f32> to %s: *<4 x f32>
  copy from %s: *<4 x f32> to @w: *<4 x f32> count 1: i64
  return
}

func @set_maybe: (<4 x f32>) -> () {
'entry(%x: <4 x f32>):
  %m = literal ?just(%x: <4 x f32>): $Maybe
  store %m: $Maybe to @maybe: *$Maybe
  return
}
func @get_maybe: () -> <4 x f32> {
'entry():
  %m = load @maybe: *$Maybe
  branchEnum %m: $Maybe case ?nothing 'nothing case ?just 'just
'nothing():
  %z = literal -1: <4 x f32>
  return %z: <4 x f32>
'just(%v: <4 x f32>):
  return %v: <4 x f32>
}

func @store_in_callee: (<4 x f32>) -> () {
'entry(%x: <4 x f32>):
  apply @set_global(%x: <4 x f32>) -> ()
  return
}
func @set_view: (<2 x 4 x f32>, i64) -> () {
'entry(%m: <2 x 4 x f32>, %i: i64):
  %r = extract %i: i64 from %m: <2 x 4 x f32>
  store %r: <4 x f32> to @w: *<4 x f32>
  return
}

func @set_grid: (<2 x 4 x f32>) -> () {
'entry(%g: <2 x 4 x f32>):
  store %g: <2 x 4 x f32> to @grid: *<2 x 4 x f32>
  return
}
func @set_grid_row: (<4 x f32>, i64) -> () {
'entry(%x: <4 x f32>, %i: i64):
  %p = elementPointer @grid: *<2 x 4 x f32> at %i: i64
  store %x: <4 x f32> to %p: *<4 x f32>
  return
}
func @get_grid: () -> <2 x 4 x f32> {
'entry():
  %g = load @grid: *<2 x 4 x f32>
  return %g: <2 x 4 x f32>
}
func @get_grid_row: (i64) -> <4 x f32> {
'entry(%i: i64):
  %p = elementPointer @grid: *<2 x 4 x f32> at %i: i64
  %r = load %p: *<4 x f32>
  return %r: <4 x f32>
}
"""

Args = Callable[[int], Sequence[Any]]


@pytest.fixture(scope="module", autouse=True)
def collections_see_only_these_tests() -> Iterator[None]:
    """`churn` collects garbage after every call; in a long test run each full collection
    would walk the whole process's objects (~0.1 s); frozen, they are skipped, and what
    these tests drop is still collected."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def vec(k: int) -> np.ndarray:
    return np.arange(4, dtype=np.float32) + 10 * k


def grid(k: int) -> np.ndarray:
    return np.arange(8, dtype=np.float32).reshape(2, 4) - 10 * k


def leaves(value: Any) -> list[np.ndarray]:
    """A call's results as a flat list of arrays (tuples and arrays depth-first)."""
    if isinstance(value, tuple | list):
        return [x for v in value for x in leaves(v)]
    return [np.asarray(value)]


def scribble(value: Any) -> None:
    """Overwrite every array the caller holds, as a caller reusing its buffers does."""
    for a in leaves(value):
        if a.ndim and a.flags.writeable:
            a.fill(-99)


def churn() -> None:
    """Collect dropped arrays and allocate others of the same sizes over their memory."""
    gc.collect()
    junk = [np.full(n, 77, np.float32) for n in (4, 8) for _ in range(64)]
    del junk


class Twin:
    """One program on `llvm-cpu` and `interp`, called alike and compared after each call.
    The native side gets fresh arrays that are scribbled over and dropped once the call
    returns, and its results are scribbled over once compared."""

    def __init__(self) -> None:
        module = ir.parse(SRC)
        ir.verify(module)
        self.native = ir.compile(module, "llvm-cpu")  # code from the run's cache; globals its own
        self.oracle = ir.compile(ir.parse(SRC), "interp")

    def __call__(self, name: str, *args: Any) -> None:
        want = leaves(self.oracle.call(name, *copied(args)))
        lent = copied(args)
        got = self.native.call(name, *lent)
        scribble(lent)
        del lent
        churn()
        out = leaves(got)
        assert len(out) == len(want), name
        for g, w in zip(out, want, strict=True):
            assert g.dtype == w.dtype and g.shape == w.shape, name
            np.testing.assert_array_equal(g, w, err_msg=name)
        scribble(got)


def copied(args: Sequence[Any]) -> list[Any]:
    return [tuple(copied(a)) if isinstance(a, tuple) else np.array(a) for a in args]


# (setter, its arguments for the k-th call, getter, its arguments)
PATHS: list[tuple[str, Args, str, tuple[Any, ...]]] = [
    ("set_global", lambda k: (vec(k),), "get_global", ()),
    ("set_global", lambda k: (vec(k),), "get_global_twice", ()),
    ("set_twice", lambda k: (vec(k),), "get_w2", ()),
    ("set_field", lambda k: (vec(k),), "get_params", ()),
    ("set_struct", lambda k: (vec(k), np.float32(k)), "get_params", ()),
    ("set_pair", lambda k: (vec(k), vec(k + 5)), "get_pair", ()),
    ("set_pair_tuple", lambda k: ((vec(k), vec(-k)),), "get_pair", ()),
    ("set_row", lambda k: (vec(k), np.int64(k % 2)), "get_rows", ()),
    ("set_heap", lambda k: (vec(k),), "get_heap", ()),
    ("set_box", lambda k: (vec(k),), "get_box", ()),
    ("copy_to_global", lambda k: (vec(k),), "get_global", ()),
    ("set_maybe", lambda k: (vec(k),), "get_maybe", ()),
    ("store_in_callee", lambda k: (vec(k),), "get_global", ()),
    ("set_view", lambda k: (grid(k), np.int64(k % 2)), "get_global", ()),
    ("set_grid", lambda k: (grid(k),), "get_grid", ()),
    ("set_grid", lambda k: (grid(k),), "get_grid_row", (np.int64(1),)),
    ("set_grid_row", lambda k: (vec(k), np.int64(k % 2)), "get_grid", ()),
]

STARTS_NULL = {"get_heap", "get_box", "get_maybe"}


@pytest.mark.parametrize(("setter", "args", "getter", "getter_args"), PATHS,
                         ids=[f"{s}-{g}" for s, _, g, _ in PATHS])
def test_what_memory_keeps_outlives_the_callers_arrays(
        setter: str, args: Args, getter: str, getter_args: tuple[Any, ...]) -> None:
    twin = Twin()
    if getter in STARTS_NULL:  # a null pointer, a null box, an undefined enum
        for exe in (twin.native, twin.oracle):
            with pytest.raises(ir.ExecutionError):
                exe.call(getter, *getter_args)
    else:
        twin(getter, *getter_args)  # zero before any store
    for k in range(1, 4):
        twin(setter, *args(k))
        twin(getter, *getter_args)
        twin(getter, *getter_args)  # the first result, scribbled over, changed nothing


def test_a_stored_array_that_the_caller_dropped() -> None:
    """The shape of `test_global_tensor` (dlvm-ir): the array stored is a temporary, and
    the memory numpy freed holds other arrays by the time the global is read."""
    twin = Twin()
    twin.oracle.call("set_global", np.array([2, -1, 0, 1], np.float32))
    twin.native.call("set_global", np.array([2, -1, 0, 1], np.float32))
    gc.collect()
    others = [np.full(4, 77, np.float32) for _ in range(64)]
    (got,) = twin.native.call("get_global")
    assert got.tolist() == [2, -1, 0, 1]
    del others
    twin("get_global")


def global_tensor(exe: ir.Executable, name: str) -> tuple[int, int]:
    """(buffer, reference count) of the tensor a global of rank ≥ 1 holds."""
    assert isinstance(exe, LLVMExecutable)
    index = [g.name for g in exe.module.globals].index(name)
    buf = int(exe.global_cells[index][HEADER_BYTES // 8])  # the cell's {buf, data, dims}
    return buf, ctypes.c_int64.from_address(buf).value


def test_a_counted_tensor_is_shared_by_reference_not_copied() -> None:
    exe = ir.compile(ir.parse(SRC), "llvm-cpu", cache=False)
    exe.call("set_both", vec(1))
    (w, count), (w2, count2) = global_tensor(exe, "w"), global_tensor(exe, "w2")
    assert w == w2 and count == count2 == 2
    exe.call("set_twice", vec(2))  # a lent array: each global keeps a copy of its own
    (w, count), (w2, count2) = global_tensor(exe, "w"), global_tensor(exe, "w2")
    assert w != w2 and count == count2 == 1
    assert exe.call("get_w2")[0].tolist() == vec(2).tolist()


def test_storing_lent_arrays_reuses_memory_in_steady_state() -> None:
    """A stored copy replaces the one before it, which goes back to the pool: calls in a loop
    take turns between two buffers instead of allocating a fresh one each time."""
    exe = ir.compile(ir.parse(SRC), "llvm-cpu", cache=False)
    buffers = []
    for k in range(12):
        exe.call("set_global", vec(k))
        buffers.append(global_tensor(exe, "w")[0])
    assert len(set(buffers[2:])) <= 2
    assert exe.call("get_global")[0].tolist() == vec(11).tolist()


def test_a_globals_value_handed_to_python_is_a_copy() -> None:
    exe = ir.compile(ir.parse(SRC), "llvm-cpu", cache=False)
    exe.call("set_grid", grid(1))
    for name, args in [("get_grid", ()), ("get_grid_row", (np.int64(0),))]:
        (out,) = exe.call(name, *args)
        assert out.flags.writeable
        out.fill(5)
    a, b = exe.call("get_global_twice")
    assert a.ctypes.data != b.ctypes.data
    np.testing.assert_array_equal(exe.call("get_grid")[0], grid(1))


BIG = """
var @big: <300 x 300 x f32>
func @total: () -> f32 {
'entry():
  %w = load @big: *<300 x 300 x f32>
  %s = reduce %w: <300 x 300 x f32> by add init 0: f32 along 0, 1
  return %s: f32
}
func @cells: (<300 x 300 x f32>) -> (f32, f32, f32, f32) {
'entry(%x: <300 x 300 x f32>):
  %p = allocateHeap <300 x 300 x f32> count 2: i64
  %s = allocateStack <300 x 300 x f32> count 1
  %b = allocateBox <300 x 300 x f32>
  %q = projectBox %b: box{<300 x 300 x f32>}
  %z = load %p: *<300 x 300 x f32>
  %zs = load %s: *<300 x 300 x f32>
  %zb = load %q: *<300 x 300 x f32>
  store %x: <300 x 300 x f32> to %p: *<300 x 300 x f32>
  %v = load %p: *<300 x 300 x f32>
  %a = reduce %z: <300 x 300 x f32> by add init 0: f32 along 0, 1
  %c = reduce %zs: <300 x 300 x f32> by add init 0: f32 along 0, 1
  %d = reduce %zb: <300 x 300 x f32> by add init 0: f32 along 0, 1
  %e = reduce %v: <300 x 300 x f32> by add init 0: f32 along 0, 1
  %t = literal (%a: f32, %c: f32, %d: f32, %e: f32): (f32, f32, f32, f32)
  return %t: (f32, f32, f32, f32)
}
"""


def test_memory_owns_the_zero_tensors_it_starts_with() -> None:
    """Tensors too large to be constants are filled at run time; the fresh cell holds that
    buffer, not the instruction that happened to create it."""
    exe = ir.compile(ir.parse(BIG), "llvm-cpu", cache=False)
    oracle = ir.compile(ir.parse(BIG), "interp")
    x = np.ones((300, 300), np.float32)
    for _ in range(3):
        assert exe.call("total")[0].tolist() == oracle.call("total")[0].tolist() == 0
        got = [r.tolist() for r in exe.call("cells", x)]
        assert got == [r.tolist() for r in oracle.call("cells", x)] == [0, 0, 0, 90000]
