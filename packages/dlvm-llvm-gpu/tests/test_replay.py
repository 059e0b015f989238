"""Replayed launch lists (`replay.py`): a call with a signature seen before runs the
recording of the first one — the same launches, on its own data — and computes what the
interpreter computes; a call whose walk depended on more than its signature keeps walking.
(Every program of the repository is replayed in test_emulation.py's corpus test.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import assert_agree
from dlvm.llvm_gpu import DeviceArray
from dlvm.llvm_gpu.replay import MAX_SIGNATURES, Slot, plan_arena, signature
from dlvm.llvm_gpu.target import NVPTXExecutable

ROOT = Path(__file__).resolve().parents[3]


def emulated(module: ir.Module, **options: object) -> NVPTXExecutable:
    exe = ir.compile(module, "nvptx", device="host", **options)
    assert isinstance(exe, NVPTXExecutable)
    return exe


MLP = """
func @step: (<6 x 5 x f32>, <1 x 5 x f32>, <5 x 3 x f32>, <4 x 6 x f32>) -> (<4 x 3 x f32>, f32) {
'entry(%w: <6 x 5 x f32>, %b: <1 x 5 x f32>, %v: <5 x 3 x f32>, %x: <4 x 6 x f32>):
    %z = dot %x: <4 x 6 x f32>, %w: <6 x 5 x f32>
    %zb = add %z: <4 x 5 x f32>, %b: <1 x 5 x f32>
    %h = tanh %zb: <4 x 5 x f32>
    %y = dot %h: <4 x 5 x f32>, %v: <5 x 3 x f32>
    %e = exp %y: <4 x 3 x f32>
    %s = reduce %e: <4 x 3 x f32> by add init 0.0: f32
    %out = literal (%y: <4 x 3 x f32>, %s: f32): (<4 x 3 x f32>, f32)
    return %out: (<4 x 3 x f32>, f32)
}
"""


def test_a_second_call_replays_the_first_without_walking() -> None:
    module = ir.parse(MLP)
    oracle, exe = ir.compile(module, "interp"), emulated(module, passes="")
    rng = np.random.default_rng(1)
    shapes = ((6, 5), (1, 5), (5, 3), (4, 6))
    for k in range(4):
        args = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        assert_agree(exe.call("step", *args), oracle.call("step", *args), f"call {k}")
    stats = exe.plan.stats
    assert stats["walks"] == 1 and stats["replays"] == 3, stats
    # the replays issued what the walk issued
    assert stats["launches"] == 4 * (stats["launches"] // 4), stats


def test_device_arrays_in_and_out_of_replays() -> None:
    module = ir.parse(MLP)
    exe = emulated(module, passes="")
    rng = np.random.default_rng(2)
    host = [rng.standard_normal(s).astype(np.float32) for s in ((6, 5), (1, 5), (5, 3), (4, 6))]
    want = exe.call("step", *host)
    args = [exe.device.upload(a) for a in host]
    results = [exe.call_device("step", *args) for _ in range(3)]
    for y, s in results:
        assert isinstance(y, DeviceArray)
        np.testing.assert_allclose(y.numpy(), want[0], rtol=1e-6)
        np.testing.assert_allclose(np.asarray(s), want[1], rtol=1e-6)
    # each call's results are its own buffers: none overwrote an earlier one
    assert len({y.buffer.ptr for y, _ in results}) == 3
    assert exe.plan.stats["replays"] >= 2


BRANCH = """
func @f: (<4 x f32>) -> <4 x f32> {
'entry(%x: <4 x f32>):
    %s = reduce %x: <4 x f32> by add init 0.0: f32
    %p = greaterThan %s: f32, 0.0: f32
    conditional %p: bool then 'pos() else 'neg()
'pos():
    %a = multiply %x: <4 x f32>, 2.0: f32
    return %a: <4 x f32>
'neg():
    %b = negate %x: <4 x f32>
    return %b: <4 x f32>
}
"""


def test_a_branch_on_a_device_value_keeps_walking() -> None:
    module = ir.parse(BRANCH)
    oracle, exe = ir.compile(module, "interp"), emulated(module, passes="")
    for x in ([1, 2, 3, 4], [-1, -2, -3, -4], [1, 2, 3, 4], [-5, 1, 1, 1]):
        a = np.array(x, np.float32)
        assert_agree(exe.call("f", a), oracle.call("f", a), str(x))
    assert exe.plan.stats["replays"] == 0
    assert "reads device data on the host" in exe.plan.not_replayed["f"]


RANDOM = """
func @noise: (<3 x f32>) -> <3 x f32> {
'entry(%x: <3 x f32>):
    %r = random 3 from 0.0: f32 upto 1.0: f32
    %y = add %x: <3 x f32>, %r: <3 x f32>
    return %y: <3 x f32>
}
"""


def test_replays_draw_new_random_numbers_the_interpreters() -> None:
    """`random` runs on the device from a counter there, which each replay (and the CUDA
    graph) advances: every call draws the next numbers of the stream every target shares."""
    module = ir.parse(RANDOM)
    exe, oracle = emulated(module, passes="", seed=4), ir.compile(module, "interp", seed=4)
    x = np.zeros(3, np.float32)
    draws = [exe.call("noise", x)[0] for _ in range(5)]
    assert [d.tobytes() for d in draws] == [oracle.call("noise", x)[0].tobytes()
                                            for _ in range(5)]
    assert len({d.tobytes() for d in draws}) == 5
    assert exe.plan.stats["replays"] == 4 and exe.plan.stats["host instructions"] == 0
    assert "noise" not in exe.plan.not_replayed


def test_host_scalars_that_decide_trip_counts_are_part_of_the_signature(rnn_text: str
                                                                         ) -> None:
    module = ir.parse(rnn_text)
    oracle, exe = ir.compile(module, "interp"), emulated(module)
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
    for steps in (3, 0, 3, 5, 0, 5, 3):
        h = rng.standard_normal((4, 8)).astype(np.float32)
        for name in ("rnn", "drnn"):
            assert_agree(exe.call(name, w, h, np.int64(steps)),
                         oracle.call(name, w, h, np.int64(steps)), f"{name} {steps}")
    stats = exe.plan.stats
    assert stats["walks"] == 6 and stats["replays"] == 8, (stats, exe.plan.not_replayed)
    # 3 signatures × 2 functions walked once each
    assert stats["downloads"] == 0, stats


DIVIDE = """
func @divide: (<5 x i32>, <5 x i32>) -> <5 x i32> {
'entry(%a: <5 x i32>, %b: <5 x i32>):
    %q = divide %a: <5 x i32>, %b: <5 x i32>
    return %q: <5 x i32>
}
"""


def test_a_replayed_kernel_that_fails_names_the_instruction() -> None:
    exe = emulated(ir.parse(DIVIDE, "divide.dl"), passes="")
    a = np.arange(5, dtype=np.int32)
    np.testing.assert_array_equal(exe.call("divide", a, np.full(5, 2, np.int32))[0], a // 2)
    with pytest.raises(ir.ExecutionError, match=r"divide\.dl:4:10: 'divide': integer "
                                                r"division by zero"):
        exe.call("divide", a, np.array([1, 1, 0, 1, 1], np.int32))
    assert exe.plan.stats["replays"] == 1
    np.testing.assert_array_equal(exe.call("divide", a, np.full(5, 3, np.int32))[0], a // 3)


IDENTITY = """
func @pair: (<3 x f32>) -> (<3 x f32>, <1 x 3 x f32>) {
'entry(%x: <3 x f32>):
    %v = padShape %x: <3 x f32> at 0
    %out = literal (%x: <3 x f32>, %v: <1 x 3 x f32>): (<3 x f32>, <1 x 3 x f32>)
    return %out: (<3 x f32>, <1 x 3 x f32>)
}
"""


def test_an_argument_returned_is_the_argument_of_that_call() -> None:
    exe = emulated(ir.parse(IDENTITY), passes="")
    for k in range(3):
        x = exe.device.upload(np.full(3, k, np.float32))
        a, v = exe.call_device("pair", x)
        assert a.ptr == x.ptr and v.ptr == x.ptr and v.shape == (1, 3)
    assert exe.plan.stats["replays"] == 2


def test_signatures_key_shapes_dtypes_and_scalar_bits() -> None:
    a, b = np.zeros((2, 3), np.float32), np.ones((2, 3), np.float32)
    assert signature([a]) == signature([b]) != signature([a.astype(np.float64)])
    assert signature([np.float32(1.0)]) != signature([np.float32(2.0)])
    assert signature([0.0]) != signature([-0.0])  # the bits, not equality
    assert signature([(a, 3)]) == signature([(b, 3)]) != signature([(b, 4)])
    assert signature([object()]) is None


def test_device_arrays_that_share_memory_walk() -> None:
    exe = emulated(ir.parse(MLP), passes="")
    x = exe.device.upload(np.zeros((4, 6), np.float32))
    assert signature([x, x]) is None
    assert signature([x, x.reshape((6, 4))]) is None


def test_past_the_limit_new_signatures_walk() -> None:
    text = """
