"""Tensor instructions outside kernels: `dot`, layout, shape casts, metadata, `random`,
and reductions by a function.

Shape casts (`padShape`, `squeezeShape`, `shapeCast`, `bitCast`) and `slice` of rows are
views: the result shares the operand's buffer (taking over its reference when the operand
dies). `dot` calls BLAS for float32/float64 (a `transpose` feeding it becomes a transpose
flag, and is not materialized when only `dot`s use it) and a loop nest otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence

from llvmlite import ir as ll

from dlvm.ir import BuiltinRef, Function, Instruction, Value
from dlvm.ir.instructions.tensor import is_reversal, permutation
from dlvm.ir.types import TensorType

from ..runtime import blas
from . import random_stream
from .emit import (
    add,
    alloca,
    call_pointer,
    declare,
    for_range,
    gep,
    i32,
    i64,
    is_const,
    memcpy,
    memset,
    mul,
    product,
)
from .function import FunctionLowering, Tensor, lowers, make_tensor
from .layout import (
    F32,
    F64,
    I1,
    I32,
    I64,
    PTR,
    element_size,
    element_type,
    scalar_type,
)
from .outlined import Outlined
from .scalar import ScalarEmitter, combine
from .support import CTX_RANDOM

# ---------------------------------------------------------------- views


def share(fl: FunctionLowering, inst: Instruction, x: Value, data: ll.Value,
          dims: Sequence[ll.Value]) -> ll.Value:
    """A tensor over `x`'s buffer: takes `x`'s reference if `x` dies here, else retains."""
    src = fl.tensor(x)
    if x in fl.dying(inst) and fl.own.is_owned(x):
        fl.take(x)
    else:
        fl.b.call(fl.rt.get("retain"), [src.buf])
    return make_tensor(fl.b, src.buf, data, dims)


def boxed_scalar(fl: FunctionLowering, value: ll.Value, t: TensorType, rank: int) -> ll.Value:
    """A scalar as a one-element tensor of `rank` dimensions of size 1."""
    struct, data = fl.new_tensor(t.with_shape((1,) * rank), [i64(1)] * rank)
    fl.store_scalar(value, data)
    return struct


@lowers("padShape")
def lower_pad_shape(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    xt = fl.tensor_type(inst.x)
    if xt.rank == 0:
        return boxed_scalar(fl, fl.value(inst.x), xt, 1)
    x = fl.tensor(inst.x)
    dims = list(x.dims)
    dims.insert(inst.axis, i64(1))
    return share(fl, inst, inst.x, x.data, dims)


@lowers("squeezeShape")
def lower_squeeze_shape(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    x = fl.tensor(inst.x)
    size = x.dims[inst.axis]
    if not is_const(size, 1):
        fl.fail_if(fl.b.icmp_signed("!=", size, i64(1)),
                   f"squeezeShape: dimension {inst.axis} has size {{0}}", [size])
    if x.type.rank == 1:
        return fl.load_scalar(x.data, x.type)
    dims = [d for k, d in enumerate(x.dims) if k != inst.axis]
    return share(fl, inst, inst.x, x.data, dims)


def reshape_dims(fl: FunctionLowering, count: ll.Value, shape: Sequence[int | None],
                 problem: str, from_dims: Sequence[ll.Value],
                 fits: ll.Value | None = None) -> list[ll.Value]:
    """Target sizes, a `_` worked out from the element count, checked as `numpy.reshape`
    checks them: the count must match, and a `_` beside a zero-sized dimension, or a second
    `_`, is an error (it could be any size). `fits`, when given, must hold as well."""
    b = fl.b
    known = product(b, [i64(d) for d in shape if d is not None])
    missing = [k for k, d in enumerate(shape) if d is None]
    dims = [i64(d) if d is not None else i64(0) for d in shape]
    bad: ll.Value = ll.Constant(I1, 0) if fits is None else b.not_(fits)
    if missing:
        if len(missing) > 1 or is_const(known, 0):
            undetermined: ll.Value = ll.Constant(I1, 1)
        elif is_const(known):
            undetermined = ll.Constant(I1, 0)
        else:
            undetermined = b.icmp_signed("==", known, i64(0))
        bad = b.or_(bad, undetermined)
        safe = b.select(undetermined, i64(1), known)
        dims[missing[0]] = b.sdiv(count, safe)
        for k in missing[1:]:
            dims[k] = i64(1)
    total = product(b, dims)
    if not (is_const(total) and is_const(count) and total.constant == count.constant):
        bad = b.or_(bad, b.icmp_signed("!=", total, count))
    if not (isinstance(bad, ll.Constant) and not bad.constant):
        text, params = fl.shape_text(from_dims)
        target = fl.type(fl.current) if fl.current is not None else ""
        fl.fail_if(bad, problem.format(shape=text, target=target), params)
    return dims


@lowers("shapeCast")
def lower_shape_cast(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    xt = fl.tensor_type(inst.x)
    t = fl.tensor_type(inst)
    problem = "shapeCast: cannot reshape {shape} to {target}"
    if xt.rank == 0:
        return boxed_scalar(fl, fl.value(inst.x), xt, t.rank) if t.rank else fl.value(inst.x)
    x = fl.tensor(inst.x)
    if t.rank == 0:
        reshape_dims(fl, x.count(), (), problem, x.dims)
        return fl.load_scalar(x.data, xt)
    dims = reshape_dims(fl, x.count(), inst.shape, problem, x.dims)
    return share(fl, inst, inst.x, x.data, dims)


@lowers("bitCast")
def lower_bit_cast(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """The bytes of the operand, row-major, viewed as elements of the target's data type:
    their number must be a multiple of its size."""
    src, dst = fl.type(inst.x), fl.type(inst)
    if not (isinstance(src, TensorType) and isinstance(dst, TensorType)):
        value = fl.b.bitcast(fl.value(inst.x), fl.layout.lower(dst))
        fl.retain(value, dst)  # the result holds what the operand holds
        return value
    if src.rank == 0 and dst.rank == 0:  # the type rule made the sizes equal
        return fl.b.bitcast(fl.value(inst.x), scalar_type(dst.dtype))
    b = fl.b
    if src.rank == 0:
        boxed = boxed_scalar(fl, fl.value(inst.x), src, 1)
        x = Tensor(b, boxed, src.with_shape((1,)))
        fl.temporaries.append((boxed, src.with_shape((1,))))
        nbytes = i64(element_size(src.dtype))
    else:
        x = fl.tensor(inst.x)
        nbytes = mul(b, x.count(), i64(element_size(src.dtype)))
    size = i64(element_size(dst.dtype))
    count = b.sdiv(nbytes, size)
    whole = b.icmp_signed("==", b.srem(nbytes, size), i64(0))
    problem = "bitCast: cannot reinterpret {shape} as {target}"
    dims = reshape_dims(fl, count, dst.shape, problem, x.dims if src.rank else [], whole)
    if dst.rank == 0:
        return fl.load_scalar(x.data, dst)
    if src.rank == 0:
        b.call(fl.rt.get("retain"), [x.buf])
        return make_tensor(b, x.buf, x.data, dims)
    return share(fl, inst, inst.x, x.data, dims)


@lowers("slice")
def lower_slice(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    x = fl.tensor(inst.x)
    b = fl.b
    rows = x.dims[0]
    fl.fail_if(b.icmp_signed(">=", i64(inst.upper), rows),
               f"slice upto {inst.upper} is out of range for dimension 0 of size {{0}}", [rows])
    row = product(b, x.dims[1:])
    data = gep(b, element_type(x.type.dtype), x.data, mul(b, i64(inst.lower), row))
    return share(fl, inst, inst.x, data, [i64(inst.upper - inst.lower + 1), *x.dims[1:]])


# ---------------------------------------------------------------- metadata


@lowers("rank")
def lower_rank(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    return i64(fl.tensor_type(inst.x).rank)


@lowers("unitCount")
def lower_unit_count(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    t = fl.tensor_type(inst.x)
    return i64(1) if t.rank == 0 else fl.tensor(inst.x).count()


@lowers("shape")
def lower_shape(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    t = fl.tensor_type(inst.x)
    dims = fl.tensor(inst.x).dims if t.rank else []
    struct, data = fl.new_tensor(fl.tensor_type(inst), [i64(t.rank)])
    for k, d in enumerate(dims):
        fl.b.store(d, gep(fl.b, I64, data, i64(k)))
    return struct


# ---------------------------------------------------------------- copies


def strided_copy(fl: FunctionLowering, t: TensorType, dst: ll.Value, dims: Sequence[ll.Value],
                 src: ll.Value, strides: Sequence[ll.Value], start: ll.Value) -> None:
    """dst[i…] (contiguous) = src[start + Σ iₖ·strideₖ]."""
    b = fl.b
    elem = element_type(t.dtype)

    def level(k: int, src_off: ll.Value, dst_off: ll.Value) -> None:
        if k == len(dims):
            b.store(b.load(gep(b, elem, src, src_off), typ=elem), gep(b, elem, dst, dst_off))
            return
        inner = product(b, dims[k + 1:])
        with for_range(b, i64(0), dims[k], f"c{k}") as i:
            level(k + 1, add(b, src_off, mul(b, i, strides[k])), add(b, dst_off, mul(b, i, inner)))

    level(0, start, i64(0))


def contiguous_strides(b: ll.IRBuilder, dims: Sequence[ll.Value]) -> list[ll.Value]:
    out: list[ll.Value] = [i64(1)] * len(dims)
    for k in range(len(dims) - 2, -1, -1):
        out[k] = mul(b, out[k + 1], dims[k + 1])
    return out


def only_dots_use(fl: FunctionLowering, inst: Instruction) -> bool:
    """A rank-2 `transpose` whose every use is a rank-2 `dot` stays a view: the dots read
    it with a BLAS transpose flag."""
    if fl.tensor_type(inst).rank != 2 or not is_reversal(inst, 2):
        return False
    users = fl.own.users.get(inst, [])
    return bool(users) and all(u.opcode == "dot" and fl.tensor_type(u.lhs).rank == 2
                               for u in users) and dot_uses_blas(fl.tensor_type(inst))


@lowers("transpose")
def lower_transpose(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    xt = fl.tensor_type(inst.x)
    if xt.rank < 2:
        return fl.value(inst.x) if xt.rank == 0 else share(fl, inst, inst.x,
                                                           fl.tensor(inst.x).data,
                                                           fl.tensor(inst.x).dims)
    x = fl.tensor(inst.x)
    order = permutation(inst, xt.rank)
    dims = [x.dims[k] for k in order]
    if only_dots_use(fl, inst):
        fl.virtual.add(inst)
        return share(fl, inst, inst.x, x.data, dims)
    t = fl.tensor_type(inst)
    struct, data = fl.new_tensor(t, dims)
    source_strides = contiguous_strides(fl.b, x.dims)
    strides = [source_strides[k] for k in order]
    strided_copy(fl, t, data, dims, x.data, strides, i64(0))
    return struct


@lowers("reverse")
def lower_reverse(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    x = fl.tensor(inst.x)
    b = fl.b
    t = fl.tensor_type(inst)
    struct, data = fl.new_tensor(t, x.dims)
    strides = contiguous_strides(b, x.dims)
    start: ll.Value = i64(0)
    for k in inst.dims:
        start = add(b, start, mul(b, b.sub(x.dims[k], i64(1)), strides[k]))
        strides[k] = b.sub(i64(0), strides[k])
    strided_copy(fl, t, data, x.dims, x.data, strides, start)
    return struct


@lowers("concatenate")
def lower_concatenate(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    b = fl.b
    axis = inst.axis
    parts = [fl.tensor(v) for v in inst.xs]
    first = parts[0]
    for k, p in enumerate(parts[1:], 1):
        bad = None
        for d in range(first.type.rank):
            if d == axis:
                continue
            ne = b.icmp_signed("!=", first.dims[d], p.dims[d])
            bad = ne if bad is None else b.or_(bad, ne)
        if bad is not None and not (isinstance(bad, ll.Constant)):
            _text_a, pa = fl.shape_text(first.dims[:2])
            fl.fail_if(bad, f"cannot concatenate operand {k} along {axis}: its other "
                       "dimensions differ", pa[:0])
    dims = list(first.dims)
    total: ll.Value = i64(0)
    for p in parts:
        total = add(b, total, p.dims[axis])
    dims[axis] = total
    t = fl.tensor_type(inst)
    struct, data = fl.new_tensor(t, dims)
    esize = i64(element_size(t.dtype))
    outer = product(b, dims[:axis])
    inner = product(b, dims[axis + 1:])
    row = mul(b, total, inner)
    offset: ll.Value = i64(0)
    for p in parts:
        chunk = mul(b, p.dims[axis], inner)
        with for_range(b, i64(0), outer, "cat") as o:
            dst = gep(b, element_type(t.dtype), data, add(b, mul(b, o, row), offset))
            src = gep(b, element_type(t.dtype), p.data, mul(b, o, chunk))
            memcpy(b, dst, src, mul(b, chunk, esize))
        offset = add(b, offset, chunk)
    return struct


# ---------------------------------------------------------------- dot


def dot_uses_blas(t: TensorType) -> bool:
    return t.dtype.is_float and t.dtype.bits in (32, 64) and blas.available()


def dot_operand(fl: FunctionLowering, v: Value) -> tuple[Tensor, bool]:
    """The tensor a `dot` reads and whether it is transposed (a virtual transpose's source)."""
    if isinstance(v, Instruction) and v in fl.virtual:
        return fl.tensor(v.x), True
    return fl.tensor(v), False


@lowers("dot", "matrixMultiply")
def lower_dot(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    b = fl.b
    t = fl.tensor_type(inst)
    at = fl.tensor_type(inst.lhs)
    if at.rank == 1:
        return vector_dot(fl, inst)
    a, ta = dot_operand(fl, inst.lhs)
    c, tc = dot_operand(fl, inst.rhs)
    # logical (batch…, m, k) and (batch…, k, n)
    a_dims = list(reversed(a.dims)) if ta else list(a.dims)
    c_dims = list(reversed(c.dims)) if tc else list(c.dims)
    m, k = a_dims[-2], a_dims[-1]
    k2, n = c_dims[-2], c_dims[-1]
    fl.fail_unless_equal(k, k2, "dot: inner dimensions {0} and {1} differ")
    batch = a_dims[:-2]
    for x, y in zip(batch, c_dims[:-2], strict=True):
        fl.fail_unless_equal(x, y, "dot: batch dimensions {0} and {1} differ")
    dims = [*batch, m, n]
    struct, out = fl.new_tensor(t, dims)
    count = product(b, batch)
    a_step, c_step, o_step = mul(b, m, k), mul(b, k, n), mul(b, m, n)
    elem = element_type(t.dtype)
    with for_range(b, i64(0), count, "batch") as i:
        pa = gep(b, elem, a.data, mul(b, i, a_step))
        pc = gep(b, elem, c.data, mul(b, i, c_step))
        po = gep(b, elem, out, mul(b, i, o_step))
        if dot_uses_blas(t):
            gemm(fl, t, pa, ta, pc, tc, po, m, n, k)
        else:
            gemm_loops(fl, t, pa, ta, pc, tc, po, m, n, k)
    return struct


def gemm(fl: FunctionLowering, t: TensorType, a: ll.Value, ta: bool, c: ll.Value, tc: bool,
         out: ll.Value, m: ll.Value, n: ll.Value, k: ll.Value) -> None:
    """out (m×n) = op(a)·op(c) by cblas ?gemm (row major, i64 sizes)."""
    b = fl.b
    double = t.dtype.bits == 64
    ft = F64 if double else F32
    fn = declare(fl.unit.llmod, "dlvm_dgemm" if double else "dlvm_sgemm", ll.VoidType(),
                 [I32, I32, I32, I64, I64, I64, ft, PTR, I64, PTR, I64, ft, PTR, I64])

    def at_least_one(x: ll.Value) -> ll.Value:
        return x if is_const(x) and x.constant >= 1 else b.select(
            b.icmp_signed("<", x, i64(1)), i64(1), x)

    lda = at_least_one(m if ta else k)
    ldc = at_least_one(k if tc else n)
    ldo = at_least_one(n)
    gemv = declare(fl.unit.llmod, "dlvm_dgemv" if double else "dlvm_sgemv", ll.VoidType(),
                   [I32, I32, I64, I64, ft, PTR, I64, PTR, I64, ft, PTR, I64])
    one, zero = ll.Constant(ft, 1.0), ll.Constant(ft, 0.0)
    row_major = ll.Constant(I32, blas.ROW_MAJOR)

    def flag(transposed: bool) -> ll.Constant:
        return ll.Constant(I32, blas.TRANS if transposed else blas.NO_TRANS)

    def vector_product() -> None:
        """A single row (or column) of output: a matrix-vector product, y = A·x, with the
        vector contiguous in every case."""
        with b.if_else(b.icmp_signed("==", m, i64(1))) as (row, column):
            with row:  # out = a·op(c) = op(c)ᵀ·a, c stored k×n (n×k when transposed)
                rows, cols = (n, k) if tc else (k, n)
                b.call(gemv, [row_major, flag(not tc), rows, cols, one, c, at_least_one(cols),
                              a, i64(1), zero, out, i64(1)])
            with column:  # out = op(a)·c, a stored m×k (k×m when transposed)
                rows, cols = (k, m) if ta else (m, k)
                b.call(gemv, [row_major, flag(ta), rows, cols, one, a, at_least_one(cols),
                              c, i64(1), zero, out, i64(1)])

    nonempty = b.and_(b.icmp_signed(">", m, i64(0)), b.icmp_signed(">", n, i64(0)))
    with b.if_then(nonempty), b.if_else(b.icmp_signed("==", k, i64(0))) as (empty, work):
        with empty:

            memset(b, out, 0, mul(b, mul(b, m, n), i64(element_size(t.dtype))))
        with work:
            vector = b.or_(b.icmp_signed("==", m, i64(1)), b.icmp_signed("==", n, i64(1)))
            with b.if_else(vector) as (one_row, matrix):
                with one_row:
                    vector_product()
                with matrix:
                    b.call(fn, [row_major, flag(ta), flag(tc), m, n, k, one, a, lda, c, ldc,
                                zero, out, ldo])


def gemm_loops(fl: FunctionLowering, t: TensorType, a: ll.Value, ta: bool, c: ll.Value,
               tc: bool, out: ll.Value, m: ll.Value, n: ll.Value, k: ll.Value) -> None:
    """out = op(a)·op(c) as an i-k-j loop nest (vectorizes over j); half floats accumulate in
    single precision."""
    b = fl.b
    elem = element_type(t.dtype)
    st = scalar_type(t.dtype)
    acc_t = F32 if isinstance(st, ll.HalfType) else st
    is_float = t.dtype.is_float
    a_row, a_col = (i64(1), m) if ta else (k, i64(1))
    c_row, c_col = (i64(1), k) if tc else (n, i64(1))
    acc = fl.result_slot(acc_t)
    with for_range(b, i64(0), m, "gi") as i, for_range(b, i64(0), n, "gj") as j:
        b.store(ll.Constant(acc_t, 0.0 if is_float else 0), acc)
        with for_range(b, i64(0), k, "gk") as p:
            x = b.load(gep(b, elem, a, add(b, mul(b, i, a_row), mul(b, p, a_col))), typ=elem)
            y = b.load(gep(b, elem, c, add(b, mul(b, p, c_row), mul(b, j, c_col))), typ=elem)
            if acc_t is not st:
                x, y = b.fpext(x, acc_t), b.fpext(y, acc_t)
            prod = b.fmul(x, y) if is_float else b.mul(x, y)
            old = b.load(acc, typ=acc_t)
            b.store(b.fadd(old, prod) if is_float else b.add(old, prod), acc)
        result = b.load(acc, typ=acc_t)
        if acc_t is not st:
            result = b.fptrunc(result, st)
        b.store(result, gep(b, elem, out, add(b, mul(b, i, n), j)))


def vector_dot(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """The dot product of two vectors (a sum in vector partial sums)."""
    b = fl.b
    x, y = fl.tensor(inst.lhs), fl.tensor(inst.rhs)
    n, n2 = x.dims[0], y.dims[0]
    fl.fail_unless_equal(n, n2, "dot: vectors of sizes {0} and {1}")
    t = fl.tensor_type(inst)
    st = scalar_type(t.dtype)
    elem = element_type(t.dtype)
    acc = fl.result_slot(st)
    b.store(ll.Constant(st, 0.0 if t.dtype.is_float else 0), acc)
    with for_range(b, i64(0), n, "dot") as i:
        p = b.load(gep(b, elem, x.data, i), typ=elem)
        q = b.load(gep(b, elem, y.data, i), typ=elem)
        if t.dtype.is_float:
            b.store(b.fadd(b.load(acc, typ=st), b.fmul(p, q), flags=["reassoc"]), acc)
        else:
            b.store(b.add(b.load(acc, typ=st), b.mul(p, q)), acc)
    return b.load(acc, typ=st)


# ---------------------------------------------------------------- reductions by a function


def call_combinator(fl: FunctionLowering, fn_value: ll.Value, ftype: ll.FunctionType,
                    acc: ll.Value, x: ll.Value) -> ll.Value:
    slot = fl.result_slot(acc.type)
    status = call_pointer(fl.b, fn_value, ftype, [fl.ctx, slot, acc, x])
    fl.check(status)
    return fl.b.load(slot, typ=acc.type)


def combinator_callable(fl: FunctionLowering, inst: Instruction
                        ) -> tuple[ll.Value | None, ll.FunctionType | None, str | None]:
    """(function, its type, None) for a function combinator; (None, None, name) for an
    opcode or builtin."""
    comb = inst.combinator
    if isinstance(comb, BuiltinRef):
        comb = comb.name
    if isinstance(comb, str):
        unsigned = comb in ("min", "max") and fl.tensor_type(inst.x).dtype.is_unsigned
        return None, None, "u" + comb if unsigned else comb
    target = fl.value(comb)
    t = fl.tensor_type(inst.x)
    st = scalar_type(t.dtype)
    if isinstance(comb, Function) and not comb.blocks:
        fl.fail(fl.site(f"'@{comb.name}' is an external declaration and has no body"))
        fl.b.position_at_end(fl.llfn.append_basic_block("unreachable"))
    return target, ll.FunctionType(I32, [PTR, PTR, st, st]), None


def fold_step(fl: FunctionLowering, inst: Instruction, acc: ll.Value, x: ll.Value) -> ll.Value:
    fn_value, ftype, name = combinator_callable(fl, inst)
    if name is not None:
        emitter = ScalarEmitter(fl.b, fl.unit.math.call, lambda i, m: fl.site(m, i),
                                lambda v: fl.tensor_type(v).dtype)
        return combine(emitter, name, acc, x, reassociate=False)
    assert fn_value is not None and ftype is not None
    return call_combinator(fl, fn_value, ftype, acc, x)


def reduce_by_function(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """`reduce … by @f`: init ⊕ elements in row-major order of the reduced dimensions, per
    output element, calling @f (as the interpreter does)."""
    b = fl.b
    xt = fl.tensor_type(inst.x)
    init = fl.value(inst.init)
    if xt.rank == 0:
        return fold_step(fl, inst, init, fl.value(inst.x))
    x = fl.tensor(inst.x)
    reduced = list(range(xt.rank)) if inst.dims is None else list(inst.dims)
    kept = [k for k in range(xt.rank) if k not in reduced]
    strides = contiguous_strides(b, x.dims)
    t = fl.tensor_type(inst)
    st = scalar_type(t.dtype)
    acc = fl.result_slot(st)
    out_dims = [x.dims[k] for k in kept]
    if t.rank:
        struct, out = fl.new_tensor(t, out_dims)
    out_strides = contiguous_strides(b, out_dims)

    def outer(level: int, src: ll.Value, dst: ll.Value) -> None:
        if level == len(kept):
            b.store(init, acc)
            inner(0, src)
            value = b.load(acc, typ=st)
            if t.rank:
                fl.store_scalar(value, gep(b, element_type(t.dtype), out, dst))
            return
        k = kept[level]
        with for_range(b, i64(0), x.dims[k], f"r{level}") as i:
            outer(level + 1, add(b, src, mul(b, i, strides[k])),
                  add(b, dst, mul(b, i, out_strides[level])))

    def inner(level: int, src: ll.Value) -> None:
        if level == len(reduced):
            e = fl.load_scalar(gep(b, element_type(xt.dtype), x.data, src), xt)
            b.store(fold_step(fl, inst, b.load(acc, typ=st), e), acc)
            return
        k = reduced[level]
        with for_range(b, i64(0), x.dims[k], f"f{level}") as i:
            inner(level + 1, add(b, src, mul(b, i, strides[k])))

    outer(0, i64(0), i64(0))
    return struct if t.rank else b.load(acc, typ=st)


@lowers("scan")
def lower_scan(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """Inclusive prefix reduction along each listed dimension in turn."""
    b = fl.b
    t = fl.tensor_type(inst)
    if t.rank == 0:
        return fl.value(inst.x)
    x = fl.tensor(inst.x)
    struct, out = fl.new_tensor(t, x.dims)
    elem = element_type(t.dtype)
    memcpy(b, out, x.data, mul(b, x.count(), i64(element_size(t.dtype))))
    strides = contiguous_strides(b, x.dims)
    for axis in inst.dims:
        others = [k for k in range(t.rank) if k != axis]

        def walk(level: int, base: ll.Value, axis: int = axis, others: list[int] = others
                 ) -> None:
            if level == len(others):
                with for_range(b, i64(1), x.dims[axis], "scan") as i:
                    here = add(b, base, mul(b, i, strides[axis]))
                    prev = b.sub(here, strides[axis])
                    a = fl.load_scalar(gep(b, elem, out, prev), t)
                    c = fl.load_scalar(gep(b, elem, out, here), t)
                    fl.store_scalar(fold_step(fl, inst, a, c), gep(b, elem, out, here))
                return
            k = others[level]
            with for_range(b, i64(0), x.dims[k], f"s{level}") as i:
                walk(level + 1, add(b, base, mul(b, i, strides[k])))

        walk(0, i64(0))
    return struct



# ---------------------------------------------------------------- random


@lowers("random")
def lower_random(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """The next elements of the executable's counter-based stream (`random_stream.py`),
    reserved with one atomic add to its counter, so threads sharing it never overlap."""
    b = fl.b
    t = fl.tensor_type(inst)
    lo, hi = fl.value(inst.lower), fl.value(inst.upper)
    fl.fail_if(random_stream.bad_range(b, lo, hi, t.dtype),
               "random needs lower < upper, found an empty range")
    if t.rank == 0:
        slot = fl.result_slot(scalar_type(t.dtype))
        data, count, struct = slot, i64(1), None
    else:
        if not t.is_static:
            fl.fail(fl.site("random needs a static shape"))
            b.position_at_end(fl.llfn.append_basic_block("unreachable"))
            return ll.Constant(fl.layout.lower(t), None)
        dims = [i64(d) for d in t.shape]  # type: ignore[misc]
        struct, data = fl.new_tensor(t, dims)
        count = product(b, dims)
    state = b.inttoptr(b.load(fl.rt.slot(b, fl.ctx, CTX_RANDOM), typ=I64), PTR)
    key = b.load(state, typ=I64)
    start = b.atomic_rmw("add", gep(b, I64, state, i64(1)), count, "monotonic")
    et = element_type(t.dtype)
    with for_range(b, i64(0), count, "draw") as i:
        bits = random_stream.element_bits(b, key, b.add(start, i))
        v = random_stream.value_from_bits(b, bits, lo, hi, t.dtype)
        b.store(b.zext(v, et) if v.type != et else v, gep(b, et, data, i))
    if struct is None:
        v = b.load(data, typ=et)
        return b.trunc(v, I1) if et != scalar_type(t.dtype) else v
    return struct


# ---------------------------------------------------------------- windows


def floor_divide(b: ll.IRBuilder, x: ll.Value, d: int) -> ll.Value:
    """⌊x / d⌋ for a positive constant `d` (`sdiv` rounds toward zero: an empty input's
    −1 / 2 would be 0, not −1)."""
    q = b.sdiv(x, i64(d))
    return b.sub(q, b.zext(b.icmp_signed("<", b.srem(x, i64(d)), i64(0)), I64))


def window_geometry(fl: FunctionLowering, size: ll.Value, window: int, stride: int,
                    padding: str) -> tuple[ll.Value, ll.Value]:
    """(output size, low padding) of one dimension, as `dlvm.ir` defines them (with floor
    division: an empty dimension has no window)."""
    b = fl.b
    w, s = i64(window), i64(stride)
    if padding == "none":
        out = b.add(b.sdiv(b.sub(size, w), s), i64(1))
        return b.select(b.icmp_signed("<", size, w), i64(0), out), i64(0)
    if padding == "full":
        return (b.add(floor_divide(b, b.add(size, i64(window - 2)), stride), i64(1)),
                i64(window - 1))
    out = b.add(floor_divide(b, b.sub(size, i64(1)), stride), i64(1))
    total = b.sub(b.add(b.mul(b.sub(out, i64(1)), s), w), size)
    total = b.select(b.icmp_signed("<", total, i64(0)), i64(0), total)
    return out, b.sdiv(total, i64(2))


UNROLL_WINDOW = 32  # taps of an unpadded window folded in straight-line code
POOL_PARALLEL_MIN = 1 << 14  # element·taps from which a fold is split over the thread pool


@lowers("reduceWindow")
def lower_reduce_window(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """Each output element folds its window, padded with `init`, in row-major order.
    Without padding every tap is an element: the fold has no test, and a small window is
    unrolled here (no loop of a few taps per output element); with padding, a small window
    that lies wholly inside the input (the interior, most of a large one) takes that path
    too, and only the border's windows test each tap. With several threads and a
    combinator that is an opcode or builtin, a large one is split over the thread pool along
    the output's first dimension."""
    b = fl.b
    x = fl.tensor(inst.x)
    t = fl.tensor_type(inst)
    init = fl.value(inst.init)
    rank = t.rank
    geometry = [window_geometry(fl, x.dims[k], inst.dims[k], inst.strides[k], inst.padding)
                for k in range(rank)]
    out_dims = [g[0] for g in geometry]
    lows = [g[1] for g in geometry]
    struct, out = fl.new_tensor(t, out_dims)
    taps = 1
    for d in inst.dims:
        taps *= d
    if rank and combinator_callable(fl, inst)[2] is not None:

        task = Outlined(fl, "dlvm.pool", [], [x.data, out, *x.dims, *out_dims, *lows, init])
        g = task.get
        saved = fl.b
        fl.b = task.b  # the fold's scalar code is emitted through fl.b
        try:
            acc = alloca(task.b, scalar_type(t.dtype))
            fold_windows(fl, inst, g(x.data), [g(d) for d in x.dims], g(out),
                         [g(d) for d in out_dims], [g(v) for v in lows], g(init), acc,
                         task.fn.args[1], task.fn.args[2])
            task.b.ret(i32(0))
        finally:
            fl.b = saved
        task.call([], out_dims[0], mul(b, product(b, out_dims), i64(taps)), POOL_PARALLEL_MIN)
        return struct
    acc = fl.result_slot(scalar_type(t.dtype))
    fold_windows(fl, inst, x.data, x.dims, out, out_dims, lows, init, acc, i64(0),
                 out_dims[0] if rank else i64(1))
    return struct


def associative(fl: FunctionLowering, inst: Instruction) -> bool:
    """Whether the fold's order cannot change its result: min and max (NaN-propagating, of
    any type), and/or, and integer sums and products (which wrap)."""
    name = combinator_callable(fl, inst)[2]
    if name in ("min", "max", "umin", "umax", "and", "or"):
        return True
    return name in ("add", "multiply") and not fl.tensor_type(inst).dtype.is_float


def fold_windows(fl: FunctionLowering, inst: Instruction, xdata: ll.Value,
                 xdims: Sequence[ll.Value], out: ll.Value, out_dims: Sequence[ll.Value],
                 lows: Sequence[ll.Value], init: ll.Value, acc: ll.Value, begin: ll.Value,
                 end: ll.Value) -> None:
    """The loop nest of `reduceWindow` over outputs [begin, end) of the first dimension,
    emitted through `fl.b`."""
    b = fl.b
    xt = fl.tensor_type(inst.x)
    t = fl.tensor_type(inst)
    rank = t.rank
    in_strides = contiguous_strides(b, xdims)
    out_strides = contiguous_strides(b, out_dims)
    st = scalar_type(t.dtype)
    elem = element_type(t.dtype)
    padded = inst.padding != "none"
    taps = 1
    for d in inst.dims:
        taps *= d
    small = taps <= UNROLL_WINDOW

    tree = small and associative(fl, inst)

    def outer(k: int, position: list[ll.Value], dst: ll.Value) -> None:
        if k == rank:
            b.store(init, acc)
            if padded and small:  # a window wholly inside the input needs no test
                with b.if_else(wholly_inside(position)) as (interior, border):
                    with interior:
                        unrolled_fold(position)
                    with border:
                        window(0, position, i64(0), None, True, False)
            elif small and not padded:
                unrolled_fold(position)
            else:
                window(0, position, i64(0), None, padded, False)
            fl.store_scalar(b.load(acc, typ=st), gep(b, elem, out, dst))
            return
        start, stop = (begin, end) if k == 0 else (i64(0), out_dims[k])
        with for_range(b, start, stop, f"w{k}") as o:
            outer(k + 1, [*position, o], add(b, dst, mul(b, o, out_strides[k])))

    def unrolled_fold(position: list[ll.Value]) -> None:
        """every tap an element: straight-line code; for an associative combinator the taps
        fold as a balanced tree (a chain as long as the window is latency-bound)"""
        if not tree:
            window(0, position, i64(0), None, False, True)
            return
        values: list[ll.Value] = []

        def gather(k: int, src: ll.Value) -> None:
            if k == rank:
                values.append(fl.load_scalar(gep(b, elem, xdata, src), xt))
                return
            for q in range(inst.dims[k]):
                i = b.sub(b.add(b.mul(position[k], i64(inst.strides[k])), i64(q)), lows[k])
                gather(k + 1, add(b, src, mul(b, i, in_strides[k])))

        gather(0, i64(0))
        while len(values) > 1:
            pairs = [fold_step(fl, inst, values[j], values[j + 1])
                     for j in range(0, len(values) - 1, 2)]
            values = pairs + values[len(pairs) * 2:]
        b.store(fold_step(fl, inst, b.load(acc, typ=st), values[0]), acc)

    def wholly_inside(position: list[ll.Value]) -> ll.Value:
        """first tap ≥ 0 and last tap < size along every dimension"""
        ok: ll.Value = ll.Constant(I1, 1)
        for k in range(rank):
            first = b.sub(b.mul(position[k], i64(inst.strides[k])), lows[k])
            last = b.add(first, i64(inst.dims[k] - 1))
            ok = b.and_(ok, b.and_(b.icmp_signed(">=", first, i64(0)),
                                   b.icmp_signed("<", last, xdims[k])))
        return ok

    def window(k: int, position: list[ll.Value], src: ll.Value, inside: ll.Value | None,
               checked: bool, unrolled: bool) -> None:
        if k == rank:
            if inside is None:  # every tap is an element: no test
                v = fl.load_scalar(gep(b, elem, xdata, src), xt)
                b.store(fold_step(fl, inst, b.load(acc, typ=st), v), acc)
                return
            with b.if_else(inside) as (real, pad):
                with real:
                    v = fl.load_scalar(gep(b, elem, xdata, src), xt)
                    b.store(fold_step(fl, inst, b.load(acc, typ=st), v), acc)
                with pad:
                    b.store(fold_step(fl, inst, b.load(acc, typ=st), init), acc)
            return

        def tap(q: ll.Value) -> None:
            i = b.sub(b.add(b.mul(position[k], i64(inst.strides[k])), q), lows[k])
            ok = inside
            if checked:
                here = b.and_(b.icmp_signed(">=", i, i64(0)), b.icmp_signed("<", i, xdims[k]))
                ok = here if inside is None else b.and_(inside, here)
            window(k + 1, position, add(b, src, mul(b, i, in_strides[k])), ok, checked,
                   unrolled)

        if unrolled:
            for q in range(inst.dims[k]):
                tap(i64(q))
        else:
            with for_range(b, i64(0), i64(inst.dims[k]), f"q{k}") as q:
                tap(q)

    outer(0, [], i64(0))
