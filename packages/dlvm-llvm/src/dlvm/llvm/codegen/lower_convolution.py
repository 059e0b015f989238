"""`convolve` on the CPU: im2col and the BLAS GEMM for float32/float64, a loop nest otherwise.

For each group, the input windows are copied into a *column matrix* — one row per (input
channel, kernel tap), one column per (image, output position) — and the group's kernel rows
multiply it in one `?gemm` (`dlvm_sgemm`/`dlvm_dgemm`, as `dot` calls them). Images are taken
in blocks whose column matrix stays under `COLUMN_LIMIT` elements, so a batch of small images
is one large product rather than many small ones (OpenBLAS's fixed cost per call outweighs a
product of a few thousand flops). A block of one image is multiplied straight into the output;
a larger block into a scratch matrix whose rows are then copied to their images.

The copy into columns is a function of its own (`outlined.py`) over the block's (image,
input channel) pairs, split over the thread pool (`dlvm_parallel_for`) when large;
BLAS threads the product itself, between the pool's jobs, never inside one. In the innermost
spatial dimension the columns of a row are three runs — padding, a (strided) copy of the
input row, padding — whose bounds are worked out once per kernel tap, so the copy has no test
per element and vectorizes. Static kernel windows and output rows up to `UNROLL` are emitted
as straight-line code, where those bounds fold to constants (executables do not run LLVM's
unrolling pass, and rows of a few elements are too short for its vectorizer).

Other element types (float16, integers), or no BLAS: the direct loop nest, one accumulator per
output element.
"""

from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir as ll

from dlvm.ir import Instruction

from .emit import add, for_range, gep, i32, i64, is_const, memcpy, mul
from .emit import product as product_of
from .function import FunctionLowering, Tensor, lowers
from .layout import I1, I64, PTR, element_size, element_type, scalar_type
from .lower_tensor import contiguous_strides, dot_uses_blas, floor_divide, gemm
from .outlined import Outlined

COLUMN_LIMIT = 1 << 18  # elements of a block's column matrix (1 MiB of float32: fits in L2)
UNROLL = 16  # static kernel sizes and output rows up to this are emitted as straight-line code


@dataclass(frozen=True)
class Geometry:
    """A convolution's attributes, defaults filled in, and its output's spatial sizes."""

    strides: list[int]
    pads: list[tuple[int, int]]
    ld: list[int]  # left (input) dilation
    rd: list[int]  # right (kernel) dilation
    groups: int
    spatial: list[ll.Value]


def geometry(fl: FunctionLowering, inst: Instruction, x: Tensor, k: Tensor) -> Geometry:
    """Attributes and output sizes as the type rule defines them (an empty result where the
    dilated window is larger than the padded, dilated input)."""
    b = fl.b
    n = fl.tensor_type(inst).rank - 2
    strides = list(inst.strides or [1] * n)
    pads = [tuple(p) for p in (inst.padding or [(0, 0)] * n)]
    ld = list(inst.leftDilation or [1] * n)
    rd = list(inst.rightDilation or [1] * n)
    spatial = []
    for s, w, st, (lo, hi), a, c in zip(x.dims[2:], k.dims[2:], strides, pads, ld, rd,
                                        strict=True):
        base = b.select(b.icmp_signed(">", s, i64(0)),
                        b.add(b.add(b.mul(b.sub(s, i64(1)), i64(a)), i64(1)), i64(lo + hi)),
                        i64(lo + hi))
        window = b.add(b.mul(b.sub(w, i64(1)), i64(c)), i64(1))
        size = b.add(b.sdiv(b.sub(base, window), i64(st)), i64(1))
        spatial.append(b.select(b.icmp_signed(">", window, base), i64(0), size))
    return Geometry(strides, pads, ld, rd, inst.groups or 1, spatial)  # type: ignore[arg-type]


