"""`convolve` and `reduceWindow` on llvm-cpu against the interpreter: a table of shapes,
strides, dilations, paddings and groups in float32 and float64 (im2col and BLAS), float16 and
integers (the loop nest), static and `_` sizes; batches that take several column blocks, a
last block that is partial, and copies split over the thread pool; then random geometries."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dlvm.ir as ir
from dlvm.ir.testing import assert_agree
from dlvm.llvm.codegen.lower_convolution import COLUMN_LIMIT
from dlvm.llvm.runtime import blas

DTYPES = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i32": np.int32, "u8": np.uint8}


@dataclass(frozen=True)
class Conv:
    name: str
    x: tuple[int, ...]
    k: tuple[int, ...]
    attrs: str = ""
    dtype: str = "f32"
    dynamic: bool = False  # the function's types say `_` for every size

    def out_shape(self) -> tuple[int, ...]:
        n = len(self.x) - 2
        at = parse_attrs(self.attrs, n)
        spatial = []
        for d in range(n):
            s, w = self.x[2 + d], self.k[2 + d]
            lo, hi = at["padding"][d]
            base = (s - 1) * at["leftDilation"][d] + 1 + lo + hi if s else lo + hi
            window = (w - 1) * at["rightDilation"][d] + 1
            spatial.append(0 if window > base else (base - window) // at["strides"][d] + 1)
        return (self.x[0], self.k[0], *spatial)


def parse_attrs(attrs: str, n: int) -> dict[str, Any]:
    """Just enough of the attribute syntax for the table's output shapes."""
    out: dict[str, Any] = {"strides": [1] * n, "padding": [(0, 0)] * n,
                           "leftDilation": [1] * n, "rightDilation": [1] * n}
    words = attrs.replace(",", " ").replace("(", " ").replace(")", " ").split()
    k = 0
    while k < len(words):
        key = words[k]
        if key == "groups":
            k += 2
            continue
        count = 2 * n if key == "padding" else n
        nums = [int(w) for w in words[k + 1:k + 1 + count]]
        out[key] = list(zip(nums[::2], nums[1::2], strict=True)) if key == "padding" else nums
        k += 1 + count
    return out


def tensor_type(shape: tuple[int, ...], dtype: str, dynamic: bool) -> str:
    return "<" + " x ".join("_" if dynamic else str(d) for d in shape) + f" x {dtype}>"


def conv_function(c: Conv) -> str:
    tx, tk, to = (tensor_type(s, c.dtype, c.dynamic) for s in (c.x, c.k, c.out_shape()))
    return (f"func @{c.name}: ({tx}, {tk}) -> {to} {{\n'entry(%x: {tx}, %k: {tk}):\n"
            f"    %r = convolve %x: {tx} kernel %k: {tk} {c.attrs}\n    return %r: {to}\n}}\n")


