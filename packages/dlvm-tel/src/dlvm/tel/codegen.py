"""TEL to DLVM IR.

The module gets the parameters' tuple type `$<module>_params`, `@inference(inputs…,
params)`, and with a loss `@loss(inputs…, params)` with `[gradient @loss wrt params keeping
0]` on `@loss_grad`; `@init_params()` draws the declared initial values; `@predict` and
`@train_step` take the parameters one by one (what `dlvm run` trains). A recurrent block is
a loop whose block arguments carry the step and the states: `'loop(%t, %h…)` tests
`t < steps`, `'step()` computes one step, `'done()` reads the final states.

Every instruction carries the location of the TEL expression or declaration it computes, so
that an IR verifier error or a run-time error (a sequence shorter than the first, a reshape
that does not divide) names the TEL file, line and column.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import dlvm.ir as ir
from dlvm.ir import Builder, DerivativeDecl, Function, Location, Value, constant
from dlvm.ir.core import UniqueNames
from dlvm.ir.types import (
    I64,
    AliasDecl,
    DataType,
    FunctionType,
    NominalType,
    TensorType,
    TupleType,
    Type,
    scalar,
)

from .checker import Checked, children
from .optimizers import work_type
from .syntax import (
    Binary,
    Call,
    Concat,
    Declaration,
    Expr,
    Name,
    Number,
    Reshape,
    Shape,
    Transpose,
    Unary,
)

DTYPES = {"int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "float16": "f16",
          "float32": "f32", "float64": "f64"}
ELEMENTWISE = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "min": "min",
               "max": "max", "pow": "power", "mod": "modulo"}


def data_type(name: str) -> DataType:
    kind = "float" if name.startswith("float") else "int"
    return DataType(kind, int(name.removeprefix(kind)))


class LocatedBuilder(Builder):
    """A builder that gives each instruction it inserts the TEL location it is at."""

    location: Location | None = None

    def insert(self, inst: ir.Instruction) -> ir.Instruction:
        if inst.location is None:
            inst.location = self.location
        return super().insert(inst)


@dataclass
class Scope:
    """TEL names to IR values in one function; inside the loop, `step` holds the values of
    the current step and `previous` the states that entered it."""

    values: dict[str, Value] = field(default_factory=dict)
    step: dict[str, Value] | None = None
    previous: dict[str, Value] = field(default_factory=dict)
    elements: dict[str, Value] = field(default_factory=dict)  # xs[t]
    time: Value | None = None
    inside: bool = False


class FunctionWriter:
    """Writes one function's body from the TEL declarations its results need."""

    def __init__(self, gen: Codegen, fn: Function, params: Value | None) -> None:
        self.gen, self.c = gen, gen.checked
        self.b = LocatedBuilder(gen.module)
        self.b.position_at_end(fn.blocks[0])
        self.fn = fn
        self.scope = Scope()
        self.fresh = UniqueNames([a.name for a in fn.blocks[0].arguments])
        self.params = params
        self.entry_end: ir.Instruction | None = None  # the entry's branch into the loop

    # ------------------------------------------------------------ the body

    def body(self, roots: list[Expr]) -> list[Value]:
        """Values for `roots`: the parameters, then everything before the recurrent block,
        the loop, and what reads its final states."""
        needed = self.gen.closure(roots)
        for i, d in enumerate(self.c.role("param")):
            if d.name in needed and self.params is not None:
                self.b.location = d.location
                self.scope.values[d.name] = self.b.extract(self.params, [i],
                                                           name=self.fresh(d.name))
        block = self.c.recurrent
        if block is not None and any(d.name in needed for d in block.declarations):
            self.loop(needed)
        for d in self.c.order:  # each value after what it reads: no deep recursion
            if d.name in needed and not d.recurrent:
                self.get(d.name)
        return [self.expr(r) for r in roots]

    def loop(self, needed: set[str]) -> None:
        c, b = self.c, self.b
        block = c.recurrent
        assert block is not None
        var = block.variable
        b.location = block.location
        for name in c.sequences:
            x = self.get(name)
            rank = self.type_of(x).rank
            self.scope.elements[name] = b.transpose(x, [1, 0, *range(2, rank)],
                                                    name=self.fresh(f"{name}_by_time"))
        first = self.scope.elements[c.sequences[0]]
        steps = b.extract(b.shape(first), [0], name=self.fresh("steps"))
        carried = [d for d in block.declarations if d.name in c.carried]
        initial = {i.name: i.value for i in block.initial}
        starts = [self.initial_state(d, initial.get(d.name)) for d in carried]
        types = [I64_SCALAR, *[self.gen.tensor(c.shapes[d.name]) for d in carried]]
        names = [self.fresh(var), *[self.fresh(d.name) for d in carried]]
        head = b.new_block(self.fresh("loop"), types, names)
        b.position_at_end(self.fn.blocks[0])
        self.entry_end = b.branch((head, [constant(0, I64_SCALAR), *starts]))
        b.position_at_end(head)
        t = head.arguments[0]
        more = b.lessThan(t, steps, name=self.fresh("more"))
        step = self.b.new_block(self.fresh("step"))
        done = self.b.new_block(self.fresh("done"))
        b.position_at_end(head)
        b.conditional(more, step, done)
        b.position_at_end(step)
        self.scope.step = {}
        self.scope.previous = dict(zip([d.name for d in carried], head.arguments[1:],
                                       strict=True))
        self.scope.time = t
        self.scope.inside = True
        sequences = {}
        for name, by_time in self.scope.elements.items():
            b.location = c.sequence_reads.get(name, block.location)  # a short one fails here
            sequences[name] = b.extract(by_time, [t], name=self.fresh(f"{name}_{var}"))
        b.location = block.location
        self.scope.elements = sequences
        for d in c.order:
            if d.recurrent and (d.name in needed or d.name in c.carried):
                self.current(d)
        b.location = block.location
        following = b.add(t, constant(1, I64_SCALAR), name=self.fresh(f"{var}_next"))
        b.branch((head, [following, *[self.scope.step[d.name] for d in carried]]))
        self.scope.inside = False
        self.scope.step = None
        b.position_at_end(done)
        self.scope.values.update(self.scope.previous)  # after the loop: the final states

    def initial_state(self, d: Declaration, given: Expr | None) -> Value:
        """`h[0]`, broadcast over the batch when it is one row; or the zero state."""
        if given is None:
            return self.zeros(d)
        v = self.expr(given)
        if self.type_of(v).rank < len(self.c.shapes[d.name]):
            v = self.elementwise("add", self.zeros(d), v)
        return v

    def zeros(self, d: Declaration) -> Value:
        """The zero initial state; a dynamic batch is the first sequence's."""
        shape = self.c.shapes[d.name]
        zero = 0.0 if self.gen.dtype.is_float else 0
        if all(x is not None for x in shape):
            return self.b.literal(zero, self.gen.tensor(shape), name=self.fresh(f"{d.name}0"))
        x = self.get(self.c.sequences[0])
        rank = self.type_of(x).rank
        rows = self.b.reduce(x, "add", self.gen.zero, list(range(1, rank)))
        column = self.b.select(self.gen.zero, self.gen.zero, self.b.equal(rows, rows))
        if len(shape) == 1:
            return column
        column = self.b.shapeCast(column, (None, *[1] * (len(shape) - 1)))
        rest = self.b.literal(zero, self.gen.tensor((1, *shape[1:])))
        return self.b.add(column, rest, name=self.fresh(f"{d.name}0"))

    # ------------------------------------------------------------ names

    def get(self, name: str) -> Value:
        """The value of a declaration outside the loop (inside: of its step)."""
        if name in self.scope.values:
            return self.scope.values[name]
        d = self.c.program.declaration(name)
        assert d is not None and d.value is not None, name
        saved = (self.b.block, self.b.index, self.scope.inside, self.b.location)
        if self.entry_end is not None and name not in self.gen.after_block:
            # computed once, before the loop, however deep inside it it is first read
            self.b.position_before(self.entry_end)
            self.scope.inside = False
        v = self.named(self.expr(d.value), d.name)
        self.b.block, self.b.index, self.scope.inside, self.b.location = saved
        self.scope.values[name] = v
        return v

    def current(self, d: Declaration) -> Value:
        step = self.scope.step
        assert step is not None
        if d.name not in step:
            assert d.value is not None
            step[d.name] = self.named(self.expr(d.value), f"{d.name}_{self.c.recurrent.variable}"
                                      if self.c.recurrent else d.name)
        return step[d.name]

    def named(self, v: Value, name: str) -> Value:
        if isinstance(v, ir.Instruction) and v.name is None and v.block is not None:
            v.name = self.fresh(name)
        return v

    def name(self, e: Name) -> Value:
        d = self.c.program.declaration(e.name)
        assert d is not None
        if d.recurrent and self.scope.inside:
            return self.scope.previous[d.name] if e.time == -1 else self.current(d)
        if e.time is not None and d.role == "in":
            return self.scope.elements[d.name]
        return self.get(e.name)

    # ------------------------------------------------------------ expressions

    def type_of(self, v: Value) -> TensorType:
        t = self.gen.module.resolve(v.type)
        assert isinstance(t, TensorType), t
        return t

    def expr(self, e: Expr) -> Value:
        """The value of `e`; its instructions carry its location (one frame per level of
        the tree: expressions may be thousands deep)."""
        b = self.b
        outer, b.location = b.location, e.location
        try:
            if isinstance(e, Number):
                return self.gen.number(e.value)
            if isinstance(e, Name):
                return self.name(e)
            if isinstance(e, Unary):
                if isinstance(e.x, Number):  # -128 is an int8 constant; 128 negated is not
                    return self.gen.number(-e.x.value)
                return b.negate(self.expr(e.x))
            if isinstance(e, Binary):
                x, y = self.expr(e.lhs), self.expr(e.rhs)
                return self.product(x, y) if e.op == "." else \
                    self.elementwise(ELEMENTWISE[e.op], x, y)
            if isinstance(e, Transpose):
                return b.transpose(self.materialized(self.expr(e.x)))
            if isinstance(e, Reshape):
                return b.shapeCast(self.materialized(self.expr(e.x)), e.shape)
            if isinstance(e, Concat):
                return b.concatenate([self.materialized(self.expr(x)) for x in e.items],
                                     e.axis)
            if isinstance(e, Call):
                return self.call(e)
            raise AssertionError(e)
        finally:
            b.location = outer

    def materialized(self, v: Value) -> Value:
        """A constant as an instruction, for the operations that take no literal."""
        if isinstance(v, ir.LiteralValue):
            return self.b.literal(v.literal, v.type)
        return v

    def elementwise(self, opcode: str, x: Value, y: Value) -> Value:
        """Broadcast as numpy does: the operand of lower rank gets leading 1s."""
        rx, ry = self.type_of(x).rank, self.type_of(y).rank
        while 0 < rx < ry:
            x, rx = self.b.padShape(x, 0), rx + 1
        while 0 < ry < rx:
            y, ry = self.b.padShape(y, 0), ry + 1
        return self.b.create(opcode, x, y)

    def product(self, x: Value, y: Value) -> Value:
        b = self.b
        rx, ry = self.type_of(x).rank, self.type_of(y).rank
        if rx == 1 and ry > 1:
            return b.squeezeShape(b.dot(b.padShape(x, 0), y), 0)
        if ry == 1 and rx > 1:
            return b.squeezeShape(b.dot(x, b.padShape(y, 1)), rx - 1)
        return b.dot(x, y)

    def call(self, e: Call) -> Value:
        b, f = self.b, e.function
        if f == "cross_entropy":
            return self.cross_entropy(e.args[0], self.expr(e.args[1]))
        if f == "causal_attention":  # the number of heads is a constant the checker read
            heads = e.args[3]
            assert isinstance(heads, Number) and isinstance(heads.value, int)
            q, k, v = (self.expr(a) for a in e.args[:3])
            return self.causal_attention(q, k, v, heads.value)
        args = [self.expr(a) for a in e.args]
        x = args[0]
        one = self.gen.number(1)
        if f in ELEMENTWISE:
            return self.elementwise(ELEMENTWISE[f], x, args[1])
        if f == "sigmoid":  # 1 / (1 + e^−x)
            return b.divide(one, b.add(one, b.exp(b.negate(x))))
        if f == "relu":  # max(x, 0)
            return b.max(x, self.gen.number(0))
        if f == "gelu":  # x·Φ(x) = ½x(1 + erf(x/√2)), the exact GELU
            scaled = b.multiply(x, self.gen.number(1 / math.sqrt(2)))
            return b.multiply(b.multiply(x, self.gen.number(0.5)), b.add(one, b.erf(scaled)))
        if f == "layer_norm":
            return self.layer_norm(x)
        if f == "embedding":
            return self.embedding(x, args[1])
        if f == "softmax":
            return self.softmax(x, log=False)
        if f == "log_softmax":
            return self.softmax(x, log=True)
        if f == "sum":
            return self.total(x)
        if f == "mean":
            return self.mean(x)
        if f == "mse":  # mean((y − t)²)
            d = self.elementwise("subtract", x, args[1])
            return self.mean(b.multiply(d, d))
        return b.create(f, x)

    def total(self, x: Value) -> Value:
        if not self.type_of(x).rank:
            return x
        return self.b.reduce(x, "add", self.gen.zero)

    def mean(self, x: Value) -> Value:
        if not self.type_of(x).rank:
            return x
        n = self.b.dataTypeCast(self.b.unitCount(x), self.gen.dtype)
        return self.b.divide(self.total(x), n)

    def layer_norm(self, x: Value) -> Value:
        """(x − mean) / √(var + 10⁻⁵) along the last dimension (the biased variance; a gain
        and a bias are the model's own parameters, applied after)."""
        b = self.b
        axis = self.type_of(x).rank - 1
        n = b.dataTypeCast(b.extract(b.shape(x), [axis]), self.gen.dtype)

        def row_mean(v: Value) -> Value:
            return b.padShape(b.divide(b.reduce(v, "add", self.gen.zero, [axis]), n), axis)

        centered = b.subtract(x, row_mean(x))
        var = row_mean(b.multiply(centered, centered))
        return b.divide(centered, b.sqrt(b.add(var, self.gen.number(1e-5))))

    def softmax(self, x: Value, log: bool) -> Value:
        """Along the last dimension, with the maximum subtracted first (no overflow)."""
        b = self.b
        axis = self.type_of(x).rank - 1
        top = b.padShape(b.reduce(x, "max", self.gen.number(-math.inf), [axis]), axis)
        z = b.subtract(x, top)
        e = b.exp(z)
        s = b.padShape(b.reduce(e, "add", self.gen.zero, [axis]), axis)
        return b.subtract(z, b.log(s)) if log else b.divide(e, s)

    def causal_attention(self, q: Value, k: Value, v: Value, heads: int) -> Value:
        """For each head h of d = D/heads features, softmax(q_h·k_hᵀ/√d) over the positions
        j ≤ i (the later ones set to −∞ first: a position sees only its past) times v_h; the
        heads joined back along the last dimension, as PyTorch's scaled_dot_product_attention
        with is_causal=True on the split heads."""
        b = self.b
        shape = self.type_of(q).shape
        rank = len(shape)
        size = shape[-1] // heads  # type: ignore[operator]  # the checker made it static
        allowed = self.causal_mask(q)
        kt: Value
        if heads == 1:
            kt = b.transpose(k, [*range(rank - 2), rank - 1, rank - 2])
            return self.attend(q, kt, v, allowed, size)
        lead = shape[:-1]
        if sum(d is None for d in lead) <= 1:
            # [… x T x D] as [… x T x H x d], then [… x H x T x d] (kᵀ: [… x H x d x T]):
            # one batched product for all the heads
            swap = [*range(rank - 2), rank - 1, rank - 2, rank]

            def split(x: Value, order: list[int]) -> Value:
                return b.transpose(b.shapeCast(x, (*lead, heads, size)), order)

            kt = split(k, [*range(rank - 2), rank - 1, rank, rank - 2])
            joined = self.attend(split(q, swap), kt, split(v, swap), allowed, size)
            return b.shapeCast(b.transpose(joined, swap), shape)  # the swap undoes itself
        # several dynamic dimensions before the features, which no shape cast can keep:
        # each head's features are a slice of them moved to the front, and moved back
        front = [rank - 1, *range(rank - 1)]
        back, back_t = [*range(1, rank), 0], [*range(1, rank - 1), 0, rank - 1]
        mq, mk, mv = (b.transpose(x, front) for x in (q, k, v))
        outs = []
        for h in range(heads):
            lo, hi = h * size, (h + 1) * size - 1
            qh, vh = (b.transpose(b.slice(x, lo, hi), back) for x in (mq, mv))
            kt = b.transpose(b.slice(mk, lo, hi), back_t)
            outs.append(self.attend(qh, kt, vh, allowed, size))
        return b.concatenate(outs, rank - 1)

    def attend(self, q: Value, kt: Value, v: Value, allowed: Value, size: int) -> Value:
        """softmax(q·kt/√size where `allowed`, else −∞)·v, the dimensions before the last two
        a batch (kt is kᵀ: [… x size x T]); a row always allows its own position, so no row
        is all −∞."""
        b = self.b
        rank = self.type_of(q).rank
        scores = b.multiply(b.dot(q, kt), self.gen.number(1 / math.sqrt(size)))
        for _ in range(rank - 2):
            allowed = b.padShape(allowed, 0)
        masked = b.select(scores, self.gen.number(-math.inf), allowed)
        return b.dot(self.softmax(masked, log=False), v)

    def causal_mask(self, x: Value) -> Value:
        """[T x T] bool, true where j ≤ i, for the positions (dimension −2) of `x`."""
        b = self.b
        rank = self.type_of(x).rank
        positions = self.indices(x, rank - 2)
        return b.lessThanOrEqual(b.padShape(positions, 0), b.padShape(positions, 1))

    def indices(self, x: Value, axis: int) -> Value:
        """<0, 1, …> as long as dimension `axis` of `x` (at run time when it is dynamic), as
        an i64 vector: the running sum of ones, less one."""
        b = self.b
        t = self.type_of(x)
        n = t.shape[axis]
        if n is not None:
            ones: Value = constant(1, TensorType((n,), I64))
        else:
            others = [d for d in range(t.rank) if d != axis]
            line = b.reduce(x, "add", self.gen.zero, others) if others else x
            one = constant(1, I64_SCALAR)
            ones = b.select(one, one, b.equal(line, line))  # NaN or not, a 1
        return b.subtract(b.scan(ones, "add", [0]), constant(1, I64_SCALAR))

    def embedding(self, ids: Value, table: Value) -> Value:
        """Row ids[…] of `table` [V x D] (an id truncated to an integer; one outside 0…V−1
        picks zeros): a one-hot product, for the IR has no gather, whose gradient with
        respect to the table adds each position's into its id's row (a scatter-add)."""
        b = self.b
        ids, table = self.materialized(ids), self.materialized(table)
        shape = self.type_of(ids).shape
        rank = len(shape)
        vocab, width = self.type_of(table).shape
        rows = self.indices(table, 0)
        for _ in range(rank):
            rows = b.padShape(rows, 0)
        index = b.padShape(b.dataTypeCast(ids, I64), rank)
        hot = b.dataTypeCast(b.equal(index, rows), self.gen.dtype)  # [… x V]
        if rank == 0:
            return b.squeezeShape(b.dot(b.padShape(hot, 0), table), 0)
        if rank == 1:
            return b.dot(hot, table)
        count = None if None in shape else math.prod(shape)  # type: ignore[arg-type]
        if (count, vocab).count(None) <= 1 and (*shape, width).count(None) <= 1:
            flat = b.dot(b.shapeCast(hot, (count, vocab)), table)
            return b.shapeCast(flat, (*shape, width))
        # dynamic dimensions no shape cast can keep: the one-hot rows times the table,
        # summed over the vocabulary
        for _ in range(rank):
            table = b.padShape(table, 0)
        picked = b.multiply(b.padShape(hot, rank + 1), table)  # [… x V x D]
        return b.reduce(picked, "add", self.gen.zero, [rank])

    def cross_entropy(self, p: Expr, target: Value) -> Value:
        """−mean over rows of Σ t·log p; of softmax(z), log p is log_softmax(z)."""
        b = self.b
        logits = self.gen.softmax_of(p)
        if logits is not None:
            logp = self.softmax(self.expr(logits), log=True)
        else:
            logp = b.log(self.expr(p))
        total = self.total(b.multiply(logp, target))
        if self.type_of(logp).rank == 2:
            rows = b.dataTypeCast(b.extract(b.shape(logp), [0]), self.gen.dtype)
            total = b.divide(total, rows)
        return b.negate(total)


