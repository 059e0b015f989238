"""The element-wise operators of `dlvm.onnx.pointwise` against ONNX Runtime (and numpy where
ONNX Runtime lacks a kernel or rounds worse): activations, trigonometric and inverse hyperbolic
functions, tests, Clip, Mod, Sum and Mean, and the bitwise operators.

Besides random inputs, the functions run on the values where naive formulas fail — zeros, tiny
and huge magnitudes, infinities, NaN — and the integer operators on the ends of their types
(`edges`: a graph input times 0 plus a constant, so that the values reach the converters at run
time rather than being folded at import; one model for several operators, one output each).
The composed functions are held to a few ulps of numpy's over the whole range, and their
derivatives to the analytic ones at the same values, where a branch not taken must not turn a
gradient into NaN.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import dlvm.ir as ir
import dlvm.onnx
from dlvm.ir import DerivativeDecl
from dlvm.ir.types import FunctionType, TupleType
from dlvm.onnx.testing import LOOSE, TARGETS, Case, In, check, dyn, graph, op

ort = pytest.importorskip("onnxruntime")

A = In((2, 3, 4))
n = helper.make_node
HALF = (1e-3, 1e-3)  # float16: an ulp is 1e-3 of the value

# where naive compositions lose precision, overflow or take a wrong branch
EDGES = [0.0, -1e-7, 1e-7, -1e-3, 0.3, -0.7, 1.0, -1.0, 2.5, -20.0, 20.0, -100.0, 100.0,
         -1e4, 1e4, -1e30, 1e30, np.inf, -np.inf, np.nan]
Op = str | tuple[str, dict[str, Any]]  # an operator, or one with attributes


def edges(name: str, ops: list[Op], values: list[float] | None = None,
          dtype: type = np.float32, opset: int = 18, tol: tuple[float, float] = LOOSE
          ) -> Case:
    """each operator of `ops` of constant values computed at run time (x·0 + c)"""
    c = np.array(EDGES if values is None else values, np.float64).astype(dtype)
    nodes = [n("Mul", ["x", "zero"], ["z"]), n("Add", ["z", "c"], ["v"])]
    outputs = []
    for k, o in enumerate(ops):
        o_type, attrs = (o, {}) if isinstance(o, str) else o
        nodes.append(n(o_type, ["v"], [f"y{k}"], **attrs))
        outputs.append(f"y{k}")
    case = graph(f"edges-{name}-{np.dtype(dtype).name}", nodes,
                 {"x": In((len(c),), dtype=dtype)}, {"zero": np.zeros(1, dtype), "c": c},
                 outputs=tuple(outputs), opset=opset, tol=tol)
    case.seeds = (0,)  # x·0: every seed gives the same values
    return case


def ends(dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.array([info.min, info.min + 1, -6, -2, -1, 0, 1, 2, 5, info.max - 1, info.max],
                    dtype)


def pairs(name: str, ops: list[Op], values: np.ndarray, opset: int = 18,
          tol: tuple[float, float] = LOOSE) -> Case:
    """each binary operator of `ops` of every pair of `values` (x·0 + the constants)"""
    dtype = values.dtype.type
    a, b = (v.astype(dtype) for v in np.meshgrid(values, values))
    nodes = [n("Mul", ["x", "zero"], ["z"]), n("Add", ["z", "a"], ["va"]),
             n("Add", ["z", "b"], ["vb"])]
    outputs = []
    for k, o in enumerate(ops):
        o_type, attrs = (o, {}) if isinstance(o, str) else o
        nodes.append(n(o_type, ["va", "vb"], [f"y{k}"], **attrs))
        outputs.append(f"y{k}")
    case = graph(f"pairs-{name}-{np.dtype(dtype).name}", nodes,
                 {"x": In(a.shape, "int", dtype)}, {"zero": np.zeros(1, dtype), "a": a, "b": b},
                 outputs=tuple(outputs), opset=opset, tol=tol)
    case.seeds = (0,)
    return case


def of(first: str, o: str, x: In = A) -> Case:
    """o of `first`(x): inputs brought into o's domain (Tanh for Atanh, Sin for Asin, …)"""
    return graph(f"{o}-of-{first}", [n(first, ["x"], ["v"]), n(o, ["v"], ["y"])], {"x": x},
                 tol=LOOSE)


INTS = [In((3, 4), "int", t) for t in (np.int8, np.int16, np.int32, np.int64)]
ACTIVATION_EDGES: list[Op] = [
    "Elu", "Selu", "Celu", ("Celu", {"alpha": -1.5}), "Softplus", "Softsign", "HardSigmoid",
    "HardSwish", "ThresholdedRelu", "Mish", "Shrink", ("Shrink", {"lambd": 0.2, "bias": 1.5})]
