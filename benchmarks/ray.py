"""Data-parallel training on Ray: `dlvm run` throughput, the object-store reduction, a cost model.

    python benchmarks/ray.py [--digits-epochs 30] [--wide-epochs 10] [--alpha-us 20]

1. training — examples/s of `dlvm run` (the `dlvm` command in a subprocess, target llvm-cpu)
   for two models: the digits MLP of examples/digits-mlp (64-32-10, batch 64) and a
   784-512-512-10 tanh MLP written in TEL, on 8,192 synthetic examples (batch 256); each with
   the local engine (as it comes: OpenBLAS and the llvm-cpu kernels each on every core; with
   one kernel thread; with one thread in all), and the ray engine at workers = 1 and 2
   (address "local"). Throughput is the metrics file's per-epoch `examples_per_second`,
   median over the epochs after the first (which holds compilation; Ray's start-up is outside
   every epoch); the ray engine's `worker_step_seconds` and `allreduce_seconds` split a step.
2. all-reduce — the engine's reduction through Ray's object store, alone: a Ray instance of
   2 CPUs, 1 or 2 trivial actors that return a copy of the P float32 values they are given
   (P = 10³ … 10⁷); one round is the engine's: `ray.put` of the parameters, the actors' calls
   and `ray.get` of their arrays, the average weighted by share on the driver. Median seconds
   per round less the actors' own time (the copy), and the effective rate P·4 bytes / time.
3. cost model — per step t(N) = t_compute/N + t_fixed + t_reduce(P, N), with a ring
   all-reduce t_reduce = 2(N−1)/N · P·4 / B + 2(N−1)·α; t_compute is the fastest local
   run's measured seconds per step, t_fixed the reduction's small-P end from 2. The predicted
   speed-up t_compute / t(N) at N = 8, 64, 256 on 10 and 100 Gbit/s, the N where it peaks and
   where communication first exceeds compute, for three reductions: the engine's own (a star:
   every worker's result into the driver's link), a ring with the object store's t_fixed, and
   a collective library's ring (t_fixed = 0); and what the next steps would buy.

The tables are printed as Markdown (benchmarks/results/ray.md records one run).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# This file is named ray.py: its own folder must not shadow the `ray` package.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import numpy as np  # noqa: E402

ROOT = HERE.parent
DIGITS = ROOT / "examples" / "digits-mlp"
SIZES = (10**3, 10**4, 10**5, 10**6, 10**7)
NETWORKS = ((10, 10e9 / 8), (100, 100e9 / 8))  # Gbit/s, bytes/s
SCALE_N = (8, 64, 256)

WIDE_TEL = """\
// A 784-512-512-10 tanh MLP for the Ray benchmark (synthetic data).
module wide
type float32

x: in[_ x 784]
target: in[_ x 10]
w1: param[784 x 512] = glorot
b1: param[512] = 0.0
w2: param[512 x 512] = glorot
b2: param[512] = 0.0
w3: param[512 x 10] = glorot
b3: param[10] = 0.0

h1: hidden[_ x 512] = tanh(x . w1 + b1)
h2: hidden[_ x 512] = tanh(h1 . w2 + b2)
y: out[_ x 10] = softmax(h2 . w3 + b3)

loss xent = cross_entropy(y, target)
"""


def pipeline(module: Path, data: Path, data_keys: str, train_keys: str, metrics: Path) -> str:
    return f"""\
[module]
path = "{module}"

[passes]
pipeline = "differentiation,O2"

[target]
name = "llvm-cpu"

[data]
path = "{data}"
{data_keys}
one_hot = 10
test_fraction = 0.2
split_seed = 0

