"""Training: repeat a step function over shuffled mini-batches, evaluate, checkpoint.

The step function's contract is `(params…, inputs, targets, learning_rate) ->
(params…, loss)`; the evaluation function's is `(params…, inputs) -> scores`.
Everything that can fail before the first step (the data, the learning rate, loaded
parameters) is prepared during validation. After each epoch the metrics record is
appended first and the checkpoint (parameters by name and `epoch`, the epochs
completed) written atomically after it, so a kill between the two leaves a record
that a resume drops, never a checkpoint whose epoch the metrics lack.
"""

from __future__ import annotations

import json
import math
import signal
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import dlvm.ir as ir
from dlvm.cli import errors
from dlvm.ir import files
from dlvm.ir.runtime import convert_argument, numpy_dtype
from dlvm.ir.types import TensorType

from .files import open_npz, save_npz, save_text
from .loss_scale import SMALLEST, DynamicLossScale
from .progress import Display, Reporter
from .spec import DataSpec, KeyedError, KeyPath, TrainSpec

EPOCH_KEY = "epoch"


def tensor_type(module: ir.Module, t: ir.Type) -> TensorType | None:
    t = module.resolve(t)
    return t if isinstance(t, TensorType) else None


def _fits(shape: tuple[int, ...], t: TensorType) -> bool:
    return len(shape) == t.rank and all(d is None or d == s for d, s in zip(t.shape, shape,
                                                                             strict=True))


def _batch_of(t: TensorType) -> TensorType:
    """`t` with any number of rows: the type of a whole dataset of its examples."""
    return t.with_shape((None, *t.shape[1:]))


def _convert(value: Any, t: TensorType, path: KeyPath, what: str) -> np.ndarray:
    """`convert_argument`, the rules of every target, with the key to blame on failure."""
    try:
        return convert_argument(value, t, what)
    except ir.DlvmError as e:
        raise KeyedError(path, str(e)) from None


# ---------------------------------------------------------------- validation


def check_data(spec: DataSpec, inputs: np.ndarray, labels: np.ndarray
               ) -> list[tuple[KeyPath, str]]:
    """Problems with the dataset itself: numbers, one example per row, labels in range."""
    out: list[tuple[KeyPath, str]] = []
    for key, name, arr in (("inputs", spec.inputs, inputs), ("labels", spec.labels, labels)):
        if arr.dtype.kind not in "biuf":
            out.append((("data", key), f"'{name}' holds {arr.dtype} values, not numbers"))
        elif arr.ndim == 0:
            out.append((("data", key), f"'{name}' is a single value; it needs one example "
                                       "per row"))
    if out:
        return out
    if len(inputs) != len(labels):
        out.append((("data", "labels"), f"{len(labels)} labels for {len(inputs)} inputs"))
    elif len(inputs) == 0:
        out.append((("data", "path"), f"'{spec.path.name}' holds no examples ('{spec.inputs}' "
                                      "has 0 rows)"))
    k = spec.one_hot
    if k is not None:
        if labels.ndim != 1 or labels.dtype.kind not in "iu":
            out.append((("data", "one_hot"), f"one_hot needs integer labels of one dimension, "
                                             f"found {labels.dtype} of shape {labels.shape}"))
        else:
            bad = (labels < 0) | (labels >= k)
            if bad.any():
                row = int(np.argmax(bad))
                out.append((("data", "labels"), f"label {labels[row]} in row {row} of "
                                                f"'{spec.labels}' is outside 0..{k - 1} "
                                                f"(one_hot = {k})"))
    return out


