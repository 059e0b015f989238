"""Launch plans compute what the interpreter computes: on the host emulation (every machine)
the same regions, kernels (with their index arithmetic and grid-stride loops), memory pool
and scheduling run as on a GPU, with the kernels compiled for the CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ir.strategies import loop_programs
from dlvm.ir.testing import (
    assert_agree,
    callable_functions,
    check_random_program,
    check_same,
    corpus,
    mlp_cross_entropy,
    module_from_path,
    random_argument,
)
from dlvm.llvm_gpu import DeviceArray
from dlvm.llvm_gpu.kernels import SCAN_MAX
from dlvm.llvm_gpu.target import NVPTXExecutable

ROOT = Path(__file__).resolve().parents[3]


def emulated(module: ir.Module, **options: object) -> NVPTXExecutable:
    exe = ir.compile(module, "nvptx", device="host", **options)
    assert isinstance(exe, NVPTXExecutable)
    return exe


@pytest.mark.parametrize("path", corpus(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_corpus_computes_the_same(path: Path) -> None:
    module = ir.parse_file(str(path))
    oracle = ir.compile(module, "interp", max_steps=200_000)
    oracle2 = ir.compile(module, "interp", max_steps=200_000)
    plain = emulated(module, passes="", max_steps=200_000)
    fused = emulated(module, max_steps=200_000)  # after O3: fused kernels
    rng = np.random.default_rng(0)
    for fn in callable_functions(oracle.module):
        args = [random_argument(t, oracle.module, rng) for t in fn.type_.arguments]
        other = [shuffled(a, rng) for a in args]  # the same signature, other values
        check_same(fn, args, plain, oracle)
        # the first call of a signature walks, the next ones replay what it recorded
        for again in (args, args, other, other, args):
            check_same(fn, again, fused, oracle2, errors=False)


def shuffled(a: Any, rng: np.random.Generator) -> Any:
    """`a` with its elements in another order (arrays; tuples element by element)."""
    if isinstance(a, tuple):
        return tuple(shuffled(e, rng) for e in a)
    if isinstance(a, np.ndarray) and a.ndim:
        return rng.permutation(a.reshape(-1)).reshape(a.shape)
    return a


def test_the_mlp_gradient_runs_in_kernels_with_its_data_on_the_device() -> None:
    text = mlp_cross_entropy(batch="_", inputs=6, hidden=5, outputs=4)
    module = ir.parse(text)
    oracle = ir.compile(module, "interp")
    exe = emulated(module)
    rng = np.random.default_rng(1)
    fn = exe.module.function("dloss") or exe.module.function("df")
    assert fn is not None, [f.name for f in exe.module.functions]
    args = [random_argument(t, exe.module, rng) for t in fn.type_.arguments]
    assert_agree(exe.call(fn.name, *args), oracle.call(fn.name, *args), fn.name or "")
    stats = exe.plan.stats
    assert stats["launches"] > 0 and stats["regions compiled"] > 0
    assert stats["downloads"] == 0, stats  # nothing came back to the host on the way




@pytest.mark.parametrize("steps", [0, 1, 7])
def test_a_loop_and_its_tape_keep_tensors_on_the_device(steps: int, rnn_text: str) -> None:
    module = ir.parse(rnn_text)
    oracle = ir.compile(module, "interp")
    exe = emulated(module)
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)
    h = rng.standard_normal((4, 8)).astype(np.float32)
    for name in ("rnn", "drnn"):
        assert_agree(exe.call(name, w, h, np.int64(steps)),
                     oracle.call(name, w, h, np.int64(steps)), name)
    # only scalars computed on the host (the counter, the condition) ran there; no tensor
    # came back from the device until the results
    assert exe.plan.stats["downloads"] == 0, exe.plan.stats


@settings(max_examples=15, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=loop_programs(), x=st.floats(0.2, 1.5), y=st.floats(0.2, 1.5),
       n=st.integers(0, 4), k=st.integers(-2, 3))
def test_random_programs_with_loops_and_gradients(text: str, x: float, y: float, n: int,
                                                  k: int) -> None:
    check_random_program(text, x, y, n, k, "nvptx", device="host",
                         passes="", max_steps=100_000)  # O3 would drop a failing dead value


ERRORS = """
func @divide: (<5 x i32>, <5 x i32>) -> <5 x i32> {
'entry(%a: <5 x i32>, %b: <5 x i32>):
    %q = divide %a: <5 x i32>, %b: <5 x i32>
    return %q: <5 x i32>
}

