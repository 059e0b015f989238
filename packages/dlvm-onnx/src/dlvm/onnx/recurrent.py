"""Recurrent operators (RNN, GRU, LSTM) lowered to IR loops, so they differentiate through time.

Each direction is one loop of three blocks, as the TEL front end lowers its recurrent blocks:

    'rnn_loop(%t: i64, %h…, %ys)   more = t < steps; conditional more then 'rnn_step else 'rnn_done
    'rnn_step()                    x = Xₛ (s = t, or steps − 1 − t in reverse); the cell; Yₛ
                                   inserted into ys; branch 'rnn_loop(t + 1, …)
    'rnn_done()                    the final states are the loop's block arguments

so a sequence of any length (the time dimension may be dynamic) is one small program, and
the AD pass differentiates it through time. Per-batch `sequence_lens` mask each step: a
sequence past its length keeps its state and outputs zeros; its final state is the state at
its length (zeros for a length of 0, as ONNX Runtime gives). Weights are split per gate and
transposed once, before the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlvm.ir import Value, constant
from dlvm.ir.core import UniqueNames
from dlvm.ir.types import I8, I16, I32, I64, DataType, TensorType, scalar

from .context import NodeContext, dtype_of
from .errors import Invalid, Unsupported
from .ops import converts

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"),
                       "LSTM": ("Sigmoid", "Tanh", "Tanh")}
# an activation's parameters: (takes α, takes β, α's default, β's default). A default of None
# is one ONNX and ONNX Runtime do not agree on (ONNX Runtime takes 0): it must be given.
PARAMETERS: dict[str, tuple[bool, bool, float | None, float | None]] = {
    "tanh": (False, False, 0.0, 0.0), "sigmoid": (False, False, 0.0, 0.0),
    "relu": (False, False, 0.0, 0.0), "softsign": (False, False, 0.0, 0.0),
    "softplus": (False, False, 0.0, 0.0), "leakyrelu": (True, False, 0.01, 0.0),
    "elu": (True, False, 1.0, 0.0), "hardsigmoid": (True, True, 0.2, 0.5),
    "thresholdedrelu": (True, False, None, 0.0), "affine": (True, True, None, None),
    "scaledtanh": (True, True, None, None),
}


@dataclass(frozen=True)
class Activation:
    name: str  # lower case
    alpha: float
    beta: float


@dataclass
class Spec:
    """What a node asks for, read and checked before any IR is built."""

    op: str
    hidden: int
    reverse: list[bool]  # one entry a direction
    activations: list[list[Activation]]  # a list a direction
    clip: float | None
    layout: int
    linear_before_reset: bool
    input_forget: bool
    dtype: DataType
    batch: int | None  # static where any input says so
    steps: int | None

    @property
    def gates(self) -> int:
        return GATES[self.op]


@dataclass
class Weights:
    """One direction's weights, split per gate and transposed ([in, hidden] each), with the
    biases (Wb + Rb, or apart where GRU's linear_before_reset needs Rbₕ alone) as [1, hidden]
    rows and LSTM's peepholes [1, hidden] (None: absent)."""

    w: Sequence[Value]
    r: Sequence[Value]
    bias: list[Value | None]
    recurrent_bias_h: Value | None
    peepholes: Sequence[Value] | None


# ------------------------------------------------------------------ the converters


@converts("RNN")
def _rnn(c: NodeContext) -> list[Value]:
    """Hₜ = f(XₜWᵀ + Hₜ₋₁Rᵀ + Wb + Rb), f = tanh by default: an IR loop over time"""
    return recurrent(c)


@converts("GRU")
def _gru(c: NodeContext) -> list[Value]:
    """Hₜ = (1 − zₜ)⊙hₜ + zₜ⊙Hₜ₋₁, gates zₜ, rₜ = σ(…), hₜ = tanh(…): an IR loop over time

    zₜ = σ(XₜW_zᵀ + Hₜ₋₁R_zᵀ + b_z), rₜ likewise; hₜ = tanh(XₜW_hᵀ + (rₜ⊙Hₜ₋₁)R_hᵀ + b_h),
    or with linear_before_reset tanh(XₜW_hᵀ + rₜ⊙(Hₜ₋₁R_hᵀ + Rb_h) + Wb_h)."""
    return recurrent(c)


@converts("LSTM")
def _lstm(c: NodeContext) -> list[Value]:
    """Cₜ = fₜ⊙Cₜ₋₁ + iₜ⊙tanh(…), Hₜ = oₜ⊙tanh(Cₜ), gates σ(…): an IR loop over time

    iₜ = σ(XₜW_iᵀ + Hₜ₋₁R_iᵀ + P_i⊙Cₜ₋₁ + b_i), fₜ likewise (1 − iₜ with input_forget),
    oₜ = σ(XₜW_oᵀ + Hₜ₋₁R_oᵀ + P_o⊙Cₜ + b_o), the cell's input tanh(XₜW_cᵀ + Hₜ₋₁R_cᵀ + b_c)."""
    return recurrent(c)


def recurrent(c: NodeContext) -> list[Value]:
    """Y, Y_h (and LSTM's Y_c) of the node: a loop a direction."""
    spec = read_spec(c)
    b = c.b
    ins = {i: c.value(i) for i in range(len(c.inputs)) if c.has(i)}  # each made once
    x = ins[0]
    if spec.layout:
        x = b.transpose(x, [1, 0, 2])  # [seq, batch, input]
    lens = sequence_lengths(c, spec, ins.get(4))
    h0 = initial_state(c, spec, ins.get(5))
    c0 = initial_state(c, spec, ins.get(6)) if spec.op == "LSTM" else None
    zeros = zero_state(c, spec, x) if h0 is None or (spec.op == "LSTM" and c0 is None) \
        else None
    want_y = bool(c.node.output and c.node.output[0])
    ys, hs, cs = [], [], []
    for d, reverse in enumerate(spec.reverse):
        weights = direction_weights(c, spec, ins, d)
        start_h = h0[d] if h0 is not None else zeros
        start_c = None
        if spec.op == "LSTM":
            start_c = c0[d] if c0 is not None else zeros
        assert start_h is not None
        y, h, cell = loop(c, spec, weights, spec.activations[d], x, lens, reverse, start_h,
                          start_c, want_y)
        if lens is not None:  # a sequence of length 0 ends in zeros, as ONNX Runtime has it
            started = b.padShape(b.greaterThan(lens, constant(0, scalar(I64))), 1)
            zero = c.number(0, h)
            h = b.select(h, zero, started)
            cell = b.select(cell, zero, started) if cell is not None else None
        ys.append(y)
        hs.append(b.padShape(h, 0))
        if cell is not None:
            cs.append(b.padShape(cell, 0))
    y_h = stacked(c, hs, 0)
    results = [y_h, y_h]  # Y's place holds Y_h when Y is not asked for (it is not bound)
    if want_y:
        y = stacked(c, [b.padShape(v, 1) for v in ys if v is not None], 1)
        results[0] = b.transpose(y, [2, 0, 1, 3]) if spec.layout else y
    if spec.layout:
        results[1] = b.transpose(y_h, [1, 0, 2])
    if spec.op == "LSTM":
        y_c = stacked(c, cs, 0)
        results.append(b.transpose(y_c, [1, 0, 2]) if spec.layout else y_c)
    return results[:len(c.node.output)]


def stacked(c: NodeContext, parts: Sequence[Value], axis: int) -> Value:
    return parts[0] if len(parts) == 1 else c.b.concatenate(parts, axis)


# ------------------------------------------------------------------ reading the node


def input_type(c: NodeContext, i: int) -> TensorType:
    """The type of input i, known or not at import (no literal is made for a constant)."""
    known = c.const(i)
    if known is not None:
        return TensorType(known.shape, dtype_of(known))
    return c.type_of(c.value(i))


def read_spec(c: NodeContext) -> Spec:
    op = c.node.op_type
    x_t = input_type(c, 0)
    if not x_t.dtype.is_float:
        raise Unsupported(f"{op} of {x_t.dtype} (float types only)")
    if x_t.rank != 3:
        raise Invalid(f"X must be of rank 3, found rank {x_t.rank}")
    direction = c.attr("direction", "forward")
    reverse = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}.get(
        direction)
    if reverse is None:
        raise Invalid(f"direction={direction!r} (forward, reverse or bidirectional)")
    layout = int(c.attr("layout", 0))
    if layout not in (0, 1):
        raise Invalid(f"layout={layout} (0 or 1)")
    clip = c.attr("clip")
    if clip is not None and not clip > 0:
        raise Unsupported(f"clip={clip} (a positive threshold)")
    steps, batch = (x_t.shape[1], x_t.shape[0]) if layout else (x_t.shape[0], x_t.shape[1])
    spec = Spec(op, hidden_size(c), reverse, activations(c, op, len(reverse)),
                None if clip is None else float(clip), layout,
                bool(c.attr("linear_before_reset", 0)), bool(c.attr("input_forget", 0)),
                x_t.dtype, batch, steps)
    check_inputs(c, spec)
    return spec


