"""Adjoint and tangent rules of the tensor instructions, against finite differences.

Each case is a one-instruction function `@f` (a few for `dot` of a matrix and a vector);
every argument is differentiated, with a random seed (gradients) or random tangents.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest

import dlvm.ir as ir
from dlvm.ad.rules import ADJOINTS, TANGENTS
from dlvm.ad.testing import check_gradient, check_tangent
from dlvm.ir.testing import compile_for_test

Shape = tuple[int, ...]
Sampler = Callable[[np.random.Generator, Shape], np.ndarray]
MODES = ["gradient", "tangent"]


def normal(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    return rng.standard_normal(shape)


def distinct(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Entries at least 0.05 apart, so that max and min have no ties within reach."""
    n = int(np.prod(shape))
    return (rng.permutation(n) * 0.1 - n * 0.05 + rng.uniform(0, 0.05, n)).reshape(shape)


def with_zeros(rng: np.random.Generator, shape: Shape) -> np.ndarray:
    """Rows with no zero, one zero and two zeros (the product rule at zeros)."""
    x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
    x[1, 0] = 0.0
    x[2, 1] = x[2, 3] = 0.0
    return x


@dataclass
class Case:
    """`@f(params) { lines; return %r }`; params are (name, type, actual shape)."""

    id: str
    params: list[tuple[str, str, Shape]]
    lines: list[str]
    out: str
    sampler: Sampler = normal
    args: list[np.ndarray] | None = field(default=None)


def module(case: Case, mode: str) -> str:
    types = [t for _, t, _ in case.params]
    args = ", ".join(f"%{n}: {t}" for n, t, _ in case.params)
    body = "\n".join(f"    {line}" for line in case.lines)
    if mode == "gradient":
        decl = (f"[gradient @f seedable]\n"
                f"func @df: ({', '.join([*types, case.out])}) -> ({', '.join(types)})")
    else:
        decl = f"[tangent @f]\nfunc @tf: ({', '.join(types + types)}) -> ({case.out})"
    return (f"func @f: ({', '.join(types)}) -> {case.out} {{\n'entry({args}):\n{body}\n"
            f"    return %r: {case.out}\n}}\n\n{decl}\n")


def run(case: Case, mode: str) -> None:
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    args = case.args or [case.sampler(rng, shape) for _, _, shape in case.params]
    text = module(case, mode)
    if mode == "gradient":
        check_gradient(text, "f", "df", args, rtol=1e-5, atol=1e-6)
    else:
        tangents = [rng.standard_normal(np.shape(a)) for a in args]
        check_tangent(text, "f", "tf", args, tangents, rtol=1e-5, atol=1e-6)


def unary(id: str, xt: str, shape: Shape, line: str, out: str,
          sampler: Sampler = normal) -> Case:
    """A case of one instruction of `%x: xt`; `{x}` in `line` is the typed operand."""
    return Case(id, [("x", xt, shape)], [f"%r = {line.format(x=f'%x: {xt}')}"], out, sampler)


def binary(id: str, xt: str, xs: Shape, yt: str, ys: Shape, line: str, out: str,
           sampler: Sampler = normal) -> Case:
    return Case(id, [("x", xt, xs), ("y", yt, ys)],
                [f"%r = {line.format(x=f'%x: {xt}', y=f'%y: {yt}')}"], out, sampler)


# ------------------------------------------------------------------ reduce, scan

M34, D34 = "<3 x 4 x f64>", "<_ x 4 x f64>"

