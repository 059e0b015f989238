"""Shape specialization: the types a function's values have for given argument types.

A call from Python fixes every dimension of the arguments; propagating them through the
type rules makes most `_` dimensions of a function static, which lets code generation use
constant trip counts, fold strides and plan buffers. A `Spec` is one function under one list
of argument types: the refined type of each of its values (`env`) and, for each direct call,
the `Spec` of the callee under the call's argument types — computed on demand, memoized,
and bounded per function so that recursion with changing shapes ends (in the function's own,
unspecialized types).

Block arguments take the join of what their incoming edges pass (a dimension stays static
when every edge agrees), computed to a fixed point over loops. An instruction whose type rule
rejects the refined operand types keeps its declared type: the mismatch is a run-time error
if, and only if, the instruction is reached — as in the interpreter.

Nothing is mutated for good: types are set while a function is analysed and restored after.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from dlvm.ir import Block, Function, Instruction, Module, TypeRuleError, Value
from dlvm.ir.analysis.dominance import DominatorTree
from dlvm.ir.types import ArrayType, TensorType, TupleType, Type, types_compatible

MAX_SPECS_PER_FUNCTION = 16


@dataclass(eq=False)
class Spec:
    fn: Function
    args: tuple[Type, ...]
    symbol: str
    env: dict[Value, Type] = field(default_factory=dict)
    callees: dict[Instruction, Spec] = field(default_factory=dict)
    result: Type | None = None
    done: bool = False

    def type(self, v: Value) -> Type:
        return self.env.get(v, v.type)

    def __repr__(self) -> str:
        return f"<Spec {self.symbol}: ({', '.join(map(str, self.args))})>"


def join(a: Type, b: Type) -> Type:
    """The most specific type both `a` and `b` have (dimensions that differ become `_`)."""
    if a == b:
        return a
    if isinstance(a, TensorType) and isinstance(b, TensorType) and a.rank == b.rank:
        return a.with_shape(tuple(x if x == y else None for x, y in zip(a.shape, b.shape,
                                                                         strict=True)))
    if isinstance(a, TupleType) and isinstance(b, TupleType) and len(a.elements) == len(
            b.elements):
        return TupleType(tuple(join(x, y) for x, y in zip(a.elements, b.elements, strict=True)))
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return ArrayType(a.count, join(a.element, b.element))
    return a


def refine(declared: Type, found: Type) -> Type:
    """The dimensions either type knows, when the two are compatible; else `declared`."""
    if declared == found or not types_compatible(declared, found):
        return declared
    if isinstance(declared, TensorType) and isinstance(found, TensorType):
        return declared.with_shape(tuple(d if d is not None else f for d, f in zip(
            declared.shape, found.shape, strict=True)))
    if isinstance(declared, TupleType) and isinstance(found, TupleType):
        return TupleType(tuple(refine(d, f) for d, f in zip(declared.elements, found.elements,
                                                            strict=True)))
    if isinstance(declared, ArrayType) and isinstance(found, ArrayType):
        return ArrayType(declared.count, refine(declared.element, found.element))
    return declared


def mangle(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]", "_", name)


class Specializer:
    def __init__(self, module: Module) -> None:
        self.module = module
        self.specs: dict[tuple[Function, tuple[Type, ...]], Spec] = {}
        self.per_function: dict[Function, int] = {}
        self.declared_types: dict[Function, dict[Value, Type]] = {}

    def spec(self, fn: Function, args: tuple[Type, ...] | None = None) -> Spec:
        """The specialization of `fn` for argument types `args` (None: its own types)."""
        declared = fn.type_.arguments
        if args is None or self.per_function.get(fn, 0) >= MAX_SPECS_PER_FUNCTION:
            args = declared
        args = tuple(refine(d, a) for d, a in zip(declared, args, strict=True))
        key = (fn, args)
        found = self.specs.get(key)
        if found is not None:
            return found
        n = self.per_function.get(fn, 0)
        self.per_function[fn] = n + 1
        symbol = f"dlvm.fn.{mangle(fn.name or 'anonymous')}" + (f".s{n}" if n else "")
        spec = self.specs[key] = Spec(fn, args, symbol)
        if fn.blocks:
            self.analyse(spec)
        spec.done = True
        return spec

    # ------------------------------------------------------------ analysis

    def analyse(self, spec: Spec) -> None:
        fn = spec.fn
        declared = self.declared(fn)
        with saved_types(fn):
            order = list(DominatorTree(fn).preorder())
            incoming: dict[Block, list[Type | None]] = {
                b: [None] * len(b.arguments) for b in order}
            for a, t in zip(fn.entry.arguments, spec.args, strict=True):
                a.type = t
            changed = True
            while changed:  # types only lose static dimensions, so this ends
                changed = False
                for block in order:
                    if block is not fn.entry:
                        for a, t in zip(block.arguments, incoming[block], strict=True):
                            a.type = declared[a] if t is None else refine(declared[a], t)
                    for inst in block.instructions:
                        before = inst.type
                        inst.type = declared[inst]
                        self.infer(spec, inst, declared[inst])
                        changed = changed or inst.type != before
                    term = block.terminator
                    for target in term.targets if term is not None else ():
                        slots = incoming.get(target.block)
                        if slots is None or target.block is fn.entry:
                            continue
                        for k, v in enumerate(target.args):
                            new = v.type if slots[k] is None else join(slots[k], v.type)
                            if new != slots[k]:
                                slots[k] = new
                                changed = True
            for block in order:
                for a in block.arguments:
                    spec.env[a] = a.type
                for inst in block.instructions:
                    spec.env[inst] = inst.type
            returned = [inst.value.type for b in order for inst in b.instructions
                        if inst.opcode == "return" and inst.fields.get("value") is not None]
            result = fn.type_.result
            if returned:
                found = returned[0]
                for t in returned[1:]:
                    found = join(found, t)
                result = refine(result, found)
            spec.result = result

    def declared(self, fn: Function) -> dict[Value, Type]:
        """The types the module gives `fn`'s values (an analysis of a caller may have set
        others for the moment)."""
        found = self.declared_types.get(fn)
        if found is None:
            found = self.declared_types[fn] = {
                v: v.type for b in fn.blocks for v in (*b.arguments, *b.instructions)}
        return found

    def infer(self, spec: Spec, inst: Instruction, declared: Type) -> None:
        callee = inst.fields.get("callee") if inst.opcode == "apply" else None
        if isinstance(callee, Function) and callee.blocks and callee.module is self.module:
            target = self.spec(callee, tuple(a.type for a in inst.args))
            spec.callees[inst] = target
            if target.result is not None:
                inst.type = refine(declared, target.result)
            return
        try:
            found = inst.op.infer(inst, self.module)
        except TypeRuleError:
            return  # keep the declared type; the run-time check reports it
        inst.type = refine(declared, found)


@contextmanager
def saved_types(fn: Function) -> Iterator[None]:
    """Restore the types of `fn`'s values after an analysis that sets them."""
    values: list[Value] = [a for b in fn.blocks for a in b.arguments]
    values += [i for b in fn.blocks for i in b.instructions]
    saved = [v.type for v in values]
    try:
        yield
    finally:
        for v, t in zip(values, saved, strict=True):
            v.type = t
