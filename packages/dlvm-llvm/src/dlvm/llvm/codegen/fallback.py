"""Instructions without a native lowering run their numpy semantics, called back from
native code.

A plugin defines an instruction once (`dlvm.ir.define`), with its type rule and numpy
semantics, and may give it native code (`rules.py`: `lowering_rule`, or `scalar_rule` for an
element-wise one). Without one, compiled code still runs it: it passes the operands (tensors)
to Python, which evaluates the instruction as the interpreter does and hands back a buffer
allocated the way the pool's large buffers are (so native code frees it with the rest).
Control flow, calls and everything else stay native. The callback, `dlvm_evaluate`, is a
symbol of this process only: emitted assembly and object files that call it are warned
about (`target.py`).
"""

from __future__ import annotations

import ctypes
import weakref
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir as ll

from dlvm.ir import Instruction, LiteralValue, Value
from dlvm.ir.interp import Interpreter
from dlvm.ir.runtime import ExecutionError, numpy_dtype
from dlvm.ir.types import TensorType

from .emit import declare, gep, i64
from .function import CompileError, FunctionLowering, Tensor, locate, make_tensor
from .layout import I1, I8, I32, I64, PTR, scalar_type
from .support import CTX_RNG, HEADER_BYTES

# int dlvm_evaluate(i64 generator/executable id, i64 instruction id, ptr operands, ptr result)
EVALUATE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                            ctypes.c_void_p)
_executables: dict[int, Any] = {}
PYTHON_ERROR = "<the error of the instruction's numpy semantics>"
_libc = ctypes.CDLL(None)
_memalign = _libc.posix_memalign
_memalign.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_size_t]


def lower_fallback(fl: FunctionLowering, inst: Instruction) -> ll.Value | None:
    if inst.op.evaluate is None:
        raise CompileError(f"target 'llvm-cpu' cannot compile instruction '{inst.opcode}': it "
                           "has neither a lowering rule nor numpy semantics")
    operands = [v for v in inst.operands if not isinstance(v, ll.Value)]
    types = [fl.type(v) for v in operands]
    result_t = fl.type(inst)
    for v, t in [*zip(operands, types, strict=True), (inst, result_t)]:
        if not isinstance(t, TensorType) and not (v is inst and t.is_void):
            raise CompileError(f"target 'llvm-cpu' cannot compile instruction "
                               f"'{inst.opcode}': it has no lowering rule and uses '{t}'")
    b = fl.b
    slots = sum(1 + t.rank for t in types)  # type: ignore[union-attr]
    args = fl.result_slot(ll.ArrayType(I64, max(slots, 1)))
    k = 0
    for v, t in zip(operands, types, strict=True):
        assert isinstance(t, TensorType)
        value = fl.value(v)
        slot = gep(b, I64, args, i64(k))
        if t.rank == 0:
            b.store(b.zext(value, I8) if value.type == I1 else value, slot)
        else:

            tensor = Tensor(b, value, t)
            b.store(tensor.data, slot)
            for d, size in enumerate(tensor.dims):
                b.store(size, gep(b, I64, args, i64(k + 1 + d)))
        k += 1 + t.rank
    rank = result_t.rank if isinstance(result_t, TensorType) else 0
    out = fl.result_slot(ll.ArrayType(I64, 2 + rank))
    fn = declare(fl.unit.llmod, "dlvm_evaluate", I32, [I64, I64, PTR, PTR])
    local = len(fl.unit.fallbacks)
    place = locate(inst)
    assert place is not None, "an instruction being lowered is in a function"
    fl.unit.fallbacks.append(list(place))
    # the executable numbers its instructions across objects: it stores where this
    # object's numbers start when it loads it
    base = b.load(fl.unit.fallback_base(), typ=I64)
    owner = b.load(fl.rt.slot(b, fl.ctx, CTX_RNG), typ=I64)
    status = b.call(fn, [owner, b.add(base, i64(local)), args, out])
    with b.if_then(b.icmp_signed("!=", status, ll.Constant(I32, 0)), likely=False):
        fl.rt.fail(b, fl.ctx, fl.unit.site(PYTHON_ERROR, inst))
    if not isinstance(result_t, TensorType):
        return None
    if rank == 0:
        st = scalar_type(result_t.dtype)
        v = b.load(out, typ=I8 if st == I1 else st)
        return b.trunc(v, I1) if st == I1 else v
    buf = b.load(out, typ=PTR)
    data = b.load(gep(b, PTR, out, i64(1)), typ=PTR)
    dims = [b.load(gep(b, I64, out, i64(2 + d)), typ=I64) for d in range(rank)]
    return make_tensor(b, buf, data, dims)