REDUCE = [
    unary("add-along0", M34, (3, 4), "reduce {x} by add init 0: f64 along 0", "<4 x f64>"),
    unary("add-along02", "<2 x 3 x 4 x f64>", (2, 3, 4),
          "reduce {x} by add init 0: f64 along 0, 2", "<3 x f64>"),
    unary("add-all", M34, (3, 4), "reduce {x} by add init 0: f64", "f64"),
    unary("add-scalar", "f64", (), "reduce {x} by add init 1.5: f64", "f64"),
    unary("add-dynamic", D34, (3, 4), "reduce {x} by add init 0: f64 along 0", "<4 x f64>"),
    unary("add-dynamic2", "<_ x _ x f64>", (3, 4), "reduce {x} by add init 0: f64 along 1",
          "<_ x f64>"),
    unary("add-dynamic-all", "<_ x _ x f64>", (2, 3), "reduce {x} by add init 0: f64", "f64"),
    binary("add-init", M34, (3, 4), "f64", (), "reduce {x} by add init {y} along 1",
           "<3 x f64>"),
    unary("multiply-along1", M34, (3, 4), "reduce {x} by multiply init 1: f64 along 1",
          "<3 x f64>"),
    unary("multiply-all", M34, (3, 4), "reduce {x} by multiply init 1: f64", "f64"),
    unary("multiply-zeros", "<4 x 4 x f64>", (4, 4),
          "reduce {x} by multiply init 1: f64 along 1", "<4 x f64>", with_zeros),
    unary("multiply-zeros-along0", "<4 x 4 x f64>", (4, 4),
          "reduce {x} by multiply init 1: f64 along 0", "<4 x f64>", with_zeros),
    unary("multiply-dynamic", D34, (3, 4), "reduce {x} by multiply init 2: f64 along 0",
          "<4 x f64>"),
    binary("multiply-init", M34, (3, 4), "f64", (), "reduce {x} by multiply init {y} along 0",
           "<4 x f64>"),
    unary("max-along0", M34, (3, 4), "reduce {x} by max init -inf: f64 along 0", "<4 x f64>",
          distinct),
    unary("max-all", M34, (3, 4), "reduce {x} by max init -inf: f64", "f64", distinct),
    unary("min-along1", M34, (3, 4), "reduce {x} by min init inf: f64 along 1", "<3 x f64>",
          distinct),
    unary("min-all-dynamic", "<_ x _ x f64>", (3, 4), "reduce {x} by min init inf: f64", "f64",
          distinct),
    unary("max-builtin", D34, (3, 4), 'reduce {x} by builtin "max" init -inf: f64 along 1',
          "<_ x f64>", distinct),
    Case("max-init", [("x", M34, (3, 4)), ("y", "f64", ())],
         ["%r = reduce %x: <3 x 4 x f64> by max init %y: f64 along 1"], "<3 x f64>",
         args=[np.array([[0.1, 0.5, -0.2, 0.3], [1.2, 0.9, 1.5, 1.1], [-1.0, -0.4, -0.7, -0.9]]),
               np.array(0.7)]),
    Case("min-init", [("x", M34, (3, 4)), ("y", "f64", ())],
         ["%r = reduce %x: <3 x 4 x f64> by min init %y: f64 along 0"], "<4 x f64>",
         args=[np.array([[0.1, 0.5, -0.2, 0.3], [1.2, 0.9, 1.5, 1.1], [-1.0, -0.4, -0.7, -0.9]]),
               np.array(0.2)]),
    unary("scan-along0", M34, (3, 4), "scan {x} by add along 0", M34),
    unary("scan-along10", "<2 x 3 x 4 x f64>", (2, 3, 4), "scan {x} by add along 1, 0",
          "<2 x 3 x 4 x f64>"),
    unary("scan-dynamic", "<_ x _ x f64>", (3, 5), "scan {x} by add along 1", "<_ x _ x f64>"),
]

# ------------------------------------------------------------------ dot