def hidden_size(c: NodeContext) -> int:
    r_t = input_type(c, 2)
    if r_t.rank != 3:
        raise Invalid(f"R must be of rank 3, found rank {r_t.rank}")
    given, found = c.attr("hidden_size"), r_t.shape[2]
    if given is not None and found is not None and given != found:
        raise Invalid(f"hidden_size={given}, but R is of shape {list(r_t.shape)}")
    size = given if given is not None else found
    if size is None:
        raise Unsupported("the hidden size must be known at import (hidden_size, or R's shape)")
    if size < 1:
        raise Invalid(f"hidden_size={size}")
    return int(size)


def activations(c: NodeContext, op: str, directions: int) -> list[list[Activation]]:
    """The activation functions of each direction, with their α and β: the values of
    activation_alpha (activation_beta) are consumed in order by the activations that take one,
    and must be one for each of them."""
    per = len(DEFAULT_ACTIVATIONS[op])
    given = c.attr("activations")
    names = [n.decode() if isinstance(n, bytes) else str(n) for n in given] if given else \
        list(DEFAULT_ACTIVATIONS[op]) * directions
    if len(names) != per * directions:
        raise Invalid(f"{len(names)} activations, {per * directions} expected ({per} a "
                      f"direction)")
    unknown = [n for n in names if n.lower() not in PARAMETERS]
    if unknown:
        raise Unsupported(f"the activation {unknown[0]!r}")
    alphas = parameter_values(c, "activation_alpha", [n for n in names
                                                      if PARAMETERS[n.lower()][0]])
    betas = parameter_values(c, "activation_beta", [n for n in names if PARAMETERS[n.lower()][1]])
    out = []
    for n in names:
        takes_a, takes_b, alpha, beta = PARAMETERS[n.lower()]
        if takes_a:
            alpha = alphas.pop(0) if alphas is not None else alpha
        if takes_b:
            beta = betas.pop(0) if betas is not None else beta
        if alpha is None or beta is None:
            missing = "activation_alpha" if alpha is None else "activation_beta"
            raise Unsupported(f"the activation {n} without its {missing} (ONNX and ONNX "
                              "Runtime differ on its default)")
        out.append(Activation(n.lower(), float(alpha), float(beta)))
    return [out[d * per:(d + 1) * per] for d in range(directions)]


