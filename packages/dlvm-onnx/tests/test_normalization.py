"""Normalizations and attention against ONNX Runtime: LayerNormalization (with its mean and
inverse deviation), RMSNormalization, BatchNormalization in training mode, Instance- and
GroupNormalization, MeanVarianceNormalization, LRN, Attention (masks, causal, caches,
grouped-query heads, softcap, the 4th output) and RotaryEmbedding."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import dlvm.ir as ir
import dlvm.onnx
from dlvm.onnx.testing import LOOSE, TARGETS, Case, In, check, dyn, i64, op, weights

ort = pytest.importorskip("onnxruntime")

HALF = (2e-3, 2e-3)  # float16 results
A = In((2, 3, 4))
F16, F64 = np.float16, np.float64


@dataclass
class Typed(Case):
    """A case whose outputs ONNX's inference leaves untyped (function operators such as
    GroupNormalization): declared of the first input's type and shape."""

    def model(self) -> onnx.ModelProto:
        model = super().model()
        first = model.graph.input[0].type
        for out in model.graph.output:
            if out.type.tensor_type.elem_type == TensorProto.UNDEFINED:
                out.type.CopyFrom(first)
        return model


def typed(case: Case) -> Typed:
    return Typed(case.id, case.nodes, case.inputs, case.consts, case.outputs, case.opset,
                 case.tol, case.seeds)


def attention(*args: In | np.ndarray | None, outputs: int = 1, opset: int = 23,
              tol: tuple[float, float] = LOOSE, **attrs: object) -> Case:
    return op("Attention", *args, outputs=outputs, opset=opset, tol=tol, **attrs)


def qk_scores(*args: In | np.ndarray | None, outputs: int = 2, **attrs: object) -> Case:
    """Attention with its 4th output, qk_matmul_output (and Y; with outputs=4 the present
    key and value too)"""
    case = attention(*args, outputs=4, **attrs)
    if outputs == 2:
        case.nodes[0].output[1:3] = ["", ""]
        case.outputs = ("y0", "y3")
    case.id += f"-{outputs}outputs"
    return case


Q, K, V = In((2, 3, 4, 8)), In((2, 3, 6, 8)), In((2, 3, 6, 8))
Q3, K3, V3 = In((2, 4, 24)), In((2, 6, 24)), In((2, 6, 24))
GQ = In((2, 6, 4, 8))  # 6 query heads for 3 key-value heads
PK, PV = In((2, 3, 5, 8)), In((2, 3, 5, 8))
BOOL_MASK = In((4, 6), "bool", np.bool_)
NONPAD = In((2,), "positive", np.int64)  # 0 … 3 keys of 6

NORMALIZATION = [
    op("LayerNormalization", A, In((4,)), In((4,)), outputs=3, opset=17),
    op("LayerNormalization", A, In((3, 4)), outputs=3, opset=17, axis=1),
    op("LayerNormalization", A, In((2, 3, 4)), In((4,)), outputs=3, opset=17, axis=0,
       epsilon=0.1),
    op("LayerNormalization", dyn(3, 8), weights(8), weights(8, seed=3), outputs=3, opset=17),
    op("LayerNormalization", In((2, 3, 4), dtype=F16), In((4,), dtype=F16), outputs=3,
       opset=17, tol=HALF),
    op("RMSNormalization", A, In((4,)), opset=23),
    op("RMSNormalization", A, In((3, 4)), opset=23, axis=1, epsilon=0.01),
    op("RMSNormalization", A, In((1,)), opset=23, axis=-2),
    op("RMSNormalization", dyn(3, 8), weights(8), opset=23),
    op("RMSNormalization", In((2, 5), dtype=F16), In((5,), dtype=F16), opset=23, tol=HALF),
    op("BatchNormalization", In((2, 3, 4, 5)), In((3,)), In((3,)), In((3,)),
       In((3,), "positive"), outputs=3, opset=15, training_mode=1),
    op("BatchNormalization", In((4, 3, 5)), In((3,)), In((3,)), In((3,)), In((3,), "positive"),
       outputs=3, opset=15, training_mode=1, momentum=0.7, epsilon=0.01),
    op("BatchNormalization", dyn(3, 2, 2), weights(3), weights(3, seed=2), weights(3, seed=3),
       np.abs(weights(3, seed=4)) + 0.5, outputs=3, opset=15, training_mode=1),
    op("BatchNormalization", In((2, 3)), In((3,)), In((3,)), In((3,)), In((3,), "positive"),
       outputs=3, opset=14, training_mode=1),
    op("InstanceNormalization", In((2, 3, 4, 5)), In((3,)), In((3,))),
    op("InstanceNormalization", In((2, 3, 5)), In((3,)), In((3,)), epsilon=0.1),
    op("InstanceNormalization", dyn(3, 4, 4), weights(3), weights(3, seed=2)),
    typed(op("GroupNormalization", In((3, 4, 2, 2)), In((4,)), In((4,)), opset=21,
             num_groups=2)),
    typed(op("GroupNormalization", In((2, 6, 5)), In((6,)), In((6,)), opset=21, num_groups=3,
             epsilon=0.01)),
    typed(op("GroupNormalization", dyn(4, 3, 3), weights(4), weights(4, seed=2), opset=21,
             num_groups=1)),
    op("MeanVarianceNormalization", In((3, 3, 3, 1)), axes=[0, 2, 3], tol=LOOSE),
    op("MeanVarianceNormalization", A, axes=[1, 2], tol=LOOSE),
    op("MeanVarianceNormalization", dyn(3, 5), axes=[2], tol=LOOSE),
    op("LRN", In((2, 5, 3, 3)), size=3, tol=LOOSE),
    op("LRN", In((2, 6, 3, 2)), size=5, alpha=0.01, beta=0.5, bias=2.0, tol=LOOSE),
    op("LRN", dyn(4, 3, 3), size=1, tol=LOOSE),
]