def check_signatures(module: ir.Module, spec: TrainSpec, data: DataSpec
                     ) -> list[tuple[KeyPath, str]]:
    """Problems with the step and evaluation functions against the data."""
    out: list[tuple[KeyPath, str]] = []
    step = module.function(spec.step)
    assert step is not None and data.arrays is not None
    n = len(spec.parameters)
    args = step.type_.arguments
    result = module.resolve(step.type_.result)
    results = result.elements if isinstance(result, ir.TupleType) else (result,)
    where: KeyPath = ("train", "step")
    if len(results) != n + 1:
        out.append((where, f"'@{spec.step}' must return (params…, loss): {n + 1} values, "
                           f"it returns {len(results)}"))
    else:
        loss = tensor_type(module, results[n])
        if loss is None or loss.rank != 0 or not loss.dtype.is_float:
            out.append((where, f"the loss '@{spec.step}' returns must be a float scalar, "
                               f"found '{results[n]}'"))
    for i, name in enumerate(spec.parameters):
        t = tensor_type(module, args[i])
        if t is None:
            out.append((where, f"parameter '{name}' of type '{args[i]}' must be a tensor"))
        elif (spec.load is None and spec.init_function is None
              and (not t.dtype.is_float or any(d is None for d in t.shape))):
            out.append((where, f"parameter '{name}' of type '{args[i]}' must be a float "
                               "tensor of static shape to be initialized"))
        if t is not None and i < len(results) and module.resolve(results[i]) != t:
            out.append((where, f"'@{spec.step}' returns '{results[i]}' for parameter "
                               f"'{name}' of type '{t}'"))
    x, y, lr = (tensor_type(module, a) for a in args[n:])
    inputs, labels = (a.shape for a in data.arrays)
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
        out += check_evaluation(module, spec, args[:n + 1], inputs)
    if spec.init_function is not None:
        out += check_init_function(module, spec, args[:n])
    return out


def check_evaluation(module: ir.Module, spec: TrainSpec, step_args: Sequence[ir.Type],
                     inputs: tuple[int, ...]) -> list[tuple[KeyPath, str]]:
    """The evaluation takes the step's leading parameters — all of them, or the model's
    without the optimizer state that follows them — and the inputs, and returns scores of
    shape [examples, classes]."""
    fn = module.function(spec.evaluate or "")
    assert fn is not None
    where: KeyPath = ("train", "evaluate", "function")
    n = len(spec.parameters)
    args = fn.type_.arguments
    k = len(args) - 1
    if not 0 <= k <= n:
        return [(where, f"'@{spec.evaluate}' must take (params…, inputs): the step's first "
                        f"parameters (at most {n}) and the inputs; it takes {len(args)} "
                        f"argument{'s' * (len(args) != 1)}")]
    out: list[tuple[KeyPath, str]] = []
    for i, name in enumerate(spec.parameters[:k]):
        if module.resolve(args[i]) != module.resolve(step_args[i]):
            out.append((where, f"'@{spec.evaluate}' takes '{args[i]}' for parameter "
                               f"'{name}', the step '{step_args[i]}'"))
    x = tensor_type(module, args[k])
    if x is None or not _fits((1, *inputs[1:]), x):
        out.append((where, f"examples of shape {inputs[1:]} do not fit the inputs "
                           f"'{args[k]}' of '@{spec.evaluate}'"))
    scores = tensor_type(module, fn.type_.result)
    if scores is None or scores.rank != 2:
        out.append((where, f"'@{spec.evaluate}' must return scores of shape [examples, "
                           f"classes], found '{fn.type_.result}'"))
    return out


def check_init_function(module: ir.Module, spec: TrainSpec, params: Sequence[ir.Type]
                        ) -> list[tuple[KeyPath, str]]:
    """The initialization takes nothing and returns the step's parameters: a tuple of their
    types (an alias will do), or the one parameter itself."""
    fn = module.function(spec.init_function or "")
    assert fn is not None
    where: KeyPath = ("train", "init_function")
    name = spec.init_function
    if fn.type_.arguments:
        k = len(fn.type_.arguments)
        return [(where, f"'@{name}' must take no arguments (it returns the initial "
                        f"parameters); it takes {k} argument{'s' if k > 1 else ''}")]
    result = module.resolve(fn.type_.result)
    results = result.elements if isinstance(result, ir.TupleType) else (fn.type_.result,)
    if len(results) != len(params):
        return [(where, f"'@{name}' must return one value per parameter "
                        f"({', '.join(spec.parameters)}), {len(params)} in all; it returns "
                        f"{len(results)}")]
    return [(where, f"'@{name}' returns '{r}' for parameter '{p}' of type '{t}'")
            for p, r, t in zip(spec.parameters, results, params, strict=True)
            if module.resolve(r) != module.resolve(t)]