def parameter_values(c: NodeContext, attr: str, takers: list[str]) -> list[float] | None:
    values = c.attr(attr)
    if not values:
        return None
    if len(values) != len(takers):
        which = ", ".join(takers) if takers else "none"
        raise Unsupported(f"{attr} of {len(values)} values for the {len(takers)} activations "
                          f"that take one ({which})")
    return [float(v) for v in values]


def check_inputs(c: NodeContext, spec: Spec) -> None:
    """The shapes and types of W, R, B, sequence_lens, initial_h, initial_c and P, where they
    are known at import; the batch size from any of them where X's is dynamic."""
    dirs, g, h = len(spec.reverse), spec.gates, spec.hidden
    x_in = input_type(c, 0).shape[2]
    expected: dict[int, tuple[str, tuple[int | None, ...]]] = {
        1: ("W", (dirs, g * h, x_in)), 2: ("R", (dirs, g * h, h)), 3: ("B", (dirs, 2 * g * h)),
        7: ("P", (dirs, 3 * h))}
    state = (spec.batch, dirs, h) if spec.layout else (dirs, spec.batch, h)
    expected[5] = ("initial_h", state)
    if spec.op == "LSTM":
        expected[6] = ("initial_c", state)
    for i, (name, shape) in expected.items():
        if not c.has(i) or (i == 7 and spec.op != "LSTM"):
            continue
        t = input_type(c, i)
        if t.dtype != spec.dtype:
            raise Invalid(f"{name} of {t.dtype}, X of {spec.dtype}")
        if t.rank != len(shape) or any(
                a is not None and e is not None and a != e for a, e in zip(t.shape, shape,
                                                                          strict=True)):
            want = ", ".join("?" if e is None else str(e) for e in shape)
            raise Invalid(f"{name} of shape {list(t.shape)}, [{want}] expected")
        if i in (5, 6) and spec.batch is None:
            spec.batch = t.shape[0] if spec.layout else t.shape[1]
    if c.has(4):
        check_lengths(c, spec)