I64_SCALAR = scalar(I64)




class Codegen:
    def __init__(self, checked: Checked) -> None:
        self.checked = checked
        p = checked.program
        self.module = ir.Module(p.name, "raw")
        self.dtype = data_type(p.dtype)
        self.scalar = scalar(self.dtype)
        self.zero = self.number(0)
        self.params = checked.role("param")
        self.after_block = checked.after_block
        self.param_names = [d.name for d in self.params]
        self.optimizer = checked.optimizer
        self.state_names = state_names(checked)
        work = work_type(self.dtype)
        self.state_types: list[Type] = [TensorType(tuple(d.shape), work)
                                        for _ in self.optimizer.slots for d in self.params]
        if self.optimizer.counts_steps:
            self.state_types.append(scalar(work))

    def number(self, value: float) -> Value:
        """A scalar constant of the module's type (`1.0: f32`, not `1: f32`)."""
        return constant(float(value) if self.dtype.is_float else int(value), self.scalar)

    def tensor(self, shape: Shape) -> TensorType:
        return TensorType(tuple(shape), self.dtype)

    def softmax_of(self, p: Expr) -> Expr | None:
        """z, when `p` is softmax(z) or names a value defined so: cross_entropy(p, t) then
        takes log p = log_softmax(z), never the log of a rounded probability."""
        if isinstance(p, Name) and p.time is None:
            d = self.checked.program.declaration(p.name)
            if d is not None and d.value is not None and not d.recurrent:
                p = d.value
        if isinstance(p, Call) and p.function == "softmax":
            return p.args[0]
        return None

    def reads(self, e: Expr) -> list[Name]:
        """The names an expression's code reads (through softmax's argument where
        cross_entropy takes log_softmax instead)."""
        out: list[Name] = []
        todo = [e]
        while todo:
            x = todo.pop()
            if isinstance(x, Call) and x.function == "cross_entropy":
                logits = self.softmax_of(x.args[0])
                if logits is not None:
                    todo += [logits, x.args[1]]
                    continue
            if isinstance(x, Name):
                out.append(x)
            todo += children(x)
        return out

    def closure(self, roots: list[Expr]) -> set[str]:
        """The declarations the expressions read, directly or not."""
        out: set[str] = set()
        todo = [x for r in roots for x in self.reads(r)]
        block = self.checked.recurrent
        while todo:
            e = todo.pop()
            if e.name in out:
                continue
            d = self.checked.program.declaration(e.name)
            if d is None:
                continue
            out.add(d.name)
            if d.value is not None and d.role != "param":
                todo += self.reads(d.value)
            if d.recurrent and block is not None:
                todo += [x for i in block.initial if i.name == d.name for x in self.reads(i.value)]
                todo += [Name(block.location, s) for s in self.checked.sequences]
        return out

    def inputs(self, roots: list[Expr]) -> list[Declaration]:
        needed = self.closure(roots)
        return [d for d in self.checked.role("in") if d.name in needed]

    # ------------------------------------------------------------ functions

    def run(self) -> ir.Module:
        p = self.checked.program
        params_type: Type | None = None
        if self.params:
            alias = f"{p.name}_params"
            self.module.add_type(AliasDecl(alias, TupleType(tuple(
                self.tensor(d.shape) for d in self.params))))
            params_type = NominalType(alias)
        outs = self.checked.role("out")
        roots: list[Expr] = [Name(d.location, d.name) for d in outs]
        inference = self.function("inference", roots, params_type)
        loss = None
        if p.losses:
            loss = self.function("loss", [p.losses[0].value], params_type, p.losses[0].name)
            grad_type = FunctionType(loss.type_.arguments, TupleType((params_type, self.scalar)))
            decl = DerivativeDecl("gradient", loss, None, (len(loss.type_.arguments) - 1,),
                                  (0,), False)
            Builder(self.module).declare("loss_grad", grad_type, decl)
        if self.params:
            self.init_function(params_type)
        if loss is not None and params_type is not None and not self.optimizer.plain:
            self.state_functions(params_type)
        self.flat_functions(inference, loss, params_type)
        return self.module

    def function(self, name: str, roots: list[Expr], params_type: Type | None,
                 result_name: str | None = None) -> Function:
        ins = self.inputs(roots)
        types = [self.tensor(self.checked.shapes[d.name]) for d in ins]
        names = [d.name for d in ins]
        if params_type is not None:
            types.append(params_type)
            names.append(UniqueNames(list(names))("params"))
        results = [self.tensor(self.checked.shapes[r.name]) if isinstance(r, Name) else
                   self.scalar for r in roots]
        result: Type = results[0] if len(results) == 1 else TupleType(tuple(results))
        b = Builder(self.module)
        fn = b.function(name, types, result, names)
        writer = FunctionWriter(self, fn, fn.blocks[0].arguments[-1] if params_type else None)
        for d, a in zip(ins, fn.blocks[0].arguments, strict=False):
            writer.scope.values[d.name] = a
        values = writer.body(roots)
        if result_name is not None:
            values = [writer.named(values[0], result_name)]
        writer.b.location = self.checked.program.location
        writer.b.ret(values[0] if len(values) == 1 else writer.b.tuple(values))
        return fn

    def init_function(self, params_type: Type) -> None:
        """`@init_params() -> $params`: every parameter as its declaration says."""
        b = LocatedBuilder(self.module)
        b.function("init_params", [], params_type)
        values: list[Value] = []
        for d in self.params:
            b.location = d.location
            values.append(self.initial_value(b, d))
        b.location = self.checked.program.location
        b.ret(packed(b, values, params_type))

    def initial_value(self, b: Builder, d: Declaration) -> Value:
        t = self.tensor(d.shape)
        v = d.value
        c = self.number
        if isinstance(v, Number | Unary):
            n = v.x if isinstance(v, Unary) else v
            assert isinstance(n, Number)
            value = -n.value if isinstance(v, Unary) else n.value
            return b.literal(float(value) if self.dtype.is_float else int(value), t,
                             name=d.name)
        if isinstance(v, Name):  # glorot: uniform in ±√(6 / (fan_in + fan_out))
            fan_in = math.prod(d.shape[:-1])  # type: ignore[arg-type]
            limit = math.sqrt(6.0 / (fan_in + d.shape[-1]))  # type: ignore[operator]
            return b.random(d.shape, c(-limit), c(limit), name=d.name)
        assert isinstance(v, Call)
        bounds = [a.x.value * -1 if isinstance(a, Unary) else a.value  # type: ignore[union-attr]
                  for a in v.args]
        if v.function == "random":
            return b.random(d.shape, c(bounds[0]), c(bounds[1]), name=d.name)
        # normal(σ), by Box–Muller: σ·√(−2 ln(1 − u))·cos(2πv) for u, v uniform in [0, 1)
        u = b.random(d.shape, c(0), c(1))
        w = b.random(d.shape, c(0), c(1))
        radius = b.sqrt(b.multiply(c(-2), b.log(b.subtract(c(1), u))))
        angle = b.cos(b.multiply(w, c(2 * math.pi)))
        return b.multiply(b.multiply(radius, angle), c(bounds[0]), name=d.name)

    def flat_functions(self, inference: Function, loss: Function | None,
                       params_type: Type | None) -> None:
        """`@predict(p…, x)` and `@train_step(p…, state…, x, y, lr) -> (p…, state…, loss)`:
        one step of the module's optimizer (plain SGD, p − lr·∂loss/∂p, and no state when it
        declares none), with the parameters one by one, for a model of one input, one output
        and one target (the form `dlvm run` trains); with optimizer state, `@init_training`
        too."""
        if params_type is None or len(inference.type_.arguments) != 2 or \
                isinstance(inference.type_.result, TupleType):
            return
        p_types = [self.tensor(d.shape) for d in self.params]
        x_type = inference.type_.arguments[0]
        x_name = inference.blocks[0].arguments[0].name
        b = Builder(self.module)
        fn = b.function("predict", [*p_types, x_type], inference.type_.result,
                        [*self.param_names, x_name])
        fresh = UniqueNames([*self.param_names, x_name])
        args = fn.blocks[0].arguments
        params_tuple = packed(b, args[:-1], params_type, fresh("params"))
        out = self.checked.role("out")[0].name
        b.ret(b.call(inference, [args[-1], params_tuple], name=fresh(out)))
        if loss is None or len(loss.type_.arguments) != 3:
            return
        loss_args = loss.blocks[0].arguments[:2]
        if x_name not in [a.name for a in loss_args]:
            return
        target = next(a for a in loss_args if a.name != x_name)
        grad = self.module.function("loss_grad")
        assert grad is not None
        names = [*self.param_names, *self.state_names, x_name, target.name]
        fresh = UniqueNames(names)
        n, k = len(p_types), len(self.state_types)
        fn = b.function("train_step", [*p_types, *self.state_types, x_type, target.type,
                                       self.scalar],
                        TupleType((*p_types, *self.state_types, self.scalar)),
                        [*names, fresh("lr")])
        args = fn.blocks[0].arguments
        params, state, x, y, lr = args[:n], args[n:n + k], args[-3], args[-2], args[-1]
        params_tuple = packed(b, params, params_type, fresh("params"))
        ordered = [x, y] if loss_args[0].name == x_name else [y, x]
        g = b.call(grad, [*ordered, params_tuple], name=fresh("grads"))
        grads = b.extract(g, [0], name=fresh("d_params"))
        value = b.extract(g, [1], name=fresh(self.checked.program.losses[0].name))
        d = unpacked(b, grads, [fresh(f"d_{name}") for name in self.param_names])
        updated, new_state = self.optimizer.update(b, self.param_names, params, d, state, lr,
                                                   fresh)
        b.ret(b.tuple([*updated, *new_state, value]))
        if k:
            self.init_training(p_types)

    def state_functions(self, params_type: Type) -> None:
        """`type $<module>_state`, `@init_state() -> $<module>_state` (all zeros, as the
        optimizer starts) and `@update(params, state, grads, lr) -> (params, state)`: one
        step of the optimizer, for callers that compute the gradient themselves."""
        alias = f"{self.checked.program.name}_state"
        self.module.add_type(AliasDecl(alias, TupleType(tuple(self.state_types))))
        state_type = NominalType(alias)
        b = Builder(self.module)
        b.function("init_state", [], state_type)
        zeros = [b.literal(0.0, t, name=name)
                 for t, name in zip(self.state_types, self.state_names, strict=True)]
        b.ret(packed(b, zeros, state_type))
        fresh = UniqueNames([*self.param_names, *self.state_names])
        arg_names = [fresh("params"), fresh("state"), fresh("grads"), fresh("lr")]
        fn = b.function("update", [params_type, state_type, params_type, self.scalar],
                        TupleType((params_type, state_type)), arg_names)
        params_tuple, state_tuple, grads_tuple, lr = fn.blocks[0].arguments
        params = unpacked(b, params_tuple, self.param_names)
        state = unpacked(b, state_tuple, self.state_names)
        grads = unpacked(b, grads_tuple, [fresh(f"d_{name}") for name in self.param_names])
        updated, new_state = self.optimizer.update(b, self.param_names, params, grads, state,
                                                   lr, fresh)
        b.ret(b.tuple([packed(b, updated, params_type), packed(b, new_state, state_type)]))

    def init_training(self, p_types: list[TensorType]) -> None:
        """`@init_training() -> (p…, state…)`: `@init_params` and the optimizer's zero
        state, one by one: where `dlvm run` starts `@train_step` (`train.init_function`)."""
        init_params, init_state = self.module.function("init_params"), \
            self.module.function("init_state")
        assert init_params is not None and init_state is not None
        b = Builder(self.module)
        b.function("init_training", [], TupleType((*p_types, *self.state_types)))
        fresh = UniqueNames([*self.param_names, *self.state_names])
        params = b.call(init_params, [], name=fresh("params"))
        state = b.call(init_state, [], name=fresh("state"))
        b.ret(b.tuple([*unpacked(b, params, self.param_names),
                       *unpacked(b, state, self.state_names)]))


def packed(b: Builder, values: Sequence[Value], type_: Type, name: str | None = None
           ) -> Value:
    """`values` as one tuple of the (aliased) tuple type `type_`."""
    return b.literal(ir.AggregateLiteral("tuple", tuple(values)), type_, name=name)


def unpacked(b: Builder, value: Value, names: list[str]) -> list[Value]:
    """The elements of the tuple `value`, each extracted under its name."""
    return [b.extract(value, [i], name=name) for i, name in enumerate(names)]


def state_names(checked: Checked) -> list[str]:
    """The names of the optimizer's state (`w1_m`, …, `step`), none a TEL name."""
    p = checked.program
    taken = UniqueNames([d.name for d in p.declarations] + [x.name for x in p.losses])
    return checked.optimizer.state_names([d.name for d in checked.role("param")], taken)


def generate(checked: Checked) -> ir.Module:
    """The IR module of a checked TEL program (stage raw: the gradient is a declaration)."""
    return Codegen(checked).run()