func @double: (<_ x f32>) -> <_ x f32> {
'entry(%x: <_ x f32>):
    %y = add %x: <_ x f32>, %x: <_ x f32>
    return %y: <_ x f32>
}
"""
    exe = emulated(ir.parse(text))
    for n in range(1, MAX_SIGNATURES + 5):
        x = np.arange(n, dtype=np.float32)
        for _ in range(2):
            np.testing.assert_array_equal(exe.call("double", x)[0], 2 * x)
    assert len(exe.plan.replays_of("double")) == MAX_SIGNATURES
    assert exe.plan.stats["replays"] == MAX_SIGNATURES


def test_the_arena_reuses_what_died() -> None:
    # three 1 KiB intermediates in a chain: the first is dead when the third is born
    slots = [Slot("alloc", 1024, born=0, last=1), Slot("alloc", 1024, born=1, last=2),
             Slot("alloc", 1024, born=2, last=3)]
    offsets, size = plan_arena(slots, set(), 4)
    assert size == 2048 and offsets[0] == offsets[2] != offsets[1]


CHAIN = """
func @chain: (<3 x 4 x f32>, <3 x 4 x f32>) -> (<3 x 4 x f32>, <3 x 4 x f32>) {
'entry(%x: <3 x 4 x f32>, %y: <3 x 4 x f32>):
    %a = multiply %x: <3 x 4 x f32>, %y: <3 x 4 x f32>
    %b = tanh %a: <3 x 4 x f32>
    %c = add %b: <3 x 4 x f32>, %x: <3 x 4 x f32>
    %d = exp %c: <3 x 4 x f32>
    %e = subtract %d: <3 x 4 x f32>, %y: <3 x 4 x f32>
    %f = multiply %e: <3 x 4 x f32>, %b: <3 x 4 x f32>
    %g = sin %f: <3 x 4 x f32>
    %h = add %g: <3 x 4 x f32>, %c: <3 x 4 x f32>
    %out = literal (%h: <3 x 4 x f32>, %d: <3 x 4 x f32>): (<3 x 4 x f32>, <3 x 4 x f32>)
    return %out: (<3 x 4 x f32>, <3 x 4 x f32>)
}
"""


def test_a_long_launch_list_is_captured_as_a_graph_over_copies_of_its_data() -> None:
    module = ir.parse(CHAIN)
    oracle, exe = ir.compile(module, "interp"), emulated(module, passes="")
    rng = np.random.default_rng(4)
    kept = []
    for _ in range(6):
        x, y = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
        got = exe.call_device("chain", exe.device.upload(x), exe.device.upload(y))
        kept.append((got, oracle.call("chain", x, y)))
    (replay,) = exe.plan.replays_of("chain")
    assert replay is not None and replay.graph is not None and replay.runs == 5
    # every call's results are still its own, also those the graph computed
    for k, ((h, d), want) in enumerate(kept):
        assert_agree((h.numpy(), d.numpy()), want, f"call {k}")


def test_replay_can_be_turned_off() -> None:
    exe = emulated(ir.parse(CHAIN), passes="", replay=False)
    x = np.ones((3, 4), np.float32)
    for _ in range(3):
        exe.call("chain", x, x)
    assert exe.plan.stats["walks"] == 3 and exe.plan.stats["replays"] == 0


SCALED = """
func @sgd: (<5 x f32>, <5 x f32>, f32) -> <5 x f32> {
'entry(%w: <5 x f32>, %g: <5 x f32>, %lr: f32):
    %step = multiply %g: <5 x f32>, %lr: f32
    %new = subtract %w: <5 x f32>, %step: <5 x f32>
    return %new: <5 x f32>
}

