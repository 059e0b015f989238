"""Regions of element-wise code as GPU kernels: one thread per output element.

A *region* is the body of a `!kernel` function (from `fuse-elementwise`) or one instruction
on its own: element-wise instructions (their scalar bodies come from dlvm-llvm's `SCALAR`
table, shared with the CPU target), reductions (`reduce` by a built-in combinator,
`unbroadcast`), and layout instructions that only move elements (`padShape`, `squeezeShape`,
`shapeCast`, `transpose`, `reverse`, `slice`, `concatenate`). Shapes are concrete: a launch
plan compiles a region for the shapes it meets, so every size and stride is a constant.

Every output is computed where it is written, from the region's inputs, by `value_at(v,
index)`: the value of `v` at a multi-index, following broadcasting (index 0 along a size-1
dimension), the index maps of layout instructions, and a fold for a reduction. Nothing in
between is materialized. Element-wise outputs of one shape share a kernel with a grid-stride
loop over their elements; each reduction gets its own kernel:

- `thread`: one thread per output element folds the reduced elements in order (no barrier,
  so the host emulation runs it too);
- `block`: one block per output element; its threads fold a stride of the elements each,
  then combine through warp shuffles (`shfl.sync.bfly`) and shared memory in a fixed tree;
- `split`: for few outputs over many elements, blocks fold chunks into partial results
  (`block` mode, into scratch memory) and a second kernel folds the partials in order.

No atomics: a float sum comes out the same on every run. A sum of float16 or float32
accumulates in float64 in every fold, shuffle and partial (`accumulation_dtype`, shared with
the CPU target) and is rounded once, where it is written: a thread that folds 2·10^7
elements does not stop growing at 2^24, and the result is within n·2^-53·Σ|x| of the exact
sum before that rounding, whatever the order of the tree.

The same code builds for NVPTX (thread and block indices from the special registers, math
from libdevice) and for the host (indices as parameters, looped over by a `.grid` wrapper,
math from dlvm-llvm's own library), which is how a machine without a GPU runs launch plans.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from llvmlite import ir as ll

from dlvm.ir import Instruction, LiteralValue, Value
from dlvm.ir.core import BuiltinRef, ScalarLiteral
from dlvm.ir.instructions.tensor import permutation, window_pads
from dlvm.ir.interp import located
from dlvm.ir.plugin import install_hint
from dlvm.ir.runtime import numpy_dtype
from dlvm.ir.types import BF16, F16, DataType, TensorType, scalar
from dlvm.llvm.codegen import random_stream
from dlvm.llvm.codegen.bfloat import widen
from dlvm.llvm.codegen.function import scalar_constant
from dlvm.llvm.codegen.layout import I1, I8, I32, I64, PTR, element_type, scalar_type
from dlvm.llvm.codegen.mathlib import LIBM, OWN, MathLib
from dlvm.llvm.codegen.regions import (
    accumulation_dtype,
    combinator_name,
    direct_operands,
    is_region_instruction,
    rule_of,
)
from dlvm.llvm.codegen.rounding import rounded
from dlvm.llvm.codegen.scalar import SCALAR, ScalarEmitter, combine, identity

BLOCK = 256  # threads per block
VECTOR = 4  # elements per thread of an element-wise kernel over aligned 32-bit data
WARP = 32
MAX_GRID = 1 << 16  # blocks of a grid-stride loop
SPLIT_MIN = 1 << 15  # reduced elements per output above which few outputs are split


def is_kernel_instruction(inst: Instruction) -> bool:
    """Whether `inst` can be part of a GPU region."""
    if inst.opcode in LAYOUT_RULES:
        return True
    if inst.opcode == "random":
        t = inst.type
        return isinstance(t, TensorType) and t.is_static and t.dtype.is_numeric
    if inst.opcode in WINDOW_RULES:
        return window_supported(inst)
    if inst.has_trait("reduction"):
        return is_region_instruction(inst)
    if not is_region_instruction(inst):
        return False
    name = inst.builtin if inst.opcode == "builtin" else inst.opcode
    return name in SCALAR


def region_operands(inst: Instruction) -> list[Value]:
    """The values an instruction reads as a region of its own (a reduction's source and
    init; not the `like` of `unbroadcast`, of which only the shape matters)."""
    if inst.opcode == "reduce":
        return [inst.x, inst.init]
    if inst.opcode == "unbroadcast":
        return [inst.x]
    if inst.opcode == "concatenate":
        return list(inst.xs)
    if inst.opcode == "convolve":
        return [inst.x, inst.kernel]
    if inst.opcode == "reduceWindow":
        return [inst.x, inst.init]
    if inst.opcode == "scan":
        return [inst.x]
    if inst.opcode == "random":
        return [inst.lower, inst.upper]
    return direct_operands(inst)


WINDOW_COMBINATORS = ("add", "multiply", "max", "min")


SCAN_MAX = 1 << 12  # the most elements a scan's line (its scanned dimensions) may have in
# a kernel: a thread folds its prefix itself, so the work grows as the square of the line


def window_supported(inst: Instruction) -> bool:
    """A convolution of floats, pooling or a scan by a built-in combinator: one thread per
    output element folds its window or prefix (`KernelContext._window_*`)."""
    if inst.opcode in ("reduceWindow", "scan"):
        comb = inst.combinator
        name = comb.name if isinstance(comb, BuiltinRef) else comb
        return isinstance(name, str) and name in WINDOW_COMBINATORS
    t = inst.type
    return isinstance(t, TensorType) and t.dtype.is_float


class KernelError(Exception):
    """A region that cannot become a kernel (the plan runs it on the host instead)."""


@dataclass(frozen=True)
class Launch:
    """One kernel of a region and its grid."""

    name: str
    grid: int
    block: int


@dataclass
class RegionCode:
    """The kernels of one region for given shapes, and how to launch them.

    Parameters, in order and shared by every kernel: the outputs' addresses, then each
    input (a tensor's address, or a scalar: its address, or its value when `by_value`),
    the scratch memory for split reductions, the error word (an i32 that a failing
    element sets to the 1-based index of its entry in `sites`), and the random stream's
    state (two u64: key and counter) that `random` draws from. A region that draws ends
    with a one-thread kernel that advances the counter by `draws`."""

    module: ll.Module
    launches: list[Launch]
    outputs: list[Value]
    inputs: list[Value]
    by_value: list[bool]
    types: dict[Value, TensorType]
    scratch_bytes: int
    sites: list[tuple[Instruction, str]]
    kernel_names: list[str] = field(default_factory=list)
    draws: int = 0

    def error(self, word: int) -> Exception:
        """The error an error word names: the failing instruction and what went wrong."""
        inst, message = self.sites[word - 1]
        return located(inst, message)


# ---------------------------------------------------------------- index helpers


def shape_of(t: TensorType) -> tuple[int, ...]:
    assert t.is_static, t
    return tuple(int(d) for d in t.shape)  # type: ignore[arg-type]


def strides_of(shape: Sequence[int]) -> list[int]:
    out, acc = [0] * len(shape), 1
    for k in range(len(shape) - 1, -1, -1):
        out[k] = acc if shape[k] != 1 else 0
        acc *= shape[k]
    return out


def unflatten(b: ll.IRBuilder, flat: ll.Value, shape: Sequence[int]) -> list[ll.Value]:
    """The multi-index of element `flat` of a row-major array of `shape`."""
    idx: list[ll.Value] = [ll.Constant(I64, 0)] * len(shape)
    rest = flat
    for k in range(len(shape) - 1, -1, -1):
        n = shape[k]
        if n == 1:
            continue
        if k == 0 or all(shape[j] == 1 for j in range(k)):
            idx[k] = rest
            break
        idx[k] = b.urem(rest, ll.Constant(I64, n))
        rest = b.udiv(rest, ll.Constant(I64, n))
    return idx


def linear(b: ll.IRBuilder, idx: Sequence[ll.Value], strides: Sequence[int]) -> ll.Value:
    acc: ll.Value = ll.Constant(I64, 0)
    for i, s in zip(idx, strides, strict=True):
        if s == 0 or (isinstance(i, ll.Constant) and i.constant == 0):
            continue
        term = i if s == 1 else b.mul(i, ll.Constant(I64, s), flags=["nuw", "nsw"])
        acc = term if isinstance(acc, ll.Constant) and acc.constant == 0 else b.add(
            acc, term, flags=["nuw", "nsw"])
    return acc


def const_of(t: ll.Type, v: float | int | bool) -> ll.Constant:
    if isinstance(t, ll.IntType):
        return ll.Constant(t, int(v))
    return ll.Constant(t, float(v))


# ---------------------------------------------------------------- flavours


class Flavour(ABC):
    """What differs between NVPTX and the host: indices, kernels, math, reductions."""

    name = "base"
    barriers = False

    @abstractmethod
    def kernel(self, module: ll.Module, name: str, params: list[ll.Type]) -> ll.Function:
        """A new kernel function taking `params`."""

    @abstractmethod
    def indices(self, b: ll.IRBuilder, fn: ll.Function) -> tuple[ll.Value, ...]:
        """(thread, block, threads per block, blocks) as i64."""

    @abstractmethod
    def math(self, module: ll.Module) -> Callable[[ll.IRBuilder, str, Sequence[ll.Value]],
                                                  ll.Value]:
        """The math library: `call(builder, name, args)`."""

    @abstractmethod
    def finish(self, module: ll.Module, kernels: list[ll.Function]) -> None:
        """Whatever the flavour adds once every kernel is written."""


class NVPTXFlavour(Flavour):
    name = "nvptx"
    barriers = True

    def __init__(self, libdevice: bool = True, native_bf16: bool = False) -> None:
        self.libdevice = libdevice
        self.native_bf16 = native_bf16  # sm_80 and later: `cvt.rn.bf16.f32`

    def kernel(self, module: ll.Module, name: str, params: list[ll.Type]) -> ll.Function:
        fn = ll.Function(module, ll.FunctionType(ll.VoidType(), params), name)
        fn.calling_convention = "ptx_kernel"
        fn.attributes.add("nounwind")
        return fn

    def indices(self, b: ll.IRBuilder, fn: ll.Function) -> tuple[ll.Value, ...]:
        def sreg(name: str) -> ll.Value:
            f = _declare(b.module, f"llvm.nvvm.read.ptx.sreg.{name}", I32, [])
            return b.zext(b.call(f, []), I64)

        return sreg("tid.x"), sreg("ctaid.x"), sreg("ntid.x"), sreg("nctaid.x")

    def math(self, module: ll.Module) -> Callable[[ll.IRBuilder, str, Sequence[ll.Value]],
                                                  ll.Value]:
        return DeviceMathLib(module, self.libdevice, self.native_bf16).call

    def finish(self, module: ll.Module, kernels: list[ll.Function]) -> None:
        """Kernels are entry points as they are."""


class DeviceMathLib(MathLib):
    """The math of GPU kernels: libdevice's functions (`__nv_tanhf`, …), where found, else
    dlvm-llvm's own polynomials for those it has; `digamma` is always dlvm-llvm's (libdevice
    has none), calling back into this library for `log` and `tan`. From sm_80 on, rounding to
    bf16 is the GPU's own conversion (one instruction, as CUDA's `__float2bfloat16_rn`)."""

    def __init__(self, module: ll.Module, libdevice: bool, native_bf16: bool = False) -> None:
        super().__init__(module)
        self.libdevice = libdevice
        self.native_bf16 = native_bf16

    def call(self, b: ll.IRBuilder, name: str, args: Sequence[ll.Value]) -> ll.Value:
        t = args[0].type
        if name == "to_bf16":
            if not self.native_bf16:
                return super().call(b, name, args)
            convert = ll.InlineAsm(ll.FunctionType(ll.IntType(16), [t]),
                                   "cvt.rn.bf16.f32 $0, $1;", "=h,f")
            return b.call(convert, list(args))
        if name in ("maximum", "minimum"):  # one instruction on the GPU (max.NaN.f32)
            return self.intrinsic(b, name, *args)
        if name == "digamma" or (not self.libdevice and name in OWN):
            return super().call(b, name, args)
        if not self.libdevice:
            raise KernelError(f"'{name}' on the GPU needs NVIDIA's libdevice, which was not "
                              "found (set CUDA_HOME, or "
                              f"{install_hint('dlvm-llvm-gpu[libdevice]')})")
        sym = f"__nv_{name}" + ("f" if isinstance(t, ll.FloatType) else "")
        return b.call(_declare(self.module, sym, t, [t] * len(args)), list(args))


class HostFlavour(Flavour):
    """Kernels for the CPU: the thread and block indices are parameters, and a wrapper
    `NAME.grid(ptr slots, i64 grid, i64 block)` runs every block and thread in turn,
    reading the parameters from 8-byte slots."""

    name = "host"

    def __init__(self) -> None:
        self.params: dict[str, list[ll.Type]] = {}

    def kernel(self, module: ll.Module, name: str, params: list[ll.Type]) -> ll.Function:
        fn = ll.Function(module, ll.FunctionType(ll.VoidType(), [*params, I64, I64, I64, I64]),
                         name)
        fn.linkage = "internal"
        self.params[name] = params
        return fn

    def indices(self, b: ll.IRBuilder, fn: ll.Function) -> tuple[ll.Value, ...]:
        return tuple(fn.args[-4:])

    def math(self, module: ll.Module) -> Callable[[ll.IRBuilder, str, Sequence[ll.Value]],
                                                  ll.Value]:
        return MathLib(module).call

    def finish(self, module: ll.Module, kernels: list[ll.Function]) -> None:
        for fn in kernels:
            params = self.params[fn.name]
            grid_fn = ll.Function(module, ll.FunctionType(ll.VoidType(), [PTR, I64, I64]),
                                  fn.name + ".grid")
            b = ll.IRBuilder(grid_fn.append_basic_block("entry"))
            slots, grid, block = grid_fn.args
            values = [b.load(b.gep(slots, [ll.Constant(I64, k)], source_etype=I64), typ=t)
                      for k, t in enumerate(params)]
            with _loop(b, ll.Constant(I64, 0), grid, "block") as bid, \
                    _loop(b, ll.Constant(I64, 0), block, "thread") as tid:
                b.call(fn, [*values, tid, bid, block, grid])
            b.ret_void()


def _declare(module: ll.Module, name: str, ret: ll.Type, args: Sequence[ll.Type]
             ) -> ll.Function:
    existing = module.globals.get(name)
    if isinstance(existing, ll.Function):
        return existing
    return ll.Function(module, ll.FunctionType(ret, list(args)), name)


class _loop:
    """`for (i = start; i < stop; i += step)` as a context manager."""

    def __init__(self, b: ll.IRBuilder, start: ll.Value, stop: ll.Value, name: str,
                 step: ll.Value | None = None) -> None:
        self.b, self.start, self.stop, self.name = b, start, stop, name
        self.step = step if step is not None else ll.Constant(I64, 1)

    def __enter__(self) -> ll.Value:
        b = self.b
        pre = b.block
        self.head = b.append_basic_block(f"{self.name}.head")
        body = b.append_basic_block(f"{self.name}.body")
        self.done = b.append_basic_block(f"{self.name}.done")
        b.branch(self.head)
        b.position_at_end(self.head)
        self.phi = b.phi(I64, name=self.name)
        self.phi.add_incoming(self.start, pre)
        b.cbranch(b.icmp_unsigned("<", self.phi, self.stop), body, self.done)
        b.position_at_end(body)
        return self.phi

    def __exit__(self, *exc: object) -> None:
        b = self.b
        nxt = b.add(self.phi, self.step, name=f"{self.name}.next")
        self.phi.add_incoming(nxt, b.block)
        b.branch(self.head)
        b.position_at_end(self.done)


# ---------------------------------------------------------------- regions


def symbol(name: str) -> str:
    """`name` as a PTX identifier: DLVM names may hold dots (`@dloss.scaled`), which PTX
    reads as the start of a directive."""
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


class RegionBuilder:
    """Writes the kernels of one region into an LLVM module (its kernels named after
    `name`, made a PTX identifier)."""

    def __init__(self, name: str, insts: list[Instruction], inputs: list[Value],
                 outputs: list[Value], types: dict[Value, TensorType], by_value: list[bool],
                 flavour: Flavour, module: ll.Module | None = None, *,
                 aligned: bool = True) -> None:
        self.name = symbol(name)
        # every address 16-byte aligned: element-wise kernels then take VECTOR consecutive
        # elements per thread, which the back end reads and writes as one 128-bit access
        self.aligned = aligned
        self.insts = insts
        self.members = set(insts)
        self.inputs = inputs
        self.outputs = outputs
        self.types = types
        self.by_value = by_value
        self.flavour = flavour
        self.module = module or ll.Module(name=name)
        self.sites: list[tuple[Instruction, str]] = []
        self.math = flavour.math(self.module)
        self.kernels: list[ll.Function] = []
        self.launches: list[Launch] = []
        self.scratch = 0
        self.draws = 0
        # where each `random` of the region starts in the elements the region draws
        self.draw_starts: dict[Instruction, int] = {}
        for inst in insts:
            if inst.opcode == "random":
                self.draw_starts[inst] = self.draws
                self.draws += int(np.prod(shape_of(types[inst]), dtype=np.int64))
        self.check()

    def check(self) -> None:
        """Raise KernelError for a region that cannot be a kernel, before anything is
        written (so a caller may try and fall back without cleaning up)."""
        needs_libdevice = isinstance(self.flavour, NVPTXFlavour) and not \
            self.flavour.libdevice
        for inst in self.insts:
            if not is_kernel_instruction(inst):
                raise KernelError(f"'{inst.opcode}' does not run in a GPU kernel")
            if needs_libdevice and inst.opcode in LIBM:
                raise KernelError(f"'{inst.opcode}' on the GPU needs NVIDIA's libdevice")
            for v in region_operands(inst):
                if isinstance(v, LiteralValue) and not isinstance(v.literal, ScalarLiteral) \
                        and v not in self.inputs:
                    raise KernelError("a tensor literal inside a kernel")
        for v in [*self.inputs, *self.insts]:
            t = self.types.get(v)
            if not isinstance(t, TensorType) or not t.is_static:
                raise KernelError(f"no static tensor type for {v!r}")

    # ------------------------------------------------------------ parameters

    def param_types(self) -> list[ll.Type]:
        ps: list[ll.Type] = [PTR] * len(self.outputs)
        for v, by_value in zip(self.inputs, self.by_value, strict=True):
            ps.append(scalar_type(self.types[v].dtype) if by_value else PTR)
        return [*ps, PTR, PTR, PTR]  # scratch, error word, random state

    def new_kernel(self, suffix: str) -> tuple[ll.Function, ll.IRBuilder]:
        fn = self.flavour.kernel(self.module, f"{self.name}_{suffix}", self.param_types())
        for k in range(len(self.outputs) + len(self.inputs) + 3):
            if isinstance(fn.args[k].type, ll.PointerType):
                fn.args[k].add_attribute("noalias")
        self.kernels.append(fn)
        return fn, ll.IRBuilder(fn.append_basic_block("entry"))

    # ------------------------------------------------------------ building

    def build(self) -> RegionCode:
        groups: dict[tuple[int, ...], list[Value]] = {}
        reductions: list[Value] = []
        for v in self.outputs:
            if isinstance(v, Instruction) and v.has_trait("reduction") and \
                    v in self.members and v.opcode not in WINDOW_RULES:
                reductions.append(v)
            else:
                groups.setdefault(shape_of(self.types[v]), []).append(v)
        for k, (shape, values) in enumerate(groups.items()):
            self.elementwise_kernel(f"ew{k}", shape, values)
        for k, r in enumerate(reductions):
            assert isinstance(r, Instruction)
            self.reduction_kernels(f"red{k}", r)
        if self.draws:
            self.advance_kernel()
        self.flavour.finish(self.module, self.kernels)
        return RegionCode(self.module, self.launches, self.outputs, self.inputs,
                          self.by_value, self.types, self.scratch, self.sites,
                          [f.name for f in self.kernels], self.draws)

    def advance_kernel(self) -> None:
        """After the kernels that draw (the stream orders it), one thread moves the random
        stream's counter past the elements they took."""
        fn, b = self.new_kernel("advance")
        tid, bid, _, _ = self.flavour.indices(b, fn)
        first = b.icmp_unsigned("==", b.or_(tid, bid), ll.Constant(I64, 0))
        with b.if_then(first):
            state = fn.args[len(self.outputs) + len(self.inputs) + 2]
            counter = b.gep(state, [ll.Constant(I64, 1)], source_etype=I64)
            b.store(b.add(b.load(counter, typ=I64), ll.Constant(I64, self.draws)), counter)
        b.ret_void()
        self.launches.append(Launch(fn.name, 1, 1))

    def grid_for(self, n: int, per_block: int = BLOCK) -> Launch:
        if self.flavour.barriers:
            return Launch("", max(1, min(math.ceil(n / per_block), MAX_GRID)), per_block)
        # host emulation: a few blocks of a few threads, so that the index arithmetic and
        # the grid-stride loops are exercised as on a GPU
        return Launch("", max(1, min(n, 3)), max(1, min(n, 32)))

    def elementwise_kernel(self, suffix: str, shape: tuple[int, ...], values: list[Value]
                           ) -> None:
        fn, b = self.new_kernel(suffix)
        n = int(np.prod(shape, dtype=np.int64))
        width = VECTOR if self.aligned and n % VECTOR == 0 and all(
            self.element_bytes(v) == 4 for v in [*values, *self.inputs]
            if not isinstance(v, LiteralValue)) else 1
        if width > 1:
            for k in range(len(self.outputs) + len(self.inputs)):
                if isinstance(fn.args[k].type, ll.PointerType):
                    fn.args[k].attributes.align = 16
        tid, bid, bdim, gdim = self.flavour.indices(b, fn)
        start = b.add(b.mul(bid, bdim), tid)
        step = b.mul(bdim, gdim)
        ctx = KernelContext(self, fn, b)
        with _loop(b, start, ll.Constant(I64, n // width), "q", step) as q:
            # every lane's loads of inputs of the output's shape first (math may branch,
            # and loads in one basic block merge into vector loads), then every lane's
            # values, then the stores
            lanes = []
            for lane in range(width):
                i = q if width == 1 else b.add(b.mul(q, ll.Constant(I64, width),
                                                     flags=["nuw", "nsw"]),
                                               ll.Constant(I64, lane), flags=["nuw", "nsw"])
                idx = unflatten(b, i, shape)
                ctx.memo = {}
                ctx.flat = (list(idx), shape, i)
                if width > 1:
                    for v, by_value in zip(self.inputs, self.by_value, strict=True):
                        if not by_value and shape_of(self.types[v]) == shape:
                            ctx.value_at(v, idx)
                lanes.append((i, idx, ctx.memo, ctx.flat))
            results = []
            for i, idx, memo, flat in lanes:
                ctx.memo, ctx.flat = memo, flat
                results.append((i, [ctx.value_at(v, idx) for v in values]))
            for v_index, v in enumerate(values):
                for i, xs in results:
                    ctx.store(fn.args[self.outputs.index(v)], self.types[v].dtype, i,
                              xs[v_index])
            ctx.raise_flags()
        b.ret_void()
        g = self.grid_for(n // width)
        self.launches.append(Launch(fn.name, g.grid, g.block))

    def element_bytes(self, v: Value) -> int:
        return int(np.dtype(numpy_dtype(self.types[v].dtype)).itemsize)

    # ------------------------------------------------------------ reductions

    def reduction_kernels(self, suffix: str, r: Instruction) -> None:
        space = reduction_space(r, self.types)
        outputs, reduced = space.output_count, space.reduced_count
        split = (self.flavour.barriers and outputs < 64 and reduced >= SPLIT_MIN)
        if split:
            parts = min(1024, math.ceil(reduced / (BLOCK * 16)))
            offset = self.scratch
            dtype = accumulation_dtype(r, self.types[r].dtype)  # partials stay wide
            self.scratch += outputs * parts * int(np.dtype(numpy_dtype(dtype)).itemsize)
            self.scratch = (self.scratch + 255) // 256 * 256
            self.block_reduction(suffix + "a", r, space, parts, offset)
            self.finish_split(suffix + "b", r, space, parts, offset)
        elif self.flavour.barriers and reduced > 64:
            self.block_reduction(suffix, r, space, 1, None)
        else:
            self.thread_reduction(suffix, r, space)

    def thread_reduction(self, suffix: str, r: Instruction, space: ReductionSpace) -> None:
        fn, b = self.new_kernel(suffix)
        tid, bid, bdim, gdim = self.flavour.indices(b, fn)
        ctx = KernelContext(self, fn, b)
        k = self.outputs.index(r)
        with _loop(b, b.add(b.mul(bid, bdim), tid), ll.Constant(I64, space.output_count),
                   "o", b.mul(bdim, gdim)) as o:
            ctx.memo.clear()
            acc = ctx.fold(r, space, o, ll.Constant(I64, 0),
                           ll.Constant(I64, space.reduced_count), ll.Constant(I64, 1))
            ctx.store(fn.args[k], self.types[r].dtype, o, ctx.result_of(r, acc))
            ctx.raise_flags()
        b.ret_void()
        g = self.grid_for(space.output_count)
        self.launches.append(Launch(fn.name, g.grid, g.block))

    def block_reduction(self, suffix: str, r: Instruction, space: ReductionSpace, parts: int,
                        scratch_offset: int | None) -> None:
        """Blocks fold segments of the reduced elements (one per output, or `parts` per
        output into scratch memory)."""
        fn, b = self.new_kernel(suffix)
        tid, bid, _, gdim = self.flavour.indices(b, fn)
        ctx = KernelContext(self, fn, b)
        dtype = self.types[r].dtype
        wide = accumulation_dtype(r, dtype)
        segments = space.output_count * parts
        chunk = math.ceil(space.reduced_count / parts)
        with _loop(b, bid, ll.Constant(I64, segments), "seg", gdim) as seg:
            ctx.memo.clear()
            o = b.udiv(seg, ll.Constant(I64, parts)) if parts > 1 else seg
            part = b.urem(seg, ll.Constant(I64, parts)) if parts > 1 else ll.Constant(I64, 0)
            lo = b.mul(part, ll.Constant(I64, chunk))
            hi = b.select(b.icmp_unsigned("<", b.add(lo, ll.Constant(I64, chunk)),
                                          ll.Constant(I64, space.reduced_count)),
                          b.add(lo, ll.Constant(I64, chunk)),
                          ll.Constant(I64, space.reduced_count))
            acc = ctx.fold(r, space, o, b.add(lo, tid), hi, ll.Constant(I64, BLOCK))
            total = ctx.block_combine(r, acc)
            is_first = b.icmp_unsigned("==", tid, ll.Constant(I64, 0))
            with b.if_then(is_first):
                if scratch_offset is None:
                    ctx.store(fn.args[self.outputs.index(r)], dtype, o, ctx.result_of(r, total))
                else:
                    base = b.gep(fn.args[len(self.outputs) + len(self.inputs)],
                                 [ll.Constant(I64, scratch_offset)], source_etype=I8)
                    ctx.store(base, wide, seg, total)
            ctx.barrier()  # shared memory is reused by the next segment
            ctx.raise_flags()
        b.ret_void()
        self.launches.append(Launch(fn.name, max(1, min(segments, MAX_GRID)), BLOCK))

    def finish_split(self, suffix: str, r: Instruction, space: ReductionSpace, parts: int,
                     scratch_offset: int) -> None:
        fn, b = self.new_kernel(suffix)
        tid, bid, bdim, gdim = self.flavour.indices(b, fn)
        ctx = KernelContext(self, fn, b)
        dtype = self.types[r].dtype
        wide = accumulation_dtype(r, dtype)
        t = scalar_type(wide)
        base = b.gep(fn.args[len(self.outputs) + len(self.inputs)],
                     [ll.Constant(I64, scratch_offset)], source_etype=I8)
        name = combinator_name(r)
        with _loop(b, b.add(b.mul(bid, bdim), tid), ll.Constant(I64, space.output_count), "o",
                   b.mul(bdim, gdim)) as o:
            slot = ctx.entry_alloca(t)
            b.store(const_of(t, identity(name, dtype)), slot)
            with _loop(b, ll.Constant(I64, 0), ll.Constant(I64, parts), "p") as p:
                x = ctx.load(base, wide, b.add(b.mul(o, ll.Constant(I64, parts)), p))
                b.store(combine(ctx.emitter, name, b.load(slot, typ=t), x, False), slot)
            ctx.store(fn.args[self.outputs.index(r)], dtype, o,
                      ctx.result_of(r, b.load(slot, typ=t)))
        b.ret_void()
        self.launches.append(Launch(fn.name, max(1, min(math.ceil(space.output_count / BLOCK),
                                                          MAX_GRID)), BLOCK))


@dataclass
class ReductionSpace:
    """How a reduction's source index splits into an output index and a reduced index."""

    source: Value
    source_shape: tuple[int, ...]
    reduced_axes: list[int]  # source dimensions folded away
    kept_axes: list[int]

    @property
    def output_count(self) -> int:
        return int(np.prod([self.source_shape[k] for k in self.kept_axes], dtype=np.int64))

    @property
    def reduced_count(self) -> int:
        return int(np.prod([self.source_shape[k] for k in self.reduced_axes], dtype=np.int64))


def reduction_space(r: Instruction, types: dict[Value, TensorType]) -> ReductionSpace:
    src = r.x
    shape = shape_of(types[src]) if not isinstance(src, LiteralValue) else ()
    if r.opcode == "reduce":
        axes = list(range(len(shape))) if r.dims is None else sorted(r.dims)
    else:  # unbroadcast: the dimensions where the `like` shape is 1 but the source is not
        like = shape_of(types[r])
        axes = list(range(len(shape))) if not like else [
            k for k, (a, n) in enumerate(zip(like, shape, strict=True)) if a == 1 and n != 1]
    kept = [k for k in range(len(shape)) if k not in axes]
    return ReductionSpace(src, shape, axes, kept)


# ---------------------------------------------------------------- values at an index


class KernelContext:
    """Emits values of the region at indices, inside one kernel function."""

    def __init__(self, region: RegionBuilder, fn: ll.Function, b: ll.IRBuilder) -> None:
        self.region = region
        self.fn = fn
        self.b = b
        self.memo: dict[tuple[Value, tuple[int, ...]], ll.Value] = {}
        self.emitter = ScalarEmitter(b, region.math, self.site, self.dtype_of)
        self._shared: ll.GlobalVariable | None = None
        # (index, shape, flat index) of the element being computed: an input of the
        # output's shape read at the output's own index needs no index arithmetic
        self.flat: tuple[list[ll.Value], tuple[int, ...], ll.Value] | None = None

    # ------------------------------------------------------------ plumbing

    def site(self, inst: Instruction, message: str) -> int:
        self.region.sites.append((inst, message))
        return len(self.region.sites)

    def dtype_of(self, v: Any) -> DataType:
        t = self.region.types.get(v)
        if t is None:
            t = v.type
        assert isinstance(t, TensorType)
        return t.dtype

    def raise_flags(self) -> None:
        b = self.b
        err = self.fn.args[len(self.region.outputs) + len(self.region.inputs) + 1]
        for site, cond in self.emitter.flags:
            with b.if_then(cond, likely=False):
                b.store(ll.Constant(I32, site), err)
        self.emitter.flags.clear()

    def entry_alloca(self, t: ll.Type) -> ll.Value:
        entry = self.fn.blocks[0]
        eb = ll.IRBuilder(entry)
        eb.position_at_start(entry)
        return eb.alloca(t)

    def load(self, base: ll.Value, dtype: DataType, offset: ll.Value) -> ll.Value:
        b = self.b
        ptr = b.gep(base, [offset], inbounds=True, source_etype=element_type(dtype))
        v = b.load(ptr, typ=element_type(dtype))
        return b.trunc(v, I1) if dtype.is_bool else v

    def store(self, base: ll.Value, dtype: DataType, offset: ll.Value, v: ll.Value) -> None:
        b = self.b
        ptr = b.gep(base, [offset], inbounds=True, source_etype=element_type(dtype))
        b.store(b.zext(v, I8) if v.type == I1 else v, ptr)

    # ------------------------------------------------------------ values

    def value_at(self, v: Value, idx: list[ll.Value]) -> ll.Value:
        key = (v, tuple(id(i) for i in idx))
        found = self.memo.get(key)
        if found is not None:
            return found
        out = self._value_at(v, idx)
        self.memo[key] = out
        return out

    def _value_at(self, v: Value, idx: list[ll.Value]) -> ll.Value:
        region, b = self.region, self.b
        if isinstance(v, LiteralValue) and v not in region.inputs:
            lit = v.literal
            if not isinstance(lit, ScalarLiteral):
                raise KernelError("a tensor literal inside a kernel")
            return scalar_constant(scalar(self.dtype_of(v)), lit.value)
        if v in region.inputs:
            k = region.inputs.index(v)
            arg = self.fn.args[len(region.outputs) + k]
            t = region.types[v]
            if region.by_value[k]:
                return arg
            shape = shape_of(t)
            flat = self.flat
            if flat is not None and flat[1] == shape and len(idx) == len(flat[0]) and all(
                    x is y for x, y in zip(idx, flat[0], strict=True)):
                return self.load(arg, t.dtype, flat[2])  # read where the output is written
            return self.load(arg, t.dtype, linear(b, idx, strides_of(shape)))
        assert isinstance(v, Instruction) and v in region.members, v
        op = v.opcode
        shape = shape_of(region.types[v])
        if op == "random":
            return self.random_at(v, idx, shape)
        window = WINDOW_RULES.get(op)
        if window is not None:
            return window(self, v, idx)
        if v.has_trait("reduction"):
            return self.reduction_at(v, idx)
        layout = LAYOUT_RULES.get(op)
        if layout is not None:
            return layout(self, v, idx, shape)
        args = [self.value_at(u, self.broadcast_index(u, idx, shape))
                for u in direct_operands(v)]
        out = rule_of(v)(self.emitter, v, args)  # type: ignore[operator]
        self.raise_flags()  # here, where the condition is defined (maybe inside a fold)
        return out

    def random_at(self, v: Instruction, idx: list[ll.Value], shape: tuple[int, ...]
                  ) -> ll.Value:
        """Element `idx` of a `random`: its element of the stream, counted from where the
        region's draws start (the state's counter) and where this `random`'s start."""
        b, dtype = self.b, self.dtype_of(v)
        state = self.fn.args[len(self.region.outputs) + len(self.region.inputs) + 2]
        key = b.load(state, typ=I64)
        counter = b.load(b.gep(state, [ll.Constant(I64, 1)], source_etype=I64), typ=I64)
        start = b.add(counter, ll.Constant(I64, self.region.draw_starts[v]))
        index = b.add(start, linear(b, idx, strides_of(shape)))
        lo = self.value_at(v.lower, [])
        hi = self.value_at(v.upper, [])
        self.emitter.flags.append((self.site(v, "random needs lower < upper, found an "
                                                "empty range"),
                                   random_stream.bad_range(b, lo, hi, dtype)))
        self.raise_flags()
        return random_stream.value_from_bits(b, random_stream.element_bits(b, key, index), lo,
                                             hi, dtype)

    def operand_shape(self, u: Value) -> tuple[int, ...]:
        t = self.region.types.get(u)
        if t is None:
            return ()
        return shape_of(t)

    def extent(self, u: Value, axis: int) -> int:
        """`u`'s size along `axis`: from the region's types, or, for a scalar literal
        splatted to a tensor (no region operand: its value is a constant), from its type."""
        shape = self.operand_shape(u)
        if not shape and isinstance(u.type, TensorType) and u.type.is_static:
            shape = shape_of(u.type)
        if axis >= len(shape):
            raise KernelError(f"an operand of rank {len(shape)} concatenated along {axis}")
        return shape[axis]

    def broadcast_index(self, u: Value, idx: list[ll.Value], shape: tuple[int, ...]
                        ) -> list[ll.Value]:
        us = self.operand_shape(u)
        if not us:
            return []
        zero = ll.Constant(I64, 0)
        return [zero if a == 1 and n != 1 else i for a, n, i in zip(us, shape, idx, strict=True)]

    # ------------------------------------------------------------ layout

    def _layout_padShape(self, v: Instruction, idx: list[ll.Value], shape: tuple[int, ...]
                         ) -> ll.Value:
        return self.value_at(v.x, idx[:v.axis] + idx[v.axis + 1:])

    def _layout_squeezeShape(self, v: Instruction, idx: list[ll.Value], shape: tuple[int, ...]
                             ) -> ll.Value:
        return self.value_at(v.x, [*idx[:v.axis], ll.Constant(I64, 0), *idx[v.axis:]])

    def _layout_shapeCast(self, v: Instruction, idx: list[ll.Value], shape: tuple[int, ...]
                          ) -> ll.Value:
        src = self.operand_shape(v.x)
        flat = linear(self.b, idx, _dense_strides(shape))
        return self.value_at(v.x, unflatten(self.b, flat, src))

    def _layout_transpose(self, v: Instruction, idx: list[ll.Value], shape: tuple[int, ...]
                          ) -> ll.Value:
        order = permutation(v, len(idx))
        source = [idx[0]] * len(idx)
        for i, k in enumerate(order):
            source[k] = idx[i]
        return self.value_at(v.x, source)

    def _layout_reverse(self, v: Instruction, idx: list[ll.Value], shape: tuple[int, ...]
                        ) -> ll.Value:
        out = list(idx)
        for k in v.dims:
            out[k] = self.b.sub(ll.Constant(I64, shape[k] - 1), idx[k])
        return self.value_at(v.x, out)

    def _layout_slice(self, v: Instruction, idx: list[ll.Value], shape: tuple[int, ...]
                      ) -> ll.Value:
        return self.value_at(v.x, [self.b.add(idx[0], ll.Constant(I64, v.lower)), *idx[1:]])

    def _layout_concatenate(self, v: Instruction, idx: list[ll.Value], shape: tuple[int, ...]
                            ) -> ll.Value:
        b, axis = self.b, v.axis
        result: ll.Value | None = None
        start = 0
        pieces = []
        for u in v.xs:
            n = self.extent(u, axis)
            pieces.append((u, start, n))
            start += n
        # every piece is read at a clamped index, and the one that holds the element wins
        for u, first, n in reversed(pieces):
            local = b.sub(idx[axis], ll.Constant(I64, first))
            inside = b.icmp_unsigned("<", local, ll.Constant(I64, n))
            clamped = b.select(inside, local, ll.Constant(I64, 0))
            x = self.value_at(u, [*idx[:axis], clamped, *idx[axis + 1:]])
            result = x if result is None else b.select(inside, x, result)
        assert result is not None
        return result

    # ------------------------------------------------------------ windows

    def window_positions(self, out: list[ll.Value], taps: list[ll.Value],
                         sizes: Sequence[int], strides: Sequence[int],
                         pads: Sequence[tuple[int, int]], left: Sequence[int],
                         right: Sequence[int]) -> tuple[list[ll.Value], ll.Value]:
        """The input index an output position `out` reads at window position `taps` — p =
        out·stride + tap·right − low pad, divided by the left dilation — clamped into the
        input, and whether it is a real element (not padding, not between dilated ones)."""
        b = self.b
        zero = ll.Constant(I64, 0)
        valid: ll.Value = ll.Constant(I1, 1)
        index = []
        for o, t, size, st, (lo, _), a, r in zip(out, taps, sizes, strides, pads, left, right,
                                                 strict=True):
            p = b.sub(b.add(b.mul(o, ll.Constant(I64, st)), b.mul(t, ll.Constant(I64, r))),
                      ll.Constant(I64, lo))
            valid = b.and_(valid, b.icmp_signed(">=", p, zero))
            if a > 1:
                valid = b.and_(valid, b.icmp_signed("==", b.srem(p, ll.Constant(I64, a)), zero))
                p = b.sdiv(p, ll.Constant(I64, a))
            valid = b.and_(valid, b.icmp_signed("<", p, ll.Constant(I64, size)))
            index.append(b.select(valid, p, zero))
        return [b.select(valid, i, zero) for i in index], valid

    def _window_convolve(self, v: Instruction, idx: list[ll.Value]) -> ll.Value:
        """Σ over the group's input channels and the window of x · kernel, accumulated in
        the element type (float32 for float16), rounded once."""
        b = self.b
        xs, ks = self.operand_shape(v.x), self.operand_shape(v.kernel)
        n = len(xs) - 2
        groups = v.groups or 1
        cin_g, cout_g = ks[1], ks[0] // groups
        dtype = self.region.types[v].dtype
        acc_t = scalar_type(dtype if dtype.bits >= 32 else DataType("float", 32))
        slot = self.entry_alloca(acc_t)
        b.store(ll.Constant(acc_t, 0.0), slot)
        channel0 = b.mul(b.udiv(idx[1], ll.Constant(I64, cout_g)), ll.Constant(I64, cin_g))
        taps = int(np.prod(ks[2:], dtype=np.int64))
        saved = dict(self.memo)
        with _loop(b, ll.Constant(I64, 0), ll.Constant(I64, cin_g), "ci") as ci, \
                _loop(b, ll.Constant(I64, 0), ll.Constant(I64, taps), "tap") as tap:
            self.memo.clear()
            where = unflatten(b, tap, ks[2:])
            pos, valid = self.window_positions(
                idx[2:], where, xs[2:], v.strides or [1] * n, v.padding or [(0, 0)] * n,
                v.leftDilation or [1] * n, v.rightDilation or [1] * n)
            x = self.value_at(v.x, [idx[0], b.add(channel0, ci), *pos])
            k = self.value_at(v.kernel, [idx[1], ci, *where])
            if x.type != acc_t:
                x, k = b.fpext(x, acc_t), b.fpext(k, acc_t)
            term = b.select(valid, b.fmul(x, k), ll.Constant(acc_t, 0.0))
            b.store(b.fadd(b.load(slot, typ=acc_t), term), slot)
        self.memo = saved
        return rounded(b, b.load(slot, typ=acc_t), scalar_type(dtype))

    def _window_reduceWindow(self, v: Instruction, idx: list[ll.Value]) -> ll.Value:
        """init ⊕ the window's elements, a padded position counting as init (what the
        interpreter's padded fold computes), in the reduction's accumulation type."""
        b = self.b
        xs = self.operand_shape(v.x)
        dtype = self.region.types[v].dtype
        acc_t = scalar_type(accumulation_dtype(v, dtype))
        name = combinator_name(v)

        def widen(value: ll.Value) -> ll.Value:
            return b.fpext(value, acc_t) if value.type != acc_t else value

        init = widen(self.value_at(v.init, []))
        slot = self.entry_alloca(acc_t)
        b.store(init, slot)
        pads = [window_pads(size, d, st, v.padding)
                for size, d, st in zip(xs, v.dims, v.strides, strict=True)]
        taps = int(np.prod(v.dims, dtype=np.int64))
        saved = dict(self.memo)
        with _loop(b, ll.Constant(I64, 0), ll.Constant(I64, taps), "tap") as tap:
            self.memo.clear()
            where = unflatten(b, tap, list(v.dims))
            pos, valid = self.window_positions(idx, where, xs, v.strides, pads,
                                               [1] * len(xs), [1] * len(xs))
            x = b.select(valid, widen(self.value_at(v.x, pos)), init)
            b.store(combine(self.emitter, name, b.load(slot, typ=acc_t), x, False), slot)
        self.memo = saved
        return rounded(b, b.load(slot, typ=acc_t), scalar_type(dtype))

    def _window_scan(self, v: Instruction, idx: list[ll.Value]) -> ll.Value:
        """The inclusive prefix of `x` at `idx`, folded in numpy's order (the first listed
        dimension innermost, each line from its first element, in the element type), so
        that the result is the interpreter's bit for bit."""
        b = self.b
        xs = self.operand_shape(v.x)
        if int(np.prod([xs[d] for d in v.dims], dtype=np.int64)) > SCAN_MAX:
            raise KernelError(f"a scan over more than {SCAN_MAX} elements per line")
        t = scalar_type(self.region.types[v].dtype)
        name = combinator_name(v)
        one = ll.Constant(I64, 1)
        saved = dict(self.memo)

        def level(k: int, index: list[ll.Value]) -> ll.Value:
            if k < 0:
                self.memo.clear()
                return self.value_at(v.x, index)
            axis = v.dims[k]
            slot = self.entry_alloca(t)
            b.store(level(k - 1, [*index[:axis], ll.Constant(I64, 0), *index[axis + 1:]]),
                    slot)
            with _loop(b, one, b.add(index[axis], one), f"scan{k}") as j:
                x = level(k - 1, [*index[:axis], j, *index[axis + 1:]])
                b.store(combine(self.emitter, name, b.load(slot, typ=t), x, False), slot)
            return b.load(slot, typ=t)

        out = level(len(v.dims) - 1, list(idx))
        self.memo = saved
        return out

    # ------------------------------------------------------------ reductions

    def full_index(self, space: ReductionSpace, o: ll.Value, r: ll.Value) -> list[ll.Value]:
        kept = unflatten(self.b, o, [space.source_shape[k] for k in space.kept_axes])
        red = unflatten(self.b, r, [space.source_shape[k] for k in space.reduced_axes])
        idx: list[ll.Value] = [ll.Constant(I64, 0)] * len(space.source_shape)
        for k, i in zip(space.kept_axes, kept, strict=True):
            idx[k] = i
        for k, i in zip(space.reduced_axes, red, strict=True):
            idx[k] = i
        return idx

    def fold(self, r: Instruction, space: ReductionSpace, o: ll.Value, start: ll.Value,
             stop: ll.Value, step: ll.Value) -> ll.Value:
        """combinator-fold of the source over reduced elements start, start+step, … < stop
        for output element `o` (without the init value), in the accumulation data type."""
        b = self.b
        dtype = self.region.types[r].dtype
        t = scalar_type(accumulation_dtype(r, dtype))
        name = combinator_name(r)
        slot = self.entry_alloca(t)
        b.store(const_of(t, identity(name, dtype)), slot)
        saved = dict(self.memo)
        with _loop(b, start, stop, "r", step) as i:
            self.memo.clear()
            x = self.value_at(space.source, self.full_index(space, o, i))
            if x.type != t:
                x = b.fpext(x, t)
            b.store(combine(self.emitter, name, b.load(slot, typ=t), x, False), slot)
        self.memo = saved
        return b.load(slot, typ=t)

    def result_of(self, r: Instruction, acc: ll.Value) -> ll.Value:
        """init ⊕ a fold's `acc`, rounded once to the reduction's data type."""
        b = self.b
        if r.opcode == "reduce":
            init = self.value_at(r.init, [])
            if init.type != acc.type:
                init = b.fpext(init, acc.type)
            acc = combine(self.emitter, combinator_name(r), init, acc, False)
        return rounded(b, acc, scalar_type(self.region.types[r].dtype))

    def reduction_at(self, r: Instruction, idx: list[ll.Value]) -> ll.Value:
        """A reduction used inside the region: its value at `idx`, folded on the spot."""
        space = reduction_space(r, self.region.types)
        out_shape = [space.source_shape[k] for k in space.kept_axes]
        if r.opcode == "reduce":
            kept_idx = idx
        else:  # unbroadcast keeps size-1 dimensions where it folds
            kept_idx = [i for k, i in enumerate(idx) if k in space.kept_axes] if idx else []
        o = linear(self.b, kept_idx, _dense_strides(out_shape)) if out_shape else \
            ll.Constant(I64, 0)
        acc = self.fold(r, space, o, ll.Constant(I64, 0), ll.Constant(I64, space.reduced_count),
                        ll.Constant(I64, 1))
        return self.result_of(r, acc)

    # ------------------------------------------------------------ block-level combining

    def barrier(self) -> None:
        f = _declare(self.b.module, "llvm.nvvm.barrier0", ll.VoidType(), [])
        self.b.call(f, [])

    def shared(self) -> ll.Value:
        if self._shared is None:
            g = ll.GlobalVariable(self.b.module, ll.ArrayType(I64, BLOCK // WARP),
                                  self.fn.name + ".partials", addrspace=3)
            g.linkage = "internal"
            g.initializer = ll.Constant(ll.ArrayType(I64, BLOCK // WARP), None)
            g.align = 8
            self._shared = g
        return self.b.addrspacecast(self._shared, PTR)

    def shuffle(self, x: ll.Value, lane_mask: int) -> ll.Value:
        """The value `x` of the lane `lane ^ lane_mask` of this warp."""
        b = self.b
        shfl = _declare(b.module, "llvm.nvvm.shfl.sync.bfly.i32", I32, [I32, I32, I32, I32])
        t = x.type

        def one(word: ll.Value) -> ll.Value:
            return b.call(shfl, [ll.Constant(I32, -1), word, ll.Constant(I32, lane_mask),
                                 ll.Constant(I32, 0x1F)])

        if isinstance(t, ll.DoubleType) or t == I64:
            bits = b.bitcast(x, I64) if isinstance(t, ll.DoubleType) else x
            lo = one(b.trunc(bits, I32))
            hi = one(b.trunc(b.lshr(bits, ll.Constant(I64, 32)), I32))
            out = b.or_(b.zext(lo, I64), b.shl(b.zext(hi, I64), ll.Constant(I64, 32)))
            return b.bitcast(out, t) if isinstance(t, ll.DoubleType) else out
        if isinstance(t, ll.FloatType):
            return b.bitcast(one(b.bitcast(x, I32)), t)
        if isinstance(t, ll.HalfType):
            w = one(b.zext(b.bitcast(x, ll.IntType(16)), I32))
            return b.bitcast(b.trunc(w, ll.IntType(16)), t)
        assert isinstance(t, ll.IntType)
        if t.width == 32:
            return one(x)
        return b.trunc(one(b.zext(x, I32)), t)

    def block_combine(self, r: Instruction, acc: ll.Value) -> ll.Value:
        """The fold of every thread's `acc` (valid in thread 0), in a fixed tree: within
        warps by shuffles, then the warps' results in warp 0."""
        b = self.b
        name = combinator_name(r)
        dtype = self.region.types[r].dtype
        t = acc.type
        for off in (16, 8, 4, 2, 1):
            acc = combine(self.emitter, name, acc, self.shuffle(acc, off), False)
        tid = self.region.flavour.indices(b, self.fn)[0]
        lane = b.and_(tid, ll.Constant(I64, WARP - 1))
        warp = b.lshr(tid, ll.Constant(I64, 5))
        smem = self.shared()
        with b.if_then(b.icmp_unsigned("==", lane, ll.Constant(I64, 0))):
            b.store(acc, b.gep(smem, [warp], source_etype=I64))
        self.barrier()
        result = self.entry_alloca(t)
        b.store(const_of(t, identity(name, dtype)), result)
        with b.if_then(b.icmp_unsigned("==", warp, ll.Constant(I64, 0))):
            inside = b.icmp_unsigned("<", lane, ll.Constant(I64, BLOCK // WARP))
            safe = b.select(inside, lane, ll.Constant(I64, 0))
            v = b.load(b.gep(smem, [safe], source_etype=I64), typ=t)
            v = b.select(inside, v, const_of(t, identity(name, dtype)))
            for off in (16, 8, 4, 2, 1):
                v = combine(self.emitter, name, v, self.shuffle(v, off), False)
            b.store(v, result)
        return b.load(result, typ=t)


def _dense_strides(shape: Sequence[int]) -> list[int]:
    out, acc = [0] * len(shape), 1
    for k in range(len(shape) - 1, -1, -1):
        out[k] = acc
        acc *= shape[k]
    return out



# ---------------------------------------------------------------- generated GEMM


def gemm_module(name: str, dtype: DataType, batch: int, m: int, n: int, k: int,
                flavour: Flavour, module: ll.Module | None = None, *, trans_a: bool = False,
                trans_b: bool = False) -> tuple[ll.Module, Launch]:
    """`C[b] = A[b] · B[b]` for row-major A (m×k), B (k×n), C (m×n) — A stored as k×m when
    `trans_a`, B as n×k when `trans_b` — one thread per element of C, summing in order: the
    GPU's `dot` when no BLAS library serves the data type, and the host emulation's.
    Parameters: C, A, B. bf16 and f16 are summed in f32 and rounded once, as cuBLAS does."""
    module = module if module is not None else ll.Module(name=name)
    bf16, half = dtype == BF16, dtype == F16
    t = ll.FloatType() if bf16 or half else scalar_type(dtype)
    et = element_type(dtype)
    fn = flavour.kernel(module, name, [PTR, PTR, PTR])
    for arg in fn.args[:3]:
        arg.add_attribute("noalias")
    b = ll.IRBuilder(fn.append_basic_block("entry"))
    slot = b.alloca(t)
    tid, bid, bdim, gdim = flavour.indices(b, fn)
    total = batch * m * n

    def c64(x: int) -> ll.Constant:
        return ll.Constant(I64, x)

    with _loop(b, b.add(b.mul(bid, bdim), tid), c64(total), "e", b.mul(bdim, gdim)) as e:
        j = b.urem(e, c64(n))
        rest = b.udiv(e, c64(n))
        i = b.urem(rest, c64(m))
        bb = b.udiv(rest, c64(m))
        # element (i, kk) of A and (kk, j) of B: base + i·si + kk·sk
        a_base = b.add(b.mul(bb, c64(m * k)), b.mul(i, c64(1 if trans_a else k)))
        a_step = c64(m if trans_a else 1)
        b_base = b.add(b.mul(bb, c64(k * n)), b.mul(j, c64(k if trans_b else 1)))
        b_step = c64(1 if trans_b else n)
        b.store(const_of(t, 0), slot)
        with _loop(b, c64(0), c64(k), "k") as kk:
            x = b.load(b.gep(fn.args[1], [b.add(a_base, b.mul(kk, a_step))], source_etype=et),
                       typ=et)
            y = b.load(b.gep(fn.args[2], [b.add(b_base, b.mul(kk, b_step))], source_etype=et),
                       typ=et)
            if bf16:
                x, y = widen(b, x), widen(b, y)
            elif half:
                x, y = b.fpext(x, t), b.fpext(y, t)
            acc = b.load(slot, typ=t)
            integer = isinstance(t, ll.IntType)
            b.store(b.add(acc, b.mul(x, y)) if integer else b.fadd(acc, b.fmul(x, y)), slot)
        total_of_e = b.load(slot, typ=t)
        if bf16:
            total_of_e = flavour.math(module)(b, "to_bf16", [total_of_e])
        elif half:
            total_of_e = b.fptrunc(total_of_e, et)
        b.store(total_of_e, b.gep(fn.args[0], [e], source_etype=et))
    b.ret_void()
    flavour.finish(module, [fn])
    if flavour.barriers:
        launch = Launch(name, max(1, min(math.ceil(total / BLOCK), MAX_GRID)), BLOCK)
    else:
        launch = Launch(name, max(1, min(total, 3)), max(1, min(total, 32)))
    return module, launch


__all__ = ["BLOCK", "HostFlavour", "KernelError", "Launch", "NVPTXFlavour", "RegionBuilder",
           "RegionCode", "gemm_module", "is_kernel_instruction", "reduction_space",
           "region_operands"]


# The index rule of each layout instruction (which operand element an output element is):
# layout is never materialized inside a region, only read through.
LAYOUT_RULES: dict[str, Callable[[KernelContext, Instruction, list[ll.Value], tuple[int, ...]],
                                 ll.Value]] = {
    "padShape": KernelContext._layout_padShape,
    "squeezeShape": KernelContext._layout_squeezeShape,
    "shapeCast": KernelContext._layout_shapeCast,
    "transpose": KernelContext._layout_transpose,
    "reverse": KernelContext._layout_reverse,
    "slice": KernelContext._layout_slice,
    "concatenate": KernelContext._layout_concatenate,
}

# The fold of each windowed instruction at one output element: a convolution's products,
# pooling's combinator over the (padded) window.
WINDOW_RULES: dict[str, Callable[[KernelContext, Instruction, list[ll.Value]], ll.Value]] = {
    "convolve": KernelContext._window_convolve,
    "reduceWindow": KernelContext._window_reduceWindow,
    "scan": KernelContext._window_scan,
}
