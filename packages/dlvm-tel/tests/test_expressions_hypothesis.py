"""Hypothesis: random well-typed TEL expressions, compiled to IR and run by the reference
interpreter, agree with the same expressions evaluated by numpy; the compiled modules verify
and print back to the same text through `dlvm.ir.parse`.

Expressions are generated for a wanted shape (`expressions(shape, depth)`), so each is
well-typed by construction: every operand's shape is chosen so that the operation gives the
wanted one. The shapes are those of rank ≤ 3 with sizes 1…4 and an element count that one
of the inputs has, so any of them can be a leaf (an input, reshaped if need be).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
import dlvm.tel

Shape = tuple[int, ...]

# the inputs: one for each element count 1, 2, 3, 4, 6, 8, 9, 12, 16
INPUTS: dict[str, Shape] = {"s": (), "e": (2,), "d": (3,), "b": (4,), "f": (2, 3),
                            "c": (4, 2), "g": (3, 3), "a": (3, 4), "h": (4, 4)}
BY_COUNT = {math.prod(shape): name for name, shape in INPUTS.items()}
SHAPES: list[Shape] = sorted(
    (shape for rank in range(4) for shape in itertools.product(range(1, 5), repeat=rank)
     if math.prod(shape) in BY_COUNT),
    key=lambda s: (len(s), s))
NUMBERS = ["0.5", "2", "1.25", "3", "0.1"]
SAFE = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---------------------------------------------------------------- the expression tree


@dataclass(frozen=True)
class Node:
    """An expression: `op` names the operation, `attr` its detail (a name, a number's text,
    a function, a shape, an axis or a spelling of the product)."""

    op: str
    args: tuple[Node, ...]
    shape: Shape
    attr: Any = None


def dims(shape: Shape) -> str:
    return "[" + " x ".join(str(d) for d in shape) + "]"


def tel_text(n: Node) -> str:
    """The expression in TEL, every operation in parentheses."""
    a = [tel_text(x) for x in n.args]
    match n.op:
        case "name" | "number":
            return str(n.attr)
        case "neg":
            return f"(-{a[0]})"
        case "+" | "-" | "*" | "/":
            return f"({a[0]} {n.op} {a[1]})"
        case "product":
            return f"({a[0]} {n.attr} {a[1]})"
        case "transpose":
            return f"({a[0]}^T)"
        case "reshape":
            return f"({a[0]} as {dims(n.shape)})"
        case "concat":
            axis = "" if n.attr is None else f" @{n.attr}"
            return "[" + ", ".join(a) + "]" + axis
        case "call":
            return f"{n.attr}(" + ", ".join(a) + ")"
    raise AssertionError(n)


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


FUNCTIONS: dict[str, Callable[..., np.ndarray]] = {
    "tanh": np.tanh, "exp": np.exp, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0.0), "softmax": softmax, "min": np.minimum,
    "max": np.maximum, "sum": np.sum, "mean": np.mean,
}


def evaluate(n: Node, env: dict[str, np.ndarray]) -> np.ndarray:
    """The expression's value by numpy."""
    a = [evaluate(x, env) for x in n.args]
    match n.op:
        case "name":
            return env[n.attr]
        case "number":
            return np.asarray(float(n.attr))
        case "neg":
            return -a[0]
        case "+":
            return a[0] + a[1]
        case "-":
            return a[0] - a[1]
        case "*":
            return a[0] * a[1]
        case "/":
            return a[0] / a[1]
        case "product":
            return np.matmul(a[0], a[1])
        case "transpose":
            return np.transpose(a[0])
        case "reshape":
            return np.reshape(a[0], n.shape)
        case "concat":
            return np.concatenate(a, axis=n.attr or 0)
        case "call":
            return np.asarray(FUNCTIONS[n.attr](*a))
    raise AssertionError(n)


# ---------------------------------------------------------------- strategies


