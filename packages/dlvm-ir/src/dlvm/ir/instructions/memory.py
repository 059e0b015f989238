"""Memory, reference counting, `trap`, and the `stack` used as the AD tape."""

from __future__ import annotations

from typing import Any

from ..core import FieldKey, Instruction, Module
from ..opdef import define
from ..runtime import (
    Box,
    ExecutionError,
    Memory,
    Pointer,
    Stack,
    check_conforms,
    zero_value,
)
from ..types import MAX_SIZE, STACK, VOID, BoxType, PointerType, StackType, Type, types_compatible
from .aggregate import element_type, runtime_keys
from .common import fail, resolved, scalar_of

EFFECTS = ("side_effects",)


def _pointee(v: Any, m: Module | None, what: str = "operand") -> Type:
    t = resolved(v.type, m)
    if not isinstance(t, PointerType):
        fail(f"{what} must be a pointer, found '{v.type}'")
    return t.pointee


def _boxed(v: Any, m: Module | None) -> Type:
    t = resolved(v.type, m)
    if not isinstance(t, BoxType):
        fail(f"operand must be a box, found '{v.type}'")
    return t.boxed


def _stack(v: Any, m: Module | None) -> None:
    if not isinstance(resolved(v.type, m), StackType):
        fail(f"operand must be a stack, found '{v.type}'")


def _int_count(v: Any, m: Module | None) -> None:
    t = scalar_of(v, m, "count")
    if not t.dtype.is_signed_int:
        fail(f"count must be a signed integer scalar (iN), found '{v.type}'")


def _address(inst: Instruction, field: str, frame: Any) -> Pointer:
    """The non-null pointer (or box contents) held by operand `field`."""
    p = frame.get(inst.fields[field])
    if p is None:
        raise ExecutionError(f"{field} is null")
    return Pointer(p.memory) if isinstance(p, Box) else p


def _box(inst: Instruction, frame: Any) -> Box:
    box = frame.get(inst.box)
    if box is None:
        raise ExecutionError("box is null")
    if box.memory.freed:
        raise ExecutionError("use of a freed box")
    return box


def _alloc_stack_rule(inst: Instruction, m: Module | None) -> Type:
    if not 1 <= inst.count <= MAX_SIZE:
        fail(f"allocateStack needs a count from 1 to {MAX_SIZE}, found {inst.count}")
    return PointerType(inst.type_)


def _alloc(t: Type, n: Any, frame: Any) -> Pointer:
    """`n` cells of type `t`, made as they are written (see `Memory`): any count costs the
    same, and a negative one is refused here, where it is given."""
    return Pointer(Memory(int(n), zero_value(t, frame.module)))


define("allocateStack", "$type_:type count $count:int", _alloc_stack_rule, traits=EFFECTS,
       evaluate=lambda inst, f: _alloc(inst.type_, inst.count, f), category="memory",
       summary="allocate `count` values of a type in the function's frame")


def _alloc_heap_rule(inst: Instruction, m: Module | None) -> Type:
    _int_count(inst.count, m)
    return PointerType(inst.type_)


define("allocateHeap", "$type_:type count $count", _alloc_heap_rule, traits=EFFECTS,
       evaluate=lambda inst, f: _alloc(inst.type_, f.get(inst.count), f),
       category="memory", summary="allocate `count` values of a type on the heap")

define("allocateBox", "$type_:type", lambda inst, m: BoxType(inst.type_), traits=EFFECTS,
       evaluate=lambda inst, f: Box(Memory.holding(zero_value(inst.type_, f.module))),
       category="memory", summary="allocate a reference-counted box")
define("projectBox", "$box", lambda inst, m: PointerType(_boxed(inst.box, m)),
       evaluate=lambda inst, f: Pointer(_box(inst, f).memory), category="memory",
       summary="the address of a box's contents")


def _retain(inst: Instruction, frame: Any) -> None:
    _box(inst, frame).refcount += 1


def _release(inst: Instruction, frame: Any) -> None:
    box = _box(inst, frame)
    box.refcount -= 1
    if box.refcount == 0:
        box.memory.free()


define("retain", "$box", lambda inst, m: (_boxed(inst.box, m), VOID)[1], traits=EFFECTS,
       evaluate=_retain, category="memory", summary="increment a box's reference count")
define("release", "$box", lambda inst, m: (_boxed(inst.box, m), VOID)[1], traits=EFFECTS,
       evaluate=_release, category="memory",
       summary="decrement a box's reference count, freeing it at zero")


def _deallocate(inst: Instruction, frame: Any) -> None:
    p = _address(inst, "pointer", frame)
    if p.memory.freed:
        raise ExecutionError("double deallocation")
    p.memory.free()


define("deallocate", "$pointer", lambda inst, m: (_pointee(inst.pointer, m), VOID)[1],
       traits=EFFECTS, evaluate=_deallocate, category="memory", summary="free memory")
define("load", "$pointer", lambda inst, m: _pointee(inst.pointer, m),
       evaluate=lambda inst, f: _address(inst, "pointer", f).load(), category="memory",
       summary="read the value at an address")


def _store_rule(inst: Instruction, m: Module | None) -> Type:
    t = _pointee(inst.pointer, m)
    if resolved(t, m) != resolved(inst.value.type, m):
        fail(f"cannot store '{inst.value.type}' to '{inst.pointer.type}'")
    return VOID


