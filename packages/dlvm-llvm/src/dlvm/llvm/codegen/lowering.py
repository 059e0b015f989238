"""The complete opcode table `LOWER` and the rules `function.py` reads from `RULES`:
importing this module imports every module that adds DLVM's own rules (`function.py`
defines the table; `regions.py` and the `lower_*` modules fill it). Whatever lowers a
function imports the table from here."""

from __future__ import annotations

from dlvm.ir import LiteralValue

from . import lower_control, lower_convolution, lower_tensor, regions
from .fallback import lower_fallback
from .function import LOWER, RULES, FunctionLowering
from .lower_aggregate import BUILTIN_RULES, enum_ref, materialize
from .lower_memory import global_pointer


def lower_literal(fl: FunctionLowering, v: LiteralValue) -> object:
    return materialize(fl, v.literal, fl.layout.resolve(v.type))


RULES.literal = lower_literal  # type: ignore[assignment]
RULES.global_pointer = global_pointer
RULES.enum_refs = enum_ref
RULES.fallback = lower_fallback
RULES.kernel_call = regions.lower_kernel_call
RULES.native_builtins = BUILTIN_RULES

del regions, lower_control, lower_convolution, lower_tensor

__all__ = ["LOWER", "RULES"]
