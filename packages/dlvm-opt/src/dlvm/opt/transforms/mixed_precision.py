"""`mixed-precision{dtype=bf16}`: compute differentiated functions in bf16 (or f16), their
parameters and results staying f32.

    [gradient @loss wrt 0]                      %w16 = dataTypeCast %w: <4 x 3 x f32> to bf16
    func @loss: (<4 x 3 x f32>, …) -> f32   →   %s16 = dot %x16: …, %w16: <4 x 3 x bf16>
                                                %s = dataTypeCast %s16: … to f32

Every function that a gradient declaration differentiates, and every function those call,
has its f32 arithmetic (element-wise, reductions, `dot`, `convolve`, built-in calls) rewritten
to the lower precision (`dlvm.ir.precision.recompute`): its f32 operands converted before,
its f32 result converted back after. Run before `differentiation`, the gradient follows: the
adjoint of a conversion converts back, so the parameters' gradients arrive in f32, and a
training step that updates f32 parameters with them keeps f32 master weights (what this pass
leaves alone: the step function itself is not differentiated). `algebra-simplify` then
removes the conversions that cancel (bf16 → f32 → bf16).
"""

from __future__ import annotations

from dataclasses import dataclass

from dlvm.ir import DerivativeDecl, Function, Module, Pass, PassContext
from dlvm.ir.diagnostics import DlvmError
from dlvm.ir.precision import recompute
from dlvm.ir.types import BF16, F16, F32

from .inline import direct_callees

LOWER = {"bf16": BF16, "f16": F16}


@dataclass
class MixedPrecision(Pass):
    name = "mixed-precision"
    summary = "compute differentiated functions in bf16 or f16, keeping their f32 signatures"

    dtype: str = "bf16"

    def __post_init__(self) -> None:
        if self.dtype not in LOWER:
            raise DlvmError(f"pass 'mixed-precision': dtype must be 'bf16' or 'f16', found "
                            f"'{self.dtype}'")

    def run(self, module: Module, ctx: PassContext) -> bool:
        low = LOWER[self.dtype]
        changed = 0
        for fn in differentiated(module):
            changed += recompute(fn, module, F32,
                                 lambda inst: None if inst.opcode == "random" else low)
        ctx.stat(f"instructions computed in {self.dtype}", changed)
        return changed > 0


def differentiated(module: Module) -> list[Function]:
    """The functions that gradient declarations differentiate, and those they call (with
    bodies, in this module), each once."""
    todo = [fn.declaration.of for fn in module.functions
            if isinstance(fn.declaration, DerivativeDecl)]
    seen: dict[Function, None] = {}
    while todo:
        fn = todo.pop()
        if isinstance(fn, Function) and fn not in seen and fn.blocks and fn.module is module:
            seen[fn] = None
            todo.extend(direct_callees(fn))
    return list(seen)
