"""What a call of compiled code costs from Python on `llvm-cpu`, against ONNX Runtime.

Times, in µs per call: an empty function, `(<_ x 4 x f32>) -> <_ x 4 x f32>` adding one
on a 4×4 array (numpy arrays in and out), and batch-1 inference of a 784-512-512-10 tanh MLP
on `llvm-cpu`, ONNX Runtime's `session.run` of the same MLP (built here with onnx.helper)
and numpy. Targets: ≤ 3 µs per call of the first two, and MLP inference ≤ 0.75× ONNX
Runtime. All in one process; the variants run in interleaved rounds of short chunks (about
0.5 ms each), so that load from other processes hits every variant alike. A variant's time
is its best chunk (a chunk the scheduler did not interrupt: on a loaded machine a process is
descheduled for milliseconds at a time, which a median over chunks measures instead), with
the median beside it.

    python benchmarks/call_overhead.py [--threads 1] [--rounds 200] [--out FILE.md]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import dlvm.ir as ir

# this folder holds benchmarks/onnx.py, which is not the onnx package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

F32 = np.float32
SIZES = (784, 512, 512, 10)

CALLS = """
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
"""


def mlp_text() -> str:
    """@predict(w1, b1, w2, b2, w3, b3, x): tanh layers, the last one linear."""
    params, body, h = [], [], "%x"
    for k in range(3):
        n, m = SIZES[k], SIZES[k + 1]
        params += [f"%w{k}: <{n} x {m} x f32>", f"%b{k}: <{m} x f32>"]
        body += [f"    %z{k} = dot {h}: <1 x {n} x f32>, %w{k}: <{n} x {m} x f32>",
                 f"    %p{k} = padShape %b{k}: <{m} x f32> at 0",
                 f"    %a{k} = add %z{k}: <1 x {m} x f32>, %p{k}: <1 x {m} x f32>"]
        h = f"%a{k}"
        if k < 2:
            body.append(f"    %h{k} = tanh %a{k}: <1 x {m} x f32>")
            h = f"%h{k}"
    types = ", ".join(p.split(": ")[1] for p in params)
    return f"""
module "mlp"
stage raw

func @predict: ({types}, <1 x 784 x f32>) -> <1 x 10 x f32> {{
'entry({", ".join(params)}, %x: <1 x 784 x f32>):
{chr(10).join(body)}
    return %a2: <1 x 10 x f32>
}}
"""


def mlp_params(rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for k in range(3):
        limit = np.sqrt(6 / (SIZES[k] + SIZES[k + 1]))
        out += [rng.uniform(-limit, limit, (SIZES[k], SIZES[k + 1])).astype(F32),
                rng.uniform(-0.1, 0.1, SIZES[k + 1]).astype(F32)]
    return out


def numpy_mlp(p: list[np.ndarray], x: np.ndarray) -> np.ndarray:
    w1, b1, w2, b2, w3, b3 = p
    return np.tanh(np.tanh(x @ w1 + b1) @ w2 + b2) @ w3 + b3


def onnx_session(p: list[np.ndarray], threads: int) -> Any | None:
    """ONNX Runtime's session for the MLP, or None when onnx or onnxruntime is missing."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return None
    names = ["w1", "b1", "w2", "b2", "w3", "b3"]
    nodes, h = [], "x"
    for k in range(3):
        nodes += [helper.make_node("MatMul", [h, names[2 * k]], [f"z{k}"]),
                  helper.make_node("Add", [f"z{k}", names[2 * k + 1]], [f"a{k}"])]
        h = f"a{k}"
        if k < 2:
            nodes.append(helper.make_node("Tanh", [h], [f"h{k}"]))
            h = f"h{k}"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 784])],
        [helper.make_tensor_value_info(h, TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(a, n) for a, n in zip(p, names, strict=True)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def interleaved(variants: dict[str, Callable[[], Any]], rounds: int, calls: dict[str, int]
                ) -> dict[str, tuple[float, float]]:
    """(median, best) µs per call of each variant over `rounds` rounds of one chunk each."""
    chunks: dict[str, list[float]] = {name: [] for name in variants}
    for f in variants.values():  # warm up
        for _ in range(100):
            f()
    for _ in range(rounds):
        for name, f in variants.items():
            n = calls[name]
            start = time.perf_counter()
            for _ in range(n):
                f()
            chunks[name].append((time.perf_counter() - start) / n * 1e6)
    return {name: (float(np.median(t)), float(np.min(t))) for name, t in chunks.items()}


def machine_line() -> str:
    cpu = "unknown CPU"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f
                    if line.startswith("model name")), cpu)
    versions = [f"Python {platform.python_version()}", f"numpy {np.__version__}"]
    for name in ("llvmlite", "onnxruntime"):
        with contextlib.suppress(ImportError):
            versions.append(f"{name} {__import__(name).__version__}")
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (f"{datetime.date.today()}: {cpu}, {os.cpu_count()} cores, {platform.system()} "
            f"{platform.release()}, {', '.join(versions)}; load average {load} when run")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--out", help="write the results as Markdown to this file")
    args = ap.parse_args()

    calls = ir.compile(ir.parse(CALLS), "llvm-cpu", threads=args.threads)
    empty, inc = calls["empty"], calls["inc"]
    x4 = np.ones((4, 4), F32)
    np.testing.assert_array_equal(inc(x4), x4 + 1)
    rng = np.random.default_rng(1)
    p = mlp_params(rng)
    x = rng.random((1, 784), F32)
    predict = ir.compile(ir.parse(mlp_text()), "llvm-cpu", threads=args.threads)["predict"]
    want = numpy_mlp(p, x)
    np.testing.assert_allclose(predict(*p, x), want, rtol=1e-4, atol=1e-5)

    variants: dict[str, Callable[[], Any]] = {
        "empty function (exe.call)": lambda: calls.call("empty"),
        "empty function (exe['empty'])": empty,
        "x + 1 on 4×4 (exe['inc'])": lambda: inc(x4),
        "x + 1 on 4×4, numpy": lambda: x4 + 1,
        "MLP batch 1, dlvm": lambda: predict(*p, x),
        "MLP batch 1, numpy": lambda: numpy_mlp(p, x),
    }
    session = onnx_session(p, args.threads)
    if session is not None:
        np.testing.assert_allclose(session.run(None, {"x": x})[0], want, rtol=1e-4, atol=1e-5)
        variants["MLP batch 1, onnxruntime"] = lambda: session.run(None, {"x": x})
    counts = {name: 10 if "MLP" in name else 200 for name in variants}
    times = interleaved(variants, args.rounds, counts)

    lines = [f"Machine, {machine_line()}.", "",
             f"Command: `python benchmarks/call_overhead.py --threads {args.threads} "
             f"--rounds {args.rounds}`.", "",
             "| call | µs per call (best chunk) | median of chunks |", "|---|---|---|"]
    lines += [f"| {name} | {best:.2f} | {med:.2f} |" for name, (med, best) in times.items()]
    if session is not None:
        best = times["MLP batch 1, dlvm"][1] / times["MLP batch 1, onnxruntime"][1]
        ratio = times["MLP batch 1, dlvm"][0] / times["MLP batch 1, onnxruntime"][0]
        lines += ["", f"MLP batch 1: dlvm / onnxruntime = **{best:.2f}×** on best chunks "
                      f"({ratio:.2f}× on medians; target ≤ 0.75×)."]
    else:
        lines += ["", "onnxruntime or onnx is not installed: no ONNX Runtime row."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write("# The cost of a call on llvm-cpu, against ONNX Runtime\n\n" + text)


if __name__ == "__main__":
    main()