def prepare(module: ir.Module, spec: TrainSpec, data: DataSpec, resume: bool) -> None:
    """What training needs that can fail before its first step, found during validation:
    the dataset in the step's types, the learning rate, the initial or resumed parameters.
    Raises KeyedError naming the key at fault."""
    step = module.function(spec.step)
    assert step is not None
    types = [tensor_type(module, t) for t in step.type_.arguments]
    n = len(spec.parameters)
    x_t, y_t, lr_t = types[n:]
    assert x_t is not None and y_t is not None and lr_t is not None
    spec.dataset = Dataset.build(data, x_t, y_t)
    total = len(data.arrays[0]) if data.arrays is not None else 0
    if not len(spec.dataset.x_train):
        raise KeyedError(("data", "test_fraction"), f"holds out all {total} examples; none "
                                                    "are left to train on")
    if spec.evaluate is not None and not len(spec.dataset.x_test):
        raise KeyedError(("data", "test_fraction"), f"holds out none of the {total} examples, "
                                                    "so train.evaluate has nothing to evaluate")
    _convert(np.float64(spec.learning_rate), lr_t, ("train", "learning_rate"),
             "the learning rate")
    if spec.evaluate is not None:
        evaluate = module.function(spec.evaluate)
        assert evaluate is not None
        spec.evaluate_parameters = len(evaluate.type_.arguments) - 1
    param_types: list[TensorType] = [t for t in types[:n] if t is not None]
    if resume and spec.checkpoint is not None:
        spec.initial, spec.start_epoch = read_checkpoint(spec.checkpoint, spec.parameters,
                                                         param_types)
    elif spec.load is not None:
        spec.initial = read_parameters(spec.load, spec.parameters, param_types,
                                       ("train", "load"))


# ---------------------------------------------------------------- data


@dataclass
class Dataset:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    labels_test: np.ndarray

    @staticmethod
    def build(spec: DataSpec, x_t: TensorType, y_t: TensorType) -> Dataset:
        """The examples as the step takes them, split into training and held-out rows."""
        assert spec.arrays is not None
        inputs, labels = spec.arrays
        x = _convert(scaled(inputs, spec.scale), _batch_of(x_t), ("data", "inputs"),
                     f"'{spec.path.name}' array '{spec.inputs}'")
        if spec.one_hot is not None:
            y = _convert(one_hot(labels, spec.one_hot), _batch_of(y_t), ("data", "one_hot"),
                         f"one-hot rows of {spec.one_hot}")
        else:
            y = _convert(labels, _batch_of(y_t), ("data", "labels"),
                         f"'{spec.path.name}' array '{spec.labels}'")
        order = np.random.default_rng(spec.split_seed).permutation(len(x))
        n_test = round(len(x) * spec.test_fraction)
        test, train = order[:n_test], order[n_test:]
        return Dataset(x[train], y[train], x[test], labels[test])


def scaled(inputs: np.ndarray, scale: float) -> np.ndarray:
    """`inputs · scale` (in float64); untouched for a scale of 1, so integers stay integers."""
    if scale == 1:
        return inputs
    with np.errstate(all="ignore"):
        out = inputs.astype(np.float64) * scale
    overflow = ~np.isfinite(out) & np.isfinite(inputs)
    if overflow.any():
        raise KeyedError(("data", "scale"), f"inputs times {scale:g} overflow (e.g. "
                                            f"{inputs[overflow].flat[0]})")
    return out


