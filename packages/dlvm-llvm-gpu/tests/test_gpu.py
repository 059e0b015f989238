"""On a real GPU: every program on `nvptx` computes what the interpreter computes, data stays
on the device, and device arrays cross to PyTorch through DLPack. Marked `gpu`: skipped,
with the reason, where there is no NVIDIA driver and device."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import (
    callable_functions,
    check_same,
    corpus,
    mlp_cross_entropy,
    random_argument,
)
from dlvm.llvm_gpu import DeviceArray

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("path", corpus(ROOT), ids=lambda p: str(p.relative_to(ROOT)))
def test_the_corpus_computes_the_same_on_the_gpu(path: Path) -> None:
    module = ir.parse_file(str(path))
    oracle = ir.compile(module, "interp", max_steps=200_000)
    gpu = ir.compile(module, "nvptx", max_steps=200_000)
    rng = np.random.default_rng(0)
    for fn in callable_functions(oracle.module):
        args = [random_argument(t, oracle.module, rng) for t in fn.type_.arguments]
        check_same(fn, args, gpu, oracle, errors=False)


def test_the_mlp_gradient_on_the_gpu_uses_cublas_where_installed() -> None:
    module = ir.parse(mlp_cross_entropy(batch="_", inputs=64, hidden=32, outputs=10,
                                        dtype="f32"))
    oracle = ir.compile(module, "interp")
    gpu = ir.compile(module, "nvptx")
    rng = np.random.default_rng(1)
    fn = gpu.module.function("dloss")
    assert fn is not None
    args = [random_argument(t, gpu.module, rng) for t in fn.type_.arguments]
    want = oracle.call("dloss", *args)
    got = gpu.call("dloss", *args)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-5)  # TF32-free, reordered sums
    assert gpu.plan.stats["downloads"] == 0, gpu.plan.stats


def test_device_arrays_cross_to_torch_without_a_copy() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    text = ("func @scale: (<_ x f32>) -> <_ x f32> {\n'entry(%x: <_ x f32>):\n"
            "    %y = multiply %x: <_ x f32>, 2.0: f32\n    return %y: <_ x f32>\n}\n")
    exe = ir.compile(ir.parse(text), "nvptx")
    x = torch.arange(8, dtype=torch.float32, device="cuda")
    y = exe.call_device("scale", x)  # imported through DLPack: no copy to the host
    assert isinstance(y, DeviceArray)
    t = torch.from_dlpack(y)
    assert t.device.type == "cuda" and t.data_ptr() == y.ptr
    assert torch.equal(t, x * 2)


SUMS = """
func @count: (<1 x f32>) -> f32 {
'entry(%half: <1 x f32>):
  %ones = add %half: <1 x f32>, 0.5: <100000000 x f32>
  %s = reduce %ones: <100000000 x f32> by add init 0: f32
  return %s: f32
}
func @columns: (<_ x 3 x f32>) -> <3 x f32> {
'entry(%x: <_ x 3 x f32>):
  %s = reduce %x: <_ x 3 x f32> by add init 0: f32 along 0
  return %s: <3 x f32>
}
func @rows: (<_ x _ x f32>) -> <_ x f32> {
'entry(%x: <_ x _ x f32>):
  %s = reduce %x: <_ x _ x f32> by add init 0: f32 along 1
  return %s: <_ x f32>
}
"""


@pytest.mark.parametrize("passes", ["", "O3"])
def test_gpu_sums_keep_growing_in_every_kernel_shape(passes: str) -> None:
    """10^8 ones (split into partials), 2^24 then ones down columns (few outputs) and along
    rows (a block per row): float32 sums add in float64 on the device too."""
    exe = ir.compile(ir.parse(SUMS), "nvptx", passes=passes)
    assert exe.call("count", np.array([0.5], np.float32))[0].tolist() == 1e8
    x = np.ones((100_001, 3), np.float32)
    x[0] = 2.0**24
    assert exe.call("columns", x)[0].tolist() == [2.0**24 + 100_000] * 3
    rows = np.ascontiguousarray(np.broadcast_to(x[:, :1].T, (64, 100_001)))
    assert exe.call("rows", rows)[0].tolist() == [2.0**24 + 100_000] * 64


def test_replays_and_their_cuda_graph_compute_what_the_walk_did() -> None:
    """The MLP gradient called again and again: the first call walks, the next two replay
    launch by launch, the rest launch one CUDA graph (cuBLAS captured with its workspace);
    every call's results agree with the interpreter and stay its own."""
    module = ir.parse(mlp_cross_entropy(batch=16, inputs=64, hidden=32, outputs=10,
                                        dtype="f32"))
    oracle = ir.compile(module, "interp")
    gpu = ir.compile(module, "nvptx")
    rng = np.random.default_rng(2)
    fn = gpu.module.function("dloss")
    assert fn is not None
    kept = []
    for _ in range(6):
        args = [random_argument(t, gpu.module, rng) for t in fn.type_.arguments]
        kept.append((gpu.call_device("dloss", *args), oracle.call("dloss", *args)))
    for got, want in kept:
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(np.asarray(g), w, rtol=2e-4, atol=2e-5)
    stats = gpu.plan.stats
    assert stats["walks"] == 1 and stats["replays"] == 5, stats
    (replay,) = gpu.plan.replays_of("dloss")
    assert replay is not None and replay.graph is not None, replay and replay.no_graph


