"""A small model library on the staged language: layers, optimizers, a training step.

Parameters are named arrays (`"dense1.w"`, …): a model lists them with their types
(`model.parameters()`), makes initial values (`model.init(rng)`), and computes with staged
values for them (`model(params, x)`, `params` a dict of staged values). An optimizer is a
staged update with its own state arrays (`SGD(momentum=…)`, `Adam(…)`), and
`training_step(model, loss, optimizer)` is the staged function `dlvm run` trains with:

    (parameters…, optimizer state…, inputs, targets, learning_rate)
        -> (parameters…, optimizer state…, loss)

its gradient a `[gradient …]` declaration of the loss that the `differentiation` pass writes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dlvm.ir.runtime import numpy_dtype

from . import ops
from .checks import (
    NON_NEGATIVE,
    POSITIVE,
    Interval,
    check_callable,
    check_dtype,
    check_int,
    check_mapping,
    check_name,
    check_real,
    check_rng,
    check_sequence,
    describe,
    wrong,
)
from .errors import value_error
from .staging import StagedFunction, StagedTensor, gradient, lambda_
from .types import TensorSpec, check_spec, f32

Params = Mapping[str, Any]

# hyper-parameters: name → the numbers it may take
SGD_RULES = {"momentum": Interval(0, 1, high_open=True)}
ADAM_RULES = {"beta1": Interval(0, 1, high_open=True), "beta2": Interval(0, 1, high_open=True),
              "eps": POSITIVE}
LEARNING_RATE = NON_NEGATIVE
# what a layer, a model and an optimizer must have
LAYER_METHODS = ("parameters", "init", "__call__")
OPTIMIZER_METHODS = ("state", "update")


def _checked_numbers(obj: Any, rules: dict[str, Interval]) -> None:
    """Each hyper-parameter of a (frozen) dataclass checked, and kept as a Python float."""
    for name, within in rules.items():
        value = check_real(getattr(obj, name), f"{name} of nnkit.{type(obj).__name__}", within)
        object.__setattr__(obj, name, value)


def _checked_layer(obj: Any, sizes: Sequence[str]) -> None:
    """A layer's sizes (positive integers), name and element type checked."""
    kind = f"nnkit.{type(obj).__name__}"
    for size in sizes:
        object.__setattr__(obj, size, check_int(getattr(obj, size), f"{size} of {kind}",
                                                minimum=1))
    check_name(obj.name, f"the name of {kind}")
    check_dtype(obj.dtype, f"the dtype of {kind}", kinds=("float",))


def _parameters_of(layer: Any, params: Any) -> Params:
    """`params` as a layer reads it: a dict that holds each of the layer's parameters."""
    names = [n for n, _ in layer.parameters()]
    return check_mapping(params, f"the parameters given to nnkit.{type(layer).__name__} "
                         f"'{layer.name}'", names, "its parameters")


def _has_methods(obj: Any, methods: Sequence[str], what: str, expected: str) -> None:
    if isinstance(obj, type) or not all(callable(getattr(obj, m, None)) for m in methods):
        raise wrong(what, expected, obj)


# ---------------------------------------------------------------- layers


