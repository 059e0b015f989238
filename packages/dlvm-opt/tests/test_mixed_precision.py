"""`mixed-precision`: a softmax classifier's loss and gradient computed in bf16 (or f16) stay
within a few of the lower type's roundings of the f32 ones, on the interpreter and llvm-cpu;
the parameters' gradients arrive in f32; a module without gradient declarations is left as
it is."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir

MODULE = """module "m"
stage raw

func @loss: (<6 x 3 x f32>, <_ x 6 x f32>, <_ x 3 x f32>) -> f32 {
'entry(%w: <6 x 3 x f32>, %x: <_ x 6 x f32>, %y: <_ x 3 x f32>):
    %s = dot %x: <_ x 6 x f32>, %w: <6 x 3 x f32>
    %m = reduce %s: <_ x 3 x f32> by max init -inf: f32 along 1
    %mp = padShape %m: <_ x f32> at 1
    %z = subtract %s: <_ x 3 x f32>, %mp: <_ x 1 x f32>
    %e = exp %z: <_ x 3 x f32>
    %se = reduce %e: <_ x 3 x f32> by add init 0.0: f32 along 1
    %lse = log %se: <_ x f32>
    %lp = padShape %lse: <_ x f32> at 1
    %logp = subtract %z: <_ x 3 x f32>, %lp: <_ x 1 x f32>
    %t = multiply %logp: <_ x 3 x f32>, %y: <_ x 3 x f32>
    %total = reduce %t: <_ x 3 x f32> by add init 0.0: f32
    %r = negate %total: f32
    return %r: f32
}

[gradient @loss wrt 0 keeping 0]
func @dloss: (<6 x 3 x f32>, <_ x 6 x f32>, <_ x 3 x f32>) -> (<6 x 3 x f32>, f32)
"""


def gradient(target: str, passes: str) -> tuple[np.ndarray, ...]:
    module = ir.parse(MODULE)
    ir.run_passes(module, passes)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 3)).astype(np.float32)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rng.integers(0, 3, 8)]
    return ir.compile(module, target)["dloss"](w, x, y)


@pytest.mark.parametrize("target", ["interp", "llvm-cpu"])
@pytest.mark.parametrize("dtype, ulp", [("bf16", 2.0**-8), ("f16", 2.0**-11)])
def test_the_gradient_in_a_lower_precision_stays_near_the_f32_one(target: str, dtype: str,
                                                                   ulp: float) -> None:
    exact_g, exact_loss = gradient(target, "differentiation")
    low_g, low_loss = gradient(target, f"mixed-precision{{dtype={dtype}}},differentiation")
    assert low_g.dtype == np.float32 and np.asarray(low_loss).dtype == np.float32
    scale = np.abs(exact_g).max()
    np.testing.assert_allclose(low_g, exact_g, atol=64 * ulp * scale)
    np.testing.assert_allclose(low_loss, exact_loss, rtol=64 * ulp)
    assert not np.array_equal(low_g, exact_g)  # it did compute in the lower precision


def test_a_module_without_gradient_declarations_is_left_as_it_is() -> None:
    text = MODULE.split("[gradient")[0]
    module = ir.parse(text)
    (record,) = ir.run_passes(module, "mixed-precision")
    assert not record.changed
    assert ir.print_module(module) == ir.print_module(ir.parse(text))


def test_only_bf16_and_f16_are_lower_precisions() -> None:
    with pytest.raises(ir.DlvmError, match="dtype must be 'bf16' or 'f16', found 'f64'"):
        ir.run_passes(ir.parse(MODULE), "mixed-precision{dtype=f64}")