FUNCTION_EDGES: list[Op] = ["Tan", "Sinh", "Cosh", "Asin", "Acos", "Atan", "Asinh", "Acosh",
                            "Atanh", "Round", "IsNaN", "IsInf", ("IsInf", {"detect_negative": 0}),
                            ("IsInf", {"detect_positive": 0}),
                            ("IsInf", {"detect_positive": 0, "detect_negative": 0}), "Clip"]

ACTIVATIONS = [
    op("Elu", A), op("Elu", dyn(3), alpha=0.5), op("Elu", In((2, 3), dtype=np.float64)),
    op("Elu", In((2, 3), dtype=np.float16), tol=HALF),
    op("Selu", A), op("Selu", A, alpha=2.0, gamma=3.0),
    op("Celu", A), op("Celu", A, alpha=2.0),
    op("Softplus", A, tol=LOOSE), op("Softsign", A),
    op("HardSigmoid", A, alpha=0.3, beta=0.4), op("HardSwish", A, tol=LOOSE),
    op("ThresholdedRelu", A, alpha=0.25),
    op("Swish", A, opset=24, tol=LOOSE), op("Swish", A, opset=24, alpha=1.7, tol=LOOSE),
    op("Mish", A, tol=LOOSE),
    op("Shrink", A, lambd=0.3, bias=0.7),
    op("Shrink", In((3, 4), "int", np.int32), lambd=1.5, bias=2.0),
    op("Shrink", In((3, 4), "int", np.int8), lambd=-2.5, bias=1.0),
    op("PRelu", A, In((2, 3, 4))), op("PRelu", A, In((4,))), op("PRelu", A, In((3, 1))),
    op("PRelu", dyn(3), In((1,))),
    op("PRelu", In((2, 3), "int", np.int32), In((3,), "int", np.int32)),
    edges("activations", ACTIVATION_EDGES),
    edges("swish", ["Swish", ("Swish", {"alpha": 0.5})], opset=24),
    edges("activations", ["Elu", "Selu", "Softsign", "HardSwish"], dtype=np.float64),
    edges("activations", ["Elu", "Softplus", "HardSwish"],
          [0.0, -1e-3, 0.3, -0.7, 2.5, -10.0, 10.0, np.nan], np.float16, tol=HALF),
]

FUNCTIONS = [
    *[op(o, A, tol=LOOSE) for o in ("Tan", "Sinh", "Cosh", "Atan", "Asinh", "Round", "IsNaN")],
    of("Sin", "Asin"), of("Cos", "Acos"), of("Tanh", "Atanh"), of("Exp", "Acosh"),
    op("Round", In((2, 3), dtype=np.float64)),
    edges("functions", FUNCTION_EDGES),
    edges("near-one", ["Atanh", "Acosh", "Asin", "Acos"],
          [0.0, 1e-7, -1e-7, 0.5, -0.99999, 0.999, 1.0, -1.0, 1.0000001, 1.5, 4096.0, 5000.0,
           np.nan]),
    edges("halves", ["Round"], [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997]),
    edges("tests", ["IsInf", "IsNaN"], [1.0, np.inf, -np.inf, np.nan, 0.0], np.float16,
          opset=20),
]

CLIPS = [
    op("Clip", A, np.array(-0.5, np.float32), np.array(0.5, np.float32)),
    op("Clip", A, None, np.array(0.5, np.float32)),
    op("Clip", A, In(()), In(())),  # bounds computed at run time (lo > hi with some seeds)
    op("Clip", A, np.array(1.0, np.float32), np.array(-1.0, np.float32)),
    op("Clip", dyn(3), np.array([-0.5], np.float32)),
    op("Clip", In((3, 4), "int", np.int8), np.array(-2, np.int8), np.array(3, np.int8)),
    op("Clip", In((3, 4), "int", np.int64), None, np.array(1, np.int64)),
    op("Clip", A, np.array(0.0, np.float32), np.array(6.0, np.float32), opset=11),
    edges("clip", [("Clip", {})], [np.inf, -np.inf, np.nan, 1e30], np.float64),
]

ARITHMETIC = [
    op("Sum", A), op("Sum", In((3, 1)), A, In(())), op("Sum", dyn(3), In((3,)), dyn(1)),
    op("Mean", A), op("Mean", In((2, 1, 4)), In((3, 1)), A), op("Mean", dyn(3), In((3,))),
    op("Sum", In((3,), dtype=np.float64), In((2, 3), dtype=np.float64)),
    op("Mod", In((3, 4), "int", np.int32), In((3, 4), "nonzero", np.int32)),
    op("Mod", In((3, 4), "int", np.int64), In((4,), "nonzero", np.int64)),
    op("Mod", dyn(3, kind="int", dtype=np.int16), In((3,), "nonzero", np.int16)),
    op("Mod", A, In((2, 3, 4), "nonzero"), fmod=1),
    op("Mod", In((5, 4), dtype=np.float64), In((4,), "positive", np.float64), fmod=1),
    *[pairs("mod", ["Mod", ("Mod", {"fmod": 1})], np.array([-6, -5, -2, -1, 1, 2, 3, 7], t))
      for t in (np.int8, np.int64)],
    pairs("mod", [("Mod", {"fmod": 1})], np.array([0.0, -3.5, 2.0, -0.25, 1e30, np.inf,
                                                  -np.inf, np.nan], np.float32)),
    op("Xor", In((2, 3, 4), "bool", np.bool_), In((3, 4), "bool", np.bool_)),
    op("Xor", In((3, 1), "bool", np.bool_), In((2, 1, 4), "bool", np.bool_)),
]