@dataclass(frozen=True)
class Dense:
    """x·w + b, then `activation` (a staged function of one value, or None)."""

    inputs: int
    outputs: int
    activation: Callable[[Any], Any] | None = None
    name: str = "dense"
    dtype: Any = f32

    def __post_init__(self) -> None:
        _checked_layer(self, ("inputs", "outputs"))
        if self.activation is not None:
            check_callable(self.activation, "the activation of nnkit.Dense",
                           "a function of one staged tensor (nnkit.tanh, …) or None")

    def parameters(self) -> list[tuple[str, TensorSpec]]:
        return [(f"{self.name}_w", TensorSpec(self.dtype, (self.inputs, self.outputs))),
                (f"{self.name}_b", TensorSpec(self.dtype, (self.outputs,)))]

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Glorot-uniform weights, zero biases."""
        check_rng(rng, "the generator of nnkit.Dense.init")
        limit = math.sqrt(6 / (self.inputs + self.outputs))
        dt = numpy_dtype(self.dtype)
        return {f"{self.name}_w": rng.uniform(-limit, limit, (self.inputs, self.outputs)
                                              ).astype(dt),
                f"{self.name}_b": np.zeros(self.outputs, dt)}

    def __call__(self, params: Params, x: Any) -> Any:
        p = _parameters_of(self, params)
        y = x @ p[f"{self.name}_w"] + p[f"{self.name}_b"]
        return self.activation(y) if self.activation is not None else y


@dataclass(frozen=True)
class RNNCell:
    """h' = tanh(x·wx + h·wh + b): the recurrent step of an Elman network (apply it in a
    `fori_loop`)."""

    inputs: int
    hidden: int
    name: str = "rnn"
    dtype: Any = f32

    def __post_init__(self) -> None:
        _checked_layer(self, ("inputs", "hidden"))

    def parameters(self) -> list[tuple[str, TensorSpec]]:
        return [(f"{self.name}_wx", TensorSpec(self.dtype, (self.inputs, self.hidden))),
                (f"{self.name}_wh", TensorSpec(self.dtype, (self.hidden, self.hidden))),
                (f"{self.name}_b", TensorSpec(self.dtype, (self.hidden,)))]

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        check_rng(rng, "the generator of nnkit.RNNCell.init")
        dt = numpy_dtype(self.dtype)
        sx = math.sqrt(1 / self.inputs)
        sh = math.sqrt(1 / self.hidden)
        return {f"{self.name}_wx": rng.uniform(-sx, sx, (self.inputs, self.hidden)).astype(dt),
                f"{self.name}_wh": rng.uniform(-sh, sh, (self.hidden, self.hidden)).astype(dt),
                f"{self.name}_b": np.zeros(self.hidden, dt)}

    def __call__(self, params: Params, x: Any, h: Any) -> Any:
        p = _parameters_of(self, params)
        n = self.name
        return ops.tanh(x @ p[f"{n}_wx"] + h @ p[f"{n}_wh"] + p[f"{n}_b"])


@dataclass(frozen=True)
class Sequential:
    """Layers applied in order."""

    layers: Sequence[Any]

    def __post_init__(self) -> None:
        layers = tuple(check_sequence(self.layers, "the layers of nnkit.Sequential",
                                      "a list of layers"))
        for k, layer in enumerate(layers):
            _has_methods(layer, LAYER_METHODS, f"layer {k} of nnkit.Sequential",
                         "a layer (nnkit.Dense, …)")
        object.__setattr__(self, "layers", layers)
        self.parameters()  # parameter names apart, or an error now

    def parameters(self) -> list[tuple[str, TensorSpec]]:
        out = [p for layer in self.layers for p in layer.parameters()]
        names = [n for n, _ in out]
        if len(set(names)) != len(names):
            shared = sorted({n for n in names if names.count(n) > 1})
            raise value_error(f"the layers of nnkit.Sequential share parameter names "
                              f"({', '.join(shared)}): give the layers different names")
        return out

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        check_rng(rng, "the generator of nnkit.Sequential.init")
        return {k: v for layer in self.layers for k, v in layer.init(rng).items()}

    def __call__(self, params: Params, x: Any) -> Any:
        for layer in self.layers:
            x = layer(params, x)
        return x


# ---------------------------------------------------------------- optimizers


@dataclass(frozen=True)
class SGD:
    """p ← p − lr·g, or with momentum μ (0 ≤ μ < 1): v ← μ·v + g, p ← p − lr·v."""

    momentum: float = 0.0

    def __post_init__(self) -> None:
        _checked_numbers(self, SGD_RULES)

    def state(self, params: Sequence[tuple[str, TensorSpec]]) -> list[tuple[str, TensorSpec]]:
        return [(f"{n}_velocity", s) for n, s in params] if self.momentum else []

    def update(self, p: Params, g: Params, state: Params, lr: Any,
               names: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        new_p, new_s = {}, {}
        for n in names:
            step = g[n]
            if self.momentum:
                step = new_s[f"{n}_velocity"] = state[f"{n}_velocity"] * self.momentum + g[n]
            new_p[n] = p[n] - step * lr
        return new_p, new_s


@dataclass(frozen=True)
class Adam:
    """Adam (Kingma & Ba): m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², with bias correction
    through the step count t, p ← p − lr·m̂/(√v̂ + ε); 0 ≤ β₁, β₂ < 1 and ε > 0."""

    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    def __post_init__(self) -> None:
        _checked_numbers(self, ADAM_RULES)

    def state(self, params: Sequence[tuple[str, TensorSpec]]) -> list[tuple[str, TensorSpec]]:
        dtype = params[0][1].dtype if params else f32
        out = [(f"{n}_m", s) for n, s in params] + [(f"{n}_v", s) for n, s in params]
        return [*out, ("adam_t", TensorSpec(dtype, ()))]

    def update(self, p: Params, g: Params, state: Params, lr: Any,
               names: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
        t = state["adam_t"] + 1.0
        c1, c2 = _bias_correction(t, self.beta1), _bias_correction(t, self.beta2)
        new_p, new_s = {}, {"adam_t": t}
        for n in names:
            m = state[f"{n}_m"] * self.beta1 + g[n] * (1.0 - self.beta1)
            v = state[f"{n}_v"] * self.beta2 + ops.square(g[n]) * (1.0 - self.beta2)
            new_s[f"{n}_m"], new_s[f"{n}_v"] = m, v
            new_p[n] = p[n] - (m / c1) * lr / (ops.sqrt(v / c2) + self.eps)
        return new_p, new_s


def _bias_correction(t: Any, beta: float) -> Any:
    """1 − βᵗ, as 1 − e^(t·log β) (1 for β = 0)."""
    return 1.0 - ops.exp(t * math.log(beta)) if beta else 1.0


# ---------------------------------------------------------------- training


@dataclass
class TrainingProgram:
    """The staged functions of a model's training: `loss`, `predict`, `step` and
    `evaluate`."""

    model: Any
    loss: StagedFunction
    predict: StagedFunction
    step: StagedFunction
    parameter_names: list[str]
    state_names: list[str]
    state_specs: list[TensorSpec] = field(default_factory=list)
    #: `predict` taking the optimizer's state too, as `dlvm run` evaluates with every
    #: trained array: (parameters…, state…, x)
    evaluate: StagedFunction | None = None

    def __post_init__(self) -> None:
        what = "nnkit.TrainingProgram"
        _has_methods(self.model, LAYER_METHODS, f"the model of {what}",
                     "a model (nnkit.Sequential, nnkit.Dense, …)")
        for role in ("loss", "predict", "step", "evaluate"):
            value = getattr(self, role)
            if not isinstance(value, StagedFunction) and (role != "evaluate" or
                                                          value is not None):
                raise wrong(f"the {role} of {what}", "a staged function", value)
        for role in ("parameter_names", "state_names"):
            names = check_sequence(getattr(self, role), f"the {role} of {what}",
                                   "a list of names")
            for k, n in enumerate(names):
                check_name(n, f"the {role}[{k}] of {what}")
        specs = check_sequence(self.state_specs, f"the state_specs of {what}",
                               "a list of tensor types")
        for k, spec in enumerate(specs):
            check_spec(spec, f"the state_specs[{k}] of {what}")
        if len(specs) != len(self.state_names):
            raise value_error(f"{what} has {len(self.state_names)} state names and "
                              f"{len(specs)} state types")

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Initial parameters (the model's initializers) and optimizer state (zeros)."""
        values = self.model.init(check_rng(rng, "the generator of TrainingProgram.init"))
        for name, spec in zip(self.state_names, self.state_specs, strict=True):
            values[name] = np.zeros([d or 0 for d in spec.shape], numpy_dtype(spec.dtype))
        return values

    def train_step(self, values: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                   lr: float) -> float:
        """One step on numpy data, updating `values` in place (a dict that holds every
        parameter and state array, as `init` makes it); the loss."""
        names = [*self.parameter_names, *self.state_names]
        check_mapping(values, "the values of TrainingProgram.train_step", names,
                      "the parameters and optimizer state, as TrainingProgram.init makes them")
        rate = check_real(lr, "the learning rate of TrainingProgram.train_step",
                          LEARNING_RATE)
        lr_spec = self.step.arg_specs[-1] if self.step.arg_specs else TensorSpec(f32, ())
        out = self.step(*(values[n] for n in names), x, y,
                        numpy_dtype(lr_spec.dtype).type(rate))
        for n, v in zip(names, out[:-1], strict=True):
            values[n] = v
        return float(out[-1])