def leaf(shape: Shape) -> st.SearchStrategy[Node]:
    """An input of that shape, an input of as many elements reshaped, a transposed input,
    or (for a scalar) a number."""
    options: list[Node] = []
    name = BY_COUNT[math.prod(shape)]
    source = Node("name", (), INPUTS[name], name)
    if INPUTS[name] == shape:
        options.append(source)
    else:
        options.append(Node("reshape", (source,), shape))
    if len(shape) > 1 and INPUTS[name] == shape[::-1]:
        options.append(Node("transpose", (source,), shape))
    if not shape:
        options += [Node("number", (), (), x) for x in NUMBERS]
    return st.sampled_from(options)


@st.composite
def stretched(draw: st.DrawFn, shape: Shape, keep: frozenset[int] = frozenset()) -> Shape:
    """A shape that broadcasts to `shape`: some leading dimensions dropped and some sizes
    replaced by 1, but never those in `keep`."""
    drop = draw(st.integers(0, min(keep, default=len(shape))))
    return tuple(d if k in keep or draw(st.booleans()) else 1
                 for k, d in enumerate(shape) if k >= drop)


@st.composite
def broadcast_pair(draw: st.DrawFn, shape: Shape) -> tuple[Shape, Shape]:
    """Two shapes that broadcast together to exactly `shape`, in either order."""
    first = draw(stretched(shape))
    offset = len(shape) - len(first)
    missing = frozenset(k for k in range(len(shape))
                        if k < offset or (first[k - offset] == 1 and shape[k] != 1))
    second = draw(stretched(shape, missing))
    return (first, second) if draw(st.booleans()) else (second, first)


def product_operands(shape: Shape) -> list[tuple[Shape, Shape]]:
    """The operand shapes whose tensor product has `shape`."""
    out: list[tuple[Shape, Shape]] = []
    for k in range(1, 5):
        match shape:
            case ():
                out.append(((k,), (k,)))
            case (n,):
                out += [((k,), (k, n)), ((n, k), (k,))]
            case (m, n):
                out.append(((m, k), (k, n)))
            case (batch, m, n):
                out.append(((batch, m, k), (batch, k, n)))
    return [(x, y) for x, y in out if math.prod(x) in BY_COUNT and math.prod(y) in BY_COUNT]


def concat_parts(shape: Shape) -> list[tuple[int, Shape, Shape]]:
    """(axis, first, second): two shapes that concatenate to `shape` along `axis`."""
    out = []
    for axis, size in enumerate(shape):
        for p in range(1, size):
            first = (*shape[:axis], p, *shape[axis + 1:])
            second = (*shape[:axis], size - p, *shape[axis + 1:])
            if math.prod(first) in BY_COUNT and math.prod(second) in BY_COUNT:
                out.append((axis, first, second))
    return out


def shapes(count: int | None = None) -> st.SearchStrategy[Shape]:
    """A shape of `SHAPES` (with `count` elements), each rank as likely as the others."""
    pool = [s for s in SHAPES if count is None or math.prod(s) == count]
    ranks = sorted({len(s) for s in pool})
    return st.sampled_from(ranks).flatmap(
        lambda r: st.sampled_from([s for s in pool if len(s) == r]))


