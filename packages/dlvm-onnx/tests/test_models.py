"""Three models exported by PyTorch (tests/fixtures, written by fixtures/make_models.py),
imported, run on the reference interpreter and on llvm-cpu, and compared with what torch
computed for them (expected.npz) and with ONNX Runtime; their gradients against torch's."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper
import pytest

import dlvm.ir as ir
import dlvm.onnx
from dlvm.ir.testing import TOLERANCE
from dlvm.ir.types import AliasDecl, TupleType

FIXTURES = Path(__file__).resolve().parent / "fixtures"
MODELS = ("mlp", "cnn", "encoder")
CLASSIFIERS = ("mlp", "cnn")
TARGETS = ("interp", "llvm-cpu")
BATCHES = (1, 4)
RTOL, ATOL = 1e-4, 1e-5  # float32, a few roundings apart
FUNCTIONS = {"forward", "init_params", "main"}
CLASSIFIER_FUNCTIONS = {"loss", "loss_grad", "predict", "train_step"}


@functools.cache
def expected() -> dict[str, np.ndarray]:
    with np.load(FIXTURES / "expected.npz") as z:
        return {k: z[k] for k in z.files}


def fixture(model: str, key: str) -> np.ndarray:
    return expected()[f"{model}/{key}"]


@functools.cache
def load(model: str, freeze: bool = False) -> ir.Module:
    return dlvm.onnx.load(FIXTURES / f"{model}.onnx", freeze=freeze)


# llvm-cpu builds a function per argument shapes on its first call (the defaults: "main").
# The frozen models are built once for every batch (`specialize=False`: the `_` dimension
# stays dynamic), which tests that path too; gradients and the rest at LLVM's -O0 ("O0"):
# at -O3, LLVM alone takes ~12 s on the differentiated encoder with a cold code cache, and
# the code's speed is not what these tests are about.
OPTIONS = {"llvm-cpu": {"main": {}, "generic": {"specialize": False}, "O0": {"opt_level": 0}}}


@functools.cache
def executable(model: str, target: str, freeze: bool = False,
               use: str = "main") -> ir.Executable:
    return ir.compile(load(model, freeze), target, **OPTIONS.get(target, {}).get(use, {}))


def initializers(model: str) -> dict[str, np.ndarray]:
    proto = onnx.load(str(FIXTURES / f"{model}.onnx"))
    return {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}


def params(model: str) -> tuple[np.ndarray, ...]:
    """The parameters' tuple in the order torch's gradients were stored in."""
    inits = initializers(model)
    return tuple(inits[str(p)] for p in fixture(model, "params"))


def close(got: Any, want: Any, what: str, rtol: float = RTOL, atol: float = ATOL) -> None:
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=rtol, atol=atol,
                               err_msg=what)


# ---------------------------------------------------------------- import


@pytest.mark.parametrize("model", MODELS)
def test_imports_and_verifies(model: str) -> None:
    m = load(model)
    ir.verify(m)
    names = {f.name for f in m.functions}
    assert names == FUNCTIONS | (CLASSIFIER_FUNCTIONS if model in CLASSIFIERS else set())
    # the parameters' tuple is the stored one: the initializers torch's gradients are for
    alias = m.type_decls[f"{model}_params"]
    assert isinstance(alias, AliasDecl) and isinstance(alias.target, TupleType)
    shapes = [tuple(t.shape) for t in alias.target.elements]
    assert shapes == [p.shape for p in params(model)]
    (x_type,) = m["main"].type_.arguments
    assert m.resolve(x_type).shape[0] is None  # the batch stays dynamic


@pytest.mark.parametrize("freeze", [False, True])
@pytest.mark.parametrize("model", MODELS)
def test_printed_module_parses_back(model: str, freeze: bool) -> None:
    m = load(model, freeze)
    text = str(m)
    assert str(ir.parse(text)) == text


def test_cnn_keeps_batch_normalization() -> None:
    """The fixture exercises inference batch norm (not folded into the convolution), and its
    running statistics are not parameters."""
    proto = onnx.load(str(FIXTURES / "cnn.onnx"))
    bn = [n for n in proto.graph.node if n.op_type == "BatchNormalization"]
    assert len(bn) == 1
    stats = set(bn[0].input[3:5])
    assert stats and not stats & {str(p) for p in fixture("cnn", "params")}
    inits = initializers("cnn")
    assert all(np.abs(inits[s] - (0 if s == bn[0].input[3] else 1)).max() > 0.1 for s in stats)


# ---------------------------------------------------------------- inference


@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", MODELS)
def test_main_matches_torch(model: str, target: str, batch: int) -> None:
    x, y = fixture(model, "x")[:batch], fixture(model, "y")[:batch]
    got = executable(model, target)["main"](x)
    assert got.shape == y.shape and got.dtype == np.float32
    close(got, y, f"{model} on {target}, batch {batch}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", MODELS)
def test_main_matches_onnxruntime(model: str, target: str) -> None:
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(FIXTURES / f"{model}.onnx"),
                                   providers=["CPUExecutionProvider"])
    exe = executable(model, target)
    for batch in BATCHES:
        x = fixture(model, "x")[:batch]
        (want,) = session.run(["y"], {"x": x})
        close(exe["main"](x), want, f"{model} on {target} against ONNX Runtime, batch {batch}")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", MODELS)
def test_forward_with_init_params_is_main(model: str, target: str) -> None:
    exe = executable(model, target, use="O0")
    stored = exe.call("init_params")
    for got, want in zip(stored, params(model), strict=True):
        np.testing.assert_array_equal(got, want)  # stored literals read back: exact
    x = fixture(model, "x")
    # Two different functions: `main` has the parameters as constants, which the compiler
    # folds and orders differently, and FMA contraction and vector width depend on the CPU;
    # float32 results agree to a few roundings, not bit for bit.
    close(exe["forward"](x, params(model)), exe["main"](x), f"{model} forward on {target}",
          *TOLERANCE[32])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", MODELS)
def test_freeze_gives_the_same_outputs(model: str, target: str) -> None:
    frozen = load(model, freeze=True)
    assert [f.name for f in frozen.functions] == ["main"]
    assert not frozen.type_decls
    exe = executable(model, target, freeze=True, use="generic")
    for batch in BATCHES:
        x = fixture(model, "x")[:batch]
        close(exe["main"](x), fixture(model, "y")[:batch],
              f"frozen {model} on {target}, batch {batch}")


# ---------------------------------------------------------------- gradients


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", CLASSIFIERS)
def test_loss_grad_matches_torch(model: str, target: str) -> None:
    x, t = fixture(model, "x"), fixture(model, "target")
    exe = executable(model, target, use="O0")
    p = params(model)
    close(exe["loss"](x, t, p), fixture(model, "loss"), f"{model} loss on {target}")
    *grads, loss = exe.call("loss_grad", x, t, p)
    close(loss, fixture(model, "loss"), f"{model} loss kept by loss_grad on {target}")
    assert len(grads) == len(p)
    for name, g, w in zip(fixture(model, "params"), grads, p, strict=True):
        want = fixture(model, f"grad/{name}")
        assert g.shape == w.shape == want.shape
        close(g, want, f"d loss / d {name} ({model} on {target})")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("model", CLASSIFIERS)
def test_train_step_is_sgd_on_loss_grad(model: str, target: str) -> None:
    x, t = fixture(model, "x"), fixture(model, "target")
    exe = executable(model, target, use="O0")
    p = params(model)
    lr = np.float32(0.5)
    *updated, loss = exe.call("train_step", *p, x, t, lr)
    close(loss, fixture(model, "loss"), f"{model} train_step loss on {target}")
    for name, new, old in zip(fixture(model, "params"), updated, p, strict=True):
        close(new, old - lr * fixture(model, f"grad/{name}"), f"{model} step of {name}")
    close(exe["predict"](*p, x), fixture(model, "y"), f"{model} predict on {target}")


def with_objective(model: str) -> ir.Module:
    """The encoder with ⟨R, forward(x, params)⟩ and its gradient with respect to the
    parameters (the encoder's output is rank 3, so the importer gives it no @loss)."""
    m = load(model)
    y = str(m["forward"].type_.result)
    p = f"${model}_params"
    return ir.parse(str(m) + f"""
func @objective: ({y}, {p}, {y}) -> f32 {{
'entry(%x: {y}, %params: {p}, %r: {y}):
    %y = apply @forward(%x: {y}, %params: {p}) -> {y}
    %yr = multiply %y: {y}, %r: {y}
    %total = reduce %yr: {y} by add init 0.0: f32
    return %total: f32
}}

[gradient @objective wrt 1 keeping 0]
func @objective_grad: ({y}, {p}, {y}) -> ({p}, f32)
""")


@functools.cache
def objective(target: str) -> ir.Executable:
    return ir.compile(with_objective("encoder"), target,
                      **OPTIONS.get(target, {}).get("O0", {}))


@pytest.mark.parametrize("target", TARGETS)
def test_encoder_gradient_matches_torch(target: str) -> None:
    x, r = fixture("encoder", "x"), fixture("encoder", "r")
    p = params("encoder")
    *grads, value = objective(target).call("objective_grad", x, p, r)
    close(value, fixture("encoder", "loss"), f"⟨R, y⟩ on {target}", rtol=1e-4, atol=1e-4)
    assert len(grads) == len(p)
    for name, g in zip(fixture("encoder", "params"), grads, strict=True):
        close(g, fixture("encoder", f"grad/{name}"), f"d⟨R, y⟩ / d {name} on {target}",
              rtol=1e-4, atol=1e-4)
