"""`optimizer KIND(option = value, …)`: what `@train_step` does with the gradient.

Six steps of each optimizer against PyTorch in float64 (fixtures/optimizers.npz, written by
fixtures/make_optimizers.py): the parameters, the optimizer's state and the losses; the
functions a stateful optimizer adds (`@init_state`, `@update`, `@init_training`); and every
diagnostic of a declaration, at its line and column.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import dlvm.ir as ir
import dlvm.tel as tel
from dlvm.ir import DiagnosticError
from dlvm.tel.api import render

FIXTURE = Path(__file__).with_name("fixtures") / "optimizers.npz"
NAMES = ("w1", "b1", "w2", "b2")
MODEL = """module m
type float64
x: in[_ x 5]
target: in[_ x 3]
w1: param[5 x 4] = glorot
b1: param[4] = 0.0
w2: param[4 x 3] = glorot
b2: param[3] = 0.0
h: hidden[_ x 4] = tanh(x . w1 + b1)
y: out[_ x 3] = softmax(h . w2 + b2)
loss xent = cross_entropy(y, target)
"""
LINE = MODEL.count("\n") + 1  # the line an appended declaration is on
# the declarations that make fixtures/make_optimizers.py's cases (lr 0.05 in each)
CASES = {
    "adamw": "optimizer adamw(beta1 = 0.8, beta2 = 0.99, eps = 1e-6, weight_decay = 0.1, "
             "warmup = 2, total = 5, decay = [w1, w2])",
    "adamw_all": "optimizer adamw",
    "adam": "optimizer adam(total = 4)",
    "sgd_momentum": "optimizer sgd(momentum = 0.9, warmup = 3)",
    "sgd_cosine": "optimizer sgd(total = 4)",
    "sgd": "optimizer sgd",
    "adamw_clip": "optimizer adamw(clip = 0.5)",
    "sgd_clip": "optimizer sgd(clip = 0.5)",
}
SLOTS = {"adamw": ("m", "v"), "adamw_all": ("m", "v"), "adam": ("m", "v"),
         "sgd_momentum": ("velocity",), "sgd_cosine": (), "sgd": (), "adamw_clip": ("m", "v"),
         "sgd_clip": ()}


def reference() -> dict[str, np.ndarray]:
    with np.load(FIXTURE) as data:
        return dict(data)


def module(declaration: str) -> ir.Module:
    return tel.compile(MODEL + declaration + "\n", "m.tel")


def train(declaration: str, steps: int = 6) -> tuple[list[np.ndarray], list[np.ndarray],
                                                     list[float]]:
    """`steps` calls of @train_step from the fixture's parameters and a zero state."""
    ref = reference()
    exe = ir.compile(module(declaration), target="interp")
    step = exe.module.function("train_step")
    assert step is not None
    n_state = len(step.type_.arguments) - len(NAMES) - 3
    params = [ref[n] for n in NAMES]
    state = [np.zeros(tuple(d for d in t.shape), np.float64)  # type: ignore[attr-defined]
             for t in step.type_.arguments[len(NAMES):len(NAMES) + n_state]]
    losses = []
    for t in range(steps):
        out = exe.call("train_step", *params, *state, ref["x"][t], ref["target"][t],
                       np.float64(0.05))
        params, state = list(out[:len(NAMES)]), list(out[len(NAMES):-1])
        losses.append(float(out[-1]))
    return params, state, losses


@pytest.mark.parametrize("case", list(CASES))
def test_six_steps_match_pytorch(case: str) -> None:
    ref = reference()
    params, state, losses = train(CASES[case])
    np.testing.assert_allclose(losses, ref[f"{case}_losses"], rtol=1e-12)
    for name, value in zip(NAMES, params, strict=True):
        np.testing.assert_allclose(value, ref[f"{case}_{name}"], rtol=1e-10, atol=1e-12,
                                   err_msg=name)
    slots = SLOTS[case]
    for k, slot in enumerate(slots):
        for i, name in enumerate(NAMES):
            np.testing.assert_allclose(state[k * len(NAMES) + i], ref[f"{case}_{name}_{slot}"],
                                       rtol=1e-10, atol=1e-14, err_msg=f"{name}_{slot}")
    counts = case.startswith("adam") or "warmup" in CASES[case] or "total" in CASES[case]
    assert len(state) == len(slots) * len(NAMES) + counts
    if counts:
        assert float(state[-1]) == 6.0  # the step count


def test_clipping_scales_the_gradients_to_the_largest_norm_when_they_exceed_it() -> None:
    """The fixture's gradient norms straddle the bound: most steps are clipped, the last
    (0.48 < 0.5) is not; both agree with `torch.nn.utils.clip_grad_norm_`."""
    ref = reference()
    norms = [float(ref[f"adamw_clip_norm{t}"]) for t in range(1, 7)]
    assert max(norms) > 0.5 > norms[-1]
    clipped, plain = train(CASES["sgd_clip"])[0], train(CASES["sgd"])[0]
    assert not np.allclose(clipped[0], plain[0])


