"""A run-time error in native code is a Python exception that says what went wrong and
where, as the interpreter says it; the process and the executable carry on."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dlvm.ir as ir

SRC = """
func @divide: (<4 x i32>, <4 x i32>) -> <4 x i32> {
'entry(%a: <4 x i32>, %b: <4 x i32>):
    %q = divide %a: <4 x i32>, %b: <4 x i32>
    return %q: <4 x i32>
}

func @pop_empty: (f32) -> f32 {
'entry(%x: f32):
    %s = createStack
    push %x: f32 to %s: stack
    %a = pop f32 from %s: stack
    %b = pop f32 from %s: stack
    return %b: f32
}

func @pop_wrong_type: (f32) -> i64 {
'entry(%x: f32):
    %s = createStack
    push %x: f32 to %s: stack
    %a = pop i64 from %s: stack
    return %a: i64
}

func @row: (<3 x 2 x f32>, i64) -> <2 x f32> {
'entry(%m: <3 x 2 x f32>, %i: i64):
    %r = extract %i: i64 from %m: <3 x 2 x f32>
    return %r: <2 x f32>
}

func @sizes: (<_ x f32>, <_ x f32>) -> <_ x f32> {
'entry(%a: <_ x f32>, %b: <_ x f32>):
    %s = add %a: <_ x f32>, %b: <_ x f32>
    return %s: <_ x f32>
}

func @to_static: (<_ x f32>) -> <3 x f32> {
'entry(%a: <_ x f32>):
    %t = tanh %a: <_ x f32>
    branch 'out(%t: <_ x f32>)
'out(%r: <3 x f32>):
    return %r: <3 x f32>
}

func @deep: (i64) -> i64 {
'entry(%n: i64):
    %m = add %n: i64, 1: i64
    %r = apply @deep(%m: i64) -> i64
    return %r: i64
}

func @stop: (f32) -> f32 {
'entry(%x: f32):
    trap
    return %x: f32
}

func @null_call: (f32) -> f32 {
'entry(%x: f32):
    %g = literal null: (f32) -> f32
    %r = apply %g(%x: f32) -> f32
    return %r: f32
}

func @huge: (f32) -> f32 {
'entry(%x: f32):
    %r = random 1000000000 x 1000000000 from 0.0: f32 upto 1.0: f32
    return %x: f32
}

func @freed: (f32) -> f32 {
'entry(%x: f32):
    %p = allocateHeap f32 count 1: i64
    deallocate %p: *f32
    %v = load %p: *f32
    return %v: f32
}

func @power: (<2 x i64>, <2 x i64>) -> <2 x i64> {
'entry(%a: <2 x i64>, %b: <2 x i64>):
    %r = power %a: <2 x i64>, %b: <2 x i64>
    return %r: <2 x i64>
}
"""


@pytest.fixture(scope="module")
def native() -> ir.Executable:
    return ir.compile(ir.parse(SRC, "errors.dl"), "llvm-cpu", passes="")


@pytest.fixture(scope="module")
def oracle() -> ir.Executable:
    return ir.compile(ir.parse(SRC, "errors.dl"), "interp")


CASES = [
    ("divide", (np.array([1, 2, 3, 4], np.int32), np.array([1, 0, 1, 1], np.int32)),
     r"errors\.dl:4:10: 'divide': integer division by zero"),
    ("pop_empty", (np.float32(1),), r"'pop': pop from an empty stack"),
    ("pop_wrong_type", (np.float32(1),),
     r"'pop': pop of 'i64' from a stack whose top is 'f32'"),
    ("row", (np.zeros((3, 2), np.float32), np.int64(3)),
     r"'extract': index 3 out of bounds for size 3"),
    ("row", (np.zeros((3, 2), np.float32), np.int64(-1)),
     r"'extract': index -1 out of bounds for size 3"),
    ("sizes", (np.ones(3, np.float32), np.ones(4, np.float32)),
     r"'add': shapes.* cannot be broadcast"),
    ("to_static", (np.ones(4, np.float32),),
     r"argument 0 of block 'out of '@to_static' has shape <4>, expected <3 x f32>"),
    ("deep", (np.int64(0),), r"call stack overflow \(more than 2000 nested calls\)"),
    ("stop", (np.float32(1),), r"'trap': trap"),
    ("null_call", (np.float32(1),), r"'apply': call of a null function"),
    ("huge", (np.float32(1),), r"'random': out of memory"),
    ("freed", (np.float32(1),), r"'load': use of deallocated memory"),
    ("power", (np.array([2, 3]), np.array([1, -1])),
     r"'power': integer power with a negative exponent"),
]


@pytest.mark.parametrize(("fn", "args", "message"), CASES,
                         ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)])
def test_a_run_time_error_is_an_exception_naming_the_problem(
        native: ir.Executable, oracle: ir.Executable, fn: str, args: tuple[object, ...],
        message: str) -> None:
    with pytest.raises(ir.ExecutionError) as e:
        native.call(fn, *args)
    assert re.search(message, str(e.value)), str(e.value)
    with pytest.raises(ir.ExecutionError):  # the interpreter agrees that it is an error
        oracle.call(fn, *args)


def test_the_executable_works_after_an_error(native: ir.Executable) -> None:
    a = np.array([4, 6, 8, 10], np.int32)
    with pytest.raises(ir.ExecutionError):
        native.call("divide", a, np.zeros(4, np.int32))
    np.testing.assert_array_equal(native["divide"](a, np.full(4, 2, np.int32)), [2, 3, 4, 5])


def test_integer_division_wraps_like_numpy_at_the_extremes(native: ir.Executable) -> None:
    low = np.iinfo(np.int32).min
    out = native["divide"](np.array([low, 7, -7, 7], np.int32),
                           np.array([-1, -2, 2, 7], np.int32))
    np.testing.assert_array_equal(out, [low, -3, -3, 1])


def test_arguments_are_converted_only_without_loss(native: ir.Executable) -> None:
    with pytest.raises(ir.ExecutionError, match="argument 0: converting float64 to i32"):
        native.call("divide", np.ones(4), np.ones(4, np.int32))
    with pytest.raises(ir.ExecutionError, match="argument 1 has shape <3>"):
        native.call("divide", np.ones(4, np.int32), np.ones(3, np.int32))