BITWISE_OPS: list[Op] = ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]
BITWISE = [
    *[op(o, x, x) for o in BITWISE_OPS for x in INTS],
    op("BitwiseAnd", In((2, 3, 4), "int", np.int32), In((4,), "int", np.int32)),
    op("BitwiseOr", In((3, 1), "int", np.int64), In((), "int", np.int64)),
    op("BitwiseXor", dyn(3, kind="int", dtype=np.int16), In((3,), "int", np.int16)),
    *[pairs("bitwise", BITWISE_OPS, ends(t)) for t in (np.int8, np.int16, np.int32, np.int64)],
    *[op("BitwiseNot", x) for x in INTS],
    graph("BitwiseNot-ends", [n("Mul", ["x", "zero"], ["z"]), n("Add", ["z", "c"], ["v"]),
                              n("BitwiseNot", ["v"], ["y"])],
          {"x": In((11,), "int", np.int64)}, {"zero": np.zeros(1, np.int64), "c": ends(np.int64)}),
]

CASES = [*ACTIVATIONS, *FUNCTIONS, *CLIPS, *ARITHMETIC, *BITWISE]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_operator(case: Case) -> None:
    check(case)


# ------------------------------------------------------------------ against numpy


def model_of(nodes: list[onnx.NodeProto], inputs: dict[str, np.ndarray], outputs: list[str],
             opset: int = 18) -> onnx.ModelProto:
    """a graph of inputs of the arrays' types and shapes"""
    g = helper.make_graph(
        nodes, "t",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for k, a in inputs.items()],
        [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def runs(model: onnx.ModelProto, *args: np.ndarray, optimized: bool = False
         ) -> dict[str, list[np.ndarray]]:
    """the model's outputs on each target (with `optimized`, llvm-cpu as it is by default)"""
    module = dlvm.onnx.load(model)
    targets = {**TARGETS, "llvm-cpu-O2": {}} if optimized else TARGETS
    out = {}
    for t, options in targets.items():
        got = ir.compile(module, t.removesuffix("-O2"), **options)["main"](*args)
        out[t] = [np.asarray(v) for v in (got if isinstance(got, tuple) else (got,))]
    return out


WIDE = np.concatenate([-np.logspace(-30, 30, 121), np.logspace(-30, 30, 121),
                       np.linspace(-1, 1, 81), 1 + np.logspace(-8, 3, 45),
                       [-0.0, np.inf, -np.inf, np.nan]])
PRECISE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Asinh": np.arcsinh, "Acosh": np.arccosh, "Atanh": np.arctanh,
    "Softplus": lambda x: np.logaddexp(0, x),
    "Elu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "Celu": lambda x: np.where(x > 0, x, np.expm1(x)),
    "Mish": lambda x: x * np.tanh(np.logaddexp(0, x)),
}


def near(got: np.ndarray, want: np.ndarray, ulps: int, where: str) -> None:
    """equal NaNs and infinities, normal numbers within `ulps`, subnormal ones within the
    smallest normal number"""
    dtype = want.dtype.type
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=where)
    infinite = np.isinf(want)
    np.testing.assert_array_equal(got[infinite], want[infinite], err_msg=where)
    normal = np.isfinite(want) & (np.abs(want) >= np.finfo(dtype).tiny)
    np.testing.assert_array_max_ulp(got[normal], want[normal], ulps, dtype)
    np.testing.assert_allclose(got[~normal], want[~normal], atol=np.finfo(dtype).tiny,
                               err_msg=where)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_within_a_few_ulps_of_numpy(dtype: type) -> None:
    """Over the whole range — near 0, near the poles, beyond where squares overflow — the
    composed functions are within 4 ulps of numpy's (computed in float64, rounded; ONNX
    Runtime has no float64 or float16 kernels for some), with its infinities and NaNs."""
    with np.errstate(over="ignore"):  # float16: the huge values become infinities
        x = WIDE.astype(dtype)
    ops = sorted(PRECISE)
    model = model_of([n(o, ["x"], [o]) for o in ops], {"x": x}, ops)
    for target, outputs in runs(model, x).items():
        for o, got in zip(ops, outputs, strict=True):
            with np.errstate(all="ignore"):
                want = PRECISE[o](x.astype(np.float64)).astype(dtype)
            assert got.dtype == dtype, (o, target)
            near(got, want, 4, f"{o}, {target}")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_mod_of_floats_takes_the_divisors_sign(dtype: type) -> None:
    """Mod-28's fmod=0 for floats (ONNX Runtime has no kernel): numpy's mod, a zero signed
    as the divisor, ±∞ divisors and dividends."""
    v = np.array([0.0, -0.0, -3.0, 3.0, -4.3, 7.2, 1.0, np.inf, -np.inf, np.nan, 2.1, -3.4])
    a, b = (w.reshape(-1).astype(dtype) for w in np.meshgrid(v, v))
    with np.errstate(all="ignore"):
        want = np.mod(a, b)
    model = model_of([n("Mod", ["a", "b"], ["y"])], {"a": a, "b": b}, ["y"], opset=28)
    for target, (got,) in runs(model, a, b, optimized=True).items():
        np.testing.assert_allclose(got, want, rtol=1e-3, err_msg=target)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want), err_msg=target)


