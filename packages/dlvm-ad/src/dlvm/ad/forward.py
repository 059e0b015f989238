"""Forward mode: the body of a `[tangent @f wrt … keeping …]` declaration.

The generated function is a copy of `f` that computes, next to every varied
value, its tangent (the directional derivative along the tangent arguments).
Control flow needs no tape: each block gets one extra argument per varied
block argument, and branches pass the tangents along with the values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dlvm.ir import (
    AggregateLiteral,
    Argument,
    Block,
    Builder,
    Function,
    Instruction,
    LiteralValue,
    Value,
)
from dlvm.ir.derivatives import wrt_indices
from dlvm.ir.types import FunctionType, TensorType, TupleType

from .activity import carries_derivative, varied_values
from .context import TangentContext
from .copying import copy_instruction, map_value
from .reverse import DifferentiationError, _where
from .rules import TANGENTS

if TYPE_CHECKING:
    from .differentiation import Generator


STACK_OPS = {"push", "pop", "destroyStack"}


class ForwardContext(TangentContext):
    def __init__(self, builder: Builder, generator: Generator) -> None:
        super().__init__(builder, generator.module)
        self.generator = generator
        self.primals: dict[Value, Value] = {}
        self.tangents: dict[Value, Value] = {}

    def primal(self, v: Value) -> Value:
        return map_value(v, self.primals)

    def tangent(self, v: Value) -> Value | None:
        if isinstance(v, LiteralValue):
            elements = getattr(v.literal, "elements", ())
            if isinstance(self.module.resolve(v.type), TupleType) and any(
                    self.tangent(e) is not None for e in elements):
                out = [self.tangent(e) or self.zeros(e) for e in elements]
                return LiteralValue(AggregateLiteral("tuple", tuple(out)), v.type)
            return None
        return self.tangents.get(v)

    def call_tangent(self, inst: Value) -> Value | None:
        assert isinstance(inst, Instruction)
        return self.generator.call_tangent(self, inst)

    def zeros(self, like: Value) -> Value:
        if isinstance(like, LiteralValue) and isinstance(self.module.resolve(like.type),
                                                         TensorType):
            from dlvm.ir.builder import constant

            t = self.type_of(like)
            return constant(0.0 if t.dtype.is_float else 0, t)
        return super().zeros(like)


class TangentBuilder:
    def __init__(self, generator: Generator, tf: Function) -> None:
        self.generator = generator
        self.module = generator.module
        self.tf = tf
        decl = tf.declaration
        assert decl is not None and not isinstance(decl, str)
        self.decl = decl
        f = decl.of
        assert isinstance(f, Function)
        self.f = f
        self.ftype = FunctionType(tuple(self.module.resolve(t) for t in f.type_.arguments),
                                  self.module.resolve(f.type_.result))
        self.wrt = wrt_indices(decl, self.ftype, self.module)
        self.b = Builder(self.module)

    def build(self) -> None:
        f, b = self.f, self.b
        wrt_args = [f.entry.arguments[i] for i in self.wrt]
        varied = varied_values(f, wrt_args, self.module)
        c = ForwardContext(b, self.generator)
        self.tf.blocks.clear()
        arg_types = list(self.ftype.arguments) + [self.ftype.arguments[i] for i in self.wrt]
        names = [a.name for a in f.entry.arguments] + [
            f"t_{a.name}" if a.name else None for a in wrt_args]
        entry = b.block_in(self.tf, "entry", arg_types, names)
        n = len(self.ftype.arguments)
        c.primals.update(zip(f.entry.arguments, entry.arguments[:n], strict=True))
        c.tangents.update(zip(wrt_args, entry.arguments[n:], strict=True))
        blocks: dict[Block, Block] = {f.entry: entry}
        carried: dict[Block, list[Argument]] = {f.entry: []}
        for block in f.blocks[1:]:
            nb = b.block_in(self.tf, block.name, [a.type for a in block.arguments],
                            [a.name for a in block.arguments])
            carried[block] = [a for a in block.arguments if a in varied]
            for a in carried[block]:
                c.tangents[a] = nb.add_argument(Argument(a.type, f"t_{a.name}" if a.name
                                                         else None))
            c.primals.update(zip(block.arguments, nb.arguments, strict=False))
            blocks[block] = nb
        for block in f.blocks:
            b.position_at_end(blocks[block])
            for inst in block.instructions[:-1]:
                c.primals[inst] = b.insert(copy_instruction(inst, c.primals))
                if self.is_stack_op(inst, varied):
                    self.stack_tangent(c, inst)
                elif inst in varied:
                    self.tangent_of(c, inst)
            self.terminator(c, block.instructions[-1], blocks, carried)

    @staticmethod
    def is_stack_op(inst: Instruction, varied: set[Value]) -> bool:
        if inst.opcode == "createStack":
            return inst in varied
        return inst.opcode in STACK_OPS and inst.stack in varied

    def stack_tangent(self, c: ForwardContext, inst: Instruction) -> None:
        """An active stack has a twin holding the tangents of its float values."""
        b = self.b
        if inst.opcode == "createStack":
            c.tangents[inst] = b.createStack()
            return
        twin = c.tangents[inst.stack]
        if inst.opcode == "destroyStack":
            b.destroyStack(twin)
        elif inst.opcode == "push" and carries_derivative(inst.value.type, self.module):
            t = c.tangent(inst.value)
            b.push(t if t is not None else c.zeros(inst.value), twin)
        elif inst.opcode == "pop" and carries_derivative(inst.type, self.module):
            c.tangents[inst] = b.pop(self.module.resolve(inst.type), twin)

    def tangent_of(self, c: ForwardContext, inst: Instruction) -> None:
        rule = TANGENTS.get(inst.opcode)
        if rule is None:
            raise DifferentiationError(f"{_where(inst)}'{inst.opcode}' has no tangent rule: "
                                       "it cannot be differentiated in forward mode")
        t = rule(c, inst)
        if t is None:
            return
        if isinstance(self.module.resolve(inst.type), TensorType):
            t = c.broadcast_to(t, inst)
        c.tangents[inst] = t

    def terminator(self, c: ForwardContext, term: Instruction, blocks: dict[Block, Block],
                   carried: dict[Block, list[Argument]]) -> None:
        b = self.b
        if term.opcode == "return":
            b.ret(self.results(c, term.value))
            return
        copy = copy_instruction(term, c.primals, blocks)
        for old, new in zip(term.targets, copy.targets, strict=True):
            extra = []
            for a in carried[old.block]:
                arg = old.args[a.index()]
                t = c.tangent(arg)
                extra.append(t if t is not None else c.zeros(arg))
            new.args = list(new.args) + extra
        b.insert(copy)

    def results(self, c: ForwardContext, returned: Value) -> Value:
        out: list[Value] = []
        is_tuple = isinstance(self.ftype.result, TupleType)
        index = self.decl.from_index or 0
        t = c.tangent(returned)
        if is_tuple:
            if t is not None:
                t = c.b.extract(t, keys=[index])
            else:
                elements = getattr(getattr(returned, "literal", None), "elements", None)
                element = elements[index] if elements else None
                if element is not None:
                    t = c.tangent(element)
        if t is None:
            primal = c.primal(returned)
            value = c.b.extract(primal, keys=[index]) if is_tuple else primal
            mask = c.b.equal(value, value)
            zero = c.const(0.0, value)
            t = c.b.select(zero, zero, mask)
        else:
            like_type = self.module.resolve(self.ftype.result)
            if is_tuple:
                like_type = like_type.elements[index]  # type: ignore[union-attr]
            if self.module.resolve(t.type) != like_type:
                primal = c.primal(returned)
                value = c.b.extract(primal, keys=[index]) if is_tuple else primal
                t = c.b.add(t, c.b.select(c.const(0.0, value), c.const(0.0, value),
                                          c.b.equal(value, value)))
        out.append(t)
        for k in self.decl.keeping:
            primal = c.primal(returned)
            out.append(c.b.extract(primal, keys=[k]) if is_tuple else primal)
        return LiteralValue(AggregateLiteral("tuple", tuple(out)),
                            TupleType(tuple(v.type for v in out)))