DOT = [
    binary("matrix", "<2 x 3 x f64>", (2, 3), "<3 x 4 x f64>", (3, 4), "dot {x}, {y}",
           "<2 x 4 x f64>"),
    binary("matrix-dynamic", "<_ x _ x f64>", (2, 3), "<_ x _ x f64>", (3, 4), "dot {x}, {y}",
           "<_ x _ x f64>"),
    binary("batched", "<2 x 2 x 3 x f64>", (2, 2, 3), "<2 x 3 x 4 x f64>", (2, 3, 4),
           "dot {x}, {y}", "<2 x 2 x 4 x f64>"),
    binary("batched2", "<2 x 1 x 3 x 2 x f64>", (2, 1, 3, 2), "<2 x 1 x 2 x 2 x f64>",
           (2, 1, 2, 2), "dot {x}, {y}", "<2 x 1 x 3 x 2 x f64>"),
    binary("batched-dynamic", "<_ x 2 x _ x f64>", (3, 2, 3), "<_ x _ x 4 x f64>", (3, 3, 4),
           "dot {x}, {y}", "<_ x 2 x 4 x f64>"),
    binary("vectors", "<5 x f64>", (5,), "<5 x f64>", (5,), "dot {x}, {y}", "f64"),
    binary("vectors-dynamic", "<_ x f64>", (5,), "<5 x f64>", (5,), "dot {x}, {y}", "f64"),
    Case("matrix-vector", [("m", "<2 x 3 x f64>", (2, 3)), ("v", "<3 x f64>", (3,))],
         ["%c = padShape %v: <3 x f64> at 1",
          "%p = dot %m: <2 x 3 x f64>, %c: <3 x 1 x f64>",
          "%r = squeezeShape %p: <2 x 1 x f64> at 1"], "<2 x f64>"),
    Case("vector-matrix", [("v", "<3 x f64>", (3,)), ("m", "<3 x 4 x f64>", (3, 4))],
         ["%c = padShape %v: <3 x f64> at 0",
          "%p = dot %c: <1 x 3 x f64>, %m: <3 x 4 x f64>",
          "%r = squeezeShape %p: <1 x 4 x f64> at 0"], "<4 x f64>"),
    Case("same-operand", [("m", "<3 x 3 x f64>", (3, 3))],
         ["%r = dot %m: <3 x 3 x f64>, %m: <3 x 3 x f64>"], "<3 x 3 x f64>"),
]

# ------------------------------------------------------------------ layout and shape casts

