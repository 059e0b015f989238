"""An element-wise kernel writes an output over a dying input's buffer only where no
iteration can tell, so its results are the interpreter's at every LLVM `opt_level`.

A loop nest reads the input and writes the output through two `noalias` pointers. Sharing
their buffer is invisible only when each element of the output is written at a single
iteration — the one that reads the same element of the input, and stores what it computed
from it — and nothing reads the input after that iteration. So an output takes no input's
buffer when it is broadcast over the iteration space (`rsqrt` of a row sum beside the rows
it scales: each element is written once per element of the row, and the next iteration
would read the overwritten sum), when a later part of the kernel reads the input (after a
reduction of its own), when the kernel passes the input straight through as another output,
or when the input is bound to two parameters. The same-shaped case still writes in place.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import check_same

OPT_LEVELS = (0, 1, 3)


def normalize(shape: str, axis: int, combinator: str, init: str, op: str) -> str:
    """`@f(x)`: `a = op(padShape(reduce(x·x along axis)))` and `y = x·a`, both returned —
    what fuse-elementwise makes into a kernel whose output `a` is broadcast along `axis`."""
    dims = shape.split(" x ")
    reduced = " x ".join(d for k, d in enumerate(dims) if k != axis)
    kept = " x ".join("1" if k == axis else d for k, d in enumerate(dims))
    t, r, p = f"<{shape} x f32>", f"<{reduced} x f32>", f"<{kept} x f32>"
    return f"""
func @f: ({t}) -> ({t}, {p}) {{
'entry(%x: {t}):
    %m = multiply %x: {t}, %x: {t}
    %s = reduce %m: {t} by {combinator} init {init}: f32 along {axis}
    %p = padShape %s: {r} at {axis}
    %a = {op} %p: {p}
    %y = multiply %x: {t}, %a: {p}
    %t = literal (%y: {t}, %a: {p}): ({t}, {p})
    return %t: ({t}, {p})
}}
"""


def agree(text: str, fn: str, args: list[np.ndarray], **options: object) -> None:
    module = ir.parse(text)
    ir.verify(module)
    oracle = ir.compile(module, "interp")
    native = ir.compile(module, "llvm-cpu", cache=False, **options)
    function = module.function(fn)
    assert function is not None
    check_same(function, args, native, oracle)


def positive(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.5, 2.0, shape).astype(np.float32)


@pytest.mark.parametrize("opt_level", OPT_LEVELS)
@pytest.mark.parametrize(("combinator", "init", "op"), [
    ("add", "0.0", "rsqrt"), ("add", "0.0", "sqrt"), ("max", "-inf", "exp"),
    ("min", "inf", "negate"), ("multiply", "1.0", "log")])
def test_an_output_broadcast_over_the_kernel_takes_no_input_buffer(
        combinator: str, init: str, op: str, opt_level: int) -> None:
    """The reported case (`rsqrt` of a sum of squares, and the rows scaled by it) and other
    reductions and functions of it: after fusion, `a` has size 1 along the reduced axis,
    where the kernel iterates over the rows, and `%p`, which it would overwrite, dies there."""
    agree(normalize("2 x 3 x 4", 2, combinator, init, op), "f", [positive(2, 3, 4)],
          opt_level=opt_level)


@pytest.mark.parametrize("opt_level", OPT_LEVELS)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_broadcast_along_any_axis(axis: int, opt_level: int) -> None:
    """The broadcast dimension is the outermost (the one split over threads), a middle
    one, or the innermost."""
    agree(normalize("3 x 5 x 4", axis, "add", "0.0", "rsqrt"), "f", [positive(3, 5, 4)],
          opt_level=opt_level)


@pytest.mark.parametrize("specialize", [True, False])
def test_a_dynamic_shape_broadcast_at_run_time(specialize: bool) -> None:
    """`_` dimensions: static in a build for the argument's shape, else sizes that only
    the run says are broadcast."""
    agree(normalize("_ x 3 x 4", 2, "add", "0.0", "rsqrt"), "f", [positive(2, 3, 4)],
          opt_level=0, specialize=specialize)


def test_a_kernel_large_enough_to_split_over_threads() -> None:
    """Each chunk of the outermost dimension writes its own rows of `y` and elements of `a`."""
    agree(normalize("64 x 64 x 64", 2, "add", "0.0", "rsqrt"), "f", [positive(64, 64, 64)],
          opt_level=0, threads=4)


KERNELS = """
!kernel
func @k_after_reduction: (<2 x 3 x f32>, <2 x 1 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>) {
'entry(%p: <2 x 3 x f32>, %b: <2 x 1 x f32>):
    %a = exp %p: <2 x 3 x f32>
    %u = unbroadcast %a: <2 x 3 x f32> like %b: <2 x 1 x f32>
    %y = multiply %p: <2 x 3 x f32>, %u: <2 x 1 x f32>
    return (%a: <2 x 3 x f32>, %y: <2 x 3 x f32>): (<2 x 3 x f32>, <2 x 3 x f32>)
}
func @after_reduction: (<2 x 3 x f32>, <2 x 1 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>) {
'entry(%x: <2 x 3 x f32>, %b: <2 x 1 x f32>):
    %p = negate %x: <2 x 3 x f32>
    %t = apply @k_after_reduction(%p: <2 x 3 x f32>, %b: <2 x 1 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>)
    return %t: (<2 x 3 x f32>, <2 x 3 x f32>)
}

