"""Literals, aggregates and enums: `literal`, `extract`, `insert`, `builtin`.

Tuples, arrays and structs are LLVM values, built and taken apart with insertvalue and
extractvalue (a dynamic index into an array goes through a stack slot). A constant tensor
literal is a global buffer whose count marks it as not owned, so nothing ever frees or
updates it. An enum value is a counted cell `{tag, payload}` in a buffer, which owns its
payload (a tensor borrowed from the caller is copied in, as memory does); its release
function (one per enum type, recursive for recursive enums) releases the payload of its case
when the last reference goes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
from llvmlite import ir as ll

from dlvm.ir import AggregateLiteral, Instruction, KeywordLiteral, Literal, ScalarLiteral
from dlvm.ir.core import DenseLiteral, FieldKey, LiteralValue
from dlvm.ir.runtime import numpy_dtype
from dlvm.ir.types import (
    BF16,
    ArrayType,
    EnumDecl,
    NominalType,
    StructDecl,
    TensorType,
    TupleType,
    Type,
)

from .bfloat import bits_of
from .emit import (
    add,
    for_range,
    gep,
    global_variable,
    i64,
    internal_function,
    is_const,
    memcpy,
    mul,
    product,
)
from .function import (
    FunctionLowering,
    Tensor,
    lowers,
    make_tensor,
    scalar_constant,
)
from .layout import I8, I64, PTR, element_size, element_type, scalar_type
from .regions import Region
from .support import HEADER_BYTES, IMMORTAL

SMALL_CONSTANT = 1 << 16  # elements: larger splats are filled at run time


# ---------------------------------------------------------------- constants


def constant_buffer(fl: FunctionLowering, t: TensorType, flat: np.ndarray) -> ll.Value:
    """A global buffer holding `flat` (count: not owned) and its tensor value."""
    elem = element_type(t.dtype)
    n = int(flat.size)
    if t.dtype.is_bool:
        values = [ll.Constant(I8, int(bool(x))) for x in flat]
    elif t.dtype == BF16:
        values = [ll.Constant(elem, bits_of(float(x))) for x in flat]
    elif t.dtype.is_float:
        values = [ll.Constant(elem, float(x)) for x in flat]
    else:
        values = [ll.Constant(elem, int(x)) for x in flat]
    header_t = ll.ArrayType(I64, HEADER_BYTES // 8)
    body_t = ll.LiteralStructType([header_t, ll.ArrayType(elem, n)])
    g = global_variable(fl.unit.llmod, body_t, fl.unit.fresh("dlvm.const"))
    g.linkage = "internal"
    g.global_constant = True
    g.align = 64
    g.initializer = ll.Constant(body_t, [
        ll.Constant(header_t, [IMMORTAL] + [0] * (HEADER_BYTES // 8 - 1)),
        ll.Constant(ll.ArrayType(elem, n), values)])
    data = fl.b.gep(g, [ll.Constant(ll.IntType(32), 0), ll.Constant(ll.IntType(32), 1)],
                    inbounds=True, source_etype=body_t)
    return make_tensor(fl.b, g, data, [i64(d) for d in t.shape])  # type: ignore[misc]


def splat(fl: FunctionLowering, t: TensorType, value: ll.Value, py: Any) -> ll.Value:
    """A static tensor of one value: constant when small, else filled (and a temporary)."""
    count = t.count or 0
    if count <= SMALL_CONSTANT and py is not None:
        return constant_buffer(fl, t, np.full(count, py, numpy_dtype(t.dtype)))
    struct, data = fl.new_tensor(t, [i64(d) for d in t.shape])  # type: ignore[misc]
    with for_range(fl.b, i64(0), i64(count), "splat") as i:
        fl.store_scalar(value, gep(fl.b, element_type(t.dtype), data, i))
    fl.temporaries.append((struct, t))
    return struct


def constant_elements(lit: Literal, t: TensorType) -> np.ndarray | None:
    """The flat elements of a constant tensor literal, or None if it holds values."""
    if isinstance(lit, ScalarLiteral):
        return np.full(t.count or 0, lit.value, numpy_dtype(t.dtype)) if t.is_static else None
    if isinstance(lit, DenseLiteral):
        return lit.array(numpy_dtype(t.dtype), (t.count or 0,))
    if not isinstance(lit, AggregateLiteral) or lit.kind != "tensor":
        return None
    sub = t.with_shape(t.shape[1:])
    parts = []
    for e in lit.elements:
        if not isinstance(e, LiteralValue):
            return None
        p = constant_elements(e.literal, sub) if sub.rank else (
            np.array([e.literal.value], numpy_dtype(t.dtype))
            if isinstance(e.literal, ScalarLiteral) else None)
        if p is None:
            return None
        parts.append(p)
    return np.concatenate(parts) if parts else np.zeros(0, numpy_dtype(t.dtype))


# ---------------------------------------------------------------- materializing literals


def materialize(fl: FunctionLowering, lit: Literal, t: Type) -> ll.Value:
    b = fl.b
    lt = fl.layout.lower(t)
    if isinstance(lit, ScalarLiteral):
        assert isinstance(t, TensorType)
        if t.rank == 0:
            return scalar_constant(t, lit.value)
        if not t.is_static:
            fl.fail(fl.site(f"cannot splat a literal to the dynamic type {t}"))
            b.position_at_end(fl.llfn.append_basic_block("unreachable"))
            return ll.Constant(lt, None)
        return splat(fl, t, scalar_constant(t, lit.value), lit.value)
    if isinstance(lit, KeywordLiteral):
        if lit.keyword == "null":
            return ll.Constant(lt, None)
        return zero_value(fl, t)  # `undefined` is zero, as in the interpreter
    if isinstance(lit, DenseLiteral):
        assert isinstance(t, TensorType)
        flat = constant_elements(lit, t)
        assert flat is not None
        return constant_buffer(fl, t, flat)
    assert isinstance(lit, AggregateLiteral)
    elements = [fl.value(e) for e in lit.elements]
    if lit.kind == "tensor":
        assert isinstance(t, TensorType)
        return tensor_literal(fl, lit, t, elements)
    if lit.kind == "enum":
        return enum_layout(fl, t).make(fl, lit.keys[0], elements)
    value: ll.Value = ll.Constant(lt, None)
    for k, e in enumerate(elements):
        value = b.insert_value(value, e, k)
    return value


def tensor_literal(fl: FunctionLowering, lit: AggregateLiteral, t: TensorType,
                   elements: Sequence[ll.Value]) -> ll.Value:
    flat = constant_elements(lit, t.with_shape((len(lit.elements), *t.shape[1:])))
    static = t.with_shape((len(lit.elements), *t.shape[1:]))
    if flat is not None and static.is_static:
        return constant_buffer(fl, static, flat)
    b = fl.b
    sub = static.with_shape(static.shape[1:])
    if sub.rank == 0:
        dims = [i64(len(elements))]
        struct, data = fl.new_tensor(static, dims)
        for k, e in enumerate(elements):
            fl.store_scalar(e, gep(b, element_type(t.dtype), data, i64(k)))
        fl.temporaries.append((struct, static))
        return struct
    rows = [Tensor(b, e, fl.tensor_type(v)) for e, v in zip(elements, lit.elements, strict=True)]
    first = rows[0] if rows else None
    inner = first.dims if first is not None else [i64(d or 0) for d in sub.shape]
    for k, r in enumerate(rows[1:], 1):
        for d, (x, y) in enumerate(zip(inner, r.dims, strict=True)):
            fl.fail_unless_equal(x, y, f"tensor literal element {k} has size {{0}} along "
                                 f"dimension {d}, not {{1}}", [y, x])
    struct, data = fl.new_tensor(static, [i64(len(rows)), *inner])
    row = product(b, inner)
    size = mul(b, row, i64(element_size(t.dtype)))
    for k, r in enumerate(rows):
        memcpy(b, gep(b, element_type(t.dtype), data, mul(b, i64(k), row)), r.data, size)
    fl.temporaries.append((struct, static))
    return struct


def zero_value(fl: FunctionLowering, t: Type) -> ll.Value:
    t = fl.layout.resolve(t)
    lt = fl.layout.lower(t)
    if isinstance(t, TensorType):
        if t.rank == 0:
            return scalar_constant(t, 0)
        if not t.is_static:
            fl.fail(fl.site(f"cannot create a value of dynamic type {t}"))
            fl.b.position_at_end(fl.llfn.append_basic_block("unreachable"))
            return ll.Constant(lt, None)
        return splat(fl, t, scalar_constant(t, 0), 0)
    if isinstance(t, TupleType | ArrayType) or (isinstance(t, NominalType) and isinstance(
            fl.unit.module.type_decls.get(t.name), StructDecl)):
        parts = component_types(fl, t)
        value: ll.Value = ll.Constant(lt, None)
        for k, pt in enumerate(parts):
            value = fl.b.insert_value(value, zero_value(fl, pt), k)
        return value
    return ll.Constant(lt, None)


def component_types(fl: FunctionLowering, t: Type) -> list[Type]:
    t = fl.layout.resolve(t)
    if isinstance(t, TupleType):
        return list(t.elements)
    if isinstance(t, ArrayType):
        return [t.element] * t.count
    if isinstance(t, NominalType):
        decl = fl.unit.module.type_decls.get(t.name)
        if isinstance(decl, StructDecl):
            return [ft for _, ft in decl.fields]
    return []


@lowers("literal")
def lower_literal(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """The instruction owns what it builds (a fresh or constant buffer, consumed elements);
    a literal of a plain value is a copy, so it retains."""
    v = inst.value
    value = fl.value(v)
    if not isinstance(v, LiteralValue):
        fl.retain(value, fl.type(inst))
    return value


# ---------------------------------------------------------------- extract and insert


@dataclass
class Step:
    """One key of a key path, resolved against the type it indexes."""

    kind: str  # "field" (tuple/struct/array, constant), "array" (dynamic), "tensor"
    index: ll.Value | int
    inner: Type


def key_steps(fl: FunctionLowering, t: Type, keys: Sequence[Any]) -> list[Step]:
    steps = []
    for key in keys:
        rt = fl.layout.resolve(t)
        if isinstance(key, FieldKey):
            assert isinstance(rt, NominalType)
            decl = fl.unit.module.type_decls[rt.name]
            assert isinstance(decl, StructDecl)
            k = [n for n, _ in decl.fields].index(key.name)
            t = decl.fields[k][1]
            steps.append(Step("field", k, t))
            continue
        index: ll.Value | int = key if isinstance(key, int) else fl.value(key)
        if isinstance(rt, TensorType):
            t = rt.with_shape(rt.shape[1:])
            steps.append(Step("tensor", index, t))
        elif isinstance(rt, ArrayType):
            t = rt.element
            steps.append(Step("field" if isinstance(index, int) else "array", index, t))
        else:
            assert isinstance(rt, TupleType) and isinstance(index, int)
            t = rt.elements[index]
            steps.append(Step("field", index, t))
    return steps


def as_i64(fl: FunctionLowering, index: ll.Value | int) -> ll.Value:
    if isinstance(index, int):
        return i64(index)
    if index.type == I64:
        return index
    return fl.b.sext(index, I64) if index.type.width < 64 else fl.b.trunc(index, I64)


def check_index(fl: FunctionLowering, index: ll.Value, size: ll.Value | int) -> None:
    b = fl.b
    n = i64(size) if isinstance(size, int) else size
    if is_const(index) and is_const(n) and 0 <= index.constant < n.constant:
        return
    bad = b.or_(b.icmp_signed("<", index, i64(0)), b.icmp_signed(">=", index, n))
    fl.fail_if(bad, "index {0} out of bounds for size {1}", [index, n])


def check_same_shape(fl: FunctionLowering, dims: Sequence[ll.Value],
                     place: Sequence[ll.Value], what: str) -> None:
    """A tensor written over part of another must have that part's shape exactly (it is
    not broadcast: the types say the shapes are equal)."""
    for d, (x, y) in enumerate(zip(dims, place, strict=True)):
        fl.fail_unless_equal(x, y, f"{what}: the element has size {{0}} along dimension {d}, "
                             "the place it goes {1}")


def array_slot_element(fl: FunctionLowering, value: ll.Value, index: ll.Value,
                       t: ArrayType) -> tuple[ll.Value, ll.Value]:
    """(slot, element pointer) for a dynamic index into an array value."""

    at = fl.layout.lower(t)
    slot = fl.result_slot(at)
    fl.b.store(value, slot)
    ptr = fl.b.gep(slot, [i64(0), index], inbounds=True, source_etype=at)
    return slot, ptr


def extract_path(fl: FunctionLowering, value: ll.Value, t: Type, steps: list[Step]
                 ) -> ll.Value:
    """The element at a key path (no counts changed)."""
    b = fl.b
    for step in steps:
        rt = fl.layout.resolve(t)
        if step.kind == "field":
            value = b.extract_value(value, step.index)  # type: ignore[arg-type]
        elif step.kind == "array":
            assert isinstance(rt, ArrayType)
            index = as_i64(fl, step.index)
            check_index(fl, index, rt.count)
            _, ptr = array_slot_element(fl, value, index, rt)
            value = b.load(ptr, typ=fl.layout.lower(rt.element))
        else:
            assert isinstance(rt, TensorType)
            tensor = Tensor(b, value, rt)
            index = as_i64(fl, step.index)
            check_index(fl, index, tensor.dims[0])
            row = product(b, tensor.dims[1:])
            data = gep(b, element_type(rt.dtype), tensor.data, mul(b, index, row))
            if rt.rank == 1:
                value = fl.load_scalar(data, rt)
            else:
                value = make_tensor(b, tensor.buf, data, tensor.dims[1:])
        t = step.inner
    return value


@lowers("extract")
def lower_extract(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    t = fl.type(inst.value)
    steps = key_steps(fl, t, inst.keys)
    if isinstance(fl.layout.resolve(t), TensorType) and fl.tensor_type(inst.value).rank == 0:
        fl.fail(fl.site("cannot index a scalar"))
        fl.b.position_at_end(fl.llfn.append_basic_block("unreachable"))
        return ll.Constant(fl.layout.lower(fl.type(inst)), None)
    value = extract_path(fl, fl.value(inst.value), t, steps)
    fl.retain(value, fl.type(inst))
    return value


def insert_path(fl: FunctionLowering, value: ll.Value, t: Type, steps: list[Step],
                element: ll.Value, element_t: Type) -> ll.Value:
    """A copy of `value` with the element at the path replaced; it holds its own
    references (retains for what it shares, fresh buffers for copied tensors)."""
    b = fl.b
    rt = fl.layout.resolve(t)
    step, rest = steps[0], steps[1:]
    if step.kind == "tensor":
        assert isinstance(rt, TensorType)
        src = Tensor(b, value, rt)
        struct, data = fl.new_tensor(rt, src.dims)
        esize = element_size(rt.dtype)
        memcpy(b, data, src.data, mul(b, src.count(), i64(esize)))
        offset: ll.Value = i64(0)
        dims = src.dims
        for s in [step, *rest]:
            index = as_i64(fl, s.index)
            check_index(fl, index, dims[0])
            offset = add(b, offset, mul(b, index, product(b, dims[1:])))
            dims = dims[1:]
        target = gep(b, element_type(rt.dtype), data, offset)
        et = fl.layout.resolve(element_t)
        if isinstance(et, TensorType) and et.rank:
            e = Tensor(b, element, et)
            check_same_shape(fl, e.dims, dims, "insert")
            memcpy(b, target, e.data, mul(b, e.count(), i64(esize)))
        else:
            fl.store_scalar(element, target)
        return struct
    if step.kind == "array":
        assert isinstance(rt, ArrayType)
        index = as_i64(fl, step.index)
        check_index(fl, index, rt.count)
        slot, ptr = array_slot_element(fl, value, index, rt)
        old = b.load(ptr, typ=fl.layout.lower(rt.element))
        for k in range(rt.count):  # the other elements are shared
            other = b.extract_value(value, k)
            keep = b.icmp_signed("!=", index, i64(k))
            with b.if_then(keep):
                fl.retain(other, rt.element)
        new = insert_path(fl, old, rt.element, rest, element, element_t) if rest else element
        if not rest:
            fl.retain(element, element_t)
        b.store(new, ptr)
        return b.load(slot, typ=fl.layout.lower(rt))
    parts = component_types(fl, rt)
    k = step.index
    assert isinstance(k, int)
    for j, pt in enumerate(parts):
        if j != k:
            fl.retain(b.extract_value(value, j), pt)
    if rest:
        new = insert_path(fl, b.extract_value(value, k), parts[k], rest, element, element_t)
    else:
        fl.retain(element, element_t)
        new = element
    return b.insert_value(value, new, k)


@lowers("insert")
def lower_insert(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    t = fl.type(inst.destination)
    steps = key_steps(fl, t, inst.keys)
    return insert_path(fl, fl.value(inst.destination), t, steps, fl.value(inst.element),
                       fl.type(inst.element))


# ---------------------------------------------------------------- enums


@dataclass
class EnumLayout:
    """Where an enum's cell keeps its tag and each case's payload (a struct per case)."""

    fl: FunctionLowering
    name: str
    decl: EnumDecl

    @property
    def cases(self) -> list[str]:
        return [c for c, _ in self.decl.cases]

    def index(self, case: str) -> int:
        return self.cases.index(case)

    def case_types(self, case: str) -> list[Type]:
        return list(dict(self.decl.cases)[case])

    def payload_type(self, case: str) -> ll.LiteralStructType:
        return ll.LiteralStructType([self.fl.layout.lower(t) for t in self.case_types(case)])

    @cached_property
    def cell_type(self) -> ll.LiteralStructType:
        sizes = [self.payload_type(c) for c, _ in self.decl.cases]
        return ll.LiteralStructType([I64, *sizes])

    def tag_pointer(self, b: ll.IRBuilder, cell: ll.Value) -> ll.Value:
        return cell_data(b, cell)

    def payload_pointer(self, b: ll.IRBuilder, cell: ll.Value, case: str) -> ll.Value:
        return b.gep(cell_data(b, cell), [ll.Constant(ll.IntType(32), 0),
                                          ll.Constant(ll.IntType(32), 1 + self.index(case))],
                     inbounds=True, source_etype=self.cell_type)

    def load_payload(self, b: ll.IRBuilder, cell: ll.Value, case: str) -> list[ll.Value]:
        pt = self.payload_type(case)
        payload = b.load(self.payload_pointer(b, cell, case), typ=pt)
        return [b.extract_value(payload, k) for k in range(len(pt.elements))]

    def make(self, fl: FunctionLowering, case: str, values: Sequence[ll.Value]) -> ll.Value:
        b = fl.b
        size = b.ptrtoint(b.gep(ll.Constant(PTR, None), [i64(1)], source_etype=self.cell_type),
                          I64)
        cell = fl.alloc(size)
        b.store(i64(self.index(case)), cell_data(b, cell))
        payload: ll.Value = ll.Constant(self.payload_type(case), None)
        # the cell is shared by reference and may be stored in memory: it keeps copies of
        # what the caller lent the call
        for k, (v, t) in enumerate(zip(values, self.case_types(case), strict=True)):
            payload = b.insert_value(payload, fl.keep(v, t), k)
        b.store(payload, self.payload_pointer(b, cell, case))
        return cell

    def release_function(self) -> ll.Function:
        """void release(ctx, cell): the last reference frees the cell and its payload."""
        unit = self.fl.unit
        name = f"dlvm.release.enum.{self.name}"
        existing = unit.llmod.globals.get(name)
        if isinstance(existing, ll.Function):
            return existing
        fn, b = internal_function(unit.llmod, name, ll.VoidType(), [PTR, PTR])
        ctx, cell = fn.args
        with b.if_then(b.icmp_unsigned("!=", cell, ll.Constant(PTR, None))):
            rc = b.load(cell, typ=I64)
            with b.if_then(b.icmp_signed(">", rc, i64(0))):
                b.store(b.sub(rc, i64(1)), cell)
                with b.if_then(b.icmp_signed("==", rc, i64(1))):
                    tag = b.load(cell_data(b, cell), typ=I64)
                    saved = self.fl.b
                    self.fl.b = b
                    saved_ctx = self.fl.ctx
                    self.fl.ctx = ctx
                    try:
                        for case in self.cases:
                            types = self.case_types(case)
                            if not any(unit.layout.managed(t) for t in types):
                                continue
                            with b.if_then(b.icmp_signed("==", tag, i64(self.index(case)))):
                                for v, t in zip(self.load_payload(b, cell, case), types,
                                                strict=True):
                                    self.fl.release(v, t)
                    finally:
                        self.fl.b = saved
                        self.fl.ctx = saved_ctx
                    b.call(unit.rt.get("free_buffer"), [ctx, cell])
        b.ret_void()
        return fn


def cell_data(b: ll.IRBuilder, cell: ll.Value) -> ll.Value:
    return gep(b, I8, cell, i64(HEADER_BYTES))


def enum_layout(fl: FunctionLowering, t: Type) -> EnumLayout:
    rt = fl.layout.resolve(t)
    assert isinstance(rt, NominalType)
    decl = fl.unit.module.type_decls[rt.name]
    assert isinstance(decl, EnumDecl)
    return EnumLayout(fl, rt.name, decl)


def enum_ref(fl: FunctionLowering, v: ll.Value, t: Type, releasing: bool) -> None:
    if releasing:
        fl.b.call(enum_layout(fl, t).release_function(), [fl.ctx, v])
    else:
        fl.b.call(fl.rt.get("retain"), [v])


# ---------------------------------------------------------------- builtins


BUILTIN_RULES = ("min", "max", "mean", "softmax")


@lowers("builtin")
def lower_builtin(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    name = inst.builtin
    if name in ("min", "max"):
        inputs = {v: v for v in dict.fromkeys(inst.args) if not isinstance(v, LiteralValue)}
        return Region(fl, [inst], fl.type, inputs, [inst]).lower()[0]
    if name == "mean":
        return builtin_mean(fl, inst)
    if name == "softmax":
        return builtin_softmax(fl, inst)
    fl.fail(fl.site(f"builtin \"{name}\" has no native code"))
    fl.b.position_at_end(fl.llfn.append_basic_block("unreachable"))
    return ll.Constant(fl.layout.lower(fl.type(inst)), None)


def sum_loop(fl: FunctionLowering, t: TensorType, data: ll.Value, start: ll.Value,
             n: ll.Value, f: Callable[[ll.Value], ll.Value] | None = None) -> ll.Value:
    """Σ f(data[start + i]) for i < n, in vector partial sums."""
    b = fl.b
    st = scalar_type(t.dtype)
    acc = fl.result_slot(st)
    b.store(ll.Constant(st, 0.0), acc)
    with for_range(b, i64(0), n, "sum") as i:
        x = b.load(gep(b, element_type(t.dtype), data, add(b, start, i)), typ=st)
        if f is not None:
            x = f(x)
        b.store(b.fadd(b.load(acc, typ=st), x, flags=["reassoc"]), acc)
    return b.load(acc, typ=st)


def builtin_mean(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    x_v = inst.args[0]
    t = fl.tensor_type(x_v)
    if t.rank == 0:
        return fl.value(x_v)
    x = fl.tensor(x_v)
    n = x.count()
    total = sum_loop(fl, t, x.data, i64(0), n)
    st = scalar_type(t.dtype)
    return fl.b.fdiv(total, fl.b.sitofp(n, st))


def builtin_softmax(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """exp(x − max) / Σ exp(x − max) along the last dimension."""
    b = fl.b
    x_v = inst.args[0]
    t = fl.tensor_type(x_v)
    st = scalar_type(t.dtype)
    if t.rank == 0:
        return ll.Constant(st, 1.0)
    x = fl.tensor(x_v)
    struct, out = fl.new_tensor(fl.tensor_type(inst), x.dims)
    n = x.dims[-1]
    rows = product(b, x.dims[:-1])
    elem = element_type(t.dtype)
    mx = fl.result_slot(st)
    with for_range(b, i64(0), rows, "row") as r:
        start = mul(b, r, n)
        b.store(ll.Constant(st, float("-inf")), mx)
        with for_range(b, i64(0), n, "max") as i:
            v = b.load(gep(b, elem, x.data, add(b, start, i)), typ=st)
            fn = fl.unit.math.call(b, "maximum", [b.load(mx, typ=st), v])
            b.store(fn, mx)
        m = b.load(mx, typ=st)

        def shifted_exp(v: ll.Value) -> ll.Value:
            return fl.unit.math.call(b, "exp", [b.fsub(v, m)])

        with for_range(b, i64(0), n, "exp") as i:
            v = b.load(gep(b, elem, x.data, add(b, start, i)), typ=st)
            b.store(shifted_exp(v), gep(b, elem, out, add(b, start, i)))
        total = sum_loop(fl, t, out, start, n)
        with for_range(b, i64(0), n, "div") as i:
            p = gep(b, elem, out, add(b, start, i))
            b.store(b.fdiv(b.load(p, typ=st), total), p)
    return struct

