"""Adjoint and tangent rules of aggregates and calls: literal, extract, insert, apply."""

from __future__ import annotations

from dlvm.ir import AggregateLiteral, Instruction, LiteralValue, Value
from dlvm.ir.types import TensorType, TupleType

from ..context import AdjointContext, TangentContext
from . import adjoint, tangent


def _elements(v: Value) -> tuple[Value, ...]:
    lit = v.literal if isinstance(v, LiteralValue) else None
    return lit.elements if isinstance(lit, AggregateLiteral) and lit.kind == "tuple" else ()


def _is_tensor_index(c: AdjointContext | TangentContext, inst: Instruction) -> bool:
    return isinstance(c.module.resolve(inst.value.type if inst.opcode == "extract"
                                       else inst.destination.type), TensorType)


@adjoint("literal")
def _literal(c: AdjointContext, inst: Instruction, dy: Value) -> list[tuple[Value, Value]]:
    # literal (a, b, …): da = dy.0, db = dy.1, …  (scalar and tensor literals are constants)
    return [(e, c.b.extract(dy, keys=[i])) for i, e in enumerate(_elements(inst.value))]


@tangent("literal")
def _literal_t(c: TangentContext, inst: Instruction) -> Value | None:
    # t(literal (a, b, …)) = literal (ta, tb, …), zeros where a tangent is absent
    elements = _elements(inst.value)
    if not any(c.tangent(e) is not None for e in elements):
        return None
    out = []
    for e in elements:
        t = c.tangent(e)
        out.append(t if t is not None else
                   (c.zeros(e) if not isinstance(e, LiteralValue) else _literal_zero(c, e)))
    return LiteralValue(AggregateLiteral("tuple", tuple(out)),
                        TupleType(tuple(v.type for v in out)))


def _literal_zero(c: TangentContext, e: LiteralValue) -> Value:
    from dlvm.ir.builder import constant

    t = c.module.resolve(e.type)
    assert isinstance(t, TensorType)
    return constant(0.0 if t.dtype.is_float else 0, t)


@adjoint("extract")
def _extract(c: AdjointContext, inst: Instruction, dy: Value) -> list[tuple[Value, Value]]:
    # y = x[k]: dx = zeros(x) with dx[k] = dy
    keys = [c.primal(k) if isinstance(k, Value) else k for k in inst.keys]
    return [(inst.value, c.element_adjoint(inst.value, keys, dy))]


@tangent("extract")
def _extract_t(c: TangentContext, inst: Instruction) -> Value | None:
    # t(x[k]) = tx[k]
    tx = c.tangent(inst.value)
    if tx is None:
        return None
    keys = [c.primal(k) if isinstance(k, Value) else k for k in inst.keys]
    return c.b.extract(tx, keys=keys)


@adjoint("insert")
def _insert(c: AdjointContext, inst: Instruction, dy: Value) -> list[tuple[Value, Value]]:
    # y = x with y[k] = e: de = dy[k], dx = dy with dy[k] = 0
    keys = [c.primal(k) if isinstance(k, Value) else k for k in inst.keys]
    de = c.b.extract(dy, keys=keys)
    dx = c.b.create("insert", c.zeros(inst.element), dy, keys)
    return [(inst.element, de), (inst.destination, dx)]


@tangent("insert")
def _insert_t(c: TangentContext, inst: Instruction) -> Value | None:
    # t(insert e into x at k) = insert te into tx at k
    te, tx = c.tangent(inst.element), c.tangent(inst.destination)
    if te is None and tx is None:
        return None
    keys = [c.primal(k) if isinstance(k, Value) else k for k in inst.keys]
    te = te if te is not None else c.zeros(inst.element)
    tx = tx if tx is not None else c.zeros(inst.destination)
    return c.b.create("insert", te, tx, keys)


@adjoint("apply")
def _apply(c: AdjointContext, inst: Instruction, dy: Value) -> list[tuple[Value, Value]]:
    # y = g(x…): dx… = ∇g(x…)ᵀ·dy, by g's generated (seedable) gradient
    return c.call_adjoint(inst, dy)


@tangent("apply")
def _apply_t(c: TangentContext, inst: Instruction) -> Value | None:
    # t(g(x…)) = J_g(x…)·t(x…), by g's generated tangent
    return c.call_tangent(inst)