def test_a_replayed_kernel_error_is_reported_when_results_come_back() -> None:
    text = ("func @divide: (<5 x i32>, <5 x i32>) -> <5 x i32> {\n"
            "'entry(%a: <5 x i32>, %b: <5 x i32>):\n"
            "    %q = divide %a: <5 x i32>, %b: <5 x i32>\n    return %q: <5 x i32>\n}\n")
    gpu = ir.compile(ir.parse(text, "divide.dl"), "nvptx", passes="")
    a = np.arange(5, dtype=np.int32)
    np.testing.assert_array_equal(gpu.call("divide", a, np.full(5, 2, np.int32))[0], a // 2)
    with pytest.raises(ir.ExecutionError, match=r"divide\.dl:3:10: 'divide': integer"):
        gpu.call_device("divide", a, np.array([1, 0, 1, 1, 1], np.int32)).numpy()
    assert gpu.plan.stats["replays"] == 1


DOT = """
func @mm: (<64 x 512 x {t}>, <512 x 32 x {t}>) -> <64 x 32 x {t}> {{
'entry(%a: <64 x 512 x {t}>, %b: <512 x 32 x {t}>):
    %c = dot %a: <64 x 512 x {t}>, %b: <512 x 32 x {t}>
    return %c: <64 x 32 x {t}>
}}
"""


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_tensor_cores_are_opt_in(dtype: str) -> None:
    """TF32 for float32 when asked (float16 takes the tensor cores either way): close to
    the exact product, and through the library; without the option float32 stays exact to
    float32 rounding."""
    np_dtype = np.float32 if dtype == "f32" else np.float16
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 512)).astype(np_dtype)
    b = rng.standard_normal((512, 32)).astype(np_dtype)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    module = ir.parse(DOT.format(t=dtype))
    fast = ir.compile(module, "nvptx", tensor_cores=True)
    got = fast.call("mm", a, b)[0].astype(np.float64)
    np.testing.assert_allclose(got, exact, rtol=0, atol=5e-2 * np.abs(exact).max())
    assert fast.plan.stats["gemm library calls"] == 1, fast.plan.stats
    if dtype == "f32":
        full = ir.compile(module, "nvptx").call("mm", a, b)[0].astype(np.float64)
        np.testing.assert_allclose(full, exact, rtol=1e-4, atol=1e-4)
        assert np.abs(got - exact).max() > np.abs(full - exact).max()  # TF32 rounds more


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_16_bit_products_run_on_tensor_cores_and_round_once(dtype: str) -> None:
    """bf16 and f16 `dot` go to cuBLAS (`GemmEx`: 16-bit in, f32 sums) without asking for
    tensor cores: each result is the exact product rounded once, up to the f32 sum's
    error."""
    t = np.dtype(ml_dtypes.bfloat16) if dtype == "bf16" else np.dtype(np.float16)
    half_ulp = 2.0**-8 if dtype == "bf16" else 2.0**-11
    rng = np.random.default_rng(6)
    a = rng.standard_normal((64, 512)).astype(t)
    b = (rng.standard_normal((512, 32)) / 8).astype(t)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    gpu = ir.compile(ir.parse(DOT.format(t=dtype)), "nvptx")
    got = gpu.call("mm", a, b)[0]
    assert got.dtype == t and gpu.plan.stats["gemm library calls"] == 1, gpu.plan.stats
    np.testing.assert_allclose(got.astype(np.float64), exact, rtol=half_ulp,
                               atol=1e-5 * np.abs(exact).max())


DRAWS = """
var @kept: <4096 x f32>
func @noise: (<4096 x f32>) -> (<4096 x f32>, <1000 x i32>, <17 x f64>) {
'entry(%x: <4096 x f32>):
    %r = random 4096 from -1.0: f32 upto 1.0: f32
    %y = add %x: <4096 x f32>, %r: <4096 x f32>
    %k = random 1000 from -7: i32 upto 1000000: i32
    %d = random 17 from 0.0: f64 upto 1.0: f64
    %t = literal (%y: <4096 x f32>, %k: <1000 x i32>, %d: <17 x f64>): (<4096 x f32>, <1000 x i32>, <17 x f64>)
    return %t: (<4096 x f32>, <1000 x i32>, <17 x f64>)
}
func @keep: (<4096 x f32>) -> <4096 x f32> {
'entry(%x: <4096 x f32>):
    %v = load @kept: *<4096 x f32>
    %n = add %v: <4096 x f32>, %x: <4096 x f32>
    store %n: <4096 x f32> to @kept: *<4096 x f32>
    return %n: <4096 x f32>
}
"""


def test_random_draws_the_cpus_numbers_in_replays_and_graphs() -> None:
    """The counter-based stream in kernels: bit for bit the interpreter's numbers, call
    after call, through the walk, the replays and the CUDA graph."""
    module = ir.parse(DRAWS)
    oracle = ir.compile(module, "interp", seed=7)
    gpu = ir.compile(module, "nvptx", seed=7)
    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    for _ in range(5):
        for got, want in zip(gpu.call("noise", x), oracle.call("noise", x), strict=True):
            assert got.tobytes() == want.tobytes()
    assert gpu.plan.stats["replays"] == 4 and gpu.plan.stats["downloads"] == 0


def test_tensors_kept_in_memory_stay_on_the_gpu() -> None:
    module = ir.parse(DRAWS)
    oracle, gpu = ir.compile(module, "interp"), ir.compile(module, "nvptx")
    x = np.linspace(-1, 1, 4096, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(gpu.call("keep", x)[0], oracle.call("keep", x)[0])
    assert gpu.plan.stats["downloads"] == 0