@st.composite
def expressions(draw: st.DrawFn, shape: Shape, depth: int) -> Node:
    """A random expression of exactly `shape`, at most `depth` operations deep."""
    if depth == 0:
        return draw(leaf(shape))
    kinds = ["leaf", "neg", "activation", "exp", "arithmetic", "divide", "minmax",
             "transpose", "reshape"]
    products = product_operands(shape)
    parts = concat_parts(shape)
    if products:
        kinds.append("product")
    if parts:
        kinds.append("concat")
    if shape:
        kinds.append("softmax")
    else:
        kinds.append("reduce")
    kind = draw(st.sampled_from(kinds))

    def sub(s: Shape) -> Node:
        return draw(expressions(s, depth - 1))

    match kind:
        case "leaf":
            return draw(leaf(shape))
        case "neg":
            return Node("neg", (sub(shape),), shape)
        case "activation":
            f = draw(st.sampled_from(["tanh", "sigmoid", "relu"]))
            return Node("call", (sub(shape),), shape, f)
        case "exp":  # of a bounded value
            inner = Node("call", (sub(shape),), shape, draw(st.sampled_from(["tanh",
                                                                              "sigmoid"])))
            return Node("call", (inner,), shape, "exp")
        case "softmax":
            return Node("call", (sub(shape),), shape, "softmax")
        case "arithmetic":
            x, y = draw(broadcast_pair(shape))
            return Node(draw(st.sampled_from("+-*")), (sub(x), sub(y)), shape)
        case "divide":  # by 2 + tanh(…), in (1, 3)
            x, y = draw(broadcast_pair(shape))
            two = Node("number", (), (), "2")
            below = Node("+", (two, Node("call", (sub(y),), y, "tanh")), y)
            return Node("/", (sub(x), below), shape)
        case "minmax":
            x, y = draw(broadcast_pair(shape))
            return Node("call", (sub(x), sub(y)), shape, draw(st.sampled_from(["min", "max"])))
        case "product":
            x, y = draw(st.sampled_from(products))
            return Node("product", (sub(x), sub(y)), shape, draw(st.sampled_from(".•⊗")))
        case "transpose":
            return Node("transpose", (sub(shape[::-1]),), shape)
        case "reshape":
            source = draw(shapes(math.prod(shape)))
            return Node("reshape", (sub(source),), shape)
        case "concat":
            axis, x, y = draw(st.sampled_from(parts))
            written = None if axis == 0 and draw(st.booleans()) else axis
            return Node("concat", (sub(x), sub(y)), shape, written)
        case "reduce":
            source = draw(shapes())
            return Node("call", (sub(source),), (), draw(st.sampled_from(["sum", "mean"])))
    raise AssertionError(kind)


@st.composite
def typed_expressions(draw: st.DrawFn) -> Node:
    shape = draw(shapes())
    return draw(expressions(shape, draw(st.integers(0, 5))))


# ---------------------------------------------------------------- modules


def module_text(e: Node, extra: str = "") -> str:
    lines = ["module m", "type float64"]
    lines += [f"{name}: in{dims(shape)}" for name, shape in INPUTS.items()]
    lines += [extra, f"y: out{dims(e.shape)} = {tel_text(e)}"]
    return "\n".join(lines) + "\n"


def inputs(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1.0, 1.0, shape) for name, shape in INPUTS.items()}


def run_inference(module: ir.Module, env: dict[str, np.ndarray]) -> np.ndarray:
    """`@inference` on the reference interpreter; it takes the inputs the output reads, in
    declaration order (there are no parameters)."""
    fn = module.function("inference")
    assert fn is not None
    names = [a.name or "" for a in fn.blocks[0].arguments]
    assert names == [n for n in INPUTS if n in names]
    inference = ir.compile(module, target="interp")["inference"]
    return np.asarray(inference(*[env[n] for n in names]))


# ---------------------------------------------------------------- properties


@SAFE
@given(e=typed_expressions(), seed=st.integers(0, 2**16))
def test_compiled_expressions_compute_what_numpy_computes(e: Node, seed: int) -> None:
    module = dlvm.tel.compile(module_text(e), "m.tel")
    env = inputs(seed)
    got = run_inference(module, env)
    want = evaluate(e, env)
    assert got.shape == e.shape
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


@SAFE
@given(e=typed_expressions())
def test_the_checker_infers_the_generated_shape(e: Node) -> None:
    checked = dlvm.tel.check(dlvm.tel.parse(module_text(e), "m.tel"))
    assert checked.shapes["y"] == e.shape


@SAFE
@given(e=typed_expressions(), with_params=st.booleans())
def test_compiled_modules_verify_and_print_back_to_the_same_text(e: Node,
                                                                  with_params: bool) -> None:
    # with a parameter (read or not) and a loss, the module also has `@loss`, `@loss_grad`,
    # `@init_params` and, with one input, `@predict` and perhaps `@train_step`
    extra = ("w: param[4 x 4] = glorot\nv: param[4] = random(-1, 1)\n"
             "z: out[4] = v . h\nloss l = sum(y) + mean(z)" if with_params else "")
    module = dlvm.tel.compile(module_text(e, extra), "m.tel")
    ir.run_passes(module, "verify")
    text = ir.print_module(module)
    again = ir.parse(text, "m.dl")
    ir.run_passes(again, "verify")
    assert ir.print_module(again) == text


# ---------------------------------------------------------------- fixed examples


