"""Imported ONNX models on llvm-cpu against ONNX Runtime and PyTorch eager: inference latency.

    python benchmarks/onnx.py [--repeat N] [--batches 1,64] [--only mlp,cnn,encoder,bert,resnet18]
                              [--output benchmarks/results/onnx.md]

The models of packages/dlvm-onnx/tests/fixtures: three written by make_models.py there — an
MLP 64-32-10, a CNN on [batch x 1 x 8 x 8] (convolution, batch norm, max pool, a grouped
convolution, global average pool, linear) and one pre-LayerNorm transformer encoder block on
[batch x 8 x 32] (two-head attention, GELU feed-forward), at batch 1 and 64 — and two real
architectures written by make_architectures.py — a BERT classifier from `transformers` (2
layers, hidden 32, token ids [batch x 16], the attention mask made from them) and a
ResNet-18 (widths 8 to 64) on [batch x 3 x 32 x 32] images, at batch 1 and 32; float32, in one
process. Each time is a median over samples after warm-up (a sample: enough back-to-back
calls to last ≥ 0.2 ms, divided by their number), of the quietest of seven rounds in which
the frameworks take turns (see `median_times`); every output is checked against ONNX
Runtime's before it counts.

- dlvm:         `dlvm.onnx.load(path)` compiled once for llvm-cpu (default options: O3, every
                core), `main = exe["main"]` looked up once, then `main(x)`: the weights are
                @init_params' dense literals passed to @forward (a lookup `exe["main"]` per
                call would add ~6 µs: see the results' notes);
- dlvm frozen:  `load(path, freeze=True)`: @main alone, the weights constants of the code;
- ort 1 thread: ONNX Runtime's CPU provider, `intra_op_num_threads=1`,
                `inter_op_num_threads=1`, all graph optimizations;
- ort default:  the same with ONNX Runtime's default threads (one per core);
- torch eager:  the same models rebuilt by the fixtures' scripts, `torch.inference_mode()`, torch's
                default threads (skipped when torch is not installed).

The ratios are DLVM's time over ONNX Runtime's (the target: ≤ 1.0× on each). The results
file keeps what follows its "## What limits it" heading from one run to the next.
"""

from __future__ import annotations

import sys
from pathlib import Path

# `python benchmarks/onnx.py` puts benchmarks/ first on the path, where this file would
# shadow the onnx package that dlvm.onnx imports.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import argparse  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import textwrap  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import dlvm.ir as ir  # noqa: E402
import dlvm.onnx  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "packages" / "dlvm-onnx" / "tests" / "fixtures"
RESULTS = ROOT / "benchmarks" / "results" / "onnx.md"


@dataclass(frozen=True)
class Model:
    """A fixture: its input and output names, how an input of a batch is drawn, the batches
    it is timed at, and the script in fixtures/ that rebuilds it in torch."""

    input: str
    output: str
    sample: Callable[[int, np.random.Generator], np.ndarray]
    batches: tuple[int, ...]
    builder: str = "make_models"
    dims: tuple[tuple[str, int], ...] = ()  # sizes given to named dynamic dimensions


def normal(*shape: int) -> Callable[[int, np.random.Generator], np.ndarray]:
    return lambda batch, rng: rng.standard_normal((batch, *shape)).astype(np.float32)


MODELS = {
    "mlp": Model("x", "y", normal(64), (1, 64)),
    "cnn": Model("x", "y", normal(1, 8, 8), (1, 64)),
    "encoder": Model("x", "y", normal(8, 32), (1, 64)),
    "bert": Model("ids", "logits", lambda batch, rng: rng.integers(1, 64, (batch, 16)),
                  (1, 32), "make_architectures", (("seq", 16),)),
    "resnet18": Model("x", "logits", normal(3, 32, 32), (1, 32), "make_architectures"),
}
DESCRIPTIONS = {"mlp": "MLP 64-32-10", "cnn": "CNN 8×8 (conv-BN-pool-grouped conv)",
                "encoder": "encoder block 8×32 (2 heads)",
                "bert": "BERT classifier, 2 layers, hidden 32, sequence 16",
                "resnet18": "ResNet-18 (widths 8–64) 3×32×32"}
TARGET = 1.0
NOTES_HEADING = "## What limits it"


# ---------------------------------------------------------------- timing


def calls_per_sample(fn: Callable[[], Any], sample_s: float) -> int:
    n = 1
    while True:
        start = time.perf_counter()
        for _ in range(n):
            fn()
        if time.perf_counter() - start >= sample_s:
            return n
        n *= 2