func @sizes: (<_ x f32>, <_ x f32>) -> <_ x f32> {
'entry(%a: <_ x f32>, %b: <_ x f32>):
    %s = add %a: <_ x f32>, %b: <_ x f32>
    return %s: <_ x f32>
}
"""


def test_run_time_errors_in_kernels_name_the_instruction() -> None:
    exe = emulated(ir.parse(ERRORS, "errors.dl"), passes="")
    a = np.arange(5, dtype=np.int32)
    with pytest.raises(ir.ExecutionError, match=r"errors\.dl:4:10: 'divide': integer division "
                                                r"by zero"):
        exe.call("divide", a, np.array([1, 1, 0, 1, 1], np.int32))
    np.testing.assert_array_equal(exe["divide"](a, np.full(5, 2, np.int32)), a // 2)
    with pytest.raises(ir.ExecutionError, match="cannot be broadcast"):
        exe.call("sizes", np.ones(3, np.float32), np.ones(4, np.float32))


def test_device_arrays_go_in_and_out_without_copies() -> None:
    text = """
func @scale: (<_ x f32>) -> <_ x f32> {
'entry(%x: <_ x f32>):
    %y = multiply %x: <_ x f32>, 2.0: f32
    return %y: <_ x f32>
}
"""
    exe = emulated(ir.parse(text))
    y = exe.call_device("scale", np.arange(4, dtype=np.float32))
    assert isinstance(y, DeviceArray) and y.shape == (4,)
    z = exe.call_device("scale", y)  # a device array is an argument as it is
    np.testing.assert_array_equal(z.numpy(), [0, 4, 8, 12])  # doubling is exact
    view = np.from_dlpack(z)  # the emulated device's memory is the host's: no copy
    np.testing.assert_array_equal(view, [0, 4, 8, 12])
    assert view.__array_interface__["data"][0] == z.ptr


def test_without_a_gpu_the_target_says_so_in_one_line() -> None:
    from dlvm.llvm_gpu.cuda import available

    if available()[0]:
        pytest.skip("a GPU is present")
    with pytest.raises(ir.DlvmError) as e:
        ir.compile(ir.parse(ERRORS), "nvptx")
    message = str(e.value)
    assert "\n" not in message and "device='host'" in message


def test_the_options_are_checked() -> None:
    for options, message in (({"device": "tpu"}, "must be one of cuda, host"),
                             ({"arch": "sm_5"}, "unknown GPU architecture 'sm_5'"),
                             ({"dynamic_size": 0}, "dynamic_size")):
        with pytest.raises(ir.DlvmError, match=message):
            ir.registry().make_target("nvptx", **options)


TRANSPOSED = """
func @f: (<5 x 3 x f32>, <5 x 4 x f32>, <4 x 6 x f32>) -> (<3 x 4 x f32>, <4 x 5 x f32>) {
'entry(%a: <5 x 3 x f32>, %b: <5 x 4 x f32>, %c: <4 x 6 x f32>):
    %at = transpose %a: <5 x 3 x f32>
    %p = dot %at: <3 x 5 x f32>, %b: <5 x 4 x f32>
    %ct = transpose %c: <4 x 6 x f32>
    %bt = transpose %b: <5 x 4 x f32>
    %q = dot %bt: <4 x 5 x f32>, %b: <5 x 4 x f32>
    %r = dot %q: <4 x 4 x f32>, %bt: <4 x 5 x f32>
    %out = literal (%p: <3 x 4 x f32>, %r: <4 x 5 x f32>): (<3 x 4 x f32>, <4 x 5 x f32>)
    return %out: (<3 x 4 x f32>, <4 x 5 x f32>)
}
"""


def test_a_transpose_only_multiplied_is_read_transposed_not_copied() -> None:
    module = ir.parse(TRANSPOSED)
    exe = emulated(module, passes="")
    rng = np.random.default_rng(3)
    args = [rng.standard_normal(s).astype(np.float32) for s in ((5, 3), (5, 4), (4, 6))]
    assert_agree(exe.call("f", *args), ir.compile(module, "interp").call("f", *args), "f")
    # three products, and no kernel for the transposes (%ct, unused, is not even computed
    # on the device: only dots use it, so it stays a view)
    assert exe.plan.stats["regions compiled"] == 0, exe.plan.stats
    assert exe.plan.stats["launches"] == 3, exe.plan.stats


@st.composite
def layout_programs(draw: st.DrawFn) -> str:
    """`@f(x)`: a chain of layout instructions (each of them, at random axes), element-wise
    code between them and a sum at the end, with its gradient: layout adjoints (slices
    padded back by concatenating zero splats, inverse permutations, …) in kernels."""
    shape = [draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(2, 3))]

    def ty(s: list[int]) -> str:
        return "<" + " x ".join(map(str, s)) + " x f64>" if s else "f64"

    lines: list[str] = []
    cur, cur_shape = "%x", list(shape)
    for k in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["transpose", "reverse", "slice", "pad", "cast",
                                   "concatenate", "tanh"]))
        t, name = ty(cur_shape), f"%v{k}"
        rank = len(cur_shape)
        if op == "transpose" and rank > 1:
            perm = draw(st.permutations(range(rank)))
            lines.append(f"{name} = transpose {cur}: {t} along {', '.join(map(str, perm))}")
            cur_shape = [cur_shape[p] for p in perm]
        elif op == "reverse" and rank:
            dims = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1)))
            lines.append(f"{name} = reverse {cur}: {t} along {', '.join(map(str, dims))}")
        elif op == "slice" and rank and cur_shape[0] > 1:
            lo = draw(st.integers(0, cur_shape[0] - 1))
            hi = draw(st.integers(lo, cur_shape[0] - 1))
            lines.append(f"{name} = slice {cur}: {t} from {lo} upto {hi}")
            cur_shape = [hi - lo + 1, *cur_shape[1:]]
        elif op == "pad" and rank < 4:
            axis = draw(st.integers(0, rank))
            lines.append(f"{name} = padShape {cur}: {t} at {axis}")
            cur_shape = [*cur_shape[:axis], 1, *cur_shape[axis:]]
        elif op == "cast" and rank and 1 in cur_shape:
            axis = cur_shape.index(1)
            lines.append(f"{name} = squeezeShape {cur}: {t} at {axis}")
            cur_shape = cur_shape[:axis] + cur_shape[axis + 1:]
        elif op == "concatenate" and rank:
            axis = draw(st.integers(0, rank - 1))
            lines.append(f"{name}a = tanh {cur}: {t}")
            lines.append(f"{name} = concatenate {cur}: {t}, {name}a: {t} along {axis}")
            cur_shape = [2 * d if a == axis else d for a, d in enumerate(cur_shape)]
        else:
            lines.append(f"{name} = tanh {cur}: {t}")
        cur = name
    t = ty(cur_shape)
    lines += [f"%sq = multiply {cur}: {t}, {cur}: {t}",
              f"%s = reduce %sq: {t} by add init 0.0: f64", "return %s: f64"]
    x = ty(shape)
    body = "\n".join("    " + line for line in lines)
    return (f"func @f: ({x}) -> f64 {{\n'entry(%x: {x}):\n{body}\n}}\n\n"
            f"[gradient @f wrt 0]\nfunc @df: ({x}) -> ({x})\n")


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=layout_programs(), seed=st.integers(0, 1000))
def test_random_layout_programs_and_their_gradients(text: str, seed: int) -> None:
    module = ir.parse(text, "layout.dl")
    oracle = ir.compile(module, "interp")
    rng = np.random.default_rng(seed)
    fn = oracle.module.function("f")
    assert fn is not None
    for passes in ("", "O3"):
        exe = emulated(module, passes=passes)
        for _ in range(2):  # a walk, then a replay
            args = [random_argument(t, oracle.module, rng) for t in fn.type_.arguments]
            for name in ("f", "df"):
                assert_agree(exe.call(name, *args), oracle.call(name, *args), name)


# dlvm-llvm's table of convolution and pooling geometries (one table for every target)
CONV = module_from_path(ROOT / "packages" / "dlvm-llvm" / "tests" / "test_convolution.py",
                        "llvm_convolution_tests")


def test_convolutions_and_pooling_run_in_kernels() -> None:
    """Every geometry of dlvm-llvm's table — strides, padding, both dilations, groups,
    1-3 spatial dimensions, empty sizes — on the emulation against the interpreter; float
    convolutions and pooling by a built-in combinator never leave the device."""
    texts = [CONV.conv_function(c) for c in CONV.CASES]
    texts += [CONV.pool_function(p, CONV.pool_out(p)) for p in CONV.POOLS]
    module = ir.parse("\n".join(texts))
    oracle, exe = ir.compile(module, "interp"), emulated(module, passes="")
    for c in CONV.CASES:
        args = CONV.arguments(c)
        before = exe.plan.stats["host instructions"]
        conv_agree(c, exe.call(c.name, *args), oracle.call(c.name, *args))
        on_host = exe.plan.stats["host instructions"] - before
        if c.dtype == "i32":
            assert on_host == 1, c.name  # integer convolutions run on the host
        elif 0 not in c.out_shape():
            assert on_host == 0, c.name
    rng = np.random.default_rng(1)
    for p in CONV.POOLS:
        dt = CONV.DTYPES[p.dtype]
        x = (rng.integers(-50, 50, p.x) if p.dtype == "i32" else
             rng.standard_normal(p.x)).astype(dt)
        before = exe.plan.stats["host instructions"]
        assert_agree(exe.call(p.name, x), oracle.call(p.name, x), p.name)
        assert exe.plan.stats["host instructions"] == before, p.name


def conv_agree(c: Any, got: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...]) -> None:
    """A thread sums its window in order, numpy's BLAS in blocks: floats agree to the
    rounding of a sum of that many terms, relative to the output's scale."""
    assert got[0].shape == want[0].shape == c.out_shape(), c.name
    if c.dtype == "i32" or not got[0].size:
        assert_agree(got, want, c.name)
        return
    g, w = got[0].astype(np.float64), want[0].astype(np.float64)
    eps = {"f16": 1e-2, "f32": 2e-6, "f64": 1e-13}[c.dtype]
    np.testing.assert_allclose(g, w, rtol=eps, atol=eps * np.abs(w).max(), err_msg=c.name)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CONV.geometries())
