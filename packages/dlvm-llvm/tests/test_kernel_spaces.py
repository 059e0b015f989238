"""A `!kernel` whose instructions have no common iteration space computes what the
interpreter computes, without reading or writing outside its buffers.

A kernel becomes one loop nest over the broadcast of the shapes it walks. `fuse-elementwise`
joins instructions through a shared operand, so two of a kernel's instructions may each
broadcast with that operand and not together: the gradient of a convolution swaps the channel
dimensions of a kernel (static shape) and of a batch (`_`) by `select`s of one one-hot mask
(`<C x 1 x C x 1 x 1 x bool>`), which land in one kernel. A loop nest over the broadcast of
`<C x C x C x 3 x 3>` and `<C x N x C x 1 x 1>` walked N's dimension C times (NaN in a
ResNet's weight gradients, heap corruption). Such a kernel is called as a function (a loop
per instruction) where the types show it, and where only the sizes can, chooses between the
two at run time; shapes that do broadcast keep the one loop nest. The `nvptx` target's
kernels (one per output shape) agree too.
"""

from __future__ import annotations

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ir.testing import check_same


def swaps(c: int, n: str, k: int = 3) -> str:
    """`@f(a, d, m)` calls `@k`: both selects of the convolution gradient's channel swap by
    the mask `m`, one over a `<1 x c x c x k x k>` kernel, one over a `<1 x n x c x 1 x 1>`
    batch whose swap is reduced (n `_` or a size)."""
    a, d = f"<1 x {c} x {c} x {k} x {k} x f32>", f"<1 x {n} x {c} x 1 x 1 x f32>"
    m = f"<{c} x 1 x {c} x 1 x 1 x bool>"
    s1, s2 = f"<{c} x {c} x {c} x {k} x {k} x f32>", f"<{c} x {n} x {c} x 1 x 1 x f32>"
    r = f"({s1}, <{c} x {n} x 1 x 1 x f32>)"
    return f"""
!kernel
func @k: ({a}, {d}, {m}) -> {r} {{
'entry(%a: {a}, %d: {d}, %m: {m}):
    %s1 = select %a: {a}, 0.0: f32 by %m: {m}
    %s2 = select %d: {d}, 0.0: f32 by %m: {m}
    %r2 = reduce %s2: {s2} by add init 0.0: f32 along 2
    return (%s1: {s1}, %r2: <{c} x {n} x 1 x 1 x f32>): {r}
}}

func @f: ({a}, {d}, {m}) -> {r} {{
'entry(%a: {a}, %d: {d}, %m: {m}):
    %r = apply @k(%a: {a}, %d: {d}, %m: {m}) -> {r}
    return %r: {r}
}}
"""


def swap_args(c: int, n: int, k: int = 3) -> list[np.ndarray]:
    rng = np.random.default_rng(c * 100 + n)
    return [rng.standard_normal((1, c, c, k, k)).astype(np.float32),
            rng.standard_normal((1, n, c, 1, 1)).astype(np.float32),
            np.arange(c).reshape(c, 1, 1, 1, 1) == np.arange(c).reshape(1, 1, c, 1, 1)]


# two element-wise outputs that share `%m` and nothing else: `<4 x 5>` and `<3 x 5>`
SIBLINGS = """
!kernel
func @k: (<{x} x f32>, <{y} x f32>, <1 x 5 x f32>) -> (<{x} x f32>, <{y} x f32>) {{
'entry(%x: <{x} x f32>, %y: <{y} x f32>, %m: <1 x 5 x f32>):
    %a = add %x: <{x} x f32>, %m: <1 x 5 x f32>
    %b = multiply %y: <{y} x f32>, %m: <1 x 5 x f32>
    %c = tanh %b: <{y} x f32>
    return (%a: <{x} x f32>, %c: <{y} x f32>): (<{x} x f32>, <{y} x f32>)
}}

func @f: (<{x} x f32>, <{y} x f32>, <1 x 5 x f32>) -> (<{x} x f32>, <{y} x f32>) {{
'entry(%x: <{x} x f32>, %y: <{y} x f32>, %m: <1 x 5 x f32>):
    %r = apply @k(%x: <{x} x f32>, %y: <{y} x f32>, %m: <1 x 5 x f32>) -> (<{x} x f32>, <{y} x f32>)
    return %r: (<{x} x f32>, <{y} x f32>)
}}
"""

