"""The optimizers a TEL module declares with `optimizer KIND(option = value, …)`.

One table says each optimizer's options (default, range); the checker reads it to check a
declaration, and `Optimizer` — a checked declaration — names the state the optimizer keeps
between steps and writes its update in IR for the code generator. The updates are PyTorch's
(`torch.optim.SGD`, `Adam`, `AdamW`), with the learning rate scaled by a linear warm-up and a
cosine decay as `torch.optim.lr_scheduler.LambdaLR` would apply them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from dlvm.ir import Builder, Value, constant
from dlvm.ir.types import F32, DataType, TensorType, scalar

Number = float | int


@dataclass(frozen=True)
class OptionRule:
    """An option's default and the values it takes: a number in [low, high] (an open end
    where said), an integer where `integer`, or (`names`) a list of parameter names."""

    default: Number | None
    low: float = 0.0
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    names: bool = False

    def problem(self, value: Number) -> str | None:
        """Why `value` is refused, or None."""
        if self.integer and not isinstance(value, int):
            return "an integer"
        below = value <= self.low if self.low_open else value < self.low
        above = value >= self.high if self.high_open else value > self.high
        if below or above:
            if self.high == math.inf:
                return "above 0" if self.low_open else f"at least {self.low:g}"
            left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
            return f"in {left}{self.low:g}, {self.high:g}{right}"
        return None


_EVERY = {  # every optimizer's: the schedule and clipping
    "warmup": OptionRule(0, integer=True),  # steps of linear warm-up
    "total": OptionRule(0, integer=True),  # the cosine reaches 0 here (0: no decay)
    "clip": OptionRule(None, low_open=True),  # the gradients' largest global L2 norm
}
_MOMENTS = {
    "beta1": OptionRule(0.9, high=1.0, high_open=True),
    "beta2": OptionRule(0.999, high=1.0, high_open=True),
    "eps": OptionRule(1e-8, low_open=True),
}
OPTIMIZERS: dict[str, dict[str, OptionRule]] = {
    "sgd": {"momentum": OptionRule(0.0, high=1.0, high_open=True), **_EVERY},
    "adam": {**_MOMENTS, **_EVERY},
    "adamw": {**_MOMENTS, "weight_decay": OptionRule(0.01), "decay": OptionRule(None, names=True),
              **_EVERY},
}


def defaults(kind: str) -> dict[str, Number]:
    """The numeric options of `kind` that have a default, at it."""
    return {k: r.default for k, r in OPTIMIZERS[kind].items() if r.default is not None}


@dataclass(frozen=True)
class Optimizer:
    """A checked declaration: every option's value (defaults filled in) and, for AdamW, the
    parameters decayed (None: all of them)."""

    kind: str
    values: dict[str, Number]
    decay: tuple[str, ...] | None = None

    @staticmethod
    def default() -> Optimizer:
        """Plain SGD, what a module without an `optimizer` declaration trains with."""
        return Optimizer("sgd", defaults("sgd"))

    @property
    def slots(self) -> tuple[str, ...]:
        """The state kept per parameter, each a tensor of its shape."""
        if self.kind == "sgd":
            return ("velocity",) if self.values["momentum"] else ()
        return ("m", "v")

    @property
    def scheduled(self) -> bool:
        return bool(self.values["warmup"] or self.values["total"])

    @property
    def counts_steps(self) -> bool:
        """Whether the state holds the step count t (bias corrections, the schedule)."""
        return self.kind != "sgd" or self.scheduled

    @property
    def has_state(self) -> bool:
        return bool(self.slots) or self.counts_steps

    @property
    def plain(self) -> bool:
        """Plain SGD, p − lr·g: no state, no clipping (a module without a declaration)."""
        return not self.has_state and "clip" not in self.values

    def state_names(self, params: Sequence[str], fresh: Callable[[str], str]) -> list[str]:
        """The state's names: each slot for every parameter (`w1_m`, `w2_m`, …, `w1_v`, …),
        then the step count, `step`; `fresh` makes each unique."""
        names = [fresh(f"{p}_{slot}") for slot in self.slots for p in params]
        return [*names, fresh("step")] if self.counts_steps else names

    # ------------------------------------------------------------ the update in IR

    def schedule(self, b: Builder, t: Value) -> Value | None:
        """s(t) for the step t = 1, 2, …: min(t/warmup, 1), times ½(1 + cos(π·q)) with
        q = min(max(t − warmup, 0)/(total − warmup), 1) when there is a total; None for 1."""
        warmup, total = int(self.values["warmup"]), int(self.values["total"])
        dtype = _tensor_dtype(t)
        c = _numbers(dtype)
        s: Value | None = None
        if warmup:
            s = b.min(b.multiply(t, c(1.0 / warmup)), c(1.0))
        if total:
            q = b.min(b.multiply(b.max(b.subtract(t, c(float(warmup))), c(0.0)),
                                 c(1.0 / (total - warmup))), c(1.0))
            cosine = b.multiply(b.add(b.cos(b.multiply(q, c(math.pi))), c(1.0)), c(0.5))
            s = cosine if s is None else b.multiply(s, cosine)
        return s

    def update(self, b: Builder, names: Sequence[str], params: Sequence[Value],
               grads: Sequence[Value], state: Sequence[Value], lr: Value,
               fresh: Callable[[str], str]) -> tuple[list[Value], list[Value]]:
        """The parameters and the state after one step, from the gradients `grads` and the
        base learning rate `lr` (in the parameters' type). The arithmetic and the state are
        in `work_type` of it: f32 for f16 parameters, whose range holds neither Adam's ε
        nor a squared small gradient, and which count steps exactly only to 2048."""
        dtype = _tensor_dtype(lr)
        work = work_type(dtype)
        c = _numbers(work)
        lr = _cast(b, lr, work)
        if "clip" in self.values:
            grads = self.clipped(b, [_cast(b, g, work) for g in grads], fresh)
        n = len(params)
        slots = [list(state[k * n:(k + 1) * n]) for k in range(len(self.slots))]
        new_state: list[list[Value]] = [[] for _ in self.slots]
        rate, t, corrections = lr, None, None
        if self.counts_steps:
            count = state[-1]
            t = b.add(count, c(1.0), name=fresh("step_next"))
            s = self.schedule(b, t)
            if s is not None:
                rate = b.multiply(lr, s, name=fresh("rate"))
        if self.kind != "sgd":
            assert t is not None
            c1 = _bias_correction(b, t, float(self.values["beta1"]))
            c2 = _bias_correction(b, t, float(self.values["beta2"]))
            corrections = (c1, b.sqrt(c2))
        new_params: list[Value] = []
        for i, (name, p_in, g_in) in enumerate(zip(names, params, grads, strict=True)):
            p, g = _cast(b, p_in, work), _cast(b, g_in, work)
            if corrections is not None:
                m, v, direction = self.moments(b, name, slots[0][i], slots[1][i], g,
                                               corrections, fresh)
                new_state[0].append(m)
                new_state[1].append(v)
            elif self.slots:  # SGD's v ← μ·v + g
                direction = b.add(b.multiply(slots[0][i], c(self.values["momentum"])), g,
                                  name=fresh(f"{name}_velocity_next"))
                new_state[0].append(direction)
            else:
                direction = g
            step = b.multiply(direction, rate)
            if self.decays(name):  # r·λ·p, from the parameter before the step (decoupled)
                step = b.add(step, b.multiply(p, b.multiply(rate, c(
                    self.values["weight_decay"]))))
            if work == dtype:
                new_params.append(b.subtract(p, step, name=fresh(f"{name}_next")))
            else:
                new_params.append(b.dataTypeCast(b.subtract(p, step), dtype,
                                                 name=fresh(f"{name}_next")))
        out_state = [v for slot in new_state for v in slot]
        return new_params, [*out_state, t] if t is not None else out_state

    def moments(self, b: Builder, name: str, m: Value, v: Value, g: Value,
                corrections: tuple[Value, Value], fresh: Callable[[str], str]
                ) -> tuple[Value, Value, Value]:
        """Adam's m ← β₁m + (1−β₁)g, v ← β₂v + (1−β₂)g², and its direction m̂/(√v̂ + ε) from
        the bias corrections (1 − β₁ᵗ, √(1 − β₂ᵗ)) — as PyTorch, ε is added to √v/√(1 − β₂ᵗ)."""
        c = _numbers(_tensor_dtype(m))
        beta1, beta2 = float(self.values["beta1"]), float(self.values["beta2"])
        m_next = b.add(b.multiply(m, c(beta1)), b.multiply(g, c(1.0 - beta1)),
                       name=fresh(f"{name}_m_next"))
        v_next = b.add(b.multiply(v, c(beta2)), b.multiply(b.square(g), c(1.0 - beta2)),
                       name=fresh(f"{name}_v_next"))
        c1, root_c2 = corrections
        denominator = b.add(b.divide(b.sqrt(v_next), root_c2), c(float(self.values["eps"])))
        return m_next, v_next, b.divide(b.divide(m_next, c1), denominator)

    def clipped(self, b: Builder, grads: Sequence[Value], fresh: Callable[[str], str]
                ) -> list[Value]:
        """The gradients scaled by min(1, clip/(‖g‖ + 10⁻⁶)), ‖g‖ the L2 norm of all of them
        together (`torch.nn.utils.clip_grad_norm_`)."""
        c = _numbers(_tensor_dtype(grads[0]))
        total: Value | None = None
        for g in grads:
            square = b.square(g)
            scalar = isinstance(g.type, TensorType) and g.type.rank == 0
            part = square if scalar else b.reduce(square, "add", c(0.0))
            total = part if total is None else b.add(total, part)
        assert total is not None
        norm = b.sqrt(total, name=fresh("grad_norm"))
        factor = b.min(b.divide(c(float(self.values["clip"])), b.add(norm, c(1e-6))), c(1.0),
                       name=fresh("clip_factor"))
        return [b.multiply(g, factor) for g in grads]

    def decays(self, name: str) -> bool:
        if self.kind != "adamw" or not self.values["weight_decay"]:
            return False
        return self.decay is None or name in self.decay


def work_type(dtype: DataType) -> DataType:
    """The type of the optimizer's state and arithmetic: the parameters', but `f32` for
    16-bit ones."""
    return F32 if dtype.bits < 32 else dtype


def _bias_correction(b: Builder, t: Value, beta: float) -> Value:
    """1 − βᵗ = 1 − exp(t·ln β); 1 for β = 0"""
    c = _numbers(_tensor_dtype(t))
    if beta == 0:
        return c(1.0)
    return b.subtract(c(1.0), b.exp(b.multiply(t, c(math.log(beta)))))


def _tensor_dtype(v: Value) -> DataType:
    assert isinstance(v.type, TensorType)
    return v.type.dtype


def _numbers(dtype: DataType) -> Callable[[float], Value]:
    return lambda x: constant(float(x), scalar(dtype))


def _cast(b: Builder, v: Value, dtype: DataType) -> Value:
    return v if _tensor_dtype(v) == dtype else b.dataTypeCast(v, dtype)

