"""Memory and stacks live as long as something holds them, as in the interpreter: a stack
or a pointer kept in a global serves later calls, and what nothing holds any more goes back
to the pool (an `allocateStack` block when its function's pointers go, a `deallocate`d block
when the last pointer to it does, a stack when the last value holding it does)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir

SOURCE = """
var @tape: stack
var @kept: *f32

func @save: (f32) -> f32 {
'entry(%x: f32):
    %s = createStack
    push %x: f32 to %s: stack
    store %s: stack to @tape: *stack
    return %x: f32
}

func @restore: () -> f32 {
'entry():
    %s = load @tape: *stack
    %v = pop f32 from %s: stack
    return %v: f32
}

func @keep_frame: (f32) -> f32 {
'entry(%x: f32):
    %q = allocateStack f32 count 4
    store %x: f32 to %q: *f32
    store %q: *f32 to @kept: **f32
    return %x: f32
}

func @keep_heap_then_free: (f32) -> f32 {
'entry(%x: f32):
    %q = allocateHeap f32 count 4: i64
    store %x: f32 to %q: *f32
    store %q: *f32 to @kept: **f32
    deallocate %q: *f32
    return %x: f32
}

func @read_kept: () -> f32 {
'entry():
    %q = load @kept: **f32
    %v = load %q: *f32
    return %v: f32
}

func @frame: (f32) -> f32 {
'entry(%x: f32):
    %p = allocateStack f32 count 1000000
    store %x: f32 to %p: *f32
    %v = load %p: *f32
    return %v: f32
}

func @heap: (f32) -> f32 {
'entry(%x: f32):
    %p = allocateHeap f32 count 1000000: i64
    store %x: f32 to %p: *f32
    %v = load %p: *f32
    deallocate %p: *f32
    return %v: f32
}

func @tape_left_full: (<_ x f32>) -> f32 {
'entry(%x: <_ x f32>):
    %s = createStack
    push %x: <_ x f32> to %s: stack
    %y = exp %x: <_ x f32>
    push %y: <_ x f32> to %s: stack
    return 1: f32
}
"""


@pytest.fixture
def native() -> ir.Executable:
    return ir.compile(ir.parse(SOURCE, "lifetimes.dl"), "llvm-cpu", passes="")


@pytest.fixture
def oracle() -> ir.Executable:
    return ir.compile(ir.parse(SOURCE, "lifetimes.dl"), "interp")


def test_a_stack_kept_in_a_global_serves_a_later_call(native: ir.Executable,
                                                      oracle: ir.Executable) -> None:
    for exe in (oracle, native):
        exe.call("save", np.float32(3))
        assert exe.call("restore")[0] == 3
        with pytest.raises(ir.ExecutionError, match="pop from an empty stack"):
            exe.call("restore")


def test_a_stack_never_stored_is_an_error_not_a_crash(native: ir.Executable,
                                                      oracle: ir.Executable) -> None:
    for exe in (oracle, native):
        with pytest.raises(ir.ExecutionError, match="'pop': use of an undefined stack"):
            exe.call("restore")


def test_a_pointer_kept_in_a_global_still_reads_its_function_s_cells(
        native: ir.Executable, oracle: ir.Executable) -> None:
    for exe in (oracle, native):
        exe.call("keep_frame", np.float32(5))
        assert exe.call("read_kept")[0] == 5


def test_a_kept_pointer_to_deallocated_memory_is_an_error_in_a_later_call(
        native: ir.Executable, oracle: ir.Executable) -> None:
    for exe in (oracle, native):
        exe.call("keep_heap_then_free", np.float32(5))
        with pytest.raises(ir.ExecutionError, match="'load': use of deallocated memory"):
            exe.call("read_kept")


def resident_bytes() -> int:
    statm = Path("/proc/self/statm")
    if not statm.exists():
        pytest.skip("needs /proc/self/statm to measure the process's memory")
    import resource

    return int(statm.read_text().split()[1]) * resource.getpagesize()


@pytest.mark.parametrize(("fn", "arg"), [
    ("frame", np.float32(2)),  # 4 MB of allocateStack cells per call
    ("heap", np.float32(2)),  # 4 MB allocated and deallocated per call
    ("tape_left_full", np.ones(1 << 20, np.float32)),  # 8 MB left on a stack per call
])
def test_memory_nothing_holds_goes_back_to_the_pool(native: ir.Executable, fn: str,
                                                    arg: object) -> None:
    native.call(fn, arg)  # the pool has its blocks now
    before = resident_bytes()
    for _ in range(30):
        native.call(fn, arg)
    assert resident_bytes() - before < 40 << 20  # a leak would hold 120 MB or more
