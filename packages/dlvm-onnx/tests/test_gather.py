"""Gathers, scatters and one-hot encodings by indices computed at run time (gather.py), the
boolean cases of Expand, Where, Equal and And, against ONNX Runtime; an embedding table's
gradient through a Gather against numpy's scatter-add.

Indices are drawn from −6 to 6 (`In(…, "int", np.int64)`), so the axes they index have 7
elements or more, negative indices included. Where an indexed axis is dynamic, the indices
are made in range in the graph: a run-time zero times the input plus constants.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import dlvm.ir as ir
import dlvm.onnx
from dlvm.onnx.testing import Case, In, check, dyn, graph, i64, op, refusal, weights

ort = pytest.importorskip("onnxruntime")

IDX = np.int64


def ints(*shape: int, dynamic: tuple[int, ...] = (), dtype: type = IDX) -> In:
    return In(shape, "int", dtype, dynamic)


def at_run_time(op_type: str, data: In, index: np.ndarray, id: str, **attrs: object) -> Case:
    """op_type(data, indices) with the constant `index` made a run-time value: zero times an
    integer input, plus the constant (so that it fits an axis of any size)."""
    nodes = [helper.make_node("Mul", ["k", "zero"], ["k0"]),
             helper.make_node("Add", ["k0", "base"], ["idx"]),
             helper.make_node(op_type, ["x", "idx"], ["y"], **attrs)]
    return graph(id, nodes, {"x": data, "k": ints(*index.shape)},
                 {"zero": np.array(0, IDX), "base": index.astype(IDX)})


def table_with_specials(id: str, frozen: np.ndarray | None = None) -> Case:
    """A Gather from a float table holding ±∞ and NaN: made at run time (x / c, c with
    zeros), or a constant."""
    c = np.array([[1, 0, 2], [0, 1, 1], [1, 1, 0], [2, 1, 1], [1, 1, 1], [0, 0, 0],
                  [1, 2, 1]], np.float32)
    if frozen is not None:
        nodes = [helper.make_node("Gather", ["t", "i"], ["y"])]
        return graph(id, nodes, {"i": ints(5)}, {"t": frozen})
    nodes = [helper.make_node("Div", ["x", "c"], ["t"]),
             helper.make_node("Gather", ["t", "i"], ["y"])]
    return graph(id, nodes, {"x": In((7, 3)), "i": ints(5)}, {"c": c})


SPECIALS = np.array([[1, np.inf, 2], [-np.inf, 0, np.nan], [3, 4, 5], [6, 7, 8], [0, -0.0, 1],
                     [np.nan, np.nan, np.nan], [9, 9, 9]], np.float32)

GATHER = [
    op("Gather", weights(7, 3), ints(4)),  # a table (a parameter) by run-time indices
    op("Gather", weights(9, 4), ints(2, 3)),
    op("Gather", weights(9, 4), ints(2, 3, dynamic=(0, 1)), id="Gather-table-by-batch-x-seq"),
    op("Gather", weights(9, 4), ints(2, 3, 2, dynamic=(0, 2)), id="Gather-table-by-3d-dyn"),
    op("Gather", weights(8, 2, 3), ints(2, 3, dynamic=(0,)), id="Gather-3d-table"),
    op("Gather", In((7, 3)), ints(4)),
    op("Gather", In((7, 3)), ints()),
    op("Gather", In((7,)), ints(2, 2)),
    op("Gather", In((2, 7, 3)), ints(2), axis=1),
    op("Gather", In((2, 3, 7)), ints(4, 1), axis=2),
    op("Gather", dyn(7, 3), ints(2), axis=1),
    op("Gather", In((2, 7, 3), dynamic=(0, 2)), ints(2, 2, dynamic=(1,)), axis=1,
       id="Gather-dyn-data-dyn-indices"),
    op("Gather", In((7, 2), "int", np.int64), ints(3)),
    op("Gather", In((7, 2), "int", np.int32), ints(3, dtype=np.int32)),
    op("Gather", In((7, 3), "bool", np.bool_), ints(2)),
    op("Gather", In((7, 3), dtype=np.float16), ints(2, 2)),
    op("Gather", In((7, 3), "bool", np.bool_), ints(2, 3, dynamic=(0, 1)),
       id="Gather-booleans-by-batch-x-seq"),
    op("Gather", In((7, 3), "int", np.int32), ints(2, 3, dynamic=(0, 1)),
       id="Gather-int32-by-batch-x-seq"),
    at_run_time("Gather", dyn(3), np.array([0, -1, 0]), "Gather-dynamic-axis"),
    at_run_time("Gather", In((2, 3), dynamic=(1,)), np.array([[-1], [0]]),
                "Gather-dynamic-axis-1", axis=1),
    table_with_specials("Gather-table-with-inf-nan"),
    # constant indices that ops.py's slices cannot take: negative into a dynamic axis, and a
    # result of several dynamic dimensions reshaped
    op("Gather", dyn(3), i64(-1, 0)),
    op("Gather", In((2, 7, 3), dynamic=(0, 2)), np.array([[0, -1], [1, 2]], IDX), axis=1),
    table_with_specials("Gather-constant-with-inf-nan", SPECIALS),
]

GATHER_ELEMENTS = [
    op("GatherElements", In((3, 7)), ints(3, 4), axis=1),
    op("GatherElements", In((7, 3)), ints(5, 3)),
    op("GatherElements", In((7, 3)), ints(2, 2), axis=-2),  # smaller along the other axis
    op("GatherElements", In((2, 7, 3)), ints(2, 9, 1), axis=1),
    op("GatherElements", In((3, 8), "int", np.int64), ints(3, 2), axis=1),
    op("GatherElements", In((3, 8), "bool", np.bool_), ints(3, 2, dtype=np.int32), axis=1),
    op("GatherElements", dyn(7), ints(2, 4, dynamic=(0,)), axis=1),
    at_run_time("GatherElements", In((2, 3), dynamic=(1,)), np.array([[0, -1], [-1, 0]]),
                "GatherElements-dynamic-axis", axis=1),
]

GATHER_ND = [
    op("GatherND", In((7, 8)), ints(3, 2)),
    op("GatherND", In((7, 8, 2)), ints(2, 2, 1)),
    op("GatherND", In((7, 8, 7)), ints(2, 3)),
    op("GatherND", In((2, 7, 8)), ints(2, 2), batch_dims=1),
    op("GatherND", In((2, 7, 3)), ints(2, 4, 1), batch_dims=1),
    op("GatherND", In((2, 3, 7, 4)), ints(2, 3, 1), batch_dims=2),
    op("GatherND", dyn(7, 3), ints(2, 1, dynamic=(0,)), batch_dims=1),
    op("GatherND", In((7, 8), "int", np.int64), ints(4, 2)),
    op("GatherND", In((7, 3, 2), "bool", np.bool_), ints(4, 1)),
    op("GatherND", In((7, 8, 3), dynamic=(2,)), ints(2, 2)),
]

SCATTER_ELEMENTS = [
    *[op("ScatterElements", In((3, 7)), ints(3, 5), In((3, 5)), axis=1, reduction=r)
      for r in ("none", "add", "mul", "max", "min")],
    op("ScatterElements", In((7, 3)), ints(4, 3), In((4, 3))),
    op("ScatterElements", In((7, 3)), ints(2, 2), In((2, 2)), reduction="add"),
    op("ScatterElements", In((2, 7, 3)), ints(2, 4, 3), In((2, 4, 3)), axis=-2,
       reduction="max"),
    op("ScatterElements", In((3, 7), "int", np.int64), ints(3, 2), In((3, 2), "int", np.int64),
       axis=1, reduction="add"),
    op("ScatterElements", In((3, 7), "int", np.int32), ints(3, 2), In((3, 2), "int", np.int32),
       axis=1, reduction="min"),
    op("ScatterElements", In((3, 7), "bool", np.bool_), ints(3, 2), In((3, 2), "bool", np.bool_),
       axis=1),
    op("ScatterElements", dyn(7), ints(2, 3, dynamic=(0,)), dyn(3), axis=1, reduction="add"),
]

SCATTER_ND = [
    *[op("ScatterND", In((7, 3)), ints(4, 1), In((4, 3)), reduction=r)
      for r in ("none", "add", "mul", "max", "min")],
    op("ScatterND", In((7, 8)), ints(5, 2), In((5,)), reduction="add"),
    op("ScatterND", In((7, 8, 2)), ints(2, 2, 2), In((2, 2, 2)), reduction="min"),
    op("ScatterND", In((7, 8, 2)), ints(3, 2), In((3, 2))),
    op("ScatterND", In((7, 3)), ints(1), In((3,))),
    op("ScatterND", In((7, 3), "int", np.int64), ints(4, 1), In((4, 3), "int", np.int64),
       reduction="max"),
    op("ScatterND", In((7, 2), "bool", np.bool_), ints(3, 1), In((3, 2), "bool", np.bool_)),
    op("ScatterND", In((7, 3), dynamic=(1,)), ints(2, 1), In((2, 3), dynamic=(1,)),
       reduction="add", id="ScatterND-dynamic-rest"),
    op("ScatterND", In((7, 3)), ints(2, 1, dynamic=(0,)), In((2, 3), dynamic=(0,)),
       reduction="add", id="ScatterND-dynamic-updates"),
]

ONEHOT = [  # the element types ONNX Runtime has kernels for
    op("OneHot", ints(4), np.array(7, IDX), np.array([0, 1], np.float32)),
    op("OneHot", ints(2, 3), np.array([8], IDX), np.array([-1, 3], np.float32), axis=0),
    op("OneHot", ints(2, 3), np.array(5, IDX), np.array([2, 5], IDX), axis=1),
    op("OneHot", ints(2, 3, dtype=np.int32), np.array(6, np.int32), In((2,)), axis=-2),
    op("OneHot", In((2, 3), "int"), np.array(5, IDX), np.array([0, 1], IDX)),
    op("OneHot", In((4,)), np.array(3, IDX), np.array([0, 1], IDX)),  # fractions, truncated
    op("OneHot", dyn(3, kind="int", dtype=IDX), np.array(4, IDX),
       np.array([0, 1], np.float32), axis=1),
]

COMPRESS = [
    op("Compress", In((3, 4)), np.array([True, False, True]), axis=0),
    op("Compress", In((3, 4)), np.array([False, True, True, False]), axis=1),
    op("Compress", In((3, 4)), np.array([False, True]), axis=-1),
    op("Compress", In((3, 4)), np.array([True, False, True, True, False, True])),
    op("Compress", dyn(4), np.array([True, False, True, False]), axis=1),
    op("Compress", In((3, 4)), np.array([False, True, False, True, True]), axis=0),  # longer
    op("Compress", dyn(4), np.array([True]), axis=0),
    op("Compress", dyn(4), np.array([False, True, True, False])),
]

BOOLEANS = [
    op("Expand", In((3, 1), "bool", np.bool_), i64(2, 3, 4)),
    op("Expand", In((4,), "bool", np.bool_), i64(2, 1)),
    op("Equal", In((2, 3), "bool", np.bool_), In((3,), "bool", np.bool_)),
    op("And", In((2, 1, 3), "bool", np.bool_), In((4, 1), "bool", np.bool_)),
    graph("Equal-Expand-And-booleans", [
        helper.make_node("Equal", ["a", "b"], ["e"]),
        helper.make_node("Expand", ["e", "shape"], ["big"]),
        helper.make_node("And", ["big", "c"], ["both"]),
        helper.make_node("Cast", ["big"], ["big_x"], to=TensorProto.FLOAT),
        helper.make_node("Where", ["both", "x", "big_x"], ["y"])],
        {"a": In((3, 1), "bool", np.bool_), "b": In((1, 4), "bool", np.bool_),
         "c": In((2, 3, 4), "bool", np.bool_), "x": In((4,))}, {"shape": i64(2, 3, 4)}),
]

CASES = [*GATHER, *GATHER_ELEMENTS, *GATHER_ND, *SCATTER_ELEMENTS, *SCATTER_ND, *ONEHOT,
         *COMPRESS, *BOOLEANS]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_operator(case: Case) -> None:
    check(case)


def test_frozen_constants() -> None:
    """Constant tables, finite (one product) or not (the codes' product too); a float depth
    (unfrozen, a float initializer is a parameter, known only at run time)."""
    check(op("Gather", weights(9, 4), ints(2, 3, dynamic=(0, 1))), freeze=True)
    check(table_with_specials("frozen", SPECIALS), freeze=True)
    check(op("OneHot", ints(3), np.array(5.0, np.float32), np.array([0, 1], np.float32)),
          freeze=True)


def test_where_of_booleans() -> None:
    """ONNX Runtime has no Where for booleans: against numpy."""
    model = op("Where", In((2, 3), "bool", np.bool_), In((2, 3), "bool", np.bool_),
               In((3,), "bool", np.bool_)).model()
    module = dlvm.onnx.load(model)
    rng = np.random.default_rng(0)
    c, x, y = rng.random((2, 3)) < 0.5, rng.random((2, 3)) < 0.5, rng.random(3) < 0.5
    for target in ("interp", "llvm-cpu"):
        got = ir.compile(module, target)["main"](c, x, y)
        np.testing.assert_array_equal(got, np.where(c, x, y))


# ------------------------------------------------------------------ out of range, refused


def test_an_index_out_of_range_is_a_run_time_error() -> None:
    module = dlvm.onnx.load(op("Gather", weights(7, 3), ints(2)).model(), freeze=True)
    for target in ("interp", "llvm-cpu"):
        run = ir.compile(module, target)["main"]
        np.testing.assert_array_equal(run(np.array([6, -7], IDX)),
                                      weights(7, 3)[[6, 0]])
        for bad in ([7, 0], [0, -8]):
            with pytest.raises(ir.DlvmError, match="out of bounds"):
                run(np.array(bad, IDX))


def test_dynamic_sizes_that_differ_are_a_run_time_error() -> None:
    """GatherElements' indices and data must agree along the other axes: a dynamic size of
    1 against 2 is not broadcast."""
    model = op("GatherElements", In((2, 7), dynamic=(0,)),
               In((2, 3), "int", IDX, (0,)), axis=1).model()
    model.graph.input[1].type.tensor_type.shape.dim[0].dim_param = "other"
    run = ir.compile(dlvm.onnx.load(model), "interp")["main"]
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    np.testing.assert_array_equal(run(x, np.array([[1, 2, 3]] * 2, IDX)), [[1, 2, 3], [8, 9, 10]])
    with pytest.raises(ir.DlvmError, match="out of bounds"):
        run(x, np.array([[1, 2, 3]], IDX))


def test_what_is_refused() -> None:
    assert "depth (input 1) must be known at import" in refusal(
        op("OneHot", ints(3), In((), "int", IDX), np.array([0, 1], np.float32)))
    assert "condition (input 1) must be known at import" in refusal(
        op("Compress", In((3, 4)), In((3,), "bool", np.bool_), axis=0))
    assert "selecting nothing" in refusal(
        op("Compress", In((3, 4)), np.array([False, False, False]), axis=0))
    assert "reduction 'add' of booleans" in refusal(
        op("ScatterND", In((7, 2), "bool", np.bool_), ints(3, 1), In((3, 2), "bool", np.bool_),
           reduction="add"))
    assert "indices of element type f32" in refusal(
        graph("float-indices", [helper.make_node("GatherElements", ["x", "i"], ["y"])],
              {"x": In((3, 4)), "i": In((3, 4))}))


# ------------------------------------------------------------------ fine-tuning an embedding


def embedding_classifier(lookups: tuple[str, ...]) -> onnx.ModelProto:
    """ids [batch x lookups…] → Σ over the lookups of table[ids]: class scores [batch x 3]."""
    nodes = [helper.make_node("Gather", ["table", "ids"], ["rows"])]
    if len(lookups) > 1:
        nodes.append(helper.make_node("ReduceSum", ["rows", "axes"], ["scores"], keepdims=0))
    else:
        nodes[0].output[0] = "scores"
    g = helper.make_graph(
        nodes, "embedding",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, list(lookups))],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 3])],
        [onnx.numpy_helper.from_array(weights(10, 3), "table"),
         onnx.numpy_helper.from_array(np.array([1], IDX), "axes")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("lookups", [("batch",), ("batch", "seq")])
def test_embedding_table_gradient_is_a_scatter_add(lookups: tuple[str, ...]) -> None:
    """@loss_grad of an imported Gather-based classifier: the table's gradient is the
    scatter-add of the scores' gradient (softmax − target) / batch over the looked-up rows."""
    module = dlvm.onnx.load(embedding_classifier(lookups))
    rng = np.random.default_rng(0)
    ids = rng.integers(-10, 10, (4, 5)[:len(lookups)]).astype(IDX)  # negative: from the end
    target = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 4)]
    table = weights(10, 3)
    rows = table[ids]
    scores = rows if len(lookups) == 1 else rows.sum(axis=1)
    p = np.exp(scores - scores.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    d_scores = (p - target) / len(ids)
    d_rows = d_scores if len(lookups) == 1 else np.repeat(d_scores[:, None], ids.shape[1], 1)
    want = np.zeros_like(table)
    np.add.at(want, ids % 10, d_rows)
    loss = -np.mean(np.sum(np.log(p) * target, axis=1))
    for target_name in ("interp", "llvm-cpu"):
        exe = ir.compile(module, target_name, **({"opt_level": 0} if target_name != "interp"
                                                 else {}))
        grad, got_loss = exe.call("loss_grad", ids, target, (table,))
        np.testing.assert_allclose(grad, want, rtol=1e-5, atol=1e-6, err_msg=target_name)
        np.testing.assert_allclose(got_loss, loss, rtol=1e-5, err_msg=target_name)


def classifier(node: onnx.NodeProto, ids: tuple[int, ...], params: dict[str, np.ndarray],
               consts: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """A model of one node whose run-time indices `ids` are its one input and whose float
    initializers `params` are its parameters: a classifier when its output is a matrix."""
    inits = {**params, **(consts or {})}
    g = helper.make_graph(
        [node], "one", [helper.make_tensor_value_info("ids", TensorProto.INT64, list(ids))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


def node(op_type: str, inputs: list[str], **attrs: object) -> onnx.NodeProto:
    return helper.make_node(op_type, inputs, ["y"], **attrs)


DIFFERENTIATED = [
    (node("GatherElements", ["p", "ids"], axis=1), (3, 4), {"p": weights(3, 7)}),
    (node("Gather", ["p", "ids"], axis=1), (3,), {"p": weights(4, 7)}),
    (node("GatherND", ["p", "ids"], batch_dims=1), (4, 1), {"p": weights(4, 7, 3)}),
    *[(node("ScatterElements", ["p", "ids", "u"], axis=1, reduction=r), (3, 5),
       {"p": weights(3, 7), "u": weights(3, 5, seed=3)}) for r in ("none", "add", "max")],
    *[(node("ScatterND", ["p", "ids", "u"], reduction=r), (4, 1),
       {"p": weights(7, 3), "u": weights(4, 3, seed=3)}) for r in ("none", "mul", "min")],
    (node("OneHot", ["ids", "depth", "p"]), (4,), {"p": weights(2)}),
]


def named(case: tuple[onnx.NodeProto, tuple[int, ...], dict[str, np.ndarray]]) -> str:
    n = case[0]
    attrs = [f"{a.name}={helper.get_attribute_value(a)!r}" for a in n.attribute]
    return "-".join([n.op_type, *attrs]).replace("b'", "").replace("'", "")


@pytest.mark.parametrize("case", DIFFERENTIATED, ids=named)
def test_gradients_of_the_compositions(case: tuple[onnx.NodeProto, tuple[int, ...],
                                                   dict[str, np.ndarray]]) -> None:
    """@loss_grad along a random direction of the parameters against the loss's central
    difference there: the masks' selects and folds differentiate."""
    n, shape, params = case
    module = dlvm.onnx.load(classifier(n, shape, params, {"depth": np.array(5, IDX)}
                                       if n.op_type == "OneHot" else None))
    exe = ir.compile(module, "interp")
    rng = np.random.default_rng(1)
    ids = rng.integers(-5, 5, shape).astype(IDX)
    scores = exe["main"](ids)
    target = np.eye(scores.shape[1], dtype=np.float32)[rng.integers(0, scores.shape[1],
                                                                      scores.shape[0])]
    p = tuple(params.values())
    *grads, _ = exe.call("loss_grad", ids, target, p)
    v = [rng.standard_normal(w.shape).astype(np.float32) for w in p]
    eps = np.float32(1e-2)

    def loss(sign: int) -> float:
        return float(exe["loss"](ids, target, tuple(w + sign * eps * d
                                                    for w, d in zip(p, v, strict=True))))

    numeric = (loss(1) - loss(-1)) / (2 * eps)
    analytic = sum(float(np.sum(g * d)) for g, d in zip(grads, v, strict=True))
    np.testing.assert_allclose(analytic, numeric, rtol=2e-3, atol=1e-4)