LAYOUT = [
    unary("transpose", "<2 x 3 x 4 x f64>", (2, 3, 4), "transpose {x}", "<4 x 3 x 2 x f64>"),
    unary("transpose-scalar", "f64", (), "transpose {x}", "f64"),
    unary("transpose-dynamic", "<_ x 3 x f64>", (2, 3), "transpose {x}", "<3 x _ x f64>"),
    unary("transpose-permuted", "<2 x 3 x 4 x f64>", (2, 3, 4), "transpose {x} along 1, 2, 0",
          "<3 x 4 x 2 x f64>"),
    unary("transpose-swap-leading", "<_ x _ x 4 x f64>", (2, 3, 4), "transpose {x} along 1, 0, 2",
          "<_ x _ x 4 x f64>"),
    unary("reverse", M34, (3, 4), "reverse {x} along 1", M34),
    unary("reverse2", "<_ x 4 x f64>", (3, 4), "reverse {x} along 0, 1", "<_ x 4 x f64>"),
    binary("concatenate0", "<2 x 3 x f64>", (2, 3), "<3 x 3 x f64>", (3, 3),
           "concatenate {x}, {y} along 0", "<5 x 3 x f64>"),
    binary("concatenate1", "<2 x 3 x f64>", (2, 3), "<2 x 1 x f64>", (2, 1),
           "concatenate {x}, {y} along 1", "<2 x 4 x f64>"),
    Case("concatenate-middle", [("x", "<2 x 1 x 3 x f64>", (2, 1, 3)),
                                ("y", "<2 x 2 x 3 x f64>", (2, 2, 3)),
                                ("z", "<2 x 3 x 3 x f64>", (2, 3, 3))],
         ["%r = concatenate %x: <2 x 1 x 3 x f64>, %y: <2 x 2 x 3 x f64>, "
          "%z: <2 x 3 x 3 x f64> along 1"], "<2 x 6 x 3 x f64>"),
    binary("concatenate-dynamic0", "<_ x 3 x f64>", (2, 3), "<_ x 3 x f64>", (3, 3),
           "concatenate {x}, {y} along 0", "<_ x 3 x f64>"),
    binary("concatenate-dynamic1", "<_ x _ x f64>", (2, 3), "<2 x 2 x f64>", (2, 2),
           "concatenate {x}, {y} along 1", "<2 x _ x f64>"),
    binary("concatenate-same", "<2 x f64>", (2,), "<3 x f64>", (3,),
           "concatenate {x}, {y}, {x} along 0", "<7 x f64>"),
    unary("concatenate-literal", "<2 x 3 x f64>", (2, 3),
          "concatenate 1.5: <1 x 3 x f64>, {x}, zero: <2 x 3 x f64> along 0", "<5 x 3 x f64>"),
    unary("slice", "<5 x 3 x f64>", (5, 3), "slice {x} from 1 upto 3", "<3 x 3 x f64>"),
    unary("slice-head", "<5 x 3 x f64>", (5, 3), "slice {x} from 0 upto 1", "<2 x 3 x f64>"),
    unary("slice-all", "<4 x f64>", (4,), "slice {x} from 0 upto 3", "<4 x f64>"),
    unary("slice-dynamic", "<_ x 3 x f64>", (6, 3), "slice {x} from 2 upto 4", "<3 x 3 x f64>"),
    unary("slice-dynamic-rest", "<5 x _ x f64>", (5, 2), "slice {x} from 1 upto 2",
          "<2 x _ x f64>"),
    unary("padShape0", "<3 x f64>", (3,), "padShape {x} at 0", "<1 x 3 x f64>"),
    unary("padShape-end", "<_ x 3 x f64>", (2, 3), "padShape {x} at 2", "<_ x 3 x 1 x f64>"),
    unary("squeezeShape", "<3 x 1 x 4 x f64>", (3, 1, 4), "squeezeShape {x} at 1", M34),
    unary("squeezeShape-dynamic", "<_ x 3 x f64>", (1, 3), "squeezeShape {x} at 0",
          "<3 x f64>"),
    unary("shapeCast", "<2 x 6 x f64>", (2, 6), "shapeCast {x} to 3 x 4", M34),
    unary("shapeCast-scalar", "<1 x 1 x f64>", (1, 1), "shapeCast {x} to scalar", "f64"),
    unary("shapeCast-dynamic", "<_ x 4 x f64>", (3, 4), "shapeCast {x} to _ x 2 x 2",
          "<_ x 2 x 2 x f64>"),
    unary("shapeCast-flatten", "<_ x _ x f64>", (3, 4), "shapeCast {x} to _", "<_ x f64>"),
    unary("shapeCast-two-dynamic", "<_ x 2 x _ x f64>", (2, 2, 3), "shapeCast {x} to 4 x _",
          "<4 x _ x f64>"),
    unary("bitCast", "<2 x 6 x f64>", (2, 6), "bitCast {x} to <3 x 4 x f64>", M34),
    unary("bitCast-dynamic", "<_ x 6 x f64>", (2, 6), "bitCast {x} to <_ x 3 x f64>",
          "<_ x 3 x f64>"),
]

# ------------------------------------------------------------------ convolve, reduceWindow


def conv(id: str, xt: str, xs: Shape, kt: str, ks: Shape, attrs: str, out: str) -> Case:
    return binary(id, xt, xs, kt, ks, f"convolve {{x}} kernel {{y}}{attrs}", out)