def one_hot(labels: np.ndarray, classes: int) -> np.ndarray:
    """Rows of `classes` booleans, True at each label (booleans convert to any dtype)."""
    rows = np.zeros((len(labels), classes), dtype=np.bool_)
    rows[np.arange(len(labels)), labels] = True
    return rows


def batches(n: int, size: int, seed: int, epoch: int) -> Iterator[np.ndarray]:
    """Shuffled index batches; the order depends only on (seed, epoch), so resuming repeats it."""
    order = np.random.default_rng([seed, epoch]).permutation(n)
    for start in range(0, n, size):
        yield order[start:start + size]


# ---------------------------------------------------------------- parameters


def initial_parameters(module: ir.Module, spec: TrainSpec, types: list[TensorType]
                       ) -> dict[str, np.ndarray]:
    """Resumed or loaded parameters (found by validation), else a fresh start."""
    if spec.initial is not None:
        return dict(spec.initial)
    if spec.init_function is not None:
        return run_init_function(module, spec, types)
    rng = np.random.default_rng(spec.init_seed)
    out = {}
    for name, t in zip(spec.parameters, types, strict=True):
        shape = tuple(int(d) for d in t.shape)  # type: ignore[arg-type]
        out[name] = init(spec.init[name], shape, rng, spec.init_scale).astype(
            numpy_dtype(t.dtype))
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


def run_init_function(module: ir.Module, spec: TrainSpec, types: list[TensorType]
                      ) -> dict[str, np.ndarray]:
    """What `init_function` returns, computed by the reference interpreter seeded with
    `init_seed`, so that the parameters are reproducible and the same on every target."""
    name = spec.init_function
    assert name is not None
    what = f"train.init_function: '@{name}'"
    try:
        values = ir.compile(module, "interp", seed=spec.init_seed).call(name)
    except ir.DlvmError as e:
        detail = "; ".join(line.strip() for line in str(e).splitlines() if line.strip())
        raise ir.DlvmError(f"{what} failed: {detail or type(e).__name__}") from None
    out = {}
    for param, t, value in zip(spec.parameters, types, values, strict=True):
        arr = convert_argument(value, t, f"{what}: parameter '{param}'")
        bad = (np.argwhere(~np.isfinite(arr)) if arr.dtype.kind in "fc"
               else np.empty((0, arr.ndim), np.intp))
        if len(bad):
            at = tuple(int(i) for i in bad[0])
            index = f" at index {at}" if at else ""
            raise ir.DlvmError(f"{what} returns {arr[at]} for parameter '{param}'{index}; "
                               "the initial parameters must be finite")
        out[param] = arr
    return out


def read_parameters(path: Path, names: list[str], types: list[TensorType],
                    key: KeyPath) -> dict[str, np.ndarray]:
    """Parameters by name from an .npz, each converted to its type by the targets' rules."""
    try:
        with open_npz(path) as npz:
            return {name: convert_argument(npz.array(name, "parameter"), t,
                                           f"'{path.name}': parameter '{name}'")
                    for name, t in zip(names, types, strict=True)}
    except ir.DlvmError as e:
        raise KeyedError(key, str(e)) from None


def read_checkpoint(path: Path, names: list[str], types: list[TensorType]
                    ) -> tuple[dict[str, np.ndarray], int]:
    """A checkpoint's parameters and its epoch (0 for a parameter file without one)."""
    key: KeyPath = ("train", "checkpoint")
    params = read_parameters(path, names, types, key)
    try:
        with open_npz(path) as npz:
            if not npz.has(EPOCH_KEY):
                return params, 0
            epoch = npz.array(EPOCH_KEY)
    except ir.DlvmError as e:
        raise KeyedError(key, str(e)) from None
    if epoch.ndim != 0 or epoch.dtype.kind not in "iu" or int(epoch) < 0:
        raise KeyedError(key, f"'{path.name}': '{EPOCH_KEY}' must be a count of epochs, "
                              f"found {epoch.dtype} {epoch.tolist()!r}")
    return params, int(epoch)


