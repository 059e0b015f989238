"""`loss-scaling`: a training step whose loss and gradient are computed in f16 takes a loss
scale S: its gradient is the f16 gradient seeded with S, divided by S in f32; a step whose
gradients overflow f16 returns its parameters unchanged, and says so in a last result."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.types import BOOL, F32, TensorType

# a linear model's squared error and the SGD update after its gradient, shared by MODULE
# (the parameters as two arguments) and PACKED (as one tuple)
LOSS_BODY = """    %s0 = dot %x: <_ x 6 x f32>, %w: <6 x 3 x f32>
    %bp = padShape %b: <3 x f32> at 0
    %s = add %s0: <_ x 3 x f32>, %bp: <1 x 3 x f32>
    %d = subtract %s: <_ x 3 x f32>, %y: <_ x 3 x f32>
    %q = multiply %d: <_ x 3 x f32>, %d: <_ x 3 x f32>
    %total = reduce %q: <_ x 3 x f32> by add init 0.0: f32
    %r = multiply %total: f32, 0.001: f32
    return %r: f32
}
"""
STEP_TAIL = """    %sw = multiply %dw: <6 x 3 x f32>, %lr: f32
    %sb = multiply %db: <3 x f32>, %lr: f32
    %wn = subtract %w: <6 x 3 x f32>, %sw: <6 x 3 x f32>
    %bn = subtract %b: <3 x f32>, %sb: <3 x f32>
    %r = literal (%wn: <6 x 3 x f32>, %bn: <3 x f32>, %l: f32): (<6 x 3 x f32>, <3 x f32>, f32)
    return %r: (<6 x 3 x f32>, <3 x f32>, f32)
}
"""

MODULE = """module "m"
stage raw