def check_lengths(c: NodeContext, spec: Spec) -> None:
    known = c.const(4)
    t = input_type(c, 4)
    shape = t.shape
    if t.dtype not in (I8, I16, I32, I64) or len(shape) != 1:
        raise Invalid("sequence_lens must be a vector of integers")
    if spec.batch is not None and shape[0] is not None and shape[0] != spec.batch:
        raise Invalid(f"sequence_lens of {shape[0]} lengths for a batch of {spec.batch}")
    if spec.batch is None:
        spec.batch = shape[0]
    if known is not None and ((known < 0).any() or (
            spec.steps is not None and (known > spec.steps).any())):
        bound = "" if spec.steps is None else f", at most {spec.steps}"
        raise Invalid(f"sequence_lens {known.tolist()}: lengths are ≥ 0{bound}")


# ------------------------------------------------------------------ values before the loop


def sequence_lengths(c: NodeContext, spec: Spec, lens: Value | None) -> Value | None:
    """sequence_lens as i64 (None: absent, or every sequence of the full length)."""
    if lens is None:
        return None
    known = c.const(4)
    if known is not None and spec.steps is not None and (known == spec.steps).all():
        return None
    return lens if c.type_of(lens).dtype == I64 else c.b.dataTypeCast(lens, I64)


def initial_state(c: NodeContext, spec: Spec, v: Value | None) -> list[Value] | None:
    """initial_h or initial_c a direction, [batch, hidden] each."""
    if v is None:
        return None
    if spec.layout:
        v = c.b.transpose(v, [1, 0, 2])
    return [fit(c, c.b.extract(v, [d]), state_type(spec)) for d in range(len(spec.reverse))]


def state_type(spec: Spec) -> TensorType:
    return TensorType((spec.batch, spec.hidden), spec.dtype)


def outputs_type(spec: Spec) -> TensorType:
    return TensorType((spec.steps, spec.batch, spec.hidden), spec.dtype)


def fit(c: NodeContext, v: Value, t: TensorType) -> Value:
    """v with the type t (a dynamic size made static, or the other way round)."""
    return v if c.type_of(v) == t else c.b.shapeCast(v, t.shape)


def zero_state(c: NodeContext, spec: Spec, x: Value) -> Value:
    """Zeros [batch, hidden]; a dynamic batch is X's (time major: [seq, batch, input])."""
    if spec.batch is not None:
        return c.b.literal(0.0, state_type(spec))
    return fit(c, zeros_from(c, spec, x, [0, 2]), state_type(spec))


def zero_outputs(c: NodeContext, spec: Spec, x: Value) -> Value:
    """Zeros [seq, batch, hidden], what Y of a direction starts as."""
    if spec.batch is not None and spec.steps is not None:
        return c.b.literal(0.0, outputs_type(spec))
    return fit(c, zeros_from(c, spec, x, [2]), outputs_type(spec))


def zeros_from(c: NodeContext, spec: Spec, x: Value, axes: list[int]) -> Value:
    """Zeros of X's shape without `axes`, then the hidden size: whatever X holds (NaN too),
    only its shape counts."""
    b = c.b
    zero = c.number(0, x)
    zeros = b.reduce(b.select(zero, zero, b.notEqual(x, x)), "add", zero, axes)
    rank = c.rank(zeros)
    hidden = b.literal(0.0, TensorType((*([1] * rank), spec.hidden), spec.dtype))
    return b.add(b.padShape(zeros, rank), hidden)


