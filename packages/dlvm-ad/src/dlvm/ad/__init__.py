"""DLVM's algorithmic differentiation: derivative declarations become ordinary IR functions.

    import dlvm.ir as ir
    ir.run_passes(module, "differentiation")      # or differentiate(module)

Rules are tables keyed by opcode (`ADJOINTS`, `TANGENTS`); see `dlvm.ad.rules`. A rule
receives an `AdjointContext` or a `TangentContext` (both `RuleContext`s).
"""

from __future__ import annotations

from dlvm.ir import Module

from .context import AdjointContext, RuleContext, TangentContext
from .differentiation import Differentiation, Generator
from .reverse import DifferentiationError
from .rules import ADJOINTS, NONDIFFERENTIABLE, TANGENTS, adjoint, load_builtin_rules, tangent


def differentiate(module: Module, *, checkpoint: bool = False) -> int:
    """Generate every derivative declaration's body in place; returns how many."""
    count = Generator(module, checkpoint).run()
    if module.stage == "raw":
        module.stage = "optimizable"
    return count


__all__ = ["ADJOINTS", "NONDIFFERENTIABLE", "TANGENTS", "AdjointContext", "Differentiation",
           "DifferentiationError", "Generator", "RuleContext", "TangentContext", "adjoint",
           "differentiate", "load_builtin_rules", "tangent"]
