"""Training throughput of the character transformer (examples/char-transformer): DLVM's
training step against PyTorch eager and `torch.compile` of the same model, in one run.

    python benchmarks/transformer.py [--steps N] [--batch B] [--precision f32,bf16]
                                     [--device cpu|cuda] [--compile]

The model: token and position embeddings, 2 pre-norm blocks (4 heads, GELU MLP of 512),
d_model 128, context 64, vocabulary 32; AdamW. Each framework takes the same batches of
random windows; the figure is training characters (batch × context) per second over
`--steps` steps after three warm-up steps (DLVM's build and PyTorch's compilation are not
timed). Targets: on the CPU, f32 ≤ 1.0× `torch.compile`'s time per step (the same or more
characters per second); on a GPU, bf16 ≥ 1.25× PyTorch eager's bf16 throughput. Results go
to benchmarks/results/transformer.md with the machine's name (`--device cuda`: to
transformer-gpu.md).

With `--device cuda` DLVM runs on `nvptx`, its parameters and AdamW state kept on the GPU
from step to step (`call_device`), and PyTorch on CUDA (bf16 by autocast, as on the CPU);
both take batches already on the GPU, and each step ends in a synchronization. PyTorch's
`torch.compile` is measured on the GPU only with `--compile` (its Triton build takes
minutes).
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import runpy
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "char-transformer"
RESULTS = ROOT / "benchmarks" / "results" / "transformer.md"


def dlvm_step(precision: str, batch: int) -> tuple[Any, int]:
    """The example's NNKit program (its step staged and compiled on first use); with bf16,
    the mixed-precision pass before differentiation, as `train.precision` runs it."""
    import dlvm.ir as ir
    from dlvm.nnkit import staging

    namespace = runpy.run_path(str(EXAMPLE / "model.py"))
    program = namespace["program"]
    values = program.init(np.random.default_rng(0))
    if precision == "bf16":  # NNKit compiles with ir.compile: the pass goes first
        plain = ir.compile

        def lower_then_compile(module: ir.Module, *args: Any, **kwargs: Any) -> Any:
            ir.run_passes(module, "mixed-precision{dtype=bf16}")
            return plain(module, *args, **kwargs)

        staging.ir.compile = lower_then_compile  # type: ignore[attr-defined]

    def step(x: np.ndarray, y: np.ndarray) -> float:
        return float(program.train_step(values, x, y, 3e-3))

    return step, namespace["CONTEXT"]


def dlvm_gpu_step(precision: str, device_kind: str = "cuda") -> Any:
    """The example's module on `nvptx`: the step's outputs (new parameters and state) are
    the next step's inputs, on the device."""
    import dlvm.ir as ir

    module = ir.load_module(str(EXAMPLE / "model.py"), "nnkit")
    if precision == "bf16":
        ir.run_passes(module, "mixed-precision{dtype=bf16}")
    exe = ir.compile(module, "nvptx", device=device_kind)
    device = exe.device
    values = [device.upload(v) for v in exe.call("init_params")]
    lr = np.float32(3e-3)
    uploaded: dict[int, tuple[Any, Any]] = {}

    def step(x: np.ndarray, y: np.ndarray) -> float:
        nonlocal values
        key = id(x)
        if key not in uploaded:
            uploaded[key] = (device.upload(x), device.upload(y))
        dx, dy = uploaded[key]
        *values, loss = exe.call_device("train_step", *values, dx, dy, lr)
        return float(loss.numpy())  # the synchronization

    return step


def torch_step(compiled: bool, precision: str, batch: int, device: str = "cpu") -> Any:
    import torch

    torch.manual_seed(0)
    vocab, context, dim, heads, layers = 32, 64, 128, 4, 2

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
            self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
            self.fc1, self.fc2 = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

        def forward(self, x: Any) -> Any:
            q, k, v = self.qkv(self.ln1(x)).split(dim, -1)
            shape = (x.shape[0], context, heads, dim // heads)
            q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
            a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(x.shape))
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))

    class Model(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, dim)
            self.pos = torch.nn.Parameter(0.02 * torch.randn(context, dim))
            self.blocks = torch.nn.ModuleList(Block() for _ in range(layers))
            self.ln, self.head = torch.nn.LayerNorm(dim), torch.nn.Linear(dim, vocab)

        def forward(self, ids: Any) -> Any:
            x = self.embed(ids) + self.pos
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    model = Model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.1)
    forward = torch.compile(model) if compiled else model
    moved: dict[int, tuple[Any, Any]] = {}

    def step(x: np.ndarray, y: np.ndarray) -> float:
        if id(x) not in moved:
            moved[id(x)] = (torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))
        ids, targets = moved[id(x)]
        with torch.autocast(device, torch.bfloat16, enabled=precision == "bf16"):
            logits = forward(ids)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab).float(),
                                                     targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss)

    return step