def training(model: Any, loss_fn: Callable[[Any, Any], Any], optimizer: Any, *,
             inputs: TensorSpec, targets: TensorSpec) -> TrainingProgram:
    """The staged functions that train `model` on `loss_fn(model output, targets)` with
    `optimizer`: `loss(params…, x, y)`, its gradient, `predict(params…, x)`,
    `train_step(params…, state…, x, y, lr) -> (params…, state…, loss)` and
    `evaluate(params…, state…, x)` (predict, for `dlvm run`'s evaluation)."""
    _has_methods(model, LAYER_METHODS, "the model of nnkit.training",
                 "a model (nnkit.Sequential, nnkit.Dense, …)")
    check_callable(loss_fn, "the loss of nnkit.training",
                   "a function of the model's output and the targets (nnkit.cross_entropy, …)")
    _has_methods(optimizer, OPTIMIZER_METHODS, "the optimizer of nnkit.training",
                 "an optimizer (nnkit.SGD(), nnkit.Adam(), …)")
    check_spec(inputs, "inputs of nnkit.training")
    check_spec(targets, "targets of nnkit.training")
    params = model.parameters()
    if not params:
        raise value_error("the model of nnkit.training has no parameters to train "
                          f"({describe(model)})")
    names = [n for n, _ in params]
    specs = [s for _, s in params]
    state = optimizer.state(params)
    state_names = [n for n, _ in state]
    state_specs = [s for _, s in state]
    n = len(names)

    def loss(*args: StagedTensor) -> StagedTensor:
        p = dict(zip(names, args[:n], strict=True))
        return loss_fn(model(p, args[n]), args[n + 1])

    def predict(*args: StagedTensor) -> StagedTensor:
        return model(dict(zip(names, args[:n], strict=True)), args[n])

    staged_loss = lambda_(_named(loss, [*names, "x", "y"]), [*specs, inputs, targets],
                          name="loss")
    staged_predict = lambda_(_named(predict, [*names, "x"]), [*specs, inputs],
                             name="predict")

    def evaluate(*args: StagedTensor) -> StagedTensor:  # the optimizer's state: unused
        return model(dict(zip(names, args[:n], strict=True)), args[-1])

    staged_evaluate = lambda_(_named(evaluate, [*names, *state_names, "x"]),
                              [*specs, *state_specs, inputs], name="evaluate")
    dloss = gradient(staged_loss, wrt=tuple(range(n)), keeping=0, name="dloss")

    def step(*args: StagedTensor) -> tuple[StagedTensor, ...]:
        p = dict(zip(names, args[:n], strict=True))
        s = dict(zip(state_names, args[n:n + len(state)], strict=True))
        x, y, lr = args[n + len(state):]
        grads = dloss[(*args[:n], x, y)]
        g = dict(zip(names, grads[:n], strict=True))
        new_p, new_s = optimizer.update(p, g, s, lr, names)
        return (*(new_p[k] for k in names), *(new_s[k] for k in state_names), grads[n])

    lr_spec = TensorSpec(specs[0].dtype if specs else f32, ())
    staged_step = lambda_(_named(step, [*names, *state_names, "x", "y", "lr"]),
                          [*specs, *state_specs, inputs, targets, lr_spec], name="train_step")
    return TrainingProgram(model, staged_loss, staged_predict, staged_step, names,
                           state_names, state_specs, staged_evaluate)


def _named(fn: Callable[..., Any], names: list[str]) -> Callable[..., Any]:
    """`fn(*args)` with a signature of the given parameter names (so the IR names its
    arguments after the parameters, as `dlvm run` finds them)."""
    import inspect

    def staged(*args: Any) -> Any:
        return fn(*args)

    staged.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names])
    staged.__name__ = getattr(fn, "__name__", "f")
    return staged