def test_random_convolutions_agree_with_the_interpreter(drawn: Any) -> None:
    c, seed = drawn
    module = ir.parse(CONV.conv_function(c))
    args = CONV.arguments(c, seed)
    conv_agree(c, emulated(module, passes="").call(c.name, *args),
               ir.compile(module, "interp").call(c.name, *args))


def test_the_onnx_cnn_trains_without_leaving_the_device() -> None:
    """examples/onnx-cnn's training step (convolutions, pooling, their adjoints): every
    instruction on the device, no download, replayed after its first call."""
    onnx_frontend = pytest.importorskip("dlvm.onnx")
    module = onnx_frontend.load(str(ROOT / "examples" / "onnx-cnn" / "cnn.onnx"))
    ir.run_passes(module, "differentiation,O2")
    oracle, exe = ir.compile(module, "interp"), emulated(module)
    params = oracle.call("init_params")
    rng = np.random.default_rng(6)
    for _ in range(3):
        x = rng.random((8, 64)).astype(np.float32)
        y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 8)]
        args = [*params, x, y, np.float32(0.5)]
        got, want = exe.call("train_step", *args), oracle.call("train_step", *args)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    stats = exe.plan.stats
    assert stats["host instructions"] == 0 and stats["downloads"] == 0, exe.plan.host_opcodes
    assert stats["replays"] == 2, (stats, exe.plan.not_replayed)


