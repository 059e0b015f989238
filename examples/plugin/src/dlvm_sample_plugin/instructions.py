"""The instruction `softsign`: `%y = softsign %x: T`, y = x / (1 + |x|) element-wise.

One `define` call is the whole instruction: its syntax (the format `"$x"`: one operand),
its type rule, its traits and its numpy semantics, which the `interp` target runs.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

import dlvm.ir as ir


def softsign_type(inst: ir.Instruction, module: ir.Module | None) -> ir.Type:
    """The result has the operand's type, which must be a floating-point tensor."""
    t = module.resolve(inst.x.type) if module is not None else inst.x.type
    if not isinstance(t, ir.TensorType) or not t.dtype.is_float:
        raise ir.TypeRuleError(f"operand must be a floating-point tensor, found '{inst.x.type}'")
    return t


def softsign_value(inst: ir.Instruction, frame: Any) -> np.ndarray:
    """What the interpreter computes: `frame.get(v)` is the array of operand `v`."""
    x = frame.get(inst.x)
    return np.asarray(x / (1 + np.abs(x)), dtype=x.dtype)


SOFTSIGN = ir.define(
    "softsign", "$x", softsign_type,
    traits=("pure", "elementwise"),  # no side effects; maps elements independently
    evaluate=softsign_value,
    summary="x / (1 + |x|), element-wise",
    category="activation",
    # its native code for dlvm-llvm's targets, imported when they first compile softsign
    llvm_rules="dlvm_sample_plugin.lowering",
)

if importlib.util.find_spec("dlvm.ad") is not None:  # dlvm-ad is optional for this plugin
    from . import derivatives  # noqa: F401