CONVOLVE = [
    conv("conv1d", "<2 x 3 x 7 x f64>", (2, 3, 7), "<4 x 3 x 3 x f64>", (4, 3, 3), "",
         "<2 x 4 x 5 x f64>"),
    conv("conv2d-strides-padding", "<1 x 2 x 6 x 5 x f64>", (1, 2, 6, 5),
         "<3 x 2 x 3 x 2 x f64>", (3, 2, 3, 2), " strides 2, 1 padding (1, 2), (0, 1)",
         "<1 x 3 x 4 x 5 x f64>"),
    conv("conv-stride-leftover", "<1 x 1 x 9 x f64>", (1, 1, 9), "<2 x 1 x 2 x f64>",
         (2, 1, 2), " strides 3", "<1 x 2 x 3 x f64>"),
    conv("conv-dilations", "<1 x 2 x 5 x f64>", (1, 2, 5), "<2 x 2 x 3 x f64>", (2, 2, 3),
         " padding (1, 0) leftDilation 2 rightDilation 2", "<1 x 2 x 6 x f64>"),
    conv("conv-all-attributes", "<2 x 2 x 6 x 4 x f64>", (2, 2, 6, 4),
         "<2 x 2 x 2 x 2 x f64>", (2, 2, 2, 2),
         " strides 2, 3 padding (1, 3), (2, 0) leftDilation 2, 1 rightDilation 1, 2",
         "<2 x 2 x 7 x 2 x f64>"),
    conv("conv-groups", "<1 x 4 x 5 x 5 x f64>", (1, 4, 5, 5), "<6 x 2 x 3 x 3 x f64>",
         (6, 2, 3, 3), " padding (1, 1), (0, 0) groups 2", "<1 x 6 x 5 x 3 x f64>"),
    conv("conv-groups-depthwise", "<2 x 3 x 6 x f64>", (2, 3, 6), "<3 x 1 x 2 x f64>",
         (3, 1, 2), " strides 2 groups 3", "<2 x 3 x 3 x f64>"),
    conv("conv-wide-padding", "<1 x 2 x 4 x f64>", (1, 2, 4), "<3 x 2 x 1 x f64>", (3, 2, 1),
         " padding (2, 3)", "<1 x 3 x 9 x f64>"),
    conv("conv-wide-padding-strided", "<1 x 1 x 5 x f64>", (1, 1, 5), "<1 x 1 x 2 x f64>",
         (1, 1, 2), " strides 2 padding (3, 3) leftDilation 2", "<1 x 1 x 7 x f64>"),
    conv("conv-dynamic-batch", "<_ x 2 x 5 x 5 x f64>", (2, 2, 5, 5), "<3 x 2 x 2 x 2 x f64>",
         (3, 2, 2, 2), " strides 2, 2", "<_ x 3 x 2 x 2 x f64>"),
    conv("conv-dynamic-spatial", "<1 x 2 x _ x f64>", (1, 2, 6), "<3 x 2 x 2 x f64>",
         (3, 2, 2), " padding (1, 0) rightDilation 2", "<1 x 3 x _ x f64>"),
    conv("conv-groups-dynamic-batch", "<_ x 4 x 5 x f64>", (2, 4, 5), "<2 x 2 x 2 x f64>",
         (2, 2, 2), " strides 2 padding (0, 1) groups 2", "<_ x 2 x 3 x f64>"),
    conv("conv-dynamic-all", "<_ x 2 x _ x f64>", (2, 2, 5), "<1 x 2 x 1 x f64>", (1, 2, 1),
         " padding (2, 1)", "<_ x 1 x _ x f64>"),
]


def window(id: str, xt: str, xs: Shape, comb: str, dims: str, strides: str, mode: str,
           out: str) -> Case:
    init = {"add": "0: f64", "max": "-inf: f64", "min": "inf: f64"}[comb]
    return unary(id, xt, xs, f"reduceWindow {{x}} by {comb} init {init} dims {dims} "
                 f"strides {strides} padding {mode}", out, distinct)