def median_times(fns: dict[str, Callable[[], Any]], repeat: int, rounds: int = 7,
                 sample_s: float = 2e-4) -> dict[str, float]:
    """The time of one call of each: in each of `rounds` rounds, each function runs a block
    of samples (a sample: enough calls to last `sample_s`; `repeat` samples in all) after
    warm-up calls; the result is the median of its quietest round. Blocks, not single
    samples, alternate: a runtime's threads spin for a while after its call, and on few
    cores they would be timed with the next one's call. The quietest round's median, not
    the median of all samples: on a shared machine a round that meets other load runs
    several times slower, for every framework alike."""
    counts = {k: calls_per_sample(fn, sample_s) for k, fn in fns.items()}
    medians: dict[str, list[float]] = {k: [] for k in fns}
    per_round = max(1, repeat // rounds)
    for _ in range(rounds):
        for k, fn in fns.items():
            n = counts[k]
            for _ in range(5):  # warm-up, and the previous runtime's threads go idle
                fn()
            times = []
            for _ in range(per_round):
                start = time.perf_counter()
                for _ in range(n):
                    fn()
                times.append((time.perf_counter() - start) / n)
            medians[k].append(statistics.median(times))
    return {k: min(v) for k, v in medians.items()}


def check(name: str, got: Any, want: Any) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4,
                               err_msg=name)


# ---------------------------------------------------------------- the machine


def describe_machine() -> dict[str, Any]:
    cpu, memory = "unknown", ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        cpu = next((line.split(":", 1)[1].strip() for line in f
                    if line.startswith("model name")), cpu)
    with contextlib.suppress(OSError, StopIteration), open("/proc/meminfo",
                                                            encoding="utf-8") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal"))
        memory = f"{kb / 2**20:.0f} GiB"
    import llvmlite
    import llvmlite.binding as llvm

    versions = {"Python": platform.python_version(), "numpy": np.__version__,
                "llvmlite": f"{llvmlite.__version__} / LLVM "
                            f"{'.'.join(map(str, llvm.llvm_version_info))}"}
    for name in ("onnx", "onnxruntime", "torch"):
        with contextlib.suppress(ImportError):
            versions[name] = __import__(name).__version__
    return {"cpu": cpu, "host_cpu": llvm.get_host_cpu_name(), "cores": os.cpu_count(),
            "memory": memory, "system": f"{platform.system()} {platform.release()} "
                                        f"{platform.machine()}", "versions": versions}


# ---------------------------------------------------------------- peers


def ort_sessions(path: Path) -> dict[str, Any]:
    try:
        import onnxruntime as ort
    except ImportError:
        return {}
    out = {}
    for label, threads in (("ort 1 thread", 1), ("ort default", 0)):
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        out[label] = ort.InferenceSession(str(path), options,
                                          providers=["CPUExecutionProvider"])
    return out


def torch_models() -> tuple[Any, Callable[[str], Any] | None]:
    """torch and a function rebuilding a fixture's model (None where it cannot: torch, or
    transformers for BERT, not installed)."""
    try:
        import torch
    except ImportError:
        return None, None
    sys.path.insert(0, str(FIXTURES))
    try:
        import make_architectures
        from make_models import build
    finally:
        sys.path.remove(str(FIXTURES))

    def rebuild(name: str) -> Any:
        if MODELS[name].builder == "make_models":
            return build(name)
        torch.manual_seed(0)  # as make_architectures.main builds them, in order
        try:
            models = {"bert": make_architectures.BertIds().eval(),
                      "resnet18": make_architectures.with_running_statistics(
                          make_architectures.ResNet18())}
        except ImportError:
            return None
        return models.get(name)

    return torch, rebuild


# ---------------------------------------------------------------- one model