PAD1 = "padding (1, 1), (1, 1)"
BIG = int(np.sqrt(COLUMN_LIMIT / 27))  # a 2-d image whose column matrix (9 rows) is about a
# third of a block's: blocks of 3 images, copies large enough for the thread pool
CASES = [
    Conv("cnn_conv1", (64, 1, 8, 8), (8, 1, 3, 3), f"strides 1, 1 {PAD1} rightDilation 1, 1"),
    Conv("cnn_conv2", (64, 8, 4, 4), (16, 4, 3, 3), f"strides 1, 1 {PAD1} groups 2"),
    Conv("one_image", (1, 3, 9, 7), (5, 3, 3, 2)),
    Conv("strided", (2, 3, 11, 10), (4, 3, 3, 3), "strides 2, 3"),
    Conv("strided_padded", (3, 2, 9, 9), (4, 2, 3, 3), "strides 2, 2 padding (2, 1), (0, 3)"),
    Conv("kernel_dilation", (2, 2, 10, 9), (3, 2, 3, 2), "padding (1, 2), (2, 0) rightDilation 2, 3"),
    Conv("input_dilation", (2, 2, 5, 4), (3, 2, 3, 3), "padding (2, 2), (1, 1) leftDilation 2, 3"),
    Conv("both_dilations", (1, 2, 5, 6), (2, 2, 2, 3),
         "strides 2, 1 padding (1, 0), (3, 3) leftDilation 3, 1 rightDilation 2, 2"),
    Conv("depthwise", (3, 6, 7, 7), (6, 1, 3, 3), f"{PAD1} groups 6"),
    Conv("groups_3", (2, 6, 6, 5), (9, 2, 2, 2), "strides 1, 2 groups 3"),
    Conv("one_d", (4, 3, 17), (5, 3, 4), "strides 2 padding (3, 1) rightDilation 2"),
    Conv("three_d", (2, 2, 5, 6, 4), (3, 2, 2, 3, 2), "strides 1, 2, 1 padding (1, 0), (0, 1), (1, 1)"),
    Conv("pointwise", (5, 8, 6, 6), (4, 8, 1, 1)),
    Conv("window_past_input", (2, 1, 2, 2), (1, 1, 3, 3)),
    Conv("empty_batch", (0, 2, 5, 5), (3, 2, 3, 3), PAD1),
    Conv("no_channels", (2, 0, 5, 5), (3, 0, 3, 3), PAD1),
    Conv("no_output_channels", (2, 2, 5, 5), (0, 2, 3, 3), PAD1, dynamic=True),
    Conv("empty_kernel_window", (2, 2, 5, 5), (3, 2, 0, 3)),
    Conv("only_padding", (2, 1, 0, 3), (2, 1, 1, 1), "padding (1, 1), (0, 0)"),
    Conv("blocks_partial", (7, 1, BIG, BIG), (2, 1, 3, 3), PAD1),  # blocks of 3: 3 + 3 + 1
    Conv("blocks_grouped", (5, 2, BIG, BIG), (6, 1, 3, 3), f"{PAD1} groups 2"),  # 3 + 2
    Conv("image_per_block", (3, 4, 2 * BIG, 2 * BIG), (3, 4, 3, 3), "strides 2, 1"),
    Conv("f64", (3, 4, 7, 6), (6, 2, 3, 3), f"{PAD1} groups 2", "f64"),
    Conv("f16", (2, 3, 6, 5), (4, 3, 3, 3), PAD1, "f16"),
    Conv("i32", (2, 3, 6, 5), (4, 3, 2, 3), "strides 2, 1 padding (1, 0), (1, 1)", "i32"),
    Conv("dynamic", (3, 4, 9, 8), (6, 2, 3, 3), f"strides 2, 1 {PAD1} groups 2", dynamic=True),
    Conv("dynamic_f16", (2, 2, 5, 5), (2, 2, 2, 2), "", "f16", dynamic=True),
]


