"""llvm-cpu against numpy, PyTorch (eager and torch.compile), JAX and ONNX Runtime.

    python benchmarks/llvm_cpu.py [--repeat N] [--threads T] [--json results.json]
                                  [--only mlp_train,rnn,threads,...]

Every framework runs the same workload, in float32, with the same number of threads, in one
process; each is timed as the median of repeated runs after warm-up, and every result is
checked against numpy before it counts. The table gives each time, DLVM's ratio to the
best peer (the target: at most the issue's ratio), and how far DLVM is from the machine's
limits: the FLOPs at the measured sgemm rate and the bytes at the measured copy bandwidth.

Workloads:
1. mlp_train  — MLP 784-512-512-10, tanh, mean softmax cross-entropy, batch 128: forward,
   backward and SGD update as one DLVM function built on a gradient declaration (≤ 0.8×).
2. mlp_infer  — the same MLP, batch 1, inference latency through `exe.call` (≤ 0.75×).
3. ew_forward / ew_gradient — tanh(a·b + c)·sigmoid(a − c) over 2²² elements, and its
   gradient with respect to a (≤ 0.8×).
4. softmax_ce — softmax cross-entropy forward and backward on 4096×1000 logits (≤ 0.5×).
5. rnn        — tanh RNN, hidden 256, batch 32, 50 steps as a loop in the IR, forward and
   backpropagation through time (≤ 0.75×).
6. compile    — cold compile of workload 1, and a load from the disk cache (≤ 0.5 s, ≤ 50 ms).
7. threads    — workload 1 at thread budgets 1, 2, … the cores, and 2× and 4× the cores
   (oversubscribed), with GEMMs split by DLVM's pool or by OpenBLAS, idle and with one busy
   process beside it (N threads ≤ 1.1× N/2; under load ≤ 1.5× idle).

A peer that fails (not installed, or an error) is reported as unavailable with the reason,
and the others are measured.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dlvm.ir as ir
import dlvm.llvm as dlvm_llvm
from dlvm.llvm.runtime import blas, threads

F32 = np.float32
TARGETS = {"mlp_train": 0.8, "mlp_infer": 0.75, "ew_forward": 0.8, "ew_gradient": 0.8,
           "softmax_ce": 0.5, "rnn": 0.75}


# ---------------------------------------------------------------- DLVM programs


def mlp_text(batch: int) -> str:
    sizes = [784, 512, 512, 10]
    params = []
    for k in range(3):
        params += [f"<{sizes[k]} x {sizes[k + 1]} x f32>", f"<{sizes[k + 1]} x f32>"]
    ptypes = ", ".join(params)
    pnames = ", ".join(f"%{'w' if j % 2 == 0 else 'b'}{j // 2 + 1}: {t}"
                       for j, t in enumerate(params))
    pargs = ", ".join(f"%{'w' if j % 2 == 0 else 'b'}{j // 2 + 1}: {t}"
                      for j, t in enumerate(params))
    x_t, y_t = f"<{batch} x 784 x f32>", f"<{batch} x 10 x f32>"
    n = batch
    body = []
    h, width = "%x", 784
    for k in range(3):
        out = sizes[k + 1]
        body += [f"    %z{k} = dot {h}: <{n} x {width} x f32>, %w{k + 1}: <{width} x {out} x f32>",
                 f"    %bb{k} = padShape %b{k + 1}: <{out} x f32> at 0",
                 f"    %a{k} = add %z{k}: <{n} x {out} x f32>, %bb{k}: <1 x {out} x f32>"]
        if k < 2:
            body.append(f"    %h{k} = tanh %a{k}: <{n} x {out} x f32>")
            h = f"%h{k}"
        width = out
    predict_body = "\n".join(body)
    text = f"""
module "mlp"
stage raw

func @predict: ({ptypes}, {x_t}) -> <{n} x 10 x f32> {{
'entry({pnames}, %x: {x_t}):
{predict_body}
    return %a2: <{n} x 10 x f32>
}}

func @loss: ({ptypes}, {x_t}, {y_t}) -> f32 {{
'entry({pnames}, %x: {x_t}, %y: {y_t}):
    %s = apply @predict({pargs}, %x: {x_t}) -> <{n} x 10 x f32>
    %m = reduce %s: <{n} x 10 x f32> by max init -inf: f32 along 1
    %mp = padShape %m: <{n} x f32> at 1
    %zc = subtract %s: <{n} x 10 x f32>, %mp: <{n} x 1 x f32>
    %e = exp %zc: <{n} x 10 x f32>
    %se = reduce %e: <{n} x 10 x f32> by add init 0.0: f32 along 1
    %ls = log %se: <{n} x f32>
    %lsp = padShape %ls: <{n} x f32> at 1
    %logp = subtract %zc: <{n} x 10 x f32>, %lsp: <{n} x 1 x f32>
    %t = multiply %logp: <{n} x 10 x f32>, %y: {y_t}
    %total = reduce %t: <{n} x 10 x f32> by add init 0.0: f32
    %mean = divide %total: f32, {float(n)}: f32
    %l = negate %mean: f32
    return %l: f32
}}

[gradient @loss wrt 0, 1, 2, 3, 4, 5 keeping 0]
func @dloss: ({ptypes}, {x_t}, {y_t}) -> ({ptypes}, f32)