ATTENTION = [
    attention(Q, K, V),
    attention(Q, K, In((2, 3, 6, 10)), scale=0.1),
    attention(GQ, K, V, is_causal=1),
    attention(Q, K, V, In((4, 6))),
    attention(Q, K, V, In((2, 1, 4, 6)), is_causal=1),
    attention(Q, K, V, In((3, 4, 6)), softcap=2.0),
    attention(Q, K, V, BOOL_MASK),
    attention(Q, K, V, In((2, 3, 4, 6), "bool", np.bool_), is_causal=1),
    attention(Q, K, V, In((4, 11)), PK, PV, outputs=3),
    attention(GQ, K, V, None, PK, PV, outputs=3, is_causal=1),
    qk_scores(Q, K, V, In((4, 6))),
    qk_scores(Q, K, V, In((4, 6)), qk_matmul_output_mode=1, softcap=3.0),
    qk_scores(Q, K, V, In((1, 4, 6)), qk_matmul_output_mode=2),
    qk_scores(Q, K, V, In((4, 6)), qk_matmul_output_mode=3),
    qk_scores(GQ, K, V, None, PK, PV, outputs=4, qk_matmul_output_mode=3, softcap=1.0),
    attention(Q, K, V, None, None, None, NONPAD, opset=24),
    attention(Q, K, V, None, None, None, NONPAD, opset=24, is_causal=1),
    attention(Q3, K3, V3, q_num_heads=3, kv_num_heads=3),
    attention(In((2, 4, 48)), K3, In((2, 6, 12)), In((4, 6)), q_num_heads=6, kv_num_heads=3,
              is_causal=1),
    attention(Q3, K3, V3, None, PK, PV, outputs=3, q_num_heads=3, kv_num_heads=3),
    attention(dyn(3, 4, 8), dyn(3, 6, 8), dyn(3, 6, 8), In((4, 6)), is_causal=1),
    attention(In((2, 4, 24), dynamic=(0, 1)), In((2, 4, 8), dynamic=(0, 1)),
              In((2, 4, 8), dynamic=(0, 1)), q_num_heads=3, kv_num_heads=1, is_causal=1),
    attention(In((2, 4, 24), dynamic=(0, 1)), In((2, 4, 24), dynamic=(0, 1)),
              In((2, 4, 24), dynamic=(0, 1)), In((4, 4), dynamic=(0, 1)), q_num_heads=3,
              kv_num_heads=3),
    attention(In((2, 3, 4, 8), dtype=F16), In((2, 3, 6, 8), dtype=F16),
              In((2, 3, 6, 8), dtype=F16), is_causal=1, tol=HALF),
]