def arguments(c: Conv, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    dt = DTYPES[c.dtype]
    if c.dtype == "i32":
        return [rng.integers(-9, 9, s).astype(dt) for s in (c.x, c.k)]
    return [rng.standard_normal(s).astype(dt) for s in (c.x, c.k)]


# one thread; two (copies split over the pool); one build for every shape (`_` sizes stay
# run-time values instead of becoming constants)
BUILDS = {"one_thread": {"threads": 1}, "two_threads": {"threads": 2},
          "generic": {"threads": 1, "specialize": False}}


def compiled(functions: list[str], options: dict[str, Any]
             ) -> tuple[ir.Executable, ir.Executable]:
    m = ir.parse('module "conv"\nstage raw\n' + "".join(functions), "conv.dl")
    ir.verify(m)
    return ir.compile(m, "llvm-cpu", **options), ir.compile(m, "interp")


@pytest.fixture(scope="module", params=list(BUILDS))
def table(request: pytest.FixtureRequest) -> tuple[ir.Executable, ir.Executable]:
    return compiled([conv_function(c) for c in CASES], BUILDS[request.param])


def agree(c: Conv, target: ir.Executable, oracle: ir.Executable, args: list[np.ndarray]
          ) -> None:
    want = oracle.call(c.name, *args)
    got = target.call(c.name, *args)
    assert got[0].shape == want[0].shape == c.out_shape()
    if c.dtype == "f16":  # the loop nest accumulates in half precision, numpy in single
        np.testing.assert_allclose(got[0].astype(np.float32), want[0].astype(np.float32),
                                   rtol=2e-2, atol=5e-2)
    else:
        assert_agree(got, want, f"@{c.name}")


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_convolve_agrees_with_the_interpreter(case: Conv, table: Any) -> None:
    target, oracle = table
    agree(case, target, oracle, arguments(case))


def test_blas_is_found_so_the_table_covers_im2col() -> None:
    assert blas.available(), "numpy's OpenBLAS was not found: only the loop nest is tested"


CHANNEL_ERRORS = [
    ((1, 3, 4), (2, 2, 2), "groups 2", "groups 2 must divide the 3 input channels"),
    ((1, 4, 4), (3, 2, 2), "groups 2", "groups 2 must divide the 3 output channels"),
    ((1, 4, 4), (2, 3, 2), "groups 2", "the kernel has 3 input channels per group"),
]


@pytest.mark.parametrize(("xs", "ks", "attrs", "message"), CHANNEL_ERRORS)
def test_channel_counts_known_only_at_run_time_fail_as_the_interpreter_does(
        xs: tuple[int, ...], ks: tuple[int, ...], attrs: str, message: str) -> None:
    c = Conv("bad", xs, ks, attrs, dynamic=True)
    target, oracle = compiled([conv_function(c)], BUILDS["generic"])
    args = arguments(c)
    for exe in (oracle, target):
        with pytest.raises(ir.ExecutionError, match=message) as e:
            exe.call("bad", *args)
        assert str(e.value).startswith("conv.dl:5:"), str(e.value)


@st.composite
def geometries(draw: st.DrawFn) -> tuple[Conv, int]:
    n = draw(st.integers(1, 3))
    groups = draw(st.integers(1, 3))
    cin_g, cout_g = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    batch = draw(st.integers(0, 4))
    sizes = [draw(st.integers(0 if n == 1 else 1, 7)) for _ in range(n)]
    window = [draw(st.integers(1, 3)) for _ in range(n)]
    strides = [draw(st.integers(1, 3)) for _ in range(n)]
    ld = [draw(st.integers(1, 2)) for _ in range(n)]
    rd = [draw(st.integers(1, 2)) for _ in range(n)]
    pads = [(draw(st.integers(0, 3)), draw(st.integers(0, 3))) for _ in range(n)]
    dtype = draw(st.sampled_from(["f32", "f64"]))

    def ints(xs: list[int]) -> str:
        return ", ".join(map(str, xs))

    attrs = (f"strides {ints(strides)} padding {', '.join(f'({a}, {b})' for a, b in pads)} "
             f"leftDilation {ints(ld)} rightDilation {ints(rd)} groups {groups}")
    c = Conv("random", (batch, cin_g * groups, *sizes), (cout_g * groups, cin_g, *window),
             attrs, dtype, dynamic=draw(st.booleans()))
    return c, draw(st.integers(0, 2**16))


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(geometries())
def test_random_geometries_agree_with_the_interpreter(drawn: tuple[Conv, int]) -> None:
    c, seed = drawn
    target, oracle = compiled([conv_function(c)], BUILDS["generic" if c.dynamic else "one_thread"])
    agree(c, target, oracle, arguments(c, seed))


# ---------------------------------------------------------------- pooling


@dataclass(frozen=True)
class Pool:
    name: str
    x: tuple[int, ...]
    combinator: str  # by …
    init: str
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    padding: str
    dtype: str = "f32"
    dynamic: bool = False
    nans: bool = False  # NaN at a corner (a border window) and in the middle (interior ones)


POOLS = [
    Pool("max_2x2", (64, 8, 8, 8), "max", "-inf", (1, 1, 2, 2), (1, 1, 2, 2), "none"),
    Pool("max_3x3_half", (2, 3, 7, 6), "max", "-inf", (1, 1, 3, 3), (1, 1, 2, 2), "half"),
    Pool("sum_full", (2, 2, 5, 4), "add", "0", (1, 1, 2, 3), (1, 1, 1, 2), "full"),
    Pool("sum_odd_none", (2, 2, 7, 5), "add", "0", (1, 2, 3, 2), (1, 1, 2, 2), "none"),
    Pool("max_window_past_input", (1, 1, 2, 2), "max", "-inf", (1, 1, 3, 3), (1, 1, 1, 1),
         "none"),
    Pool("max_one_d", (3, 9), "max", "-inf", (1, 4), (1, 3), "half"),
    Pool("min_f64", (2, 3, 6), "min", "inf", (1, 2, 2), (1, 1, 2), "none", "f64"),
    Pool("max_i32", (2, 5, 5), "max", "-2147483648", (1, 2, 3), (1, 2, 1), "half", "i32"),
    Pool("max_dynamic", (2, 3, 6, 7), "max", "-inf", (1, 1, 2, 2), (1, 1, 2, 2), "none",
         dynamic=True),
    Pool("max_dynamic_half", (2, 3, 5, 7), "max", "-inf", (1, 1, 3, 2), (1, 1, 2, 2), "half",
         dynamic=True),
    Pool("max_split", (8, 16, 32, 32), "max", "-inf", (1, 1, 2, 2), (1, 1, 2, 2), "none"),
    Pool("sum_half_split", (4, 8, 33, 31), "add", "0", (1, 1, 3, 3), (1, 1, 1, 1), "half",
         dynamic=True),  # with two threads, these two are split over the pool
    Pool("max_empty", (0, 3, 4, 4), "max", "-inf", (1, 1, 2, 2), (1, 1, 2, 2), "none",
         dynamic=True),
    # padded windows: the interior's are folded without tests, as a tree; NaN propagates
    Pool("max_3x3_padded_nan", (2, 3, 9, 10), "max", "-inf", (1, 1, 3, 3), (1, 1, 2, 2),
         "half", nans=True),
    Pool("min_padded_nan", (3, 8, 7), "min", "inf", (1, 3, 3), (1, 1, 1), "full", "f64",
         nans=True),
    Pool("max_u8_padded", (2, 6, 6), "max", "0", (1, 3, 3), (1, 1, 1), "half", "u8"),
]


def pool_function(p: Pool, out: tuple[int, ...]) -> str:
    tx, to = tensor_type(p.x, p.dtype, p.dynamic), tensor_type(out, p.dtype, p.dynamic)
    return (f"func @{p.name}: ({tx}) -> {to} {{\n'entry(%x: {tx}):\n"
            f"    %r = reduceWindow %x: {tx} by {p.combinator} init {p.init}: {p.dtype} "
            f"dims {', '.join(map(str, p.dims))} strides {', '.join(map(str, p.strides))} "
            f"padding {p.padding}\n    return %r: {to}\n}}\n")


def pool_out(p: Pool) -> tuple[int, ...]:
    out = []
    for s, w, st_ in zip(p.x, p.dims, p.strides, strict=True):
        if p.padding == "none":
            out.append(0 if s < w else (s - w) // st_ + 1)
        elif p.padding == "full":
            out.append((s + w - 2) // st_ + 1)
        else:
            out.append((s - 1) // st_ + 1)
    return tuple(out)


@pytest.fixture(scope="module", params=list(BUILDS))
def pools(request: pytest.FixtureRequest) -> tuple[ir.Executable, ir.Executable]:
    return compiled([pool_function(p, pool_out(p)) for p in POOLS], BUILDS[request.param])


@pytest.mark.parametrize("case", POOLS, ids=lambda p: p.name)
def test_reduce_window_agrees_with_the_interpreter(case: Pool, pools: Any) -> None:
    target, oracle = pools
    rng = np.random.default_rng(1)
    dt = DTYPES[case.dtype]
    x = (rng.integers(-50, 50, case.x) if case.dtype == "i32" else
         rng.integers(0, 256, case.x) if case.dtype == "u8" else
         rng.standard_normal(case.x)).astype(dt)
    if case.nans:
        x[(0,) * x.ndim] = np.nan
        x[tuple(d // 2 for d in x.shape)] = np.nan
    want = oracle.call(case.name, x)
    got = target.call(case.name, x)
    assert got[0].shape == pool_out(case)
    assert_agree(got, want, f"@{case.name}")