# ---------------------------------------------------------------- the Python side


class _Frame:
    """What an instruction's `evaluate` may ask of the interpreter, for one call."""

    def __init__(self, exe: Any, values: dict[Value, Any]) -> None:
        self.values = values
        self.module = exe.module
        self.rng = exe.rng

    def get(self, v: Value) -> Any:
        if v in self.values:
            return self.values[v]
        if isinstance(v, LiteralValue):
            return Interpreter(self.module).literal(v, self)  # type: ignore[arg-type]
        raise ExecutionError(f"operand {v!r} is not available to the instruction")

    def call_function(self, fn: Any, args: list[Any]) -> Any:
        raise ExecutionError("an instruction evaluated for native code cannot call functions")


def _evaluate(owner: int, index: int, operands: int, result: int) -> int:
    exe = _executables.get(owner)
    if exe is None:
        return 1
    inst = exe.fallback(index)
    try:
        values: dict[Value, Any] = {}
        slots = np.ctypeslib.as_array(ctypes.cast(operands, ctypes.POINTER(ctypes.c_int64)),
                                      shape=(4096,))
        k = 0
        for v in [v for v in inst.operands if not isinstance(v, LiteralValue)]:
            t = exe.module.resolve(v.type)
            dtype = np.dtype(numpy_dtype(t.dtype))
            if t.rank == 0:
                values[v] = slots[k:k + 1].view(np.uint8)[:dtype.itemsize].view(dtype).reshape(
                    ()).copy()
            else:
                dims = tuple(int(d) for d in slots[k + 1:k + 1 + t.rank])
                size = int(np.prod(dims, dtype=np.int64)) * dtype.itemsize
                raw = (ctypes.c_char * size).from_address(int(slots[k])) if size else b""
                values[v] = np.frombuffer(raw, dtype).reshape(dims)
            k += 1 + t.rank
        with np.errstate(all="ignore"):
            value = inst.op.evaluate(inst, _Frame(exe, values))
        t = exe.module.resolve(inst.type)
        if not isinstance(t, TensorType):
            return 0
        arr = np.ascontiguousarray(np.asarray(value, numpy_dtype(t.dtype)))
        out = np.ctypeslib.as_array(ctypes.cast(result, ctypes.POINTER(ctypes.c_int64)),
                                    shape=(2 + t.rank,))
        if t.rank == 0:
            out[:1].view(np.uint8)[:arr.itemsize] = arr.reshape(1).view(np.uint8)
            return 0
        block = ctypes.c_void_p()
        total = (HEADER_BYTES + arr.nbytes + 63) & ~63
        if _memalign(ctypes.byref(block), 64, total) != 0 or not block.value:
            raise MemoryError(f"unable to allocate {arr.nbytes} bytes")
        header = np.ctypeslib.as_array(ctypes.cast(block.value, ctypes.POINTER(ctypes.c_int64)),
                                       shape=(3,))
        header[:] = (1, -1, 0)  # one reference, not from the pool: freed by libc
        ctypes.memmove(block.value + HEADER_BYTES, arr.ctypes.data, arr.nbytes)
        out[0], out[1] = block.value, block.value + HEADER_BYTES
        out[2:2 + arr.ndim] = arr.shape
        return 0
    except Exception as e:  # the message goes to the native error path
        exe.fallback_error = str(e) if isinstance(e, ExecutionError) else \
            f"{type(e).__name__}: {e}"
        return 1


_callback = EVALUATE(_evaluate)
llvm.add_symbol("dlvm_evaluate", ctypes.cast(_callback, ctypes.c_void_p).value or 0)


def register(exe: Any, owner: int) -> None:
    """Let native code of `exe` (whose context carries `owner`) call back for it."""
    _executables[owner] = exe
    weakref.finalize(exe, _executables.pop, owner, None)