func @train_step: ({ptypes}, {x_t}, {y_t}, f32) -> ({ptypes}, f32) {{
'entry({pnames}, %x: {x_t}, %y: {y_t}, %lr: f32):
    %g = apply @dloss({pargs}, %x: {x_t}, %y: {y_t}) -> ({ptypes}, f32)
"""
    outs = []
    for j, t in enumerate(params):
        name = f"{'w' if j % 2 == 0 else 'b'}{j // 2 + 1}"
        text += (f"    %d{name} = extract {j} from %g: ({ptypes}, f32)\n"
                 f"    %s{name} = multiply %d{name}: {t}, %lr: f32\n"
                 f"    %n{name} = subtract %{name}: {t}, %s{name}: {t}\n")
        outs.append(f"%n{name}: {t}")
    text += (f"    %lv = extract 6 from %g: ({ptypes}, f32)\n"
             f"    %r = literal ({', '.join(outs)}, %lv: f32): ({ptypes}, f32)\n"
             f"    return %r: ({ptypes}, f32)\n}}\n")
    return text


def elementwise_text(n: int) -> str:
    t = f"<{n} x f32>"
    return f"""
module "elementwise"
stage raw

// tanh(a·b + c)·sigmoid(a − c), sigmoid(z) = 1/(1 + e^−z)
func @f: ({t}, {t}, {t}) -> {t} {{
'entry(%a: {t}, %b: {t}, %c: {t}):
    %m = multiply %a: {t}, %b: {t}
    %s = add %m: {t}, %c: {t}
    %th = tanh %s: {t}
    %d = subtract %a: {t}, %c: {t}
    %nd = negate %d: {t}
    %e = exp %nd: {t}
    %e1 = add %e: {t}, 1.0: f32
    %sg = divide 1.0: f32, %e1: {t}
    %y = multiply %th: {t}, %sg: {t}
    return %y: {t}
}}

[gradient @f wrt 0 seedable]
func @df: ({t}, {t}, {t}, {t}) -> ({t})
"""


def softmax_text(rows: int, classes: int) -> str:
    t = f"<{rows} x {classes} x f32>"
    return f"""
module "softmax"
stage raw

func @loss: ({t}, {t}) -> f32 {{
'entry(%s: {t}, %y: {t}):
    %m = reduce %s: {t} by max init -inf: f32 along 1
    %mp = padShape %m: <{rows} x f32> at 1
    %zc = subtract %s: {t}, %mp: <{rows} x 1 x f32>
    %e = exp %zc: {t}
    %se = reduce %e: {t} by add init 0.0: f32 along 1
    %ls = log %se: <{rows} x f32>
    %lsp = padShape %ls: <{rows} x f32> at 1
    %logp = subtract %zc: {t}, %lsp: <{rows} x 1 x f32>
    %p = multiply %logp: {t}, %y: {t}
    %total = reduce %p: {t} by add init 0.0: f32
    %mean = divide %total: f32, {float(rows)}: f32
    %l = negate %mean: f32
    return %l: f32
}}

[gradient @loss wrt 0 keeping 0]
func @dloss: ({t}, {t}) -> ({t}, f32)
"""


def rnn_text(steps: int, batch: int, hidden: int) -> str:
    h = f"<{batch} x {hidden} x f32>"
    w = f"<{hidden} x {hidden} x f32>"
    xs = f"<{steps} x {batch} x {hidden} x f32>"
    b = f"<{hidden} x f32>"
    return f"""
module "rnn"
stage raw

// h ← tanh(xₜ·W + h·U + b) for t < {steps}; the loss is Σ h² / batch
func @loss: ({w}, {w}, {b}, {xs}, {h}) -> f32 {{
'entry(%w: {w}, %u: {w}, %b: {b}, %xs: {xs}, %h0: {h}):
    %bb = padShape %b: {b} at 0
    branch 'loop(0: i64, %h0: {h})
'loop(%i: i64, %h: {h}):
    %c = lessThan %i: i64, {steps}: i64
    conditional %c: bool then 'body() else 'done()
'body():
    %x = extract %i: i64 from %xs: {xs}
    %xw = dot %x: {h}, %w: {w}
    %hu = dot %h: {h}, %u: {w}
    %s = add %xw: {h}, %hu: {h}
    %sb = add %s: {h}, %bb: <1 x {hidden} x f32>
    %hn = tanh %sb: {h}
    %i2 = add %i: i64, 1: i64
    branch 'loop(%i2: i64, %hn: {h})
'done():
    %sq = multiply %h: {h}, %h: {h}
    %total = reduce %sq: {h} by add init 0.0: f32
    %l = divide %total: f32, {float(batch)}: f32
    return %l: f32
}}

[gradient @loss wrt 0, 1, 2 keeping 0]
func @dloss: ({w}, {w}, {b}, {xs}, {h}) -> ({w}, {w}, {b}, f32)
"""


# ---------------------------------------------------------------- timing


def median_time(fn: Callable[[], Any], repeat: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


@dataclass
class Row:
    workload: str
    times: dict[str, float] = field(default_factory=dict)  # framework -> seconds
    notes: list[str] = field(default_factory=list)
    flops: float = 0.0
    bytes: float = 0.0

    def best_peer(self) -> tuple[str, float] | None:
        peers = {k: v for k, v in self.times.items() if k != "dlvm"}
        if not peers:
            return None
        k = min(peers, key=peers.__getitem__)
        return k, peers[k]


def check(name: str, got: Any, want: Any, rtol: float = 2e-3, atol: float = 2e-4) -> None:
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64),
                                   rtol=rtol, atol=atol, err_msg=name)


# ---------------------------------------------------------------- the machine


def machine_limits(threads: int) -> tuple[float, float]:
    """(sgemm FLOP/s, copy bytes/s) measured with numpy, with the threads given."""
    a = np.random.default_rng(0).standard_normal((1024, 1024), F32)
    with numpy_blas_threads(threads):
        t = median_time(lambda: a @ a, 10)
    flops = 2 * 1024 ** 3 / t
    big = np.ones(1 << 25, F32)
    out = np.empty_like(big)
    t = median_time(lambda: np.copyto(out, big), 10)
    return flops, 2 * big.nbytes / t


def describe_machine(threads: int) -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    import llvmlite
    import llvmlite.binding as llvm

    versions = {"python": platform.python_version(), "numpy": np.__version__,
                "llvmlite": llvmlite.__version__,
                "llvm": ".".join(map(str, llvm.llvm_version_info))}
    for name in ("torch", "jax", "onnxruntime"):
        with contextlib.suppress(ImportError):
            versions[name] = __import__(name).__version__
    return {"cpu": cpu, "cores": os.cpu_count(), "threads": threads,
            "host_cpu": llvm.get_host_cpu_name(), "system": platform.platform(),
            "versions": versions}


# ---------------------------------------------------------------- peers


@contextlib.contextmanager
def numpy_blas_threads(n: int) -> Any:
    """numpy's OpenBLAS at `n` threads while a numpy peer is timed: DLVM sets it to one
    thread (its own pool splits GEMMs), which would handicap the peer."""
    from threadpoolctl import ThreadpoolController

    with ThreadpoolController().limit(limits=n, user_api="blas"):
        yield


def unavailable(peer: str, error: BaseException) -> str:
    """A peer that could not run, and why (one line)."""
    reason = str(error).splitlines()[0][:120] if str(error) else ""
    return f"{peer}: unavailable ({type(error).__name__}{': ' + reason if reason else ''})"


def torch_module(row: Row) -> Any:
    try:
        import torch
    except Exception as e:  # not installed, or a broken install
        row.notes.append(unavailable("torch", e))
        return None
    return torch


def jax_module(row: Row) -> Any:
    try:
        import jax
        import jax.numpy as jnp  # noqa: F401
    except Exception as e:
        row.notes.append(unavailable("jax.jit", e))
        return None
    return jax


def compile_dlvm(text: str, threads: int, **options: Any) -> ir.Executable:
    return ir.compile(ir.parse(text), "llvm-cpu", threads=threads, **options)


def mlp_params(rng: np.random.Generator) -> list[np.ndarray]:
    sizes = [784, 512, 512, 10]
    out = []
    for k in range(3):
        limit = np.sqrt(6 / (sizes[k] + sizes[k + 1]))
        out += [rng.uniform(-limit, limit, (sizes[k], sizes[k + 1])).astype(F32),
                rng.uniform(-0.1, 0.1, sizes[k + 1]).astype(F32)]
    return out


def numpy_mlp_step(p: list[np.ndarray], x: np.ndarray, y: np.ndarray, lr: float
                   ) -> list[np.ndarray]:
    w1, b1, w2, b2, w3, b3 = p
    h1 = np.tanh(x @ w1 + b1)
    h2 = np.tanh(h1 @ w2 + b2)
    s = h2 @ w3 + b3
    zc = s - s.max(1, keepdims=True)
    e = np.exp(zc)
    se = e.sum(1, keepdims=True)
    logp = zc - np.log(se)
    n = x.shape[0]
    loss = -(logp * y).sum() / n
    ds = (e / se - y) / n
    dw3, db3 = h2.T @ ds, ds.sum(0)
    dh2 = (ds @ w3.T) * (1 - h2 * h2)
    dw2, db2 = h1.T @ dh2, dh2.sum(0)
    dh1 = (dh2 @ w2.T) * (1 - h1 * h1)
    dw1, db1 = x.T @ dh1, dh1.sum(0)
    grads = [dw1, db1, dw2, db2, dw3, db3]
    return [w - F32(lr) * g for w, g in zip(p, grads, strict=True)] + [np.float32(loss)]


def bench_mlp_train(args: argparse.Namespace, rows: list[Row]) -> None:
    rng = np.random.default_rng(0)
    p = mlp_params(rng)
    batch = 128
    x = rng.random((batch, 784), F32)
    y = np.eye(10, dtype=F32)[rng.integers(0, 10, batch)]
    lr = F32(0.1)
    row = Row("mlp_train")
    want = numpy_mlp_step(p, x, y, lr)
    row.flops = 3 * 2 * batch * (784 * 512 + 512 * 512 + 512 * 10)
    row.bytes = 3 * 4 * sum(q.size for q in p)  # read params, write params, read grads
    exe = compile_dlvm(mlp_text(batch), args.threads)
    step = exe["train_step"]
    got = step(*p, x, y, lr)
    check("dlvm mlp_train", got, want)
    row.times["dlvm"] = median_time(lambda: step(*p, x, y, lr), args.repeat)
    with numpy_blas_threads(args.threads):
        row.times["numpy"] = median_time(lambda: numpy_mlp_step(p, x, y, lr), args.repeat)
    torch = torch_module(row)
    if torch is not None:
        try:
            torch.set_num_threads(args.threads)
            tp = [torch.tensor(q, requires_grad=True) for q in p]
            tx, ty = torch.tensor(x), torch.tensor(y)

            def loss_fn(q: list[Any]) -> Any:
                h1 = torch.tanh(tx @ q[0] + q[1])
                h2 = torch.tanh(h1 @ q[2] + q[3])
                s = h2 @ q[4] + q[5]
                return -(torch.log_softmax(s, 1) * ty).sum() / batch

            def torch_step(fn: Callable[[list[Any]], Any]) -> list[Any]:
                for q in tp:
                    q.grad = None
                loss = fn(tp)
                loss.backward()
                with torch.no_grad():
                    return [q - lr * q.grad for q in tp] + [loss.detach()]

            check("torch mlp_train", [t.detach().numpy() for t in torch_step(loss_fn)], want)
            row.times["torch"] = median_time(lambda: torch_step(loss_fn), args.repeat)
            try:
                compiled = torch.compile(loss_fn)
                check("torch.compile mlp_train",
                      [t.detach().numpy() for t in torch_step(compiled)], want)
                row.times["torch.compile"] = median_time(lambda: torch_step(compiled), args.repeat)
            except Exception as e:  # a compiler missing on the machine
                row.notes.append(unavailable("torch.compile", e))
        except Exception as e:  # a peer that fails is reported, not fatal
            row.notes.append(unavailable("torch", e))
    jax = jax_module(row)
    if jax is not None:
        try:
            import jax.numpy as jnp

            def jloss(q: list[Any], xx: Any, yy: Any) -> Any:
                h1 = jnp.tanh(xx @ q[0] + q[1])
                h2 = jnp.tanh(h1 @ q[2] + q[3])
                s = h2 @ q[4] + q[5]
                return -(jax.nn.log_softmax(s, 1) * yy).sum() / batch

            @jax.jit
            def jstep(q: list[Any], xx: Any, yy: Any) -> Any:
                loss, g = jax.value_and_grad(jloss)(q, xx, yy)
                return [a - lr * b for a, b in zip(q, g, strict=True)] + [loss]

            jp = [jnp.asarray(q) for q in p]
            jx, jy = jnp.asarray(x), jnp.asarray(y)
            check("jax mlp_train", [np.asarray(t) for t in jstep(jp, jx, jy)], want)
            row.times["jax.jit"] = median_time(
                lambda: jax.block_until_ready(jstep(jp, jx, jy)), args.repeat)
        except Exception as e:  # a peer that fails is reported, not fatal
            row.notes.append(unavailable("jax.jit", e))
    rows.append(row)


def bench_mlp_infer(args: argparse.Namespace, rows: list[Row]) -> None:
    rng = np.random.default_rng(1)
    p = mlp_params(rng)
    x = rng.random((1, 784), F32)
    w1, b1, w2, b2, w3, b3 = p
    want = [np.tanh(np.tanh(x @ w1 + b1) @ w2 + b2) @ w3 + b3]
    row = Row("mlp_infer")
    row.flops = 2 * (784 * 512 + 512 * 512 + 512 * 10)
    row.bytes = 4 * sum(q.size for q in p)
    exe = compile_dlvm(mlp_text(1), args.threads)
    predict = exe["predict"]
    check("dlvm mlp_infer", [predict(*p, x)], want)
    row.times["dlvm"] = median_time(lambda: predict(*p, x), args.repeat * 20)
    row.times["numpy"] = median_time(
        lambda: np.tanh(np.tanh(x @ w1 + b1) @ w2 + b2) @ w3 + b3, args.repeat * 20)
    torch = torch_module(row)
    if torch is not None:
        try:
            tp = [torch.tensor(q) for q in p]
            tx = torch.tensor(x)

            def tforward(xx: Any) -> Any:
                return torch.tanh(torch.tanh(xx @ tp[0] + tp[1]) @ tp[2] + tp[3]) @ tp[4] + tp[5]

            with torch.no_grad():
                check("torch mlp_infer", [tforward(tx).numpy()], want)
                row.times["torch"] = median_time(lambda: tforward(tx), args.repeat * 20)
                try:
                    compiled = torch.compile(tforward)
                    check("torch.compile mlp_infer", [compiled(tx).numpy()], want)
                    row.times["torch.compile"] = median_time(lambda: compiled(tx),
                                                             args.repeat * 20)
                except Exception as e:
                    row.notes.append(unavailable("torch.compile", e))
        except Exception as e:  # a peer that fails is reported, not fatal
            row.notes.append(unavailable("torch", e))
    try:  # the model is built with onnx.helper (no exporter in between)
        onnx_time = onnx_runtime_infer(p, x, want, args)
        if onnx_time is not None:
            row.times["onnxruntime"] = onnx_time
        else:
            row.notes.append("onnxruntime: unavailable (onnx or onnxruntime not installed)")
    except Exception as e:
        row.notes.append(unavailable("onnxruntime", e))
    jax = jax_module(row)
    if jax is not None:
        try:
            import jax.numpy as jnp

            jp = [jnp.asarray(q) for q in p]

            @jax.jit
            def jforward(xx: Any) -> Any:
                return jnp.tanh(jnp.tanh(xx @ jp[0] + jp[1]) @ jp[2] + jp[3]) @ jp[4] + jp[5]

            jx = jnp.asarray(x)
            check("jax mlp_infer", [np.asarray(jforward(jx))], want)
            row.times["jax.jit"] = median_time(lambda: jax.block_until_ready(jforward(jx)),
                                               args.repeat * 20)
        except Exception as e:  # a peer that fails is reported, not fatal
            row.notes.append(unavailable("jax.jit", e))
    rows.append(row)


def onnx_runtime_infer(p: list[np.ndarray], x: np.ndarray, want: list[np.ndarray],
                       args: argparse.Namespace) -> float | None:
    """ONNX Runtime's `session.run` of the same MLP (`call_overhead.onnx_session`)."""
    from call_overhead import onnx_session

    session = onnx_session(p, args.threads)
    if session is None:
        return None
    check("onnxruntime mlp_infer", [session.run(None, {"x": x})[0]], want)
    return median_time(lambda: session.run(None, {"x": x}), args.repeat * 20)


def bench_elementwise(args: argparse.Namespace, rows: list[Row]) -> None:
    n = 1 << 22
    rng = np.random.default_rng(2)
    a, b, c, dy = (rng.standard_normal(n, F32) for _ in range(4))

    def np_forward() -> np.ndarray:
        return np.tanh(a * b + c) / (1 + np.exp(-(a - c)))

    def np_gradient() -> np.ndarray:
        th = np.tanh(a * b + c)
        sg = 1 / (1 + np.exp(-(a - c)))
        return dy * ((1 - th * th) * b * sg + th * sg * (1 - sg))

    exe = compile_dlvm(elementwise_text(n), args.threads)
    forward, df = exe["f"], exe["df"]

    def gradient(*xs: np.ndarray) -> np.ndarray:
        (g,) = df(*xs)  # @df returns a one-element tuple
        return g
    fwd, grad = Row("ew_forward"), Row("ew_gradient")
    fwd.bytes, grad.bytes = 4 * 4 * n, 5 * 4 * n
    fwd.flops, grad.flops = 20 * n, 40 * n
    check("dlvm ew_forward", [forward(a, b, c)], [np_forward()], 1e-5, 1e-6)
    check("dlvm ew_gradient", [gradient(a, b, c, dy)], [np_gradient()], 1e-4, 1e-5)
    fwd.times["dlvm"] = median_time(lambda: forward(a, b, c), args.repeat)
    grad.times["dlvm"] = median_time(lambda: gradient(a, b, c, dy), args.repeat)
    fwd.times["numpy"] = median_time(np_forward, args.repeat)
    grad.times["numpy"] = median_time(np_gradient, args.repeat)
    torch = torch_module(fwd)
    if torch is not None:
        try:
            ta, tb, tc, tdy = (torch.tensor(v) for v in (a, b, c, dy))

            def tf(aa: Any) -> Any:
                return torch.tanh(aa * tb + tc) * torch.sigmoid(aa - tc)

            def tg(f: Callable[[Any], Any]) -> Any:
                aa = ta.detach().requires_grad_()
                (g,) = torch.autograd.grad(f(aa), aa, tdy)
                return g

            with torch.no_grad():
                fwd.times["torch"] = median_time(lambda: tf(ta), args.repeat)
            grad.times["torch"] = median_time(lambda: tg(tf), args.repeat)
            check("torch ew_gradient", [tg(tf).numpy()], [np_gradient()], 1e-4, 1e-5)
            try:
                cf = torch.compile(tf)
                with torch.no_grad():
                    check("torch.compile ew_forward", [cf(ta).numpy()], [np_forward()], 1e-5, 1e-6)
                    fwd.times["torch.compile"] = median_time(lambda: cf(ta), args.repeat)
                check("torch.compile ew_gradient", [tg(cf).numpy()], [np_gradient()], 1e-4, 1e-5)
                grad.times["torch.compile"] = median_time(lambda: tg(cf), args.repeat)
            except Exception as e:
                fwd.notes.append(unavailable("torch.compile", e))
        except Exception as e:  # a peer that fails is reported, not fatal
            fwd.notes.append(unavailable("torch", e))
    jax = jax_module(fwd)
    if jax is not None:
        try:
            import jax.numpy as jnp

            ja, jb, jc, jdy = (jnp.asarray(v) for v in (a, b, c, dy))

            def jf(aa: Any) -> Any:
                return jnp.tanh(aa * jb + jc) * jax.nn.sigmoid(aa - jc)

            jfwd = jax.jit(jf)
            jgrad = jax.jit(lambda aa, d: jax.vjp(jf, aa)[1](d)[0])
            check("jax ew_forward", [np.asarray(jfwd(ja))], [np_forward()], 1e-5, 1e-6)
            check("jax ew_gradient", [np.asarray(jgrad(ja, jdy))], [np_gradient()], 1e-4, 1e-5)
            fwd.times["jax.jit"] = median_time(lambda: jax.block_until_ready(jfwd(ja)), args.repeat)
            grad.times["jax.jit"] = median_time(lambda: jax.block_until_ready(jgrad(ja, jdy)),
                                                args.repeat)
        except Exception as e:  # a peer that fails is reported, not fatal
            fwd.notes.append(unavailable("jax.jit", e))
    rows += [fwd, grad]


def bench_softmax(args: argparse.Namespace, rows: list[Row]) -> None:
    rows_, classes = 4096, 1000
    rng = np.random.default_rng(3)
    s = rng.standard_normal((rows_, classes), F32) * 3
    labels = rng.integers(0, classes, rows_)
    y = np.eye(classes, dtype=F32)[labels]

    def np_both() -> list[Any]:
        zc = s - s.max(1, keepdims=True)
        e = np.exp(zc)
        se = e.sum(1, keepdims=True)
        loss = -((zc - np.log(se)) * y).sum() / rows_
        return [(e / se - y) / rows_, np.float32(loss)]

    row = Row("softmax_ce")
    row.bytes = 4 * 3 * s.size
    row.flops = 10 * s.size
    exe = compile_dlvm(softmax_text(rows_, classes), args.threads)
    dloss = exe["dloss"]
    check("dlvm softmax_ce", dloss(s, y), np_both(), 1e-4, 1e-7)
    row.times["dlvm"] = median_time(lambda: dloss(s, y), args.repeat)
    row.times["numpy"] = median_time(np_both, args.repeat)
    torch = torch_module(row)
    if torch is not None:
        try:
            ts, tl = torch.tensor(s), torch.tensor(labels)

            def tboth(f: Callable[[Any, Any], Any]) -> list[Any]:
                ss = ts.detach().requires_grad_()
                loss = f(ss, tl)
                (g,) = torch.autograd.grad(loss, ss)
                return [g, loss.detach()]

            ce = torch.nn.functional.cross_entropy
            check("torch softmax_ce", [t.numpy() for t in tboth(ce)], np_both(), 1e-4, 1e-7)
            row.times["torch"] = median_time(lambda: tboth(ce), args.repeat)
            try:
                cce = torch.compile(ce)
                check("torch.compile softmax_ce", [t.numpy() for t in tboth(cce)], np_both(),
                      1e-4, 1e-7)
                row.times["torch.compile"] = median_time(lambda: tboth(cce), args.repeat)
            except Exception as e:
                row.notes.append(unavailable("torch.compile", e))
        except Exception as e:  # a peer that fails is reported, not fatal
            row.notes.append(unavailable("torch", e))
    jax = jax_module(row)
    if jax is not None:
        try:
            import jax.numpy as jnp

            js, jy = jnp.asarray(s), jnp.asarray(y)

            def jloss(ss: Any) -> Any:
                return -(jax.nn.log_softmax(ss, 1) * jy).sum() / rows_

            jboth = jax.jit(jax.value_and_grad(jloss))
            loss, g = jboth(js)
            check("jax softmax_ce", [np.asarray(g), np.asarray(loss)], np_both(), 1e-4, 1e-7)
            row.times["jax.jit"] = median_time(lambda: jax.block_until_ready(jboth(js)),
                                               args.repeat)
        except Exception as e:  # a peer that fails is reported, not fatal
            row.notes.append(unavailable("jax.jit", e))
    rows.append(row)


def bench_rnn(args: argparse.Namespace, rows: list[Row]) -> None:
    steps, batch, hidden = 50, 32, 256
    rng = np.random.default_rng(4)
    scale = 1 / np.sqrt(hidden)
    w = (rng.standard_normal((hidden, hidden)) * scale).astype(F32)
    u = (rng.standard_normal((hidden, hidden)) * scale).astype(F32)
    b = (rng.standard_normal(hidden) * 0.1).astype(F32)
    xs = rng.standard_normal((steps, batch, hidden), F32)
    h0 = np.zeros((batch, hidden), F32)

    def np_both() -> list[Any]:
        hs = [h0]
        for t in range(steps):
            hs.append(np.tanh(xs[t] @ w + hs[-1] @ u + b))
        h = hs[-1]
        loss = (h * h).sum() / batch
        dh = 2 * h / batch
        dw, du, db = np.zeros_like(w), np.zeros_like(u), np.zeros_like(b)
        for t in range(steps - 1, -1, -1):
            da = dh * (1 - hs[t + 1] ** 2)
            dw += xs[t].T @ da
            du += hs[t].T @ da
            db += da.sum(0)
            dh = da @ u.T
        return [dw, du, db, np.float32(loss)]

    row = Row("rnn")
    row.flops = 3 * steps * 2 * 2 * batch * hidden * hidden
    row.bytes = 4 * (xs.size * 2 + steps * batch * hidden * 4)
    exe = compile_dlvm(rnn_text(steps, batch, hidden), args.threads)
    dloss = exe["dloss"]
    check("dlvm rnn", dloss(w, u, b, xs, h0), np_both(), 2e-3, 2e-4)
    row.times["dlvm"] = median_time(lambda: dloss(w, u, b, xs, h0), args.repeat)
    with numpy_blas_threads(args.threads):
        row.times["numpy"] = median_time(np_both, args.repeat)
    torch = torch_module(row)
    if torch is not None:
        try:
            tw, tu, tb = (torch.tensor(v, requires_grad=True) for v in (w, u, b))
            txs, th0 = torch.tensor(xs), torch.tensor(h0)

            def tloss(ww: Any, uu: Any, bb: Any) -> Any:
                h = th0
                for t in range(steps):
                    h = torch.tanh(txs[t] @ ww + h @ uu + bb)
                return (h * h).sum() / batch

            def tboth(f: Callable[..., Any]) -> list[Any]:
                loss = f(tw, tu, tb)
                g = torch.autograd.grad(loss, [tw, tu, tb])
                return [*g, loss.detach()]

            check("torch rnn", [t.numpy() for t in tboth(tloss)], np_both(), 2e-3, 2e-4)
            row.times["torch"] = median_time(lambda: tboth(tloss), args.repeat)
            try:
                ctl = torch.compile(tloss)
                check("torch.compile rnn", [t.numpy() for t in tboth(ctl)], np_both(), 2e-3, 2e-4)
                row.times["torch.compile"] = median_time(lambda: tboth(ctl), args.repeat)
            except Exception as e:
                row.notes.append(unavailable("torch.compile", e))
        except Exception as e:  # a peer that fails is reported, not fatal
            row.notes.append(unavailable("torch", e))
    jax = jax_module(row)
    if jax is not None:
        try:
            import jax.numpy as jnp

            def jloss(ww: Any, uu: Any, bb: Any, xx: Any) -> Any:
                def cell(h: Any, x: Any) -> tuple[Any, None]:
                    return jnp.tanh(x @ ww + h @ uu + bb), None

                h, _ = jax.lax.scan(cell, jnp.asarray(h0), xx)
                return (h * h).sum() / batch

            jboth = jax.jit(jax.value_and_grad(jloss, argnums=(0, 1, 2)))
            jargs = [jnp.asarray(v) for v in (w, u, b, xs)]
            loss, g = jboth(*jargs)
            check("jax rnn", [*map(np.asarray, g), np.asarray(loss)], np_both(), 2e-3, 2e-4)
            row.times["jax.jit"] = median_time(lambda: jax.block_until_ready(jboth(*jargs)),
                                               args.repeat)
        except Exception as e:  # a peer that fails is reported, not fatal
            row.notes.append(unavailable("jax.jit", e))
    rows.append(row)


def bench_compile(args: argparse.Namespace, rows: list[Row]) -> dict[str, float]:
    """Cold compile of workload 1 (differentiation, O3, LLVM) and a load from disk."""
    rng = np.random.default_rng(0)
    p = mlp_params(rng)
    x = rng.random((128, 784), F32)
    y = np.eye(10, dtype=F32)[rng.integers(0, 10, 128)]
    with tempfile.TemporaryDirectory() as folder:
        old = os.environ.get("DLVM_CACHE_DIR")
        os.environ["DLVM_CACHE_DIR"] = folder
        try:
            text = mlp_text(128)
            t = time.perf_counter()
            exe = compile_dlvm(text, args.threads)
            exe.call("train_step", *p, x, y, F32(0.1))
            cold = time.perf_counter() - t
            t = time.perf_counter()
            exe = compile_dlvm(text, args.threads)
            exe.call("train_step", *p, x, y, F32(0.1))
            warm = time.perf_counter() - t
            module = ir.parse(text)
            ir.run_passes(module, "differentiation,O3")
            t = time.perf_counter()
            exe = ir.compile(module, "llvm-cpu", threads=args.threads, passes="")
            exe.call("train_step", *p, x, y, F32(0.1))
            load = time.perf_counter() - t
        finally:
            if old is None:
                os.environ.pop("DLVM_CACHE_DIR", None)
            else:
                os.environ["DLVM_CACHE_DIR"] = old
    return {"cold compile (s)": cold, "from disk cache, with passes (s)": warm,
            "load from disk cache (s)": load}


# ---------------------------------------------------------------- threads and load


@contextlib.contextmanager
def busy_process() -> Any:
    """One process spinning on a core beside the benchmark, as another program would."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        yield
    finally:
        proc.kill()
        proc.wait()


def thread_counts(cores: int) -> list[int]:
    """1, 2, 4, … up to the cores, then oversubscribed: 2× the cores, and 4× on a machine
    of at most 4 cores (where it stands in for a larger machine that runs other work)."""
    counts = [1]
    while counts[-1] * 2 <= cores:
        counts.append(counts[-1] * 2)
    if counts[-1] != cores:
        counts.append(cores)
    return [*counts, 2 * cores, *([4 * cores] if cores <= 4 else [])]


def bench_threads(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The MLP training step at each thread budget, under both GEMM strategies, idle and
    with one busy process beside. Measurements of one table are interleaved (round-robin,
    best of `rounds` medians), so that drift of a shared machine hits every cell alike."""

    rng = np.random.default_rng(0)
    p = mlp_params(rng)
    x = rng.random((128, 784), F32)
    y = np.eye(10, dtype=F32)[rng.integers(0, 10, 128)]
    lr = F32(0.1)
    counts = thread_counts(threads.usable_cpus())
    dlvm_llvm.set_num_threads(max(counts))
    step = ir.compile(ir.parse(mlp_text(128)), "llvm-cpu")["train_step"]
    check("dlvm mlp_train (threads)", step(*p, x, y, lr), numpy_mlp_step(p, x, y, lr))
    strategies = ["pool", "openblas"] if blas.available() else ["pool"]
    out: list[dict[str, Any]] = []
    rounds, per = 3, max(5, args.repeat // 2)
    for load in ("idle", "one busy process"):
        best: dict[tuple[str, int], float] = {}
        with busy_process() if load != "idle" else contextlib.nullcontext():
            for _ in range(rounds):
                for strategy in strategies:
                    blas.set_gemm_strategy(strategy)
                    for n in counts:
                        dlvm_llvm.set_num_threads(n)
                        t = median_time(lambda: step(*p, x, y, lr), per, warmup=2)
                        best[strategy, n] = min(best.get((strategy, n), t), t)
        for (strategy, n), t in best.items():
            out.append({"load": load, "gemm": strategy, "threads": n, "time_s": t})
    blas.set_gemm_strategy("pool")
    dlvm_llvm.set_num_threads(args.threads)
    return out


def print_threads(results: list[dict[str, Any]]) -> None:
    counts = sorted({r["threads"] for r in results})
    cores = threads.usable_cpus()
    print(f"\nmlp_train by thread budget ({cores} cores; more threads than cores is "
          "oversubscribed), best of 3 interleaved medians:")
    print(" | ".join(["load", "GEMMs by", *(f"{n} threads" for n in counts),
                      "worst N / N/2"]))
    by = {(r["load"], r["gemm"], r["threads"]): r["time_s"] for r in results}
    for load in ("idle", "one busy process"):
        for strategy in ("pool", "openblas"):
            times = [by.get((load, strategy, n)) for n in counts]
            if None in times:
                continue
            worst = max(times[k] / times[k - 1] for k in range(1, len(times)))  # type: ignore[operator]
            print(" | ".join([load, strategy, *(f"{1e3 * t:.2f} ms" for t in times),  # type: ignore[operator]
                              f"{worst:.2f}×"]))
    for strategy in ("pool", "openblas"):
        ratios = [by[("one busy process", strategy, n)] / by[("idle", strategy, n)]
                  for n in counts if ("idle", strategy, n) in by]
        if ratios:
            print(" | ".join(["under load / idle", strategy, *(f"{r:.2f}×" for r in ratios),
                              ""]))


BENCHES = {"mlp_train": bench_mlp_train, "mlp_infer": bench_mlp_infer,
           "elementwise": bench_elementwise, "softmax_ce": bench_softmax, "rnn": bench_rnn}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0,
                        help="the thread budget (default: the CPUs the process may use)")
    parser.add_argument("--json", default="")
    parser.add_argument("--only", default="")
    args = parser.parse_args()

    args.threads = args.threads or dlvm_llvm.get_num_threads()
    dlvm_llvm.set_num_threads(args.threads)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    machine = describe_machine(args.threads)
    flops, bandwidth = machine_limits(args.threads)
    rows: list[Row] = []
    chosen = [n for n in BENCHES if not args.only or n in args.only.split(",")]
    for name in chosen:
        BENCHES[name](args, rows)
    compile_times = bench_compile(args, rows) if not args.only or "compile" in args.only else {}
    scaling = bench_threads(args) if not args.only or "threads" in args.only else []
    frameworks = sorted({k for r in rows for k in r.times}, key=lambda k: (k != "dlvm", k))
    print(f"machine: {machine['cpu']} ({machine['host_cpu']}), {machine['cores']} cores, "
          f"{args.threads} threads; sgemm {flops / 1e9:.1f} GFLOP/s, copy "
          f"{bandwidth / 1e9:.1f} GB/s")
    header = ["workload", *frameworks, "dlvm / best peer", "target", "dlvm at limit"]
    print(" | ".join(header))
    out = []
    for r in rows:
        best = r.best_peer()
        ratio = r.times["dlvm"] / best[1] if best else float("nan")
        limit = max(r.flops / flops, r.bytes / bandwidth)
        cells = [r.workload, *(f"{1e3 * r.times[k]:.3f} ms" if k in r.times else "—"
                               for k in frameworks),
                 f"{ratio:.2f}× ({best[0] if best else '-'})",
                 f"≤ {TARGETS.get(r.workload, float('nan'))}",
                 f"{r.times['dlvm'] / limit:.1f}× the limit" if limit else "-"]
        print(" | ".join(cells) + (f"  [{'; '.join(r.notes)}]" if r.notes else ""))
        out.append({"workload": r.workload, "times_s": r.times, "ratio_to_best_peer": ratio,
                    "best_peer": best[0] if best else None, "target": TARGETS.get(r.workload),
                    "flops": r.flops, "bytes": r.bytes, "limit_s": limit, "notes": r.notes})
    for k, v in compile_times.items():
        print(f"{k}: {v:.3f}")
    if scaling:
        print_threads(scaling)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "sgemm_flops": flops, "copy_bytes_per_s": bandwidth,
                       "workloads": out, "compile": compile_times, "threads": scaling}, f,
                      indent=2)


if __name__ == "__main__":
    main()