def test_the_tel_rnn_trains_without_leaving_the_device() -> None:
    """examples/tel-rnn's training step: the recurrent loop reads its time steps as views
    of rows (`extract`), and only loop counters run on the host; no download, replayed."""
    tel = pytest.importorskip("dlvm.tel")
    module = tel.compile_file(str(ROOT / "examples" / "tel-rnn" / "model.tel"))
    ir.run_passes(module, "differentiation,O2")
    oracle, exe = ir.compile(module, "interp"), emulated(module)
    params = oracle.call("init_params")
    data = np.load(ROOT / "examples" / "tel-rnn" / "sequences.npz")
    for start in (0, 8, 16):
        x = data["sequences"][start:start + 8].astype(np.float32)
        y = np.eye(2, dtype=np.float32)[data["labels"][start:start + 8]]
        args = [*params, x, y, np.float32(0.1)]
        got, want = exe.call("train_step", *args), oracle.call("train_step", *args)
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    stats = exe.plan.stats
    assert stats["downloads"] == 0 and stats["replays"] == 2, (stats, exe.plan.not_replayed)
    assert set(exe.plan.host_opcodes) <= {"lessThan", "add", "equal"}, exe.plan.host_opcodes


ROWS = """
func @row: (<6 x 4 x f32>, i64) -> <4 x f32> {
'entry(%xs: <6 x 4 x f32>, %i: i64):
    %r = extract %i: i64 from %xs: <6 x 4 x f32>
    return %r: <4 x f32>
}

func @elem: (<6 x 4 x f32>) -> f32 {
'entry(%xs: <6 x 4 x f32>):
    %e = extract 2, 1 from %xs: <6 x 4 x f32>
    return %e: f32
}
"""


