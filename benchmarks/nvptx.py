"""The nvptx target on an NVIDIA GPU against PyTorch CUDA (eager and torch.compile).

    python benchmarks/nvptx.py [--repeat N] [--json results.json]

Workloads (float32), each checked against numpy before it is timed, times the median of
repeated runs after warm-up, synchronized:
1. mlp_train — the MLP training step of benchmarks/llvm_cpu.py (784-512-512-10, batch 128):
   target ≤ 1.0× PyTorch CUDA eager;
2. ew_forward — tanh(a·b + c)·sigmoid(a − c) over 2²⁴ elements: target ≥ 80 % of the
   device's measured copy bandwidth;
3. host overhead — a warm `call_device` of one kernel (target ≤ 15 µs) and the host time
   per replayed launch of a 64-launch list (target ≤ 5 µs), each also walked (replay off).
   Without a GPU, these are measured on the emulation (`device="host"`), whose host side is
   the same code, and the GPU rows are skipped.
PyTorch's peers: eager, `torch.compile` and `torch.compile(mode="reduce-overhead")` (CUDA
graphs); the copy bandwidth is measured as PyTorch measures it, on a 1 GiB copy.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
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


def chain_text(length: int) -> str:
    """`length` element-wise instructions on one element each, unfused: a launch list of
    that length whose kernels take no time, to measure the host side of launching."""
    lines = ["func @f: (<1 x f32>) -> <1 x f32> {", "'entry(%x: <1 x f32>):"]
    prev = "%x"
    for k in range(length):
        lines.append(f"    %v{k} = tanh {prev}: <1 x f32>")
        prev = f"%v{k}"
    lines += [f"    return {prev}: <1 x f32>", "}"]
    return "\n".join(lines) + "\n"


def seconds_per_call(length: int, device: str, replay: bool, calls: int) -> float:
    """Host time of one call of a `length`-launch chain, warm (compiled, recorded,
    replayed and captured first), the device synchronized at the end."""
    exe = ir.compile(ir.parse(chain_text(length)), "nvptx", passes="", device=device,
                     replay=replay)
    one = exe.device.upload(np.ones(1, np.float32))
    for _ in range(20):
        exe.call_device("f", one)
    exe.device.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        exe.call_device("f", one)
    exe.device.synchronize()
    return (time.perf_counter() - start) / calls


def host_overhead(device: str, rows: dict[str, Any]) -> None:
    """Host time per call and per replayed launch (the emulation's host side is the GPU's:
    the same plan, replay and graph code; only the driver calls differ)."""
    for replay, suffix in ((False, "walk_"), (True, "")):
        rows[f"call_device_{suffix}us"] = 1e6 * seconds_per_call(1, device, replay, 2000)
    for replay, suffix in ((False, "walked"), (True, "replayed")):
        rows[f"us_per_launch_{suffix}"] = 1e6 * seconds_per_call(64, device, replay, 200) / 64
    rows["host_overhead_device"] = device


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=50)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    from dlvm.llvm_gpu.cuda import available

    ok, reason = available()
    rows: dict[str, Any] = {}
    if not ok:
        print(f"no GPU ({reason}): host overhead on the emulation (device=host) only")
        host_overhead("host", rows)
        report(rows, args.json)
        return
    host_overhead("cuda", rows)
    # ---- copy bandwidth of the device, as PyTorch measures it: a 1 GiB copy
    exe = ir.compile(ir.parse(elementwise_text(1 << 24)), "nvptx")
    dev = exe.device
    rows["device"] = dev.name
    bandwidth = copy_bandwidth(dev)
    rows["copy_GBps"] = bandwidth / 1e9
    # ---- element-wise chain at 2^24 and 2^26 elements
    rng = np.random.default_rng(0)
    for log2 in (24, 26):
        n = 1 << log2
        exe = ir.compile(ir.parse(elementwise_text(n)), "nvptx")
        dev = exe.device  # each executable has its own stream: synchronize that one
        a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
        da, db, dc = (dev.upload(x) for x in (a, b, c))
        want = np.tanh(a * b + c) / (1 + np.exp(-(a - c)))
        got = exe.call_device("f", da, db, dc).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        ew_s = timed(partial(exe.call_device, "f", da, db, dc), dev.synchronize, args.repeat)
        again = exe.call_device("f", da, db, dc).numpy()  # a replay computes it too
        np.testing.assert_allclose(again, want, rtol=1e-5, atol=1e-6)
        rows[f"ew_forward_2^{log2}_ms"] = ew_s * 1e3
        rows[f"ew_forward_2^{log2}_bandwidth_fraction"] = (4 * 4 * n / ew_s) / bandwidth
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
    rows["mlp_train_stats"] = dict(mlp.plan.stats)
    try:
        import torch

        if torch.cuda.is_available():
            a, b, c = (rng.standard_normal(1 << 24).astype(np.float32) for _ in range(3))
            rows.update(torch_peers(torch, params, x, y, float(lr), a, b, c, args.repeat))
    except ImportError:
        rows["torch"] = "not installed"
    report(rows, args.json)


def copy_bandwidth(dev: Any) -> float:
    """Bytes read and written per second by a 1 GiB device-to-device copy."""
    n = 1 << 28
    src, dst = dev.empty((n,), np.float32), dev.empty((n,), np.float32)
    return 2 * 4 * n / timed(partial(dev.copy, dst.ptr, src.ptr, 4 * n), dev.synchronize, 20)


def report(rows: dict[str, Any], path: str) -> None:
    print(json.dumps(rows, indent=1))
    if path:
        Path(path).write_text(json.dumps(rows, indent=1))


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
    out: dict[str, Any] = {"torch_mlp_train_ms": 1e3 * timed(step, sync, repeat),
                           "torch_ew_forward_ms": 1e3 * timed(ew, sync, repeat)}
    src = torch.empty(1 << 28, device=cuda)
    copy_s = timed(partial(torch.empty_like(src).copy_, src), sync, 20)
    out["torch_copy_GBps"] = 2 * src.numel() * 4 / copy_s / 1e9
    for mode in ("default", "reduce-overhead"):
        try:
            compiled = torch.compile(ew, mode=mode)
            out[f"torch_compile_{mode}_ew_forward_ms"] = 1e3 * timed(compiled, sync, repeat)
            compiled_step = torch.compile(step, mode=mode)
            out[f"torch_compile_{mode}_mlp_train_ms"] = 1e3 * timed(compiled_step, sync, repeat)
        except Exception as e:  # a peer that fails is reported, not fatal
            out[f"torch_compile_{mode}"] = f"unavailable ({type(e).__name__}: {e})"[:200]
    return out


if __name__ == "__main__":
    main()