def check_channels(fl: FunctionLowering, cin: ll.Value, cout: ll.Value, per_group: ll.Value,
                   groups: int) -> None:
    """What the type rule checks of channel counts, for those known only now: `groups`
    divides both, and the kernel reads Cin/groups channels."""
    b = fl.b
    g = i64(groups)
    if groups != 1:
        for count, which in ((cout, "output"), (cin, "input")):
            fl.fail_unless_equal(b.srem(count, g) if not is_const(count) else
                                 i64(count.constant % groups), i64(0),
                                 f"convolve: groups {groups} must divide the {{0}} {which} "
                                 "channels", [count])
    fl.fail_unless_equal(per_group, b.sdiv(cin, g) if not is_const(cin) else
                         i64(cin.constant // groups),
                         f"convolve: the kernel has {{0}} input channels per group, the input "
                         f"{{1}}/{groups}", [per_group, cin])


@lowers("convolve")
def lower_convolve(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """out[n, o, p…] = Σ_c Σ_q x̃[n, c, p·s + q·rd]·k[o, c, q…], x̃ the input dilated by
    `leftDilation` and padded; channels split into `groups`."""
    x, k = fl.tensor(inst.x), fl.tensor(inst.kernel)
    t = fl.tensor_type(inst)
    geo = geometry(fl, inst, x, k)
    cout = k.dims[0]
    check_channels(fl, x.dims[1], cout, k.dims[1], geo.groups)
    struct, out = fl.new_tensor(t, [x.dims[0], cout, *geo.spatial])
    if dot_uses_blas(t):
        im2col_gemm(fl, inst, x, k, out, geo)
    else:
        direct(fl, inst, x, k, out, geo)
    return struct


# ---------------------------------------------------------------- im2col and GEMM


def clamp(b: ll.IRBuilder, v: ll.Value, lo: ll.Value, hi: ll.Value) -> ll.Value:
    v = b.select(b.icmp_signed("<", v, lo), lo, v)
    return b.select(b.icmp_signed(">", v, hi), hi, v)


def im2col_gemm(fl: FunctionLowering, inst: Instruction, x: Tensor, k: Tensor,
                out: ll.Value, geo: Geometry) -> None:
    b = fl.b
    t = fl.tensor_type(inst)
    elem = element_type(t.dtype)
    esize = i64(element_size(t.dtype))
    batch, cin, cout = x.dims[0], x.dims[1], k.dims[0]
    groups = geo.groups
    cin_g = b.sdiv(cin, i64(groups))
    cout_g = b.sdiv(cout, i64(groups))
    taps = product_of(b, k.dims[2:])
    rows = mul(b, cin_g, taps)
    positions = product_of(b, geo.spatial)
    channel = product_of(b, x.dims[2:])
    nonempty = b.and_(b.icmp_signed(">", batch, i64(0)), b.icmp_signed(">", positions, i64(0)))
    with b.if_then(nonempty):
        per_image = mul(b, rows, positions)
        per_image = b.select(b.icmp_signed("<", per_image, i64(1)), i64(1), per_image)
        block = clamp(b, b.sdiv(i64(COLUMN_LIMIT), per_image), i64(1), batch)
        columns = fl.alloc_array(mul(b, per_image, block), esize)
        col = fl.rt.data(b, columns)
        single = b.icmp_signed("==", block, i64(1))
        scratch_buf = fl.alloc_array(b.select(single, i64(1), mul(b, mul(b, cout_g, block),
                                                                  positions)), esize)
        scratch = fl.rt.data(b, scratch_buf)
        copy = column_copy(fl, inst, x, k, geo)
        blocks = b.sdiv(b.add(batch, b.sub(block, i64(1))), block)
        with for_range(b, i64(0), blocks, "cblock") as bi, \
                for_range(b, i64(0), i64(groups), "cgroup") as g:
            first = b.mul(bi, block)
            count = b.sub(batch, first)
            count = b.select(b.icmp_signed("<", count, block), count, block)
            width = b.mul(count, positions)
            source = gep(b, elem, x.data, b.mul(b.add(b.mul(first, cin), b.mul(g, cin_g)),
                                                channel))
            copy.call([source, col, width], b.mul(count, cin_g), b.mul(rows, width))
            kernel = gep(b, elem, k.data, b.mul(b.mul(g, cout_g), rows))
            here = gep(b, elem, out, b.mul(b.add(b.mul(first, cout), b.mul(g, cout_g)),
                                           positions))
            target = b.select(single, here, scratch)
            gemm(fl, t, kernel, False, col, False, target, cout_g, width, rows)
            with b.if_then(b.not_(single)), for_range(b, i64(0), count, "cimage") as j, \
                    for_range(b, i64(0), cout_g, "cout") as o:
                dst = gep(b, elem, here, b.mul(b.add(b.mul(j, cout), o), positions))
                src = gep(b, elem, scratch, b.add(b.mul(o, width), b.mul(j, positions)))
                memcpy(b, dst, src, b.mul(positions, esize))
        b.call(fl.rt.get("release"), [fl.ctx, columns])
        b.call(fl.rt.get("release"), [fl.ctx, scratch_buf])


def column_copy(fl: FunctionLowering, inst: Instruction, x: Tensor, k: Tensor,
                geo: Geometry) -> Outlined:
    """col[(c, q…), j·P + p…] = x̃[j, c, p·s + q·rd] for the (image j, channel c) pairs of
    a task's range (j·Cin/g + c): x̃ the block's input from its group's first channel,
    dilated and padded."""
    t = fl.tensor_type(inst)
    elem = element_type(t.dtype)
    zero = ll.Constant(scalar_type(t.dtype), 0.0)
    n = t.rank - 2
    b0 = fl.b
    cin_g = b0.sdiv(x.dims[1], i64(geo.groups))
    positions = product_of(b0, geo.spatial)
    values = [cin_g, positions, x.dims[1], *x.dims[2:], *k.dims[2:], *geo.spatial]
    task = Outlined(fl, "dlvm.im2col", [PTR, PTR, I64], values)
    b = task.b
    g = task.get
    src_p, col_p, ld = task.args
    cin_g, positions, cin = g(cin_g), g(positions), g(x.dims[1])
    xdims = [g(d) for d in x.dims[2:]]
    kdims = [g(d) for d in k.dims[2:]]
    odims = [g(d) for d in geo.spatial]
    channel = product_of(b, xdims)
    image = mul(b, cin, channel)
    xstrides = [product_of(b, xdims[d + 1:]) for d in range(n)]
    ostrides = [product_of(b, odims[d + 1:]) for d in range(n)]
    begin, end = task.fn.args[1], task.fn.args[2]

    def store(v: ll.Value, index: ll.Value) -> None:
        b.store(v, gep(b, elem, col_p, index))

    def along(d: int, q: ll.Value) -> tuple[ll.Value, int]:
        """(offset of the tap in the dilated, padded input, stride) of dimension d."""
        return b.sub(b.mul(q, i64(geo.rd[d])), i64(geo.pads[d][0])), geo.strides[d]

    def position(d: int, qs: list[ll.Value], row: ll.Value, src: ll.Value,
                 ok: ll.Value | None) -> None:
        if d == n - 1:
            innermost(qs, row, src, ok)
            return
        offset, stride = along(d, qs[d])
        with for_range(b, i64(0), odims[d], f"p{d}") as p:
            i = b.add(b.mul(p, i64(stride)), offset)
            valid, index = inside(d, i)
            position(d + 1, qs, add(b, row, mul(b, p, ostrides[d])),
                     add(b, src, mul(b, index, xstrides[d])),
                     valid if ok is None else b.and_(ok, valid))

    def inside(d: int, i: ll.Value) -> tuple[ll.Value, ll.Value]:
        """(whether dilated index i is an input element, its index when it is, else 0)."""
        a = geo.ld[d]
        src_i = floor_divide(b, i, a)
        valid = b.and_(b.icmp_signed(">=", i, i64(0)), b.icmp_signed("<", src_i, xdims[d]))
        if a != 1:
            valid = b.and_(valid, b.icmp_signed("==", b.srem(i, i64(a)), i64(0)))
        return valid, b.select(valid, src_i, i64(0))

    def innermost(qs: list[ll.Value], row: ll.Value, src: ll.Value, ok: ll.Value | None
                  ) -> None:
        d = n - 1
        offset, stride = along(d, qs[d])
        if geo.ld[d] != 1:  # a test per element
            with for_range(b, i64(0), odims[d], "pe") as p:
                valid, index = inside(d, b.add(b.mul(p, i64(stride)), offset))
                if ok is not None:
                    valid = b.and_(valid, ok)
                value = b.load(gep(b, elem, src_p, add(b, src, index)), typ=elem)
                store(b.select(valid, value, zero), add(b, row, p))
            return
        # i = p·stride + offset in [0, X): p in [lo, hi)
        lo = clamp(b, floor_divide(b, b.sub(i64(stride - 1), offset), stride), i64(0), odims[d])
        hi = clamp(b, floor_divide(b, b.add(b.sub(xdims[d], offset), i64(stride - 1)), stride),
                   lo, odims[d])
        if ok is not None:
            hi = b.select(ok, hi, lo)
        if is_const(odims[d]) and odims[d].constant <= UNROLL:  # a short row, straight-line
            for p in range(odims[d].constant):
                valid = b.and_(b.icmp_signed("<=", lo, i64(p)), b.icmp_signed(">", hi, i64(p)))
                index = b.select(valid, add(b, src, b.add(offset, i64(p * stride))), src)
                value = b.load(gep(b, elem, src_p, index), typ=elem)
                store(b.select(valid, value, zero), add(b, row, i64(p)))
            return
        with for_range(b, i64(0), lo, "pl") as p:
            store(zero, add(b, row, p))
        base = add(b, src, offset)
        with for_range(b, lo, hi, "pc") as p:
            value = b.load(gep(b, elem, src_p, add(b, base, b.mul(p, i64(stride)))), typ=elem)
            store(value, add(b, row, p))
        with for_range(b, hi, odims[d], "ph") as p:
            store(zero, add(b, row, p))

    def tap(d: int, qs: list[ll.Value], r: ll.Value, j: ll.Value, src: ll.Value) -> None:
        if d == n:
            row = add(b, mul(b, r, ld), mul(b, j, positions))
            position(0, qs, row, src, None)
            return
        if is_const(kdims[d]) and kdims[d].constant <= UNROLL:
            for q in range(kdims[d].constant):  # offsets and bounds fold to constants
                tap(d + 1, [*qs, i64(q)], add(b, mul(b, r, kdims[d]), i64(q)), j, src)
            return
        with for_range(b, i64(0), kdims[d], f"q{d}") as q:
            tap(d + 1, [*qs, q], add(b, mul(b, r, kdims[d]), q), j, src)

    with for_range(b, begin, end, "plane") as f:  # (image, channel) pairs
        j, c = b.sdiv(f, cin_g), b.srem(f, cin_g)
        tap(0, [], c, j, add(b, mul(b, j, image), mul(b, c, channel)))
    b.ret(i32(0))
    return task


# ---------------------------------------------------------------- direct loops


def direct(fl: FunctionLowering, inst: Instruction, x: Tensor, k: Tensor, out: ll.Value,
           geo: Geometry) -> None:
    """The loop nest: one accumulator per output element, a bounds test per tap."""
    b = fl.b
    t = fl.tensor_type(inst)
    n = t.rank - 2
    strides, pads, ld, rd, groups = geo.strides, geo.pads, geo.ld, geo.rd, geo.groups
    spatial = geo.spatial
    cout = k.dims[0]
    out_dims = [x.dims[0], cout, *spatial]
    cin_g = b.sdiv(x.dims[1], i64(groups))
    cout_g = b.sdiv(cout, i64(groups))
    xs, ks, os_ = (contiguous_strides(b, d) for d in (x.dims, k.dims, out_dims))
    st_ = scalar_type(t.dtype)
    elem = element_type(t.dtype)
    is_float = t.dtype.is_float
    acc = fl.result_slot(st_)
    zero = ll.Constant(st_, 0.0 if is_float else 0)
    with for_range(b, i64(0), x.dims[0], "n") as ni, for_range(b, i64(0), cout, "o") as o:
        g = b.sdiv(o, cout_g)

        def positions(d: int, p: list[ll.Value]) -> None:
            if d == n:
                b.store(zero, acc)
                with for_range(b, i64(0), cin_g, "c") as c:
                    taps(0, p, c, None, add(b, mul(b, ni, xs[0]), mul(b, b.add(
                        b.mul(g, cin_g), c), xs[1])), add(b, mul(b, o, ks[0]),
                                                          mul(b, c, ks[1])))
                dst = add(b, mul(b, ni, os_[0]), mul(b, o, os_[1]))
                for j, pj in enumerate(p):
                    dst = add(b, dst, mul(b, pj, os_[2 + j]))
                fl.store_scalar(b.load(acc, typ=st_), gep(b, elem, out, dst))
                return
            with for_range(b, i64(0), spatial[d], f"p{d}") as pd:
                positions(d + 1, [*p, pd])

        def taps(d: int, p: list[ll.Value], c: ll.Value, ok: ll.Value | None,
                 src: ll.Value, ksrc: ll.Value) -> None:
            if d == n:
                with b.if_then(ok if ok is not None else ll.Constant(I1, 1)):
                    xv = b.load(gep(b, elem, x.data, src), typ=elem)
                    kv = b.load(gep(b, elem, k.data, ksrc), typ=elem)
                    old = b.load(acc, typ=st_)
                    b.store(b.fadd(old, b.fmul(xv, kv)) if is_float else
                            b.add(old, b.mul(xv, kv)), acc)
                return
            with for_range(b, i64(0), k.dims[2 + d], f"q{d}") as q:
                lo = pads[d][0]
                i = b.sub(b.add(b.mul(p[d], i64(strides[d])), b.mul(q, i64(rd[d]))), i64(lo))
                a = ld[d]
                src_i = b.sdiv(i, i64(a))
                valid = b.and_(b.icmp_signed(">=", i, i64(0)),
                               b.icmp_signed("<", src_i, x.dims[2 + d]))
                if a != 1:
                    valid = b.and_(valid, b.icmp_signed("==", b.srem(i, i64(a)), i64(0)))
                taps(d + 1, p, c, valid if ok is None else b.and_(ok, valid),
                     add(b, src, mul(b, src_i, xs[2 + d])), add(b, ksrc, mul(b, q, ks[2 + d])))

        positions(0, [])
