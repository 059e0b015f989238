"""Small helpers over llvmlite's IRBuilder: constants, counted loops, declarations."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from llvmlite import ir as ll

from .layout import I1, I32, I64, PTR


def i64(n: int) -> ll.Constant:
    return ll.Constant(I64, n)


def i32(n: int) -> ll.Constant:
    return ll.Constant(I32, n)


def true() -> ll.Constant:
    return ll.Constant(I1, 1)


def is_const(v: ll.Value, n: int | None = None) -> bool:
    """Whether `v` is an integer constant (equal to `n` when given)."""
    return isinstance(v, ll.Constant) and isinstance(v.constant, int) and (
        n is None or v.constant == n)


def mul(b: ll.IRBuilder, x: ll.Value, y: ll.Value) -> ll.Value:
    """x·y for i64 values, folded when either is a constant 0 or 1 or both are constants."""
    if is_const(x) and is_const(y):
        return i64(x.constant * y.constant)
    if is_const(x, 1) or is_const(y, 0):
        return y
    if is_const(y, 1) or is_const(x, 0):
        return x
    return b.mul(x, y, flags=["nsw"])


def add(b: ll.IRBuilder, x: ll.Value, y: ll.Value) -> ll.Value:
    if is_const(x) and is_const(y):
        return i64(x.constant + y.constant)
    if is_const(x, 0):
        return y
    if is_const(y, 0):
        return x
    return b.add(x, y, flags=["nsw"])


def product(b: ll.IRBuilder, xs: Sequence[ll.Value]) -> ll.Value:
    out: ll.Value = i64(1)
    for x in xs:
        out = mul(b, out, x)
    return out


@contextmanager
def for_range(b: ll.IRBuilder, start: ll.Value, stop: ll.Value, name: str = "i",
              step: int = 1) -> Iterator[ll.Value]:
    """`for (i = start; i < stop; i += step)`; the body is emitted inside the `with`."""
    pre = b.block
    head = b.append_basic_block(f"{name}.head")
    body = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.done")
    b.branch(head)
    b.position_at_end(head)
    index = b.phi(I64, name=name)
    index.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", index, stop), body, done)
    b.position_at_end(body)
    yield index
    nxt = b.add(index, i64(step), name=f"{name}.next", flags=["nsw"])
    index.add_incoming(nxt, b.block)
    b.branch(head)
    b.position_at_end(done)


def declare(module: ll.Module, name: str, ret: ll.Type, args: Sequence[ll.Type],
            var_arg: bool = False) -> ll.Function:
    """The function `name`, declared once per module."""
    existing = module.globals.get(name)
    if isinstance(existing, ll.Function):
        return existing
    return ll.Function(module, ll.FunctionType(ret, list(args), var_arg=var_arg), name)


def intrinsic(module: ll.Module, name: str, ret: ll.Type, args: Sequence[ll.Type]) -> ll.Function:
    return declare(module, name, ret, args)


def memcpy(b: ll.IRBuilder, dst: ll.Value, src: ll.Value, nbytes: ll.Value) -> None:
    fn = intrinsic(b.module, "llvm.memcpy.p0.p0.i64", ll.VoidType(), [PTR, PTR, I64, I1])
    b.call(fn, [dst, src, nbytes, ll.Constant(I1, 0)])


def memset(b: ll.IRBuilder, dst: ll.Value, byte: int, nbytes: ll.Value) -> None:
    fn = intrinsic(b.module, "llvm.memset.p0.i64", ll.VoidType(), [PTR, ll.IntType(8), I64, I1])
    b.call(fn, [dst, ll.Constant(ll.IntType(8), byte), nbytes, ll.Constant(I1, 0)])


def gep(b: ll.IRBuilder, elem: ll.Type, ptr: ll.Value, index: ll.Value,
        name: str = "") -> ll.Value:
    """&ptr[index] for elements of type `elem`."""
    if is_const(index, 0):
        return ptr
    return b.gep(ptr, [index], inbounds=True, name=name, source_etype=elem)


def byte_offset(b: ll.IRBuilder, ptr: ll.Value, nbytes: ll.Value | int) -> ll.Value:
    n = i64(nbytes) if isinstance(nbytes, int) else nbytes
    return gep(b, ll.IntType(8), ptr, n)


def internal_function(module: ll.Module, name: str, ret: ll.Type, args: Sequence[ll.Type],
                      *, inline: bool = False) -> tuple[ll.Function, ll.IRBuilder]:
    """A new internal function and a builder at its entry."""
    fn = ll.Function(module, ll.FunctionType(ret, list(args)), name)
    fn.linkage = "internal"
    if inline:
        fn.attributes.add("alwaysinline")
    return fn, ll.IRBuilder(fn.append_basic_block("entry"))


class _Callee:
    """A function pointer seen as a callee: llvmlite reads a callee's `function_type`,
    which a plain (opaque) pointer value does not have."""

    def __init__(self, pointer: ll.Value, ftype: ll.FunctionType) -> None:
        self.pointer, self.function_type, self.type = pointer, ftype, pointer.type

    def get_reference(self) -> str:
        return str(self.pointer.get_reference())


def call_pointer(b: ll.IRBuilder, target: ll.Value, ftype: ll.FunctionType,
                 args: Sequence[ll.Value]) -> ll.Value:
    """Call through a function pointer of type `ftype`."""
    callee = target if isinstance(target, ll.Function) else _Callee(target, ftype)
    return b.call(callee, list(args))


def alloca(b: ll.IRBuilder, t: ll.Type) -> ll.Value:
    """A stack slot as an opaque pointer (llvmlite types an alloca's pointer, and then
    computes wrong element types for GEPs through it)."""
    slot = b.alloca(t)
    slot.type = PTR
    return slot


def global_variable(module: ll.Module, t: ll.Type, name: str) -> ll.GlobalVariable:
    """A global whose address is an opaque pointer (see `alloca`)."""
    g = ll.GlobalVariable(module, t, name)
    g.type = PTR
    return g


def store_atomic(b: ll.IRBuilder, value: ll.Value, ptr: ll.Value, ordering: str) -> None:
    """An atomic store through an opaque pointer (llvmlite's checks a typed pointee)."""
    b._insert(ll.instructions.StoreAtomicInstr(b.block, value, ptr, ordering,
                                               value.type.width // 8))
