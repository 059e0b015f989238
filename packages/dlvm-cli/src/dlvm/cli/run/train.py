"""Training: repeat a step function over shuffled mini-batches, evaluate, checkpoint.

The step function's contract is `(params…, inputs, targets, learning_rate) ->
(params…, loss)`; the evaluation function's is `(params…, inputs) -> scores`.
Checkpoints hold the parameters by name and `epoch` (epochs completed); they are
written to a temporary file and renamed, so an interruption never leaves half of one.
"""

from __future__ import annotations

import json
import math
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import dlvm.ir as ir
from dlvm.ir.types import TensorType

from .progress import Reporter
from .spec import DataSpec, KeyPath, TrainSpec

EPOCH_KEY = "epoch"
NP_DTYPES = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i32": np.int32,
             "i64": np.int64, "bool": np.bool_}


def _tensor(module: ir.Module, t: ir.Type) -> TensorType | None:
    t = module.resolve(t)
    return t if isinstance(t, TensorType) else None


def _fits(shape: tuple[int, ...], t: TensorType) -> bool:
    return len(shape) == t.rank and all(d is None or d == s for d, s in zip(t.shape, shape,
                                                                             strict=True))


def check_signatures(module: ir.Module, spec: TrainSpec, data: DataSpec,
                     shapes: tuple[tuple[int, ...], tuple[int, ...], Any]
                     ) -> list[tuple[KeyPath, str]]:
    """Problems with the step and evaluation functions against the data."""
    out: list[tuple[KeyPath, str]] = []
    step = module.function(spec.step)
    assert step is not None
    n = len(spec.parameters)
    args = step.type_.arguments
    result = module.resolve(step.type_.result)
    results = result.elements if isinstance(result, ir.TupleType) else (result,)
    where: KeyPath = ("train", "step")
    if len(results) != n + 1:
        out.append((where, f"'@{spec.step}' must return (params…, loss): {n + 1} values, "
                           f"it returns {len(results)}"))
    for i, name in enumerate(spec.parameters):
        t = _tensor(module, args[i])
        if t is None or not t.dtype.is_float or any(d is None for d in t.shape):
            if spec.load is None:
                out.append((where, f"parameter '{name}' of type '{args[i]}' must be a float "
                                   "tensor of static shape to be initialized"))
        elif i < len(results) and module.resolve(results[i]) != t:
            out.append((where, f"'@{spec.step}' returns '{results[i]}' for parameter "
                               f"'{name}' of type '{t}'"))
    x, y, lr = (_tensor(module, a) for a in args[n:])
    inputs, labels, _ = shapes
    if x is None or not _fits((1, *inputs[1:]), x):
        out.append((("data", "inputs"), f"examples of shape {inputs[1:]} do not fit the step's "
                                        f"inputs '{args[n]}'"))
    target_shape = (1, data.one_hot) if data.one_hot is not None else (1, *labels[1:])
    if y is None or not _fits(target_shape, y):
        what = (f"one-hot rows of {data.one_hot}" if data.one_hot
                else f"labels of shape {labels[1:]}")
        out.append((("data", "one_hot" if data.one_hot else "labels"),
                    f"{what} do not fit the step's targets '{args[n + 1]}'"))
    if lr is None or lr.rank != 0 or not lr.dtype.is_float:
        out.append((where, f"the step's last argument, the learning rate, must be a float "
                           f"scalar, found '{args[n + 2]}'"))
    if spec.evaluate is not None:
        fn = module.function(spec.evaluate)
        assert fn is not None
        ew: KeyPath = ("train", "evaluate", "function")
        if len(fn.type_.arguments) != n + 1:
            out.append((ew, f"'@{spec.evaluate}' must take (params…, inputs): {n + 1} "
                            f"arguments, it takes {len(fn.type_.arguments)}"))
        elif _tensor(module, fn.type_.result) is None:
            out.append((ew, f"'@{spec.evaluate}' must return a tensor of scores"))
    return out


# ---------------------------------------------------------------- data


@dataclass
class Dataset:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    labels_test: np.ndarray

    @staticmethod
    def load(spec: DataSpec, x_dtype: Any, y_dtype: Any) -> Dataset:
        with np.load(spec.path) as npz:
            inputs, labels = npz[spec.inputs], npz[spec.labels]
        x = (inputs.astype(np.float64) * spec.scale).astype(x_dtype)
        targets = (np.eye(spec.one_hot, dtype=y_dtype)[labels] if spec.one_hot is not None
                   else labels.astype(y_dtype))
        order = np.random.default_rng(spec.split_seed).permutation(len(x))
        n_test = round(len(x) * spec.test_fraction)
        test, train = order[:n_test], order[n_test:]
        return Dataset(x[train], targets[train], x[test], labels[test])


def batches(n: int, size: int, seed: int, epoch: int) -> Iterator[np.ndarray]:
    """Shuffled index batches; the order depends only on (seed, epoch), so resuming repeats it."""
    order = np.random.default_rng([seed, epoch]).permutation(n)
    for start in range(0, n, size):
        yield order[start:start + size]


# ---------------------------------------------------------------- parameters


def initial_parameters(spec: TrainSpec, types: list[TensorType]) -> dict[str, np.ndarray]:
    if spec.load is not None:
        return load_parameters(spec.load, spec.parameters, types)
    rng = np.random.default_rng(spec.init_seed)
    out = {}
    for name, t in zip(spec.parameters, types, strict=True):
        shape = tuple(int(d) for d in t.shape)  # type: ignore[arg-type]
        out[name] = init(spec.init[name], shape, rng, spec.init_scale).astype(
            NP_DTYPES[str(t.dtype)])
    return out


