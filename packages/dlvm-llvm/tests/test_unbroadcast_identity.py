"""`unbroadcast %x like %y` on llvm-cpu: where `%y` has `%x`'s shape at run time the result is
`%x` (a new reference to its buffer), elsewhere the sum over the broadcast dimensions — in
one compiled function whose shapes are dynamic, equal to the interpreter either way, and
still right when `%x` lives on and a later kernel could write over its buffer."""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import check_same

TEXT = """
func @f: (<_ x _ x f32>, <_ x _ x f32>) -> (<_ x _ x f32>, <_ x _ x f32>) {
'entry(%x: <_ x _ x f32>, %y: <_ x _ x f32>):
    %u = unbroadcast %x: <_ x _ x f32> like %y: <_ x _ x f32>
    %later = exp %x: <_ x _ x f32>
    %v = multiply %u: <_ x _ x f32>, 2.0: f32
    return (%v: <_ x _ x f32>, %later: <_ x _ x f32>): (<_ x _ x f32>, <_ x _ x f32>)
}

func @g: (<_ x 3 x f32>, <_ x 3 x f32>) -> <_ x 3 x f32> {
'entry(%x: <_ x 3 x f32>, %y: <_ x 3 x f32>):
    %u = unbroadcast %x: <_ x 3 x f32> like %y: <_ x 3 x f32>
    return %u: <_ x 3 x f32>
}
"""


@pytest.mark.parametrize("like", [(4, 5), (1, 5), (4, 1), (1, 1)])
@pytest.mark.parametrize("opt_level", [0, 3])
def test_the_identity_and_the_sum_agree_with_the_interpreter(like: tuple[int, int],
                                                             opt_level: int) -> None:
    module = ir.parse(TEXT)
    oracle = ir.compile(module, "interp")
    cpu = ir.compile(module, "llvm-cpu", opt_level=opt_level)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    y = np.zeros(like, np.float32)
    fn = module.function("f")
    assert fn is not None
    check_same(fn, [x, y], cpu, oracle, errors=False)
    np.testing.assert_array_equal(cpu.call("f", x, y)[0], oracle.call("f", x, y)[0])
    if like == (4, 5):  # the identity: x's values exactly, and x left as it was
        np.testing.assert_array_equal(cpu.call("f", x, y)[0], 2 * x)


def test_a_mismatch_is_still_reported() -> None:
    cpu = ir.compile(ir.parse(TEXT), "llvm-cpu")
    x = np.ones((4, 3), np.float32)
    with pytest.raises(ir.ExecutionError, match="unbroadcast"):
        cpu.call("g", x, np.ones((2, 3), np.float32))
    np.testing.assert_array_equal(cpu.call("g", x, np.ones((4, 3), np.float32))[0], x)