def bench_model(name: str, batches: list[int], args: argparse.Namespace,
                torch: Any, build: Callable[[str], Any] | None) -> list[dict[str, Any]]:
    path = FIXTURES / f"{name}.onnx"
    dims = dict(MODELS[name].dims)
    exe = ir.compile(dlvm.onnx.load(path, dims=dims), "llvm-cpu")
    frozen = ir.compile(dlvm.onnx.load(path, freeze=True, dims=dims), "llvm-cpu")
    main, main_frozen = exe["main"], frozen["main"]  # looked up once: see the results' notes
    sessions = ort_sessions(path)
    model = build(name) if build is not None else None
    rng = np.random.default_rng(0)
    rows = []
    spec = MODELS[name]
    for batch in batches or spec.batches:
        x = spec.sample(batch, rng)
        runs: dict[str, Callable[[], Any]] = {
            "dlvm": lambda x=x: main(x), "dlvm frozen": lambda x=x: main_frozen(x)}
        for label, s in sessions.items():
            runs[label] = lambda s=s, x=x: s.run([spec.output], {spec.input: x})[0]
        if model is not None:
            tx = torch.from_numpy(x)

            def eager(tx: Any = tx) -> Any:
                with torch.inference_mode():
                    return model(tx)

            runs["torch eager"] = eager
        want = runs["ort default"]() if sessions else runs["dlvm frozen"]()
        for label, fn in runs.items():
            out = fn()
            check(f"{label} {name} batch {batch}", out.numpy() if hasattr(out, "numpy")
                  else out, want)
        times = median_times(runs, args.repeat)
        rows.append({"model": name, "batch": batch, "times": times})
        print(f"{name} batch {batch}: " + ", ".join(f"{k} {1e6 * v:.1f} µs"
                                                    for k, v in times.items()), flush=True)
    return rows


# ---------------------------------------------------------------- the report


COLUMNS = ("dlvm", "dlvm frozen", "ort 1 thread", "ort default", "torch eager")


def ratio(row: dict[str, Any], of: str, to: str) -> str:
    t = row["times"]
    if of not in t or to not in t:
        return "—"
    r = t[of] / t[to]
    return f"**{r:.2f}×**{' ✓' if r <= TARGET else ''}"


def table(rows: list[dict[str, Any]]) -> list[str]:
    lines = ["| model | batch | " + " | ".join(COLUMNS) + " | dlvm / ort 1 thread | "
             "dlvm / ort default | frozen / ort 1 thread | frozen / ort default |",
             "|---|---|" + "---|" * (len(COLUMNS) + 4)]
    for r in rows:
        cells = [f"{1e6 * r['times'][c]:.1f} µs" if c in r["times"] else "—" for c in COLUMNS]
        lines.append(f"| {DESCRIPTIONS[r['model']]} | {r['batch']} | " + " | ".join(cells)
                     + " | " + " | ".join(ratio(r, a, b) for a in ("dlvm", "dlvm frozen")
                                          for b in ("ort 1 thread", "ort default")) + " |")
    return lines


def wrap(text: str) -> str:
    return textwrap.fill(text, 95, break_long_words=False, break_on_hyphens=False)


def report(rows: list[dict[str, Any]], machine: dict[str, Any], args: argparse.Namespace,
           torch_threads: int | None) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in machine["versions"].items())
    threads = f"torch on {torch_threads} threads" if torch_threads else "torch not installed"
    command = (f"Command: `python benchmarks/onnx.py --repeat {args.repeat}` (inference "
               "latency, float32; each time the median of a block of samples after warm-up, "
               "the quietest of seven rounds in which the frameworks take turns; outputs "
               "checked against ONNX Runtime first; the models are "
               "packages/dlvm-onnx/tests/fixtures/*.onnx).")
    where = (f"Machine, {time.strftime('%Y-%m-%d')}: {machine['cpu']} ({machine['host_cpu']}), "
             f"{machine['cores']} cores, {machine['memory']}, {machine['system']}; "
             f"{versions}. DLVM on all {machine['cores']} cores (llvm-cpu's default), ONNX "
             f"Runtime on 1 thread and on its default ({machine['cores']} threads), "
             f"{threads}.")
    lines = ["# ONNX models: llvm-cpu against ONNX Runtime and PyTorch eager", "",
             wrap(command), "", wrap(where), "", *table(rows), "",
             f"Target: DLVM ≤ {TARGET:.1f}× ONNX Runtime on each (✓ where met).", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=70)
    parser.add_argument("--batches", default="",
                        help="batches for every model (default: each model's own)")
    parser.add_argument("--only", default="")
    parser.add_argument("--output", default=str(RESULTS), help="'' to write no file")
    args = parser.parse_args()
    machine = describe_machine()
    torch, build = torch_models()
    if torch is None:
        print("torch is not installed: no torch eager column")
    batches = [int(b) for b in args.batches.split(",") if b]
    rows = []
    for name in MODELS:
        if not args.only or name in args.only.split(","):
            rows += bench_model(name, batches, args, torch, build)
    text = report(rows, machine, args, torch.get_num_threads() if torch else None)
    print()
    print(text)
    if args.output:
        out = Path(args.output)
        old = out.read_text(encoding="utf-8") if out.exists() else ""
        notes = old[old.index(NOTES_HEADING):] if NOTES_HEADING in old else ""
        out.write_text(text + ("\n" + notes if notes else ""), encoding="utf-8")


if __name__ == "__main__":
    main()