# the second part of a kernel (after the reduction it uses) has no common space
AFTER_REDUCTION = """
!kernel
func @k: (<{x} x f32>, <{y} x f32>) -> (<{x} x f32>, <{y} x f32>) {{
'entry(%x: <{x} x f32>, %y: <{y} x f32>):
    %s = reduce %x: <{x} x f32> by add init 0.0: f32
    %a = multiply %x: <{x} x f32>, %s: f32
    %b = subtract %y: <{y} x f32>, %s: f32
    return (%a: <{x} x f32>, %b: <{y} x f32>): (<{x} x f32>, <{y} x f32>)
}}

func @f: (<{x} x f32>, <{y} x f32>) -> (<{x} x f32>, <{y} x f32>) {{
'entry(%x: <{x} x f32>, %y: <{y} x f32>):
    %r = apply @k(%x: <{x} x f32>, %y: <{y} x f32>) -> (<{x} x f32>, <{y} x f32>)
    return %r: (<{x} x f32>, <{y} x f32>)
}}
"""

# what the pipeline makes of the swaps when nothing is marked `!kernel`: `equal` of two
# index vectors joins both selects (and the reduction) into one kernel
UNFUSED = """
func @f: (<{c} x 1 x 1 x 1 x 1 x i64>, <1 x 1 x {c} x 1 x 1 x i64>, <1 x {c} x {c} x 3 x 3 x f32>, <1 x {n} x {c} x 1 x 1 x f32>) -> (<{c} x {c} x {c} x 3 x 3 x f32>, <{c} x {n} x 1 x 1 x f32>) {{
'entry(%i: <{c} x 1 x 1 x 1 x 1 x i64>, %j: <1 x 1 x {c} x 1 x 1 x i64>, %a: <1 x {c} x {c} x 3 x 3 x f32>, %d: <1 x {n} x {c} x 1 x 1 x f32>):
    %m = equal %i: <{c} x 1 x 1 x 1 x 1 x i64>, %j: <1 x 1 x {c} x 1 x 1 x i64>
    %s1 = select %a: <1 x {c} x {c} x 3 x 3 x f32>, 0.0: f32 by %m: <{c} x 1 x {c} x 1 x 1 x bool>
    %s2 = select %d: <1 x {n} x {c} x 1 x 1 x f32>, 0.0: f32 by %m: <{c} x 1 x {c} x 1 x 1 x bool>
    %r2 = reduce %s2: <{c} x {n} x {c} x 1 x 1 x f32> by add init 0.0: f32 along 2
    %t = literal (%s1: <{c} x {c} x {c} x 3 x 3 x f32>, %r2: <{c} x {n} x 1 x 1 x f32>): (<{c} x {c} x {c} x 3 x 3 x f32>, <{c} x {n} x 1 x 1 x f32>)
    return %t: (<{c} x {c} x {c} x 3 x 3 x f32>, <{c} x {n} x 1 x 1 x f32>)
}}
"""

# the last stage of a ResNet on a 1×1 input: two 3×3, pad 1 convolutions; the gradient of
# the first kernel swaps both the second kernel's and the batch's channels by one mask, which
# constant folding leaves an `equal` at 64 channels, so that both swaps join its kernel
CONVS = """
func @loss: (<{n} x {c} x 1 x 1 x f32>, <{c} x {c} x 3 x 3 x f32>, <{c} x {c} x 3 x 3 x f32>) -> f32 {{
'entry(%x: <{n} x {c} x 1 x 1 x f32>, %k1: <{c} x {c} x 3 x 3 x f32>, %k2: <{c} x {c} x 3 x 3 x f32>):
    %h = convolve %x: <{n} x {c} x 1 x 1 x f32> kernel %k1: <{c} x {c} x 3 x 3 x f32> strides 1, 1 padding (1, 1), (1, 1)
    %t = tanh %h: <{n} x {c} x 1 x 1 x f32>
    %y = convolve %t: <{n} x {c} x 1 x 1 x f32> kernel %k2: <{c} x {c} x 3 x 3 x f32> strides 1, 1 padding (1, 1), (1, 1)
    %q = multiply %y: <{n} x {c} x 1 x 1 x f32>, %y: <{n} x {c} x 1 x 1 x f32>
    %l = reduce %q: <{n} x {c} x 1 x 1 x f32> by add init 0.0: f32
    return %l: f32
}}

[gradient @loss wrt 1, 2]
func @dloss: (<{n} x {c} x 1 x 1 x f32>, <{c} x {c} x 3 x 3 x f32>, <{c} x {c} x 3 x 3 x f32>) -> (<{c} x {c} x 3 x 3 x f32>, <{c} x {c} x 3 x 3 x f32>)
"""


def agree(text: str, fn: str, args: list[np.ndarray], **options: object) -> None:
    module = ir.parse(text)
    ir.verify(module)
    oracle = ir.compile(module, "interp")
    native = ir.compile(module, "llvm-cpu", cache=False, **options)
    function = oracle.module.function(fn)
    assert function is not None
    check_same(function, args, native, oracle)


@pytest.mark.parametrize("specialize", [True, False], ids=["sizes", "dynamic"])
@pytest.mark.parametrize("c,n,k", [(2, 3, 3), (4, 3, 3), (64, 3, 3), (4, 1, 3), (4, 4, 3),
                                   (4, 6, 1), (3, 2, 2)])
