"""Reductions, arg-reductions, scans, TopK and the losses (reductions.py), and the boolean
reductions of ReduceMax and ReduceMin (ops.py), against ONNX Runtime.

Integer inputs are drawn from −6 to 6, so that maxima tie and the order among equal elements
is tested. Class labels are computed in the graph by an ArgMax over random scores, so that
they are in range and change with the seed; ignore_index is one of them.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

import dlvm.ir as ir
import dlvm.onnx
from dlvm.ir import DerivativeDecl
from dlvm.ir.types import FunctionType, TupleType
from dlvm.onnx.testing import LOOSE, Case, In, check, dyn, graph, i64, op, refusal

ort = pytest.importorskip("onnxruntime")

A = In((2, 3, 4))
POSITIVE = In((2, 3, 4), "positive")
INTS = In((3, 5), "int", np.int64)
TIES = In((3, 5), "int")  # float32 with equal elements


def i32(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


# ------------------------------------------------------------------ reductions

COMPOSITES = ("ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp")


def composite(o: str, x: In = A, *args: np.ndarray, **attrs: object) -> Case:
    """`o` of x (positive for ReduceLogSum), loosely compared where it takes a log."""
    if o == "ReduceLogSum" and x.kind == "normal":
        x = In(x.shape, "positive", x.dtype, x.dynamic)
    tol = LOOSE if o in ("ReduceLogSum", "ReduceLogSumExp", "ReduceL2") else (1e-5, 1e-6)
    return op(o, x, *args, tol=tol, **attrs)  # type: ignore[arg-type]


def infinities(o: str) -> Case:
    """o of rows holding ±∞ (x + a constant with infinities)."""
    c = np.array([[0, 0, 0], [np.inf, 0, 0], [-np.inf, -np.inf, -np.inf], [np.inf, -np.inf, 0]],
                 np.float32)
    nodes = [helper.make_node("Add", ["x", "c"], ["s"]),
             helper.make_node(o, ["s", "axes"], ["y"], keepdims=0)]
    return graph(f"{o}-of-infinities", nodes, {"x": In((4, 3))}, {"c": c, "axes": i64(1)},
                 tol=LOOSE)


ROTATED = [  # (inputs, attributes), each with one of the composites in turn
    ((A, i64(0, -1)), {"keepdims": 0}),
    ((A,), {"axes": [2, 0], "opset": 13}),
    ((dyn(3, 4), i64(2)), {}),
    ((dyn(3, 4), i64(0, 1)), {"keepdims": 0}),  # along the dynamic axis too
    ((A, i64()), {"noop_with_empty_axes": 1, "keepdims": 0}),
]

REDUCTIONS = [
    *[composite(o, A, i64(1)) for o in COMPOSITES],
    *[composite(o) for o in COMPOSITES],
    *[composite(o, A, noop_with_empty_axes=1) for o in COMPOSITES],
    *[composite(o, In((2, 0, 4)), i64(1)) for o in COMPOSITES],  # empty sets
    *[composite(o, *args, **attrs)  # type: ignore[arg-type]
      for o, (args, attrs) in zip(COMPOSITES, ROTATED, strict=True)],
    op("ReduceSumSquare", In((3, 4), "int", np.int64), i64(1)),
    op("ReduceL1", In((3, 4), "int", np.int32), i64(0)),
    composite("ReduceL2", In((3, 4), dtype=np.float64), i64(1)),
    infinities("ReduceLogSumExp"),
    infinities("ReduceL1"),
    # booleans: max is any, min is all
    *[op(o, In((2, 3, 4), "bool", np.bool_), *axes, keepdims=k, opset=20)
      for o in ("ReduceMax", "ReduceMin") for axes, k in (((i64(1),), 1), ((), 0))],
]

# ------------------------------------------------------------------ arg-reductions

ARG = [
    op("ArgMax", A),
    op("ArgMin", A, axis=1),
    op("ArgMax", A, axis=-1, keepdims=0),
    *[op(o, x, axis=1, select_last_index=s) for o in ("ArgMax", "ArgMin") for x in (INTS, TIES)
      for s in (0, 1)],
    op("ArgMin", In((6,), "int", np.int32)),
    op("ArgMax", In((2, 3), dtype=np.float64), axis=1, opset=11),
    op("ArgMax", dyn(3), axis=0),  # along a dynamic axis
    op("ArgMin", dyn(3, 4), axis=2, keepdims=0),
    op("ArgMax", dyn(3, kind="int", dtype=np.int64), axis=0, select_last_index=1),
]

HARDMAX = [
    op("Hardmax", A),
    op("Hardmax", A, axis=0),
    op("Hardmax", TIES, axis=1),
    op("Hardmax", dyn(4), axis=0),
    # before opset 13 it flattens at axis (default 1): rows of 12 here
    op("Hardmax", A, opset=11),
    op("Hardmax", A, axis=0, opset=11),
    op("Hardmax", dyn(3, 4), axis=-1, opset=11),
    op("Hardmax", dyn(3, 4), opset=9),
]


def zero_rows(p: int) -> Case:
    """LpNormalization of rows of which some are all zero (x times a 0/1 mask)."""
    mask = np.array([[1], [0], [1], [0]], np.float32)
    nodes = [helper.make_node("Mul", ["x", "m"], ["z"]),
             helper.make_node("LpNormalization", ["z"], ["y"], axis=1, p=p)]
    return graph(f"LpNormalization-p{p}-zero-rows", nodes, {"x": In((4, 3))}, {"m": mask})


LPNORM = [
    op("LpNormalization", A),
    op("LpNormalization", A, p=1),
    op("LpNormalization", A, axis=0, p=2),
    op("LpNormalization", dyn(5), axis=1),
    op("LpNormalization", dyn(5), axis=0, p=1),
    zero_rows(1),
    zero_rows(2),
]

# ------------------------------------------------------------------ scans


def scans(o: str, opset: int) -> list[Case]:
    x = In((2, 3, 4), "positive") if o == "CumProd" else A
    return [
        op(o, x, np.array(1, np.int64), opset=opset),
        op(o, x, np.array(-1, np.int64), exclusive=1, opset=opset),
        op(o, x, i32(0), reverse=1, opset=opset),
        op(o, x, np.array(2, np.int32), exclusive=1, reverse=1, opset=opset),
        op(o, In((3, 4), "int", np.int32), np.array(1, np.int64), exclusive=1, opset=opset),
        op(o, In((3, 1)), np.array(1, np.int64), exclusive=1, opset=opset),
        op(o, dyn(3), np.array(1, np.int64), exclusive=1, reverse=1, opset=opset),
        op(o, dyn(3), np.array(0, np.int64), reverse=1, opset=opset),  # a dynamic axis
    ]


SCANS = [*scans("CumSum", 18), *scans("CumProd", 26)]

# ------------------------------------------------------------------ top k


def top_k(x: In, k: int, opset: int = 18, **attrs: object) -> Case:
    return op("TopK", x, i64(k), outputs=2, opset=opset, **attrs)  # type: ignore[arg-type]


TOPK = [
    top_k(A, 2),
    top_k(A, 3, axis=1, largest=0),
    top_k(INTS, 4, axis=1),
    top_k(In((3, 5), "int", np.int32), 5, axis=-1, largest=0),  # every element: a sort
    top_k(TIES, 3, largest=0),
    top_k(dyn(6), 3, axis=1),
    top_k(dyn(6), 1, axis=0),  # along a dynamic axis (of 1 with one seed)
    top_k(In((3, 4), dtype=np.float64), 2, sorted=1),
    top_k(A, 2, opset=10),
]

# ------------------------------------------------------------------ losses


def loss(o: str, scores: In, weights: bool = False, shift: int = 0, outputs: int = 1,
         **attrs: object) -> Case:
    """o of scores [N x C x d…] and labels ArgMax(r) (− shift) of random r of their shape, with
    weights [C] of an input."""
    nodes = [helper.make_node("ArgMax", ["r"], ["a"], axis=1, keepdims=0)]
    inputs = {"s": scores, "r": scores}
    consts = {}
    labels = "a"
    if shift:
        nodes.append(helper.make_node("Sub", ["a", "shift"], ["t"]))
        consts["shift"] = np.array(shift, np.int64)
        labels = "t"
    args = ["s", labels]
    if weights:
        inputs["w"] = In((scores.shape[1],), "positive")
        args.append("w")
    outs = ("y",) if outputs == 1 else ("y", "logp")
    nodes.append(helper.make_node(o, args, list(outs), **attrs))
    parts = [o, "x".join(map(str, scores.shape)), *(["dyn"] if scores.dynamic else []),
             *(["weights"] if weights else []), *(f"{k}={v}" for k, v in attrs.items()),
             *([f"shift{shift}"] if shift else []), *(["log_prob"] if outputs > 1 else [])]
    return graph("-".join(parts), nodes, inputs, consts, outs, opset=18, tol=LOOSE)


def losses(o: str) -> list[Case]:
    more = {"outputs": 2} if o == "SoftmaxCrossEntropyLoss" else {}
    return [
        loss(o, In((3, 5))),
        loss(o, In((3, 5)), reduction="none", **more),
        loss(o, In((3, 5)), weights=True, **more),
        loss(o, In((3, 5, 4)), weights=True, ignore_index=1, **more),
        loss(o, In((3, 5, 4)), shift=1, ignore_index=-1, reduction="sum"),
        loss(o, In((2, 4, 3, 2)), weights=True, reduction="none"),
        loss(o, In((3, 5), dynamic=(0,)), weights=True, ignore_index=0, **more),
        loss(o, In((3, 5, 4), dynamic=(0, 2))),
    ]


LOSSES = [*losses("NegativeLogLikelihoodLoss"), *losses("SoftmaxCrossEntropyLoss")]

CASES: list[Case] = [*REDUCTIONS, *ARG, *HARDMAX, *LPNORM, *SCANS, *TOPK, *LOSSES]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_operator(case: Case) -> None:
    check(case)


# ------------------------------------------------------------------ what is refused


def test_what_is_refused() -> None:
    assert "axis (input 1) must be known at import" in refusal(
        op("CumSum", A, In((), "int", np.int64)))
    assert "exclusive CumSum along a dynamic dimension" in refusal(
        op("CumSum", dyn(3), np.array(0, np.int64), exclusive=1))
    assert "k (input 1) must be known at import" in refusal(
        op("TopK", A, In((1,), "int", np.int64), outputs=2))
    beyond = top_k(A, 2).model()  # then k = 5, for 4 elements (ONNX's inference refuses it)
    beyond.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(i64(5), "c1"))
    with pytest.raises(ir.DlvmError, match="k=5 for 4 elements"):
        dlvm.onnx.load(beyond)
    assert "at most 128" in refusal(top_k(In((2, 200)), 129))
    assert "floats only" in refusal(op("ReduceL2", INTS, i64(1)))
    assert "p=3" in refusal(op("LpNormalization", A, p=3))
    assert "ArgMax of booleans" in refusal(op("ArgMax", In((3,), "bool", np.bool_)))


def test_boolean_reductions_of_nothing() -> None:
    """ReduceMax of no booleans is false, ReduceMin true (ONNX Runtime refuses them)."""
    x = np.zeros((2, 0, 3), np.bool_)
    for o, want in (("ReduceMax", False), ("ReduceMin", True)):
        model = op(o, In((2, 0, 3), "bool", np.bool_), i64(1), opset=20).model()
        for target in ("interp", "llvm-cpu"):
            got = ir.compile(dlvm.onnx.load(model), target)["main"](x)
            np.testing.assert_array_equal(got, np.full((2, 1, 3), want))


# ------------------------------------------------------------------ run-time errors


def test_labels_out_of_range_are_a_run_time_error() -> None:
    """A label outside [0, C) that is not ignore_index stops the program (no silent 0)."""
    model = op("NegativeLogLikelihoodLoss", In((2, 3)), In((2,), "int", np.int64),
               ignore_index=-1, reduction="none").model()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for target in ("interp", "llvm-cpu"):
        run = ir.compile(dlvm.onnx.load(model), target)["main"]
        np.testing.assert_array_equal(run(x, np.array([2, -1], np.int64)), [-2, 0])
        for bad in ([3, 0], [0, -2]):
            with pytest.raises(ir.DlvmError, match="out of bounds"):
                run(x, np.array(bad, np.int64))


def test_label_counts_that_differ_are_a_run_time_error() -> None:
    """Scores of a dynamic batch and labels of another: 2 against 1 is not broadcast."""
    model = op("NegativeLogLikelihoodLoss", dyn(3), dyn(kind="int", dtype=np.int64),
               reduction="sum").model()
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "other"
    run = ir.compile(dlvm.onnx.load(model), "interp")["main"]
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run(x, np.array([1, 2], np.int64)), -6)
    with pytest.raises(ir.DlvmError, match="out of bounds"):
        run(x, np.array([1], np.int64))


def test_top_k_beyond_a_dynamic_axis_is_a_run_time_error() -> None:
    run = ir.compile(dlvm.onnx.load(top_k(dyn(3), 2, axis=0).model()), "interp")["main"]
    values, indices = run(np.array([[1, 5, 2], [3, 4, 6]], np.float32))
    np.testing.assert_array_equal(values, [[3, 5, 6], [1, 4, 2]])
    np.testing.assert_array_equal(indices, [[1, 0, 1], [0, 1, 0]])
    with pytest.raises(ir.DlvmError, match="out of bounds"):
        run(np.array([[1, 5, 2]], np.float32))


def test_arg_max_along_an_empty_dynamic_axis_is_a_run_time_error() -> None:
    run = ir.compile(dlvm.onnx.load(op("ArgMax", dyn(3)).model()), "interp")["main"]
    np.testing.assert_array_equal(run(np.array([[1, 5, 2], [3, 4, 6]], np.float32)),
                                  [[1, 0, 1]])
    with pytest.raises(ir.DlvmError, match="out of bounds"):
        run(np.zeros((0, 3), np.float32))


def test_nan_ranks_as_numpy_ranks_it() -> None:
    """ArgMax and ArgMin find the first NaN (numpy's argmax); TopK ranks NaN above every
    number (ONNX's reference, ONNX Runtime)."""
    x = np.array([[1, np.nan, 3, np.nan], [1, 2, 3, 3]], np.float32)
    for o, want in (("ArgMax", [[1], [2]]), ("ArgMin", [[1], [0]])):
        run = ir.compile(dlvm.onnx.load(op(o, In((2, 4)), axis=1).model()), "interp")["main"]
        np.testing.assert_array_equal(run(x), want)
    for largest, want in ((1, [[1, 3, 2], [2, 3, 1]]), (0, [[0, 2, 1], [0, 1, 2]])):
        model = top_k(In((2, 4)), 3, axis=1, largest=largest).model()
        _, indices = ir.compile(dlvm.onnx.load(model), "interp")["main"](x)
        np.testing.assert_array_equal(indices, want)


# ------------------------------------------------------------------ derivatives


def test_gradients_match_finite_differences() -> None:
    """A loss through CumSum, CumProd, LpNormalization, TopK, the composite reductions and
    SoftmaxCrossEntropyLoss (weights, ignore_index): its gradient with respect to a weight
    matrix (of float64) against central differences."""
    n = helper.make_node
    w = np.random.default_rng(0).standard_normal((6, 5))
    nodes = [n("MatMul", ["x", "w"], ["z"]),
             n("CumSum", ["z", "one"], ["c"], exclusive=1),
             n("CumProd", ["z", "one"], ["p"], reverse=1),
             n("Add", ["c", "p"], ["cp"]),
             n("LpNormalization", ["cp"], ["l"], axis=1),
             n("TopK", ["l", "k"], ["t", "ti"]),
             n("ReduceLogSumExp", ["t", "ax"], ["h"]),
             n("Sub", ["t", "h"], ["s"]),
             *[n(o, ["z", "ax"], [o]) for o in ("ReduceL2", "ReduceL1", "ReduceSumSquare")],
             n("Mul", ["s", "ReduceL2"], ["s2"]),
             n("Add", ["s2", "ReduceL1"], ["s3"]),
             n("Sub", ["s3", "ReduceSumSquare"], ["s4"]),
             n("SoftmaxCrossEntropyLoss", ["s4", "labels", "weights"], ["y"], ignore_index=1)]
    consts = {"one": np.array(1, np.int64), "k": i64(4), "ax": i64(1),
              "labels": i64(0, 3, 1), "weights": np.array([1.0, 2.0, 0.5, 1.5])}
    model = graph("gradient", nodes, {"x": In((3, 6), dtype=np.float64)},
                  {"w": w, **consts}, opset=26).model()
    module = dlvm.onnx.load(model)
    forward = module.function("forward")
    assert forward is not None
    args = forward.type_.arguments
    grad_type = FunctionType(args, TupleType((args[1], forward.type_.result)))
    ir.Builder(module).declare("grad", grad_type,
                               DerivativeDecl("gradient", forward, None, (1,), (0,), False))
    x = np.random.default_rng(1).standard_normal((3, 6))
    exe = ir.compile(module, "interp")
    grad = np.asarray(exe.call("grad", x, (w, consts["weights"]))[0])

    def loss(v: np.ndarray) -> float:
        return float(np.asarray(exe.call("forward", x, (v, consts["weights"]))).reshape(-1)[0])

    want = np.zeros_like(w)
    for i in np.ndindex(w.shape):
        e = np.zeros_like(w)
        e[i] = 1e-6
        want[i] = (loss(w + e) - loss(w - e)) / 2e-6
    np.testing.assert_allclose(grad, want, rtol=1e-5, atol=1e-7)