def direction_weights(c: NodeContext, spec: Spec, ins: dict[int, Value], d: int) -> Weights:
    b, h, g = c.b, spec.hidden, spec.gates

    def rows(v: Value, k: int) -> Value:  # the rows of gate k of a [k·hidden, …] tensor
        return b.slice(v, k * h, (k + 1) * h - 1)

    w, r = b.extract(ins[1], [d]), b.extract(ins[2], [d])
    w_gates = [b.transpose(w if g == 1 else rows(w, k)) for k in range(g)]
    r_gates = [b.transpose(r if g == 1 else rows(r, k)) for k in range(g)]
    bias: list[Value | None] = [None] * g
    recurrent_h = None
    if 3 in ins:
        both = b.extract(ins[3], [d])
        for k in range(g):
            wb, rb = b.padShape(rows(both, k), 0), b.padShape(rows(both, g + k), 0)
            if spec.op == "GRU" and k == 2 and spec.linear_before_reset:
                bias[k], recurrent_h = wb, rb
            else:
                bias[k] = b.add(wb, rb)
    peepholes = None
    if spec.op == "LSTM" and 7 in ins:
        p = b.extract(ins[7], [d])
        peepholes = [b.padShape(rows(p, k), 0) for k in range(3)]
    return Weights(w_gates, r_gates, bias, recurrent_h, peepholes)


# ------------------------------------------------------------------ the loop


def loop(c: NodeContext, spec: Spec, weights: Weights, acts: list[Activation], x: Value,
         lens: Value | None, reverse: bool, h0: Value, c0: Value | None, want_y: bool
         ) -> tuple[Value | None, Value, Value | None]:
    """One direction over time: (Y [seq, batch, hidden] or None, the final H, the final C);
    the builder is left at the end of the block after the loop."""
    b = c.b
    i64 = scalar(I64)
    steps: Value = constant(spec.steps, i64) if spec.steps is not None else \
        b.extract(b.shape(x), [0])
    carried = [h0, *([c0] if c0 is not None else []),
               *([zero_outputs(c, spec, x)] if want_y else [])]
    types = [i64, *[state_type(spec)] * (2 if c0 is not None else 1),
             *([outputs_type(spec)] if want_y else [])]
    here = b.block
    assert here is not None and here.function is not None
    names = UniqueNames(block.name for block in here.function.blocks)
    base = spec.op.lower()
    head = b.new_block(names(f"{base}_loop"), types)
    step = b.new_block(names(f"{base}_step"))
    done = b.new_block(names(f"{base}_done"))
    b.position_at_end(here)
    b.branch((head, [constant(0, i64), *carried]))
    b.position_at_end(head)
    t, h, cell = head.arguments[0], head.arguments[1], \
        head.arguments[2] if c0 is not None else None
    b.conditional(b.lessThan(t, steps), step, done)
    b.position_at_end(step)
    s = b.subtract(b.subtract(steps, constant(1, i64)), t) if reverse else t
    x_s = b.extract(x, [s])
    new_h, new_c = cell_step(c, spec, weights, acts, x_s, h, cell)
    new_h = fit(c, new_h, state_type(spec))
    out = new_h
    if lens is not None:  # past its length a sequence keeps its state and outputs zeros
        running = b.padShape(b.lessThan(s, lens), 1)
        out = b.select(new_h, c.number(0, new_h), running)
        new_h = b.select(new_h, h, running)
        if new_c is not None and cell is not None:
            new_c = b.select(new_c, cell, running)
    following = [new_h, *([fit(c, new_c, state_type(spec))] if new_c is not None else [])]
    if want_y:
        following.append(b.insert_(fit(c, out, state_type(spec)), head.arguments[-1], [s]))
    b.branch((head, [b.add(t, constant(1, i64)), *following]))
    b.position_at_end(done)
    return (head.arguments[-1] if want_y else None), h, cell


