"""causal_attention and embedding, TEL's transformer intrinsics: their values against numpy
float64 references written from the definitions (PyTorch's scaled_dot_product_attention
with is_causal=True on the split heads; the table's rows picked by the ids), their gradients
against finite differences, and the checker's diagnostics for calls it cannot compile.

Sources for the checker are written line by line with `tel(...)`: `module m` on line 1,
`type …` on line 2, so the line numbers in the assertions can be read off the call.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dlvm.ir as ir
import dlvm.tel as tel
from dlvm.ad.testing import check_gradient
from dlvm.ir import Diagnostic, DiagnosticError
from dlvm.ir.testing import compile_for_test

# ---------------------------------------------------------------- references and helpers


def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, heads: int) -> np.ndarray:
    """The definition, one output row at a time: for every batch position, head h and
    position i, softmax over j ≤ i of q_h[i]·k_h[j] / √d (the maximum subtracted), times
    v_h[j], written into head h's columns of row i."""
    *lead, steps, width = q.shape
    d = width // heads
    out = np.zeros(q.shape)
    for at in np.ndindex(*lead):
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            for i in range(steps):
                scores = np.array([q[at][i, cols] @ k[at][j, cols] / math.sqrt(d)
                                   for j in range(i + 1)])
                weights = np.exp(scores - scores.max())
                weights /= weights.sum()
                out[at][i, cols] = weights @ v[at][: i + 1, cols]
    return out


