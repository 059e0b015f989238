"""Terminators: `branch`, `conditional`, `branchEnum`, `return`.

Their type rules check only their own operands; the verifier checks branch
arguments against the target blocks and returned values against the
function, which need the whole function in view.
"""

from __future__ import annotations

from typing import Any

from ..core import Instruction, Module
from ..opdef import define
from ..runtime import EnumValue, ExecutionError, Jump, Return
from ..types import VOID, EnumDecl, NominalType, Type
from .common import fail, resolved, tensor_type


def _void(inst: Instruction, m: Module | None) -> Type:
    return VOID


def _jump(target: Any, frame: Any) -> Jump:
    return Jump(target.block, [frame.get(a) for a in target.args])


define("branch", "$destination:target", _void, traits=("terminator",),
       evaluate=lambda inst, f: _jump(inst.destination, f), category="control flow",
       summary="jump to a block, passing its arguments")


def _conditional_rule(inst: Instruction, m: Module | None) -> Type:
    t = tensor_type(inst.condition, m, "condition")
    if not (t.is_scalar and t.dtype.is_bool):
        fail(f"condition must be a bool scalar, found '{inst.condition.type}'")
    return VOID


define("conditional", "$condition then $then:target else $else:target", _conditional_rule,
       traits=("terminator",),
       evaluate=lambda inst, f: _jump(inst.then if bool(f.get(inst.condition)) else
                                      inst.fields["else"], f),
       category="control flow", summary="jump to one of two blocks by a bool condition")


def _branch_enum_rule(inst: Instruction, m: Module | None) -> Type:
    t = resolved(inst.value.type, m)
    decl = m.type_decls.get(t.name) if isinstance(t, NominalType) and m is not None else None
    if not isinstance(decl, EnumDecl):
        fail(f"branchEnum needs an enum value, found '{inst.value.type}'")
    seen: set[str] = set()
    for case, _ in inst.cases:
        if decl.case_types(case) is None:
            fail(f"'{inst.value.type}' has no case '?{case}'")
        if case in seen:
            fail(f"case '?{case}' is listed twice")
        seen.add(case)
    return VOID


def _branch_enum_eval(inst: Instruction, frame: Any) -> Jump:
    v = frame.get(inst.value)
    if not isinstance(v, EnumValue):
        raise ExecutionError("branchEnum on an undefined enum value")
    for case, target in inst.cases:
        if case == v.case:
            return Jump(target.block, list(v.values))
    raise ExecutionError(f"branchEnum has no block for case '?{v.case}'")


define("branchEnum", "$value $cases:enum_cases", _branch_enum_rule, traits=("terminator",),
       evaluate=_branch_enum_eval, category="control flow",
       summary="jump by an enum's case, passing its associated values")

define("return", "[$value]", _void, traits=("terminator",),
       evaluate=lambda inst, f: Return(None if inst.value is None else f.get(inst.value)),
       category="control flow", summary="return from the function")