def test_without_a_declaration_the_step_is_plain_sgd() -> None:
    plain = tel.compile(MODEL, "m.tel")
    assert str(plain) == str(module("optimizer sgd"))
    assert str(module("optimizer sgd(momentum = 0)")) == str(plain)
    assert plain.function("update") is None and plain.function("init_training") is None


def test_the_cosine_reaches_zero_at_total_and_the_parameters_stop() -> None:
    after_4 = train(CASES["sgd_cosine"], steps=4)[0]
    after_6 = train(CASES["sgd_cosine"], steps=6)[0]
    for a, b in zip(after_4, after_6, strict=True):
        np.testing.assert_array_equal(a, b)


def test_state_is_named_after_the_parameters_and_starts_at_zero() -> None:
    m = module(CASES["adamw"])
    step = m.function("train_step")
    assert step is not None
    assert [a.name for a in step.entry.arguments] == [
        *NAMES, "w1_m", "b1_m", "w2_m", "b2_m", "w1_v", "b1_v", "w2_v", "b2_v", "step",
        "x", "target", "lr"]
    start = ir.compile(m, target="interp", seed=3).call("init_training")
    params = ir.compile(m, target="interp", seed=3).call("init_params")
    assert len(start) == 4 + 8 + 1
    for a, b in zip(start[:4], params, strict=True):
        np.testing.assert_array_equal(a, b)  # the same draws, seeded alike
    assert all(not np.any(s) for s in start[4:])


def test_a_state_name_taken_by_a_declaration_gets_a_number() -> None:
    text = MODEL.replace("x: in[_ x 5]", "x: in[_ x 5]\nstep: param[1] = 0.0") \
        .replace("tanh(x . w1 + b1)", "tanh(x . w1 + b1 + step)")
    step = tel.compile(text + "optimizer adam\n", "m.tel").function("train_step")
    assert step is not None
    assert "step2" in [a.name for a in step.entry.arguments]


def test_update_is_the_step_for_a_gradient_computed_elsewhere() -> None:
    ref = reference()
    exe = ir.compile(module(CASES["adamw"]), target="interp")
    params, state = tuple(ref[n] for n in NAMES), exe.call("init_state")
    for t in range(6):
        *grads, _ = exe.call("loss_grad", ref["x"][t], ref["target"][t], params)
        out = exe.call("update", params, state, tuple(grads), np.float64(0.05))
        params, state = out[:len(NAMES)], out[len(NAMES):]
    for name, value in zip(NAMES, params, strict=True):
        np.testing.assert_allclose(value, ref[f"adamw_{name}"], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", ["adamw", "sgd_clip"])
def test_the_generated_class_steps_with_the_declared_optimizer(case: str, tmp_path: Path
                                                               ) -> None:
    """Through `@update`: with AdamW's state, and for clipped SGD, which keeps none."""
    text = MODEL + CASES[case] + "\n"
    path = tmp_path / "m_api.py"
    path.write_text(render(tel.check(tel.parse(text, "m.tel")), "m.tel"), encoding="utf-8")
    spec = importlib.util.spec_from_file_location("m_api", path)
    assert spec is not None and spec.loader is not None
    api = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(api)
    kind = CASES[case].split()[1].split("(")[0]
    assert f"Optimizer: {kind}(" in " ".join(api.M.__doc__.split())
    model = api.M(target="interp")
    ref = reference()
    for name in NAMES:
        setattr(model, name, ref[name])
    names = [f"{n}_{s}" for s in SLOTS[case] for n in NAMES]
    assert list(model.optimizer_state) == names + (["step"] if case == "adamw" else [])
    losses = [model.step(ref["x"][t], ref["target"][t], 0.05) for t in range(6)]
    np.testing.assert_allclose(losses, ref[f"{case}_losses"], rtol=1e-12)
    for name in NAMES:
        np.testing.assert_allclose(model.parameters[name], ref[f"{case}_{name}"], rtol=1e-10,
                                   atol=1e-12)
    for key in names:
        np.testing.assert_allclose(model.optimizer_state[key], ref[f"{case}_{key}"],
                                   rtol=1e-10, atol=1e-14)


def test_f16_parameters_keep_the_state_and_do_the_arithmetic_in_f32() -> None:
    """f16 holds neither Adam's ε = 1e-8 nor a squared small gradient (v̂ = 0 would divide by
    0), and counts steps exactly only to 2048: the optimizer works in f32 and rounds the new
    parameters once."""
    text = MODEL.replace("type float64", "type float16")
    m = tel.compile(text + "optimizer adamw(warmup = 2)\n", "m.tel")
    step = m.function("train_step")
    assert step is not None
    assert [str(t) for t in step.type_.arguments[4:13]] == [
        "<5 x 4 x f32>", "<4 x f32>", "<4 x 3 x f32>", "<3 x f32>"] * 2 + ["f32"]
    ref = reference()
    args = [ref[n].astype(np.float16) for n in NAMES]
    x, target = ref["x"][0].astype(np.float16), ref["target"][0].astype(np.float16)
    state = [np.zeros(a.shape, np.float32) for a in args] * 2 + [np.float32(3000)]
    out = ir.compile(m, target="interp").call("train_step", *args, *state, x, target,
                                              np.float16(0.01))
    assert [v.dtype for v in out[:4]] == [np.float16] * 4
    assert out[12] == np.float32(3001)
    # the same step in f64 from the same (rounded) values, rounded once at the end
    exact = ir.compile(module("optimizer adamw(warmup = 2)"), target="interp").call(
        "train_step", *(a.astype(np.float64) for a in [*args, *state, x, target]),
        np.float64(np.float16(0.01)))
    for got, want in zip(out[:12], exact[:12], strict=True):
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=2e-3, atol=1e-4)