func @clipped: (<5 x f32>, f32) -> <5 x f32> {
'entry(%x: <5 x f32>, %limit: f32):
    %big = greaterThan %limit: f32, 1.0: f32
    conditional %big: bool then 'keep() else 'scale()
'keep():
    return %x: <5 x f32>
'scale():
    %y = multiply %x: <5 x f32>, %limit: f32
    return %y: <5 x f32>
}
"""


def test_a_scalar_that_only_kernels_read_is_patched_not_keyed() -> None:
    """A learning rate that changes on every call: one walk, then replays with each call's
    value in the kernels' parameters; a scalar that decides a branch keys its replays."""
    module = ir.parse(SCALED)
    oracle, exe = ir.compile(module, "interp"), emulated(module, passes="")
    rng = np.random.default_rng(7)
    w, g = (rng.standard_normal(5).astype(np.float32) for _ in range(2))
    for lr in (0.1, 0.05, 0.025, 0.0125, 0.2):
        assert_agree(exe.call("sgd", w, g, np.float32(lr)),
                     oracle.call("sgd", w, g, np.float32(lr)), str(lr))
    assert exe.plan.stats["walks"] == 1 and exe.plan.stats["replays"] == 4
    for limit in (0.5, 2.0, 0.25, 3.0, 0.5):
        assert_agree(exe.call("clipped", w, np.float32(limit)),
                     oracle.call("clipped", w, np.float32(limit)), str(limit))
    # each limit walked once (its value decided the branch), then 0.5 replayed
    assert exe.plan.stats["walks"] == 1 + 4 and exe.plan.stats["replays"] == 4 + 1