def save_checkpoint(path: Path, params: dict[str, np.ndarray], epoch: int) -> None:
    """Write atomically: a temporary file renamed over the old checkpoint."""
    save_npz(path, {**params, EPOCH_KEY: np.int64(epoch)}, what="checkpoint")


# ---------------------------------------------------------------- metrics


def append_metrics(path: Path, record: dict[str, Any]) -> None:
    """One JSON line; NaN and infinities (with `allow_nonfinite`) are written as null."""
    finite = {k: (v if not isinstance(v, float) or math.isfinite(v) else None)
              for k, v in record.items()}
    files.append_text(path, json.dumps(finite, allow_nan=False) + "\n", what="metrics")


def reconcile_metrics(path: Path, epoch: int) -> None:
    """Make the metrics agree with a checkpoint at `epoch` before resuming from it: drop the
    records of later epochs and a torn last line (a kill left them), note missing epochs."""
    if not path.is_file():
        if epoch:
            errors.note(f"'{path}' holds no metrics of epochs 1..{epoch}")
        return
    data = files.read_input(path, what="metrics", limit=None)
    lines = data.decode("utf-8", errors="replace").splitlines(keepends=True)
    kept, seen, dropped, torn = [], set(), 0, False
    for i, line in enumerate(lines):
        record = _record(line)
        if record is None and i == len(lines) - 1 and not line.endswith("\n"):
            torn = True
            continue
        number = record.get("epoch") if isinstance(record, dict) else None
        if isinstance(number, int) and number > epoch:
            dropped += 1
            continue
        if isinstance(number, int):
            seen.add(number)
        kept.append(line)
    if dropped or torn:
        save_text(path, "".join(kept), what="metrics")
    if torn:
        errors.note(f"dropped the incomplete last line of '{path}'")
    if dropped:
        errors.note(f"dropped {dropped} record(s) of '{path}' after epoch {epoch}, the "
                    "checkpoint's")
    missing = sorted(set(range(1, epoch + 1)) - seen)
    if missing:
        errors.note(f"'{path}' lacks the metrics of epoch(s) {_ranges(missing)}")


def _record(line: str) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        return None