[train]
step = "train_step"
{train_keys}
shuffle_seed = 0
metrics = "{metrics}"
"""


# ---------------------------------------------------------------- the machine


def machine() -> dict[str, str]:
    import llvmlite
    import llvmlite.binding as llvm
    import ray

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / 2**20:.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return {
        "cpu": cpu, "cores": str(os.cpu_count()), "memory": memory,
        "os": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(), "numpy": np.__version__,
        "llvmlite": llvmlite.__version__,
        "llvm": ".".join(map(str, llvm.llvm_version_info)), "ray": ray.__version__,
    }


def busy(seconds: float = 2.0) -> float | None:
    """The share of the machine's CPU time spent busy over `seconds` (from /proc/stat): what
    other processes take before the benchmark starts."""
    def sample() -> tuple[int, int]:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
        return sum(fields[:8]), fields[3] + fields[4]  # total, idle + iowait

    try:
        total0, idle0 = sample()
        time.sleep(seconds)
        total1, idle1 = sample()
    except (OSError, ValueError, IndexError):
        return None
    return 1 - (idle1 - idle0) / max(total1 - total0, 1)


# ---------------------------------------------------------------- 1. training with dlvm run


def make_workloads(tmp: Path, digits_epochs: int, wide_epochs: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8192, 784), dtype=np.float32)
    teacher = rng.standard_normal((784, 10), dtype=np.float32)
    labels = np.argmax(x @ teacher, axis=1)  # learnable: a linear teacher
    np.savez(tmp / "wide.npz", inputs=x, labels=labels)
    (tmp / "wide.tel").write_text(WIDE_TEL)
    return [
        {"name": "digits", "title": "digits MLP 64-32-10", "module": DIGITS / "mlp.dl",
         "data": DIGITS / "digits.npz", "batch": 64, "epochs": digits_epochs,
         "data_keys": 'inputs = "images"\nlabels = "labels"\nscale = 0.0625',
         "train_keys": 'init = "glorot"\ninit_seed = 0\nlearning_rate = 0.2'},
        {"name": "wide", "title": "784-512-512-10 tanh MLP (TEL)", "module": tmp / "wide.tel",
         "data": tmp / "wide.npz", "batch": 256, "epochs": wide_epochs,
         "data_keys": 'inputs = "inputs"\nlabels = "labels"',
         "train_keys": 'init_function = "init_params"\ninit_seed = 0\nlearning_rate = 0.05'},
    ]


VARIANTS = (
    # name, engine, workers, environment, extra --set overrides
    ("local", "local", 1, {}, []),
    ("local, kernel threads 1", "local", 1, {}, ["target.options.threads=1"]),
    ("local, 1 thread", "local", 1, {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
     ["target.options.threads=1"]),
    ("ray, 1 worker", "ray", 1, {}, []),
    ("ray, 2 workers", "ray", 2, {}, []),
)


def dlvm_run(toml: Path, sets: list[str], env: dict[str, str]) -> float:
    """`dlvm run TOML` in a fresh process; its wall seconds (Ray's start-up included)."""
    command = [sys.executable, "-c", "from dlvm.cli.main import main; main()", "run",
               str(toml), "--quiet", "--overwrite"]
    for s in sets:
        command += ["--set", s]
    began = time.perf_counter()
    done = subprocess.run(command, cwd=toml.parent, env={**os.environ, **env},
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"dlvm run {toml.name} {' '.join(sets)} failed ({done.returncode}):\n"
                 f"{done.stdout}{done.stderr}")
    return time.perf_counter() - began


def train(tmp: Path, w: dict[str, Any]) -> dict[str, dict[str, Any]]:
    metrics = tmp / f"{w['name']}.jsonl"
    toml = tmp / f"{w['name']}.toml"
    toml.write_text(pipeline(w["module"], w["data"], w["data_keys"],
                             f"{w['train_keys']}\nbatch_size = {w['batch']}\n"
                             f"epochs = {w['epochs']}", metrics))
    out: dict[str, dict[str, Any]] = {}
    for name, engine, workers, env, extra in VARIANTS:
        sets = [f"train.distributed.engine={engine}", f"train.distributed.workers={workers}",
                *extra]
        wall = dlvm_run(toml, sets, env)
        records = [json.loads(line) for line in metrics.read_text().splitlines()]
        later = records[1:]
        size = round(later[0]["examples_per_second"] * later[0]["seconds"])
        steps = -(-size // w["batch"])
        r: dict[str, Any] = {
            "wall": wall, "size": size, "steps": steps, "epochs": len(records),
            "eps": statistics.median(x["examples_per_second"] for x in later),
            "step": statistics.median(x["seconds"] for x in later) / steps,
            "loss": records[-1]["loss"],
        }
        if engine == "ray":
            r["compute"] = statistics.median(max(x["worker_step_seconds"]) for x in later)
            r["allreduce"] = statistics.median(x["allreduce_seconds"] for x in later)
        out[name] = r
        print(f"  {w['name']:6s} {name:16s} {r['eps']:>10,.0f} examples/s  "
              f"{1e3 * r['step']:7.3f} ms/step  (run {wall:.1f} s)", flush=True)
    return out


# ---------------------------------------------------------------- 2. the all-reduce alone


class Echo:
    """A trivial worker: the parameters it is given, copied (the 'new parameters')."""

    def step(self, values: tuple[np.ndarray, ...]) -> tuple[tuple[np.ndarray, ...], float]:
        began = time.perf_counter()
        out = tuple(v.copy() for v in values)
        return out, time.perf_counter() - began

    def threads(self) -> dict[str, Any]:
        # imported in the Ray worker that runs this actor, not where the benchmark starts
        from dlvm.llvm.runtime import blas
        from dlvm.llvm.target import default_threads

        b = blas.find()
        return {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
                "openblas": b.get_threads() if b and b.get_threads else None,
                "kernel_threads": default_threads()}


def reduction(actors: list[Any], params: np.ndarray, repeat: int) -> dict[str, float]:
    """Median seconds of one round as the engine runs it, split into its parts: `put`,
    `get` (the calls and the results, less the slowest actor's own time), `average` (on the
    driver), `compute` (the slowest actor's copy) and `reduce` (the round less compute)."""
    import ray

    shares = [1.0 / len(actors)] * len(actors)
    parts: dict[str, list[float]] = {k: [] for k in ("put", "get", "average", "compute",
                                                     "reduce")}
    for i in range(repeat + 2):
        t0 = time.perf_counter()
        values = ray.put((params,))
        t1 = time.perf_counter()
        outs = ray.get([a.step.remote(values) for a in actors])
        t2 = time.perf_counter()
        merged = [np.asarray(sum(w * o[k] for w, (o, _) in zip(shares, outs, strict=True)),
                             dtype=np.float32) for k in range(len(outs[0][0]))]
        t3 = time.perf_counter()
        compute = max(s for _, s in outs)
        del values, outs, merged
        if i < 2:
            continue  # warm-up
        parts["put"].append(t1 - t0)
        parts["get"].append(t2 - t1 - compute)
        parts["average"].append(t3 - t2)
        parts["compute"].append(compute)
        parts["reduce"].append(t3 - t0 - compute)
    return {k: statistics.median(v) for k, v in parts.items()}


def allreduce() -> tuple[dict[tuple[int, int], dict[str, float]], dict[str, Any]]:
    import logging

    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             logging_level=logging.ERROR)
    try:
        actor = ray.remote(num_cpus=1)(Echo)
        actors = [actor.remote() for _ in range(2)]
        threads = ray.get(actors[0].threads.remote())
        rng = np.random.default_rng(0)
        out = {}
        for p in SIZES:
            params = rng.standard_normal(p, dtype=np.float32)
            repeat = 50 if p <= 10**5 else 20 if p <= 10**6 else 7
            for n in (1, 2):
                out[n, p] = r = reduction(actors[:n], params, repeat)
                print(f"  N={n} P={p:>10,}  reduce {1e3 * r['reduce']:8.3f} ms  "
                      f"(put {1e3 * r['put']:.3f}, get {1e3 * r['get']:.3f}, average "
                      f"{1e3 * r['average']:.3f}; actors' copy {1e3 * r['compute']:.3f})",
                      flush=True)
    finally:
        ray.shutdown()
    return out, threads


# ---------------------------------------------------------------- 3. the cost model


def ring(p_bytes: float, n: int, bandwidth: float, alpha: float) -> float:
    """Seconds of a ring all-reduce of p_bytes over n workers."""
    return 2 * (n - 1) / n * p_bytes / bandwidth + 2 * (n - 1) * alpha


def star(p_bytes: float, n: int, bandwidth: float, alpha: float) -> float:
    """Seconds of the engine's reduction across machines, at best: every worker's result
    comes back into the driver's link (n·p_bytes) and the parameters go out at least once."""
    return (n + 1) * p_bytes / bandwidth + 2 * alpha


def comm(p_bytes: float, n: int, bandwidth: float, alpha: float, fixed: float,
         topology: str) -> float:
    """t_fixed + t_reduce of one step (none for one worker)."""
    if n == 1:
        return 0.0
    return fixed + (star if topology == "star" else ring)(p_bytes, n, bandwidth, alpha)


def step_time(c: float, fixed: float, p_bytes: float, n: int, bandwidth: float, alpha: float,
              overlap: float = 0.0, topology: str = "ring") -> float:
    """t(N) = t_compute/N + t_fixed + t_reduce; with `overlap`, that share of the compute
    (the backward pass) runs under the all-reduce."""
    hidden = overlap * c / n
    return c / n - hidden + max(hidden, comm(p_bytes, n, bandwidth, alpha, fixed, topology))


def peak(c: float, fixed: float, p_bytes: float, bandwidth: float, alpha: float, batch: int,
         overlap: float = 0.0, topology: str = "ring") -> tuple[int, float, int | None]:
    """The N ≤ batch (≤ 4096) of the highest speed-up, that speed-up, and the first N where
    communication takes longer than the share of compute."""
    best, best_s, cross = 1, 1.0, None
    for n in range(2, min(batch, 4096) + 1):
        s = c / step_time(c, fixed, p_bytes, n, bandwidth, alpha, overlap, topology)
        if s > best_s:
            best, best_s = n, s
        if cross is None and comm(p_bytes, n, bandwidth, alpha, fixed, topology) > c / n:
            cross = n
    return best, best_s, cross


# ---------------------------------------------------------------- output


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def ms(s: float) -> str:
    return f"{1e3 * s:.3f} ms" if s < 1 else f"{s:.2f} s"


def main() -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--digits-epochs", type=int, default=30)
    parser.add_argument("--wide-epochs", type=int, default=10)
    parser.add_argument("--alpha-us", type=float, default=20.0,
                        help="per-hop latency of the modelled network, µs")
    args = parser.parse_args()
    alpha = args.alpha_us * 1e-6
    began = time.perf_counter()
    m = machine()
    load = os.getloadavg()
    before = busy()
    print(f"machine: {m['cpu']}, {m['cores']} cores, {m['memory']}, {m['os']}, Python "
          f"{m['python']}, numpy {m['numpy']}, llvmlite {m['llvmlite']} (LLVM {m['llvm']}), "
          f"ray {m['ray']}", flush=True)
    if before is not None:
        print(f"CPU busy before the run (other processes): {100 * before:.0f} %"
              + ("  -- timings will be disturbed; run on a quiet machine" if before > 0.1
                 else ""), flush=True)

    print("\n1. training with dlvm run", flush=True)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    params: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="dlvm-ray-bench-") as folder:
        tmp = Path(folder)
        workloads = make_workloads(tmp, args.digits_epochs, args.wide_epochs)
        for w in workloads:
            results[w["name"]] = train(tmp, w)
        params["digits"] = 64 * 32 + 32 + 32 * 10 + 10
        params["wide"] = 784 * 512 + 512 + 512 * 512 + 512 + 512 * 10 + 10
        # the all-reduce runs with the temp folder as the current one (Ray hands it on)
        cwd = os.getcwd()
        os.chdir(tmp)
        try:
            print("\n2. all-reduce through the object store", flush=True)
            reduce, threads = allreduce()
        finally:
            os.chdir(cwd)

    print("\n### 1. Training throughput (median over epochs 2…, examples/s)\n")
    rows = []
    for w in workloads:
        r = results[w["name"]]
        base = r["local"]["eps"]
        for name, *_ in VARIANTS:
            v = r[name]
            split = (f"{ms(v['compute'])} + {ms(v['allreduce'])} + "
                     f"{ms(max(v['step'] - v['compute'] - v['allreduce'], 0.0))}"
                     if "compute" in v else "—")
            rows.append([w["title"], str(w["batch"]), f"{params[w['name']]:,}", name,
                         f"{v['eps']:,.0f}", ms(v["step"]), split, f"{v['eps'] / base:.2f}×",
                         f"{v['epochs']} × {v['steps']} steps", f"{v['wall']:.1f} s"])
    print(table(["model", "batch", "parameters", "engine", "examples/s", "s/step",
                 "compute + allreduce + driver", "vs local", "epochs", "run (with start-up)"],
                rows))
    print(f"\nInside a Ray worker: OMP_NUM_THREADS={threads['OMP_NUM_THREADS']}, OpenBLAS "
          f"threads {threads['openblas']}, llvm-cpu kernel threads {threads['kernel_threads']}.")

    print("\n### 2. One round of the object-store reduction (median; less the actors' copy)\n")
    rows = []
    for p in SIZES:
        row = [f"{p:,}", f"{4 * p / 1e6:g} MB"]
        for n in (1, 2):
            r = reduce[n, p]
            row += [ms(r["reduce"]), f"{4 * p / r['reduce'] / 1e9:.3g}"]
        r = reduce[2, p]
        row += [f"{ms(r['put'])} / {ms(r['get'])} / {ms(r['average'])}"]
        rows.append(row)
    print(table(["P (float32)", "bytes", "N=1 seconds", "N=1 GB/s", "N=2 seconds", "N=2 GB/s",
                 "N=2: put / calls+get / average"], rows))
    fixed = {n: reduce[n, SIZES[0]]["reduce"] for n in (1, 2)}
    slope = {}
    for n in (1, 2):
        x = np.array([4.0 * p for p in SIZES])
        y = np.array([reduce[n, p]["reduce"] for p in SIZES])
        slope[n] = float(np.polyfit(x, y, 1)[0])
    print(f"\nFit t = t_fixed + bytes/B_local: N=1 t_fixed {ms(fixed[1])}, B_local "
          f"{1 / slope[1] / 1e9:.2f} GB/s; N=2 t_fixed {ms(fixed[2])}, B_local "
          f"{1 / slope[2] / 1e9:.2f} GB/s.")

    print("\n### 3. Cost model\n")
    compute = {w["name"]: min(results[w["name"]][v]["step"] for v, e, *_ in VARIANTS
                   if e == "local")
               for w in workloads}
    rows = []
    for w in workloads:
        name = w["name"]
        r, pb = results[name], 4 * params[name]
        for n, label in ((1, "ray, 1 worker"), (2, "ray, 2 workers")):
            v = r[label]
            predicted = fixed[n] + pb * slope[n]
            rows.append([w["title"], label, ms(v["step"]), ms(v["compute"]),
                         ms(v["step"] - v["compute"]), ms(predicted),
                         f"{(v['step'] - v['compute']) / predicted:.2f}"])
    print("Check on this machine: a ray step's time beyond its slowest worker's compute, "
          "against t_fixed + bytes/B_local from 2:\n")
    print(table(["model", "run", "s/step", "worker compute", "the rest", "t_fixed + bytes/B",
                 "rest / model"], rows))
    print("\nt_compute, the one-worker step (the faster local run): "
          + ", ".join(f"{w['title']} {ms(compute[w['name']])}" for w in workloads) + ".")
    print(f"\nPrediction on a network (α = {args.alpha_us:g} µs per hop; t_fixed = "
          f"{ms(fixed[2])}, the object store's small-P end at N = 2); speed-up = t_compute / "
          "t(N) at the same global batch. Reductions: *star* — the engine as it is, every "
          "worker's result into the driver's link, (N+1)·P·4/B + 2α, plus t_fixed; *ring* — "
          "the model above, plus t_fixed; *collective* — a ring with t_fixed = 0 (a collective "
          "library's all-reduce, α only):\n")
    cases = [(w["title"], w["name"], w["batch"], compute[w["name"]]) for w in workloads]
    big = 8192
    cases.append((f"784-512-512-10, batch {big} (compute scaled ×{big // 256})", "wide", big,
                  compute["wide"] * big / 256))
    scenarios = (("star", fixed[2], "star"), ("ring", fixed[2], "ring"),
                 ("collective", 0.0, "ring"))
    rows = []
    for title, name, b, c in cases:
        pb = 4 * params[name]
        for gbit, bw in NETWORKS:
            for how, t_fixed, topology in scenarios:
                cells = []
                for n in SCALE_N:
                    cells.append(f"{c / step_time(c, t_fixed, pb, n, bw, alpha, 0.0, topology):.2f}"
                                 if n <= b else "— (N > batch)")
                best, best_s, cross = peak(c, t_fixed, pb, bw, alpha, b, 0.0, topology)
                rows.append([title, ms(c), f"{gbit} Gbit/s", how, *cells,
                             f"{best_s:.2f} at N = {best}" if best > 1 else "none (1.00)",
                             str(cross) if cross else f"> {min(b, 4096)}"])
    print(table(["model", "t_compute", "network", "reduction", *[f"N = {n}" for n in SCALE_N],
                 "peak speed-up", "comm > compute from N"], rows))

    print("\nWhat would come next, 784-512-512-10 at 10 Gbit/s (speed-up at N = 8 / 64, "
          "peak):\n")
    c, pb, bw = compute["wide"], 4 * params["wide"], NETWORKS[0][1]
    steps = [
        ("as now: object store, star through the driver, batch 256", fixed[2], pb, c, 256, 0.0,
         "star"),
        ("a ring all-reduce, the object store's t_fixed", fixed[2], pb, c, 256, 0.0, "ring"),
        ("a collective library (ring, t_fixed → 0)", 0.0, pb, c, 256, 0.0, "ring"),
        ("+ fp16 gradients (half the bytes)", 0.0, pb / 2, c, 256, 0.0, "ring"),
        ("+ int8 gradients (a quarter)", 0.0, pb / 4, c, 256, 0.0, "ring"),
        ("+ all-reduce overlapped with the backward pass (⅔ of compute)", 0.0, pb / 4, c, 256,
         2 / 3, "ring"),
        (f"+ global batch {big}", 0.0, pb / 4, c * big / 256, big, 2 / 3, "ring"),
    ]
    rows = []
    for label, t_fixed, nbytes, cc, b, ov, topology in steps:
        s8, s64 = (cc / step_time(cc, t_fixed, nbytes, n, bw, alpha, ov, topology)
                   for n in (8, 64))
        best, best_s, _ = peak(cc, t_fixed, nbytes, bw, alpha, b, ov, topology)
        rows.append([label, f"{s8:.2f}", f"{s64:.2f}",
                     f"{best_s:.2f} at N = {best}" if best > 1 else "none (1.00)"])
    print(table(["step", "N = 8", "N = 64", "peak"], rows))
    print(f"\ntotal {time.perf_counter() - began:.0f} s; load average (1 min) "
          f"{load[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
