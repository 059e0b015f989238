"""The nvptx target on an NVIDIA GPU against PyTorch CUDA (eager and torch.compile).

    python benchmarks/nvptx.py [--repeat N] [--json results.json]

Workloads (float32), each checked against numpy before it is timed, times the median of
repeated runs after warm-up, synchronized:
1. mlp_train — the MLP training step of benchmarks/llvm_cpu.py (784-512-512-10, batch 128):
   target ≤ 1.0× PyTorch CUDA eager;
2. ew_forward — tanh(a·b + c)·sigmoid(a − c) over 2²⁴ elements: target ≥ 80 % of the
   device's measured copy bandwidth;
3. launch — the host overhead of one kernel launch of the launch plan (a 1-element kernel
   called in a loop): target ≤ 10 µs.
Without a GPU it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import dlvm.ir as ir

sys.path.insert(0, str(Path(__file__).resolve().parent))
from llvm_cpu import elementwise_text, mlp_params, mlp_text, numpy_mlp_step


def timed(fn: Callable[[], Any], sync: Callable[[], None], repeat: int) -> float:
    for _ in range(3):
        fn()
    sync()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    from dlvm.llvm_gpu.cuda import available

    ok, reason = available()
    if not ok:
        print(f"no GPU: {reason}; nothing measured")
        return
    rows: dict[str, Any] = {}
    # ---- copy bandwidth of the device (device to device)
    exe = ir.compile(ir.parse(elementwise_text(1 << 24)), "nvptx")
    dev = exe.device
    n = 1 << 24
    src, dst = dev.empty((n,), np.float32), dev.empty((n,), np.float32)
    copy_s = timed(lambda: dev.copy(dst.ptr, src.ptr, 4 * n), dev.synchronize, args.repeat)
    bandwidth = 2 * 4 * n / copy_s
    rows["device"] = dev.name
    rows["copy_GBps"] = bandwidth / 1e9
    # ---- element-wise chain
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    da, db, dc = (dev.upload(x) for x in (a, b, c))
    want = np.tanh(a * b + c) / (1 + np.exp(-(a - c)))
    got = exe.call_device("f", da, db, dc).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    ew_s = timed(lambda: exe.call_device("f", da, db, dc), dev.synchronize, args.repeat)
    rows["ew_forward_ms"] = ew_s * 1e3
    rows["ew_forward_bandwidth_fraction"] = (4 * 4 * n / ew_s) / bandwidth
    # ---- launch overhead: a one-element kernel
    tiny = ir.compile(ir.parse("func @f: (<1 x f32>) -> <1 x f32> {\n'entry(%x: <1 x f32>):\n"
                               "    %y = tanh %x: <1 x f32>\n    return %y: <1 x f32>\n}\n"),
                      "nvptx", passes="")
    one = tiny.device.upload(np.ones(1, np.float32))
    launches = 1000
    start = time.perf_counter()
    for _ in range(launches):
        tiny.call_device("f", one)
    tiny.device.synchronize()
    rows["launch_us"] = (time.perf_counter() - start) / launches * 1e6
    # ---- MLP training step
    mlp = ir.compile(ir.parse(mlp_text(128)), "nvptx")
    params = mlp_params(rng)
    x = rng.standard_normal((128, 784)).astype(np.float32)
    y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
    lr = np.float32(0.01)
    want_params = numpy_mlp_step([p.copy() for p in params], x, y, lr)
    got_params = mlp.call("train_step", *params, x, y, lr)
    for g, w in zip(got_params, want_params, strict=False):
        np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-4)
    dparams = [mlp.device.upload(p) for p in params]
    dx, dy = mlp.device.upload(x), mlp.device.upload(y)
    rows["mlp_train_ms"] = 1e3 * timed(lambda: mlp.call_device("train_step", *dparams, dx, dy,
                                                               lr),
                                       mlp.device.synchronize, args.repeat)
    try:
        import torch

        if torch.cuda.is_available():
            rows.update(torch_peers(torch, params, x, y, float(lr), a, b, c, args.repeat))
    except ImportError:
        rows["torch"] = "not installed"
    print(json.dumps(rows, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


def torch_peers(torch: Any, params: list[np.ndarray], x: np.ndarray, y: np.ndarray, lr: float,
                a: np.ndarray, b: np.ndarray, c: np.ndarray, repeat: int) -> dict[str, float]:
    cuda = torch.device("cuda")
    tp = [torch.tensor(p, device=cuda, requires_grad=True) for p in params]
    tx, ty = torch.tensor(x, device=cuda), torch.tensor(y, device=cuda)
    ta, tb, tc = (torch.tensor(v, device=cuda) for v in (a, b, c))

    def step() -> None:
        h = torch.tanh(tx @ tp[0] + tp[1])
        h = torch.tanh(h @ tp[2] + tp[3])
        logits = h @ tp[4] + tp[5]
        loss = -(torch.log_softmax(logits, 1) * ty).sum(1).mean()
        grads = torch.autograd.grad(loss, tp)
        with torch.no_grad():
            for p, g in zip(tp, grads, strict=True):
                p -= lr * g

    def ew() -> Any:
        return torch.tanh(ta * tb + tc) * torch.sigmoid(ta - tc)

    sync = torch.cuda.synchronize
    out = {"torch_mlp_train_ms": 1e3 * timed(step, sync, repeat),
           "torch_ew_forward_ms": 1e3 * timed(ew, sync, repeat)}
    compiled = torch.compile(ew)
    out["torch_compile_ew_forward_ms"] = 1e3 * timed(compiled, sync, repeat)
    return out


if __name__ == "__main__":
    main()