ROTARY = [
    op("RotaryEmbedding", In((2, 4, 3, 8)), In((2, 3, 4)), In((2, 3, 4)), opset=23),
    op("RotaryEmbedding", In((2, 4, 3, 8)), In((2, 3, 4)), In((2, 3, 4)), opset=23,
       interleaved=1),
    op("RotaryEmbedding", In((2, 4, 3, 8)), In((5, 2)), In((5, 2)),
       In((2, 3), "positive", np.int64), opset=23, rotary_embedding_dim=4),
    op("RotaryEmbedding", In((2, 4, 3, 8)), In((5, 2)), In((5, 2)),
       In((2, 3), "positive", np.int64), opset=23, rotary_embedding_dim=4, interleaved=1),
    op("RotaryEmbedding", In((2, 3, 16)), weights(6, 4), weights(6, 4, seed=2),
       np.array([[0, 1, 2], [5, 4, 3]], np.int64), opset=23, num_heads=2),
    op("RotaryEmbedding", In((2, 3, 16), dynamic=(0, 1)), weights(8, 4), weights(8, 4, seed=2),
       In((2, 3), "positive", np.int64, dynamic=(0, 1)), opset=23, num_heads=2),
]

CASES: list[Case] = [*NORMALIZATION, *ATTENTION, *ROTARY]

# Cases that ONNX Runtime does not run (its kernels refuse them) against ONNX's reference
# implementation: a mask of fewer keys than K (padded with −∞), the sliding window (opset 25),
# −∞ (not the lowest float) where mode 2's qk_matmul_output is masked
REFERENCE_CASES = [
    attention(Q, K, V, In((4, 4))),
    attention(Q, K, V, In((4, 1), "bool", np.bool_), is_causal=1),
    attention(Q, K, V, In((2, 1, 4, 3)), None, None, NONPAD, opset=24, is_causal=1),
    attention(In((2, 4, 24), dynamic=(0, 1)), In((2, 4, 24), dynamic=(0, 1)),
              In((2, 4, 24), dynamic=(0, 1)), In((1,)), q_num_heads=3, kv_num_heads=3),
    attention(Q, K, V, opset=25, left_window_size=1, right_window_size=2),
    attention(GQ, K, V, None, PK, PV, outputs=3, opset=25, is_causal=1, left_window_size=2),
    attention(Q, K, V, None, None, None, NONPAD, opset=25, is_causal=1, left_window_size=1),
    qk_scores(Q, K, V, BOOL_MASK, qk_matmul_output_mode=2, is_causal=1),
]

# DLVM's llvm-cpu at LLVM -O0 computes these wrongly: a fused kernel writes a returned
# statistic in place of the reduction it reads again for the broadcast (the kernel's
# arguments are declared noalias; from -O1 on LLVM hoists the read and the result is right)
IN_PLACE_BUG = {c.id for c in NORMALIZATION if c.nodes[0].op_type == "LayerNormalization"}
OPTIMIZED = {"interp": {}, "llvm-cpu": {"specialize": False, "opt_level": 1}}


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_operator(case: Case) -> None:
    check(case, targets=OPTIMIZED if case.id in IN_PLACE_BUG else None)


@pytest.mark.parametrize("case", REFERENCE_CASES, ids=lambda c: c.id)
def test_against_the_reference(case: Case) -> None:
    model = case.model()
    reference = ReferenceEvaluator(model)
    module = dlvm.onnx.load(model)
    runs = [ir.compile(module, t, **o)["main"] for t, o in TARGETS.items()]
    for seed in case.seeds:
        rng = np.random.default_rng(seed)
        feeds = {name: spec.sample(rng, seed) for name, spec in case.inputs.items()}
        expected = reference.run(None, feeds)
        for run in runs:
            got = run(*feeds.values())
            got = list(got) if len(case.outputs) > 1 else [got]
            for want, have in zip(expected, got, strict=True):
                assert np.asarray(have).shape == want.shape
                np.testing.assert_allclose(have, want, *case.tol)