def test_channel_swaps_of_a_kernel_and_a_batch_in_one_kernel(c: int, n: int, k: int,
                                                             specialize: bool) -> None:
    """The ResNet gradient's kernel: the batch `n` differs from the channels `c` (no common
    space: called), is 1 or `c` (the one loop nest), in static types and in `_` ones."""
    args = swap_args(c, n, k)
    agree(swaps(c, str(n), k), "f", args, specialize=specialize, threads=1)
    agree(swaps(c, "_", k), "f", args, specialize=specialize)


@pytest.mark.parametrize("opt_level", [0, 1, 3])
def test_channel_swaps_at_every_opt_level(opt_level: int) -> None:
    """The same, large enough for the thread pool, at each LLVM optimization level."""
    c, n = 64, 5
    for specialize in (True, False):
        agree(swaps(c, "_"), "f", swap_args(c, n), opt_level=opt_level, specialize=specialize)


@pytest.mark.parametrize("x,y,dynamic", [("4 x 5", "3 x 5", False), ("4 x 5", "3 x 5", True),
                                         ("4 x 5", "4 x 5", True), ("4 x 5", "1 x 5", True),
                                         ("2 x 5", "7 x 5", True)])
def test_element_wise_outputs_of_different_shapes(x: str, y: str, dynamic: bool) -> None:
    """Two element-wise outputs joined only by a shared operand, of shapes that do or do not
    broadcast together (`_` rows: decided at run time)."""
    rng = np.random.default_rng(1)
    shape = [tuple(int(s) for s in t.split(" x ")) for t in (x, y)]
    args = [rng.standard_normal(shape[0]).astype(np.float32),
            rng.standard_normal(shape[1]).astype(np.float32),
            rng.standard_normal((1, 5)).astype(np.float32)]
    tx, ty = ("_ x 5", "_ x 5") if dynamic else (x, y)
    for specialize in (True, False):
        agree(SIBLINGS.format(x=tx, y=ty), "f", args, specialize=specialize)


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_part_after_a_reduction_without_a_common_space(dynamic: bool) -> None:
    """The part of a kernel that uses its own reduction is a loop nest of its own, checked
    as such."""
    rng = np.random.default_rng(2)
    args = [rng.standard_normal((4, 5)).astype(np.float32),
            rng.standard_normal((3, 5)).astype(np.float32)]
    tx, ty = ("_ x 5", "_ x 5") if dynamic else ("4 x 5", "3 x 5")
    for specialize in (True, False):
        agree(AFTER_REDUCTION.format(x=tx, y=ty), "f", args, specialize=specialize)


@pytest.mark.parametrize("n", ["3", "_"])
def test_fused_by_the_pipeline(n: str) -> None:
    """Unmarked code that `fuse-elementwise` (O3) makes into such a kernel."""
    c = 8
    a, d, _ = swap_args(c, 3)
    i = np.arange(c).reshape(c, 1, 1, 1, 1)
    j = np.arange(c).reshape(1, 1, c, 1, 1)
    for specialize in (True, False):
        agree(UNFUSED.format(c=c, n=n), "f", [i, j, a, d], specialize=specialize)


@pytest.mark.parametrize("n", ["3", "_"])
def test_gradient_of_two_convolutions_on_a_1x1_input(n: str) -> None:
    """The weight gradients of a ResNet's last stage (3×3 convolutions, pad 1, input 1×1)."""
    c = 64
    rng = np.random.default_rng(3)
    args = [rng.standard_normal((3, c, 1, 1)).astype(np.float32),
            (rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32),
            (rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32)]
    for specialize in (True, False):
        agree(CONVS.format(n=n, c=c), "dloss", args, specialize=specialize, threads=1)


def test_the_swaps_on_nvptx_emulated_on_the_host() -> None:
    """The `nvptx` target (one GPU kernel per output shape) on the same kernel and gradient."""
    if not ir.registry().has("target", "nvptx"):
        pytest.skip("dlvm-llvm-gpu is not installed")
    c = 64
    rng = np.random.default_rng(3)
    grad_args = [rng.standard_normal((3, c, 1, 1)).astype(np.float32),
                 (rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32),
                 (rng.standard_normal((c, c, 3, 3)) * 0.05).astype(np.float32)]
    for text, fn, args in ((swaps(4, "_"), "f", swap_args(4, 3)),
                           (CONVS.format(n="_", c=c), "dloss", grad_args)):
        module = ir.parse(text)
        oracle = ir.compile(module, "interp")
        gpu = ir.compile(module, "nvptx", device="host")
        function = oracle.module.function(fn)
        assert function is not None
        check_same(function, args, gpu, oracle)