def embedded(ids: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Row ids[…] of the table; an id outside the table picks a row of zeros."""
    ids = np.asarray(ids).astype(np.int64)
    inside = (ids >= 0) & (ids < len(table))
    return np.where(inside[..., None], table[np.where(inside, ids, 0)], 0.0)


def params(module: ir.Module, seed: int = 0) -> tuple[np.ndarray, ...]:
    return ir.compile(module, "interp", seed=seed).call("init_params")


def tel_file(*lines: str, dtype: str = "float64") -> str:
    """A TEL file: `module m` on line 1, `type …` on line 2, then `lines` from line 3."""
    return "\n".join(["module m", f"type {dtype}", *lines]) + "\n"


def error(text: str) -> Diagnostic:
    """The one diagnostic of `text`."""
    with pytest.raises(DiagnosticError) as e:
        tel.compile(text, "m.tel")
    found = e.value.diagnostics
    assert len(found) == 1, [str(d) for d in found]
    return found[0]


def at(d: Diagnostic) -> tuple[int, int]:
    assert d.location is not None
    return d.location.line, d.location.column


def dims(shape: tuple[int, ...]) -> str:
    return " x ".join(str(n) for n in shape)


# ---------------------------------------------------------------- causal_attention: values


@pytest.mark.parametrize(("declared", "actual", "heads"), [
    ("5 x 8", (5, 8), 1),                      # one sequence, no batch
    ("5 x 8", (5, 8), 2),
    ("_ x 5 x 8", (3, 5, 8), 1),               # a dynamic batch
    ("_ x 5 x 8", (3, 5, 8), 4),
    ("_ x _ x 8", (2, 6, 8), 1),               # a dynamic batch and a dynamic length
    ("_ x _ x 6", (2, 7, 6), 3),
    ("_ x _ x 6", (2, 1, 6), 2),               # one position: it attends to itself
    ("2 x _ x 3 x 4", (2, 2, 3, 4), 2),        # two batch dimensions
    ("_ x 2 x _ x 4", (3, 2, 5, 4), 2),
    ("2 x 3 x 4 x 8", (2, 3, 4, 8), 8),        # heads of one feature
])
def test_causal_attention_is_scaled_dot_product_attention_over_past_positions(
        declared: str, actual: tuple[int, ...], heads: int) -> None:
    module = tel.compile(tel_file(f"q: in[{declared}]", f"k: in[{declared}]",
                                  f"v: in[{declared}]",
                                  f"y: out[{declared}] = causal_attention(q, k, v, {heads})"),
                         "attention.tel")
    rng = np.random.default_rng(heads)
    q, k, v = (rng.standard_normal(actual) * 2 for _ in range(3))
    got = compile_for_test(module)["inference"](q, k, v)
    np.testing.assert_allclose(got, attention(q, k, v, heads), rtol=1e-10, atol=1e-12)


def test_the_first_position_sees_only_itself_and_the_last_sees_every_position() -> None:
    module = tel.compile(tel_file("q: in[4 x 2]", "k: in[4 x 2]", "v: in[4 x 2]",
                                  "y: out[4 x 2] = causal_attention(q, k, v, 1)"), "a.tel")
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((4, 2)) for _ in range(3))
    y = compile_for_test(module)["inference"](q, k, v)
    np.testing.assert_allclose(y[0], v[0], rtol=1e-12)
    w = np.exp(q[3] @ k.T / math.sqrt(2))
    np.testing.assert_allclose(y[3], w @ v / w.sum(), rtol=1e-12)


def test_large_scores_do_not_overflow() -> None:
    """The maximum is subtracted before the exponential: scores of 10⁴ give weights, not
    NaN."""
    module = tel.compile(tel_file("q: in[_ x 3 x 2]", "k: in[_ x 3 x 2]", "v: in[_ x 3 x 2]",
                                  "y: out[_ x 3 x 2] = causal_attention(q, k, v, 2)"), "a.tel")
    rng = np.random.default_rng(6)
    q, k, v = (rng.standard_normal((2, 3, 2)) * 100 for _ in range(3))
    y = compile_for_test(module)["inference"](q, k, v)
    assert np.isfinite(y).all()
    np.testing.assert_allclose(y, attention(q, k, v, 2), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("declared", "actual", "heads"), [
    ("_ x _ x 6", (2, 0, 6), 3), ("_ x _ x 6", (0, 3, 6), 3), ("_ x 5 x 8", (0, 5, 8), 2),
    ("2 x _ x 8", (2, 0, 8), 1)])
def test_an_empty_batch_or_sequence_gives_an_empty_result(
        declared: str, actual: tuple[int, ...], heads: int) -> None:
    module = tel.compile(tel_file(f"q: in[{declared}]",
                                  f"y: out[{declared}] = causal_attention(q, q, q, {heads})"),
                         "attention.tel")
    assert compile_for_test(module)["inference"](np.zeros(actual)).shape == actual


# ---------------------------------------------------------------- causal_attention: gradients

ATTENTION_PARAMS = """
module attn
type float64
target: in[{shape}]
q: param[{shape}] = normal(1.0)
k: param[{shape}] = normal(1.0)
v: param[{shape}] = normal(1.0)
y: out[{shape}] = causal_attention(q, k, v, {heads})
loss l = sum(y * target)
"""


@pytest.mark.parametrize(("shape", "heads"), [((4, 6), 1), ((4, 6), 3), ((2, 3, 4), 2),
                                              ((2, 2, 3, 4), 4)])
def test_the_gradient_with_respect_to_q_k_and_v_matches_finite_differences(
        shape: tuple[int, ...], heads: int) -> None:
    module = tel.compile(ATTENTION_PARAMS.format(shape=dims(shape), heads=heads), "attn.tel")
    rng = np.random.default_rng(len(shape) + heads)
    check_gradient(module, "loss", "loss_grad",
                   [rng.standard_normal(shape), params(module)])


ATTENTION_OF_INPUTS = """
module attn
type float64
x: in[{shape}]
target: in[{shape}]
wq: param[6] = normal(1.0)
wk: param[6] = normal(1.0)
wv: param[6] = normal(1.0)
y: out[{shape}] = causal_attention(x * wq, x * wk + 0.5, x * wv, {heads})
loss l = mse(y, target)
"""


@pytest.mark.parametrize(("shape", "heads"), [("_ x 5 x 6", 2), ("_ x _ x 6", 3),
                                              ("_ x _ x 6", 1)])
def test_the_gradient_through_dynamic_shapes_matches_finite_differences(
        shape: str, heads: int) -> None:
    """A dynamic batch (the heads split by a shape cast) and a dynamic length too (the heads
    sliced apart, the mask built at run time)."""
    module = tel.compile(ATTENTION_OF_INPUTS.format(shape=shape, heads=heads), "attn.tel")
    rng = np.random.default_rng(heads)
    x, t = rng.standard_normal((2, 5, 6)), rng.standard_normal((2, 5, 6))
    check_gradient(module, "loss", "loss_grad", [x, t, params(module)])
    wq, wk, wv = params(module)
    y = compile_for_test(module)["inference"](x, params(module))
    np.testing.assert_allclose(y, attention(x * wq, x * wk + 0.5, x * wv, heads), rtol=1e-10)


# ---------------------------------------------------------------- embedding: values


@pytest.mark.parametrize(("declared", "ids"), [
    ("[]", np.array(2.0)),                                    # one id: one row
    ("[_]", np.array([0.0, 3.0, 3.0, 6.0, 1.0])),
    ("[_ x 4]", np.array([[1.0, 2.0, 0.0, 6.0], [5.0, 5.0, 4.0, 3.0]])),
    ("[_ x _]", np.array([[1.0, 2.0, 6.0], [0.0, 0.0, 4.0]])),
    ("[2 x 3 x 2]", np.arange(12.0).reshape(2, 3, 2) % 7),
    ("[_ x 2 x _]", np.arange(12.0).reshape(3, 2, 2) % 7),
])
def test_embedding_picks_the_rows_of_the_table_named_by_the_ids(declared: str,
                                                               ids: np.ndarray) -> None:
    out = f"{declared[:-1]} x 3]" if declared != "[]" else "[3]"
    module = tel.compile(tel_file(f"ids: in{declared}", "table: in[7 x 3]",
                                  f"y: out{out} = embedding(ids, table)"), "e.tel")
    table = np.random.default_rng(7).standard_normal((7, 3))
    got = compile_for_test(module)["inference"](ids, table)
    assert got.shape == (*ids.shape, 3)
    np.testing.assert_array_equal(got, table[ids.astype(np.int64)])  # exact: one row each


def test_an_embedding_table_of_dynamic_size_works() -> None:
    module = tel.compile(tel_file("ids: in[_ x 2]", "table: in[_ x _]",
                                  "y: out[_ x 2 x _] = embedding(ids, table)"), "e.tel")
    table = np.random.default_rng(8).standard_normal((5, 4))
    ids = np.array([[4.0, 0.0], [2.0, 2.0], [1.0, 3.0]])
    got = compile_for_test(module)["inference"](ids, table)
    np.testing.assert_array_equal(got, table[ids.astype(np.int64)])


def test_an_id_outside_the_table_picks_zeros_and_a_fraction_is_truncated() -> None:
    module = tel.compile(tel_file("ids: in[_]", "table: in[4 x 2]",
                                  "y: out[_ x 2] = embedding(ids, table)"), "e.tel")
    table = np.arange(1.0, 9.0).reshape(4, 2)
    ids = np.array([-1.0, 4.0, 2.7, 1e6, 0.0])
    got = compile_for_test(module)["inference"](ids, table)
    np.testing.assert_array_equal(got, embedded(ids, table))
    np.testing.assert_array_equal(got[2], table[2])


def test_embedding_works_in_an_integer_module() -> None:
    module = tel.compile(tel_file("ids: in[_ x 3]", "table: in[5 x 2]",
                                  "y: out[_ x 3 x 2] = embedding(ids, table) + 1",
                                  dtype="int32"), "e.tel")
    table = np.arange(10, dtype=np.int32).reshape(5, 2) * 7
    ids = np.array([[4, 0, 1], [3, 3, 2]], dtype=np.int32)
    got = compile_for_test(module)["inference"](ids, table)
    np.testing.assert_array_equal(got, table[ids] + 1)


# ---------------------------------------------------------------- embedding: the gradient

EMBEDDED = """
module lookup
type float64
ids: in[{ids}]
target: in[{out}]
table: param[6 x 3] = normal(1.0)
y: out[{out}] = tanh(embedding(ids, table))
loss l = mse(y, target)
"""


@pytest.mark.parametrize(("ids", "out", "values"), [
    ("_", "_ x 3", np.array([1.0, 4.0, 1.0, 0.0, 1.0])),      # a repeated id: its row adds up
    ("_ x 3", "_ x 3 x 3", np.array([[5.0, 5.0, 2.0], [0.0, 2.0, 9.0]])),   # 9: no row
    ("_ x _", "_ x _ x 3", np.array([[3.0, 3.0], [3.0, 1.0]])),
])
def test_the_gradient_with_respect_to_the_table_matches_finite_differences(
        ids: str, out: str, values: np.ndarray) -> None:
    """Rows no id picks get no gradient; a row picked several times gets the sum."""
    module = tel.compile(EMBEDDED.format(ids=ids, out=out), "lookup.tel")
    rng = np.random.default_rng(9)
    target = rng.standard_normal((*values.shape, 3))
    d_table, _ = compile_for_test(module).call("loss_grad", values, target, params(module))
    untouched = [r for r in range(6) if r not in values.astype(np.int64)]
    np.testing.assert_array_equal(d_table[untouched], 0.0)
    check_gradient(module, "loss", "loss_grad", [values, target, params(module)])


TINY_GPT = """
module gpt
type float64

tokens: in[_ x 4]                 // ids of 4 positions
positions: in[4]                  // 0, 1, 2, 3
target: in[_ x 4 x 5]             // the next token, one-hot
wte: param[5 x 6] = normal(0.5)   // the vocabulary's embeddings
wpe: param[4 x 6] = normal(0.5)
wq: param[6 x 6] = glorot
wk: param[6 x 6] = glorot
wv: param[6 x 6] = glorot
x: hidden[_ x 4 x 6] = embedding(tokens, wte) + embedding(positions, wpe)
h: hidden[_ x 6] = layer_norm(x) as [_ x 6]
a: hidden[_ x 4 x 6] = causal_attention((h . wq) as [_ x 4 x 6], (h . wk) as [_ x 4 x 6],
                                        (h . wv) as [_ x 4 x 6], 2)
y: out[_ x 5] = softmax(gelu(x + a) as [_ x 6] . wte^T)   // tied output embedding
loss xent = cross_entropy(y, target as [_ x 5])
"""


def test_a_one_block_causal_language_model_trains_with_the_right_gradient() -> None:
    module = tel.compile(TINY_GPT, "gpt.tel")
    p = params(module)
    wte, wpe, wq, wk, wv = p
    rng = np.random.default_rng(10)
    tokens = rng.integers(0, 5, (2, 4)).astype(np.float64)
    positions = np.arange(4.0)
    target = np.eye(5)[rng.integers(0, 5, (2, 4))]
    x = wte[tokens.astype(np.int64)] + wpe
    c = x - x.mean(-1, keepdims=True)
    h = c / np.sqrt((c**2).mean(-1, keepdims=True) + 1e-5)
    a = attention(h @ wq, h @ wk, h @ wv, 2)
    z = x + a
    z = z * 0.5 * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    expected = np.exp(z @ wte.T)
    expected = (expected / expected.sum(-1, keepdims=True)).reshape(8, 5)
    got = compile_for_test(module)["inference"](tokens, positions, p)
    np.testing.assert_allclose(got, expected, rtol=1e-10)
    check_gradient(module, "loss", "loss_grad", [tokens, positions, target, p])


def test_the_language_model_learns_a_sequence_with_adamw() -> None:
    """The model's gradient and its AdamW update (`@update`, warm-up then cosine decay): a
    repeating sequence is learned, the loss falling to a fifth of its start in 60 steps."""
    text = TINY_GPT + "optimizer adamw(warmup = 5, total = 60, decay = [wq, wk, wv])\n"
    exe = ir.compile(tel.compile(text, "gpt.tel"), "interp")
    p, state = exe.call("init_params"), exe.call("init_state")
    tokens = np.array([[0.0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 0], [3, 4, 0, 1]])
    target = np.eye(5)[(tokens.astype(np.int64) + 1) % 5]
    positions = np.arange(4.0)
    losses = []
    for _ in range(60):
        *grads, loss = exe.call("loss_grad", tokens, positions, target, p)
        out = exe.call("update", p, state, tuple(grads), np.float64(0.05))
        p, state = out[:5], out[5:]
        losses.append(float(loss))
    assert losses[-1] < 0.2 * losses[0]
    assert float(state[-1]) == 60.0


# ---------------------------------------------------------------- the checker


def test_the_result_shapes_take_the_known_sizes() -> None:
    checked = tel.check(tel.parse(tel_file(
        "q: in[_ x 5 x 8]", "k: in[2 x _ x 8]", "v: in[_ x _ x 8]",
        "a: out[_ x _ x 8] = causal_attention(q, k, v, 4)",
        "ids: in[_ x 3]", "table: in[10 x 4]",
        "e: out[_ x _ x _] = embedding(ids, table)"), "m.tel"))
    assert checked.shapes["a"] == (2, 5, 8)
    assert checked.shapes["e"] == (None, 3, 4)


@pytest.mark.parametrize(("heads", "found", "column"), [
    ("n", "'n'", 47),             # a value, not a constant
    ("2.0", "2.0", 47),
    ("0", "0", 47),
    ("-2", "-2", 47),
    ("1 + 1", "an expression", 49),   # an operator's place is the operator's
    ("sum(n)", "an expression", 47),
])
def test_the_number_of_heads_is_a_positive_integer_constant(heads: str, found: str,
                                                            column: int) -> None:
    d = error(tel_file("q: in[_ x 5 x 8]", "n: in[]",
                       f"y: out[_ x 5 x 8] = causal_attention(q, q, q, {heads})"))
    assert at(d) == (5, column)
    assert d.message == ("the number of heads of 'causal_attention' must be a positive "
                         f"integer constant, found {found}")


def test_the_number_of_heads_must_divide_the_features() -> None:
    d = error(tel_file("q: in[_ x 5 x 10]",
                       "y: out[_ x 5 x 10] = causal_attention(q, q, q, 4)"))
    assert at(d) == (4, 48)
    assert d.message == ("'causal_attention' cannot split 10 features into 4 heads: the "
                         "number of heads must divide the last dimension")
    d = error(tel_file("q: in[2 x 3]", "y: out[2 x 3] = causal_attention(q, q, q, 4)"))
    assert "cannot split 3 features into 4 heads" in d.message


@pytest.mark.parametrize(("k", "v"), [("[_ x 5 x 6]", "[_ x 5 x 8]"),
                                      ("[_ x 5 x 8]", "[_ x 4 x 8]"),
                                      ("[5 x 8]", "[_ x 5 x 8]")])
def test_q_k_and_v_must_have_one_shape(k: str, v: str) -> None:
    d = error(tel_file("q: in[_ x 5 x 8]", f"k: in{k}", f"v: in{v}",
                       "y: out[_ x 5 x 8] = causal_attention(q, k, v, 2)"))
    assert at(d) == (6, 21)
    assert d.message == (f"'causal_attention' takes q, k and v of one shape, found "
                         f"[_ x 5 x 8], {k} and {v}")


def test_attention_needs_positions_and_static_features() -> None:
    d = error(tel_file("q: in[8]", "y: out[8] = causal_attention(q, q, q, 2)"))
    assert at(d) == (4, 30)
    assert d.message == ("'causal_attention' takes q, k and v of shape [… x time x features] "
                         "(rank 2 or more), found [8]")
    d = error(tel_file("q: in[5 x _]", "y: out[5 x _] = causal_attention(q, q, q, 2)"))
    assert at(d) == (4, 17)
    assert d.message == ("'causal_attention' splits the features (the last dimension) into "
                         "heads, so their number must be static, found [5 x _]")


def test_attention_takes_four_arguments_and_a_floating_point_type() -> None:
    d = error(tel_file("q: in[5 x 4]", "y: out[5 x 4] = causal_attention(q, q, q)"))
    assert d.message == "'causal_attention' takes 4 arguments, found 3"
    d = error(tel_file("q: in[5 x 4]", "y: out[5 x 4] = causal_attention(q, q, q, 2)",
                       dtype="int32"))
    assert d.message == ("'causal_attention' needs a floating-point type; the module's type "
                         "is int32")


@pytest.mark.parametrize("table", ["[7]", "[7 x 3 x 2]", "[]"])
def test_an_embedding_table_is_a_matrix(table: str) -> None:
    d = error(tel_file("ids: in[_]", f"t: in{table}", "y: out[_ x 3] = embedding(ids, t)"))
    assert at(d) == (5, 32)
    assert d.message == f"'embedding' takes a table [vocabulary x features], found {table}"


def test_the_new_functions_names_cannot_be_declared() -> None:
    d = error(tel_file("embedding: in[3]", "y: out[3] = embedding"))
    assert d.message == "'embedding' is the name of a function; choose another name"
