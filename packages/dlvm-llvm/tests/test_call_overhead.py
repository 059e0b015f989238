"""The prepared call path: arguments of a signature seen before go straight to the build, with
the same results, checks, copies and threads as the converting path. (Its time per call is
measured by benchmarks/call_overhead.py; the check below runs only with DLVM_SLOW_TESTS=1.)"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.runtime import ExecutionError
from dlvm.llvm.runtime import executable as executable_module

TEXT = """
module "calls"
stage raw

func @empty: () -> () {
'entry():
    return
}

func @inc: (<_ x 4 x f32>) -> <_ x 4 x f32> {
'entry(%x: <_ x 4 x f32>):
    %y = add %x: <_ x 4 x f32>, 1.0: f32
    return %y: <_ x 4 x f32>
}

func @twice: (<_ x 4 x f32>) -> (<_ x 4 x f32>, <_ x 4 x f32>, f32, bool, i8) {
'entry(%x: <_ x 4 x f32>):
    %y = add %x: <_ x 4 x f32>, 1.0: f32
    %s = reduce %x: <_ x 4 x f32> by add init 0.0: f32
    %p = greaterThan %s: f32, 0.0: f32
    %r = literal (%y: <_ x 4 x f32>, %y: <_ x 4 x f32>, %s: f32, %p: bool, -3: i8): (<_ x 4 x f32>, <_ x 4 x f32>, f32, bool, i8)
    return %r: (<_ x 4 x f32>, <_ x 4 x f32>, f32, bool, i8)
}

func @same: (<_ x 4 x f32>) -> <_ x 4 x f32> {
'entry(%x: <_ x 4 x f32>):
    return %x: <_ x 4 x f32>
}

func @half: (<_ x f16>) -> f16 {
'entry(%x: <_ x f16>):
    %s = reduce %x: <_ x f16> by add init 0.0: f16
    return %s: f16
}
"""


@pytest.fixture(scope="module")
def exe() -> ir.Executable:
    return ir.compile(ir.parse(TEXT), "llvm-cpu", cache=False)


def test_a_signature_seen_before_is_prepared(exe: ir.Executable) -> None:
    x = np.arange(16, dtype=np.float32).reshape(4, 4)
    first = exe["inc"](x)
    assert any(name == "inc" for name, _ in exe.prepared)  # type: ignore[attr-defined]
    for _ in range(3):
        np.testing.assert_array_equal(exe["inc"](x), x + 1)
    np.testing.assert_array_equal(first, x + 1)
    assert exe.call("empty") == ()


def test_arguments_that_need_converting_are_converted_each_time(exe: ir.Executable) -> None:
    wide = np.arange(8, dtype=np.float64).reshape(2, 4)
    strided = np.arange(32, dtype=np.float32).reshape(4, 8)[:, ::2]
    for _ in range(2):
        np.testing.assert_array_equal(exe["inc"](wide), wide.astype(np.float32) + 1)
        np.testing.assert_array_equal(exe["inc"](strided), strided + 1)
        np.testing.assert_array_equal(exe["inc"]([[1, 2, 3, 4]]), [[2, 3, 4, 5]])
    prepared = exe.prepared  # type: ignore[attr-defined]
    assert not any(sig[0][1] == np.float64 or not sig[0][3]
                   for name, sig in prepared if name == "inc" and sig)


@pytest.mark.parametrize(("bad", "message"), [
    (np.zeros((2, 5), np.float32), "argument 0"),
    (np.zeros(4, np.float32), "argument 0"),
    (np.zeros((2, 4), np.complex64), "argument 0"),
    ("text", "argument 0"),
])
def test_wrong_arguments_after_good_ones_are_one_line_errors(
        exe: ir.Executable, bad: object, message: str) -> None:
    exe["inc"](np.zeros((2, 4), np.float32))
    with pytest.raises(ExecutionError, match=message) as e:
        exe["inc"](bad)
    assert "\n" not in str(e.value)
    with pytest.raises(ExecutionError, match="takes 1 arguments, 2 given"):
        exe["inc"](np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32))


def test_the_callers_arrays_are_untouched(exe: ir.Executable) -> None:
    x = np.ones((3, 4), np.float32)
    x.flags.writeable = False
    before = x.copy()
    for _ in range(3):
        y = exe["inc"](x)
        out = exe["same"](x)
        out[0, 0] = 7  # an argument handed back is a copy
    np.testing.assert_array_equal(x, before)
    assert not x.flags.writeable and y.flags.writeable
    assert not np.shares_memory(y, x) and not np.shares_memory(out, x)


def test_a_buffer_returned_twice_becomes_two_arrays_and_scalars_keep_their_types(
        exe: ir.Executable) -> None:
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for _ in range(3):
        a, b, s, p, k = exe["twice"](x)
        assert not np.shares_memory(a, b)
        np.testing.assert_array_equal(a, x + 1)
        np.testing.assert_array_equal(b, x + 1)
        a[0, 0] = -1
        assert b[0, 0] == 1
        assert (s.dtype, s.shape, float(s)) == (np.float32, (), 28.0)
        assert (p.dtype, bool(p)) == (np.bool_, True)
        assert (k.dtype, int(k)) == (np.int8, -3)
    h = exe["half"](np.full(5, 0.5, np.float16))
    assert h.dtype == np.float16 and h.shape == () and float(h) == 2.5


def test_empty_results_and_arguments(exe: ir.Executable) -> None:
    for _ in range(2):
        y = exe["inc"](np.zeros((0, 4), np.float32))
        assert y.shape == (0, 4) and y.dtype == np.float32


def test_threads_calling_at_once_get_their_own_results(exe: ir.Executable) -> None:
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            x = np.full((k + 1, 4), k, np.float32)
            for _ in range(300):
                y = exe["inc"](x)
                if y.shape != x.shape or not (y == k + 1).all():
                    raise AssertionError(f"thread {k}: wrong result")
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_the_prepared_signatures_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executable_module, "_PREPARED_LIMIT", 4)
    exe = ir.compile(ir.parse(TEXT), "llvm-cpu", cache=False, specialize=False)
    for n in range(10):
        x = np.full((n, 4), n, np.float32)
        np.testing.assert_array_equal(exe["inc"](x), x + 1)
        assert len(exe.prepared) <= 4  # type: ignore[attr-defined]


def test_a_timeout_still_holds_on_the_prepared_path() -> None:
    exe = ir.compile(ir.parse(TEXT), "llvm-cpu", cache=False, timeout=5.0)
    x = np.ones((2, 4), np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(exe["inc"](x), x + 1)


@pytest.mark.skipif(os.environ.get("DLVM_SLOW_TESTS") != "1",
                    reason="a timing check: DLVM_SLOW_TESTS=1")
def test_a_call_costs_a_few_microseconds(exe: ir.Executable) -> None:
    x = np.ones((4, 4), np.float32)
    inc = exe["inc"]
    inc(x)
    best = min(_per_call(lambda: inc(x)) for _ in range(20))
    assert best < 6e-6, f"{best * 1e6:.2f} µs per call"


def _per_call(f: object, n: int = 2000) -> float:
    start = time.perf_counter()
    for _ in range(n):
        f()  # type: ignore[operator]
    return (time.perf_counter() - start) / n