SCALED_CHAIN = """
func @step: (<3 x 4 x f32>, <3 x 4 x f32>, f32) -> <3 x 4 x f32> {
'entry(%w: <3 x 4 x f32>, %g: <3 x 4 x f32>, %lr: f32):
    %a = tanh %g: <3 x 4 x f32>
    %b = multiply %a: <3 x 4 x f32>, %lr: f32
    %c = exp %b: <3 x 4 x f32>
    %d = subtract %c: <3 x 4 x f32>, %a: <3 x 4 x f32>
    %e = sin %d: <3 x 4 x f32>
    %f = multiply %e: <3 x 4 x f32>, %lr: f32
    %out = subtract %w: <3 x 4 x f32>, %f: <3 x 4 x f32>
    return %out: <3 x 4 x f32>
}
"""


def test_the_graph_holds_the_scalars_it_was_captured_with() -> None:
    """Captured with one learning rate, the graph serves calls with that one; a call with
    another replays launch by launch, and the graph is right again after it."""
    module = ir.parse(SCALED_CHAIN)
    oracle, exe = ir.compile(module, "interp"), emulated(module, passes="")
    rng = np.random.default_rng(8)
    for lr in (0.5, 0.5, 0.5, 0.5, 0.1, 0.5, 0.2, 0.2, 0.5):
        w, g = (rng.standard_normal((3, 4)).astype(np.float32) for _ in range(2))
        got = exe.call_device("step", exe.device.upload(w), exe.device.upload(g),
                              np.float32(lr))
        assert_agree((got.numpy(),), oracle.call("step", w, g, np.float32(lr)), str(lr))
    (replay,) = exe.plan.replays_of("step")
    assert replay is not None and replay.graph is not None
    assert exe.plan.stats["walks"] == 1 and exe.plan.stats["replays"] == 8