@pytest.mark.parametrize("case, words", [
    (qk_scores(Q, K, V, softcap=2.0), ("Attention", "softcap", "mode 0")),
    (attention(Q, K, V, softmax_precision=TensorProto.BFLOAT16), ("softmax_precision=16",)),
    (attention(Q, K, V, None, PK, PV, NONPAD, outputs=3, opset=24), ("nonpad_kv_seqlen",)),
    (attention(In((2, 4, 3, 8)), K, V), ("3 key-value heads do not divide 4",)),
    (attention(Q, K, V, In((4, 7))), ("attn_mask of 7 keys for 6",)),
    (op("LayerNormalization", A, In((4,)), opset=17, stash_type=16), ("stash_type=16",)),
    (op("RotaryEmbedding", In((2, 4, 3, 8), dynamic=(0, 2)), In((8, 4)), In((8, 4)),
        In((2, 3), "positive", np.int64, dynamic=(0, 1)), opset=23, interleaved=1),
     ("RotaryEmbedding", "several dynamic")),
    (typed(op("GroupNormalization", In((2, 6, 3)), In((6,)), In((6,)), opset=21,
              num_groups=4)), ("4 groups do not divide 6",)),
], ids=lambda x: x.id if isinstance(x, Case) else "")
def test_what_is_not_supported_is_reported(case: Case, words: tuple[str, ...]) -> None:
    with pytest.raises(ir.DlvmError) as info:
        dlvm.onnx.load(case.model())
    for word in words:
        assert word in str(info.value)


@pytest.mark.parametrize("size", [2, 4, 7])
def test_lrn_of_an_even_size(size: int) -> None:
    """the spec's window: ⌊(size − 1)/2⌋ channels before, ⌈(size − 1)/2⌉ after (ONNX Runtime
    takes odd sizes only; ONNX's reference implementation loops over the batch)"""
    alpha, beta, bias = 0.02, 0.6, 1.5
    model = op("LRN", In((2, 5, 3, 2)), size=size, alpha=alpha, beta=beta, bias=bias).model()
    x = np.random.default_rng(size).standard_normal((2, 5, 3, 2)).astype(np.float32)
    squares = np.zeros_like(x)
    for ch in range(5):
        lo, hi = max(0, ch - (size - 1) // 2), min(4, ch + size // 2)
        squares[:, ch] = (x[:, lo:hi + 1] ** 2).sum(axis=1)
    want = x / (bias + alpha / size * squares) ** beta
    for target, options in TARGETS.items():
        got = ir.compile(dlvm.onnx.load(model), target, **options)["main"](x)
        np.testing.assert_allclose(got, want, *LOOSE)


def test_layer_norm_statistics_are_of_the_stash_type() -> None:
    """float16 input, float32 (stash_type 1) mean and inverse deviation"""
    model = op("LayerNormalization", In((2, 3), dtype=F16), In((3,), dtype=F16), outputs=3,
               opset=17).model()
    assert [o.type.tensor_type.elem_type for o in model.graph.output] == [
        TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.FLOAT]
    main = ir.compile(dlvm.onnx.load(model), "interp")["main"]
    y, mu, inv = main(np.ones((2, 3), F16), np.ones(3, F16))
    assert (y.dtype, mu.dtype, inv.dtype) == (F16, np.float32, np.float32)


def test_fully_masked_rows_attend_nothing() -> None:
    """a query whose keys are all masked gives zeros, not NaN (the spec's errata)"""
    node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y"])
    g = helper.make_graph([node], "t", [
        helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
        for n, s in (("q", [1, 1, 2, 4]), ("k", [1, 1, 3, 4]), ("v", [1, 1, 3, 4]))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 4])],
        [onnx.numpy_helper.from_array(np.array([[True, False, True], [False] * 3]), "m")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])
    main = ir.compile(dlvm.onnx.load(model), "interp")["main"]
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float32)
               for s in ((1, 1, 2, 4), (1, 1, 3, 4), (1, 1, 3, 4)))
    y = main(q, k, v)
    assert np.all(y[0, 0, 1] == 0) and np.all(np.isfinite(y))
    assert np.any(y[0, 0, 0] != 0)


def test_nonpad_gives_runtime_positions() -> None:
    """the external cache's causal frontier moves with nonpad_kv_seqlen: with i64 inputs"""
    case = attention(Q, K, V, None, None, None, i64(6, 5), opset=24, is_causal=1)
    check(case)