def test_rows_extracted_from_a_device_tensor_are_views() -> None:
    module = ir.parse(ROWS, "rows.dl")
    oracle, exe = ir.compile(module, "interp"), emulated(module, passes="")
    xs = np.arange(24, dtype=np.float32).reshape(6, 4)
    dx = exe.device.upload(xs)
    row = exe.call_device("row", dx, np.int64(3))
    assert isinstance(row, DeviceArray) and row.buffer is dx.buffer and row.offset == 48
    np.testing.assert_array_equal(row.numpy(), xs[3])
    assert float(exe.call_device("elem", dx)) == 9.0
    assert exe.plan.stats["host instructions"] == 0 and exe.plan.stats["downloads"] == 0
    for bad in (6, -1):
        with pytest.raises(ir.ExecutionError) as want:
            oracle.call("row", xs, np.int64(bad))
        with pytest.raises(ir.ExecutionError) as got:
            exe.call("row", xs, np.int64(bad))
        assert str(got.value) == str(want.value)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3), data=st.data(),
       combinator=st.sampled_from(["add", "multiply", "max", "min"]),
       dtype=st.sampled_from(["f32", "f64", "i32"]))
def test_scans_are_the_interpreters_bit_for_bit(shape: list[int], data: st.DataObject,
                                                combinator: str, dtype: str) -> None:
    """One thread per element folds its prefix in numpy's order: equal bits, not just
    close values, for every combinator and any subset of dimensions in any order."""
    dims = data.draw(st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True))
    t = "<" + " x ".join(map(str, shape)) + f" x {dtype}>"
    text = (f"func @s: ({t}) -> {t} {{\n'entry(%x: {t}):\n    %y = scan %x: {t} by "
            f"{combinator} along {', '.join(map(str, dims))}\n    return %y: {t}\n}}\n")
    module = ir.parse(text)
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    x = (rng.integers(-3, 4, shape).astype(np.int32) if dtype == "i32" else
         rng.standard_normal(shape).astype(np.float32 if dtype == "f32" else np.float64))
    exe = emulated(module, passes="")
    np.testing.assert_array_equal(exe.call("s", x)[0], ir.compile(module, "interp").call("s", x)[0])
    assert exe.plan.stats["host instructions"] == 0


def test_a_long_scan_and_a_bit_cast() -> None:
    """Past SCAN_MAX elements per line a scan runs on the host (a thread's work grows as
    the square of its line); a bit cast is a view of the same bytes."""
    n = SCAN_MAX + 1
    text = (f"func @s: (<{n} x f32>) -> <{n} x f32> {{\n'entry(%x: <{n} x f32>):\n"
            f"    %y = scan %x: <{n} x f32> by add along 0\n    return %y: <{n} x f32>\n}}\n"
            "func @b: (<2 x 3 x f32>) -> <3 x 2 x i32> {\n'entry(%x: <2 x 3 x f32>):\n"
            "    %y = bitCast %x: <2 x 3 x f32> to <3 x 2 x i32>\n"
            "    return %y: <3 x 2 x i32>\n}\n")
    exe = emulated(ir.parse(text), passes="")
    x = np.ones(n, np.float32)
    np.testing.assert_array_equal(exe.call("s", x)[0], np.cumsum(x))
    assert exe.plan.host_opcodes == {"scan": 1}
    a = exe.device.upload(np.arange(6, dtype=np.float32).reshape(2, 3))
    bits = exe.call_device("b", a)
    assert bits.buffer is a.buffer and bits.dtype == np.int32 and bits.shape == (3, 2)
    np.testing.assert_array_equal(bits.numpy(), a.numpy().view(np.int32).reshape(3, 2))
