"""RNN, GRU and LSTM against ONNX Runtime, lowered to IR loops (a sequence of any length is one
small program): each direction, the optional inputs (B, sequence_lens, initial_h, initial_c,
P), the activations with their α and β, clip, GRU's linear_before_reset and LSTM's
input_forget, a dynamic sequence length and batch, layout 1 (which ONNX Runtime does not run:
compared with the layout-0 node between transposes), and a gradient through time against
finite differences."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import dlvm.ir as ir
import dlvm.onnx
from dlvm.ad.testing import check_gradient
from dlvm.onnx.testing import LOOSE, TARGETS, Case, In, check, graph, op, refusal, short

ort = pytest.importorskip("onnxruntime")

T, N, D, H = 4, 2, 3, 5  # steps, batch, input size, hidden size
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
OUTPUTS = {"RNN": 2, "GRU": 2, "LSTM": 3}


def w(*shape: int, seed: int = 3, scale: float = 0.5, dtype: type = np.float32) -> np.ndarray:
    return (scale * np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


def weights(kind: str, dirs: int = 1, bias: bool = True) -> list[np.ndarray | None]:
    """W, R and B of `dirs` directions."""
    g = GATES[kind]
    return [w(dirs, g * H, D, seed=1), w(dirs, g * H, H, seed=2),
            w(dirs, 2 * g * H, seed=3) if bias else None]


def cell(kind: str, *extra: In | np.ndarray | None, x: In | None = None, dirs: int = 1,
         bias: bool = True, **attrs: object) -> Case:
    """One node of `kind` on X (time major, [T, N, D]) with its weights as initializers;
    `extra` are sequence_lens, initial_h, initial_c and P."""
    if dirs == 2:
        attrs.setdefault("direction", "bidirectional")
    x = x or In((T, N, D))
    dims = "x".join(("seq" if i == 0 else "batch") if i in x.dynamic else str(d)
                    for i, d in enumerate(x.shape))
    parts = [kind, dims, *([] if bias else ["noB"])]
    parts += [name if isinstance(e, In) else f"{name}={short(e)}"
              for name, e in zip(("lens", "h0", "c0", "P"), extra, strict=False) if e is not None]
    parts += [f"{k}={v}".replace("'", "") for k, v in attrs.items()]
    return op(kind, x, *weights(kind, dirs, bias), *extra, outputs=OUTPUTS[kind],
              hidden_size=H, tol=LOOSE, id="-".join(parts), **attrs)


SEQ = In((T, N, D), dynamic=(0,))  # the sequence's length changes with the seed: 4, 1, 6
BATCH = In((T, N, D), dynamic=(1,))

CASES: list[Case] = [
    *[cell(k, x=SEQ) for k in GATES],
    *[cell(k, x=BATCH, direction="reverse") for k in GATES],
    *[cell(k, dirs=2, x=SEQ) for k in GATES],
    *[cell(k, bias=False) for k in GATES],
    cell("RNN", None, In((1, N, H))),
    cell("GRU", None, In((2, N, H)), dirs=2),
    cell("LSTM", None, In((1, N, H)), In((1, N, H)), w(1, 3 * H)),
    cell("LSTM", None, In((2, N, H)), In((2, N, H)), w(2, 3 * H), dirs=2),
    cell("LSTM", None, None, None, w(1, 3 * H), x=SEQ, direction="reverse"),
    # sequence_lens known at import (a length of 0 among them; computed at run time below)
    *[cell(k, np.array([3, 0], np.int32), x=In((T, N, D)), dirs=2) for k in GATES],
    *[cell(k, np.array([2, 4], np.int32), In((1, N, H)), direction="reverse") for k in GATES],
    # clip, and the activations with their α and β
    *[cell(k, clip=0.4) for k in GATES],
    cell("RNN", activations=["Relu"]),
    cell("RNN", dirs=2, activations=["Sigmoid", "Softsign"]),
    cell("RNN", activations=["LeakyRelu"], activation_alpha=[0.2]),
    cell("RNN", activations=["Affine"], activation_alpha=[0.7], activation_beta=[0.1]),
    cell("RNN", activations=["ThresholdedRelu"], activation_alpha=[0.3]),
    cell("RNN", activations=["Softplus"]),
    cell("GRU", activations=["HardSigmoid", "Elu"], activation_alpha=[0.3, 0.9],
         activation_beta=[0.4]),
    cell("GRU", activations=["Sigmoid", "ScaledTanh"], activation_alpha=[1.5],
         activation_beta=[0.5], linear_before_reset=1),
    cell("GRU", None, In((1, N, H)), linear_before_reset=1, clip=0.5),
    cell("GRU", bias=False, linear_before_reset=1),
    cell("LSTM", activations=["HardSigmoid", "Relu", "Tanh"]),
    cell("LSTM", dirs=2, activations=["Sigmoid", "Tanh", "Tanh", "Sigmoid", "Elu", "Softsign"]),
    cell("LSTM", None, In((1, N, H)), In((1, N, H)), w(1, 3 * H), input_forget=1, clip=0.6),
    # Y alone (ONNX Runtime runs none of them in float64: the gradient's test below does)
    op("LSTM", In((T, N, D)), *weights("LSTM"), hidden_size=H, tol=LOOSE, id="LSTM-Y-only"),
]


def lengths_at_run_time(kind: str, dirs: int) -> Case:
    """sequence_lens computed by the graph, |k| with k in −6…6 (steps: 6): not known at
    import; each batch row of the dynamic batch its own length."""
    steps = 6
    x = In((steps, N, D), dynamic=(1,))
    k = In((N,), "int", np.int32, dynamic=(0,))
    names = ["x", "w", "r", "b", "lens"]
    direction = "bidirectional" if dirs == 2 else "forward"
    outs = [f"y{i}" for i in range(OUTPUTS[kind])]
    nodes = [helper.make_node("Abs", ["k"], ["lens"]),
             helper.make_node(kind, names, outs, hidden_size=H, direction=direction)]
    consts = dict(zip(["w", "r", "b"], weights(kind, dirs), strict=True))
    case = graph(f"{kind}-{direction}-lengths-at-run-time", nodes, {"x": x, "k": k},
                 consts, tuple(outs), tol=LOOSE)
    return case


CASES += [lengths_at_run_time(k, d) for k in GATES for d in (1, 2)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_operator(case: Case) -> None:
    check(case)


def test_frozen_weights() -> None:
    check(CASES[0], freeze=True, targets={"interp": {}})


def test_a_node_of_constant_inputs_is_converted_not_evaluated_at_import() -> None:
    """Frozen, every input of the node is known at import; ONNX's reference implementation,
    which evaluates such nodes, ignores sequence_lens, clip and the activations."""
    consts = {"x": w(T, N, D, seed=9), "w": w(1, H, D, seed=1), "r": w(1, H, H, seed=2),
              "lens": np.array([2, 4], np.int32)}
    nodes = [helper.make_node("RNN", ["x", "w", "r", "", "lens"], ["y", "yh"], hidden_size=H,
                              clip=0.3, activations=["Softsign"]),
             helper.make_node("Add", ["yh", "z"], ["out"])]
    case = graph("RNN-of-constants", nodes, {"z": In((1, N, H))}, consts, ("out",))
    check(case, freeze=True, targets={"interp": {}})


# ------------------------------------------------------------------ layout 1


def batch_major(kind: str, dirs: int, layout: int, **attrs: object) -> onnx.ModelProto:
    """A node of `kind` with initial states, on X [N, T, D] (batch major): of layout 1, or of
    layout 0 between transposes (what ONNX Runtime runs)."""
    states = ["h0", "c0"] if kind == "LSTM" else ["h0"]
    outs = ["y", "y_h", "y_c"][:OUTPUTS[kind]]
    direction = "bidirectional" if dirs == 2 else "forward"
    inputs = ["x", "w", "r", "b", "", *states]
    if layout:
        nodes = [helper.make_node(kind, inputs, outs, hidden_size=H, layout=1,
                                  direction=direction, **attrs)]
    else:
        nodes = [helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2]),
                 *[helper.make_node("Transpose", [s], [f"{s}t"], perm=[1, 0, 2])
                   for s in states],
                 helper.make_node(kind, ["xt", "w", "r", "b", "", *[f"{s}t" for s in states]],
                                  [f"{o}t" for o in outs], hidden_size=H, direction=direction,
                                  **attrs),
                 helper.make_node("Transpose", ["yt"], ["y"], perm=[2, 0, 1, 3]),
                 *[helper.make_node("Transpose", [f"{o}t"], [o], perm=[1, 0, 2])
                   for o in outs[1:]]]
    f = TensorProto.FLOAT
    graph_inputs = [helper.make_tensor_value_info("x", f, ["n", T, D]),
                    *[helper.make_tensor_value_info(s, f, ["n", dirs, H]) for s in states]]
    inits = [onnx.numpy_helper.from_array(a, n) for n, a in
             zip(["w", "r", "b"], weights(kind, dirs), strict=True)]
    model = helper.make_model(
        helper.make_graph(nodes, "batch_major", graph_inputs,
                          [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                           for o in outs], inits),
        opset_imports=[helper.make_opsetid("", 14)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=True)


@pytest.mark.parametrize("kind,dirs,attrs", [
    pytest.param("RNN", 1, {}, id="RNN"), pytest.param("GRU", 2, {}, id="GRU-bidirectional"),
    pytest.param("LSTM", 2, {"input_forget": 1}, id="LSTM-bidirectional-input_forget")])
def test_layout_1_is_the_layout_0_node_between_transposes(kind: str, dirs: int,
                                                          attrs: dict[str, int]) -> None:
    session = ort.InferenceSession(batch_major(kind, dirs, 0, **attrs).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    module = dlvm.onnx.load(batch_major(kind, dirs, 1, **attrs))
    rng = np.random.default_rng(0)
    for target, options in TARGETS.items():
        run = ir.compile(module, target, **options)["main"]
        for n in (N, 1):
            feeds = {i.name: rng.standard_normal((n, *i.shape[1:])).astype(np.float32)
                     for i in session.get_inputs()}
            want = session.run(None, feeds)
            got = run(*feeds.values())
            for a, b in zip(got, want, strict=True):
                np.testing.assert_allclose(a, b, *LOOSE, err_msg=f"{target}, batch {n}")


# ------------------------------------------------------------------ the gradient


GRADIENT_NODES = {  # kind: (inputs, attributes)
    "LSTM": (["x", "w", "r", "b", "lens", "", "", "p"], {"direction": "bidirectional"}),
    "GRU": (["x", "w", "r", "b", "", "h0"], {"direction": "reverse", "linear_before_reset": 1}),
    "RNN": (["x", "w", "r", "b", "lens"], {"activations": ["Softsign"], "clip": 0.8}),
}


def with_loss(kind: str) -> onnx.ModelProto:
    """A float64 node of `kind` then ⟨Y, Y⟩ + ⟨Y_h, Y_h⟩: a scalar of X and every weight
    (LSTM: bidirectional, with peepholes and per-sequence lengths; GRU: reverse, with
    linear_before_reset and an initial state; RNN: clipped, with lengths)."""
    steps, batch, size, hidden, g = 4, 2, 2, 3, GATES[kind]
    dirs = 2 if kind == "LSTM" else 1
    inputs, attrs = GRADIENT_NODES[kind]
    f = TensorProto.DOUBLE
    nodes = [helper.make_node(kind, inputs, ["y", "yh"], hidden_size=hidden, **attrs),
             helper.make_node("Mul", ["y", "y"], ["yy"]),
             helper.make_node("ReduceSum", ["yy"], ["s1"], keepdims=0),
             helper.make_node("Mul", ["yh", "yh"], ["hh"]),
             helper.make_node("ReduceSum", ["hh"], ["s2"], keepdims=0),
             helper.make_node("Add", ["s1", "s2"], ["loss"])]
    inits = {"w": w(dirs, g * hidden, size, seed=4, dtype=np.float64),
             "r": w(dirs, g * hidden, hidden, seed=5, dtype=np.float64),
             "b": w(dirs, 2 * g * hidden, seed=6, dtype=np.float64),
             "p": w(dirs, 3 * hidden, seed=7, dtype=np.float64),
             "h0": w(dirs, batch, hidden, seed=8, dtype=np.float64),
             "lens": np.array([4, 2], np.int32)}
    graph_ = helper.make_graph(
        nodes, "with_loss", [helper.make_tensor_value_info("x", f, [steps, batch, size])],
        [helper.make_tensor_value_info("loss", f, [])],
        [onnx.numpy_helper.from_array(a, n) for n, a in inits.items() if n in inputs])
    return helper.make_model(graph_, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize("kind", list(GRADIENT_NODES))
def test_gradient_through_time_matches_finite_differences(kind: str) -> None:
    module = dlvm.onnx.load(with_loss(kind))
    forward = module.function("forward")
    assert forward is not None and len(forward.blocks) > 1  # loops, not unrolled steps
    x_t, p_t = forward.type_.arguments
    text = str(module) + f"""