def timed(step: Any, batches: list[tuple[np.ndarray, np.ndarray]], warmup: int = 3) -> float:
    """Seconds per step after `warmup` steps."""
    for x, y in batches[:warmup]:
        step(x, y)
    start = time.perf_counter()
    for x, y in batches[warmup:]:
        step(x, y)
    return (time.perf_counter() - start) / (len(batches) - warmup)


def machine(gpu: bool = False) -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    host = f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"
    if gpu:
        import torch

        return f"{torch.cuda.get_device_name(0)} (host: {host})"
    return host


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--precision", default="f32")
    parser.add_argument("--device", choices=("cpu", "cuda", "host"), default="cpu",
                        help="host: the GPU path on nvptx's CPU emulation (a check of the "
                             "script, not a measurement)")
    parser.add_argument("--compile", action="store_true",
                        help="also torch.compile on the GPU (always measured on the CPU)")
    parser.add_argument("--output", default=None,
                        help="the results file ('' to write none; default by --device)")
    args = parser.parse_args()
    gpu = args.device != "cpu"
    torch_device = "cuda" if args.device == "cuda" else "cpu"
    if args.output is None:
        args.output = {"cpu": str(RESULTS), "cuda": str(RESULTS.with_name(
            "transformer-gpu.md")), "host": ""}[args.device]
    ours_name = "dlvm (nvptx)" if gpu else "dlvm (llvm-cpu)"
    rng = np.random.default_rng(0)
    batches = [(rng.integers(0, 30, (args.batch, 64)), rng.integers(0, 30, (args.batch, 64)))
               for _ in range(args.steps + 3)]
    chars = args.batch * 64
    rows = []
    for precision in args.precision.split(","):
        times: dict[str, float] = {}
        step = (dlvm_gpu_step(precision, args.device) if gpu else
                dlvm_step(precision, args.batch)[0])
        times[ours_name] = timed(step, batches)
        try:
            import torch  # noqa: F401  (optional: the comparison columns)
        except ImportError:
            pass
        else:
            times["torch eager"] = timed(torch_step(False, precision, args.batch,
                                                    torch_device), batches)
            try:
                if not gpu or args.compile:
                    times["torch.compile"] = timed(torch_step(True, precision, args.batch,
                                                              torch_device), batches)
            except Exception as e:  # inductor needs a C++ compiler: say so, go on
                print(f"torch.compile failed: {type(e).__name__}: {str(e).splitlines()[0]}")
        for name, seconds in times.items():
            print(f"{precision} {name}: {seconds * 1e3:.1f} ms per step, "
                  f"{chars / seconds:,.0f} characters/s")
        rows.append((precision, times))
    lines = ["# Character transformer: training throughput", "",
             f"Command: `python benchmarks/transformer.py --steps {args.steps} --batch "
             f"{args.batch} --precision {args.precision}"
             f"{' --device ' + args.device if gpu else ''}{' --compile' if args.compile else ''}` "
             "(steps after three warm-up steps; "
             f"{chars} characters per step).", "", f"Machine: {machine(args.device == 'cuda')}, "
             f"{time.strftime('%Y-%m-%d')}.", "",
             "| precision | framework | ms per step | characters/s | DLVM / this |",
             "|---|---|---|---|---|"]
    for precision, times in rows:
        ours = times[ours_name]
        for name, seconds in times.items():
            ratio = ours / seconds
            lines.append(f"| {precision} | {name} | {seconds * 1e3:.1f} | "
                         f"{chars / seconds:,.0f} | {ratio:.2f}× |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output:
        out = Path(args.output)
        old = out.read_text(encoding="utf-8") if out.exists() else ""
        heading = "## What limits it"
        notes = old[old.index(heading):] if heading in old else ""
        out.write_text(text + ("\n" + notes if notes else ""), encoding="utf-8")
    assert math.isfinite(ours)


if __name__ == "__main__":
    main()