def cell_step(c: NodeContext, spec: Spec, weights: Weights, acts: list[Activation],
              x: Value, h: Value, cell: Value | None) -> tuple[Value, Value | None]:
    """One time step of the cell: the new H (and C)."""
    b = c.b

    def gate(k: int, hidden: Value | None = None, extra: Value | None = None) -> Value:
        """XₜWₖᵀ + (hidden)Rₖᵀ + biasₖ + extra, clipped: the input of an activation"""
        v: Value = b.add(b.dot(x, weights.w[k]), b.dot(h if hidden is None else hidden,
                                                         weights.r[k]))
        bias = weights.bias[k]
        if bias is not None:
            v = b.add(v, bias)
        if extra is not None:
            v = b.add(v, extra)
        return clipped(c, spec, v)

    if spec.op == "RNN":
        return activate(c, acts[0], gate(0)), None
    if spec.op == "GRU":
        f, g = acts
        z, r = activate(c, f, gate(0)), activate(c, f, gate(1))
        if spec.linear_before_reset:  # rₜ⊙(Hₜ₋₁Rₕᵀ + Rbₕ)
            recurrent: Value = b.dot(h, weights.r[2])
            if weights.recurrent_bias_h is not None:
                recurrent = b.add(recurrent, weights.recurrent_bias_h)
            v = b.add(b.dot(x, weights.w[2]), b.multiply(r, recurrent))
            if weights.bias[2] is not None:
                v = b.add(v, weights.bias[2])
            candidate = activate(c, g, clipped(c, spec, v))
        else:
            candidate = activate(c, g, gate(2, hidden=b.multiply(r, h)))
        one = c.number(1, z)
        return b.add(b.multiply(b.subtract(one, z), candidate), b.multiply(z, h)), None
    assert cell is not None
    f, g, out_act = acts
    peep = weights.peepholes
    i = activate(c, f, gate(0, extra=b.multiply(peep[0], cell) if peep else None))
    forget: Value
    if spec.input_forget:  # the forget gate coupled to the input gate
        forget = b.subtract(c.number(1, i), i)
    else:
        forget = activate(c, f, gate(2, extra=b.multiply(peep[2], cell) if peep else None))
    new_c = b.add(b.multiply(forget, cell), b.multiply(i, activate(c, g, gate(3))))
    o = activate(c, f, gate(1, extra=b.multiply(peep[1], new_c) if peep else None))
    return b.multiply(o, activate(c, out_act, new_c)), new_c


def clipped(c: NodeContext, spec: Spec, v: Value) -> Value:
    """v within [−clip, clip]"""
    if spec.clip is None:
        return v
    return c.b.min(c.b.max(v, c.number(-spec.clip, v)), c.number(spec.clip, v))


# ------------------------------------------------------------------ activations


def activate(c: NodeContext, a: Activation, x: Value) -> Value:
    """The activation `a` of x, written so that no step overflows (exp of a value ≤ 0), and
    so that the gradient is finite everywhere."""
    b = c.b

    def n(v: float) -> Value:
        return c.number(v, x)

    name = a.name
    if name == "tanh":
        return b.tanh(x)
    if name == "sigmoid":
        return sigmoid(c, x)
    if name == "relu":
        return b.max(x, n(0))
    if name == "leakyrelu":
        return b.select(x, b.multiply(x, n(a.alpha)), b.greaterThanOrEqual(x, n(0)))
    if name == "thresholdedrelu":
        return b.select(x, n(0), b.greaterThan(x, n(a.alpha)))
    if name == "elu":  # α(eˣ − 1) of min(x, 0): the branch not taken never overflows
        negative = b.multiply(b.subtract(b.exp(b.min(x, n(0))), n(1)), n(a.alpha))
        return b.select(x, negative, b.greaterThanOrEqual(x, n(0)))
    if name == "affine":
        return b.add(b.multiply(x, n(a.alpha)), n(a.beta))
    if name == "scaledtanh":
        return b.multiply(b.tanh(b.multiply(x, n(a.beta))), n(a.alpha))
    if name == "hardsigmoid":
        return b.min(b.max(b.add(b.multiply(x, n(a.alpha)), n(a.beta)), n(0)), n(1))
    if name == "softsign":
        return b.divide(x, b.add(n(1), b.max(x, b.negate(x))))
    assert name == "softplus", name  # log(1 + eˣ) = max(x, 0) + log(1 + e^−|x|)
    return b.add(b.max(x, n(0)), b.log(b.add(n(1), b.exp(b.negate(b.max(x, b.negate(x)))))))


def sigmoid(c: NodeContext, x: Value) -> Value:
    """σ(x) = 1 / (1 + e⁻ˣ) for x ≥ 0, eˣ / (1 + eˣ) below: each of an exponent ≤ 0"""
    b = c.b
    one, zero = c.number(1, x), c.number(0, x)
    above = b.divide(one, b.add(one, b.exp(b.negate(b.max(x, zero)))))
    e = b.exp(b.min(x, zero))
    below = b.divide(e, b.add(one, e))
    return b.select(above, below, b.greaterThanOrEqual(x, zero))