!kernel
func @k_pass_through: (<2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>) {
'entry(%p: <2 x 3 x f32>):
    %a = exp %p: <2 x 3 x f32>
    return (%p: <2 x 3 x f32>, %a: <2 x 3 x f32>): (<2 x 3 x f32>, <2 x 3 x f32>)
}
func @pass_through: (<2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>) {
'entry(%x: <2 x 3 x f32>):
    %p = negate %x: <2 x 3 x f32>
    %t = apply @k_pass_through(%p: <2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>)
    return %t: (<2 x 3 x f32>, <2 x 3 x f32>)
}

!kernel
func @k_twice: (<2 x 3 x f32>, <2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>) {
'entry(%p: <2 x 3 x f32>, %q: <2 x 3 x f32>):
    %a = exp %p: <2 x 3 x f32>
    %c = multiply %q: <2 x 3 x f32>, 2.0: f32
    return (%a: <2 x 3 x f32>, %c: <2 x 3 x f32>): (<2 x 3 x f32>, <2 x 3 x f32>)
}
func @twice: (<2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>) {
'entry(%x: <2 x 3 x f32>):
    %p = negate %x: <2 x 3 x f32>
    %t = apply @k_twice(%p: <2 x 3 x f32>, %p: <2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>)
    return %t: (<2 x 3 x f32>, <2 x 3 x f32>)
}

!kernel
func @k_unrelated: (<2 x 3 x f32>, <2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>) {
'entry(%p: <2 x 3 x f32>, %w: <2 x 3 x f32>):
    %a = exp %w: <2 x 3 x f32>
    %c = multiply %p: <2 x 3 x f32>, 2.0: f32
    return (%a: <2 x 3 x f32>, %c: <2 x 3 x f32>): (<2 x 3 x f32>, <2 x 3 x f32>)
}
func @unrelated: (<2 x 3 x f32>, <2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>) {
'entry(%x: <2 x 3 x f32>, %w: <2 x 3 x f32>):
    %p = negate %x: <2 x 3 x f32>
    %t = apply @k_unrelated(%p: <2 x 3 x f32>, %w: <2 x 3 x f32>) -> (<2 x 3 x f32>, <2 x 3 x f32>)
    return %t: (<2 x 3 x f32>, <2 x 3 x f32>)
}
"""


@pytest.mark.parametrize("opt_level", [0, 3])
@pytest.mark.parametrize(("fn", "args"), [
    pytest.param("after_reduction", [positive(2, 3), np.ones((2, 1), np.float32)],
                 id="after_reduction"),
    pytest.param("pass_through", [positive(2, 3)], id="pass_through"),
    pytest.param("twice", [positive(2, 3)], id="twice"),
    pytest.param("unrelated", [positive(2, 3), positive(2, 3, seed=1)], id="unrelated"),
])
def test_an_input_read_after_the_store_keeps_its_buffer(fn: str, args: list[np.ndarray],
                                                         opt_level: int) -> None:
    """Kernels as written (no pipeline): a dying input of an output's shape that the
    kernel's second part reads after its reduction, passes through as an output, or binds
    to two parameters, or that the output is not computed from."""
    agree(KERNELS, fn, args, passes="", opt_level=opt_level)


CHAIN = """
func @chain: (<2 x 3 x f32>) -> <2 x 3 x f32> {
'entry(%x: <2 x 3 x f32>):
    %a = negate %x: <2 x 3 x f32>
    %b = exp %a: <2 x 3 x f32>
    return %b: <2 x 3 x f32>
}
"""


def test_a_same_shaped_output_still_writes_over_its_dying_input() -> None:
    """`exp` of a dying tensor of its own shape asks at run time whether it holds the only
    reference to the buffer, to write over it, and computes what the interpreter does."""
    module = ir.parse(CHAIN)
    llvm = ir.registry().make_target("llvm-cpu", passes="", opt_level=0).emit(module, "llvm")
    assert "call i1 @dlvm.rt.unique(" in llvm
    agree(CHAIN, "chain", [positive(2, 3)], passes="", opt_level=0)
