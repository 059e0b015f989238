"""`loss-scaling{function=train_step}`: dynamic loss scaling for a training step whose
gradients are computed in f16.

f16 holds magnitudes from 6·10⁻⁸ to 65504: the small gradients of a typical loss flush to
zero. The cure (Micikevicius et al., 2018) multiplies the loss by a large factor S before
the backward pass and divides the gradients by S after it, in f32; a step whose gradients
overflowed (inf or NaN) is skipped, and the driver halves S, growing it again after a run of
good steps. This pass writes the in-IR half of that; `dlvm run` (`train.precision = "f16"`)
keeps S and adjusts it.

    func @train_step: (P…, X, Y, f32) -> (P…, f32)
        %g = apply @dloss(%p…, %x, %y)                    (a gradient declaration)
  becomes
    func @train_step: (P…, X, Y, f32, f32) -> (P…, f32, bool)
        %g' = apply @dloss.scaled(%p…, %x, %y, %scale)    (the same gradient, seedable:
        %g  = (extract k of %g' ÷ %scale …, kept …)        the seed S is where the f16
        %finite = every gradient element is finite         backward pass starts)
        return (select %new, %old by %finite …, %loss, %finite)

The step's results but the last (the loss) must be the new values of its first arguments,
as `dlvm run` requires of `train.step`: when a gradient is not finite they are returned
unchanged — parameters and optimizer state alike —, and the last result is whether the step
was taken. Run it before `differentiation`, on a step that calls its gradients in its entry
block.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from dlvm.ir import (
    AggregateLiteral,
    Builder,
    DerivativeDecl,
    Function,
    Instruction,
    Module,
    Pass,
    PassContext,
    Value,
    replace_all_uses,
)
from dlvm.ir.core import Argument
from dlvm.ir.derivatives import gradient_type
from dlvm.ir.diagnostics import DlvmError
from dlvm.ir.types import BOOL, F32, FunctionType, TensorType, TupleType, Type

SCALAR_F32 = TensorType((), F32)
SCALED = ".scaled"  # the seedable twin of gradient declaration @g is @g.scaled


@dataclass
class LossScaling(Pass):
    name = "loss-scaling"
    summary = ("scale a training step's gradients by a run-time factor and skip its update "
               "when they are not finite")

    function: str = "train_step"

    def run(self, module: Module, ctx: PassContext) -> bool:
        step = module.function(self.function)
        if step is None or not step.blocks:
            raise self.error(f"no function '@{self.function}' with a body")
        calls = [inst for inst in step.entry.instructions if gradient_called(inst)]
        if not calls:
            raise self.error(f"'@{self.function}' calls no gradient declaration in its "
                             "entry block")
        scale = Argument(SCALAR_F32, "loss_scale")
        step.entry.add_argument(scale)
        b = Builder(module)
        gradients: list[Instruction] = []
        for call in calls:
            gradients += self.scale_call(b, module, call, scale)
        for declared in {call.callee for call in calls}:
            if not mentioned(module, declared):  # nothing left for differentiation to write
                module.remove_function(declared)
        b.position_after(gradients[-1])  # (a `divide`, after every scaled call's)
        finite = all_finite(b, gradients)
        self.keep_old_values_unless(b, module, step, finite)
        ctx.stat("gradient calls scaled", len(calls))
        return True

    def error(self, message: str) -> DlvmError:
        return DlvmError(f"pass 'loss-scaling': {message}")

    def scale_call(self, b: Builder, module: Module, call: Instruction, scale: Value
                   ) -> list[Instruction]:
        """The call made seedable with seed `scale`, its gradients divided by it; returns
        the divided gradients (the call's tuple is rebuilt from them for its users)."""
        declared = call.callee
        assert isinstance(declared, Function) and isinstance(declared.declaration,
                                                             DerivativeDecl)
        twin = seedable_twin(module, declared)
        seed_type = module.resolve(twin.type_.arguments[-1])
        if not (isinstance(seed_type, TensorType) and seed_type.rank == 0 and
                seed_type.dtype.is_float):
            raise self.error(f"'@{declared.name}' differentiates a result of type "
                             f"'{seed_type}': the loss must be a float scalar")
        b.position_after(call)
        seed = scale if seed_type.dtype == F32 else b.dataTypeCast(scale, seed_type.dtype)
        scaled = b.call(twin, [*call.args, seed])
        results = module.resolve(declared.type_.result)  # the twin's, aliases kept inside
        assert isinstance(results, TupleType)
        count = len(results.elements) - len(declared.declaration.keeping)
        parts: list[Value] = []
        gradients: list[Instruction] = []
        for k, t in enumerate(results.elements):
            part: Value = b.extract(scaled, [k])
            if k < count:
                part = self.divided(b, module, part, t, scale, gradients)
            parts.append(part)
        rebuilt = b.literal(AggregateLiteral("tuple", tuple(parts)), declared.type_.result)
        replace_all_uses(call.block.function, call, rebuilt)
        call.erase()
        return gradients

    def divided(self, b: Builder, module: Module, part: Value, t: Type, scale: Value,
                gradients: list[Instruction]) -> Value:
        """`part` ÷ `scale`, element by element through a tuple of gradients (a model's
        parameters passed as one tuple), each divided tensor added to `gradients`."""
        r = module.resolve(t)
        if isinstance(r, TupleType):
            elements = [self.divided(b, module, b.extract(part, [k]), e, scale, gradients)
                        for k, e in enumerate(r.elements)]
            return b.literal(AggregateLiteral("tuple", tuple(elements)), t)
        if not (isinstance(r, TensorType) and r.dtype.is_float):
            raise self.error(f"a gradient of type '{t}': loss scaling needs float tensors")
        divided = b.divide(part, scale if r.dtype == F32 else b.dataTypeCast(scale, r.dtype))
        gradients.append(divided)
        return divided

    def keep_old_values_unless(self, b: Builder, module: Module, step: Function,
                               finite: Value) -> None:
        """Each return gives back its step's first arguments unchanged unless `finite`, and
        `finite` as a new last result."""
        result = module.resolve(step.type_.result)
        elements = result.elements if isinstance(result, TupleType) else (result,)
        args = step.entry.arguments
        if len(elements) < 2 or any(module.resolve(elements[k]) != module.resolve(args[k].type)
                                    for k in range(len(elements) - 1)):
            raise self.error(f"'@{step.name}' must return the new values of its first "
                             f"arguments, then the loss: it returns '{step.type_.result}'")
        for block in step.blocks:
            ret = block.instructions[-1] if block.instructions else None
            if ret is None or ret.opcode != "return":
                continue
            b.position_before(ret)
            value = ret.fields["value"]
            parts = [b.extract(value, [k]) for k in range(len(elements))]
            kept = [b.select(new, old, finite) for new, old in zip(parts[:-1], args, strict=False)]
            out = b.tuple([*kept, parts[-1], finite])
            ret.replace_uses({value: out})
        step.type = FunctionType((*step.type_.arguments, SCALAR_F32),
                                 TupleType((*elements, TensorType((), BOOL))))


def gradient_called(inst: Instruction) -> bool:
    callee = inst.fields.get("callee") if inst.opcode == "apply" else None
    return (isinstance(callee, Function) and isinstance(callee.declaration, DerivativeDecl)
            and callee.declaration.kind == "gradient" and not callee.declaration.seedable)


def seedable_twin(module: Module, declared: Function) -> Function:
    """`[gradient @f … seedable]` beside `declared` (`[gradient @f …]`), made once."""
    name = f"{declared.name}{SCALED}"
    found = module.function(name)
    if found is not None:
        return found
    decl = declared.declaration
    assert isinstance(decl, DerivativeDecl) and isinstance(decl.of, Function)
    twin = DerivativeDecl(decl.kind, decl.of, decl.from_index, decl.wrt, decl.keeping,
                          seedable=True, location=decl.location)
    return Builder(module).declare(name, gradient_type(twin, decl.of.type_, module), twin)


def mentioned(module: Module, fn: Value) -> bool:
    """Whether an instruction of `module` uses `fn` (calls it, passes it, holds it)."""
    return any(fn in inst.operands for f in module.functions for inst in f.instructions())


def all_finite(b: Builder, gradients: Sequence[Value]) -> Value:
    """Whether every element of every gradient is finite: their sum is (an inf or a NaN
    anywhere makes it ±inf or NaN; finite f32 gradients large enough to overflow it are no
    use either). -inf < sum < inf is false for NaN."""
    total: Value | None = None
    for g in gradients:
        t = g.type
        assert isinstance(t, TensorType)
        s = g if t.rank == 0 else b.reduce(g, "add", 0.0, None)
        if t.dtype != F32:
            s = b.dataTypeCast(s, F32)
        total = s if total is None else b.add(total, s)
    assert total is not None
    below = b.lessThan(total, float("inf"))
    above = b.greaterThan(total, float("-inf"))
    return b.and_(below, above)