def init(scheme: str, shape: tuple[int, ...], rng: np.random.Generator,
         scale: float) -> np.ndarray:
    """zeros; normal(0, scale); glorot: uniform ±√(6/(fan_in + fan_out)), zeros below rank 2."""
    if scheme == "zeros" or (scheme == "glorot" and len(shape) < 2):
        return np.zeros(shape)
    if scheme == "normal":
        return rng.normal(0.0, scale, shape)
    fan_in, fan_out = math.prod(shape[:-1]), shape[-1]
    limit = math.sqrt(6.0 / (fan_in + fan_out))
    return rng.uniform(-limit, limit, shape)


def load_parameters(path: Path, names: list[str], types: list[TensorType]
                    ) -> dict[str, np.ndarray]:
    with np.load(path) as npz:
        missing = [n for n in names if n not in npz.files]
        if missing:
            raise ir.DlvmError(f"'{path}' has no parameter '{missing[0]}' "
                               f"(it has {', '.join(npz.files)})")
        out = {n: npz[n] for n in names}
    for (name, value), t in zip(out.items(), types, strict=True):
        if not _fits(value.shape, t):
            raise ir.DlvmError(f"'{path}': parameter '{name}' has shape {value.shape}, "
                               f"expected '{t}'")
    return out


def save_checkpoint(path: Path, params: dict[str, np.ndarray], epoch: int) -> None:
    """Write atomically: a temporary file renamed over the old checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        np.savez(f, **params, **{EPOCH_KEY: np.int64(epoch)})
    os.replace(tmp, path)


# ---------------------------------------------------------------- the loop


class Interrupt:
    """Ctrl-C sets a flag; the loop stops after the current step."""

    def __init__(self) -> None:
        self.requested = False

    @contextmanager
    def installed(self) -> Iterator[None]:
        def handler(signum: int, frame: Any) -> None:
            self.requested = True

        try:
            previous = signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main thread: no handler, Ctrl-C raises as usual
            yield
            return
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)


@dataclass
class TrainResult:
    epochs_done: int
    loss: float | None
    accuracy: float | None
    interrupted: bool


def accuracy(scores: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(scores, axis=-1) == labels))


def train(exe: Any, module: ir.Module, spec: TrainSpec, data: DataSpec, reporter: Reporter,
          resume: bool) -> TrainResult:
    step = module.function(spec.step)
    assert step is not None
    n = len(spec.parameters)
    types = [_tensor(module, t) for t in step.type_.arguments]
    x_t, y_t, lr_t = types[n], types[n + 1], types[n + 2]
    assert x_t is not None and y_t is not None and lr_t is not None
    dataset = Dataset.load(data, NP_DTYPES[str(x_t.dtype)], NP_DTYPES[str(y_t.dtype)])
    start = 0
    if resume:
        assert spec.checkpoint is not None
        params = load_parameters(spec.checkpoint, spec.parameters, types[:n])  # type: ignore[arg-type]
        with np.load(spec.checkpoint) as npz:
            start = int(npz[EPOCH_KEY]) if EPOCH_KEY in npz.files else 0
        reporter.log(f"resuming from '{spec.checkpoint}' after epoch {start}")
    else:
        params = initial_parameters(spec, types[:n])  # type: ignore[arg-type]
    if spec.metrics is not None and not resume and spec.metrics.exists():
        spec.metrics.unlink()  # a fresh run starts a fresh metrics file
    lr_dtype = NP_DTYPES[str(lr_t.dtype)]
    interrupt = Interrupt()
    result = TrainResult(start, None, None, False)
    size = len(dataset.x_train)
    steps_per_epoch = math.ceil(size / spec.batch_size) if size else 0
    with interrupt.installed(), reporter.training(spec.epochs, start, steps_per_epoch) as bar:
        for epoch in range(start, spec.epochs):
            lr = lr_dtype(spec.learning_rate / (1.0 + spec.decay * epoch))
            began, losses = time.perf_counter(), []
            for batch in batches(size, spec.batch_size, spec.shuffle_seed, epoch):
                out = exe.call(spec.step, *params.values(), dataset.x_train[batch],
                               dataset.y_train[batch], lr)
                params = dict(zip(spec.parameters, out[:n], strict=True))
                losses.append(float(out[n]) * len(batch))
                bar.step(float(out[n]))
                if interrupt.requested:
                    break
            if interrupt.requested:
                result.interrupted = True
                break
            seconds = time.perf_counter() - began
            result.loss = sum(losses) / max(size, 1)
            if spec.evaluate is not None and len(dataset.x_test):
                scores = exe.call(spec.evaluate, *params.values(), dataset.x_test)[0]
                result.accuracy = accuracy(scores, dataset.labels_test)
            result.epochs_done = epoch + 1
            if spec.checkpoint is not None:
                save_checkpoint(spec.checkpoint, params, epoch + 1)
            record = {"epoch": epoch + 1, "loss": result.loss, "learning_rate": float(lr),
                      "seconds": seconds, "examples_per_second": size / seconds if seconds else
                      None}
            if result.accuracy is not None:
                record[spec.metric] = result.accuracy
            if spec.metrics is not None:
                spec.metrics.parent.mkdir(parents=True, exist_ok=True)
                with open(spec.metrics, "a", encoding="utf-8") as f:
                    f.write(json.dumps(record) + "\n")
            bar.epoch(record)
    return result
