"""Reverse mode: the body of a `[gradient …]` declaration, by adjoint code generation.

The generated function first runs a copy of the primal function (the forward
sweep), then walks it backwards applying the adjoint rules (the reverse sweep).

- A single-block primal gets a straight-line reverse sweep in the same block.
- With control flow, the forward sweep records a tape on a `stack`: at the end
  of each executed block it pushes the values that block's reverse needs, then
  the block's id. The reverse sweep pops an id, dispatches to that block's
  reverse, and repeats until the entry block has been reversed. Adjoints of
  values live across blocks (block arguments, values used in other blocks,
  the function's arguments) travel as block arguments of the reverse blocks;
  an adjoint is consumed (and reset to zero) where its value was defined, or,
  for a block argument, at the branch that passed it.
- A `conditional` that passes varied arguments to a target reaches it through an
  edge of its own in the forward sweep (a block that pushes its own id), so the
  reverse sweep passes the parameters' adjoints back only along the edge that was
  taken: the reverse of the branching block cannot tell which one it was.
- With `checkpoint`, a block pushes only the values it reads from other blocks
  (and results of impure instructions) and its reverse recomputes the rest.
- The adjoint of a tuple read element by element (`extract k`, as a function reads
  the parameters it is given as one tuple) is kept element by element until it is
  read whole: n extracts cost n additions, not n tuples of n elements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dlvm.ir import (
    AggregateLiteral,
    Argument,
    Block,
    Builder,
    Function,
    Instruction,
    LiteralValue,
    Module,
    Value,
)
from dlvm.ir.builder import constant
from dlvm.ir.core import BranchTarget, UniqueNames
from dlvm.ir.derivatives import differentiated_output, wrt_indices
from dlvm.ir.types import I64, STACK, FunctionType, TensorType, TupleType, Type, scalar

from .activity import carries_derivative, uses, varied_values
from .context import AdjointContext, tuple_element_zeros
from .copying import copy_instruction, map_value
from .errors import DifferentiationError
from .rules import ADJOINTS

if TYPE_CHECKING:
    from .differentiation import Generator


def _where(inst: Instruction) -> str:
    return f"{inst.location}: " if inst.location else ""


class ElementAdjoint(Value):
    """A contribution `dy` to element `index` of a tuple's adjoint, zero elsewhere: it
    passes from the `extract` rule to `ReverseContext.accumulate` and never into the IR."""

    __slots__ = ("dy", "index")

    def __init__(self, type: Type, index: int, dy: Value) -> None:
        super().__init__(type)
        self.index = index
        self.dy = dy


@dataclass
class ReverseContext(AdjointContext):
    """The state of one reverse block: primal values in scope and current adjoints."""

    b: Builder
    module: Module
    generator: Generator
    primals: dict[Value, Value] = field(default_factory=dict)
    adjoints: dict[Value, Value] = field(default_factory=dict)
    varied: set[Value] = field(default_factory=set)
    # adjoints of tuples element by element (see `ElementAdjoint`), added to `adjoints`
    # when read
    parts: dict[Value, dict[int, Value]] = field(default_factory=dict)
    # Between blocks, zeros of dynamic shape travel with size-1 dimensions: reads
    # restore the exact shape. Straight-line code has no such zeros.
    normalize: bool = False
    # active stacks of the primal → the stacks of their adjoints (see `reverse_stack_op`)
    adjoint_stacks: dict[Value, Value] = field(default_factory=dict)

    def primal(self, v: Value) -> Value:
        if isinstance(v, LiteralValue):
            return map_value(v, self.primals)
        try:
            return self.primals[v]
        except KeyError:
            raise DifferentiationError(f"internal error: no primal value for {v!r} in the "
                                       "reverse sweep") from None

    def call_adjoint(self, inst: Value, dy: Value) -> list[tuple[Value, Value]]:
        assert isinstance(inst, Instruction)
        return self.generator.call_adjoint(self, inst, dy)

    # ------------------------------------------------------------ accumulation

    def add(self, a: Value, b: Value, type: Type) -> Value:
        """a + b for adjoints of type `type` (tuples element by element)."""
        t = self.module.resolve(type)
        if isinstance(t, TupleType):
            sums = []
            for i, e in enumerate(t.elements):
                x, y = self.element(a, i), self.element(b, i)
                sums.append(self.add(x, y, e) if carries_derivative(e, self.module) else x)
            return LiteralValue(AggregateLiteral("tuple", tuple(sums)), t)
        return self.b.add(a, b)

    def element(self, aggregate: Value, index: int) -> Value:
        """Element `index` of a tuple: read from a tuple literal, extracted otherwise."""
        literal = aggregate.literal if isinstance(aggregate, LiteralValue) else None
        if isinstance(literal, AggregateLiteral) and literal.kind == "tuple":
            return literal.elements[index]
        return self.b.extract(aggregate, keys=[index])

    def element_adjoint(self, aggregate: Value, keys: list[Value | int], dy: Value) -> Value:
        if len(keys) == 1 and isinstance(keys[0], int) and \
                isinstance(self.module.resolve(aggregate.type), TupleType):
            return ElementAdjoint(aggregate.type, keys[0], dy)
        return super().element_adjoint(aggregate, keys, dy)

    def adjoint(self, v: Value) -> Value | None:
        """The adjoint of `v` so far (None: zero), its elements gathered into one value."""
        parts = self.parts.pop(v, None)
        if parts is None:
            return self.adjoints.get(v)
        t = self.module.resolve(v.type)
        assert isinstance(t, TupleType)
        dense = self.adjoints.get(v)
        elements: list[Value] = []
        for i, e in enumerate(t.elements):
            part = parts.get(i)
            if dense is not None:
                base = self.element(dense, i)
                if part is not None and carries_derivative(e, self.module):
                    part = self.add(base, part, e)
                else:
                    part = base
            elements.append(tuple_element_zeros(self, v, i) if part is None else part)
        self.adjoints[v] = whole = LiteralValue(AggregateLiteral("tuple", tuple(elements)), t)
        return whole

    def dynamic(self, t: Type) -> bool:
        """Whether `t` is a tensor type with a dynamic dimension."""
        t = self.module.resolve(t)
        return isinstance(t, TensorType) and any(d is None for d in t.shape)

    def take_adjoint(self, v: Value) -> Value | None:
        """The adjoint of `v`, which its definition consumes."""
        value = self.adjoint(v)
        self.adjoints.pop(v, None)
        return value

    def wants(self, v: Value) -> bool:
        return v in self.varied

    def accumulate(self, v: Value, contribution: Value,
                   peers: list[TensorType] | None = None) -> None:
        """Add `contribution` to the adjoint of primal `v` (summed to `v`'s shape).

        `peers`: the operand types of an element-wise instruction, which decide
        which dynamic dimensions of `v` may have been broadcast.
        """
        if v not in self.varied or isinstance(v, LiteralValue):
            return
        t = self.module.resolve(v.type)
        if isinstance(contribution, ElementAdjoint):
            assert isinstance(t, TupleType)
            parts = self.parts.setdefault(v, {})
            old_part = parts.get(contribution.index)
            parts[contribution.index] = contribution.dy if old_part is None else self.add(
                old_part, contribution.dy, t.elements[contribution.index])
            return
        if isinstance(t, TensorType):
            c = self.module.resolve(contribution.type)
            if c != t or (peers and self.maybe_broadcast(t, peers)):
                contribution = self.unbroadcast(contribution, v)
            if self.module.resolve(contribution.type).dtype != t.dtype:  # type: ignore[union-attr]
                contribution = self.b.dataTypeCast(contribution, t.dtype)
        old = self.adjoint(v)
        self.adjoints[v] = contribution if old is None else self.add(old, contribution, v.type)

    def reverse_stack_op(self, inst: Instruction) -> None:
        """Values on an active stack: each float push and pop is reversed, varied or not,
        so that the adjoint stack stays aligned with the primal one.

        A push's adjoint pops from the adjoint stack; a pop's adjoint pushes onto it.
        """
        adjoint_stack = self.adjoint_stacks[inst.stack]
        if inst.opcode == "pop":
            if not carries_derivative(inst.type, self.module):
                return
            dy = self.take_adjoint(inst)
            dy = self.zeros(inst) if dy is None else self.exact(inst, dy)
            self.b.push(dy, adjoint_stack)
            return
        value = inst.value
        t = self.module.resolve(value.type)
        if not carries_derivative(t, self.module):
            return
        d = self.b.pop(t, adjoint_stack)
        self.accumulate(value, d)

    def peers(self, inst: Instruction, operand: Value) -> list[TensorType]:
        """The types of `inst`'s other operands (one occurrence of `operand` left out)."""
        others = list(inst.operands)
        if operand in others:
            others.remove(operand)
        return [t for t in (self.module.resolve(u.type) for u in others)
                if isinstance(t, TensorType)]

    @staticmethod
    def maybe_broadcast(t: TensorType, peers: list[TensorType]) -> bool:
        """Whether a dynamic dimension of `t` may be 1 where another operand's is not."""
        for i, d in enumerate(t.shape):
            if d is None and any(p.rank == t.rank and p.shape[i] != 1 for p in peers):
                return True
        return False

    def exact(self, v: Value, adjoint: Value) -> Value:
        """An adjoint read where `v`'s primal is in scope, at `v`'s exact run-time shape.

        Zeros carried between blocks for dynamic shapes have size-1 dimensions (in a tuple's
        elements too).
        """
        t = self.module.resolve(v.type)
        if not self.normalize:
            return adjoint
        if self.dynamic(t):
            return self.b.add(adjoint, self.zeros(v))
        if isinstance(t, TupleType) and any(self.dynamic(e) for e in t.elements):
            elements = [self.add(self.element(adjoint, i), tuple_element_zeros(self, v, i), e)
                        if self.dynamic(e) and carries_derivative(e, self.module)
                        else self.element(adjoint, i) for i, e in enumerate(t.elements)]
            return LiteralValue(AggregateLiteral("tuple", tuple(elements)), t)
        return adjoint

    def reverse_instruction(self, inst: Instruction) -> None:
        """Apply `inst`'s adjoint rule to the adjoint of its result."""
        if inst.opcode in ("push", "pop") and inst.stack in self.adjoint_stacks:
            self.reverse_stack_op(inst)
            return
        dy = self.take_adjoint(inst)
        if dy is None or inst not in self.varied:
            return
        rule = ADJOINTS.get(inst.opcode)
        if rule is None:
            raise DifferentiationError(f"{_where(inst)}'{inst.opcode}' has no adjoint rule: "
                                       "it cannot be differentiated")
        dy = self.exact(inst, dy)
        elementwise = inst.has_trait("elementwise")
        for operand, contribution in rule(self, inst, dy):
            if contribution is not None:
                self.accumulate(operand, contribution,
                                self.peers(inst, operand) if elementwise else None)


def placeholder_zero(t: Type, module: Module) -> Value:
    """A zero adjoint of type `t`; dynamic dimensions are 1 (it broadcasts)."""
    t = module.resolve(t)
    if isinstance(t, TupleType):
        elements = tuple(placeholder_zero(e, module) for e in t.elements)
        return LiteralValue(AggregateLiteral("tuple", elements),
                            TupleType(tuple(e.type for e in elements)))
    assert isinstance(t, TensorType)
    shape = tuple(1 if d is None else d for d in t.shape)
    return constant(0.0 if t.dtype.is_float else 0, TensorType(shape, t.dtype))


def tuple_of(values: list[Value]) -> LiteralValue:
    return LiteralValue(AggregateLiteral("tuple", tuple(values)),
                        TupleType(tuple(v.type for v in values)))


@dataclass
class Edge:
    """A split edge: the block the forward sweep goes through, the target it reaches,
    and the values its reverse reads from the tape."""

    block: Block
    target: BranchTarget
    tape: list[Value]


def values_in(args: list[Value]) -> list[Value]:
    """The values of branch arguments, including values nested in literals."""
    out: list[Value] = []
    for v in args:
        if isinstance(v, LiteralValue):
            for e in v.literal.values():
                out.extend(values_in([e]))
        else:
            out.append(v)
    return out


class ReverseBuilder:
    """Builds the body of one gradient declaration `df` of a primal `f`."""

    def __init__(self, generator: Generator, df: Function, checkpoint: bool) -> None:
        self.generator = generator
        self.module = generator.module
        self.df = df
        self.checkpoint = checkpoint
        decl = df.declaration
        assert decl is not None and not isinstance(decl, str)
        self.decl = decl
        f = decl.of
        assert isinstance(f, Function)
        self.f = f
        self.ftype: FunctionType = FunctionType(
            tuple(self.module.resolve(t) for t in f.type_.arguments),
            self.module.resolve(f.type_.result))
        self.wrt = wrt_indices(decl, self.ftype, self.module)
        self.output = differentiated_output(decl, self.ftype)
        self.b = Builder(self.module)
        self.tape_values = 0
        self.adjoint_stacks: dict[Value, Value] = {}
        self.edges: dict[tuple[Block, str], Edge] = {}
        self.taken_names = UniqueNames([b.name for b in f.blocks] + [
            v.name for blk in f.blocks for v in [*blk.arguments, *blk.instructions]])

    # ------------------------------------------------------------ shared pieces

    def new_context(self, varied: set[Value], primals: dict[Value, Value]) -> ReverseContext:
        return ReverseContext(self.b, self.module, self.generator, dict(primals), {}, varied,
                              normalize=len(self.f.blocks) > 1,
                              adjoint_stacks=self.adjoint_stacks)

    def seed(self, c: ReverseContext, returned: Value) -> None:
        """Seed the adjoint of the value a `return` returns."""
        if self.decl.seedable:
            seed: Value = self.seed_argument
        else:
            seed = self.ones(c, returned)
        index = self.decl.from_index or 0
        if isinstance(returned, LiteralValue):
            elements = getattr(returned.literal, "elements", ())
            if isinstance(self.module.resolve(returned.type), TupleType) and elements:
                c.accumulate(elements[index], seed)
            return
        if isinstance(self.module.resolve(returned.type), TupleType):
            seed = c.b.create("insert", seed, c.zeros(returned), [index])
        c.accumulate(returned, seed)

    def ones(self, c: ReverseContext, returned: Value) -> Value:
        t = self.output
        assert isinstance(t, TensorType)
        if all(d is not None for d in t.shape):
            return constant(1.0, t)
        value = c.primal(returned)
        if isinstance(self.module.resolve(returned.type), TupleType):
            value = c.b.extract(value, keys=[self.decl.from_index or 0])
        mask = c.b.equal(value, value)
        one = c.const(1.0, t)
        return c.b.select(one, one, mask)

    def results(self, c: ReverseContext, args: list[Value], returned: Value) -> Value:
        """`(d_wrt…, kept…)` from the argument adjoints and the primal result."""
        out: list[Value] = []
        for i in self.wrt:
            a = self.f.entry.arguments[i]
            adj = c.adjoint(a)
            out.append(c.zeros(a) if adj is None else c.exact(a, adj))
        for k in self.decl.keeping:
            if isinstance(self.ftype.result, TupleType):
                out.append(c.b.extract(returned, keys=[k]))
            else:
                out.append(returned)
        return tuple_of(out)

    def begin(self) -> tuple[Block, list[Value]]:
        """The entry block of `df`, with the primal's arguments (and the seed)."""
        arg_types = list(self.f.type_.arguments)  # as declared, aliases kept
        names = [a.name for a in self.f.entry.arguments]
        if self.decl.seedable:
            arg_types.append(self.output)
            names.append(UniqueNames(names)("seed"))
        self.df.blocks.clear()
        entry = self.b.block_in(self.df, "entry", arg_types, names)
        self.seed_argument = entry.arguments[-1] if self.decl.seedable else None
        return entry, list(entry.arguments[: len(self.ftype.arguments)])

    def fresh(self, name: str) -> str:
        """`name`, or `name2`, `name3`…: not the name of a block or value of the primal."""
        return self.taken_names(name)

    def create_adjoint_stacks(self, varied: set[Value]) -> None:
        """One adjoint stack per active stack of the primal, for the whole function."""
        self.adjoint_stacks = {
            inst: self.b.createStack() for inst in self.f.instructions()
            if inst.opcode == "createStack" and inst in varied}

    def destroy_adjoint_stacks(self) -> None:
        for stack in self.adjoint_stacks.values():
            self.b.destroyStack(stack)

    # ------------------------------------------------------------ generation

    def build(self) -> None:
        wrt_args = [self.f.entry.arguments[i] for i in self.wrt]
        varied = varied_values(self.f, wrt_args, self.module)
        if len(self.f.blocks) == 1:
            self.build_straight_line(varied)
        else:
            self.build_with_tape(varied)

    def build_straight_line(self, varied: set[Value]) -> None:
        _entry, args = self.begin()
        self.create_adjoint_stacks(varied)
        primals: dict[Value, Value] = dict(zip(self.f.entry.arguments, args, strict=True))
        block = self.f.entry
        for inst in block.instructions[:-1]:
            primals[inst] = self.b.insert(copy_instruction(inst, primals))
        ret = block.instructions[-1]
        returned = map_value(ret.value, primals)
        c = self.new_context(varied, primals)
        self.seed(c, ret.value)
        for inst in reversed(block.instructions[:-1]):
            c.reverse_instruction(inst)
        results = self.results(c, args, returned)
        self.destroy_adjoint_stacks()
        self.b.ret(results)

    def build_with_tape(self, varied: set[Value]) -> None:
        f, b, module = self.f, self.b, self.module
        entry, args = self.begin()
        self.create_adjoint_stacks(varied)
        stack = b.createStack()
        ids = {block: k for k, block in enumerate(f.blocks)}
        self.edges = self.split_edges(varied)
        for edge in self.edges.values():
            ids[edge.block] = len(ids)
        entry_is_target = self.entry_is_target = any(f.entry in blk.successors
                                                      for blk in f.blocks)
        # Values every reverse block can read: the arguments and, when the entry block runs
        # once, the entry block's results.
        available: set[Value] = set(f.entry.arguments)
        if not entry_is_target:
            available.update(f.entry.instructions[:-1])
        # Adjoints that cross blocks travel as block arguments of the reverse blocks.
        crossing = self.crossing_values(varied)
        # ---- forward sweep: a copy of f that records the tape
        fwd_blocks: dict[Block, Block] = {f.entry: entry}
        for block in f.blocks[1:]:
            fwd_blocks[block] = b.block_in(self.df, block.name,
                                           [a.type for a in block.arguments],
                                           [a.name for a in block.arguments])
        primals: dict[Value, Value] = dict(zip(f.entry.arguments, args, strict=True))
        for block in f.blocks[1:]:
            primals.update(zip(block.arguments, fwd_blocks[block].arguments, strict=True))
        rev_start = Block(self.fresh("reverse"), [])
        returned_arg = rev_start.add_argument(
            Argument(self.ftype.result, self.fresh("result")))
        saved: dict[Block, list[Value]] = {}
        for block in f.blocks:
            b.position_at_end(fwd_blocks[block])
            for inst in block.instructions[:-1]:
                primals[inst] = b.insert(copy_instruction(inst, primals))
            saved[block] = self.tape_for(block, varied, available)
            for v in saved[block]:
                b.push(primals[v], stack)
            self.tape_values += len(saved[block])
            b.push(constant(ids[block], scalar(I64)), stack)
            term = block.instructions[-1]
            if term.opcode == "return":
                b.branch((rev_start, [map_value(term.value, primals)]))
            else:
                copied = self.forward_terminator(block, primals, fwd_blocks, stack, ids,
                                                 available)
                b.position_at_end(fwd_blocks[block])
                b.insert(copied)
        # ---- reverse sweep
        self.df.append_block(rev_start)
        b.position_at_end(rev_start)
        zeros = [placeholder_zero(v.type, module) for v in crossing]
        dispatch = b.block_in(self.df, self.fresh("dispatch"), [v.type for v in crossing],
                              [None] * len(crossing))
        b.position_at_end(rev_start)
        b.branch((dispatch, zeros))
        reverse_blocks = {
            block: Block(self.fresh(f"reverse_{block.name}") if block.name else None,
                         [Argument(v.type)
                          for v in crossing])
            for block in f.blocks
        }
        for edge in self.edges.values():
            reverse_blocks[edge.block] = Block(self.fresh(f"reverse_{edge.block.name}"),
                                               [Argument(v.type) for v in crossing])
        finish = Block(self.fresh("finish"), [])
        for a in f.entry.arguments:
            if a in crossing:
                finish.add_argument(Argument(a.type))
        self.dispatch(dispatch, stack, ids, reverse_blocks)
        for block in f.blocks:
            rb = reverse_blocks[block]
            self.df.append_block(rb)
            b.position_at_end(rb)
            self.reverse_block(block, rb, varied, crossing, available, primals, saved[block],
                               stack, returned_arg, dispatch, finish)
        for edge in self.edges.values():
            rb = reverse_blocks[edge.block]
            self.df.append_block(rb)
            b.position_at_end(rb)
            self.reverse_edge(edge, rb, varied, crossing, available, primals, stack, dispatch)
        self.df.append_block(finish)
        b.position_at_end(finish)
        c = self.new_context(varied, primals)
        for a, value in zip([a for a in f.entry.arguments if a in crossing], finish.arguments,
                            strict=True):
            c.adjoints[a] = value
        b.destroyStack(stack)
        results = self.results(c, args, returned_arg)
        self.destroy_adjoint_stacks()
        b.ret(results)

    def crossing_values(self, varied: set[Value]) -> list[Value]:
        """Varied values whose adjoints cross blocks, in a fixed order."""
        read_in = self.blocks_reading()
        # what a split edge passes gets its adjoint in the edge's reverse, not its block's
        passed = {v for edge in self.edges.values() for v in values_in(edge.target.args)}
        out: list[Value] = []
        for block in self.f.blocks:
            for a in block.arguments:
                if a in varied and carries_derivative(a.type, self.module):
                    out.append(a)
            for inst in block.instructions:
                if inst in varied and carries_derivative(inst.type, self.module) and (any(
                    reader is not block for reader in read_in.get(inst, ())
                ) or inst in passed):
                    out.append(inst)
        return out

    def blocks_reading(self) -> dict[Value, set[Block]]:
        """The blocks whose instructions read each value (one walk over the function)."""
        out: dict[Value, set[Block]] = {}
        for blk in self.f.blocks:
            for inst in blk.instructions:
                for v in uses(inst):
                    out.setdefault(v, set()).add(blk)
        return out

    def tape_for(self, block: Block, varied: set[Value], available: set[Value]) -> list[Value]:
        """The primal values `block`'s reverse reads, in push order."""
        if block is self.f.entry and not self.entry_is_target:
            return []
        wanted: list[Value] = []
        seen: set[Value] = set()

        def want(v: Value) -> None:
            if isinstance(v, LiteralValue):
                for e in v.literal.values():
                    want(e)
                return
            if v not in seen and v not in available and not isinstance(v, Function):
                seen.add(v)
                wanted.append(v)

        recomputed = self.recomputed(block, varied)
        for inst in block.instructions[:-1]:
            if inst in recomputed:
                for u in uses(inst):
                    if u not in recomputed:
                        want(u)
                continue
            if inst in varied:
                for u in uses(inst):
                    want(u)
                want(inst)
        term = block.instructions[-1]
        for u in self.terminator_reads(block):
            if (u in varied and self.dynamic(u)) or term.opcode == "return":
                want(u)
        return [v for v in wanted if not isinstance(self.module.resolve(v.type), type(STACK))]

    def terminator_reads(self, block: Block) -> list[Value]:
        """What `block`'s terminator reads, but the arguments it passes along split edges
        (their edges' reverses read them)."""
        term = block.instructions[-1]
        if not any(key[0] is block for key in self.edges):
            return uses(term)
        out = [term.condition]
        for name in ("then", "else"):
            if (block, name) not in self.edges:
                out.extend(values_in(term.fields[name].args))
        return out

    def split_edges(self, varied: set[Value]) -> dict[tuple[Block, str], Edge]:
        """The edges of `conditional`s that pass varied values to varied parameters."""
        edges: dict[tuple[Block, str], Edge] = {}
        for block in self.f.blocks:
            term = block.instructions[-1]
            if term.opcode != "conditional":
                continue
            for name in ("then", "else"):
                target: BranchTarget = term.fields[name]
                if any(p in varied for p in target.block.arguments):
                    label = self.fresh(f"{block.name or 'block'}_{name}")
                    tape = [v for v in values_in(target.args)
                            if v in varied and self.dynamic(v) and not isinstance(v, Function)]
                    edges[block, name] = Edge(Block(label), target, tape)
        return edges

    def forward_terminator(self, block: Block, primals: dict[Value, Value],
                           fwd_blocks: dict[Block, Block], stack: Value, ids: dict[Block, int],
                           available: set[Value]) -> Instruction:
        """The copy of `block`'s terminator for the forward sweep; a split edge goes
        through a block that records it on the tape."""
        term = copy_instruction(block.instructions[-1], primals, fwd_blocks)
        fields = dict(term.fields)
        for name in ("then", "else"):
            edge = self.edges.get((block, name))
            if edge is None:
                continue
            target: BranchTarget = fields[name]
            fwd = self.b.block_in(self.df, edge.block.name)
            for v in edge.tape:
                if v not in available:
                    self.b.push(primals[v], stack)
            self.b.push(constant(ids[edge.block], scalar(I64)), stack)
            self.b.branch((target.block, list(target.args)))
            fields[name] = BranchTarget(fwd, [])
        return Instruction(term.op, fields, term.type, term.name, term.location)

    def recomputed(self, block: Block, varied: set[Value]) -> set[Value]:
        """With `checkpoint`: the pure instructions of `block` its reverse recomputes.

        Those are the varied ones and the pure instructions of the block they read.
        """
        if not self.checkpoint:
            return set()
        out: set[Value] = set()
        for inst in reversed(block.instructions[:-1]):
            if inst.has_trait("pure") and (inst in varied or inst in out):
                out.add(inst)
                out.update(u for u in uses(inst) if isinstance(u, Instruction)
                           and u.block is block and u.has_trait("pure"))
        return out

    def carried(self, c: ReverseContext, v: Value) -> Value:
        """The adjoint of `v` passed on to the next reverse block."""
        adj = c.adjoint(v)
        return placeholder_zero(v.type, self.module) if adj is None else adj

    def dynamic(self, v: Value) -> bool:
        t = self.module.resolve(v.type)
        return not isinstance(t, TensorType) or any(d is None for d in t.shape)

    def dispatch(self, dispatch: Block, stack: Value, ids: dict[Block, int],
                 reverse_blocks: dict[Block, Block]) -> None:
        """Pop a block id and branch to that block's reverse, passing the adjoints along."""
        b = self.b
        b.position_at_end(dispatch)
        carried = list(dispatch.arguments)
        block_id = b.pop(scalar(I64), stack)
        blocks = list(ids)
        current = dispatch
        for block in blocks[:-1]:
            b.position_at_end(current)
            hit = b.equal(block_id, ids[block])
            nxt = self.df.append_block(Block(None))
            b.conditional(hit, (reverse_blocks[block], carried), nxt)
            current = nxt
        b.position_at_end(current)
        b.branch((reverse_blocks[blocks[-1]], carried))

    def reverse_block(self, block: Block, rb: Block, varied: set[Value], crossing: list[Value],
                      available: set[Value], fwd_primals: dict[Value, Value],
                      saved: list[Value], stack: Value, returned: Value, dispatch: Block,
                      finish: Block) -> None:
        b = self.b
        primals = {v: fwd_primals[v] for v in available}
        for v in reversed(saved):
            primals[v] = b.pop(self.module.resolve(v.type), stack)
        recomputed = self.recomputed(block, varied)
        for inst in block.instructions[:-1]:
            if inst in recomputed and inst not in primals:
                primals[inst] = b.insert(copy_instruction(inst, primals, named=False))
        c = self.new_context(varied, primals)
        c.adjoints.update(zip(crossing, rb.arguments, strict=True))
        term = block.instructions[-1]
        if term.opcode == "return":
            self.seed(c, term.value)
        # the branch: arguments passed to a successor get the adjoints of its parameters
        # (along a split edge, the edge's reverse does)
        kept = [t for name, t in term.fields.items() if isinstance(t, BranchTarget)
                and (block, name) not in self.edges] if term.opcode == "conditional" \
            else term.targets
        self.pass_back(c, kept, varied)
        # the instructions, last first
        for inst in reversed(block.instructions[:-1]):
            if inst in crossing:
                adj = c.adjoint(inst)
                c.reverse_instruction(inst)
                if adj is not None:
                    c.adjoints[inst] = placeholder_zero(inst.type, self.module)
            else:
                c.reverse_instruction(inst)
        carried = [self.carried(c, v) for v in crossing]
        if block is self.f.entry:
            b.branch((finish, [self.carried(c, a) for a in self.f.entry.arguments
                               if a in crossing]))
        else:
            b.branch((dispatch, carried))

    def reverse_edge(self, edge: Edge, rb: Block, varied: set[Value], crossing: list[Value],
                     available: set[Value], fwd_primals: dict[Value, Value], stack: Value,
                     dispatch: Block) -> None:
        """The reverse of a split edge: its target's parameter adjoints go to the arguments."""
        primals = {v: fwd_primals[v] for v in available}
        for v in reversed(edge.tape):
            if v not in available:
                primals[v] = self.b.pop(self.module.resolve(v.type), stack)
        c = self.new_context(varied, primals)
        c.adjoints.update(zip(crossing, rb.arguments, strict=True))
        self.pass_back(c, [edge.target], varied)
        self.b.branch((dispatch, [self.carried(c, v) for v in crossing]))

    def pass_back(self, c: ReverseContext, targets: list[BranchTarget], varied: set[Value]
                  ) -> None:
        """Arguments passed to a successor get the adjoints of its parameters, which
        are consumed."""
        contributions: list[tuple[Value, Value]] = []
        reset: list[Value] = []
        for target in targets:
            for arg, param in zip(target.args, target.block.arguments, strict=True):
                if param in varied:
                    reset.append(param)
                    adj = c.adjoint(param)
                    if adj is not None and arg in varied:
                        contributions.append((arg, c.exact(arg, adj) if not isinstance(
                            arg, LiteralValue) else adj))
        for param in reset:
            c.adjoints[param] = placeholder_zero(param.type, self.module)
        for arg, adj in contributions:
            c.accumulate(arg, adj)