def test_the_generator_covers_every_kind_of_operation() -> None:
    seen: set[str] = set()

    @settings(max_examples=500, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(e=typed_expressions())
    def collect(e: Node) -> None:
        stack = [e]
        while stack:
            n = stack.pop()
            seen.add(str(n.attr) if n.op == "call" else n.op)
            stack += n.args

    collect()
    assert {"name", "number", "neg", "+", "-", "*", "/", "product", "transpose", "reshape",
            "concat", "tanh", "sigmoid", "relu", "exp", "softmax", "min", "max", "sum",
            "mean"} <= seen


PRECEDENCE: list[tuple[str, Shape, Callable[[dict[str, np.ndarray]], np.ndarray]]] = [
    ("-a^T . d", (4,), lambda v: (-v["a"].T) @ v["d"]),
    ("a . b * 2 - s", (3,), lambda v: (v["a"] @ v["b"]) * 2 - v["s"]),
    ("a - b - s / 2", (3, 4), lambda v: v["a"] - v["b"] - v["s"] / 2),
    ("[a, d as [3 x 1]] @1 . [b, s as [1]]", (3,),
     lambda v: np.concatenate([v["a"], v["d"].reshape(3, 1)], 1)
     @ np.concatenate([v["b"], v["s"].reshape(1)])),
    ("(c^T . a^T) as [3 x 2] . e", (3,), lambda v: (v["c"].T @ v["a"].T).reshape(3, 2) @ v["e"]),
]


@pytest.mark.parametrize(("text", "shape", "want"), PRECEDENCE)
def test_precedence_survives_compilation(
        text: str, shape: Shape, want: Callable[[dict[str, np.ndarray]], np.ndarray]) -> None:
    module = dlvm.tel.compile(module_text(Node("name", (), shape, text)), "m.tel")
    env = inputs(7)
    np.testing.assert_allclose(run_inference(module, env), want(env), rtol=1e-9, atol=1e-12)


# ---------------------------------------------------------------- generated names

# TEL names that are also names the code generator gives its own values
COLLIDING = {
    "an input called params": "params: in[3]\nw: param[3] = 0.0\ny: out[3] = params * w\n",
    "a target called lr": "x: in[3]\nlr: in[3]\nw: param[3] = 0.0\ny: out[3] = x * w\n"
                          "loss l = mse(y, lr)\n",
    "values called grads and d_params": "x: in[3]\nt: in[3]\nw: param[3] = 0.0\n"
                                        "grads: hidden[3] = x * w\nd_params: out[3] = grads\n"
                                        "loss l = mse(d_params, t)\n",
    "loop names in a recurrent model": "xs: in[_ x _ x 3]\nsteps: in[_ x 3]\nw: param[3] = 1.0\n"
                                       "recurrent t {\n  more: hidden[_ x 3] = xs[t] * w + "
                                       "more[t-1] + steps\n}\nloop: out[_ x 3] = more\n"
                                       "t_next: out[_ x 3] = loop * 2\n",
}


@pytest.mark.parametrize("body", COLLIDING.values(), ids=list(COLLIDING))
def test_tel_names_that_the_code_generator_also_uses_give_a_valid_module(body: str) -> None:
    module = dlvm.tel.compile("module m\ntype float64\n" + body, "m.tel")
    ir.run_passes(module, "verify")
    text = ir.print_module(module)
    assert ir.print_module(ir.parse(text, "m.dl")) == text


@pytest.mark.parametrize("batch", ["_", "2"])
def test_an_integer_recurrent_model_starts_from_a_zero_state(batch: str) -> None:
    module = dlvm.tel.compile(f"module m\ntype int32\nxs: in[{batch} x _ x 3]\n"
                              f"recurrent t {{\n  h: hidden[{batch} x 3] = xs[t] + h[t-1]\n}}\n"
                              f"y: out[{batch} x 3] = h\n", "m.tel")
    ir.run_passes(module, "verify")
    xs = np.arange(30, dtype=np.int32).reshape(2, 5, 3)
    got = ir.compile(module, target="interp")["inference"](xs)
    np.testing.assert_array_equal(got, xs.sum(axis=1))
