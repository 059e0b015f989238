"""On a real GPU: every program on `nvptx` computes what the interpreter computes, data stays
on the device, and device arrays cross to PyTorch through DLPack. Marked `gpu`: skipped,
with the reason, where there is no NVIDIA driver and device."""

from __future__ import annotations

from pathlib import Path

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