define("store", "$value to $pointer", _store_rule, traits=EFFECTS,
       evaluate=lambda inst, f: _address(inst, "pointer", f).store(f.get(inst.value)),
       category="memory", summary="write a value to an address")


def _element_pointer_eval(inst: Instruction, frame: Any) -> Pointer:
    p = _address(inst, "pointer", frame)
    q = Pointer(p.memory, p.index, p.path + runtime_keys(inst.keys, frame))
    if any(not isinstance(k, int | FieldKey) for k in inst.keys):
        q.load()  # a dynamic index must be in range here, as for extract
    return q


define("elementPointer", "$pointer at $keys:keys",
       lambda inst, m: PointerType(element_type(_pointee(inst.pointer, m), inst.keys, m)),
       evaluate=_element_pointer_eval, category="memory",
       summary="the address of an element inside the pointee")


def _copy_rule(inst: Instruction, m: Module | None) -> Type:
    src, dst = resolved(inst.source.type, m), resolved(inst.destination.type, m)
    if isinstance(src, BoxType) and isinstance(dst, BoxType):
        same = src.boxed == dst.boxed
    elif isinstance(src, PointerType) and isinstance(dst, PointerType):
        same = src.pointee == dst.pointee
    else:
        fail(f"copy needs two pointers or two boxes, found '{src}' and '{dst}'")
    if not same:
        fail(f"cannot copy from '{src}' to '{dst}'")
    _int_count(inst.count, m)
    return VOID


def _copy_eval(inst: Instruction, frame: Any) -> None:
    src, dst = _address(inst, "source", frame), _address(inst, "destination", frame)
    n = int(frame.get(inst.count))
    if n < 0:
        raise ExecutionError(f"negative count {n}")
    src.check_live()
    dst.check_live()
    if n and not src.path and not dst.path:  # whole cells: a range check, then one move
        _check_cells(src, n, "reads past the end of its source")
        _check_cells(dst, n, "writes past the end of its destination")
        src.memory.copy_cells(src.index, dst.memory, dst.index, n)
        return
    values = [_step(src, i, "reads past the end of its source").load() for i in range(n)]
    targets = [_step(dst, i, "writes past the end of its destination") for i in range(n)]
    for t, v in zip(targets, values, strict=True):
        t.store(v)


def _check_cells(p: Pointer, n: int, problem: str) -> None:
    """Raise unless cells p…p+n−1 are in bounds, naming the first one that is not."""
    first_bad = p.index if not 0 <= p.index < p.memory.count else min(
        p.index + n, p.memory.count)
    if first_bad < p.index + n:
        raise ExecutionError(f"copy {problem}: pointer index {first_bad} out of bounds")


def _step(p: Pointer, i: int, problem: str) -> Pointer:
    """The pointer `i` elements past `p`, checked to address an element."""
    q = p.offset(i)
    try:
        q.load()
    except ExecutionError as e:
        raise ExecutionError(f"copy {problem}: {e}") from None
    return q


define("copy", "from $source to $destination count $count", _copy_rule, traits=EFFECTS,
       evaluate=_copy_eval, category="memory", summary="copy `count` values between addresses")


def _trap(inst: Instruction, frame: Any) -> None:
    raise ExecutionError("trap")


define("trap", "", lambda inst, m: VOID, traits=("side_effects", "may_trap"), evaluate=_trap,
       category="memory", summary="stop the program with an error")

# ---------------------------------------------------------------- stack (AD tape)

define("createStack", "", lambda inst, m: STACK, traits=EFFECTS,
       evaluate=lambda inst, f: Stack(), category="stack", summary="a new empty stack")
define("destroyStack", "$stack", lambda inst, m: (_stack(inst.stack, m), VOID)[1],
       traits=EFFECTS, evaluate=lambda inst, f: _stack_value(inst, f).items.clear(),
       category="stack", summary="release a stack")


def _stack_value(inst: Instruction, frame: Any) -> Any:
    s = frame.get(inst.stack)
    if s is None:
        raise ExecutionError("use of an undefined stack")
    return s


def _push(inst: Instruction, frame: Any) -> None:
    _stack_value(inst, frame).items.append((frame.get(inst.value), inst.value.type))


define("push", "$value to $stack", lambda inst, m: (_stack(inst.stack, m), VOID)[1],
       traits=EFFECTS, evaluate=_push, category="stack", summary="push a value on a stack")


def _pop(inst: Instruction, frame: Any) -> Any:
    s = _stack_value(inst, frame)
    if not s.items:
        raise ExecutionError("pop from an empty stack")
    value, pushed = s.items[-1]
    m = frame.module
    if not types_compatible(m.resolve(pushed), m.resolve(inst.type_)):
        raise ExecutionError(f"pop of '{inst.type_}' from a stack whose top is '{pushed}'")
    check_conforms(value, inst.type_, m, "popped value")
    s.items.pop()
    return value


define("pop", "$type_:type from $stack", lambda inst, m: (_stack(inst.stack, m), inst.type_)[1],
       traits=EFFECTS, evaluate=_pop, category="stack",
       summary="pop the most recently pushed value, of the given type")
