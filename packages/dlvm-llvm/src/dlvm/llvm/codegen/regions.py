"""Element-wise regions as loop nests.

A *region* is a `!kernel` function of `fuse-elementwise` (its body, called with the
caller's values), or one element-wise instruction, `reduce` or `unbroadcast` on its own. It
becomes one loop nest over its *iteration space* — the broadcast shape of its element-wise
values — in a function of its own:

    i32 @kernel(ptr ctx, ptr noalias data…, scalars…, sizes…, i64 begin, i64 end)

Operands are read by index arithmetic: each tensor has a stride per dimension, 0 along the
dimensions it is broadcast on, so no broadcast is ever materialized. Outputs are written at
their own strides; a reduction (`reduce`, `unbroadcast`) accumulates into its output at
strides that are 0 along the reduced dimensions — in a register when the innermost dimension
is reduced. Adjacent dimensions that every access walks contiguously are merged, so a region
over same-shaped tensors is one flat loop that LLVM vectorizes. The outermost dimension is
split over the `begin`/`end` range of a task (threads on the CPU, blocks on a GPU). On the
CPU, a reduction along the outermost dimension (a full one included) is split too: each
chunk folds into a private partial result, and the partials are combined in chunk order, so
that a result depends on the thread count the code was built for, never on the scheduling.

The caller computes the sizes (checking, where they are known only at run time, that they
broadcast), allocates the outputs — or writes an output over a dying input of the same shape
whose buffer nobody else holds — and calls the loop nest. Element values come from the
shared `SCALAR` table (`scalar.py`).

The loop function's pointers are `noalias`, so an output takes over an input's buffer only
where no iteration can tell: the output spans the iteration space (it is not broadcast along
a dimension, so each of its elements is written at one iteration, the one that reads the
same element of the input), it is computed from the input (so that iteration loads before
it stores), and nothing reads the input after the store (another parameter bound to the same
value, a later part of the region, the input passed straight through as an output).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from llvmlite import ir as ll

from dlvm.ir import BuiltinRef, Function, Instruction, LiteralValue, Value
from dlvm.ir.core import AggregateLiteral, KeywordLiteral, ScalarLiteral
from dlvm.ir.runtime import numpy_dtype, sum_dtype
from dlvm.ir.types import DataType, TensorType, Type

from .emit import add, alloca, declare, for_range, gep, i32, i64, is_const, mul
from .function import (
    RULES,
    FunctionLowering,
    Tensor,
    lowers,
    make_tensor,
    scalar_constant,
)
from .layout import I1, I8, I64, PTR, element_size, element_type, scalar_type
from .lower_tensor import reduce_by_function
from .rounding import rounded
from .scalar import SCALAR, ScalarEmitter, combine, identity
from .specialize import Spec

# the reductions (trait `reduction`) this module has rules for; inside a region, an
# instruction is known to be one of them or element-wise, and its trait says which
LOWERED_REDUCTIONS = ("reduce", "unbroadcast")
PARALLEL_MIN = 1 << 18  # element·operations below which a kernel runs on one thread (waking
# the pool costs tens of microseconds: measured, a split only pays from about 2¹⁷ elements)
CHUNKS_PER_THREAD = 4


def combinator_name(inst: Instruction) -> str:
    """The built-in combinator of a reduction; `umin`/`umax` for `min`/`max` of `uN`
    elements (LLVM's integers have no sign)."""
    if inst.opcode == "unbroadcast":
        return "add"
    comb = inst.combinator
    name = comb.name if isinstance(comb, BuiltinRef) else comb
    t = inst.type
    if name in ("min", "max") and isinstance(t, TensorType) and t.dtype.is_unsigned:
        return "u" + name
    return name


def accumulation_dtype(inst: Instruction, dtype: DataType) -> DataType:
    """The data type a reduction accumulates in before its one rounding to `dtype`: float64
    for a sum of float16 or float32 (`dlvm.ir.runtime.sum_dtype`, what the interpreter
    sums in), else `dtype`. The CPU's loop nests and the GPU's kernels both fold so."""
    if combinator_name(inst) != "add" or not dtype.is_float:
        return dtype
    return DataType("float", sum_dtype(numpy_dtype(dtype)).itemsize * 8)


def direct_operands(inst: Instruction) -> list[Value]:
    """The operands an instruction names itself (a tensor literal is one operand, not its
    elements); a builtin's are its arguments."""
    if inst.opcode == "builtin":
        return list(inst.args)
    out: list[Value] = []
    for f in inst.op.value_fields:
        v = inst.fields.get(f)
        if isinstance(v, Value):
            out.append(v)
    return out


def rule_of(inst: Instruction) -> object:
    """The scalar rule of a region instruction (`builtin "min"` is the instruction `min`)."""
    return SCALAR[inst.builtin if inst.opcode == "builtin" else inst.opcode]


def is_region_instruction(inst: Instruction) -> bool:
    if inst.opcode == "reduce":
        return isinstance(inst.combinator, str | BuiltinRef)
    return inst.has_trait("elementwise") or inst.opcode == "unbroadcast"


# ---------------------------------------------------------------- entry points


@lowers(*[op for op in SCALAR], "reduce", "unbroadcast")
def lower_single(fl: FunctionLowering, inst: Instruction) -> ll.Value:
    """One element-wise instruction or reduction, as a region of its own."""
    if inst.opcode == "reduce" and not is_region_instruction(inst):
        return reduce_by_function(fl, inst)
    if inst.opcode not in SCALAR and inst.opcode not in LOWERED_REDUCTIONS:
        assert RULES.fallback is not None
        return RULES.fallback(fl, inst)  # type: ignore[return-value]
    inputs = {v: v for v in dict.fromkeys(direct_operands(inst))
              if not isinstance(v, LiteralValue)}
    region = Region(fl, [inst], fl.type, inputs, [inst])
    if inst.opcode == "unbroadcast":
        return unbroadcast_or_identity(fl, inst, region)
    return region.lower()[0]


def unbroadcast_or_identity(fl: FunctionLowering, inst: Instruction, region: Region
                            ) -> ll.Value:
    """`unbroadcast %x like %y` when `%y` has `%x`'s shape is `%x`: a gradient through an
    element-wise instruction of two operands of one dynamic shape asks for it at every
    such instruction, and a sum over no dimension would copy `%x` through a wider
    accumulator. So a run-time test of the shapes picks a new reference to `%x`'s buffer
    (its elements as they are: one addend each, rounded back to itself) or the sum."""
    xt, lt = fl.tensor_type(inst.x), fl.tensor_type(inst.like)
    if xt.rank != lt.rank or xt.rank == 0 or isinstance(inst.x, LiteralValue):
        return region.lower()[0]
    x, like = fl.tensor(inst.x), fl.tensor(inst.like)
    b = fl.b
    same: ll.Value = ll.Constant(I1, 1)
    for xd, ld in zip(x.dims, like.dims, strict=True):
        if is_const(xd) and is_const(ld):
            if xd.constant != ld.constant:
                return region.lower()[0]  # a dimension summed away: never the identity
            continue
        same = b.and_(same, b.icmp_signed("==", xd, ld))
    if is_const(same) and same.constant:
        b.call(fl.rt.get("retain"), [x.buf])
        return make_tensor(b, x.buf, x.data, x.dims)
    with b.if_else(same) as (identity, summed):
        with identity:
            b.call(fl.rt.get("retain"), [x.buf])
            view = make_tensor(b, x.buf, x.data, x.dims)
            view_block = b.block
        with summed:
            total = region.lower()[0]
            total_block = b.block
    out = b.phi(view.type)
    out.add_incoming(view, view_block)
    out.add_incoming(total, total_block)
    return out


def lower_kernel_call(fl: FunctionLowering, inst: Instruction, spec: Spec) -> ll.Value | None:
    """`apply @k(…)` of a `!kernel`: the region is k's body, its inputs the call's operands
    (None where an instruction of the body has no scalar rule: the caller calls k as a
    function)."""
    kernel: Function = spec.fn
    body = kernel.entry.instructions
    if not all(i.opcode in SCALAR or i.opcode in LOWERED_REDUCTIONS for i in body[:-1]):
        return None
    ret = body[-1]
    value = ret.fields.get("value")
    if isinstance(value, LiteralValue):  # a tuple of outputs
        outputs = list(value.literal.values()) if value.literal is not None else []
        outputs = [v for v in value.literal.elements]  # type: ignore[attr-defined]
    else:
        outputs = [value]
    inputs = dict(zip(kernel.entry.arguments, inst.args, strict=True))

    def type_of(v: Value) -> Type:
        return fl.layout.resolve(spec.type(v))

    region = Region(fl, body[:-1], type_of, inputs, outputs)
    fits = region.shares_space()
    if fits is False:  # no loop nest covers all its outputs: k's body, a loop per instruction
        return None
    t = fl.layout.lower(fl.type(inst))

    def fused() -> ll.Value:
        results = region.lower()
        if len(outputs) == 1 and not isinstance(value, LiteralValue):
            return results[0]
        tup: ll.Value = ll.Constant(t, None)
        for k, r in enumerate(results):
            tup = fl.b.insert_value(tup, r, k)
        return tup

    if fits is True:
        return fused()
    # known at run time: the loop nest where the sizes allow it, else the call, each leaving
    # the operands' references as they were (the loop nest takes over no input's buffer)
    from .lower_control import call_function  # (lower_control imports this module)

    b = fl.b
    region.kept |= set(inputs.values())
    with b.if_else(fits) as (one, apart):
        with one:
            joined = fused()
            one_block = b.block
        with apart:
            called = call_function(fl, inst, spec)
            apart_block = b.block
    phi = b.phi(t)
    phi.add_incoming(joined, one_block)
    phi.add_incoming(called, apart_block)
    return phi


# ---------------------------------------------------------------- the region


@dataclass
class Access:
    """One tensor the loop nest reads, writes or accumulates into."""

    data: ll.Value
    strides: list[ll.Value]
    dtype_type: TensorType
    guards: list[tuple[int, ll.Value]] = field(default_factory=list)  # (dim, size ≠ 1?)


@dataclass
class Accumulator:
    """A reduction's running values: in its `access` (of the accumulation data type, see
    `accumulation_dtype`), rounded to the reduction's own type after the loop when `wide`."""

    inst: Instruction
    access: Access
    source: Value
    wide: bool = False
    wide_tensor: ll.Value | None = None  # the accumulation buffer of a wide tensor result
    dims: list[ll.Value] = field(default_factory=list)


class Region:
    def __init__(self, fl: FunctionLowering, insts: list[Instruction], type_of,
                 inputs: dict[Value, Value], outputs: list[Value]) -> None:
        self.fl = fl
        self.b = fl.b
        self.insts = insts
        self.type_of = type_of
        self.inputs = inputs  # region value → caller value
        self.outputs = outputs
        self.dims: dict[Value, list[ll.Value]] = {}
        self.members = set(insts)
        self.given: dict[Value, ll.Value] = {}  # values an earlier part computed
        self.kept: set[Value] = set()  # caller values read after this part: never reused
        self.literals: dict[Value, Tensor] = {}  # tensor literals built for the region

    def input_tensor(self, v: Value) -> Tensor:
        if v in self.given:
            return Tensor(self.b, self.given[v], self.ttype(v))
        if isinstance(v, LiteralValue):  # built once, where the region first needs it
            found = self.literals.get(v)
            if found is None:
                found = self.literals[v] = Tensor(self.b, self.fl.value(v), self.ttype(v))
            return found
        caller = self.inputs[v]
        return Tensor(self.b, self.fl.value(caller), self.fl.tensor_type(caller))

    # ------------------------------------------------------------ sizes

    def ttype(self, v: Value) -> TensorType:
        t = self.type_of(v)
        assert isinstance(t, TensorType), f"{v!r}: {t}"
        return t

    def value_dims(self, v: Value) -> list[ll.Value]:
        found = self.dims.get(v)
        if found is not None:
            return found
        t = self.ttype(v)
        shape = literal_shape(v, self.type_of) if isinstance(v, LiteralValue) else t.shape
        if t.rank == 0 or (isinstance(v, LiteralValue) and None not in shape):
            dims = [i64(s) for s in shape]  # type: ignore[arg-type]
        elif isinstance(v, LiteralValue) or v in self.inputs or v in self.given:
            # sizes known at run time: those of the value (a literal's, once built; a splat
            # of a dynamic type fails there, as in the interpreter)
            dims = self.input_tensor(v).dims
            dims = [i64(s) if s is not None else d for s, d in zip(shape, dims, strict=True)]
        else:
            dims = self.instruction_dims(v)  # type: ignore[arg-type]
        self.dims[v] = dims
        return dims

    def instruction_dims(self, inst: Instruction) -> list[ll.Value]:
        t = self.ttype(inst)
        if inst.opcode == "reduce":
            x = self.value_dims(inst.x)
            dims = range(len(x)) if inst.dims is None else inst.dims
            return [d for k, d in enumerate(x) if k not in dims]
        if inst.opcode == "unbroadcast":
            like = self.value_dims(inst.like)
            self.check_unbroadcast(inst, like)
            return [i64(s) if s is not None else d for s, d in zip(t.shape, like, strict=True)]
        operands = [v for v in direct_operands(inst) if self.ttype(v).rank == t.rank]
        out: list[ll.Value] = []
        for k, s in enumerate(t.shape):
            sizes = [self.value_dims(v)[k] for v in operands]
            d = sizes[0]
            for other in sizes[1:]:  # (the declared type may have a size that these break)
                self.check_broadcast(inst, d, other, k)
                d = self.broadcast(d, other)
            if s is not None and not (is_const(d) and d.constant == s):
                self.check_broadcast(inst, d, i64(s), k)
            out.append(i64(s) if s is not None else d)
        return out

    def broadcast(self, a: ll.Value, b: ll.Value) -> ll.Value:
        if is_const(a) and is_const(b):
            return i64(b.constant if a.constant == 1 else a.constant)
        return self.b.select(self.b.icmp_signed("==", a, i64(1)), b, a)

    def check_broadcast(self, inst: Instruction, a: ll.Value, b: ll.Value, k: int) -> None:
        if is_const(a) and is_const(b) and (a.constant == b.constant or 1 in (
                a.constant, b.constant)):
            return
        bb = self.b
        ok = bb.or_(bb.icmp_signed("==", a, b), bb.or_(bb.icmp_signed("==", a, i64(1)),
                                                          bb.icmp_signed("==", b, i64(1))))
        self.fl.fail_if(bb.not_(ok), "shapes cannot be broadcast together: dimension "
                        f"{k} has sizes {{0}} and {{1}}", [a, b], inst=inst)

    def check_unbroadcast(self, inst: Instruction, like: list[ll.Value]) -> None:
        x = self.value_dims(inst.x)
        if not like:
            return
        bb = self.b
        for k, (lk, xk) in enumerate(zip(like, x, strict=True)):
            if is_const(lk) and is_const(xk) and lk.constant in (1, xk.constant):
                continue
            ok = bb.or_(bb.icmp_signed("==", lk, i64(1)), bb.icmp_signed("==", lk, xk))
            self.fl.fail_if(bb.not_(ok), f"unbroadcast: dimension {k} of size {{0}} does not "
                            "broadcast to size {1}", [lk, xk], inst=inst)

    def iteration_space(self) -> list[ll.Value]:
        rank = self.rank
        sources: list[Value] = []
        for inst in self.insts:
            if inst.has_trait("reduction"):
                sources.append(inst.x)
            elif self.ttype(inst).rank == rank:
                sources.append(inst)
        space: list[ll.Value] | None = None
        for v in sources:
            if self.ttype(v).rank != rank:
                continue
            d = self.value_dims(v)
            space = list(d) if space is None else [self.broadcast(a, c) for a, c in zip(
                space, d, strict=True)]
        assert space is not None
        return space

    @property
    def rank(self) -> int:
        ranks = [self.ttype(i.x).rank if i.has_trait("reduction") else self.ttype(i).rank
                 for i in self.insts]
        return max(ranks)

    def shares_space(self) -> bool | ll.Value:
        """Whether each loop nest of the region (one per part, see `lower_in_two`) has an
        iteration space that all the values it walks broadcast to: True or False where the
        types decide it, else an i1 computed from the sizes.

        `fuse-elementwise` joins instructions through a shared operand, so two of them may
        have shapes that each broadcast with it but not together — `select %a: <1 x 4 x 4 x
        3 x 3 x f32>, 0.0: f32 by %m: <4 x 1 x 4 x 1 x 1 x bool>` and `select %d: <1 x 2 x 4
        x 1 x 1 x f32>, 0.0: f32 by %m` —: a loop nest over the broadcast of both would walk
        %d's dimension 1 four times, reading and writing out of bounds. Only values that no
        element-wise member reads are compared: a member's operands broadcast to its shape
        (`instruction_dims` checks so)."""
        checks: list[tuple[list[Value], int]] = []  # (values, dimension) to compare at run time
        insts = self.insts
        while insts:  # the parts, as `lower` splits them
            later = Region(self.fl, insts, self.type_of, self.inputs, []).after_reductions()
            part = [i for i in insts if i not in later]
            insts = [i for i in insts if i in later]
            rank = Region(self.fl, part, self.type_of, self.inputs, []).rank
            walked = dict.fromkeys(i.x if i.has_trait("reduction") else i for i in part)
            read = {v for i in part if not i.has_trait("reduction") for v in direct_operands(i)}
            top = [v for v in walked if self.ttype(v).rank == rank and v not in read]
            for k in range(rank if len(top) > 1 else 0):
                sizes = [self.ttype(v).shape[k] for v in top]
                if len({s for s in sizes if s != 1} - {None}) > 1:
                    return False
                if None in sizes:
                    checks.append((top, k))
        fits: bool | ll.Value = True
        b = self.b
        for top, k in checks:
            dims: list[ll.Value] = []
            for v in top:
                d = self.value_dims(v)[k]
                if not any(d is e for e in dims) and not is_const(d, 1):
                    dims.append(d)
            if len(dims) < 2:
                continue
            space = dims[0]
            for d in dims[1:]:
                space = self.broadcast(space, d)
            for d in dims:
                ok = b.or_(b.icmp_signed("==", d, space), b.icmp_signed("==", d, i64(1)))
                fits = ok if fits is True else b.and_(fits, ok)
        return fits

    # ------------------------------------------------------------ strides

    @staticmethod
    def contiguous(b: ll.IRBuilder, dims: Sequence[ll.Value]) -> list[ll.Value]:
        strides: list[ll.Value] = [i64(1)] * len(dims)
        for k in range(len(dims) - 2, -1, -1):
            strides[k] = mul(b, strides[k + 1], dims[k + 1])
        return strides

    def broadcast_strides(self, dims: Sequence[ll.Value]) -> list[ll.Value]:
        """Contiguous strides, 0 along dimensions of size 1 (read as broadcast)."""
        b = self.b
        out = []
        for d, s in zip(dims, self.contiguous(b, dims), strict=True):
            if is_const(d):
                out.append(i64(0) if d.constant == 1 else s)
            else:
                out.append(b.select(b.icmp_signed("==", d, i64(1)), i64(0), s))
        return out

    # ------------------------------------------------------------ lowering

    def after_reductions(self) -> set[Instruction]:
        """The instructions that use a reduction of the region (directly or not): they run
        after the loop that computes it."""
        later: set[Instruction] = set()
        for inst in self.insts:
            for v in direct_operands(inst):
                if v in later or (v in self.members and v.has_trait("reduction")):  # type: ignore[attr-defined]
                    later.add(inst)
                    break
        return later

    def lower(self) -> list[ll.Value]:
        later = self.after_reductions()
        if later:
            return self.lower_in_two(later)
        if self.rank == 0:
            return self.lower_scalar()
        fl = self.fl
        space = self.iteration_space()
        reads: dict[Value, Access] = {}
        for v in self.region_operands():
            t = self.ttype(v)
            if t.rank == self.rank and not is_splat(v):  # (a tensor literal: a constant)
                reads[v] = Access(self.input_tensor(v).data,
                                  self.broadcast_strides(self.value_dims(v)), t)
        writes: dict[Value, Access] = {}
        results: dict[Value, ll.Value] = {}
        reused: list[tuple[Value, ll.Value]] = []
        accumulators: list[Accumulator] = []
        scalar_slots: dict[Value, ll.Value] = {}
        for out in dict.fromkeys(self.outputs):
            if out not in self.members:
                continue
            t = self.ttype(out)
            inst: Instruction = out  # type: ignore[assignment]
            if inst.has_trait("reduction"):
                acc = self.accumulator(inst, space, results, scalar_slots)
                accumulators.append(acc)
            elif t.rank == 0:
                scalar_slots[out] = fl.result_slot(element_type(t.dtype))
            else:
                dims = self.value_dims(out)
                struct, data = self.output_buffer(out, t, dims, space, reused)
                results[out] = struct
                writes[out] = Access(data, self.broadcast_strides(dims), t)
        # reductions that only feed other outputs still need a place: none do, by fusion
        self.emit_loop(space, reads, writes, accumulators, scalar_slots)
        for acc in accumulators:
            if acc.wide:
                results[acc.inst] = self.narrowed(acc)
        for v, slot in scalar_slots.items():
            if v not in results:
                results[v] = fl.load_scalar(slot, self.ttype(v))
        out_values = []
        for v in self.outputs:
            if v in results:
                out_values.append(results[v])
            else:  # an input passed straight through
                value = self.scalar_operand(v) if self.ttype(v).rank == 0 else \
                    self.input_tensor(v).value
                fl.retain(value, self.ttype(v))
                out_values.append(value)
        return out_values

    def lower_in_two(self, later: set[Instruction]) -> list[ll.Value]:
        """A region whose instructions use its own reductions: the part before them, then the
        rest (another region) with what the first part computed as its inputs."""
        fl = self.fl
        first = [i for i in self.insts if i not in later]
        second = [i for i in self.insts if i in later]
        needed = list(dict.fromkeys(
            [v for i in second for v in direct_operands(i) if v in set(first)] +
            [o for o in self.outputs if o in set(first)]))
        tail_outputs = [o for o in self.outputs if o not in needed]
        # what the second part reads from the caller (its operands, the inputs it passes
        # through) must outlive the first part: no output of the first part takes it over
        later_reads = {self.inputs[v] for i in second for v in direct_operands(i)
                       if v in self.inputs}
        later_reads |= {self.inputs[v] for v in tail_outputs if v in self.inputs}
        head = Region(fl, first, self.type_of, self.inputs, needed)
        head.given = self.given
        head.kept = self.kept | later_reads
        head._taken = self.taken_inputs
        computed = dict(zip(needed, head.lower(), strict=True))
        tail = Region(fl, second, self.type_of, self.inputs, tail_outputs)
        tail.given = {**self.given, **computed}
        tail.kept = self.kept
        tail._taken = self.taken_inputs
        tail_values = dict(zip(tail.outputs, tail.lower(), strict=True))
        for v, value in computed.items():  # intermediates only the second part needed
            if v not in self.outputs:
                fl.release(value, self.ttype(v))
        return [computed[o] if o in computed else tail_values[o] for o in self.outputs]

    def region_operands(self) -> list[Value]:
        seen: dict[Value, None] = {}
        for inst in self.insts:
            for v in direct_operands(inst):
                if v not in self.members:
                    seen[v] = None
        return list(seen)

    def output_buffer(self, out: Value, t: TensorType, dims: list[ll.Value],
                      space: list[ll.Value], reused: list[tuple[Value, ll.Value]]
                      ) -> tuple[ll.Value, ll.Value]:
        """A buffer for an element-wise output: a dying input's own, when nobody else holds
        it, it has the same shape and the output spans the iteration space `space`
        (`reusable_input`), else a new one."""
        fl, b = self.fl, self.b
        candidate = self.reusable_input(out, t, space)
        if candidate is None:
            return fl.new_tensor(t, dims)
        caller = self.inputs[candidate]
        fl.take(caller)
        src = Tensor(b, fl.value(caller), fl.tensor_type(caller))
        unique = b.call(fl.rt.get("unique"), [src.buf])
        with b.if_else(unique) as (reuse, fresh):
            with reuse:
                reuse_block = b.block
            with fresh:
                struct, _ = fl.new_tensor(t, dims)
                fresh_block = b.block
        phi = b.phi(struct.type)
        phi.add_incoming(src.value, reuse_block)
        phi.add_incoming(struct, fresh_block)
        was_reused = b.phi(I1)
        was_reused.add_incoming(ll.Constant(I1, 1), reuse_block)
        was_reused.add_incoming(ll.Constant(I1, 0), fresh_block)
        reused.append((caller, was_reused))
        self.pending_releases.append((caller, was_reused))
        out_struct = make_tensor(b, b.extract_value(phi, 0), b.extract_value(phi, 1), dims)
        return out_struct, b.extract_value(phi, 1)

    def reusable_input(self, out: Value, t: TensorType, space: list[ll.Value]
                       ) -> Value | None:
        """An input whose buffer the output `out`, of type `t`, may take over, if any.

        The loop function declares its pointers `noalias` and reads an input and writes an
        output through two of them, so sharing a buffer must not be observable: the output
        spans the iteration space `space` (along a dimension where it has size 1 and the
        space more, the loop writes each of its elements at several iterations, and the
        second would read the input element that the first overwrote), and depends on the
        input (each iteration loads the element before it stores the value computed from
        it, an order no reordering may break). The input has the output's static shape and
        element size, is dying at the current instruction, owned, the value of no other
        parameter, and read by nothing after this loop nest (a later part of the region,
        or an output it passes straight through)."""
        if not t.is_static or t.rank != len(space):
            return None
        for size, d in zip(t.shape, space, strict=True):
            if size == 1 and not is_const(d, 1):
                return None  # broadcast along this dimension: elements written repeatedly
        dying = self.fl.dying(self.fl.current) if self.fl.current is not None else set()
        passed_through = {self.inputs[v] for v in self.outputs if v in self.inputs}
        parameters = Counter(self.inputs.values())
        sources = self.sources(out)
        for v, caller in self.inputs.items():
            if v in self.given or caller in self.taken_inputs or caller not in dying:
                continue
            if caller in self.kept or caller in passed_through or parameters[caller] > 1:
                continue
            if v not in sources or not self.fl.own.is_owned(caller):
                continue
            vt = self.type_of(v)
            if isinstance(vt, TensorType) and vt.shape == t.shape and element_size(
                    vt.dtype) == element_size(t.dtype):
                self.taken_inputs.add(caller)
                return v
        return None

    def sources(self, out: Value) -> set[Value]:
        """The values outside this part of the region that `out` is computed from."""
        found: set[Value] = set()
        stack, seen = [out], {out}
        while stack:
            for v in direct_operands(stack.pop()):  # type: ignore[arg-type]
                if v in seen:
                    continue
                seen.add(v)
                if v in self.members:
                    stack.append(v)
                else:
                    found.add(v)
        return found

    def accumulator(self, inst: Instruction, space: list[ll.Value],
                    results: dict[Value, ll.Value],
                    scalar_slots: dict[Value, ll.Value]) -> Accumulator:
        fl, b = self.fl, self.b
        t = self.ttype(inst)
        acc_t = TensorType(t.shape, accumulation_dtype(inst, t.dtype))
        wide = acc_t != t
        x_dims = self.value_dims(inst.x)
        rank = self.rank
        if inst.opcode == "reduce":
            reduced = set(range(rank) if inst.dims is None else inst.dims)
            out_dims = [d for k, d in enumerate(x_dims) if k not in reduced]
            kept = [k for k in range(rank) if k not in reduced]
            out_strides = self.contiguous(b, out_dims)
            strides = [i64(0)] * rank
            for k, s in zip(kept, out_strides, strict=True):
                strides[k] = s if not (is_const(x_dims[k]) and x_dims[k].constant == 1) else i64(0)
            init = self.scalar_operand(inst.init)
            if wide:
                init = b.fpext(init, scalar_type(acc_t.dtype))
        else:  # unbroadcast: reduce along the dimensions where `like` has size 1
            out_dims = self.value_dims(inst)
            strides = self.broadcast_strides(out_dims) if out_dims else [i64(0)] * rank
            init = ll.Constant(scalar_type(acc_t.dtype), 0)
        guards = []
        for k, (xd, sd) in enumerate(zip(x_dims, space, strict=True)):
            if is_const(xd) and is_const(sd) and xd.constant == sd.constant:
                continue
            if is_const(xd) and xd.constant != 1:
                continue
            guards.append((k, b.icmp_signed("!=", xd, i64(1))))
        if t.rank == 0:
            slot = fl.result_slot(element_type(acc_t.dtype))
            fl.store_scalar(init, slot)
            scalar_slots[inst] = slot
            access = Access(slot, [i64(0)] * rank, acc_t, guards)
            return Accumulator(inst, access, inst.x, wide)
        struct, data = fl.new_tensor(acc_t, out_dims)
        self.fill(data, acc_t, out_dims, init)
        access = Access(data, strides, acc_t, guards)
        if not wide:
            results[inst] = struct
            return Accumulator(inst, access, inst.x)
        return Accumulator(inst, access, inst.x, True, struct, out_dims)

    def narrowed(self, acc: Accumulator) -> ll.Value:
        """A wide accumulator's values rounded, once, to the reduction's type: a scalar, or
        a new tensor (the accumulation buffer is released)."""
        fl, b = self.fl, self.b
        t = self.ttype(acc.inst)
        wide_t = acc.access.dtype_type
        to = scalar_type(t.dtype)
        if acc.wide_tensor is None:
            return rounded(b, fl.load_scalar(acc.access.data, wide_t), to)
        struct, data = fl.new_tensor(t, acc.dims)
        with for_range(b, i64(0), self.count(acc.dims), "narrow") as i:
            v = fl.load_scalar(gep(b, element_type(wide_t.dtype), acc.access.data, i), wide_t)
            fl.store_scalar(rounded(b, v, to), gep(b, element_type(t.dtype), data, i))
        fl.release(acc.wide_tensor, wide_t)
        return struct

    def fill(self, data: ll.Value, t: TensorType, dims: list[ll.Value], value: ll.Value) -> None:
        b = self.b
        n = self.count(dims)
        with for_range(b, i64(0), n, "fill") as i:
            self.fl.store_scalar(value, gep(b, element_type(t.dtype), data, i))

    def count(self, dims: Sequence[ll.Value]) -> ll.Value:
        out: ll.Value = i64(1)
        for d in dims:
            out = mul(self.b, out, d)
        return out

    def scalar_operand(self, v: Value) -> ll.Value:
        if v in self.given:
            return self.given[v]
        if isinstance(v, LiteralValue):
            return self.fl.value(v)
        return self.fl.value(self.inputs.get(v, v))

    # ------------------------------------------------------------ the scalar case

    def lower_scalar(self) -> list[ll.Value]:
        fl, b = self.fl, self.b
        env: dict[Value, ll.Value] = {}

        def get(v: Value) -> ll.Value:
            if v in env:
                return env[v]
            return self.scalar_operand(v)

        emitter = self.emitter(b)
        for inst in self.insts:
            if inst.has_trait("reduction"):
                # a reduction of a scalar: init ⊕ x
                x = get(inst.x)
                start = get(inst.init) if inst.opcode == "reduce" else ll.Constant(x.type, 0)
                env[inst] = combine(emitter, combinator_name(inst), start, x, False)
                continue
            env[inst] = rule_of(inst)(emitter, inst, [get(v) for v in direct_operands(inst)])
        for site, cond in emitter.flags:
            with b.if_then(cond, likely=False):
                fl.rt.fail(b, fl.ctx, site)
        outs = []
        for v in self.outputs:
            if v in env:
                outs.append(env[v])
            else:
                outs.append(self.scalar_operand(v))
        return outs

    def emitter(self, b: ll.IRBuilder) -> ScalarEmitter:
        fl = self.fl

        def dtype_of(v: Value) -> object:
            return self.ttype(v).dtype

        return ScalarEmitter(b, fl.unit.math.call, lambda inst, msg: fl.site(msg, inst),
                             dtype_of)  # type: ignore[arg-type]

    # ------------------------------------------------------------ the loop nest

    def emit_loop(self, space: list[ll.Value], reads: dict[Value, Access],
                  writes: dict[Value, Access], accumulators: list[Accumulator],
                  scalar_slots: dict[Value, ll.Value]) -> None:
        fl, b = self.fl, self.b
        accesses = [*reads.values(), *writes.values(), *(a.access for a in accumulators)]
        space, stride_lists = collapse(space, [a.strides for a in accesses],
                                       [bool(a.guards) for a in accesses])
        for a, s in zip(accesses, stride_lists, strict=True):
            a.strides = s
        loop = LoopFunction(fl, self)
        loop.build(space, reads, writes, accumulators, scalar_slots)
        args = [fl.ctx, *loop.captured_values]
        # split over threads when the region is large enough to pay for the hand-off: chunks
        # of the outermost dimension write disjoint elements, except into an accumulator that
        # does not move along it (a reduction along it, a full one included), which each
        # chunk folds into a private partial result instead
        shared = [a for a in accumulators
                  if not (is_const(a.access.strides[0]) and a.access.strides[0].constant != 0)]
        only_reductions = all(v in {a.inst for a in accumulators} for v in scalar_slots)
        if fl.unit.threads > 1 and shared and only_reductions:
            status = self.emit_partial_split(loop, args, space, shared)
        elif fl.unit.threads > 1 and not shared and not scalar_slots:
            work = mul(b, self.count(space), i64(max(1, len(self.insts))))
            status_slot = fl.result_slot(ll.IntType(32))
            with b.if_else(b.icmp_signed(">=", work, i64(PARALLEL_MIN))) as (split, direct):
                with split:
                    b.store(loop.run_parallel(b, args, space[0]), status_slot)
                with direct:
                    b.store(b.call(loop.fn, [*args, i64(0), space[0]]), status_slot)
            status = b.load(status_slot, typ=ll.IntType(32))
        else:
            status = b.call(loop.fn, [*args, i64(0), space[0]])
        fl.check(status)
        for caller, was_reused in self.pending_releases:
            with b.if_then(b.not_(was_reused)):
                fl.release(fl.value(caller), fl.type(caller))

    def emit_partial_split(self, loop: LoopFunction, args: list[ll.Value],
                           space: list[ll.Value], shared: list[Accumulator]) -> ll.Value:
        """Run a loop nest whose `shared` accumulators do not move along the outermost
        dimension: over the pool when large, each chunk folding into a private partial
        result (a buffer of chunks × output-size elements per accumulator), then the partials
        combined into the accumulators here in chunk order, so that the result depends only
        on the thread count it was built for. Returns the loop's status."""
        fl, b = self.fl, self.b
        outer = space[0]
        count = self.count(space)
        most = i64(fl.unit.threads * CHUNKS_PER_THREAD)
        chunks = b.select(b.icmp_signed("<", outer, most), outer, most)
        sizes = [self.count(self.value_dims(a.inst)) for a in shared]
        partial_total: ll.Value = i64(0)
        for n in sizes:
            partial_total = add(b, partial_total, n)
        partial_total = b.mul(partial_total, chunks)
        work = mul(b, count, i64(max(1, len(self.insts))))
        # combining the partials (serial) may cost at most a quarter of the loop's elements
        worth = b.and_(b.icmp_signed(">=", work, i64(PARALLEL_MIN)),
                       b.icmp_signed("<=", b.mul(partial_total, i64(4)), count))
        status_slot = fl.result_slot(ll.IntType(32))
        with b.if_else(worth) as (split, direct):
            with split:
                buffers = []
                for a, n in zip(shared, sizes, strict=True):
                    t = TensorType((None,), a.access.dtype_type.dtype)
                    struct, data = fl.new_tensor(t, [b.mul(chunks, n)])
                    buffers.append((struct, t, data))
                parts = [(a, data, n) for a, (_, _, data), n in zip(shared, buffers, sizes,
                                                                     strict=True)]
                b.store(loop.run_partials(b, args, outer, chunks, parts), status_slot)
                self.combine_partials(chunks, parts)
                for struct, t, _ in buffers:
                    fl.release(struct, t)
            with direct:
                b.store(b.call(loop.fn, [*args, i64(0), outer]), status_slot)
        return b.load(status_slot, typ=ll.IntType(32))

    def combine_partials(self, chunks: ll.Value,
                         parts: list[tuple[Accumulator, ll.Value, ll.Value]]) -> None:
        """accumulator[j] ⊕= partial[c][j] for c = 0, 1, … in order (not reassociated)."""
        fl, b = self.fl, self.b
        emitter = self.emitter(b)
        for acc, data, n in parts:
            t = acc.access.dtype_type
            et = element_type(t.dtype)
            name = combinator_name(acc.inst)
            with for_range(b, i64(0), chunks, "chunk") as c:
                base = b.mul(c, n)
                with for_range(b, i64(0), n, "part") as j:
                    dst = gep(b, et, acc.access.data, j)
                    src = gep(b, et, data, b.add(base, j))
                    total = combine(emitter, name, fl.load_scalar(dst, t),
                                    fl.load_scalar(src, t), False)
                    fl.store_scalar(total, dst)

    @property
    def pending_releases(self) -> list[tuple[Value, ll.Value]]:
        if not hasattr(self, "_pending"):
            self._pending: list[tuple[Value, ll.Value]] = []
        return self._pending

    @property
    def taken_inputs(self) -> set[Value]:
        if not hasattr(self, "_taken"):
            self._taken: set[Value] = set()
        return self._taken


def literal_shape(v: LiteralValue, type_of: Callable[[Value], Type]
                  ) -> tuple[int | None, ...]:
    """The sizes of a tensor literal, `None` where only run time knows them. Its type may
    leave sizes to its elements — `<1: <1 x f32>, 2: <1 x f32>>: <_ x 1 x f32>`, what
    folding a `shapeCast` to `_ x 1` leaves —; the element count fixes the first, the
    elements' own sizes, where they agree, the others (`None` where they do not: building
    the literal fails)."""
    t = type_of(v)
    assert isinstance(t, TensorType)
    lit = v.literal
    if t.is_static or not (isinstance(lit, AggregateLiteral) and lit.kind == "tensor"):
        return t.shape
    rows: list[tuple[int | None, ...]] = []
    for e in lit.elements:
        et = type_of(e)
        if not isinstance(et, TensorType) or et.rank != t.rank - 1:
            return t.shape
        rows.append(literal_shape(e, type_of) if isinstance(e, LiteralValue) else et.shape)
    inner = list(t.shape[1:])
    for k, declared in enumerate(inner):
        found = {row[k] for row in rows}
        if declared is None and len(found) == 1:
            inner[k] = found.pop()
    return (len(lit.elements), *inner)


def is_splat(v: Value) -> bool:
    """A literal of one value everywhere (`1.0: <3 x f32>`, `zero: T`): a constant in the
    loop body rather than a buffer to read."""
    return isinstance(v, LiteralValue) and (isinstance(v.literal, ScalarLiteral) or (
        isinstance(v.literal, KeywordLiteral) and v.literal.keyword != "null"))


def collapse(space: list[ll.Value], strides: list[list[ll.Value]], guarded: list[bool]
             ) -> tuple[list[ll.Value], list[list[ll.Value]]]:
    """Merge adjacent dimensions k, k+1 that every access walks as one (stride_k =
    stride_{k+1}·size_{k+1}, all constants)."""
    if any(guarded):
        return space, strides
    dims = list(space)
    lists = [list(s) for s in strides]
    k = len(dims) - 2
    while k >= 0:
        inner = dims[k + 1]
        ok = is_const(inner) and all(
            is_const(s[k]) and is_const(s[k + 1]) and s[k].constant == s[k + 1].constant *
            inner.constant for s in lists)
        if ok and is_const(dims[k]):
            dims[k] = i64(dims[k].constant * inner.constant)
            del dims[k + 1]
            for s in lists:
                s[k] = s[k + 1]
                del s[k + 1]
        k -= 1
    return dims, lists


class LoopFunction:
    """The loop nest of a region, as a function of the values it captures."""

    def __init__(self, fl: FunctionLowering, region: Region) -> None:
        self.fl = fl
        self.region = region
        self.captured: dict[int, int] = {}  # id(caller value) → parameter index
        self.captured_values: list[ll.Value] = []
        self.param_types: list[ll.Type] = []
        self.noalias: list[bool] = []

    def capture(self, v: ll.Value, pointer: bool = False) -> int:
        key = id(v)
        index = self.captured.get(key)
        if index is None:
            index = self.captured[key] = len(self.captured_values)
            self.captured_values.append(v)
            self.param_types.append(v.type)
            self.noalias.append(pointer)
        return index

    def build(self, space: list[ll.Value], reads: dict[Value, Access],
              writes: dict[Value, Access], accumulators: list[Accumulator],
              scalar_slots: dict[Value, ll.Value]) -> None:
        fl, region = self.fl, self.region
        # decide the parameters first: everything the loop reads from the caller
        plan_values: list[ll.Value] = []

        def note(v: ll.Value, pointer: bool = False) -> None:
            if not isinstance(v, ll.Constant):
                self.capture(v, pointer)
                plan_values.append(v)

        for a in [*reads.values(), *writes.values(), *(x.access for x in accumulators)]:
            note(a.data, True)
            for s in a.strides:
                note(s)
            for _, g in a.guards:
                note(g)
        for v in scalar_slots.values():
            note(v, True)
        for d in space:
            note(d)
        scalars: dict[Value, ll.Value] = {}
        for v in region.region_operands():
            if region.ttype(v).rank == 0 or isinstance(v, LiteralValue):
                value = region.scalar_operand(v) if region.ttype(v).rank == 0 else None
                if value is not None:
                    scalars[v] = value
                    note(value)
        ftype = ll.FunctionType(ll.IntType(32), [PTR, *self.param_types, I64, I64])
        self.fn = fn = ll.Function(fl.unit.llmod, ftype, fl.unit.fresh("dlvm.kernel"))
        fn.linkage = "internal"
        fn.attributes.add("noinline")  # one loop nest per kernel, optimized once
        for k, pointer in enumerate(self.noalias):
            if pointer:
                fn.args[k + 1].add_attribute("noalias")
        b = ll.IRBuilder(fn.append_basic_block("entry"))
        ctx = fn.args[0]
        begin, end = fn.args[-2], fn.args[-1]

        def inner(v: ll.Value) -> ll.Value:
            if isinstance(v, ll.Constant):
                return v
            return fn.args[1 + self.captured[id(v)]]

        flag_slots = {}
        emitter = region.emitter(b)
        entry_b = b
        acc_slots: dict[Instruction, ll.Value] = {}
        rank = len(space)
        register = {acc.inst: is_const(acc.access.strides[-1], 0) and not acc.access.guards
                    for acc in accumulators}
        for acc in accumulators:
            if register[acc.inst]:
                acc_slots[acc.inst] = alloca(entry_b, scalar_type(acc.access.dtype_type.dtype))

        offsets_by_level: list[dict[int, ll.Value]] = []

        def level(k: int, offsets: dict[int, ll.Value], indices: list[ll.Value]) -> None:
            start = begin if k == 0 else i64(0)
            stop = end if k == 0 else inner(space[k])
            if k == rank - 1:
                for acc in accumulators:
                    if register[acc.inst]:
                        t = acc.access.dtype_type.dtype
                        b.store(const_of(scalar_type(t), identity(combinator_name(acc.inst), t)),
                                acc_slots[acc.inst])
            with for_range(b, start, stop, f"i{k}") as i:
                here = {}
                for aid, off in offsets.items():
                    a = all_accesses[aid]
                    here[aid] = add(b, off, mul(b, i, inner(a.strides[k])))
                if k < rank - 1:
                    level(k + 1, here, [*indices, i])
                else:
                    body(here, [*indices, i])
            if k == rank - 1:
                for acc in accumulators:
                    if register[acc.inst]:
                        aid = access_ids[id(acc.access)]
                        ptr = gep(b, element_type(acc.access.dtype_type.dtype),
                                  inner(acc.access.data), offsets[aid])
                        old = load(ptr, acc.access.dtype_type)
                        partial = b.load(acc_slots[acc.inst], typ=old.type)
                        store(combine(emitter, combinator_name(acc.inst), old, partial), ptr)

        def load(ptr: ll.Value, t: TensorType) -> ll.Value:
            v = b.load(ptr, typ=element_type(t.dtype))
            return b.trunc(v, I1) if t.dtype.is_bool else v

        def store(v: ll.Value, ptr: ll.Value) -> None:
            if v.type == I1:
                v = b.zext(v, I8)
            b.store(v, ptr)

        def body(offsets: dict[int, ll.Value], indices: list[ll.Value]) -> None:
            env: dict[Value, ll.Value] = {}
            for v, a in reads.items():
                aid = access_ids[id(a)]
                env[v] = load(gep(b, element_type(a.dtype_type.dtype), inner(a.data),
                                  offsets[aid]), a.dtype_type)
            for v, value in scalars.items():
                env[v] = inner(value)

            def get(v: Value) -> ll.Value:
                found = env.get(v)
                if found is not None:
                    return found
                if isinstance(v, LiteralValue):
                    return literal_scalar(v)
                raise AssertionError(f"{v!r} has no value in the loop")

            for inst in region.insts:
                if inst.has_trait("reduction"):
                    continue
                env[inst] = rule_of(inst)(emitter, inst, [get(v) for v in direct_operands(inst)])
            for v, a in writes.items():
                aid = access_ids[id(a)]
                store(get(v), gep(b, element_type(a.dtype_type.dtype), inner(a.data),
                                  offsets[aid]))
            for v, slot in scalar_slots.items():
                if v in env and v not in {acc.inst for acc in accumulators}:
                    store(get(v), inner(slot))
            for acc in accumulators:
                a = acc.access
                x = get(acc.source)
                t = a.dtype_type.dtype
                if acc.wide:
                    x = b.fpext(x, scalar_type(t))
                name = combinator_name(acc.inst)
                valid = None
                for k, g in a.guards:
                    ok = b.or_(inner(g), b.icmp_signed("==", indices[k], i64(0)))
                    valid = ok if valid is None else b.and_(valid, ok)
                if valid is not None:
                    x = b.select(valid, x, const_of(x.type, identity(name, t)))
                if register[acc.inst]:
                    slot = acc_slots[acc.inst]
                    b.store(combine(emitter, name, b.load(slot, typ=x.type), x), slot)
                else:
                    aid = access_ids[id(a)]
                    ptr = gep(b, element_type(t), inner(a.data), offsets[aid])
                    store(combine(emitter, name, load(ptr, a.dtype_type), x), ptr)
            for site, cond in emitter.flags:
                slot = flag_slots.get(site)
                if slot is None:
                    with entry_builder_at_start(fn) as eb:
                        slot = flag_slots[site] = alloca(eb, I1)
                        eb.store(ll.Constant(I1, 0), slot)
                b.store(b.or_(b.load(slot, typ=I1), cond), slot)
            emitter.flags.clear()

        def literal_scalar(v: LiteralValue) -> ll.Value:
            t = region.ttype(v)
            lit = v.literal
            return scalar_constant(t, lit.value if isinstance(lit, ScalarLiteral) else 0)

        all_accesses = [*reads.values(), *writes.values(), *(x.access for x in accumulators)]
        access_ids = {id(a): k for k, a in enumerate(all_accesses)}
        del offsets_by_level
        level(0, {k: i64(0) for k in range(len(all_accesses))}, [])
        for site, slot in flag_slots.items():
            with b.if_then(b.load(slot, typ=I1), likely=False):
                fl.rt.fail(b, ctx, site)
        b.ret(i32(0))


    def run_parallel(self, b: ll.IRBuilder, args: list[ll.Value], outer: ll.Value
                     ) -> ll.Value:
        """Call the loop nest through the thread pool: a closure of its arguments, and a
        task function that unpacks them."""
        fl = self.fl
        closure = fl.result_slot(ll.ArrayType(I64, len(args)))
        for k, v in enumerate(args):
            b.store(v, gep(b, I64, closure, i64(k)))
        task = self.task_function(args)
        threads = fl.unit.threads
        chunks = b.select(b.icmp_signed("<", outer, i64(threads * CHUNKS_PER_THREAD)),
                          outer, i64(threads * CHUNKS_PER_THREAD))
        parallel_for = declare(fl.unit.llmod, "dlvm_parallel_for", ll.IntType(32),
                               [PTR, PTR, I64, I64, I64])
        return b.call(parallel_for, [task, closure, outer, chunks, i64(threads)])

    def run_partials(self, b: ll.IRBuilder, args: list[ll.Value], outer: ll.Value,
                     chunks: ll.Value, parts: list[tuple[Accumulator, ll.Value, ll.Value]]
                     ) -> ll.Value:
        """Call the loop nest through the pool as `chunks` tasks of one chunk each (task c
        runs the outer indices [c·outer/chunks, (c+1)·outer/chunks)), each folding the
        accumulators of `parts` (accumulator, partial buffer, output size) into its own
        slice c of the partial buffers, which it first sets to the combinator's identity.
        The chunk index is the pool's index, not derived from a range, so the pool may run
        any number of them per call."""
        fl = self.fl
        values = [*args, outer, chunks, *(p for _, p, _ in parts), *(n for _, _, n in parts)]
        closure = fl.result_slot(ll.ArrayType(I64, len(values)))
        for k, v in enumerate(values):
            b.store(v, gep(b, I64, closure, i64(k)))
        task = self.partial_task(args, parts)
        parallel_for = declare(fl.unit.llmod, "dlvm_parallel_for", ll.IntType(32),
                               [PTR, PTR, I64, I64, I64])
        return b.call(parallel_for, [task, closure, chunks, chunks, i64(fl.unit.threads)])

    def partial_task(self, args: list[ll.Value],
                     parts: list[tuple[Accumulator, ll.Value, ll.Value]]) -> ll.Function:
        i32t = ll.IntType(32)
        fn = ll.Function(self.fl.unit.llmod, ll.FunctionType(i32t, [PTR, I64, I64]),
                         self.fn.name + ".partials")
        fn.linkage = "internal"
        b = ll.IRBuilder(fn.append_basic_block("entry"))
        closure, first, last = fn.args

        def field(k: int, t: ll.Type) -> ll.Value:
            return b.load(gep(b, I64, closure, i64(k)), typ=t)

        values = [field(k, v.type) for k, v in enumerate(args)]
        outer, chunks = field(len(args), I64), field(len(args) + 1, I64)
        datas = [field(len(args) + 2 + k, PTR) for k in range(len(parts))]
        sizes = [field(len(args) + 2 + len(parts) + k, I64) for k in range(len(parts))]
        status_slot = alloca(b, i32t)
        b.store(i32(0), status_slot)
        with for_range(b, first, last, "chunk") as c:
            lo = b.sdiv(b.mul(c, outer), chunks)
            hi = b.sdiv(b.mul(b.add(c, i64(1)), outer), chunks)
            call_args = list(values)
            for (acc, _, _), data, n in zip(parts, datas, sizes, strict=True):
                dtype = acc.access.dtype_type.dtype
                et = element_type(dtype)
                mine = gep(b, et, data, b.mul(c, n))
                unit = const_of(scalar_type(dtype), identity(combinator_name(acc.inst), dtype))
                if unit.type == I1:
                    unit = ll.Constant(I8, int(unit.constant))
                with for_range(b, i64(0), n, "identity") as j:
                    b.store(unit, gep(b, et, mine, j))
                call_args[1 + self.captured[id(acc.access.data)]] = mine
            status = b.call(self.fn, [*call_args, lo, hi])
            old = b.load(status_slot, typ=i32t)
            b.store(b.select(b.icmp_signed("!=", old, i32(0)), old, status), status_slot)
        b.ret(b.load(status_slot, typ=i32t))
        return fn

    def task_function(self, args: list[ll.Value]) -> ll.Function:
        fn = ll.Function(self.fl.unit.llmod, ll.FunctionType(ll.IntType(32), [PTR, I64, I64]),
                         self.fn.name + ".task")
        fn.linkage = "internal"
        b = ll.IRBuilder(fn.append_basic_block("entry"))
        closure, begin, end = fn.args
        values = [b.load(gep(b, I64, closure, i64(k)), typ=v.type) for k, v in enumerate(args)]
        b.ret(b.call(self.fn, [*values, begin, end]))
        return fn


class entry_builder_at_start:
    """A builder at the start of a function's entry block, for allocas."""

    def __init__(self, fn: ll.Function) -> None:
        self.b = ll.IRBuilder(fn.blocks[0])
        self.b.position_at_start(fn.blocks[0])

    def __enter__(self) -> ll.IRBuilder:
        return self.b

    def __exit__(self, *exc: object) -> None:
        pass


def const_of(t: ll.Type, v: float | int | bool) -> ll.Constant:
    if isinstance(t, ll.IntType):
        return ll.Constant(t, int(v))
    return ll.Constant(t, float(v))


