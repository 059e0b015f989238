"""Computing in another precision: one rewrite that both the LLVM targets (bf16 arithmetic in
f32) and mixed-precision training (f32 arithmetic in bf16 or f16) use.

`recompute(fn, module, source, compute_of)` turns every instruction of `fn` that computes
with tensors of data type `source` (element-wise arithmetic and compares, reductions by a
built-in combinator, `dot`, `convolve`, `random`, built-in calls) into the same instruction
on the data type `compute_of(inst)`: its `source` operands converted first (a literal
retyped), its `source` result converted back after it, for its users:

    %y = add %a: <4 x bf16>, %b: <4 x bf16>
becomes (source bf16, computing in f32)
    %a32 = dataTypeCast %a: <4 x bf16> to f32
    %b32 = dataTypeCast %b: <4 x bf16> to f32
    %y32 = add %a32: <4 x f32>, %b32: <4 x f32>
    %y = dataTypeCast %y32: <4 x f32> to bf16

What only moves values (layout, shape casts, `select`, literals, calls, branches, memory)
keeps them as they are. Where the computing type is the narrower one (f32 computed in bf16),
converting a result back and then down again is exact, so a rewritten instruction feeds the
next directly; where it is the wider one (bf16 computed in f32), each result is rounded, as
the narrow type's own arithmetic would round it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .builder import Builder
from .core import Function, Instruction, LiteralValue, Module, Value
from .types import ArrayType, DataType, FunctionType, TensorType, TupleType, Type

COMPUTING_CATEGORIES = ("reduction", "linear algebra", "random")
# after an instruction is rewritten: (builder after it, the instruction, its result converted
# back) → the value its users get
Finish = Callable[[Builder, Instruction, Value], Value]


def mentions(t: Type, dtype: DataType, module: Module) -> bool:
    """Whether `t` holds tensors of `dtype` (in tuples, arrays and function types too)."""
    t = module.resolve(t)
    if isinstance(t, TensorType):
        return t.dtype == dtype
    if isinstance(t, TupleType):
        return any(mentions(e, dtype, module) for e in t.elements)
    if isinstance(t, ArrayType):
        return mentions(t.element, dtype, module)
    if isinstance(t, FunctionType):
        return any(mentions(e, dtype, module) for e in (*t.arguments, t.result))
    return False


def module_mentions(module: Module, dtype: DataType) -> bool:
    return any(mentions(fn.type, dtype, module) or any(
        mentions(a.type, dtype, module) for block in fn.blocks for a in block.arguments) or any(
        mentions(i.type, dtype, module) for i in fn.instructions()) for fn in module.functions)


def computes(inst: Instruction) -> bool:
    """Whether `inst` computes new values from its operands' (rather than moving them)."""
    if inst.opcode in ("select", "dataTypeCast"):
        return False
    if inst.opcode in ("reduce", "scan", "reduceWindow"):
        return not isinstance(inst.combinator, Function)  # a function takes its own types
    return "elementwise" in inst.op.traits or inst.op.category in COMPUTING_CATEGORIES or \
        inst.opcode == "builtin"


def recompute(fn: Function, module: Module, source: DataType,
              compute_of: Callable[[Instruction], DataType | None],
              finish: Finish | None = None) -> int:
    """Rewrite `fn` as the module docstring says; returns how many instructions changed."""
    rounded: dict[Value, Value] = {}  # a rewritten instruction → its result converted back
    # the rewritten instructions (whose operands are final: one may use an earlier one
    # directly) and their conversions back (which use them): not to be remapped
    final: set[Value] = set()
    computed: dict[Value, Value] = {}  # a conversion back → what it converts
    count = 0
    for block in fn.blocks:
        for inst in list(block.instructions):  # (what the rewrite adds is not visited)
            inst.replace_uses(rounded)
            wide = compute_of(inst) if computes(inst) else None
            if wide is None or not (mentions(inst.type, source, module) or any(
                    mentions(v.type, source, module) for v in inst.operands)):
                continue
            back = rewrite(inst, module, source, wide, computed)
            final.add(inst)
            count += 1
            if back is not None:
                final.add(back)
                rounded[inst] = back if finish is None else finish(after(back, module),
                                                                   inst, back)
                if wide.can_widen_to(source):  # back and down again is exact
                    computed[back] = inst
    if rounded:  # uses that come before their definition in block order (loops)
        for block in fn.blocks:
            for inst in block.instructions:
                if inst not in final:
                    inst.replace_uses(rounded)
        used = {v for i in fn.instructions() for v in i.operands}
        for cast in [v for v in computed if v not in used and isinstance(v, Instruction)]:
            cast.erase()  # a conversion back that the next instructions did not need
    return count


def rewrite(inst: Instruction, module: Module, source: DataType, wide: DataType,
            computed: dict[Value, Value]) -> Instruction | None:
    """`inst` on `wide`; returns the conversion of its result back to `source` (None if its
    result has another type)."""
    assert inst.block is not None
    b = Builder(module)
    b.position_before(inst)
    converted: dict[Value, Value] = {}

    def convert(v: Any) -> Any:
        if not isinstance(v, Value):
            return v
        t = module.resolve(v.type)
        if not (isinstance(t, TensorType) and t.dtype == source):
            return v
        if isinstance(v, LiteralValue):
            return LiteralValue(v.literal, t.with_dtype(wide))
        earlier = computed.get(v)
        if earlier is not None and module.resolve(earlier.type) == t.with_dtype(wide):
            return earlier
        if v not in converted:
            converted[v] = b.dataTypeCast(v, wide)
        return converted[v]

    inst.map_operands(convert)
    old = module.resolve(inst.type)
    inst.type = inst.op.infer(inst, module)
    if not (isinstance(old, TensorType) and old.dtype == source):
        return None
    return after(inst, module).dataTypeCast(inst, source)


def after(inst: Instruction, module: Module) -> Builder:
    b = Builder(module)
    b.position_after(inst)
    return b
