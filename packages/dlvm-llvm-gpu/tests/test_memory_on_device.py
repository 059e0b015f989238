"""Memory instructions on `nvptx`: cells on the host hold device arrays as they are, so a
tensor kept in a global variable or a box between calls never travels to the host."""

from __future__ import annotations

import numpy as np

import dlvm.ir as ir
from dlvm.ir.testing import assert_agree
from dlvm.llvm_gpu.target import NVPTXExecutable

STATE = """
var @velocity: <64 x f32>
func @momentum: (<64 x f32>) -> <64 x f32> {
'entry(%g: <64 x f32>):
    %v = load @velocity: *<64 x f32>
    %d = multiply %v: <64 x f32>, 0.9: f32
    %n = add %d: <64 x f32>, %g: <64 x f32>
    store %n: <64 x f32> to @velocity: *<64 x f32>
    %b = allocateBox <64 x f32>
    %p = projectBox %b: box{<64 x f32>}
    store %n: <64 x f32> to %p: *<64 x f32>
    %m = load %p: *<64 x f32>
    release %b: box{<64 x f32>}
    %s = tanh %m: <64 x f32>
    return %s: <64 x f32>
}
func @row: (i64) -> <8 x f32> {
'entry(%i: i64):
    %v = load @velocity: *<64 x f32>
    %a = shapeCast %v: <64 x f32> to 8 x 8
    %p = allocateStack <8 x 8 x f32> count 1
    store %a: <8 x 8 x f32> to %p: *<8 x 8 x f32>
    %q = elementPointer %p: *<8 x 8 x f32> at %i: i64
    %r = load %q: *<8 x f32>
    return %r: <8 x f32>
}
"""


def test_tensors_in_memory_stay_on_the_device_between_calls() -> None:
    module = ir.parse(STATE)
    exe = ir.compile(module, "nvptx", device="host")
    oracle = ir.compile(module, "interp")
    assert isinstance(exe, NVPTXExecutable)
    rng = np.random.default_rng(0)
    for _ in range(4):
        g = rng.standard_normal(64).astype(np.float32)
        assert_agree(exe.call("momentum", g), oracle.call("momentum", g), "momentum")
    assert exe.plan.stats["downloads"] == 0 and exe.plan.stats["host instructions"] == 0
    assert "outlives the call" in exe.plan.not_replayed["momentum"]


def test_a_pointer_into_a_tensors_rows_brings_its_cell_to_the_host() -> None:
    module = ir.parse(STATE)
    exe = ir.compile(module, "nvptx", device="host")
    oracle = ir.compile(module, "interp")
    g = np.arange(64, dtype=np.float32)
    exe.call("momentum", g)
    oracle.call("momentum", g)
    for i in (0, 5, 7):
        assert_agree(exe.call("row", np.int64(i)), oracle.call("row", np.int64(i)), "row")
    assert exe.plan.stats["downloads"] == 3  # one cell per call, and nothing else
