"""Real architectures as PyTorch and Hugging Face export them (fixtures/make_architectures.py):
a BERT classifier with the attention mask it makes from its token ids, a ResNet-18, an LSTM
language model and a bidirectional GRU classifier. Each imports, computes what PyTorch and
ONNX Runtime compute on every target, and its parameters fine-tune."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import dlvm.ir as ir
import dlvm.onnx

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXPECTED = np.load(FIXTURES / "architectures.npz")
MODELS = ["bert", "resnet18", "lstm_lm", "gru_classifier"]
TARGETS: dict[str, dict[str, Any]] = {
    "interp": {}, "llvm-cpu": {"opt_level": 1},
    "nvptx": {"device": "host", "passes": "O1"}}
SEQUENCE = {"bert": {"dims": {"seq": 4}}}  # the length of test_sequences_of_other_lengths…


def load(name: str, **options: Any) -> ir.Module:
    if name == "bert" and "dims" not in options:
        options["dims"] = {"seq": 7}  # the sequences of the fixture's input
    return dlvm.onnx.load(FIXTURES / f"{name}.onnx", **options)


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("name", MODELS)
def test_the_model_computes_what_torch_and_onnxruntime_compute(name: str, target: str
                                                               ) -> None:
    if target == "nvptx":
        pytest.importorskip("dlvm.llvm_gpu")
    x, want = EXPECTED[f"{name}/x"], EXPECTED[f"{name}/y"]
    exe = ir.compile(load(name), target, **TARGETS[target])
    got = np.asarray(exe["main"](x))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(FIXTURES / f"{name}.onnx"),
                                   providers=["CPUExecutionProvider"])
    (reference,) = session.run(None, {session.get_inputs()[0].name: x})
    np.testing.assert_allclose(got, reference, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("name", ["bert", "lstm_lm", "gru_classifier"])
def test_sequences_of_other_lengths_run_too(name: str) -> None:
    """The sequence dimension is dynamic: a shorter batch runs through the same module (BERT
    slices its position table to the sequence's length, which the importer needs to know:
    `dims` gives the named dimension a size)."""
    ort = pytest.importorskip("onnxruntime")
    x = EXPECTED[f"{name}/x"][:2, :4]
    session = ort.InferenceSession(str(FIXTURES / f"{name}.onnx"),
                                   providers=["CPUExecutionProvider"])
    (want,) = session.run(None, {session.get_inputs()[0].name: x})
    got = ir.compile(load(name, **SEQUENCE.get(name, {})), "interp")["main"](x)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("name", ["bert", "resnet18", "gru_classifier"])
def test_sgd_steps_lower_the_loss(name: str) -> None:
    """The generated @train_step (the parameters one by one, x, one-hot targets, the rate)
    fine-tunes every parameter: a few steps on one batch lower its loss (on the interpreter:
    compiling the differentiated step takes LLVM a minute, which the other tests spend)."""
    module = load(name)
    assert module.function("train_step") is not None
    exe = ir.compile(module, "interp")
    params = list(exe.call("init_params"))
    x = EXPECTED[f"{name}/x"]
    classes = EXPECTED[f"{name}/y"].shape[-1]
    target = np.eye(classes, dtype=np.float32)[np.arange(len(x)) % classes]
    losses = []
    for _ in range(8):
        *params, loss = exe.call("train_step", *params, x, target, np.float32(0.1))
        losses.append(float(loss))
    assert all(b < a for a, b in itertools.pairwise(losses)), losses
    assert losses[-1] < 0.8 * losses[0], losses


def test_the_embedding_gradient_is_a_scatter_add() -> None:
    """The GRU classifier's embedding table gets gradient only in the rows its tokens use."""
    module = load("gru_classifier")
    exe = ir.compile(module, "interp")
    params = exe.call("init_params")
    x = EXPECTED["gru_classifier/x"]
    target = np.eye(3, dtype=np.float32)[np.arange(len(x)) % 3]
    *grads, _ = exe.call("loss_grad", x, target, tuple(params))
    (table,) = [np.asarray(g) for g in grads if np.shape(g) == (50, 16)]
    used = np.zeros(50, bool)
    used[np.unique(x)] = True
    assert np.abs(table[~used]).max() == 0 and np.abs(table[used]).min(axis=1).max() > 0