def _ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 5] → "1-3, 5"."""
    out: list[str] = []
    start = prev = numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)


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
    """The share of rows whose highest score is the label (or the one-hot row's class)."""
    classes = labels if labels.ndim == 1 else np.argmax(labels, axis=-1)
    return float(np.mean(np.argmax(scores, axis=-1) == classes))


def start_fresh(spec: TrainSpec) -> None:
    """A run without --resume starts with no metrics and no checkpoint: a new run folder has
    none, and validation refused to replace an earlier run's unless --overwrite said to."""
    for path in (spec.metrics, spec.checkpoint):
        if path is not None and path.is_file():
            try:
                path.unlink()
            except OSError as e:
                raise files.refused_write(path, "output", files.reason(e)) from None


def nonfinite(spec: TrainSpec, loss: float, epoch: int, step: int, done: int) -> ir.DlvmError:
    kept = (f"; '{spec.checkpoint}' keeps the parameters after epoch {done}"
            if spec.checkpoint is not None and done else "")
    return ir.DlvmError(f"training stopped: the loss is {loss} at epoch {epoch}, step {step}"
                        f"{kept} (set train.allow_nonfinite = true to go on)")


def train(exe: Any, module: ir.Module, spec: TrainSpec, reporter: Reporter,
          resume: bool) -> TrainResult:
    step = module.function(spec.step)
    assert step is not None and spec.dataset is not None
    n = len(spec.parameters)
    types = [tensor_type(module, t) for t in step.type_.arguments]
    lr_t = types[n + 2]
    assert lr_t is not None
    dataset = spec.dataset
    start = spec.start_epoch if resume else 0
    if resume:
        reporter.log(f"resuming from '{spec.checkpoint}' after epoch {start}")
        if spec.metrics is not None:
            reconcile_metrics(spec.metrics, start)
    params = initial_parameters(module, spec, types[:n])  # type: ignore[arg-type]
    if not resume:
        start_fresh(spec)  # after the initialization, which may fail: nothing lost then
    interrupt = Interrupt()
    result = TrainResult(start, None, None, False)
    scaler = (DynamicLossScale(spec.loss_scaling.initial, spec.loss_scaling.interval)
              if spec.loss_scaling is not None else None)
    size = len(dataset.x_train)
    steps_per_epoch = math.ceil(size / spec.batch_size)
    with interrupt.installed(), reporter.training(spec.epochs, start, steps_per_epoch) as bar:
        for epoch in range(start, spec.epochs):
            rate = spec.learning_rate / (1.0 + spec.decay * epoch)
            lr = convert_argument(np.float64(rate), lr_t, "the learning rate")
            began, losses, counted = time.perf_counter(), [], 0
            for number, batch in enumerate(batches(size, spec.batch_size, spec.shuffle_seed,
                                                    epoch), start=1):
                scale = () if scaler is None else (np.float32(scaler.scale),)
                out = exe.call(spec.step, *params.values(), dataset.x_train[batch],
                               dataset.y_train[batch], lr, *scale)
                params = dict(zip(spec.parameters, out[:n], strict=True))
                loss = float(out[n])
                skipped = False  # a step whose update was not made counts no loss
                if scaler is not None:
                    scaler.update(bool(out[n + 1]))
                    if scaler.diverged:
                        raise nonfinite_gradients(spec, epoch + 1, number, result.epochs_done)
                    skipped = not math.isfinite(loss)
                if not (skipped or math.isfinite(loss) or spec.allow_nonfinite):
                    raise nonfinite(spec, loss, epoch + 1, number, result.epochs_done)
                if not skipped:
                    losses.append(loss * len(batch))
                    counted += len(batch)
                bar.step(loss)
                if interrupt.requested:
                    break
            if interrupt.requested:
                result.interrupted = True
                break
            result.loss = sum(losses) / counted if counted else math.nan
            extra = None if scaler is None else {"loss_scale": scaler.scale,
                                                 "skipped_steps": scaler.take_skipped()}
            end_epoch(exe, spec, params, result, epoch, rate, time.perf_counter() - began, bar,
                      extra)
    return result


def nonfinite_gradients(spec: TrainSpec, epoch: int, step: int, done: int) -> ir.DlvmError:
    kept = (f"; '{spec.checkpoint}' keeps the parameters after epoch {done}"
            if spec.checkpoint is not None and done else "")
    return ir.DlvmError(f"training stopped: the gradients overflow f16 at every loss scale "
                        f"(down to {SMALLEST:g}) at epoch {epoch}, step {step}{kept}")


def end_epoch(exe: Any, spec: TrainSpec, params: dict[str, np.ndarray], result: TrainResult,
              epoch: int, rate: float, seconds: float, bar: Display,
              extra: dict[str, Any] | None = None) -> None:
    """After an epoch's steps (`result.loss` set): evaluate on the held-out split, append the
    metrics record (with an engine's `extra` entries), write the checkpoint. Every engine ends
    its epochs here, so their files and `--resume` agree."""
    dataset = spec.dataset
    assert dataset is not None
    size = len(dataset.x_train)
    if spec.evaluate is not None:
        bar.evaluating()
        model = list(params.values())[:spec.evaluate_parameters]
        scores = exe.call(spec.evaluate, *model, dataset.x_test)[0]
        result.accuracy = accuracy(scores, dataset.labels_test)
    record: dict[str, Any] = {"epoch": epoch + 1, "loss": result.loss, "learning_rate": rate,
                              "seconds": seconds,
                              "examples_per_second": size / seconds if seconds else None,
                              **(extra or {})}
    if result.accuracy is not None:
        record[spec.metric] = result.accuracy
    if spec.metrics is not None:
        append_metrics(spec.metrics, record)
    if spec.checkpoint is not None:
        save_checkpoint(spec.checkpoint, params, epoch + 1)
    result.epochs_done = epoch + 1
    bar.epoch(record)