HOST_USES = """
func @same: (f64) -> f64 {
'entry(%x: f64):
    return %x: f64
}

func @vector: (f32, <2 x f32>) -> <2 x f32> {
'entry(%x: f32, %v: <2 x f32>):
    %t = literal <%x: f32, 1.0: f32>: <2 x f32>
    %y = multiply %t: <2 x f32>, %v: <2 x f32>
    return %y: <2 x f32>
}

func @narrow: (f64, <3 x f32>) -> <3 x f32> {
'entry(%x: f64, %v: <3 x f32>):
    %h = dataTypeCast %x: f64 to f32
    %y = add %v: <3 x f32>, %h: f32
    return %y: <3 x f32>
}
"""


@pytest.mark.parametrize("name", ["same", "vector", "narrow"])
def test_a_scalar_argument_read_on_the_host_keys_the_recording(name: str) -> None:
    """Returned as it is, packed into a tensor literal, converted on the host: each reads
    the scalar's value, so each value gets its own recording."""
    module = ir.parse(HOST_USES)
    oracle, exe = ir.compile(module, "interp"), emulated(module, passes="")
    fn = module.function(name)
    assert fn is not None
    extra = [np.arange(1, 1 + (2 if name == "vector" else 3), dtype=np.float32)] \
        if len(fn.type_.arguments) > 1 else []
    scalar = np.float32 if name == "vector" else np.float64
    for x in (0.5, 1.5, 0.5, -2.0):
        args = [scalar(x), *extra]
        assert_agree(exe.call(name, *args), oracle.call(name, *args), f"{name}({x})")
    assert exe.plan.stats["replays"] == 1, exe.plan.stats  # only the repeated 0.5


MASKED = """
func @pick: (<3 x f32>, <3 x f32>, bool) -> <3 x f32> {
'entry(%a: <3 x f32>, %b: <3 x f32>, %m: bool):
    %y = select %a: <3 x f32>, %b: <3 x f32> by %m: bool
    return %y: <3 x f32>
}
"""


def test_a_boolean_argument_uploaded_to_a_kernel_keys_the_recording() -> None:
    module = ir.parse(MASKED)
    oracle, exe = ir.compile(module, "interp"), emulated(module, passes="")
    a, b = np.zeros(3, np.float32), np.ones(3, np.float32)
    for m in (True, False, True, False):
        assert_agree(exe.call("pick", a, b, np.bool_(m)),
                     oracle.call("pick", a, b, np.bool_(m)), str(m))
    assert exe.plan.stats["replays"] == 2


class Foreign:
    """An array of another framework: it speaks DLPack and is not numpy's."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __dlpack__(self, **kwargs: object) -> object:
        return self.array.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.array.__dlpack_device__()


def test_foreign_arrays_where_the_device_computes_are_replayed_in_place() -> None:
    """DLPack arrays of the device's kind (a torch CUDA tensor on a GPU; here, host memory
    on the emulation) are imported before the signature is taken, so they replay too; two
    arguments over the same memory are walked."""
    module = ir.parse(MLP)
    oracle, exe = ir.compile(module, "interp"), emulated(module, passes="")
    rng = np.random.default_rng(9)
    shapes = ((6, 5), (1, 5), (5, 3), (4, 6))
    for _ in range(3):
        host = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        assert_agree(exe.call("step", *[Foreign(a) for a in host]), oracle.call("step", *host),
                     "step")
    assert exe.plan.stats["walks"] == 1 and exe.plan.stats["replays"] == 2
    same = np.ones((5, 5), np.float32)
    twice = ir.parse(SCALED.replace("<5 x f32>", "<5 x 5 x f32>"))
    exe2 = emulated(twice, passes="")
    for _ in range(2):
        got = exe2.call("sgd", Foreign(same), Foreign(same), np.float32(0.5))
        np.testing.assert_array_equal(got[0], same - 0.5 * same)
    assert exe2.plan.stats["replays"] == 0
    assert "share memory" in exe2.plan.not_replayed["sgd"]