REDUCE_WINDOW = [
    window("add-none", "<4 x 6 x f64>", (4, 6), "add", "2, 3", "2, 3", "none", "<2 x 2 x f64>"),
    window("add-half", "<5 x 7 x f64>", (5, 7), "add", "2, 3", "2, 3", "half", "<3 x 3 x f64>"),
    window("add-full", "<4 x 5 x f64>", (4, 5), "add", "2, 2", "1, 2", "full", "<5 x 3 x f64>"),
    window("add-overlap", "<5 x 7 x f64>", (5, 7), "add", "3, 2", "1, 1", "half",
           "<5 x 7 x f64>"),
    window("add-leftover", "<7 x f64>", (7,), "add", "2", "3", "none", "<2 x f64>"),
    window("max-none", "<4 x 6 x f64>", (4, 6), "max", "2, 3", "2, 3", "none", "<2 x 2 x f64>"),
    window("max-half", "<5 x 7 x f64>", (5, 7), "max", "2, 3", "2, 3", "half", "<3 x 3 x f64>"),
    window("max-full", "<4 x 5 x f64>", (4, 5), "max", "2, 2", "1, 2", "full", "<5 x 3 x f64>"),
    window("max-overlap", "<5 x 6 x f64>", (5, 6), "max", "3, 2", "1, 2", "half",
           "<5 x 3 x f64>"),
    window("min-none", "<4 x 6 x f64>", (4, 6), "min", "2, 2", "2, 2", "none", "<2 x 3 x f64>"),
    window("min-full", "<3 x 4 x f64>", (3, 4), "min", "2, 3", "1, 1", "full", "<4 x 6 x f64>"),
    window("add-dynamic", "<_ x 6 x f64>", (3, 6), "add", "1, 2", "1, 2", "none",
           "<_ x 3 x f64>"),
    window("add-dynamic-half", "<_ x 5 x f64>", (4, 5), "add", "3, 2", "1, 2", "half",
           "<_ x 3 x f64>"),
    window("max-dynamic", "<_ x _ x f64>", (4, 5), "max", "2, 2", "1, 1", "full",
           "<_ x _ x f64>"),
    window("max-pool-nchw", "<_ x 2 x 4 x 4 x f64>", (2, 2, 4, 4), "max", "1, 1, 2, 2",
           "1, 1, 2, 2", "none", "<_ x 2 x 2 x 2 x f64>"),
    Case("add-init", [("x", "<4 x 5 x f64>", (4, 5)), ("y", "f64", ())],
         ["%r = reduceWindow %x: <4 x 5 x f64> by add init %y: f64 dims 2, 2 strides 2, 2 "
          "padding half"], "<2 x 3 x f64>"),
    Case("max-init", [("x", "<4 x 5 x f64>", (4, 5)), ("y", "f64", ())],
         ["%r = reduceWindow %x: <4 x 5 x f64> by max init %y: f64 dims 2, 2 strides 2, 2 "
          "padding full"], "<3 x 3 x f64>",
         args=[np.arange(20.0).reshape(4, 5) * 0.1 - 1.03, np.array(0.05)]),
]

COMPOSITE = [
    Case("conv-relu-pool-sum", [("x", "<_ x 1 x 6 x 6 x f64>", (2, 1, 6, 6)),
                                ("k", "<3 x 1 x 3 x 3 x f64>", (3, 1, 3, 3))],
         ["%c = convolve %x: <_ x 1 x 6 x 6 x f64> kernel %k: <3 x 1 x 3 x 3 x f64> "
          "padding (1, 1), (1, 1)",
          "%a = max %c: <_ x 3 x 6 x 6 x f64>, 0: f64",
          "%p = reduceWindow %a: <_ x 3 x 6 x 6 x f64> by max init -inf: f64 "
          "dims 1, 1, 2, 2 strides 1, 1, 2, 2 padding none",
          "%f = shapeCast %p: <_ x 3 x 3 x 3 x f64> to _ x 27",
          "%s = scan %f: <_ x 27 x f64> by add along 1",
          "%r = reduce %s: <_ x 27 x f64> by add init 0: f64 along 1"], "<_ x f64>", distinct),
    Case("dense-layer", [("x", "<_ x 3 x f64>", (4, 3)), ("w", "<3 x 2 x f64>", (3, 2)),
                         ("b", "<2 x f64>", (2,))],
         ["%h = dot %x: <_ x 3 x f64>, %w: <3 x 2 x f64>",
          "%bb = padShape %b: <2 x f64> at 0",
          "%y = add %h: <_ x 2 x f64>, %bb: <1 x 2 x f64>",
          "%t = transpose %y: <_ x 2 x f64>",
          "%r = reduce %t: <2 x _ x f64> by max init -inf: f64 along 1"], "<2 x f64>"),
]

