"""dlvm-llvm's scalar rule for `softsign`, attached to it by opcode.

softsign(x) = x / (1 + |x|) for one element: the kernels of `llvm-cpu` and `nvptx` are
built from this rule, so `softsign` fuses with its neighbours into one loop (on a GPU, one
kernel) instead of calling back into Python for its numpy semantics. The operations are the
interpreter's, in its order (|x|, 1 + |x|, the division), so both round alike.
"""

from __future__ import annotations

from llvmlite import ir as ll

from dlvm.ir import Instruction
from dlvm.llvm import ScalarEmitter, scalar_rule


@scalar_rule("softsign")
def softsign_element(e: ScalarEmitter, inst: Instruction, args: list[ll.Value]) -> ll.Value:
    """x / (1 + |x|), for x of any float type (the type rule admits only floats)."""
    (x,) = args
    one = ll.Constant(x.type, 1.0)
    return e.b.fdiv(x, e.b.fadd(one, e.intrinsic("fabs", x)))