# ------------------------------------------------------------------ derivatives


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0, x)


SLOPES: dict[str, tuple[Callable[[np.ndarray], np.ndarray], list[float]]] = {
    "Elu": (lambda x: np.where(x > 0, 1, np.exp(x)), EDGES[:17]),
    "Celu": (lambda x: np.where(x > 0, 1, np.exp(x)), EDGES[:17]),
    "Softplus": (sigmoid, EDGES[:17]),
    "Mish": (lambda x: np.tanh(softplus(x)) + x * (1 - np.tanh(softplus(x)) ** 2) * sigmoid(x),
             EDGES[:15]),
    "Swish": (lambda x: sigmoid(x) + x * sigmoid(x) * (1 - sigmoid(x)), EDGES[:15]),
    "Asinh": (lambda x: 1 / np.sqrt(1 + x * x), EDGES[:17]),
    "Atanh": (lambda x: 1 / (1 - x * x), [0.0, -1e-7, 1e-3, 0.3, -0.7, 0.999, -0.999]),
    "Acosh": (lambda x: 1 / np.sqrt(x * x - 1), [1.001, 1.5, 2.0, 100.0, 1e4, 1e30]),
}


def test_derivatives() -> None:
    """d/dw Σ o(w) (w the model's weights) is o'(w) for each o, finite wherever o' is: at 0,
    and far out where a branch not taken overflows."""
    ops = sorted(SLOPES)
    ws = {f"w_{o}": np.array(SLOPES[o][1], np.float32) for o in ops}
    nodes = [n("ReduceSum", ["x"], ["s"], keepdims=0)]  # the sum of the sums, plus x's
    for o in ops:
        nodes += [n(o, [f"w_{o}"], [f"o_{o}"]),
                  n("ReduceSum", [f"o_{o}"], [f"s_{o}"], keepdims=0),
                  n("Add", [f"s_{o}", "s"], [f"t_{o}"])]
    nodes.append(n("Sum", [f"t_{o}" for o in ops], ["y"]))
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                     [1])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])],
                          [onnx.numpy_helper.from_array(w, k) for k, w in ws.items()])
    module = dlvm.onnx.load(helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)]))
    forward = module.function("forward")
    assert forward is not None
    args = forward.type_.arguments
    ir.Builder(module).declare("grad", FunctionType(args, TupleType((args[1],
                                                                     forward.type_.result))),
                               DerivativeDecl("gradient", forward, None, (1,), (0,), False))
    for target, options in TARGETS.items():
        exe = ir.compile(module, target, **options)
        # the gradient's tuple comes flattened, then the value
        grads = exe.call("grad", np.zeros(1, np.float32), tuple(ws.values()))[:len(ops)]
        for o, got in zip(ops, grads, strict=True):
            with np.errstate(all="ignore"):
                want = SLOPES[o][0](ws[f"w_{o}"].astype(np.float64))
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-12,
                                       err_msg=f"{o}, {target}")


# ------------------------------------------------------------------ what is refused


@pytest.mark.parametrize(("case", "words"), [
    (op("Shrink", In((3,), "int", np.int32), bias=0.5), "bias=0.5"),
    (op("Celu", A, alpha=0.0), "alpha=0"),
    (op("Clip", A, np.zeros(2, np.float32)), "not a scalar"),
    (op("PRelu", In((1, 3)), In((2, 3))), "does not broadcast to X"),  # X's shape is the output's
    (op("PRelu", In((3,)), In((2, 3))), "higher rank"),
], ids=lambda x: x.id if isinstance(x, Case) else "")
def test_refused(case: Case, words: str) -> None:
    with pytest.raises(ir.DlvmError, match=words):
        dlvm.onnx.load(case.model())