CASES = REDUCE + DOT + LAYOUT + CONVOLVE + REDUCE_WINDOW + COMPOSITE


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_rule(case: Case, mode: str) -> None:
    run(case, mode)


F32_CASES = ["add-dynamic2", "multiply-zeros", "max-along0", "min-init", "scan-dynamic",
             "batched-dynamic", "concatenate-dynamic1", "slice-dynamic", "shapeCast-flatten",
             "conv-all-attributes", "conv-groups", "max-half", "add-init", "max-init"]


@pytest.mark.parametrize("id", F32_CASES)
def test_f32_matches_f64(id: str) -> None:
    """The generated code keeps the operands' data type (literals included)."""
    case = next(c for c in CASES if c.id == id)
    rng = np.random.default_rng(5)
    args = case.args or [case.sampler(rng, shape) for _, _, shape in case.params]
    text = module(case, "gradient")
    out = compile_for_test(ir.parse(text)).call("f", *args)[0]
    seed = rng.standard_normal(np.shape(out))
    wide = gradient(text, *args, seed)
    narrow = gradient(text.replace("f64", "f32"), *(np.float32(a) for a in (*args, seed)))
    for a, b in zip(wide, narrow, strict=True):
        assert b.dtype == np.float32
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)


def test_every_tensor_op_has_both_rules() -> None:
    ops = ["reduce", "scan", "dot", "transpose", "reverse", "concatenate", "slice", "padShape",
           "squeezeShape", "shapeCast", "bitCast", "convolve", "reduceWindow"]
    for op in ops:
        assert op in ADJOINTS and op in TANGENTS, op


# ------------------------------------------------------------------ exact values
# Compared exactly: the arguments are small integers, so every sum and product below is
# exact in float64 whatever the order of operations.

def gradient(text: str, *args: np.ndarray) -> tuple[np.ndarray, ...]:
    return tuple(compile_for_test(ir.parse(text)).call("df", *args))


@pytest.mark.parametrize("comb", ["max", "min"])
def test_reduce_ties_split_evenly(comb: str) -> None:
    init = "-inf" if comb == "max" else "inf"
    case = unary("ties", "<2 x 4 x f64>", (2, 4),
                 f"reduce {{x}} by {comb} init {init}: f64 along 1", "<2 x f64>")
    x = np.array([[1.0, 3.0, 3.0, 2.0], [-1.0, -1.0, -1.0, -2.0]]) * (1 if comb == "max" else -1)
    (dx,) = gradient(module(case, "gradient"), x, np.array([6.0, 3.0]))
    np.testing.assert_array_equal(dx, [[0.0, 3.0, 3.0, 0.0], [1.0, 1.0, 1.0, 0.0]])


def test_reduce_max_ties_with_init() -> None:
    """An init equal to the maximum takes its share."""
    case = Case("init-tie", [("x", "<3 x f64>", (3,)), ("y", "f64", ())],
                ["%r = reduce %x: <3 x f64> by max init %y: f64"], "f64")
    dx, dy = gradient(module(case, "gradient"), np.array([2.0, 1.0, 2.0]), np.array(2.0),
                      np.array(3.0))
    np.testing.assert_array_equal(dx, [1.0, 0.0, 1.0])
    assert float(dy) == 1.0


