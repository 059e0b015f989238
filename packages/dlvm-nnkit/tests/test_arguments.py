"""Every public function and class of NNKit checks its arguments: a wrong one is a one-line
`NNKitTypeError` or `NNKitValueError` — a DLVM error, and a `TypeError` or `ValueError` —
that names the caller's line and says what was expected, never an AttributeError, a
KeyError or a traceback from inside NNKit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm import nnkit as nn
from dlvm.nnkit import Double1D, Float1D, Float2D

SUM = nn.lambda_(lambda x: nn.sum(x), (Float1D,), name="total")
ARRAY = np.ones((2, 2), np.float32)
MODEL = nn.Dense(2, 3, name="d")


def inside(body: Callable[[Any], Any]) -> str:
    """`body` staged as a function of a `<_ x _ x f32>` argument (its IR: no compilation)."""
    return nn.lambda_(body, (Float2D,)).ir()


def program() -> nn.TrainingProgram:
    return nn.training(MODEL, nn.cross_entropy, nn.SGD(), inputs=Float2D, targets=Float2D)


def training(**changes: Any) -> Any:
    args: dict[str, Any] = {"model": MODEL, "loss_fn": nn.cross_entropy,
                            "optimizer": nn.Adam(), "inputs": Float2D, "targets": Float2D}
    args.update(changes)
    model, loss, optimizer = args.pop("model"), args.pop("loss_fn"), args.pop("optimizer")
    return nn.training(model, loss, optimizer, **args)


def binary(op: Callable[[Any, Any], Any]) -> list[Callable[[], Any]]:
    """Wrong operands of a binary operation: outside a staged function, a string inside."""
    return [lambda: op(ARRAY, ARRAY), lambda: inside(lambda x: op(x, "two")),
            lambda: inside(lambda x: op(None, x)), lambda: inside(lambda x: op(x, [1, 2]))]


def unary(op: Callable[[Any], Any]) -> list[Callable[[], Any]]:
    return [lambda: op(ARRAY), lambda: inside(lambda x: op("x")),
            lambda: inside(lambda x: op(np.array(["a"])))]


def axis_taking(op: Callable[..., Any]) -> list[Callable[[], Any]]:
    return [*unary(op), lambda: inside(lambda x: op(x, "a")), lambda: inside(lambda x: op(x, 5)),
            lambda: inside(lambda x: op(x, 1.5))]


# public name → calls with wrong arguments (each must be refused as described above)
WRONG: dict[str, list[Callable[[], Any]]] = {
    # the language
    "lambda_": [lambda: nn.lambda_(5), lambda: nn.lambda_(None),
                lambda: nn.lambda_(lambda x, y: x + y, (Float1D,)),
                lambda: nn.lambda_(lambda x: x, Float1D),
                lambda: nn.lambda_(lambda x: x, ("f32",)),
                lambda: nn.lambda_(lambda x: x, (Float1D, Float1D)),
                lambda: nn.lambda_(lambda x, *, k: x, (Float1D,)),
                lambda: nn.lambda_(lambda x: x, name="a b"),
                lambda: nn.lambda_(lambda x: x, name=5),
                lambda: nn.lambda_(lambda x: x, dynamic="yes")],
    "function": [lambda: nn.function(5), lambda: nn.function(name="1x"),
                 lambda: nn.function(dynamic=None)],
    "StagedFunction": [lambda: nn.StagedFunction(5), lambda: nn.StagedFunction(
        lambda x: x, Float1D), lambda: SUM("not an array"), lambda: SUM(None),
        lambda: SUM(np.ones(3, np.float32), np.ones(3, np.float32)),
        lambda: SUM(np.ones(3, np.uint8)), lambda: SUM(np.ones(3, complex)),
        lambda: SUM([[1.0], [1.0, 2.0]]), lambda: SUM(np.ones((2, 2), np.float32)),
        lambda: SUM.ir("x"), lambda: SUM.ir(dynamic="no"), lambda: SUM.ir(optimize=1),
        lambda: SUM[{"x": 1}], lambda: nn.lambda_(lambda x: x).ir(),
        lambda: nn.lambda_(lambda x: None, (Float1D,)).ir()],
    "gradient": [lambda: nn.gradient(None), lambda: nn.gradient(lambda x: x),
                 lambda: nn.gradient(SUM, wrt="x"), lambda: nn.gradient(SUM, wrt=()),
                 lambda: nn.gradient(SUM, wrt=[]), lambda: nn.gradient(SUM, wrt=1),
                 lambda: nn.gradient(SUM, wrt=(0, 0)), lambda: nn.gradient(SUM, wrt=-1),
                 lambda: nn.gradient(SUM, wrt=0.0), lambda: nn.gradient(SUM, keeping="y"),
                 lambda: nn.gradient(SUM, seedable="yes"), lambda: nn.gradient(SUM, name=3)],
    "tangent": [lambda: nn.tangent(None), lambda: nn.tangent(SUM, wrt=()),
                lambda: nn.tangent(SUM, wrt=(True,)), lambda: nn.tangent(SUM, keeping=[-1])],
    "Tensor": [lambda: nn.Tensor[nn.f32], lambda: nn.Tensor[nn.f32, -1],
               lambda: nn.Tensor[nn.f32, 2.5], lambda: nn.Tensor["f32", 1],
               lambda: nn.Tensor[nn.f32, (3, "a")], lambda: nn.Tensor[nn.f32, (-2,)],
               lambda: nn.Tensor()],
    "TensorSpec": [lambda: nn.TensorSpec("f32", (3,)), lambda: nn.TensorSpec(nn.f32, 3),
                   lambda: nn.TensorSpec(nn.f32, (None, -1)), lambda: nn.TensorSpec.of("x"),
                   lambda: nn.TensorSpec.of(np.ones(2, np.uint16)),
                   lambda: nn.TensorSpec.of(None)],
    "StagedTensor": [lambda: nn.StagedTensor(1, 2, 3)],
    "Rep": [lambda: nn.Rep(None, Float1D, None)],
    # control flow
    "cond": [lambda: nn.cond(np.bool_(True), lambda v: v, lambda v: -v, ARRAY),
             lambda: inside(lambda x: nn.cond(True, 1, 2, x)),
             lambda: inside(lambda x: nn.cond(x, lambda v: v, lambda v: v, x)),
             lambda: inside(lambda x: nn.cond("yes", lambda v: v, lambda v: v, x))],
    "while_loop": [lambda: nn.while_loop(lambda v: v, lambda v: v, ARRAY),
                   lambda: inside(lambda x: nn.while_loop(1, lambda v: v, x)),
                   lambda: inside(lambda x: nn.while_loop(lambda v: v, None, x)),
                   lambda: inside(lambda x: nn.while_loop(lambda v: v, lambda v: v, x))],
    "fori_loop": [lambda: nn.fori_loop(0, 3, lambda t, h: h, ARRAY),
                  lambda: inside(lambda x: nn.fori_loop(0.5, 3, lambda t, h: h, x)),
                  lambda: inside(lambda x: nn.fori_loop(0, "3", lambda t, h: h, x)),
                  lambda: inside(lambda x: nn.fori_loop(0, 3, "body", x))],
    # element-wise
    **{name: binary(getattr(nn, name)) for name in (
        "add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "less",
        "less_equal", "greater", "greater_equal", "equal", "not_equal", "dot")},
    **{name: unary(getattr(nn, name)) for name in (
        "negate", "tanh", "exp", "log", "sqrt", "sin", "cos", "erf", "square", "sigmoid",
        "relu", "transpose")},
    "select": [lambda: nn.select(ARRAY > 0, ARRAY, ARRAY),
               lambda: inside(lambda x: nn.select("m", x, x)),
               lambda: inside(lambda x: nn.select(x > 0, x, "b"))],
    "where": [lambda: nn.where(ARRAY > 0, ARRAY, ARRAY),
              lambda: inside(lambda x: nn.where(x > 0, None, x))],
    # layout
    "pad_shape": axis_taking(nn.pad_shape),
    "rank_lifted": axis_taking(nn.rank_lifted),
    "squeeze": axis_taking(nn.squeeze),
    "reshape": [*unary(lambda x: nn.reshape(x, (4,))),
                lambda: inside(lambda x: nn.reshape(x, 5.5)),
                lambda: inside(lambda x: nn.reshape(x, (-1,))),
                lambda: inside(lambda x: nn.reshape(x, ("a", 2))),
                lambda: inside(lambda x: nn.reshape(x, None))],
    "take": [*unary(lambda x: nn.take(x, 0)), lambda: inside(lambda x: nn.take(x, 1.5)),
             lambda: inside(lambda x: nn.take(x, "0")), lambda: inside(lambda x: nn.take(x, -1)),
             lambda: inside(lambda x: nn.take(nn.sum(x), 0)),
             lambda: nn.lambda_(lambda v: nn.take(v, 3), (nn.Tensor[nn.f32, (3,)],)).ir()],
    "concatenate": [lambda: nn.concatenate([ARRAY, ARRAY]),
                    lambda: inside(lambda x: nn.concatenate(x)),
                    lambda: inside(lambda x: nn.concatenate([])),
                    lambda: inside(lambda x: nn.concatenate([x, x], axis="0")),
                    lambda: inside(lambda x: nn.concatenate([x, "y"]))],
    "reverse": [*unary(lambda x: nn.reverse(x, 0)), lambda: inside(lambda x: nn.reverse(x, None)),
                lambda: inside(lambda x: nn.reverse(x, (0, 0))),
                lambda: inside(lambda x: nn.reverse(x, "a"))],
    "slice_rows": [*unary(lambda x: nn.slice_rows(x, 0, 1)),
                   lambda: inside(lambda x: nn.slice_rows(x, 3, 1)),
                   lambda: inside(lambda x: nn.slice_rows(x, -1, 1)),
                   lambda: inside(lambda x: nn.slice_rows(x, "0", 1))],
    "convolve": [lambda: nn.convolve(ARRAY, ARRAY),
                 lambda: inside(lambda x: nn.convolve(x, "k")),
                 lambda: inside(lambda x: nn.convolve(x, x, strides=5)),
                 lambda: inside(lambda x: nn.convolve(x, x, strides=(0,))),
                 lambda: inside(lambda x: nn.convolve(x, x, padding=[(1,)])),
                 lambda: inside(lambda x: nn.convolve(x, x, padding=[(1, -1)])),
                 lambda: inside(lambda x: nn.convolve(x, x, dilation="1")),
                 lambda: inside(lambda x: nn.convolve(x, x, groups=0))],
    # reductions and composites
    "reduce": [*unary(lambda x: nn.reduce(x, "add", 0)),
               lambda: inside(lambda x: nn.reduce(x, "bogus", 0)),
               lambda: inside(lambda x: nn.reduce(x, 5, 0)),
               lambda: inside(lambda x: nn.reduce(x, "add", "0")),
               lambda: inside(lambda x: nn.reduce(x, "add", 0, axis=2)),
               lambda: nn.lambda_(lambda v: nn.reduce(v, "max", -float("inf")),
                                  (nn.Int1D,)).ir(),
               lambda: nn.lambda_(lambda v: nn.reduce(v, "add", 0.5), (nn.Int1D,)).ir()],
    "sum": [*axis_taking(nn.sum), lambda: inside(lambda x: nn.sum(x, (0, 0)))],
    "max": [*axis_taking(nn.max), lambda: inside(lambda x: nn.max(x, (0, "1")))],
    "mean": axis_taking(nn.mean),
    "softmax": axis_taking(nn.softmax),
    "log_softmax": axis_taking(nn.log_softmax),
    "cross_entropy": [lambda: nn.cross_entropy(ARRAY, ARRAY),
                      lambda: inside(lambda x: nn.cross_entropy(x, "y")),
                      lambda: inside(lambda x: nn.cross_entropy("z", x))],
    # the model library
    "Dense": [lambda: nn.Dense(-1, 3), lambda: nn.Dense(2, 0), lambda: nn.Dense(2.5, 3),
              lambda: nn.Dense(True, 3), lambda: nn.Dense("2", 3),
              lambda: nn.Dense(2, 3, activation=5), lambda: nn.Dense(2, 3, name="a-b"),
              lambda: nn.Dense(2, 3, name=None), lambda: nn.Dense(2, 3, dtype=nn.i32),
              lambda: nn.Dense(2, 3, dtype="f32"), lambda: MODEL.init(0),
              lambda: inside(lambda x: MODEL({}, x)), lambda: inside(lambda x: MODEL(None, x))],
    "RNNCell": [lambda: nn.RNNCell(0, 3), lambda: nn.RNNCell(2, -3), lambda: nn.RNNCell(2, 3,
                name=""), lambda: nn.RNNCell(2, 3).init(None),
                lambda: inside(lambda x: nn.RNNCell(2, 3)({"rnn_wx": x}, x, x))],
    "Sequential": [lambda: nn.Sequential(MODEL), lambda: nn.Sequential([5]),
                   lambda: nn.Sequential([MODEL, nn.Dense(3, 3, name="d")]),
                   lambda: nn.Sequential([nn.Dense]), lambda: nn.Sequential([MODEL]).init(1)],
    "Embedding": [lambda: nn.Embedding(0, 3), lambda: nn.Embedding(5, 2.5),
                  lambda: nn.Embedding(5, 3, name="a b"), lambda: nn.Embedding(5, 3).init(1)],
    "LayerNorm": [lambda: nn.LayerNorm(-2), lambda: nn.LayerNorm(4, eps=0),
                  lambda: nn.LayerNorm(4, eps="1e-5")],
    "CausalSelfAttention": [lambda: nn.CausalSelfAttention(10, 3, 4),
                            lambda: nn.CausalSelfAttention(8, 0, 4),
                            lambda: nn.CausalSelfAttention(8, 2, None)],
    "TransformerBlock": [lambda: nn.TransformerBlock(8, 2, 4, 0),
                         lambda: nn.TransformerBlock("8", 2, 4, 16)],
    "gelu": [lambda: nn.gelu("x"), lambda: nn.gelu(None)],
    "AdamW": [lambda: nn.AdamW(beta1=1.0), lambda: nn.AdamW(weight_decay=-0.1),
              lambda: nn.AdamW(warmup=-1), lambda: nn.AdamW(total=2.5),
              lambda: nn.AdamW(decay_names="w"), lambda: nn.AdamW(decay_names=[3])],
    "SGD": [lambda: nn.SGD(-0.1), lambda: nn.SGD(1.0), lambda: nn.SGD("0.9"),
            lambda: nn.SGD(float("nan")), lambda: nn.SGD(momentum=None)],
    "Adam": [lambda: nn.Adam(-1), lambda: nn.Adam(1.0), lambda: nn.Adam(beta2=2),
             lambda: nn.Adam(eps=0), lambda: nn.Adam(eps=-1e-8), lambda: nn.Adam(eps=float("inf")),
             lambda: nn.Adam("0.9"), lambda: nn.Adam(beta1=True)],
    "training": [lambda: training(model=5), lambda: training(model=nn.Dense),
                 lambda: training(loss_fn="mse"), lambda: training(optimizer=nn.Adam),
                 lambda: training(optimizer=None), lambda: training(inputs=2),
                 lambda: training(targets="f32"), lambda: training(model=nn.Sequential([]))],
    "TrainingProgram": [
        lambda: nn.TrainingProgram(1, 2, 3, 4, 5, 6),
        lambda: nn.TrainingProgram(MODEL, SUM, SUM, None, ["w"], []),
        lambda: nn.TrainingProgram(MODEL, SUM, SUM, SUM, "w", []),
        lambda: nn.TrainingProgram(MODEL, SUM, SUM, SUM, ["w"], ["s"]),
        lambda: program().train_step({}, ARRAY, ARRAY, 0.1),
        lambda: program().train_step(None, ARRAY, ARRAY, 0.1),
        lambda: program().train_step({"d_w": ARRAY}, ARRAY, ARRAY, 0.1),
        lambda: program().train_step(program().init(np.random.default_rng(0)), ARRAY, ARRAY,
                                     -0.1),
        lambda: program().train_step(program().init(np.random.default_rng(0)), ARRAY, ARRAY,
                                     "0.1"),
        lambda: program().train_step(program().init(np.random.default_rng(0)), "x", ARRAY,
                                     0.1),
        lambda: program().init(7)],
}
# public names that are not functions to call with arguments
NOT_CALLED = {"StagingError", "NNKitTypeError", "NNKitValueError", "NNKitAttributeError"}
CASES = [(name, k) for name, calls in WRONG.items() for k in range(len(calls))]


def test_every_public_callable_has_wrong_argument_cases() -> None:
    public = {name for name in nn.__all__ if callable(getattr(nn, name))} - NOT_CALLED
    assert sorted(public - set(WRONG)) == []
    assert all(WRONG.values())


@pytest.mark.parametrize(("name", "k"), CASES, ids=[f"{n}-{k}" for n, k in CASES])
def test_a_wrong_argument_is_a_one_line_type_or_value_error(name: str, k: int) -> None:
    with pytest.raises(Exception) as caught:  # which kind: checked below
        WRONG[name][k]()
    error = caught.value
    assert isinstance(error, nn.NNKitTypeError | nn.NNKitValueError), repr(error)
    assert isinstance(error, ir.DlvmError) and isinstance(error, TypeError | ValueError)
    message = str(error)
    assert "\n" not in message
    assert message.startswith(f"{__file__}:"), message  # the caller's line
    assert ": error: " in message and "Rep" not in message


def test_the_samples_say_what_was_expected() -> None:
    expected = {
        lambda: nn.Adam(-1): "beta1 of nnkit.Adam must be a finite number in [0, 1), found "
                             "the int -1",
        lambda: nn.Dense(-1, 3): "inputs of nnkit.Dense must be a positive integer, found the "
                                 "int -1",
        lambda: nn.gradient(None): "the function of nnkit.gradient must be a staged function",
        lambda: nn.gradient(SUM, wrt="x"): "wrt of nnkit.gradient must be an index, a tuple "
                                           "of indices or None, found the string 'x'",
        lambda: nn.gradient(SUM, wrt=()): "wrt of nnkit.gradient must be at least one index",
        lambda: nn.lambda_(lambda x, y: x, (Float1D,)): "nnkit.lambda_ got 1 type for a "
                                                        "function of 2 arguments (x, y)",
        lambda: nn.lambda_(lambda x: x, Double1D): "the types of nnkit.lambda_ must be a tuple "
                                                   "of types, one per argument",
        lambda: program().train_step({}, ARRAY, ARRAY, 0.1): "missing 'd_w', 'd_b'",
    }
    for call, words in expected.items():
        with pytest.raises(nn.StagingError) as caught:
            call()
        assert words in str(caught.value)


def test_right_arguments_still_work() -> None:
    """What the checks accept: numpy integers for sizes, lists for types, β₁ = 0."""
    assert nn.Dense(np.int64(2), 3).inputs == 2
    fn = nn.lambda_(lambda x, k=2.0: x * k, [Double1D])
    np.testing.assert_allclose(fn(np.ones(2)), [2.0, 2.0])
    assert nn.Adam(beta1=0).beta1 == 0.0
    assert nn.Tensor[nn.f32, (None, np.int64(3))].shape == (None, 3)