[gradient @forward wrt 0, 1 keeping 0]
func @forward_grad: ({x_t}, {p_t}) -> ({x_t}, {p_t}, f64)
"""
    params = ir.compile(module, "interp").call("init_params")
    x = np.random.default_rng(9).standard_normal((4, 2, 2))
    check_gradient(text, "forward", "forward_grad", [x, params])


# ------------------------------------------------------------------ what is refused


@pytest.mark.parametrize("case,why", [
    (cell("RNN", activations=["Gelu"]), "the activation 'Gelu'"),
    (cell("RNN", activation_alpha=[0.5]), "activation_alpha of 1 values for the 0 "),
    (cell("GRU", activations=["LeakyRelu", "Tanh"], activation_alpha=[0.1, 0.2]),
     "activation_alpha of 2 values for the 1 "),
    (cell("RNN", activations=["Affine"], activation_alpha=[0.5]),
     "Affine without its activation_beta"),
    (cell("RNN", activations=["ThresholdedRelu"]), "ThresholdedRelu without its "
     "activation_alpha"),
    (cell("LSTM", activations=["Sigmoid", "Tanh"]), "2 activations, 3 expected"),
    (cell("RNN", clip=-1.0), "clip=-1.0"),
])
def test_refused(case: Case, why: str) -> None:
    assert why in refusal(case)


def test_a_sequence_length_beyond_the_sequence_is_refused() -> None:
    assert "sequence_lens [5, 1]: lengths are ≥ 0, at most 4" in refusal(
        cell("GRU", np.array([5, 1], np.int32)))
