"""How TEL's code generation, the differentiation pass and compiling scale with the number of
parameter tensors of a model.

    python benchmarks/tel_parameters.py [--sizes 100,300,1000] [--json out.json] [--limit 300]
                                        [--llvm-cpu]

A TEL model reads its parameters from one tuple, `$<module>_params`, and its gradient
declaration differentiates with respect to that tuple; for each size N it generates two
models of N parameters:

- `layers`: N/2 layers `h = tanh(h . w + b)` of 4 × 4 weights and 4-element biases, then
  `loss l = mse(y, t)`: straight-line code, each parameter read once;
- `recurrent`: a recurrent block `h = tanh(xs[s] + h[s-1] . wh + b0 + … )` reading N − 1
  biases and a weight at every step: the gradient is a loop whose parameter adjoints cross
  its blocks.

and times, as `timed` in `scaling.py` (the fastest of `--repeat` runs, each after a garbage
collection): `tel compile` (parse, check, generate the IR), `tel generate` (the Python module
of `dlvm tel generate`), `differentiation` and `differentiation,O2` (the pipeline of the TEL
examples' `dlvm run`), and with `--llvm-cpu`, `llvm-cpu` (compiling for `llvm-cpu` without the
disk cache and the first call of `@train_step` on a batch of 8: LLVM's own optimization and
code generation, tens of seconds for a model of 100 parameters). With each it gives the instructions of the
differentiated `@loss_grad` and the growth exponent between sizes, log(t2/t1) / log(n2/n1):
about 1 for linear time, 2 for quadratic.
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from scaling import announce_machine, reporter, timed

import dlvm.ir as ir
import dlvm.tel as tel
from dlvm.tel.api import render_file
from dlvm.tel.testing import layers, recurrent

MODELS: dict[str, Callable[[int], str]] = {"layers": layers, "recurrent": recurrent}
BATCH = {"layers": [(8, 4), (8, 4)], "recurrent": [(8, 5, 4), (8, 4)]}
PHASES = ["tel compile", "tel generate", "differentiation", "differentiation,O2", "llvm-cpu"]
phases = PHASES[:-1]  # `llvm-cpu` with --llvm-cpu


def gradient_size(text: str) -> int:
    module = tel.compile(text, "m.tel")
    ir.run_passes(module, "differentiation")
    grad = module.function("loss_grad")
    assert grad is not None
    return sum(len(b.instructions) for b in grad.blocks)


def first_step(text: str, shape: str) -> Callable[[], Any]:
    """Compiling the model for llvm-cpu (no disk cache) and one `@train_step`."""
    module = tel.compile(text, "m.tel")
    params = ir.compile(module, target="interp", seed=0).call("init_params")
    rng = np.random.default_rng(0)
    x, t = (rng.standard_normal(s).astype(np.float32) for s in BATCH[shape])

    def run() -> Any:
        exe = ir.compile(tel.compile(text, "m.tel"), target="llvm-cpu", cache=False)
        return exe.call("train_step", *params, x, t, np.float32(0.01))
    return run


def measure(shape: str, n: int, limit: float, repeat: int,
            report: Callable[[dict[str, Any]], None]) -> None:
    text = MODELS[shape](n)
    source = Path(tempfile.mkdtemp()) / f"{shape}.tel"
    source.write_text(text, encoding="utf-8")
    row = {"shape": shape, "size": n, "gradient_instructions": gradient_size(text)}

    def differentiated(pipeline: str) -> Callable[[], Any]:
        return lambda: ir.run_passes(tel.compile(text, "m.tel"), pipeline)

    work: dict[str, Callable[[], Any]] = {
        "tel compile": lambda: tel.compile(text, "m.tel"),
        "tel generate": lambda: render_file(source),
        "differentiation": differentiated("differentiation"),
        "differentiation,O2": differentiated("differentiation,O2"),
    }
    if "llvm-cpu" in phases:
        work["llvm-cpu"] = first_step(text, shape)
    for phase in phases:
        took = timed(work[phase], limit, repeat)
        report({**row, "phase": phase, "seconds": took and took[0], "cpu": took and took[1]})


def exponent(a: dict[str, Any], b: dict[str, Any]) -> str:
    if a["seconds"] is None or b["seconds"] is None or a["seconds"] <= 0:
        return "–"
    return f"{math.log(b['seconds'] / a['seconds']) / math.log(b['size'] / a['size']):.2f}"


def table(rows: list[dict[str, Any]], sizes: list[int], limit: float) -> str:
    head = " | ".join(f"{n:,} params" for n in sizes)
    growth = " | ".join(f"exp {a:,}→{b:,}" for a, b in itertools.pairwise(sizes))
    lines = [f"| model | phase | {head} | {growth} |",
             "|---|---|" + "---|" * (2 * len(sizes) - 1)]
    for shape in MODELS:
        by_size = {r["size"]: r for r in rows if r["shape"] == shape}
        if not by_size:
            continue
        counts = " | ".join(f"{by_size[n]['gradient_instructions']:,}" if n in by_size else "–"
                            for n in sizes)
        lines.append(f"| {shape} | `@loss_grad` instructions | {counts} |"
                     + " |" * (len(sizes) - 1))
        for phase in phases:
            cells = {r["size"]: r for r in rows if r["shape"] == shape and r["phase"] == phase}
            times = " | ".join("–" if n not in cells else f">{limit:g}"
                               if cells[n]["seconds"] is None else f"{cells[n]['seconds']:.3f}"
                               for n in sizes)
            exps = " | ".join(exponent(cells[a], cells[b]) if a in cells and b in cells else "–"
                              for a, b in itertools.pairwise(sizes))
            lines.append(f"| {shape} | {phase} | {times} | {exps} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="100,300,1000",
                    help="comma-separated numbers of parameters")
    ap.add_argument("--json", help="write the machine and every measurement to this file")
    ap.add_argument("--limit", type=float, default=300,
                    help="abandon a measurement after this many seconds (0: never)")
    ap.add_argument("--repeat", type=int, default=3, help="keep the fastest of this many runs")
    ap.add_argument("--llvm-cpu", action="store_true",
                    help="also time compiling for llvm-cpu and a first training step")
    args = ap.parse_args()
    if args.llvm_cpu:
        phases.append("llvm-cpu")
    sizes = sorted(int(s) for s in args.sizes.split(","))
    info = announce_machine()
    rows: list[dict[str, Any]] = []
    report = reporter(rows, args.limit, 20)

    for shape in MODELS:  # load every pass and warm the caches before timing
        measure(shape, 10, 0, 1, lambda row: None)
    start = time.perf_counter()
    for n in sizes:
        for shape in MODELS:
            measure(shape, n, args.limit, args.repeat, report)
    print(table(rows, sizes, args.limit))
    print(f"total {time.perf_counter() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"date": datetime.date.today().isoformat(), "command": " ".join(sys.argv),
                       "machine": info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
