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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import ops
from .staging import Rep, StagedFunction, gradient, lambda_
from .types import TensorSpec, f32

Params = dict[str, Any]


# ---------------------------------------------------------------- layers


@dataclass
class Dense:
    """x·w + b, then `activation` (a staged function of one value, or None)."""

    inputs: int
    outputs: int
    activation: Callable[[Any], Any] | None = None
    name: str = "dense"
    dtype: Any = f32

    def parameters(self) -> list[tuple[str, TensorSpec]]:
        return [(f"{self.name}_w", TensorSpec(self.dtype, (self.inputs, self.outputs))),
                (f"{self.name}_b", TensorSpec(self.dtype, (self.outputs,)))]

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Glorot-uniform weights, zero biases."""
        limit = math.sqrt(6 / (self.inputs + self.outputs))
        dt = np.float32 if self.dtype == f32 else np.float64
        return {f"{self.name}_w": rng.uniform(-limit, limit, (self.inputs, self.outputs)
                                              ).astype(dt),
                f"{self.name}_b": np.zeros(self.outputs, dt)}

    def __call__(self, params: Params, x: Any) -> Any:
        y = x @ params[f"{self.name}_w"] + params[f"{self.name}_b"]
        return self.activation(y) if self.activation is not None else y


@dataclass
class RNNCell:
    """h' = tanh(x·wx + h·wh + b): the recurrent step of an Elman network (apply it in a
    `fori_loop`)."""

    inputs: int
    hidden: int
    name: str = "rnn"
    dtype: Any = f32

    def parameters(self) -> list[tuple[str, TensorSpec]]:
        return [(f"{self.name}_wx", TensorSpec(self.dtype, (self.inputs, self.hidden))),
                (f"{self.name}_wh", TensorSpec(self.dtype, (self.hidden, self.hidden))),
                (f"{self.name}_b", TensorSpec(self.dtype, (self.hidden,)))]

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        dt = np.float32 if self.dtype == f32 else np.float64
        sx = math.sqrt(1 / self.inputs)
        sh = math.sqrt(1 / self.hidden)
        return {f"{self.name}_wx": rng.uniform(-sx, sx, (self.inputs, self.hidden)).astype(dt),
                f"{self.name}_wh": rng.uniform(-sh, sh, (self.hidden, self.hidden)).astype(dt),
                f"{self.name}_b": np.zeros(self.hidden, dt)}

    def __call__(self, params: Params, x: Any, h: Any) -> Any:
        p = self.name
        return ops.tanh(x @ params[f"{p}_wx"] + h @ params[f"{p}_wh"] + params[f"{p}_b"])


@dataclass
class Sequential:
    """Layers applied in order."""

    layers: list[Any]

    def parameters(self) -> list[tuple[str, TensorSpec]]:
        out = [p for layer in self.layers for p in layer.parameters()]
        names = [n for n, _ in out]
        if len(set(names)) != len(names):
            raise ValueError(f"layers share parameter names: {names}; name them apart")
        return out

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {k: v for layer in self.layers for k, v in layer.init(rng).items()}

    def __call__(self, params: Params, x: Any) -> Any:
        for layer in self.layers:
            x = layer(params, x)
        return x


# ---------------------------------------------------------------- optimizers


@dataclass
class SGD:
    """p ← p − lr·g, or with momentum μ: v ← μ·v + g, p ← p − lr·v."""

    momentum: float = 0.0

    def state(self, params: Sequence[tuple[str, TensorSpec]]) -> list[tuple[str, TensorSpec]]:
        return [(f"{n}_velocity", s) for n, s in params] if self.momentum else []

    def update(self, p: Params, g: Params, state: Params, lr: Any,
               names: Sequence[str]) -> tuple[Params, Params]:
        new_p, new_s = {}, {}
        for n in names:
            step = g[n]
            if self.momentum:
                step = new_s[f"{n}_velocity"] = state[f"{n}_velocity"] * self.momentum + g[n]
            new_p[n] = p[n] - step * lr
        return new_p, new_s


@dataclass
class Adam:
    """Adam (Kingma & Ba): m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², with bias correction
    through the step count t, p ← p − lr·m̂/(√v̂ + ε)."""

    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8

    def state(self, params: Sequence[tuple[str, TensorSpec]]) -> list[tuple[str, TensorSpec]]:
        dtype = params[0][1].dtype if params else f32
        out = [(f"{n}_m", s) for n, s in params] + [(f"{n}_v", s) for n, s in params]
        return [*out, ("adam_t", TensorSpec(dtype, ()))]

    def update(self, p: Params, g: Params, state: Params, lr: Any,
               names: Sequence[str]) -> tuple[Params, Params]:
        t = state["adam_t"] + 1.0
        # bias corrections 1 − βᵗ as e^(t·log β)
        c1 = 1.0 - ops.exp(t * math.log(self.beta1))
        c2 = 1.0 - ops.exp(t * math.log(self.beta2))
        new_p, new_s = {}, {"adam_t": t}
        for n in names:
            m = state[f"{n}_m"] * self.beta1 + g[n] * (1.0 - self.beta1)
            v = state[f"{n}_v"] * self.beta2 + ops.square(g[n]) * (1.0 - self.beta2)
            new_s[f"{n}_m"], new_s[f"{n}_v"] = m, v
            new_p[n] = p[n] - (m / c1) * lr / (ops.sqrt(v / c2) + self.eps)
        return new_p, new_s


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

    def init(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """Initial parameters (the model's initializers) and optimizer state (zeros)."""
        values = self.model.init(rng)
        for name, spec in zip(self.state_names, self.state_specs, strict=True):
            values[name] = np.zeros([d or 0 for d in spec.shape],
                                    np.float32 if spec.dtype == f32 else np.float64)
        return values

    def train_step(self, values: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray,
                   lr: float) -> float:
        """One step on numpy data, updating `values` in place; the loss."""
        names = [*self.parameter_names, *self.state_names]
        dtype = values[names[0]].dtype
        out = self.step(*(values[n] for n in names), x, y, dtype.type(lr))
        for n, v in zip(names, out[:-1], strict=True):
            values[n] = v
        return float(out[-1])


def training(model: Any, loss_fn: Callable[[Any, Any], Any], optimizer: Any, *,
             inputs: TensorSpec, targets: TensorSpec) -> TrainingProgram:
    """The staged functions that train `model` on `loss_fn(model output, targets)` with
    `optimizer`: `loss(params…, x, y)`, its gradient, `predict(params…, x)`,
    `train_step(params…, state…, x, y, lr) -> (params…, state…, loss)` and
    `evaluate(params…, state…, x)` (predict, for `dlvm run`'s evaluation)."""
    params = model.parameters()
    names = [n for n, _ in params]
    specs = [s for _, s in params]
    state = optimizer.state(params)
    state_names = [n for n, _ in state]
    state_specs = [s for _, s in state]
    n = len(names)

    def loss(*args: Rep) -> Rep:
        p = dict(zip(names, args[:n], strict=True))
        return loss_fn(model(p, args[n]), args[n + 1])

    def predict(*args: Rep) -> Rep:
        return model(dict(zip(names, args[:n], strict=True)), args[n])

    staged_loss = lambda_(_named(loss, [*names, "x", "y"]), [*specs, inputs, targets],
                          name="loss")
    staged_predict = lambda_(_named(predict, [*names, "x"]), [*specs, inputs],
                             name="predict")

    def evaluate(*args: Rep) -> Rep:  # the optimizer's state is in the way, unused
        return model(dict(zip(names, args[:n], strict=True)), args[-1])

    staged_evaluate = lambda_(_named(evaluate, [*names, *state_names, "x"]),
                              [*specs, *state_specs, inputs], name="evaluate")
    dloss = gradient(staged_loss, wrt=tuple(range(n)), keeping=0, name="dloss")

    def step(*args: Rep) -> tuple[Rep, ...]:
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
