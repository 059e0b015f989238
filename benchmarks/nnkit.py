"""NNKit's costs on top of the compiled code: per-call overhead and first-call staging.

    python benchmarks/nnkit.py [--repeat N]

1. overhead — a staged function applied to arrays (`f(x, w, b)`: the build looked up by the
   arguments' types, then the call) against calling its compiled function directly
   (`exe["f"](x, w, b)`), median µs per call; target ≤ 5 µs.
2. first call — staging the NNKit digits MLP's training step (model library, Adam, the
   gradient declaration) and compiling it through DLVM on its first application, with an
   empty code cache; target ≤ 0.5 s. Split into staging (Python → IR) and `ir.compile`.
"""

from __future__ import annotations

import argparse
import os
import platform
import runpy
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from dlvm import nnkit as nn
from dlvm.nnkit import Float1D, Float2D

ROOT = Path(__file__).resolve().parents[1]


def overhead(staged: object, direct: object, args: tuple[object, ...], repeat: int
             ) -> tuple[float, float]:
    """Median seconds per call of each, measured in alternating rounds of 100 calls (the
    machine's drift hits both alike)."""
    rounds: dict[str, list[float]] = {"staged": [], "direct": []}
    for _ in range(10):
        staged(*args)  # type: ignore[operator]
        direct(*args)  # type: ignore[operator]
    for _ in range(repeat):
        for key, fn in (("staged", staged), ("direct", direct)):
            start = time.perf_counter()
            for _ in range(100):
                fn(*args)  # type: ignore[operator]
            rounds[key].append((time.perf_counter() - start) / 100)
    return statistics.median(rounds["staged"]), statistics.median(rounds["direct"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"{platform.platform()}")
    f = nn.lambda_(lambda x, w, b: x @ w + b.rank_lifted(), (Float2D, Float2D, Float1D),
                   name="f")
    rng = np.random.default_rng(0)
    data = (rng.random((1, 8), dtype=np.float32), rng.random((8, 4), dtype=np.float32),
            rng.random(4, dtype=np.float32))
    f(*data)
    (name, exe), = f.builds.values()
    direct = exe[name]
    staged_s, direct_s = overhead(f, direct, data, args.repeat)
    print(f"overhead per call: {1e6 * (staged_s - direct_s):.2f} µs (staged {1e6 * staged_s:.2f}"
          f" µs, compiled function {1e6 * direct_s:.2f} µs); target ≤ 5 µs")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["DLVM_CACHE_DIR"] = cache
        start = time.perf_counter()
        program = runpy.run_path(str(ROOT / "examples" / "nnkit-mlp" / "model.py"))["program"]
        values = program.init(np.random.default_rng(0))
        x = rng.random((32, 64), dtype=np.float32)
        y = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 32)]
        specs = tuple(nn.TensorSpec.of(a) for a in (
            *(values[n] for n in (*program.parameter_names, *program.state_names)), x, y,
            np.float32(0.01)))
        staged_at = time.perf_counter()
        program.step.staged_module(program.step.specs_for(specs, "train_step"))
        staging = time.perf_counter() - staged_at
        program.train_step(values, x, y, 0.01)
        total = time.perf_counter() - start
    print(f"first call of the MLP training step: {total:.3f} s (staging {staging:.3f} s, "
          f"the rest is differentiation, O3 and LLVM); target ≤ 0.5 s")


if __name__ == "__main__":
    main()