func @loss: (<6 x 3 x f32>, <3 x f32>, <_ x 6 x f32>, <_ x 3 x f32>) -> f32 {
'entry(%w: <6 x 3 x f32>, %b: <3 x f32>, %x: <_ x 6 x f32>, %y: <_ x 3 x f32>):
""" + LOSS_BODY + """
[gradient @loss wrt 0, 1 keeping 0]
func @dloss: (<6 x 3 x f32>, <3 x f32>, <_ x 6 x f32>, <_ x 3 x f32>) -> (<6 x 3 x f32>, <3 x f32>, f32)

func @train_step: (<6 x 3 x f32>, <3 x f32>, <_ x 6 x f32>, <_ x 3 x f32>, f32) -> (<6 x 3 x f32>, <3 x f32>, f32) {
'entry(%w: <6 x 3 x f32>, %b: <3 x f32>, %x: <_ x 6 x f32>, %y: <_ x 3 x f32>, %lr: f32):
    %g = apply @dloss(%w: <6 x 3 x f32>, %b: <3 x f32>, %x: <_ x 6 x f32>, %y: <_ x 3 x f32>) -> (<6 x 3 x f32>, <3 x f32>, f32)
    %dw = extract 0 from %g: (<6 x 3 x f32>, <3 x f32>, f32)
    %db = extract 1 from %g: (<6 x 3 x f32>, <3 x f32>, f32)
    %l = extract 2 from %g: (<6 x 3 x f32>, <3 x f32>, f32)
""" + STEP_TAIL

F16_SCALED = "mixed-precision{dtype=f16},loss-scaling{function=train_step}"


def arguments(x_scale: float = 1.0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    x = (x_scale * rng.standard_normal((16, 6))).astype(np.float32)
    y = rng.standard_normal((16, 3)).astype(np.float32)
    return w, b, x, y, np.float32(0.1)


def step(passes: str, target: str = "interp") -> ir.Executable:
    module = ir.parse(MODULE)
    ir.run_passes(module, passes)
    return ir.compile(module, target)


def test_the_step_takes_the_scale_and_reports_whether_it_was_taken() -> None:
    module = ir.parse(MODULE)
    ir.run_passes(module, F16_SCALED)
    fn = module.function("train_step")
    assert fn is not None
    assert fn.type_.arguments[-1] == TensorType((), F32)
    assert fn.type_.result.elements[-1] == TensorType((), BOOL)  # type: ignore[attr-defined]
    twin = module.function("dloss.scaled")
    assert twin is not None and twin.declaration.seedable  # type: ignore[union-attr]
    assert not any(i.opcode == "apply" and i.callee.name == "dloss"  # type: ignore[union-attr]
                   for i in fn.instructions())
    assert str(ir.parse(ir.print_module(module))) == ir.print_module(module)


@pytest.mark.parametrize("target", ["interp", "llvm-cpu"])
@pytest.mark.parametrize("scale", [1.0, 1024.0, 2.0**15])
def test_a_scaled_f16_step_updates_as_the_f32_step_does(target: str, scale: float) -> None:
    """The gradient seeded with S and divided by S is the gradient: the step's parameters
    agree with the f32 step's to f16 rounding, whatever S (a power of two) is."""
    args = arguments()
    want = step("verify", target)["train_step"](*args)
    got = step(F16_SCALED, target)["train_step"](*args, np.float32(scale))
    assert bool(got[-1]) is True
    for g, w in zip(got[:2], want[:2], strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=4e-3)
    np.testing.assert_allclose(got[2], want[2], rtol=2e-3)


def test_small_gradients_vanish_in_f16_unless_scaled() -> None:
    """With a loss of total·10⁻⁴·10⁻⁴ the f16 adjoint falls to 10⁻⁸, below f16's smallest
    number (6·10⁻⁸): unscaled, every gradient is 0. Seeded with 2^15 it stays a normal
    number, and the update matches f32's."""
    module_text = MODULE.replace("    %r = multiply %total: f32, 0.001: f32\n",
                                 "    %r0 = multiply %total: f32, 0.0001: f32\n"
                                 "    %r = multiply %r0: f32, 0.0001: f32\n")
    w, b, x, y, _ = arguments()
    lr = np.float32(1e4)

    def update(passes: str, *scale: np.float32) -> np.ndarray:
        module = ir.parse(module_text)
        ir.run_passes(module, passes)
        return w - ir.compile(module, "interp")["train_step"](w, b, x, y, lr, *scale)[0]

    want = update("verify")
    assert np.abs(want).max() > 1e-3
    assert not update(F16_SCALED, np.float32(1.0)).any()
    np.testing.assert_allclose(update(F16_SCALED, np.float32(2.0**15)), want, rtol=0,
                               atol=0.01 * np.abs(want).max())


@pytest.mark.filterwarnings("ignore:overflow encountered")
@pytest.mark.parametrize("target", ["interp", "llvm-cpu"])
def test_an_overflowing_step_leaves_the_parameters_as_they_were(target: str) -> None:
    w, b, x, y, lr = arguments(x_scale=8.0)
    out = step(F16_SCALED, target)["train_step"](w, b, x, y, lr, np.float32(2.0**15))
    assert bool(out[-1]) is False
    np.testing.assert_array_equal(out[0], w)
    np.testing.assert_array_equal(out[1], b)
    assert np.isfinite(out[2])  # the loss itself is the forward pass's, which is fine


@pytest.mark.parametrize("passes, message", [
    ("loss-scaling{function=missing}", "no function '@missing' with a body"),
    ("loss-scaling{function=loss}", "'@loss' calls no gradient declaration"),
])
def test_steps_it_cannot_scale_are_refused(passes: str, message: str) -> None:
    with pytest.raises(ir.DlvmError, match=message):
        ir.run_passes(ir.parse(MODULE), passes)


def test_a_step_that_does_not_return_its_arguments_is_refused() -> None:
    text = MODULE.replace("%r = literal (%wn: <6 x 3 x f32>, %bn: <3 x f32>, %l: f32)",
                          "%r = literal (%bn: <3 x f32>, %wn: <6 x 3 x f32>, %l: f32)")
    text = text.replace("-> (<6 x 3 x f32>, <3 x f32>, f32) {\n'entry(%w: <6 x 3 x f32>, %b: "
                        "<3 x f32>, %x: <_ x 6 x f32>, %y: <_ x 3 x f32>, %lr: f32)",
                        "-> (<3 x f32>, <6 x 3 x f32>, f32) {\n'entry(%w: <6 x 3 x f32>, %b: "
                        "<3 x f32>, %x: <_ x 6 x f32>, %y: <_ x 3 x f32>, %lr: f32)")
    text = text.replace("    %r = literal (%bn: <3 x f32>, %wn: <6 x 3 x f32>, %l: f32): (<6 x 3 "
                        "x f32>, <3 x f32>, f32)\n    return %r: (<6 x 3 x f32>, <3 x f32>, f32)",
                        "    %r = literal (%bn: <3 x f32>, %wn: <6 x 3 x f32>, %l: f32): (<3 x "
                        "f32>, <6 x 3 x f32>, f32)\n    return %r: (<3 x f32>, <6 x 3 x f32>, f32)")
    text = text.replace("func @train_step: (<6 x 3 x f32>, <3 x f32>, <_ x 6 x f32>, <_ x 3 x "
                        "f32>, f32) -> (<6 x 3 x f32>, <3 x f32>, f32)",
                        "func @train_step: (<6 x 3 x f32>, <3 x f32>, <_ x 6 x f32>, <_ x 3 x "
                        "f32>, f32) -> (<3 x f32>, <6 x 3 x f32>, f32)")
    with pytest.raises(ir.DlvmError, match="must return the new values of its first"):
        ir.run_passes(ir.parse(text), "loss-scaling")


# the same model with its parameters passed to the loss as one tuple (as TEL's `$params`)
PACKED = """module "m"
stage raw

type $p = (<6 x 3 x f32>, <3 x f32>)

func @loss: ($p, <_ x 6 x f32>, <_ x 3 x f32>) -> f32 {
'entry(%p: $p, %x: <_ x 6 x f32>, %y: <_ x 3 x f32>):
    %w = extract 0 from %p: $p
    %b = extract 1 from %p: $p
""" + LOSS_BODY + """
[gradient @loss wrt 0 keeping 0]
func @dloss: ($p, <_ x 6 x f32>, <_ x 3 x f32>) -> ($p, f32)

func @train_step: (<6 x 3 x f32>, <3 x f32>, <_ x 6 x f32>, <_ x 3 x f32>, f32) -> (<6 x 3 x f32>, <3 x f32>, f32) {
'entry(%w: <6 x 3 x f32>, %b: <3 x f32>, %x: <_ x 6 x f32>, %y: <_ x 3 x f32>, %lr: f32):
    %p = literal (%w: <6 x 3 x f32>, %b: <3 x f32>): $p
    %g = apply @dloss(%p: $p, %x: <_ x 6 x f32>, %y: <_ x 3 x f32>) -> ($p, f32)
    %dp = extract 0 from %g: ($p, f32)
    %l = extract 1 from %g: ($p, f32)
    %dw = extract 0 from %dp: $p
    %db = extract 1 from %dp: $p
""" + STEP_TAIL


@pytest.mark.filterwarnings("ignore:overflow encountered")
def test_a_gradient_by_a_tuple_of_parameters_is_divided_element_by_element() -> None:
    """Each tensor of the tuple is divided by S and checked for finiteness."""
    def run(passes: str, x_scale: float, *scale: np.float32) -> tuple[np.ndarray, ...]:
        module = ir.parse(PACKED)
        ir.run_passes(module, passes)
        return ir.compile(module, "interp")["train_step"](*arguments(x_scale), *scale)

    want = run("verify", 1.0)
    got = run(F16_SCALED, 1.0, np.float32(1024.0))
    assert bool(got[-1]) is True
    for g, w in zip(got[:2], want[:2], strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=4e-3)
    w, b, *_ = arguments(8.0)
    overflowed = run(F16_SCALED, 8.0, np.float32(2.0**15))
    assert bool(overflowed[-1]) is False
    np.testing.assert_array_equal(overflowed[0], w)
    np.testing.assert_array_equal(overflowed[1], b)