def attention_classifier() -> onnx.ModelProto:
    """x [B x 3 x 8] → LayerNorm → causal grouped-query Attention (2 query heads, 1 key-value
    head, RoPE on Q and K) → RMSNorm → [B x 3] scores, in float64"""
    n = helper.make_node
    rng = np.random.default_rng(3)
    params = {"g1": rng.uniform(0.5, 1.5, 8), "b1": rng.standard_normal(8) * 0.1,
              "wq": rng.standard_normal((8, 8)) * 0.3, "wk": rng.standard_normal((8, 4)) * 0.3,
              "wv": rng.standard_normal((8, 4)) * 0.3, "g2": rng.uniform(0.5, 1.5, 8),
              "wo": rng.standard_normal((24, 3)) * 0.3}
    angles = np.arange(3)[:, None] / 10.0 ** np.arange(2)[None]
    consts = {"cos": np.cos(angles)[None], "sin": np.sin(angles)[None]}
    g = helper.make_graph([
        n("LayerNormalization", ["x", "g1", "b1"], ["h"], stash_type=11),
        n("MatMul", ["h", "wq"], ["q0"]), n("MatMul", ["h", "wk"], ["k0"]),
        n("MatMul", ["h", "wv"], ["v"]),
        n("RotaryEmbedding", ["q0", "cos", "sin"], ["q"], num_heads=2),
        n("RotaryEmbedding", ["k0", "cos", "sin"], ["k"], num_heads=1),
        n("Attention", ["q", "k", "v"], ["a"], q_num_heads=2, kv_num_heads=1, is_causal=1),
        n("RMSNormalization", ["a", "g2"], ["r"], stash_type=11),
        n("Flatten", ["r"], ["f"]), n("MatMul", ["f", "wo"], ["y"])], "classifier",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["batch", 3, 8])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["batch", 3])],
        [onnx.numpy_helper.from_array(np.asarray(v, F64), k)
         for k, v in {**params, **consts}.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


def conv_classifier() -> onnx.ModelProto:
    """x [B x 4 x 3 x 3] → GroupNorm → LRN → InstanceNorm → MVN → BatchNorm (training) →
    [B x 3] scores, in float64"""
    n = helper.make_node
    rng = np.random.default_rng(4)
    params = {"gs": rng.uniform(0.5, 1.5, 4), "gb": rng.standard_normal(4) * 0.1,
              "is": rng.uniform(0.5, 1.5, 4), "ib": rng.standard_normal(4) * 0.1,
              "bs": rng.uniform(0.5, 1.5, 4), "bb": rng.standard_normal(4) * 0.1,
              "wo": rng.standard_normal((36, 3)) * 0.3}
    stats = {"mean": rng.standard_normal(4), "var": rng.uniform(0.5, 1.5, 4)}
    g = helper.make_graph([
        n("GroupNormalization", ["x", "gs", "gb"], ["g"], num_groups=2, stash_type=11),
        n("LRN", ["g"], ["l"], size=3, alpha=0.5),
        n("InstanceNormalization", ["l", "is", "ib"], ["i"]),
        n("MeanVarianceNormalization", ["i"], ["m"], axes=[2, 3]),
        n("BatchNormalization", ["m", "bs", "bb", "mean", "var"], ["b", "rm", "rv"],
          training_mode=1),
        n("Flatten", ["b"], ["f"]), n("MatMul", ["f", "wo"], ["y"])], "classifier",
        [helper.make_tensor_value_info("x", TensorProto.DOUBLE, ["batch", 4, 3, 3])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, ["batch", 3])],
        [onnx.numpy_helper.from_array(np.asarray(v, F64), k)
         for k, v in {**params, **stats}.items()])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


@pytest.mark.parametrize("model, example", [(attention_classifier, (3, 8)),
                                            (conv_classifier, (4, 3, 3))],
                         ids=["attention", "conv"])
def test_gradients_agree_with_differences(model: Callable[[], onnx.ModelProto],
                                          example: tuple[int, ...]) -> None:
    """@loss_grad of a classifier built of these operators agrees with central differences
    of @loss for every parameter"""
    exe = ir.compile(dlvm.onnx.load(model()), "interp")
    params = [np.asarray(p) for p in exe.call("init_params")]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, *example))
    target = np.eye(3)[[0, 2, 1, 1]]
    *grads, _ = exe.call("loss_grad", x, target, tuple(params))

    def loss(k: int, step: np.ndarray) -> float:
        moved = tuple(q + step if i == k else q for i, q in enumerate(params))
        (value,) = exe.call("loss", x, target, moved)
        return float(value)

    for k, p in enumerate(params):
        for index in list(np.ndindex(p.shape))[:: max(1, p.size // 4)]:
            step = np.zeros_like(p)
            step[index] = 1e-6
            slope = (loss(k, step) - loss(k, -step)) / 2e-6
            np.testing.assert_allclose(np.asarray(grads[k])[index], slope, rtol=1e-4,
                                       atol=1e-8, err_msg=f"parameter {k} at {index}")