def test_reduce_window_max_ties_split_evenly() -> None:
    case = window("pool-ties", "<2 x 4 x f64>", (2, 4), "max", "2, 2", "2, 2", "none",
                  "<1 x 2 x f64>")
    x = np.array([[1.0, 1.0, 5.0, 0.0], [1.0, 0.0, 2.0, 4.0]])
    (dx,) = gradient(module(case, "gradient"), x, np.array([[6.0, 1.0]]))
    np.testing.assert_array_equal(dx, [[2.0, 2.0, 1.0, 0.0], [2.0, 0.0, 0.0, 0.0]])


def test_reduce_multiply_at_zeros_is_exact() -> None:
    case = unary("zeros", "<3 x 3 x f64>", (3, 3), "reduce {x} by multiply init 2: f64 along 1",
                 "<3 x f64>")
    x = np.array([[2.0, 3.0, 4.0], [0.0, 3.0, 4.0], [0.0, 3.0, 0.0]])
    (dx,) = gradient(module(case, "gradient"), x, np.ones(3))
    np.testing.assert_array_equal(dx, [[24.0, 16.0, 12.0], [24.0, 0.0, 0.0], [0.0, 0.0, 0.0]])


def test_scan_adjoint_is_reverse_cumulative_sum() -> None:
    case = unary("scan", "<4 x f64>", (4,), "scan {x} by add along 0", "<4 x f64>")
    (dx,) = gradient(module(case, "gradient"), np.zeros(4), np.array([1.0, 2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(dx, [10.0, 9.0, 7.0, 4.0])


# ------------------------------------------------------------------ not differentiable

UNSUPPORTED = [
    unary("scan-multiply", "<4 x f64>", (4,), "scan {x} by multiply along 0", "<4 x f64>"),
    unary("window-multiply", "<4 x f64>", (4,),
          "reduceWindow {x} by multiply init 1: f64 dims 2 strides 2 padding none", "<2 x f64>"),
    unary("reduce-function", "<4 x f64>", (4,),
          "reduce {x} by @g: (f64, f64) -> f64 init 0: f64", "f64"),
    unary("bitCast-f64-to-f32", "<2 x f64>", (2,), "bitCast {x} to <4 x f32>", "<4 x f32>"),
    unary("conv-dynamic-strided", "<1 x 1 x _ x f64>", (1, 1, 5),
          "convolve {x} kernel 1.0: <1 x 1 x 2 x f64> strides 2", "<1 x 1 x _ x f64>"),
    unary("window-dynamic-strided", "<_ x f64>", (5,),
          "reduceWindow {x} by add init 0: f64 dims 2 strides 2 padding none", "<_ x f64>"),
]

COMBINE = ("\nfunc @g: (f64, f64) -> f64 {\n'entry(%a: f64, %b: f64):\n"
           "    %s = add %a: f64, %b: f64\n    return %s: f64\n}\n")


# Only the adjoint needs static sizes where a stride is not 1; the tangent is a convolution.
ADJOINT_ONLY = {"conv-dynamic-strided", "window-dynamic-strided"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", UNSUPPORTED, ids=[c.id for c in UNSUPPORTED])
def test_not_differentiable(case: Case, mode: str) -> None:
    if mode == "tangent" and case.id in ADJOINT_ONLY:
        run(case, mode)
        return
    text = module(case, mode) + COMBINE
    with pytest.raises(ir.PassError, match="not differentiable"):
        compile_for_test(ir.parse(text))


def test_bit_cast_to_integers_has_no_derivative() -> None:
    """The integer result is a constant: a gradient through it is zero."""
    case = Case("bits", [("x", "<2 x f64>", (2,))],
                ["%i = bitCast %x: <2 x f64> to <2 x i64>",
                 "%f = dataTypeCast %i: <2 x i64> to f64",
                 "%r = add %f: <2 x f64>, %x: <2 x f64>"], "<2 x f64>")
    (dx,) = gradient(module(case, "gradient"), np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    np.testing.assert_array_equal(dx, [3.0, 4.0])
