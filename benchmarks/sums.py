"""Float32 sums on every installed target: exact where float32 one by one is not, and what the
float64 accumulation costs.

    python benchmarks/sums.py [--repeat 5]

Two workloads per target (interp, llvm-cpu, nvptx emulated on the host, nvptx on a GPU when
there is one), each checked before it is timed:
1. ones — 10^8 float32 ones made from a one-element argument and summed (the compiled
   targets fuse them into the reduction): the result must be 10^8 exactly (float32 added one
   by one stops at 2^24);
2. sum — a float32 array of 2^25 uniform values summed whole and along each axis of a
   2^17 × 256 view: time, bandwidth (bytes read per second), and the relative error against
   the exact sum (`math.fsum`), beside numpy's own float32 `sum`.
The time is the best of the repeats after one warm-up call.
"""

from __future__ import annotations

import argparse
import math
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import dlvm.ir as ir

N_ONES = 100_000_000
N_SUM = 1 << 25

TEXT = f"""module "sums"
stage optimizable
func @ones: (<1 x f32>) -> f32 {{
'entry(%half: <1 x f32>):
  %ones = add %half: <1 x f32>, 0.5: <{N_ONES} x f32>
  %s = reduce %ones: <{N_ONES} x f32> by add init 0: f32
  return %s: f32
}}
func @total: (<_ x f32>) -> f32 {{
'entry(%x: <_ x f32>):
  %s = reduce %x: <_ x f32> by add init 0: f32
  return %s: f32
}}
func @columns: (<_ x 256 x f32>) -> <256 x f32> {{
'entry(%x: <_ x 256 x f32>):
  %s = reduce %x: <_ x 256 x f32> by add init 0: f32 along 0
  return %s: <256 x f32>
}}
func @rows: (<_ x 256 x f32>) -> <_ x f32> {{
'entry(%x: <_ x 256 x f32>):
  %s = reduce %x: <_ x 256 x f32> by add init 0: f32 along 1
  return %s: <_ x f32>
}}
"""


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    out = fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def targets() -> list[tuple[str, str, dict[str, Any]]]:
    found = [("interp", "interp", {}), ("llvm-cpu", "llvm-cpu", {})]
    reg = ir.registry()
    if reg.has("target", "nvptx"):
        found.append(("nvptx (host emulation)", "nvptx", {"device": "host"}))
        from dlvm.llvm_gpu.cuda import available

        if available()[0]:
            found.append(("nvptx (GPU)", "nvptx", {}))
    return found


def relative_error(got: np.ndarray, exact: np.ndarray) -> float:
    return float(np.max(np.abs(got.astype(np.float64) - exact) / np.abs(exact)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}, "
          f"numpy {np.__version__}")
    x = np.random.default_rng(0).random(N_SUM, dtype=np.float32)
    grid = x.reshape(-1, 256)
    wide = x.astype(np.float64)
    exact = {"total": np.array(math.fsum(wide.tolist())),
             "columns": np.array([math.fsum(c) for c in wide.reshape(-1, 256).T.tolist()]),
             "rows": np.array([math.fsum(r) for r in wide.reshape(-1, 256).tolist()])}
    cases = {"total": x, "columns": grid, "rows": grid}
    print("\n| target | 10^8 ones | ms | " + " | ".join(
        f"{k}: ms, GB/s, rel. error" for k in cases) + " |")
    print("|---|---|---|" + "---|" * len(cases))
    numpy_row = ["numpy float32 `sum`", "-", "-"]
    for name, arg in cases.items():
        axis = {"total": None, "columns": 0, "rows": 1}[name]
        seconds, out = best(lambda arg=arg, axis=axis: np.asarray(arg.sum(axis=axis)),
                            args.repeat)
        numpy_row.append(f"{seconds * 1e3:.1f}, {arg.nbytes / seconds / 1e9:.1f}, "
                         f"{relative_error(out, exact[name]):.1e}")
    print("| " + " | ".join(numpy_row) + " |")
    for label, target, options in targets():
        exe = ir.compile(ir.parse(TEXT), target, **options)
        half = np.array([0.5], np.float32)
        seconds, (ones,) = best(lambda exe=exe, half=half: exe.call("ones", half),
                                args.repeat)
        row = [label, f"{float(ones):.0f}", f"{seconds * 1e3:.1f}"]
        assert float(ones) == N_ONES, (label, float(ones))
        for name, arg in cases.items():
            seconds, (out,) = best(lambda exe=exe, name=name, arg=arg: exe.call(name, arg),
                                   args.repeat)
            row.append(f"{seconds * 1e3:.1f}, {arg.nbytes / seconds / 1e9:.1f}, "
                       f"{relative_error(out, exact[name]):.1e}")
        print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