# ---------------------------------------------------------------- diagnostics


def problems(declaration: str, model: str = MODEL) -> list[str]:
    with pytest.raises(DiagnosticError) as e:
        tel.compile(model + declaration + "\n", "m.tel")
    return [f"{d.location.line}:{d.location.column}: {d.message}"  # type: ignore[union-attr]
            for d in e.value.diagnostics]


@pytest.mark.parametrize("declaration, expected", [
    ("optimizer adamx", "11: unknown optimizer 'adamx' (one of sgd, adam, adamw); did you "
                        "mean 'adamw'?"),
    ("optimizer adam(beta = 0.9)", "16: adam has no option 'beta' (its options: beta1, beta2, "
                                   "eps, warmup, total, clip); did you mean 'beta1'?"),
    ("optimizer adam(beta1 = 1)", "16: the option 'beta1' of adam must be in [0, 1), found 1"),
    ("optimizer adam(eps = 0)", "16: the option 'eps' of adam must be above 0, found 0"),
    ("optimizer sgd(clip = 0)", "15: the option 'clip' of sgd must be above 0, found 0"),
    ("optimizer sgd(momentum = -0.5)", "15: the option 'momentum' of sgd must be in [0, 1), "
                                       "found -0.5"),
    ("optimizer sgd(warmup = 2.5)", "15: the option 'warmup' of sgd must be an integer, "
                                    "found 2.5"),
    ("optimizer adamw(weight_decay = 0.1, weight_decay = 0.2)",
     "37: the option 'weight_decay' of adamw is given twice"),
    ("optimizer adamw(decay = [w1, w3])", "17: 'decay' of adamw names 'w3', which is not a "
                                          "parameter; did you mean 'w1'?"),
    ("optimizer adamw(decay = 0.1)", "17: the option 'decay' of adamw takes a list of "
                                     "parameter names, as [w1, w2]"),
    ("optimizer adamw(eps = [w1])", "17: the option 'eps' of adamw takes a number"),
    ("optimizer adam(warmup = 10, total = 10)", "11: the cosine schedule of adam needs "
                                                "total > warmup (the steps of warm-up), found "
                                                "total = 10, warmup = 10"),
])
def test_a_bad_declaration_is_reported_where_it_is(declaration: str, expected: str) -> None:
    assert problems(declaration) == [f"{LINE}:{expected}"]


def test_one_optimizer_per_module() -> None:
    assert problems("optimizer adam\noptimizer sgd") == [
        f"{LINE + 1}:11: a module has one optimizer; 'adam' is already declared "
        f"(at line {LINE})"]


def test_an_optimizer_needs_a_loss() -> None:
    model = MODEL.replace("loss xent = cross_entropy(y, target)\n", "")
    assert problems("optimizer adam", model) == [
        f"{LINE - 1}:11: an optimizer minimizes the loss, but the module declares no loss"]


@pytest.mark.parametrize("declaration, expected", [
    ("optimizer adam(beta1 0.9)", "22: expected '=' after the option 'beta1', found '0.9'"),
    ("optimizer adam(beta1 = x)", "24: expected the value of 'beta1' (a number or a list of "
                                  "names), found 'x'"),
    ("optimizer adam(beta1 = 0.9", "1: expected ')' to close the optimizer's options, found "
                                   "the end of the file"),
])
def test_a_malformed_declaration_is_a_syntax_error(declaration: str, expected: str) -> None:
    found = problems(declaration)
    line = LINE + 1 if expected.startswith("1:") else LINE
    assert found == [f"{line}:{expected}"]


def test_optimizer_is_still_a_name_where_a_declaration_is() -> None:
    text = MODEL.replace("target: in[_ x 3]", "optimizer: in[_ x 3]") \
        .replace("cross_entropy(y, target)", "cross_entropy(y, optimizer)")
    m = tel.compile(text + "optimizer adam\n", "m.tel")
    step = m.function("train_step")
    assert step is not None and "optimizer" in [a.name for a in step.entry.arguments]
